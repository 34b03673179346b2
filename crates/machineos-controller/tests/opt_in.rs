//! The other ways in, end to end: the legacy label + `on-cluster-build-config` ConfigMap
//! (the annotation and the four legacy pool conditions); a bad MachineConfig
//! (`RenderDegraded` naming it and its JSON path, the previous rendered config kept, nothing
//! built); a missing push Secret (a condition and an Event naming it, no build).

mod common;

use common::*;
use kube::ResourceExt;
use machineos_controller::kinds;
use serde_json::{Value, json};

fn condition<'a>(pool: &'a kube::api::DynamicObject, t: &str) -> Option<&'a Value> {
    pool.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_label_and_config_map_build_and_annotate_the_pool() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/legacy:latest", c.registry.host());
    c.config_map(
        "on-cluster-build-config",
        &[
            ("finalImagePushSecretName", "push-secret"),
            ("finalImagePullspec", push.as_str()),
        ],
    )
    .await;
    let mut pool = worker_pool();
    pool["metadata"]["labels"] = json!({"machineconfiguration.openshift.io/layering-enabled": ""});
    c.apply(&kinds::pool(), pool).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "legacy\n"),
    )
    .await;
    let ctl = c.controller().await;
    let key = "machineconfiguration.openshift.io/newestImageEquivalentConfig";
    let pools = c
        .until(&kinds::pool(), "the annotation", |l| {
            l[0].annotations().contains_key(key)
        })
        .await;
    let image = pools[0].annotations()[key].clone();
    assert!(
        image.starts_with(&format!("{}/machineos/legacy@sha256:", c.registry.host())),
        "{image}"
    );
    let pools = c
        .until(&kinds::pool(), "BuildSuccess", |l| {
            condition(&l[0], "BuildSuccess").is_some_and(|c| c["status"] == "True")
        })
        .await;
    for t in [
        "BuildPending",
        "Building",
        "BuildFailed",
        "ImageBuildDegraded",
    ] {
        assert_eq!(
            condition(&pools[0], t).map(|c| c["status"].clone()),
            Some(json!("False")),
            "{t}"
        );
    }
    // The build is owned by the pool (no MachineOSConfig).
    let builds = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert_eq!(builds.len(), 1);
    assert_eq!(builds[0].owner_references()[0].kind, "MachineConfigPool");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_machine_config_degrades_the_render_and_builds_nothing() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "ok\n").await;
    let ctl = c.controller().await;
    c.until(&kinds::build(), "the first build Succeeded", |l| {
        l.len() == 1 && phase(&l[0]) == "Succeeded"
    })
    .await;
    let pools = c
        .get(&kinds::pool())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let rendered = pools[0].data["spec"]["configuration"]["name"].clone();

    // A relative path is invalid Ignition.
    let mut bad = machine_config("50-bad", "x", "y");
    bad["spec"]["config"]["storage"]["files"][0]["path"] = json!("etc/relative");
    c.apply(&kinds::machine_config(), bad).await;
    let pools = c
        .until(&kinds::pool(), "RenderDegraded", |l| {
            condition(&l[0], "RenderDegraded").is_some_and(|c| c["status"] == "True")
        })
        .await;
    let msg = condition(&pools[0], "RenderDegraded").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("50-bad"), "{msg}");
    assert!(
        msg.contains("storage.files.0.path")
            || msg.contains("storage/files/0/path")
            || msg.contains("files[0]"),
        "{msg}"
    );
    assert_eq!(
        pools[0].data["spec"]["configuration"]["name"], rendered,
        "the previous rendered config stays"
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let builds = c
        .get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert_eq!(builds.len(), 1, "nothing new is built");

    // Fixed: the condition clears and a build follows.
    c.apply(&kinds::machine_config(), machine_config("50-bad", "x", "y"))
        .await;
    c.until(&kinds::pool(), "RenderDegraded False", |l| {
        condition(&l[0], "RenderDegraded").is_some_and(|c| c["status"] == "False")
    })
    .await;
    c.until(&kinds::build(), "a second Succeeded build", |l| {
        l.iter().filter(|b| phase(b) == "Succeeded").count() == 2
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_push_secret_is_a_condition_naming_it_and_no_build() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "ok\n"),
    )
    .await;
    let mut mosc = machine_os_config(&push);
    mosc["spec"]["renderedImagePushSecret"]["name"] = json!("no-such-secret");
    c.apply(&kinds::machine_os_config(), mosc).await;
    let ctl = c.controller().await;
    let pools = c
        .until(&kinds::pool(), "ImageBuildDegraded", |l| {
            condition(&l[0], "ImageBuildDegraded").is_some_and(|c| c["status"] == "True")
        })
        .await;
    let msg = condition(&pools[0], "ImageBuildDegraded").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("no-such-secret"), "{msg}");
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(c.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let list = events.list(&Default::default()).await.unwrap().items;
        if list.iter().any(|e| {
            e.reason.as_deref() == Some("ConfigReconcileFailed")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("no-such-secret"))
        }) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no Event: {list:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        c.get(&kinds::build())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // What an admin reads: the pool's condition names the Secret; the MachineOSConfig's
    // Events say what failed.
    c.describe_until(
        "machineconfigpool",
        "worker",
        &[
            "ImageBuildDegraded",
            "Secret machineos/no-such-secret not found",
        ],
    )
    .await;
    c.describe_until(
        "machineosconfig",
        "worker",
        &[
            "Warning  ConfigReconcileFailed",
            "spec.renderedImagePushSecret.name",
        ],
    )
    .await;

    // The Secret appears: the build follows, and describe says the pool recovered.
    let (u, p) = c.registry.credentials().unwrap();
    c.secret("no-such-secret", &dockerconfig(&c.registry.host(), u, p))
        .await;
    c.until(&kinds::build(), "a Succeeded build", |l| {
        l.len() == 1 && phase(&l[0]) == "Succeeded"
    })
    .await;
    c.describe_until(
        "machineconfigpool",
        "worker",
        &["BuildRecovered", "Pool worker image build recovered"],
    )
    .await;
    ctl.stop().await;
}

fn mosc_condition(m: &kube::api::DynamicObject, t: &str) -> Option<Value> {
    m.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == t)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_os_config_for_a_pool_that_does_not_exist_says_so_until_it_does() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hi\n"),
    )
    .await;
    c.apply(&kinds::machine_os_config(), machine_os_config(&push))
        .await;
    let ctl = c.controller().await;

    // No pool `worker` yet: a condition naming the field and the pool, and a Warning Event.
    let moscs = c
        .until(
            &kinds::machine_os_config(),
            "MachineConfigPoolFound=False",
            |l| {
                l.iter().any(|m| {
                    mosc_condition(m, "MachineConfigPoolFound")
                        .is_some_and(|c| c["status"] == "False")
                })
            },
        )
        .await;
    let cond = mosc_condition(&moscs[0], "MachineConfigPoolFound").unwrap();
    assert_eq!(cond["reason"], "MachineConfigPoolNotFound");
    let message = cond["message"].as_str().unwrap();
    assert!(
        message.contains("spec.machineConfigPool.name")
            && message.contains("MachineConfigPool worker does not exist"),
        "{message}"
    );
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(c.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let list = events.list(&Default::default()).await.unwrap().items;
        if list.iter().any(|e| {
            e.reason.as_deref() == Some("MachineConfigPoolNotFound")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("worker")
        }) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no Event: {list:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // What an admin reads: `kubectl describe` shows the condition and the Event (served
    // through core/v1 as kube-apiserver does), `kubectl get events` the Event.
    assert!(
        machineos_kubetest::kubectl::available() || std::env::var_os("CI").is_none(),
        "kubectl is required under CI"
    );
    if machineos_kubetest::kubectl::available() {
        let (k, _) =
            machineos_kubetest::kubectl::Kubectl::for_server(&c.server, c.tmp.path()).unwrap();
        let (describe, events) = tokio::task::spawn_blocking(move || {
            (
                k.ok(&["describe", "machineosconfig", "worker"]).unwrap(),
                k.ok(&["get", "events", "-A"]).unwrap(),
            )
        })
        .await
        .unwrap();
        for want in [
            "MachineConfigPoolFound",
            "MachineConfigPool worker does not exist",
            "Warning  MachineConfigPoolNotFound",
        ] {
            assert!(describe.contains(want), "{want:?} not in:\n{describe}");
        }
        assert!(
            events.contains("MachineConfigPoolNotFound")
                && events.contains("machineosconfig/worker"),
            "{events}"
        );
    }

    // The pool comes: the condition turns True and the image is built.
    c.apply(&kinds::pool(), worker_pool()).await;
    c.until(
        &kinds::machine_os_config(),
        "MachineConfigPoolFound=True",
        |l| {
            l.iter().any(|m| {
                mosc_condition(m, "MachineConfigPoolFound").is_some_and(|c| c["status"] == "True")
            })
        },
    )
    .await;
    c.until(&kinds::build(), "a Succeeded build", |l| {
        l.iter().any(|b| phase(b) == "Succeeded")
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_secret_created_late_is_used_the_pass_it_appears() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    let mut mosc = machine_os_config(&push);
    mosc["spec"]["renderedImagePushSecret"] = json!({"name": "late-secret"});
    c.apply(&kinds::pool(), worker_pool()).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hi\n"),
    )
    .await;
    c.apply(&kinds::machine_os_config(), mosc).await;
    // Registry answers trusted for an hour: only the Secret's arrival can clear the state.
    let ctl = c
        .controller_with(machineos_controller::controller::ControllerOptions {
            registry_answer_ttl: std::time::Duration::from_secs(3600),
            ..c.options()
        })
        .await;
    let pools = c
        .until(
            &kinds::pool(),
            "ImageBuildDegraded naming the Secret",
            |l| {
                l.iter().any(|p| {
                    condition(p, "ImageBuildDegraded").is_some_and(|d| {
                        d["status"] == "True"
                            && d["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("late-secret"))
                    })
                })
            },
        )
        .await;
    assert_eq!(
        condition(&pools[0], "ImageBuildDegraded").unwrap()["reason"],
        "InvalidConfiguration"
    );
    // The Secret is created: the condition clears and the image is built.
    let (user, pass) = c.registry.credentials().unwrap();
    c.secret("late-secret", &dockerconfig(&c.registry.host(), user, pass))
        .await;
    c.until(&kinds::build(), "a Succeeded build", |l| {
        l.iter().any(|b| phase(b) == "Succeeded")
    })
    .await;
    c.until(&kinds::pool(), "ImageBuildDegraded=False", |l| {
        l.iter()
            .any(|p| condition(p, "ImageBuildDegraded").is_some_and(|d| d["status"] == "False"))
    })
    .await;
    ctl.stop().await;
}
