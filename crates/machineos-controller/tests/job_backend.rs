//! The Job builder backend through the controller, with the test API server's Job controller
//! and kubelet simulated (`machineos_kubetest::hooks::JobController`, chosen outcomes): the
//! controller does no image work (nothing pushed before the pod runs), the ephemeral objects
//! (merged pull Secret, the inputs and MachineConfig ConfigMaps, the Job running `machineos
//! build`) with their labels and owner, the digest read from the pod's termination message
//! and recorded only once the registry serves it (a digest it lacks fails the build),
//! `status.builder.job`, the clean-up after success, everything kept after a failure with
//! the log tail in the condition, a Job also when nothing needs RUN (any node, every
//! architecture), a restarted controller re-attaching to a running Job instead of starting
//! another, a controller killed before the Job exists (the restarted one finishes the same
//! build), a newer config interrupting a running Job (deleted, its pods with it), a rebuild
//! under slow garbage collection (dependents held by a finalizer) and under the test API
//! server's asynchronous collector (the rebuild's inputs are its own: a controller that
//! adopted the old ones fails it), and an interrupted build restarted under the same name
//! under the asynchronous collector; and the OpenShift Build backend's native Build that
//! cannot run yet, its reason on the pool. Real pods (`machineos build` and buildah) are
//! in `job_buildah.rs`.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use machineos_controller::kinds;
use machineos_kubetest::control::{Fault, RequestMatch};
use machineos_kubetest::hooks::{JobController, JobOutcome, run_job};
use serde_json::{Value, json};

const EPHEMERAL: &str = "machineconfiguration.openshift.io/ephemeral-build-object";
const FAKE_DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn job_mosc(push: &str, containerfile: Option<&str>) -> Value {
    let mut m = machine_os_config(push);
    m["spec"]["imageBuilder"]["imageBuilderType"] = json!("Job");
    if let Some(c) = containerfile {
        m["spec"]["containerFile"] = json!([{"containerfileArch": "NoArch", "content": c}]);
    }
    m
}

async fn setup_job(c: &Cluster, push: &str, containerfile: Option<&str>) {
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    c.apply(&kinds::machine_os_config(), job_mosc(push, containerfile))
        .await;
}

async fn ephemeral<K>(c: &Cluster) -> Vec<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(c.client.clone(), NS)
        .list(&ListParams::default().labels(EPHEMERAL))
        .await
        .unwrap()
        .items
}

/// An image in the push repository under `tag`, as a build pod would have pushed it (the
/// base, copied); its digest.
async fn pushed_image(c: &Cluster, tag: &str) -> String {
    let host = c.registry.host();
    let opts = machineos_testkit::CopyOptions::new()
        .src_registry(&c.registry)
        .dest_registry(&c.registry);
    let (src, dest) = (
        format!("docker://{host}/base/os:1"),
        format!("docker://{host}/machineos/worker:{tag}"),
    );
    tokio::task::spawn_blocking(move || machineos_testkit::skopeo_copy(&src, &dest, &opts))
        .await
        .unwrap()
        .unwrap();
    let link = c.registry.storage_dir().join(format!(
        "docker/registry/v2/repositories/machineos/worker/_manifests/tags/{tag}/current/link"
    ));
    std::fs::read_to_string(link).unwrap().trim().to_owned()
}

/// The container's arguments of a Job, and the value of its env `name`.
fn args_of(job: &Job) -> Vec<String> {
    job.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap()
}

fn env_of(job: &Job, name: &str) -> Option<String> {
    job.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

/// The tags of `repo` in the registry's storage.
fn tags(c: &Cluster, repo: &str) -> Vec<String> {
    let dir = c.registry.storage_dir().join(format!(
        "docker/registry/v2/repositories/{repo}/_manifests/tags"
    ));
    std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

async fn until_phase(c: &Cluster, want: &str) -> DynamicObject {
    c.until(&kinds::build(), &format!("a build {want}"), |l| {
        l.iter().any(|b| phase(b) == want)
    })
    .await
    .into_iter()
    .find(|b| phase(b) == want)
    .unwrap()
}

async fn until_no_ephemeral(c: &Cluster) {
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let (jobs, cms, secrets) = (
            ephemeral::<Job>(c).await,
            ephemeral::<ConfigMap>(c).await,
            ephemeral::<Secret>(c).await,
        );
        if jobs.is_empty() && cms.is_empty() && secrets.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ephemeral objects left: jobs {:?} configmaps {:?} secrets {:?}",
            jobs.iter().map(|j| j.name_any()).collect::<Vec<_>>(),
            cms.iter().map(|j| j.name_any()).collect::<Vec<_>>(),
            secrets.iter().map(|j| j.name_any()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The first build Job for which `pred` holds, waited for.
async fn until_job(c: &Cluster, what: &str, pred: impl Fn(&Job) -> bool) -> Job {
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        if let Some(j) = ephemeral::<Job>(c).await.into_iter().find(&pred) {
            return j;
        }
        assert!(tokio::time::Instant::now() < deadline, "no Job {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The uids an object's owner references name.
fn owner_uids(o: &impl ResourceExt) -> Vec<String> {
    o.owner_references().iter().map(|r| r.uid.clone()).collect()
}

/// A Job build whose RUN step fails, run to `Failed` by a simulated Job controller; the
/// controller (still running) and the failed build.
async fn a_failed_build(c: &Cluster) -> (Running, DynamicObject) {
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    setup_job(c, &push, Some("FROM configs AS final\nRUN exit 7\n")).await;
    let failing = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Fail {
            exit_code: 7,
            message: "Error: building at STEP \"RUN exit 7\": exit status 7\n".into(),
        },
    );
    let ctl = c.controller().await;
    let failed = until_phase(c, "Failed").await;
    drop(failing);
    (ctl, failed)
}

/// Ask for a rebuild of the pool's build (the MCO's annotation on the MachineOSConfig).
async fn request_rebuild(c: &Cluster) {
    c.get(&kinds::machine_os_config())
        .patch(
            "worker",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {
                "machineconfiguration.openshift.io/rebuild": ""}}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_build_creates_its_objects_reads_the_digest_and_cleans_up() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let repo = format!("{}/machineos/worker", c.registry.host());
    setup_job(
        &c,
        &push,
        Some("FROM configs AS final\nRUN echo hi > /etc/hello\n"),
    )
    .await;
    // The Job controller is off until the objects are checked.
    let ctl = c.controller().await;
    let job = until_job(&c, "at all", |_| true).await;
    let build = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .unwrap();
    let name = build.name_any();
    assert_eq!(job.name_any(), format!("build-{name}"));
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("MachineOSBuild", name.as_str())
    );
    assert_eq!(owner.controller, Some(true));
    // The controller did no image work: nothing is in the push repository yet, and the
    // Job's pod builds everything — the rendered MachineConfig on the base by digest.
    assert!(
        tags(&c, "machineos/worker").is_empty(),
        "pushed before the pod ran: {:?}",
        tags(&c, "machineos/worker")
    );
    assert_eq!(
        job.annotations()["machineos.io/native-image"],
        format!("{repo}:{name}-native"),
        "the intermediate tag the pod pushes"
    );
    let args = args_of(&job);
    assert_eq!(args[..3], ["build", "--rendered", "$(MACHINECONFIG_DIR)"]);
    assert!(
        args.windows(2)
            .any(|w| w == ["--containerfile", "$(CONTAINERFILE)"])
    );
    assert!(args.windows(2).any(|w| w == ["--platform", "linux/amd64"]));
    assert!(
        env_of(&job, "BASE_IMAGE").is_some_and(|b| b.contains("@sha256:")),
        "the base by digest"
    );
    let node_selector = job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .node_selector
        .clone();
    assert_eq!(
        node_selector.unwrap()["kubernetes.io/arch"],
        "amd64",
        "RUN steps run on a node of the architecture"
    );
    // The inputs: the MachineOSConfig's Containerfile as written, the registry's CA, the
    // MachineConfig, the merged pull Secret (push credentials included).
    let cms = ephemeral::<ConfigMap>(&c).await;
    let cf = cms
        .iter()
        .find(|m| m.name_any() == format!("containerfile-{name}"))
        .expect("containerfile ConfigMap");
    let data = cf.data.as_ref().unwrap();
    let text = &data["Containerfile"];
    assert_eq!(text, "FROM configs AS final\nRUN echo hi > /etc/hello\n");
    assert!(data["registry-ca.pem"].contains("BEGIN CERTIFICATE"));
    assert!(cms.iter().any(|m| {
        m.name_any() == format!("mc-{name}")
            && m.data
                .as_ref()
                .unwrap()
                .contains_key("machineconfig.json.gz")
    }));
    let secrets = ephemeral::<Secret>(&c).await;
    assert_eq!(secrets.len(), 1, "one merged pull Secret");
    let merged: Value =
        serde_json::from_slice(&secrets[0].data.as_ref().unwrap()[".dockerconfigjson"].0).unwrap();
    assert!(
        merged["auths"][c.registry.host()].is_object(),
        "push credentials in the merged Secret: {merged}"
    );

    // The Job succeeds: its pod pushed the image, its termination message is the digest.
    let digest = pushed_image(&c, &name).await;
    let _jobs = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Succeed {
            message: format!("{digest}\n"),
        },
    );
    let done = until_phase(&c, "Succeeded").await;
    assert_eq!(
        done.data["status"]["digestedImagePushSpec"],
        json!(format!("{repo}@{digest}"))
    );
    assert_eq!(
        done.data["status"]["builder"],
        json!({"imageBuilderType": "Job", "job": {
            "group": "batch", "resource": "jobs", "namespace": NS, "name": format!("build-{name}"),
        }})
    );
    c.until_recorded(
        "the Job's image recorded",
        "currentImagePullSpec",
        &format!("{repo}@{digest}"),
    )
    .await;
    // Clean-up: the Job and its inputs go.
    until_no_ephemeral(&c).await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_fails_the_build_with_its_log_tail_and_keeps_its_objects() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    setup_job(&c, &push, Some("FROM configs AS final\nRUN exit 7\n")).await;
    let _jobs = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Fail {
            exit_code: 7,
            message:
                "STEP 2/2: RUN exit 7\nError: building at STEP \"RUN exit 7\": exit status 7\n"
                    .into(),
        },
    );
    let ctl = c.controller().await;
    let failed = until_phase(&c, "Failed").await;
    let message = condition_message(&failed, "Failed");
    assert!(message.contains("BackoffLimitExceeded"), "{message}");
    assert!(message.contains("exit status 7"), "{message}");
    // Kept for inspection.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ephemeral::<Job>(&c).await.len(), 1);
    assert_eq!(ephemeral::<ConfigMap>(&c).await.len(), 2);
    assert_eq!(ephemeral::<Secret>(&c).await.len(), 1);
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_run_still_builds_in_the_job_on_any_node_for_every_architecture() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let repo = format!("{}/machineos/worker", c.registry.host());
    setup_job(&c, &push, None).await;
    let ctl = c.controller().await;
    let job = until_job(&c, "at all", |_| true).await;
    let args = args_of(&job);
    assert!(!args.iter().any(|a| a == "--containerfile"), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--platform", "linux/amd64"]));
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert!(
        pod.node_selector.is_none(),
        "the native engine builds any architecture from any node"
    );
    assert!(
        !job.annotations().contains_key("machineos.io/native-image"),
        "no intermediate image without RUN steps"
    );
    let cf = ephemeral::<ConfigMap>(&c)
        .await
        .into_iter()
        .find(|m| m.name_any().starts_with("containerfile-"))
        .unwrap();
    assert!(
        !cf.data.unwrap_or_default().contains_key("Containerfile"),
        "no Containerfile to build"
    );
    assert!(tags(&c, "machineos/worker").is_empty());
    let name = job.name_any().trim_start_matches("build-").to_owned();
    let digest = pushed_image(&c, &name).await;
    let _jobs = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Succeed {
            message: digest.clone(),
        },
    );
    let done = until_phase(&c, "Succeeded").await;
    assert_eq!(
        done.data["status"]["digestedImagePushSpec"],
        json!(format!("{repo}@{digest}"))
    );
    until_no_ephemeral(&c).await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_the_registry_does_not_have_fails_the_build() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    setup_job(&c, &push, None).await;
    // The pod says it pushed an image the registry never received.
    let _jobs = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Succeed {
            message: format!("{FAKE_DIGEST}\n"),
        },
    );
    let ctl = c.controller().await;
    let failed = until_phase(&c, "Failed").await;
    let message = condition_message(&failed, "Failed");
    assert!(
        message.contains(FAKE_DIGEST) && message.contains("registry does not have"),
        "{message}"
    );
    assert!(
        failed.data["status"]["digestedImagePushSpec"].is_null(),
        "nothing recorded"
    );
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_follows_the_running_job() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let repo = format!("{}/machineos/worker", c.registry.host());
    setup_job(
        &c,
        &push,
        Some("FROM configs AS final\nRUN echo hi > /etc/hello\n"),
    )
    .await;
    let running = JobController::spawn(c.server.shared().clone(), JobOutcome::Run);
    let ctl = c.controller().await;
    let build = until_phase(&c, "Building").await;
    let job = until_job(&c, "running", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await;
    ctl.kill();
    running.stop();
    let digest = pushed_image(&c, &build.name_any()).await;
    let ctl = c.controller().await;
    // The new controller adopts the Job: no second one, the same uid.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let jobs = ephemeral::<Job>(&c).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].uid(), job.uid());
    assert_eq!(
        phase(&c.get(&kinds::build()).get(&build.name_any()).await.unwrap()),
        "Building"
    );
    run_job(
        c.server.shared(),
        NS,
        &job.name_any(),
        &JobOutcome::Succeed {
            message: digest.clone(),
        },
    )
    .unwrap();
    let done = until_phase(&c, "Succeeded").await;
    assert_eq!(done.name_any(), build.name_any());
    assert_eq!(
        done.data["status"]["digestedImagePushSpec"],
        json!(format!("{repo}@{digest}"))
    );
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_the_job_exists_and_restarted() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    // Every Job create fails: the first controller creates the inputs, and retries the Job
    // until it is killed.
    let jobs_path = format!("/apis/batch/v1/namespaces/{NS}/jobs");
    c.server.controls().fail_next(
        RequestMatch::path(&jobs_path).method("POST"),
        u32::MAX,
        Fault::internal_error(),
    );
    setup_job(
        &c,
        &push,
        Some("FROM configs AS final\nRUN echo hi > /etc/hello\n"),
    )
    .await;
    let ctl = c.controller().await;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while ephemeral::<ConfigMap>(&c).await.len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no inputs created");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let build = until_phase(&c, "Building").await.name_any();
    let inputs: Vec<Option<String>> = ephemeral::<ConfigMap>(&c)
        .await
        .iter()
        .map(|m| m.uid())
        .collect();
    ctl.kill();
    assert!(ephemeral::<Job>(&c).await.is_empty());
    c.server.controls().clear();
    // The restarted controller starts the build again: the inputs are found in place (the
    // same objects), one Job is created.
    let running = JobController::spawn(c.server.shared().clone(), JobOutcome::Run);
    let ctl = c.controller().await;
    let job = until_job(&c, "after the restart", |_| true).await;
    assert_eq!(job.name_any(), format!("build-{build}"));
    let after: Vec<Option<String>> = ephemeral::<ConfigMap>(&c)
        .await
        .iter()
        .map(|m| m.uid())
        .collect();
    assert_eq!(after, inputs, "the first run's inputs, kept");
    assert_eq!(ephemeral::<Secret>(&c).await.len(), 1);
    running.stop();
    let digest = pushed_image(&c, &build).await;
    run_job(
        c.server.shared(),
        NS,
        &job.name_any(),
        &JobOutcome::Succeed { message: digest },
    )
    .unwrap();
    let done = until_phase(&c, "Succeeded").await;
    assert_eq!(done.name_any(), build, "the same build");
    until_no_ephemeral(&c).await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_config_interrupts_the_running_job_and_deletes_it() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    setup_job(
        &c,
        &push,
        Some("FROM configs AS final\nRUN echo hi > /etc/hello\n"),
    )
    .await;
    let running = JobController::spawn(c.server.shared().clone(), JobOutcome::Run);
    let ctl = c.controller().await;
    let first = until_phase(&c, "Building").await.name_any();
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while ephemeral::<Job>(&c).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no Job");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "edited"),
    )
    .await;
    let interrupted = until_phase(&c, "Interrupted").await;
    assert_eq!(interrupted.name_any(), first);
    // The interrupted build's Job (and its pods) and inputs go; the new build has its own.
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let jobs: Vec<String> = ephemeral::<Job>(&c)
            .await
            .iter()
            .map(|j| j.name_any())
            .collect();
        let cms: Vec<String> = ephemeral::<ConfigMap>(&c)
            .await
            .iter()
            .map(|j| j.name_any())
            .collect();
        let old_left = jobs.iter().chain(&cms).any(|n| n.ends_with(&first));
        let new_job = jobs.iter().any(|n| !n.ends_with(&first));
        if !old_left && new_job {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "jobs {jobs:?} configmaps {cms:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(c.client.clone(), NS)
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name=build-{first}")))
        .await
        .unwrap()
        .items;
    assert!(pods.is_empty(), "the interrupted Job's pods are gone");
    running.stop();
    ctl.stop().await;
}

/// Add (or, with `None`, remove) a finalizer on every ephemeral object: their garbage
/// collection held back, as a real cluster's collector runs after the owner's DELETE.
async fn hold_ephemeral(c: &Cluster, finalizer: Option<&str>) {
    let patch = kube::api::Patch::Merge(
        json!({"metadata": {"finalizers": finalizer.map_or(vec![], |f| vec![f])}}),
    );
    let pp = kube::api::PatchParams::default();
    for j in ephemeral::<Job>(c).await {
        let api: Api<Job> = Api::namespaced(c.client.clone(), NS);
        api.patch(&j.name_any(), &pp, &patch).await.unwrap();
    }
    for m in ephemeral::<ConfigMap>(c).await {
        let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), NS);
        api.patch(&m.name_any(), &pp, &patch).await.unwrap();
    }
    for s in ephemeral::<Secret>(c).await {
        let api: Api<Secret> = Api::namespaced(c.client.clone(), NS);
        api.patch(&s.name_any(), &pp, &patch).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_under_slow_garbage_collection_never_adopts_the_failed_job() {
    let c = Cluster::start().await;
    let repo = format!("{}/machineos/worker", c.registry.host());
    let (ctl, failed) = a_failed_build(&c).await;
    let old_uid = failed.uid().unwrap();
    // The garbage collector is slow: the failed build's Job and inputs outlive it.
    hold_ephemeral(&c, Some("machineos.test/slow-gc")).await;
    let digest = pushed_image(&c, &failed.name_any()).await;
    let _succeeding = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Succeed {
            message: format!("{digest}\n"),
        },
    );
    // A rebuild: the same MachineOSBuild name, a new uid.
    request_rebuild(&c).await;
    let reborn = c
        .until(&kinds::build(), "the build recreated", |l| {
            l.iter().any(|b| b.uid().is_some_and(|u| u != old_uid))
        })
        .await
        .into_iter()
        .find(|b| b.uid().is_some_and(|u| u != old_uid))
        .unwrap();
    assert_eq!(reborn.name_any(), failed.name_any());
    // The old Failed Job is still there (being deleted): the new build is not failed by it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let now = c
        .get(&kinds::build())
        .get(&reborn.name_any())
        .await
        .unwrap();
    assert_ne!(
        phase(&now),
        "Failed",
        "the rebuild adopted the old Failed Job"
    );
    let jobs = ephemeral::<Job>(&c).await;
    assert!(
        jobs.iter()
            .all(|j| j.owner_references().iter().all(|o| o.uid == old_uid)),
        "no Job of the new build while the old one's name is taken"
    );
    assert!(
        jobs.iter().all(|j| j.metadata.deletion_timestamp.is_some()),
        "the old Job is being deleted"
    );
    // The collector catches up: the new build makes its own objects and succeeds.
    hold_ephemeral(&c, None).await;
    let done = until_phase(&c, "Succeeded").await;
    assert_eq!(done.uid(), reborn.uid());
    assert_eq!(
        done.data["status"]["digestedImagePushSpec"],
        json!(format!("{repo}@{digest}"))
    );
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_under_asynchronous_garbage_collection_builds_with_its_own_objects() {
    let c = Cluster::start().await;
    // kube-controller-manager's collector: dependents go seconds after their owner.
    let _gc = c
        .server
        .shared()
        .defer_garbage_collection(Duration::from_secs(3));
    let repo = format!("{}/machineos/worker", c.registry.host());
    let (ctl, failed) = a_failed_build(&c).await;
    let old_uid = failed.uid().unwrap();
    let digest = pushed_image(&c, &failed.name_any()).await;
    let running = JobController::spawn(c.server.shared().clone(), JobOutcome::Run);
    request_rebuild(&c).await;
    // When the new incarnation's Job exists, every input it reads is its own: the old
    // ones, which the collector has not reached, were deleted and made again, not adopted.
    let job = until_job(&c, "of the rebuild", |j| {
        owner_uids(j).iter().any(|u| *u != old_uid)
    })
    .await;
    let new_uid = owner_uids(&job).remove(0);
    let inputs: Vec<(String, Vec<String>)> = ephemeral::<ConfigMap>(&c)
        .await
        .iter()
        .map(|m| (m.name_any(), owner_uids(m)))
        .chain(
            ephemeral::<Secret>(&c)
                .await
                .iter()
                .map(|m| (m.name_any(), owner_uids(m))),
        )
        .collect();
    assert_eq!(inputs.len(), 3, "{inputs:?}");
    for (name, owners) in &inputs {
        assert_eq!(
            owners,
            &vec![new_uid.clone()],
            "{name} is the rebuild's own"
        );
    }
    running.stop();
    let _succeeding = JobController::spawn(
        c.server.shared().clone(),
        JobOutcome::Succeed {
            message: format!("{digest}\n"),
        },
    );
    // Polled: the new incarnation never fails (it would, adopting the old Failed Job the
    // collector has not removed yet) and succeeds with its own Job.
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let done = loop {
        let builds = c
            .get(&kinds::build())
            .list(&Default::default())
            .await
            .unwrap();
        if let Some(b) = builds
            .items
            .into_iter()
            .find(|b| b.uid().is_some_and(|u| u != old_uid))
        {
            assert_ne!(
                phase(&b),
                "Failed",
                "the rebuild adopted the old Failed Job"
            );
            if phase(&b) == "Succeeded" {
                break b;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no successful rebuild"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        done.name_any(),
        failed.name_any(),
        "the same name, a new uid"
    );
    assert_eq!(
        done.data["status"]["digestedImagePushSpec"],
        json!(format!("{repo}@{digest}"))
    );
    until_no_ephemeral(&c).await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_build_restarted_under_asynchronous_garbage_collection_uses_its_own_objects()
{
    let c = Cluster::start().await;
    let _gc = c
        .server
        .shared()
        .defer_garbage_collection(Duration::from_secs(3));
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    setup_job(
        &c,
        &push,
        Some("FROM configs AS final\nRUN echo hi > /etc/hello\n"),
    )
    .await;
    let running = JobController::spawn(c.server.shared().clone(), JobOutcome::Run);
    let ctl = c.controller().await;
    let first = until_phase(&c, "Building").await;
    let (name, old_uid) = (first.name_any(), first.uid().unwrap());
    // Another configuration interrupts it; going back restarts it under the same name.
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "edited"),
    )
    .await;
    until_phase(&c, "Interrupted").await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let (new_uid, job) = loop {
        let builds = c
            .get(&kinds::build())
            .list(&Default::default())
            .await
            .unwrap();
        let reborn = builds
            .items
            .iter()
            .find(|b| b.name_any() == name && b.uid().is_some_and(|u| u != old_uid))
            .and_then(|b| b.uid());
        if let Some(uid) = reborn
            && let Some(j) = ephemeral::<Job>(&c)
                .await
                .into_iter()
                .find(|j| j.owner_references().iter().any(|o| o.uid == uid))
        {
            break (uid, j);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no restarted build with its own Job"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Everything of that name the restarted build reads is its own.
    for (kind, owners) in ephemeral::<ConfigMap>(&c)
        .await
        .iter()
        .filter(|m| m.name_any().ends_with(&name))
        .map(|m| ("ConfigMap", m.owner_references().to_vec()))
        .chain(
            ephemeral::<Secret>(&c)
                .await
                .iter()
                .filter(|m| m.name_any().ends_with(&name))
                .map(|m| ("Secret", m.owner_references().to_vec())),
        )
    {
        assert!(
            owners.iter().all(|o| o.uid == new_uid),
            "a {kind} of the old incarnation: {owners:?}"
        );
    }
    running.stop();
    let digest = pushed_image(&c, &name).await;
    run_job(
        c.server.shared(),
        NS,
        &job.name_any(),
        &JobOutcome::Succeed { message: digest },
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let b = c.get(&kinds::build()).get(&name).await.unwrap();
        assert_eq!(b.uid().as_deref(), Some(new_uid.as_str()));
        if phase(&b) == "Succeeded" {
            break;
        }
        assert_ne!(phase(&b), "Failed");
        assert!(tokio::time::Instant::now() < deadline, "not Succeeded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ctl.stop().await;
}

/// The OpenShift Build backend's native Build that cannot run yet (no build controller
/// here to run it; its status written as OpenShift's writes a Build it cannot create a pod
/// for): the pool says why the build waits, as it does for a RUN-step Build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_build_that_cannot_run_shows_why_on_the_pool() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "hello\n").await;
    let mut m = machine_os_config(&push);
    m["spec"]["imageBuilder"]["imageBuilderType"] = json!("OpenShiftBuild");
    c.apply(&kinds::machine_os_config(), m).await;
    let mut opts = c.options();
    opts.openshift_build = Some(true);
    let ctl = c.controller_with(opts).await;
    let builds = c
        .until(&kinds::openshift_build(), "the native Build", |l| {
            l.iter().any(|b| b.name_any().starts_with("native-"))
        })
        .await;
    let native = builds
        .iter()
        .find(|b| b.name_any().starts_with("native-"))
        .unwrap()
        .name_any();
    let api: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), NS, &kinds::openshift_build());
    api.patch_status(
        &native,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {
            "phase": "New",
            "reason": "CannotCreateBuildPod",
            "message": "Failed creating build pod.",
        }})),
    )
    .await
    .unwrap();
    c.until(&kinds::pool(), "the pool saying why", |l| {
        l.iter().any(|p| {
            p.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|cond| {
                    cond["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("CannotCreateBuildPod"))
                })
        })
    })
    .await;
    ctl.stop().await;
}
