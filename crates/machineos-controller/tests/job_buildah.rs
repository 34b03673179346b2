//! The Job and OpenShift Build backends with real builds: the test API server's pod executor
//! runs the build Job's pod on this machine (the ConfigMaps and Secrets as files at their
//! mount paths, `machineos build` — this workspace's binary, see
//! `machineos_testkit::binary` — with the local buildah), and its build executor plays
//! OpenShift's build controller for Builds; both push to the loopback TLS + htpasswd
//! registry. The base is machineos-synth's stub base (a shell, and rpm-ostree/rpm/dnf/ostree
//! stubs that record what they are asked), the extensions image its stub repository.
//!
//! * One MachineOSConfig (extensions `usbguard`, kernelType `realtime`, a user
//!   Containerfile) built by the Job and the OpenShift Build backends (the latter in two
//!   Builds: the native Build running `machineos build --native-only` in a small builder
//!   image made of this workspace's binary, then the RUN steps): their trees are equal, and
//!   each differs from the native engine's image of the same configuration (the native
//!   stage, `<build>-native`) by exactly what the RUN steps did (the stub's records, the
//!   tmpfiles workaround, `/etc/hello`); the Native backend refuses it, naming what needs
//!   RUN. Digests and times are printed side by side (for the notes; never asserted).
//! * A failing RUN step: the Job retries up to its `backoffLimit`, then the build is Failed
//!   with buildah's last lines.
//! * An evicted build pod: the Job's next pod builds, the build succeeds.
//! * A pool of amd64 and arm64 nodes with nothing to RUN: one pod builds the index of both,
//!   and the controller records each architecture's manifest as the registry serves it;
//!   then the OpenShift Build backend's native Build alone gives the same index, digest for
//!   digest, with no second Build.
//!
//! Needs root, buildah, skopeo, umoci, docker-registry and busybox-static; fails (never
//! passes silently) without them.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use kube::ResourceExt;
use kube::api::DynamicObject;
use machineos_buildrequest::objects::names::build_name;
use machineos_buildrequest::objects::native_build_name;
use machineos_controller::kinds;
use machineos_image::{Layout, Platform};
use machineos_kubetest::buildexec::BuildExecutor;
use machineos_kubetest::podexec::{ExecSettings, PodExecutor};
use machineos_render::{Extension, KernelType};
use machineos_synth::{SynthSpec, write_extensions_image, write_image};
use machineos_testkit::{
    CopyOptions, EntryKind, RegistryOptions, TreeEntry, skopeo_copy, snapshot, umoci_unpack,
};
use serde_json::{Value, json};

/// The stub base and extensions image pushed; the osimageurl ConfigMap pointing at them.
async fn stub_images(c: &Cluster) {
    let dir = c.tmp.path().join("stub-images");
    let host = c.registry.host();
    let opts = CopyOptions::new().dest_registry(&c.registry);
    let (base, ext) = tokio::task::spawn_blocking(move || {
        let layout = Layout::create(&dir).unwrap();
        let spec = SynthSpec::example()
            .with_platform(Platform::host())
            .with_stub_tools()
            .expect("the stub base (busybox-static and bash installed)");
        layout
            .set_tag("base", &write_image(&layout, &spec).unwrap())
            .unwrap();
        let mut packages: Vec<&str> = Extension::ALL
            .iter()
            .flat_map(|e| e.packages().iter().copied())
            .collect();
        packages.extend(KernelType::Realtime.packages());
        let ext = write_extensions_image(&layout, &Platform::host(), &packages).unwrap();
        layout.set_tag("ext", &ext).unwrap();
        for (tag, name) in [("base", "stub/base:1"), ("ext", "stub/ext:1")] {
            skopeo_copy(
                &format!("oci:{}:{tag}", dir.display()),
                &format!("docker://{host}/{name}"),
                &opts,
            )
            .unwrap();
        }
        (
            format!("{host}/stub/base:1"),
            format!("{host}/stub/ext@{}", ext.digest),
        )
    })
    .await
    .unwrap();
    c.config_map(
        "machine-config-osimageurl",
        &[
            ("baseOSContainerImage", base.as_str()),
            ("baseOSExtensionsContainerImage", ext.as_str()),
        ],
    )
    .await;
}

/// The machineos image an OpenShift Build's native stage starts `FROM`, for these tests: a
/// small synthetic tree with this workspace's `machineos` binary (and the shared libraries
/// it loads) as `/usr/bin/machineos`, pushed as `machineos/builder:test`; its pullspec.
/// (The real image, `scripts/image.sh`, carries buildah and more; the native stage needs
/// only the binary.)
async fn builder_image(c: &Cluster) -> String {
    let dir = c.tmp.path().join("builder-image");
    let host = c.registry.host();
    let opts = CopyOptions::new().dest_registry(&c.registry);
    tokio::task::spawn_blocking(move || {
        let binary = machineos_testkit::binary::machineos_binary().unwrap();
        let mut spec = SynthSpec::example().plain().with_platform(Platform::host());
        spec.files = machineos_synth::MIN_FILES;
        spec.layers = 2;
        spec.extra_files =
            machineos_synth::host_program_files(&binary, "/usr/bin/machineos").unwrap();
        spec.extra_files.push(machineos_synth::ExtraFile {
            path: "/tmp/.keep".into(),
            contents: Vec::new(),
            mode: 0o644,
        });
        let layout = Layout::create(&dir).unwrap();
        layout
            .set_tag("builder", &write_image(&layout, &spec).unwrap())
            .unwrap();
        let name = format!("{host}/machineos/builder:test");
        skopeo_copy(
            &format!("oci:{}:builder", dir.display()),
            &format!("docker://{name}"),
            &opts,
        )
        .unwrap();
        name
    })
    .await
    .unwrap()
}

/// The controller with `image` (see [`builder_image`]) as its builder image.
async fn controller_with_builder(c: &Cluster, image: &str) -> Running {
    let mut opts = c.options();
    opts.builder_image = image.to_owned();
    c.controller_with(opts).await
}

/// A registries.conf marking the loopback registry insecure (TLS unverified) for buildah.
fn registries_conf(c: &Cluster) -> std::path::PathBuf {
    let path = c.tmp.path().join("registries.conf");
    std::fs::write(
        &path,
        format!(
            "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
            c.registry.host()
        ),
    )
    .unwrap();
    path
}

/// The pod and Build executors. Build pods find the `machineos` binary first in `PATH`, as
/// the machineos image has it in `/usr/bin`; the OpenShift Builds' buildah reads the
/// registry as insecure.
fn executors(c: &Cluster) -> (PodExecutor, BuildExecutor) {
    let conf = registries_conf(c);
    let binary = machineos_testkit::binary::machineos_binary().unwrap();
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        machineos_kubetest::podexec::plan::DEFAULT_PATH
    );
    let settings = ExecSettings::new(c.tmp.path().join("exec"))
        .env("PATH", path)
        .env("CONTAINERS_REGISTRIES_CONF", conf.display().to_string());
    (
        PodExecutor::spawn(c.server.shared().clone(), settings.clone()),
        BuildExecutor::spawn(c.server.shared().clone(), settings),
    )
}

fn mosc(push: &str, builder: &str, containerfile: &str) -> Value {
    let mut m = machine_os_config(push);
    m["spec"]["imageBuilder"]["imageBuilderType"] = json!(builder);
    m["spec"]["containerFile"] = json!([{"containerfileArch": "NoArch", "content": containerfile}]);
    m
}

async fn setup(c: &Cluster, push: &str, builder: &str, containerfile: &str) {
    stub_images(c).await;
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    c.apply(
        &kinds::machine_config(),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "99-worker-extensions",
                "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"extensions": ["usbguard"], "kernelType": "realtime"},
        }),
    )
    .await;
    c.apply(
        &kinds::machine_os_config(),
        mosc(push, builder, containerfile),
    )
    .await;
}

/// Wait until a build of `builder` is terminal; that build.
async fn until_built(c: &Cluster, builder: &str) -> DynamicObject {
    c.until(
        &kinds::build(),
        &format!("a {builder} build finished"),
        |l| {
            l.iter().any(|b| {
                b.data["status"]["builder"]["imageBuilderType"] == builder
                    && matches!(phase(b), "Succeeded" | "Failed")
            })
        },
    )
    .await
    .into_iter()
    .find(|b| {
        b.data["status"]["builder"]["imageBuilderType"] == builder
            && matches!(phase(b), "Succeeded" | "Failed")
    })
    .unwrap()
}

/// `image` (`repo@sha256:…`) unpacked with umoci and snapshotted, without buildah's empty
/// bind-mount targets.
async fn tree(c: &Cluster, image: &str, tag: &str) -> BTreeMap<String, TreeEntry> {
    let layout = c.tmp.path().join("pulled");
    let dest = c.tmp.path().join(format!("unpacked-{tag}"));
    let opts = CopyOptions::new().src_registry(&c.registry);
    let image = image.to_owned();
    let tag = tag.to_owned();
    tokio::task::spawn_blocking(move || {
        skopeo_copy(
            &format!("docker://{image}"),
            &format!("oci:{}:{tag}", layout.display()),
            &opts,
        )
        .unwrap();
        umoci_unpack(&layout, &tag, &dest).unwrap();
        let mut t = snapshot(&dest.join("rootfs"));
        for path in ["/etc/hostname", "/etc/resolv.conf"] {
            if let Some(e) = t.remove(path) {
                assert_eq!(e.size, 0, "{path} is buildah's empty mount target");
            }
        }
        t
    })
    .await
    .unwrap()
}

/// Paths that differ, with how.
fn changes(
    a: &BTreeMap<String, TreeEntry>,
    b: &BTreeMap<String, TreeEntry>,
) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    for (path, entry) in a {
        match b.get(path) {
            None => {
                out.insert(path.clone(), "only in the first");
            }
            Some(e) if e != entry && entry.kind != EntryKind::Dir => {
                out.insert(path.clone(), "changed");
            }
            Some(_) => {}
        }
    }
    for path in b.keys() {
        if !a.contains_key(path) {
            out.insert(path.clone(), "only in the second");
        }
    }
    out
}

/// The ephemeral build objects in the namespace (kind/name).
async fn ephemeral_objects(c: &Cluster) -> Vec<String> {
    let mut out = Vec::new();
    for ar in [
        kinds::job(),
        kinds::openshift_build(),
        kinds::config_map(),
        kinds::secret(),
    ] {
        let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(c.client.clone(), NS, &ar);
        let lp = kube::api::ListParams::default()
            .labels("machineconfiguration.openshift.io/ephemeral-build-object");
        for o in api.list(&lp).await.unwrap().items {
            out.push(format!("{}/{}", ar.kind, o.name_any()));
        }
    }
    out
}

fn seconds(b: &DynamicObject) -> i64 {
    let t = |k: &str| {
        b.data["status"][k]
            .as_str()
            .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map_or(0, |t| t.as_second())
    };
    t("buildEnd") - t("buildStart")
}

const USER_CONTAINERFILE: &str = "FROM configs AS final\nRUN echo hi > /etc/hello\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_the_build_and_the_native_backend_agree() {
    let c = Cluster::start_with(
        RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret-pw")
            .without_deletes(),
    )
    .await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let (pods, builds) = executors(&c);
    setup(&c, &push, "Job", USER_CONTAINERFILE).await;
    let ctl = controller_with_builder(&c, &builder_image(&c).await).await;

    let t = Instant::now();
    let job = until_built(&c, "Job").await;
    let job_wall = t.elapsed();
    assert_eq!(
        phase(&job),
        "Succeeded",
        "{}",
        condition_message(&job, "Failed")
    );
    assert_eq!(pods.runs().len(), 1, "one build pod");

    c.apply(
        &kinds::machine_os_config(),
        mosc(&push, "OpenShiftBuild", USER_CONTAINERFILE),
    )
    .await;
    let t = Instant::now();
    let build = until_built(&c, "OpenShiftBuild").await;
    let build_wall = t.elapsed();
    assert_eq!(
        phase(&build),
        "Succeeded",
        "{}",
        condition_message(&build, "Failed")
    );
    // The controller did no image work for it: the native stage ran as its own Build, in
    // the builder image, then the RUN steps' Build.
    let native_log = builds
        .log(NS, &native_build_name(&build.name_any()))
        .expect("the native Build ran");
    for want in [
        "--native-only: the RUN steps (rpm-ostree install usbguard, kernel swap to realtime) \
         are left to the next stage",
        "Build complete, no image push requested",
    ] {
        assert!(native_log.contains(want), "{want} in {native_log}");
    }
    assert!(builds.log(NS, &build_name(&build.name_any())).is_some());

    // The Native builder cannot run RUN steps: it refuses, naming what needs them.
    c.apply(
        &kinds::machine_os_config(),
        mosc(&push, "Native", USER_CONTAINERFILE),
    )
    .await;
    let refused = until_built(&c, "Native").await;
    assert_eq!(phase(&refused), "Failed");
    let message = condition_message(&refused, "Failed");
    for want in [
        "spec.extensions [usbguard]",
        "spec.kernelType realtime",
        "spec.containerFile",
        "Job or OpenShiftBuild",
    ] {
        assert!(message.contains(want), "{want} in {message}");
    }

    let image = |b: &DynamicObject| {
        b.data["status"]["digestedImagePushSpec"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (who, b, wall) in [
        ("Job", &job, job_wall),
        ("OpenShiftBuild", &build, build_wall),
    ] {
        eprintln!(
            "BACKEND {who:<15} {} build {} s, apply→Succeeded {:.1} s",
            image(b),
            seconds(b),
            wall.as_secs_f64()
        );
    }
    // The native engine's image of the same configuration: the Job's native stage (kept:
    // this registry refuses deletes).
    let native = format!(
        "{}/machineos/worker:{}-native",
        c.registry.host(),
        job.name_any()
    );
    eprintln!("BACKEND native stage    {native}");
    let (j, b, n) = (
        tree(&c, &image(&job), "job").await,
        tree(&c, &image(&build), "build").await,
        tree(&c, &native, "native").await,
    );
    assert!(
        changes(&j, &b).is_empty(),
        "the Job and the Build differ: {:?}",
        changes(&j, &b)
    );
    // The RUN steps, exactly: the stub's records of `rpm-ostree install usbguard` and the
    // kernel swap through `dnf -y shell`, the tmpfiles workaround, the user's file.
    let diff = changes(&n, &j);
    let unexpected: Vec<(&String, &&str)> = diff
        .iter()
        .filter(|(p, how)| {
            !(p.starts_with("/usr/share/machineos-stub/")
                || (**how == "only in the second"
                    && (p.as_str() == "/usr/lib/tmpfiles.d/usbguard_ipsec.conf"
                        || p.as_str() == "/etc/hello")))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "native → Job changes beyond the RUN steps: {unexpected:?}"
    );
    for want in [
        "/etc/hello",
        "/usr/share/machineos-stub/packages/usbguard",
        "/usr/share/machineos-stub/packages/kernel-rt-core",
    ] {
        assert!(j.contains_key(want), "{want} in the Job's image");
    }
    assert!(
        !j.contains_key("/usr/share/machineos-stub/packages/kernel-core"),
        "the default kernel was swapped out"
    );
    assert!(j.contains_key("/etc/motd") && n.contains_key("/etc/motd"));
    // Everything cleaned up after the successes.
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let left = ephemeral_objects(&c).await;
        if left.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "left: {left:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop((pods, builds));
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_step_fails_the_build_after_the_jobs_retries() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let (pods, _builds) = executors(&c);
    setup(
        &c,
        &push,
        "Job",
        "FROM configs AS final\nRUN echo the-step-broke >&2; exit 3\n",
    )
    .await;
    let mut opts = c.options();
    opts.job_backoff_limit = 1;
    let ctl = c.controller_with(opts).await;
    let failed = until_built(&c, "Job").await;
    assert_eq!(phase(&failed), "Failed");
    let message = condition_message(&failed, "Failed");
    assert!(message.contains("BackoffLimitExceeded"), "{message}");
    assert!(message.contains("the-step-broke"), "{message}");
    assert_eq!(pods.runs().len(), 2, "backoffLimit 1: two attempts");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_build_pod_is_retried_by_the_job() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let (pods, _builds) = executors(&c);
    pods.evict_next(1);
    setup(&c, &push, "Job", USER_CONTAINERFILE).await;
    let ctl = c.controller().await;
    let done = until_built(&c, "Job").await;
    assert_eq!(
        phase(&done),
        "Succeeded",
        "{}",
        condition_message(&done, "Failed")
    );
    let runs = pods.runs();
    assert_eq!(
        runs.len(),
        2,
        "the evicted pod and its replacement: {runs:?}"
    );
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_builds_the_index_of_every_architecture_of_the_pool_in_its_pod() {
    let c = Cluster::start_with_base(
        RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret-pw"),
        &["linux/amd64", "linux/arm64"],
    )
    .await;
    let (pods, builds) = executors(&c);
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    let mosc = |builder: &str| {
        let mut m = machine_os_config(&push);
        m["spec"]["imageBuilder"]["imageBuilderType"] = json!(builder);
        m["metadata"]["annotations"] = json!({"machineos.io/architectures": "amd64,arm64"});
        m
    };
    c.apply(&kinds::machine_os_config(), mosc("Job")).await;
    let builder = builder_image(&c).await;
    let ctl = controller_with_builder(&c, &builder).await;
    let built = until_built(&c, "Job").await;
    assert_eq!(
        phase(&built),
        "Succeeded",
        "{}",
        condition_message(&built, "Failed")
    );
    // One pod built both platforms: nothing needs RUN, so it ran on any node.
    let runs = pods.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let image = built.data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    // The controller recorded each architecture's manifest, as the registry serves them.
    let images = c
        .until(&kinds::image(), "a MachineOSImage", |l| l.len() == 1)
        .await;
    assert_eq!(images[0].data["spec"]["image"], image.as_str());
    let arches = images[0].data["spec"]["architectures"].as_array().unwrap();
    let index = c.raw_manifest(&image).await;
    let entries = index["manifests"].as_array().unwrap();
    let pairs = |v: &[Value], a: &str, d: &str| -> Vec<(String, String)> {
        v.iter()
            .map(|e| {
                (
                    e.pointer(a).unwrap().as_str().unwrap().to_owned(),
                    e[d].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        pairs(arches, "/architecture", "digest"),
        pairs(entries, "/platform/architecture", "digest")
    );
    assert_eq!(arches.len(), 2);

    // The OpenShift Build backend, nothing to RUN: its native Build's push is the result —
    // the same index, digest for digest (the same `machineos build`), and no second Build.
    // The controller is stopped once the native Build exists and a new one started after
    // it completed: the new one takes the build up from there.
    c.apply(&kinds::machine_os_config(), mosc("OpenShiftBuild"))
        .await;
    let native_of = |l: &[DynamicObject], done: bool| {
        l.iter().any(|b| {
            b.name_any().starts_with("native-")
                && (!done || b.data["status"]["phase"] == "Complete")
        })
    };
    c.until(&kinds::openshift_build(), "the native Build", |l| {
        native_of(l, false)
    })
    .await;
    ctl.stop().await;
    c.until(
        &kinds::openshift_build(),
        "the native Build complete",
        |l| native_of(l, true),
    )
    .await;
    let ctl = controller_with_builder(&c, &builder).await;
    let by_build = until_built(&c, "OpenShiftBuild").await;
    assert_eq!(
        phase(&by_build),
        "Succeeded",
        "{}",
        condition_message(&by_build, "Failed")
    );
    assert_eq!(
        by_build.data["status"]["digestedImagePushSpec"],
        image.as_str()
    );
    let log = builds
        .log(NS, &native_build_name(&by_build.name_any()))
        .expect("the native Build ran");
    assert!(
        log.contains(r#""--platform","linux/amd64,linux/arm64""#),
        "{log}"
    );
    assert!(builds.log(NS, &build_name(&by_build.name_any())).is_none());
    ctl.stop().await;
}
