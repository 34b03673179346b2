//! End to end, in-process: the test API server, a real TLS + htpasswd registry, and the
//! controller. A pool, its MachineConfigs and a MachineOSConfig in → rendered config,
//! MachineOSBuild Succeeded, the image in the registry holding the files, the
//! MachineOSConfig and a MachineOSImage pointing at it; an edit → a second build; the same
//! config again → no build; a restarted controller changes nothing.

mod common;

use std::time::Duration;

use common::*;
use kube::ResourceExt;
use machineos_controller::kinds;
use serde_json::Value;

fn succeeded(list: &[kube::api::DynamicObject]) -> Vec<String> {
    list.iter()
        .filter(|b| phase(b) == "Succeeded")
        .map(|b| b.name_any())
        .collect()
}

/// The files under `/etc` of the image's last layer, by path, with their contents.
async fn layer_file(c: &Cluster, image: &str, path: &str) -> Option<String> {
    let image = image.to_owned();
    let path = path.to_owned();
    let reg_host = c.registry.host();
    let dir = c
        .tmp
        .path()
        .join(format!("pulled-{}", image.len() + path.len()));
    let cert_dir = c.registry.cert_dir().map(|p| p.display().to_string());
    let creds = c.registry.credentials().map(|(u, p)| format!("{u}:{p}"));
    tokio::task::spawn_blocking(move || {
        let mut args = vec!["copy".to_string()];
        if let Some(d) = cert_dir {
            args.push(format!("--src-cert-dir={d}"));
        }
        if let Some(cr) = creds {
            args.push(format!("--src-creds={cr}"));
        }
        args.push(format!("docker://{image}"));
        args.push(format!("oci:{}:t", dir.display()));
        let out = std::process::Command::new("skopeo")
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "skopeo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let unpacked = dir.with_extension("unpacked");
        let out = std::process::Command::new("umoci")
            .args(["raw", "unpack", "--rootless", "--image"])
            .arg(format!("{}:t", dir.display()))
            .arg(&unpacked)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "umoci: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = reg_host;
        std::fs::read_to_string(unpacked.join(path.trim_start_matches('/'))).ok()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_opts_in_gets_its_image_built_recorded_and_kept_current() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "hello v1\n").await;
    let ctl = c.controller().await;

    // The render controller points the pool at its rendered config.
    let pools = c
        .until(&kinds::pool(), "the pool rendered", |l| {
            l.iter().any(|p| {
                p.data
                    .pointer("/spec/configuration/name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.starts_with("rendered-worker-"))
            })
        })
        .await;
    let rendered1 = pools[0].data["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        pools[0].data["spec"]["configuration"]["source"][0]["name"],
        "00-worker"
    );

    let builds = c
        .until(&kinds::build(), "one Succeeded build", |l| {
            succeeded(l).len() == 1
        })
        .await;
    let b1 = &builds[0];
    assert!(b1.name_any().starts_with("worker-"), "{}", b1.name_any());
    assert_eq!(b1.data["spec"]["machineConfig"]["name"], rendered1.as_str());
    let image1 = b1.data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(image1.starts_with(&format!("{}/machineos/worker@sha256:", c.registry.host())));
    assert!(b1.data["status"]["buildStart"].is_string());
    assert!(b1.data["status"]["buildEnd"].is_string());
    assert_eq!(b1.data["status"]["builder"]["imageBuilderType"], "Native");

    // The MachineOSConfig and a MachineOSImage record the image.
    let moscs = c
        .until_recorded(
            "the MachineOSConfig updated",
            "currentImagePullSpec",
            image1.as_str(),
        )
        .await;
    assert_eq!(
        moscs.data["status"]["machineOSBuild"]["name"],
        b1.name_any().as_str()
    );
    // The registry preflight passed before the build started.
    let access = registry_access(&moscs).expect("RegistryAccess");
    assert_eq!(
        (&access["status"], &access["reason"]),
        (&"True".into(), &"RegistryAccessVerified".into())
    );
    let images = c
        .until(&kinds::image(), "a MachineOSImage", |l| l.len() == 1)
        .await;
    assert_eq!(images[0].data["spec"]["image"], image1.as_str());
    assert_eq!(
        images[0].data["spec"]["architectures"][0]["architecture"],
        "amd64"
    );
    assert!(
        images[0].data["spec"]["baseImage"]
            .as_str()
            .unwrap()
            .contains("/base/os@sha256:")
    );
    // What the base is, detected from the image (the synthetic base is Fedora CoreOS-shaped).
    assert_eq!(images[0].data["spec"]["variant"]["kind"], "fcos");
    assert_eq!(images[0].data["spec"]["variant"]["id"], "fedora");
    assert_eq!(images[0].data["spec"]["variant"]["variantID"], "coreos");

    // The pushed image holds the file.
    assert_eq!(
        layer_file(&c, &image1, "/etc/motd").await.as_deref(),
        Some("hello v1\n")
    );

    // An edit: a new rendered config, a second build, the MachineOSConfig follows.
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello v2\n"),
    )
    .await;
    let builds = c
        .until(&kinds::build(), "a second Succeeded build", |l| {
            succeeded(l).len() == 2
        })
        .await;
    let b2 = builds
        .iter()
        .find(|b| b.name_any() != b1.name_any())
        .unwrap();
    let image2 = b2.data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(image1, image2);
    c.until_recorded(
        "the MachineOSConfig on build 2",
        "currentImagePullSpec",
        image2.as_str(),
    )
    .await;
    assert_eq!(
        layer_file(&c, &image2, "/etc/motd").await.as_deref(),
        Some("hello v2\n")
    );

    // Back to v1: the same inputs as build 1 → build 1 is the target again, no third build.
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello v1\n"),
    )
    .await;
    c.until(
        &kinds::machine_os_config(),
        "the MachineOSConfig back on build 1",
        |l| {
            l[0].data
                .pointer("/status/machineOSBuild/name")
                .and_then(Value::as_str)
                == Some(b1.name_any().as_str())
        },
    )
    .await;
    let n = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(n, 2, "the same config twice is one build");

    // A restarted controller changes nothing.
    ctl.stop().await;
    let before: Vec<(String, Option<String>)> = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|b| (b.name_any(), b.resource_version()))
        .collect();
    let ctl = c.controller().await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let after: Vec<(String, Option<String>)> = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|b| (b.name_any(), b.resource_version()))
        .collect();
    assert_eq!(before, after, "a restart rewrites no build");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_amd64_and_arm64_nodes_gets_one_image_index_with_both() {
    let c = Cluster::start_with_base(
        machineos_testkit::RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret-pw"),
        &["linux/amd64", "linux/arm64", "linux/s390x"],
    )
    .await;
    // Two workers of different architectures, and an s390x node of another pool.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(c.client.clone());
    for (name, role, arch) in [
        ("w-amd", "worker", "amd64"),
        ("w-arm", "worker", "arm64"),
        ("m-s390x", "master", "s390x"),
    ] {
        let node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {
                format!("node-role.kubernetes.io/{role}"): "",
                "kubernetes.io/arch": arch,
            }},
        }))
        .unwrap();
        nodes
            .create(&kube::api::PostParams::default(), &node)
            .await
            .unwrap();
    }
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "hello multi\n").await;
    let ctl = c
        .controller_with(machineos_controller::controller::ControllerOptions {
            rollout: false,
            ..c.options()
        })
        .await;

    let builds = c
        .until(&kinds::build(), "one Succeeded build", |l| {
            succeeded(l).len() == 1
        })
        .await;
    let image = builds[0].data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    let images = c
        .until(&kinds::image(), "a MachineOSImage", |l| l.len() == 1)
        .await;
    assert_eq!(images[0].data["spec"]["image"], image.as_str());
    let arches = images[0].data["spec"]["architectures"].as_array().unwrap();
    let names: Vec<&str> = arches
        .iter()
        .map(|a| a["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["amd64", "arm64"]);

    // The pushed image is an index of those two manifests, with the digests recorded.
    let index = c.raw_manifest(&image).await;
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let entries = index["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    for (entry, arch) in entries.iter().zip(arches) {
        assert_eq!(entry["platform"]["architecture"], arch["architecture"]);
        assert_eq!(entry["digest"], arch["digest"]);
    }
    ctl.stop().await;
}

/// The MachineOSConfig's `RegistryAccess` condition.
fn registry_access(m: &kube::api::DynamicObject) -> Option<&Value> {
    m.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "RegistryAccess")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_secret_that_may_not_push_is_reported_before_any_build() {
    let c = Cluster::start_with(machineos_testkit::RegistryOptions::new()).await;
    // The output registry lets the Secret read but refuses blob uploads.
    let proxy = machineos_testkit::FaultProxy::start(
        c.registry.addr(),
        vec![
            machineos_testkit::FaultRule::new(
                "/blobs/uploads/",
                machineos_testkit::FaultAction::Status(403),
            )
            .method("POST")
            .times(usize::MAX),
        ],
    )
    .expect("proxy");
    let push = format!("{}/machineos/worker:latest", proxy.host());
    c.secret(
        "push-secret",
        &dockerconfig(&proxy.host(), "anonymous", "none"),
    )
    .await;
    c.setup(&push, "hello\n").await;
    let ctl = c.controller().await;

    let moscs = c
        .until(&kinds::machine_os_config(), "RegistryAccess=False", |l| {
            l.iter()
                .any(|m| registry_access(m).is_some_and(|a| a["status"] == "False"))
        })
        .await;
    let cond = registry_access(&moscs[0]).unwrap();
    assert_eq!(cond["reason"], "RegistryCheckFailed");
    let message = cond["message"].as_str().unwrap();
    assert!(
        message.contains("may not push to") && message.contains("push-secret"),
        "{message}"
    );
    assert!(cond["lastTransitionTime"].is_string());
    // No build was created, and nothing was uploaded.
    let builds = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(builds.items.is_empty(), "{:?}", builds.items);
    assert_eq!(proxy.count("PATCH", "/blobs/uploads/"), 0);
    assert_eq!(proxy.count("PUT", "/manifests/"), 0);
    let pools = c
        .get(&kinds::pool())
        .list(&Default::default())
        .await
        .unwrap();
    let degraded = pools.items[0].data["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ImageBuildDegraded")
        .cloned()
        .unwrap();
    assert_eq!(degraded["status"], "True");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_outage_during_the_push_is_retried_and_the_build_succeeds() {
    let c = Cluster::start_with(machineos_testkit::RegistryOptions::new()).await;
    // The output registry answers 503 to the first manifest pushes: more of them than the
    // registry client retries in one attempt, so the first build attempt fails, transiently.
    let proxy = machineos_testkit::FaultProxy::start(
        c.registry.addr(),
        vec![
            machineos_testkit::FaultRule::new(
                "/manifests/",
                machineos_testkit::FaultAction::Status(503),
            )
            .method("PUT")
            .times(6),
        ],
    )
    .expect("proxy");
    let push = format!("{}/machineos/worker:latest", proxy.host());
    c.secret(
        "push-secret",
        &dockerconfig(&proxy.host(), "anonymous", "none"),
    )
    .await;
    c.setup(&push, "hello\n").await;
    let ctl = c.controller().await;

    // The same MachineOSBuild succeeds, without anyone asking for a rebuild: the lifecycle
    // started it again after the transient failure and recorded that it did.
    let builds = c
        .until(&kinds::build(), "the build Succeeded after a retry", |l| {
            succeeded(l).len() == 1
        })
        .await;
    assert_eq!(builds.len(), 1, "one MachineOSBuild, retried in place");
    let b = &builds[0];
    let annotations = b.annotations();
    assert_eq!(
        annotations
            .get(machineos_build_lifecycle::vocab::BUILD_RETRIES_ANNOTATION)
            .map(String::as_str),
        Some("1"),
        "{annotations:?}"
    );
    assert!(
        !annotations.contains_key(machineos_build_lifecycle::vocab::REBUILD_ANNOTATION),
        "{annotations:?}"
    );
    assert!(proxy.count("PUT", "/manifests/") > 6);
    let image = b.data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    c.until_recorded("the image recorded", "currentImagePullSpec", &image)
        .await;
    // What happened is on the record: a Warning Event for the retry.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::all(c.client.clone());
    let evs = events.list(&Default::default()).await.unwrap().items;
    let retrying = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("BuildRetrying"))
        .expect("a BuildRetrying Event");
    let note = retrying.note.as_deref().unwrap_or_default();
    assert!(note.contains("attempt 2 of 5"), "{note}");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_dockercfg_push_secret_is_converted_and_pushes() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, DeleteParams, PostParams};
    // The TLS + htpasswd registry: the push needs the credentials.
    let c = Cluster::start().await;
    let (user, pass) = c.registry.credentials().expect("an htpasswd registry");
    // OpenShift's `builder-dockercfg-*` kind of Secret: type kubernetes.io/dockercfg, key
    // .dockercfg holding the auths map alone.
    let config: Value =
        serde_json::from_slice(&dockerconfig(&c.registry.host(), user, pass)).unwrap();
    let legacy = serde_json::to_vec(&config["auths"]).unwrap();
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), NS);
    secrets
        .delete("push-secret", &DeleteParams::default())
        .await
        .unwrap();
    let s: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "push-secret"},
        "type": "kubernetes.io/dockercfg",
        "data": {".dockercfg": base64_encode(&legacy)},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    c.setup(
        &format!("{}/machineos/worker:latest", c.registry.host()),
        "hello\n",
    )
    .await;
    let ctl = c.controller().await;
    let builds = c
        .until(&kinds::build(), "one Succeeded build", |l| {
            succeeded(l).len() == 1
        })
        .await;
    let image = builds[0].data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        layer_file(&c, &image, "/etc/motd").await.as_deref(),
        Some("hello\n")
    );
    ctl.stop().await;
}

fn pool_condition(pools: &[kube::api::DynamicObject], kind: &str) -> Option<Value> {
    pools.first()?.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_pull_secret_replaced_by_a_wrong_one_is_reported_though_the_digest_is_known() {
    let c = Cluster::start().await;
    let host = c.registry.host();
    let (user, pass) = c.registry.credentials().unwrap();
    c.secret("base-pull", &dockerconfig(&host, user, pass))
        .await;
    let push = format!("{host}/machineos/worker:latest");
    let mut mosc = machine_os_config(&push);
    mosc["spec"]["baseImagePullSecret"] = serde_json::json!({"name": "base-pull"});
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "v1\n"),
    )
    .await;
    c.apply(&kinds::machine_os_config(), mosc).await;
    let ctl = c.controller().await;
    c.until(&kinds::build(), "one Succeeded build", |l| {
        succeeded(l).len() == 1
    })
    .await;

    // The pull Secret is replaced by one the registry refuses: the base tag's digest is
    // known (resolved with the old Secret), yet the pool says the base cannot be had with
    // these credentials instead of building as if nothing changed.
    c.secret("base-pull", &dockerconfig(&host, user, "not-the-password"))
        .await;
    let pools = c
        .until(&kinds::pool(), "BaseImageUnavailable", |l| {
            pool_condition(l, "ImageBuildDegraded")
                .is_some_and(|d| d["status"] == "True" && d["reason"] == "BaseImageUnavailable")
        })
        .await;
    let d = pool_condition(&pools, "ImageBuildDegraded").unwrap();
    let message = d["message"].as_str().unwrap();
    assert!(message.contains("base/os:1"), "{message}");

    // The right Secret back: the pool recovers without a restart.
    c.secret("base-pull", &dockerconfig(&host, user, pass))
        .await;
    c.until(&kinds::pool(), "ImageBuildDegraded=False", |l| {
        pool_condition(l, "ImageBuildDegraded").is_some_and(|d| d["status"] == "False")
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_to_a_push_secret_that_may_push_is_checked_again_at_once() {
    let c = Cluster::start().await;
    let host = c.registry.host();
    let (user, _) = c.registry.credentials().unwrap();
    c.secret("bad-push", &dockerconfig(&host, user, "not-the-password"))
        .await;
    let push = format!("{host}/machineos/worker:latest");
    let mut mosc = machine_os_config(&push);
    mosc["spec"]["renderedImagePushSecret"] = serde_json::json!({"name": "bad-push"});
    // The base is pulled with the good Secret: only the push is refused.
    mosc["spec"]["baseImagePullSecret"] = serde_json::json!({"name": "push-secret"});
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "v1\n"),
    )
    .await;
    c.apply(&kinds::machine_os_config(), mosc.clone()).await;
    // Registry answers trusted for an hour: only the credentials' change can make the
    // controller ask again within this test.
    let ctl = c
        .controller_with(machineos_controller::controller::ControllerOptions {
            registry_answer_ttl: std::time::Duration::from_secs(3600),
            ..c.options()
        })
        .await;
    let moscs = c
        .until(&kinds::machine_os_config(), "RegistryAccess=False", |l| {
            l.iter()
                .any(|m| registry_access(m).is_some_and(|a| a["status"] == "False"))
        })
        .await;
    let message = registry_access(&moscs[0]).unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("bad-push"), "{message}");

    // The MachineOSConfig now names the Secret that may push: checked again, built.
    mosc["spec"]["renderedImagePushSecret"] = serde_json::json!({"name": "push-secret"});
    c.apply(&kinds::machine_os_config(), mosc).await;
    c.until(&kinds::machine_os_config(), "RegistryAccess=True", |l| {
        l.iter()
            .any(|m| registry_access(m).is_some_and(|a| a["status"] == "True"))
    })
    .await;
    c.until(&kinds::build(), "one Succeeded build", |l| {
        succeeded(l).len() == 1
    })
    .await;
    ctl.stop().await;
}

/// The paths a MachineOSImage's `status.changes` lists.
fn changed_paths(changes: &Value) -> Vec<&str> {
    changes["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect()
}

/// `status.changes` (the controller's `changes`, on): the first image against its base, the
/// second against the first — what `machineos diff` would say, bounded, written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_image_records_what_it_changes_from_the_pools_previous_image() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "hello v1\n").await;
    let mut opts = c.options();
    opts.image_changes = true;
    let ctl = c.controller_with(opts).await;
    let changes_of = |l: &[kube::api::DynamicObject], n: usize| {
        l.len() == n
            && l.iter()
                .all(|m| m.data.pointer("/status/changes").is_some())
    };
    let images = c
        .until(&kinds::image(), "the first image's changes", |l| {
            changes_of(l, 1)
        })
        .await;
    let first = &images[0];
    let changes = &first.data["status"]["changes"];
    assert_eq!(changes["from"], first.data["spec"]["baseImage"]);
    assert_eq!(changes["kernelChanged"], false);
    // The base has no boot guard: the first image adds it below /usr, which a running
    // node cannot take live (a soft reboot); /etc alone would be None.
    assert_eq!(changes["pathClass"], "SoftReboot", "{changes}");
    let paths = changed_paths(changes);
    assert!(paths.contains(&"/etc/motd"), "{paths:?}");
    assert!(
        paths.contains(&"/etc/machine-config-daemon/currentconfig"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&machineos_boot_guard::SCRIPT_PATH),
        "every controller-built image carries the boot guard: {paths:?}"
    );

    // A new MachineConfig content: the second image against the first.
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello v2\n"),
    )
    .await;
    let images = c
        .until(&kinds::image(), "the second image's changes", |l| {
            changes_of(l, 2)
        })
        .await;
    let first_image = first.data["spec"]["image"].as_str().unwrap();
    let second = images
        .iter()
        .find(|m| m.data["spec"]["image"] != first_image)
        .unwrap();
    // What the pool had when the second was recorded, written down by the lifecycle.
    assert_eq!(
        second
            .annotations()
            .get("machineos.io/previous-image")
            .map(String::as_str),
        Some(first_image)
    );
    assert!(
        first
            .annotations()
            .get("machineos.io/previous-image")
            .is_none()
    );
    let changes = &second.data["status"]["changes"];
    assert_eq!(changes["from"], first_image);
    // The same guard in both: only /etc differs.
    assert_eq!(changes["pathClass"], "None", "{changes}");
    assert_eq!(
        (&changes["added"], &changes["removed"]),
        (&0.into(), &0.into()),
        "{changes}"
    );
    let motd = changes["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/motd")
        .expect("/etc/motd changed");
    assert_eq!(motd["change"], "modified");
    assert_eq!(motd["size"], 9);
    let digest = {
        use sha2::Digest as _;
        format!("sha256:{:x}", sha2::Sha256::digest(b"hello v2\n"))
    };
    assert_eq!(motd["digest"], digest.as_str());
    ctl.stop().await;
}

/// `machineos.io/boot-guard: off` on the MachineOSConfig: its images are built without the
/// boot guard (the native builder's recipe; the Job and OpenShift Build backends pass
/// `--boot-guard` only when it is on, tested with their arguments).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_os_config_can_opt_out_of_the_boot_guard() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello\n"),
    )
    .await;
    let mut mosc = machine_os_config(&push);
    mosc["metadata"]["annotations"] =
        serde_json::json!({ machineos_vocab::build::BOOT_GUARD_ANNOTATION: "off" });
    c.apply(&kinds::machine_os_config(), mosc).await;
    let mut opts = c.options();
    opts.image_changes = true;
    let ctl = c.controller_with(opts).await;
    let images = c
        .until(&kinds::image(), "the image's changes", |l| {
            l.len() == 1 && l[0].data.pointer("/status/changes").is_some()
        })
        .await;
    let changes = &images[0].data["status"]["changes"];
    let paths = changed_paths(changes);
    assert!(paths.contains(&"/etc/motd"), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.contains("boot-guard")),
        "opted out, yet: {paths:?}"
    );
    assert_eq!(changes["pathClass"], "None", "/etc alone: {changes}");
    ctl.stop().await;
}

/// `status.changes` when the controller dies mid-comparison: the comparison hangs on the
/// pushed image's manifest (a registry that never answers), the controller is killed (its
/// task aborted at that await), nothing is written; the next controller compares again and
/// writes it — once, and from the image's base.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_mid_comparison_leaves_nothing_and_the_next_one_writes_the_changes() {
    use machineos_testkit::{FaultAction, FaultProxy, FaultRule};
    let c = Cluster::start_with(machineos_testkit::RegistryOptions::new()).await;
    let proxy = FaultProxy::start(c.registry.addr(), Vec::new()).expect("proxy");
    let push = format!("{}/machineos/worker:latest", proxy.host());
    c.secret(
        "push-secret",
        &dockerconfig(&proxy.host(), "anonymous", "none"),
    )
    .await;
    c.setup(&push, "hello\n").await;
    // The image, built and recorded without comparisons.
    let ctl = c.controller().await;
    let images = c
        .until(&kinds::image(), "the image recorded", |l| l.len() == 1)
        .await;
    ctl.stop().await;
    let image = images[0].data["spec"]["image"].as_str().unwrap().to_owned();
    assert!(images[0].data.pointer("/status/changes").is_none());

    // The registry now hangs on the image's manifest: the comparison starts and waits.
    proxy
        .set_rules(vec![
            FaultRule::new("/manifests/sha256:", FaultAction::Silence)
                .method("GET")
                .times(usize::MAX),
        ])
        .unwrap();
    proxy.clear_requests();
    let mut opts = c.options();
    opts.image_changes = true;
    let ctl = c.controller_with(opts.clone()).await;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while proxy.count("GET", "/manifests/sha256:") == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the comparison never asked for the image: {:?}",
            proxy.requests()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ctl.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let l = c
        .get(&kinds::image())
        .list(&kube::api::ListParams::default())
        .await
        .unwrap();
    assert!(
        l.items[0].data.pointer("/status/changes").is_none(),
        "written by a killed comparison"
    );

    // The registry answers again; the next controller compares and writes.
    proxy.set_rules(Vec::new()).unwrap();
    let ctl = c.controller_with(opts).await;
    let images = c
        .until(&kinds::image(), "the changes written", |l| {
            l.iter()
                .all(|m| m.data.pointer("/status/changes").is_some())
        })
        .await;
    let changes = &images[0].data["status"]["changes"];
    assert_eq!(images[0].data["spec"]["image"], image.as_str());
    assert_eq!(changes["from"], images[0].data["spec"]["baseImage"]);
    assert_eq!(changes["architecture"], "amd64");
    assert!(changes["added"].as_i64().unwrap() > 0, "{changes}");
    ctl.stop().await;
}
