//! The MachineOSBuild lifecycle under change and under faults, end to end: a newer config
//! interrupts an unfinished build; the rebuild annotation; the controller killed (its task
//! aborted, its builds with it) before the push, between the push and the status write, and
//! during the records, then restarted: one build, one digest, nothing leaked; API server
//! 500s, 409s and dropped watches; retention.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use machineos_controller::kinds;
use machineos_kubetest::control::{Fault, RequestMatch};
use machineos_testkit::{FaultAction, FaultProxy, FaultRule, RegistryOptions};
use serde_json::{Value, json};

const MOSB_PATH: &str = "/apis/machineconfiguration.openshift.io/v1/machineosbuilds";

async fn builds(c: &Cluster) -> Vec<kube::api::DynamicObject> {
    c.get(&kinds::build())
        .list(&Default::default())
        .await
        .unwrap()
        .items
}

/// The manifest digests PUT by digest through the proxy (`/manifests/sha256:…`).
fn pushed_digests(proxy: &FaultProxy) -> BTreeSet<String> {
    proxy
        .requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path.contains("/manifests/sha256:"))
        .filter_map(|r| r.path.rsplit('/').next().map(str::to_owned))
        .collect()
}

/// A plain registry behind a fault proxy; the push spec goes through the proxy.
async fn proxied() -> (Cluster, FaultProxy, String) {
    let c = Cluster::start_with(RegistryOptions::new()).await;
    let upstream = c.registry.addr();
    let proxy =
        tokio::task::spawn_blocking(move || FaultProxy::start(upstream, Vec::new()).unwrap())
            .await
            .unwrap();
    c.secret(
        "push-secret",
        &dockerconfig(&proxy.host(), "anonymous", "none"),
    )
    .await;
    let push = format!("{}/machineos/worker:latest", proxy.host());
    (c, proxy, push)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_config_interrupts_the_unfinished_build() {
    let (c, proxy, push) = proxied().await;
    // The first build's manifest PUT hangs long enough for the edit to overtake it.
    proxy
        .set_rules(vec![
            FaultRule::new("/manifests/", FaultAction::Delay(Duration::from_secs(20)))
                .method("PUT")
                .times(1),
        ])
        .unwrap();
    c.setup(&push, "one\n").await;
    let ctl = c.controller().await;
    let first = c
        .until(&kinds::build(), "the first build Building", |l| {
            l.len() == 1 && phase(&l[0]) == "Building"
        })
        .await[0]
        .name_any();
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "two\n"),
    )
    .await;
    let l = c
        .until(
            &kinds::build(),
            "first Interrupted, second Succeeded",
            |l| {
                l.len() == 2
                    && l.iter()
                        .any(|b| b.name_any() == first && phase(b) == "Interrupted")
                    && l.iter()
                        .any(|b| b.name_any() != first && phase(b) == "Succeeded")
            },
        )
        .await;
    let second = l.iter().find(|b| b.name_any() != first).unwrap();
    let interrupted = l.iter().find(|b| b.name_any() == first).unwrap();
    assert!(interrupted.data["status"]["digestedImagePushSpec"].is_null());
    c.until(
        &kinds::machine_os_config(),
        "the MachineOSConfig on the second",
        |l| {
            l[0].data
                .pointer("/status/machineOSBuild/name")
                .and_then(Value::as_str)
                == Some(second.name_any().as_str())
        },
    )
    .await;
    // Terminal conditions never change: still Interrupted a while later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b = c.get(&kinds::build()).get(&first).await.unwrap();
    assert_eq!(phase(&b), "Interrupted");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rebuild_annotation_builds_again_and_is_removed() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "one\n").await;
    let ctl = c.controller().await;
    let b = c
        .until(&kinds::build(), "Succeeded", |l| {
            l.len() == 1 && phase(&l[0]) == "Succeeded"
        })
        .await
        .remove(0);
    let uid = b.uid().unwrap();
    c.get(&kinds::machine_os_config())
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "machineconfiguration.openshift.io/rebuild": ""}}})),
        )
        .await
        .unwrap();
    let l = c
        .until(
            &kinds::build(),
            "a new Succeeded build of the same name",
            |l| l.len() == 1 && l[0].uid().unwrap() != uid && phase(&l[0]) == "Succeeded",
        )
        .await;
    assert_eq!(l[0].name_any(), b.name_any(), "same inputs, same name");
    c.until(&kinds::machine_os_config(), "the annotation removed", |l| {
        !l[0]
            .annotations()
            .contains_key("machineconfiguration.openshift.io/rebuild")
    })
    .await;
    ctl.stop().await;
}

/// Kill the controller at `point`, start it again, and check the end state.
async fn kill_at(point: &str) {
    let (c, proxy, push) = proxied().await;
    match point {
        // The push hangs: the kill lands before any manifest is in the registry.
        "before the push" => proxy
            .set_rules(vec![
                FaultRule::new("/manifests/", FaultAction::Delay(Duration::from_secs(30)))
                    .method("PUT")
                    .times(1),
            ])
            .unwrap(),
        // The Succeeded status write hangs: the image is pushed, its record is not.
        "between the push and the status write" => c.server.controls().delay(
            RequestMatch::path(MOSB_PATH).method("PUT"),
            Duration::from_secs(30),
            None,
        ),
        // The MachineOSImage create hangs: the build is Succeeded, the records are not.
        "during the records" => c.server.controls().delay(
            RequestMatch::path("/apis/machineconfiguration.openshift.io/v1alpha1/machineosimages")
                .method("POST"),
            Duration::from_secs(30),
            Some(1),
        ),
        other => panic!("{other}"),
    }
    c.setup(&push, "killed\n").await;
    let ctl = c.controller().await;
    match point {
        "before the push" => {
            c.until(&kinds::build(), "Building", |l| {
                l.len() == 1 && phase(&l[0]) == "Building"
            })
            .await;
        }
        "between the push and the status write" => {
            // Wait for the build's tag in the registry.
            let deadline = tokio::time::Instant::now() + EVENTUALLY;
            while !proxy
                .requests()
                .iter()
                .any(|r| r.method == "PUT" && r.path.contains("/manifests/worker-"))
            {
                assert!(tokio::time::Instant::now() < deadline, "no push");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        _ => {
            c.until(&kinds::build(), "Succeeded", |l| {
                l.len() == 1 && phase(&l[0]) == "Succeeded"
            })
            .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    ctl.kill();
    c.server.controls().clear();
    proxy.set_rules(Vec::new()).unwrap();
    let ctl = c.controller().await;
    let l = c
        .until(&kinds::build(), "one Succeeded build", |l| {
            l.len() == 1 && phase(&l[0]) == "Succeeded"
        })
        .await;
    let image = l[0].data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    c.until_recorded(
        "the MachineOSConfig recorded",
        "currentImagePullSpec",
        image.as_str(),
    )
    .await;
    let base = c
        .until(&kinds::image(), "one MachineOSImage", |l| l.len() == 1)
        .await[0]
        .data["spec"]["baseImage"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        builds(&c).await.len(),
        1,
        "{point}: no duplicate MachineOSBuild"
    );
    // The engine copies the base manifest into the target repository too; apart from it,
    // one digest only.
    let mut digests = pushed_digests(&proxy);
    digests.retain(|d| !base.ends_with(d.as_str()));
    if std::env::var_os("DUMP").is_some() {
        for r in proxy.requests() {
            eprintln!("{} {} {:?}", r.method, r.path, r.status);
        }
    }
    assert!(
        digests.len() <= 1 && digests.iter().all(|d| image.ends_with(d.as_str())),
        "{point}: pushed {digests:?}, recorded {image}"
    );
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_the_push_and_restarted() {
    kill_at("before the push").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_the_push_and_the_status_write_and_restarted() {
    kill_at("between the push and the status write").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_the_records_and_restarted() {
    kill_at("during the records").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_faults_and_dropped_watches_do_not_stop_the_build() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    // 500s on the first MachineOSBuild writes, 409s on the first pool status writes.
    c.server.controls().fail_next(
        RequestMatch::path(MOSB_PATH).method("POST"),
        2,
        Fault::internal_error(),
    );
    c.server.controls().fail_next(
        RequestMatch::path(MOSB_PATH).method("PUT"),
        2,
        Fault::service_unavailable(),
    );
    c.setup(&push, "faults\n").await;
    let ctl = c.controller().await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.server.close_watches();
    }
    c.until(&kinds::build(), "Succeeded", |l| {
        l.len() == 1 && phase(&l[0]) == "Succeeded"
    })
    .await;
    c.until(&kinds::machine_os_config(), "recorded", |l| {
        l[0].data.pointer("/status/currentImagePullSpec").is_some()
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_old_builds_and_their_images_but_never_one_in_use() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "r0\n").await;
    // Keep the two newest succeeded builds.
    c.get(&kinds::machine_os_config())
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "machineos.io/retain-succeeded-builds": "2"}}})),
        )
        .await
        .unwrap();
    let ctl = c.controller().await;
    let mut images = Vec::new();
    for i in 0..3 {
        if i > 0 {
            // Creation timestamps are whole seconds: keep "newest" unambiguous.
            tokio::time::sleep(Duration::from_millis(1100)).await;
            c.apply(
                &kinds::machine_config(),
                machine_config("00-worker", "motd", &format!("r{i}\n")),
            )
            .await;
        }
        let l = c
            .until(&kinds::machine_os_config(), "recorded", |l| {
                l[0].data
                    .pointer("/status/currentImagePullSpec")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !images.contains(&s.to_owned()))
            })
            .await;
        images.push(
            l[0].data["status"]["currentImagePullSpec"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        if i == 0 {
            // A node runs the first image: it is never deleted.
            let nodes: kube::Api<k8s_openapi::api::core::v1::Node> =
                kube::Api::all(c.client.clone());
            nodes
                .create(
                    &Default::default(),
                    &serde_json::from_value(json!({"metadata": {"name": "n1", "annotations": {
                        "machineconfiguration.openshift.io/currentImage": images[0]}}}))
                    .unwrap(),
                )
                .await
                .unwrap();
        }
    }
    // Builds: 3 made. Kept: the newest two (r2, r1), and r0 because a node runs it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(builds(&c).await.len(), 3, "r0 is in use by a node");
    // The node moves on: r0 may go now.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(c.client.clone());
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "machineconfiguration.openshift.io/currentImage": images[2]}}})),
        )
        .await
        .unwrap();
    let l = c
        .until(&kinds::build(), "two builds left", |l| l.len() == 2)
        .await;
    let left: BTreeSet<String> = l
        .iter()
        .filter_map(|b| {
            b.data["status"]["digestedImagePushSpec"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        left,
        [images[1].clone(), images[2].clone()].into_iter().collect()
    );
    c.until(&kinds::image(), "two MachineOSImages", |l| l.len() == 2)
        .await;
    // The registry no longer serves r0 by digest.
    let (u, p) = c
        .registry
        .credentials()
        .map(|(u, p)| (u.to_owned(), p.to_owned()))
        .unwrap();
    let cert_dir = c.registry.cert_dir().unwrap().display().to_string();
    let r0 = images[0].clone();
    let gone = tokio::task::spawn_blocking(move || {
        std::process::Command::new("skopeo")
            .args([
                "inspect",
                "--raw",
                "--cert-dir",
                &cert_dir,
                "--creds",
                &format!("{u}:{p}"),
            ])
            .arg(format!("docker://{r0}"))
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!gone.status.success(), "r0 still in the registry");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_503s_and_resets_and_api_conflicts_are_retried() {
    let (c, proxy, push) = proxied().await;
    proxy
        .set_rules(vec![
            FaultRule::new("/blobs/uploads/", FaultAction::Status(503)).times(2),
            FaultRule::new("/manifests/sha256:", FaultAction::ResetAfterBody(16))
                .method("PUT")
                .times(1),
        ])
        .unwrap();
    // 409s on the first status writes of pools and builds, as a concurrent writer causes.
    let conflict = Fault {
        code: 409,
        retry_after: None,
    };
    c.server.controls().fail_next(
        RequestMatch::path("/apis/machineconfiguration.openshift.io/v1/machineconfigpools/")
            .method("PUT"),
        2,
        conflict.clone(),
    );
    c.server
        .controls()
        .fail_next(RequestMatch::path(MOSB_PATH).method("PUT"), 2, conflict);
    c.setup(&push, "faults\n").await;
    // And a real concurrent writer on the pool while the controller works.
    let churn = {
        let api = c.get(&kinds::pool());
        tokio::spawn(async move {
            for i in 0..100u32 {
                let _ = api
                    .patch(
                        "worker",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"labels": {"churn": i.to_string()}}})),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let ctl = c.controller().await;
    let l = c
        .until(&kinds::build(), "Succeeded", |l| {
            l.len() == 1 && phase(&l[0]) == "Succeeded"
        })
        .await;
    let image = l[0].data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    c.until_recorded("recorded", "currentImagePullSpec", image.as_str())
        .await;
    churn.abort();
    let faulted = proxy.requests().iter().filter(|r| r.faulted).count();
    assert!(faulted >= 3, "the registry faults fired: {faulted}");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_fails_with_the_engines_message_and_the_rebuild_annotation_retries_it() {
    let (c, proxy, push) = proxied().await;
    // The registry lets an upload start (so the push preflight passes) and refuses every
    // upload's data: the engine's error, permanent.
    proxy
        .set_rules(vec![
            FaultRule::new("/blobs/uploads/", FaultAction::Status(403)).method("PUT"),
            FaultRule::new("/blobs/uploads/", FaultAction::Status(403)).method("PATCH"),
        ])
        .unwrap();
    c.setup(&push, "refused\n").await;
    let ctl = c.controller().await;
    let l = c
        .until(&kinds::build(), "Failed", |l| {
            l.len() == 1 && phase(&l[0]) == "Failed"
        })
        .await;
    let failed = l[0]
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Failed")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        failed.contains("403") || failed.contains("denied"),
        "{failed}"
    );
    assert!(l[0].data["status"]["digestedImagePushSpec"].is_null());
    let pools = c
        .until(&kinds::pool(), "ImageBuildDegraded", |l| {
            l[0].data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "ImageBuildDegraded" && c["status"] == "True")
                })
        })
        .await;
    let degraded = pools[0].data["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ImageBuildDegraded")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        degraded.starts_with("Failed to build OS image for pool worker"),
        "{degraded}"
    );
    let mosc = c
        .get(&kinds::machine_os_config())
        .get("worker")
        .await
        .unwrap();
    assert!(mosc.data.pointer("/status/currentImagePullSpec").is_none());

    // Failed is terminal: lifting the fault changes nothing until a rebuild is asked for.
    proxy.set_rules(Vec::new()).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        phase(&c.get(&kinds::build()).get(&l[0].name_any()).await.unwrap()),
        "Failed"
    );
    c.get(&kinds::machine_os_config())
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "machineconfiguration.openshift.io/rebuild": ""}}})),
        )
        .await
        .unwrap();
    c.until(&kinds::build(), "Succeeded after the rebuild", |l| {
        l.len() == 1 && phase(&l[0]) == "Succeeded"
    })
    .await;
    c.until(&kinds::pool(), "recovered", |l| {
        l[0].data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "ImageBuildDegraded" && c["status"] == "False")
            })
    })
    .await;
    ctl.stop().await;
}
