//! A throttled API server slows one thing, not everything: every write to one pool's
//! MachineOSConfig status is answered 429 with a long Retry-After, and the other pool's image
//! is built and recorded meanwhile; when the throttling ends, the first pool catches up.
//! (With kube-rs's default client retry, the throttled write alone held each pass for minutes,
//! and with it every other pool.)

mod common;

use common::*;
use machineos_controller::kinds;
use machineos_kubetest::control::{Fault, RequestMatch};
use serde_json::{Value, json};

const GROUP: &str = "/apis/machineconfiguration.openshift.io/v1";

fn infra_objects(push: &str) -> [(kube::api::ApiResource, Value); 3] {
    [
        (
            kinds::pool(),
            json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigPool",
                "metadata": {"name": "infra"},
                "spec": {
                    "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "infra"}},
                    "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}},
                }
            }),
        ),
        (kinds::machine_config(), {
            let mut mc = machine_config("00-infra", "motd", "infra\n");
            mc["metadata"]["labels"]["machineconfiguration.openshift.io/role"] = json!("infra");
            mc
        }),
        (kinds::machine_os_config(), {
            let mut mosc = machine_os_config(push);
            mosc["metadata"]["name"] = json!("infra");
            mosc["spec"]["machineConfigPool"]["name"] = json!("infra");
            mosc
        }),
    ]
}

fn recorded(list: &[kube::api::DynamicObject], name: &str) -> bool {
    list.iter().any(|m| {
        kube::ResourceExt::name_any(m) == name
            && m.data
                .pointer("/status/currentImagePullSpec")
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains("@sha256:"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_pool_does_not_hold_up_the_others() {
    let c = Cluster::start().await;
    let host = c.registry.host();
    // Every status write for pool worker's MachineOSConfig: 429, come back in 10 s.
    c.server.controls().fail_next(
        RequestMatch::path(format!("{GROUP}/machineosconfigs/worker/status")),
        u32::MAX,
        Fault::too_many_requests(10),
    );
    c.setup(&format!("{host}/machineos/worker:latest"), "hello\n")
        .await;
    for (ar, obj) in infra_objects(&format!("{host}/machineos/infra:latest")) {
        c.apply(&ar, obj).await;
    }
    let ctl = c.controller().await;

    let moscs = c
        .until(
            &kinds::machine_os_config(),
            "pool infra's image recorded",
            |l| recorded(l, "infra"),
        )
        .await;
    assert!(
        !recorded(&moscs, "worker"),
        "worker's status writes are all refused"
    );
    // The throttled pool was not hammered either: it waited what the server asked.
    let throttled = c.server.controls().counts().get(
        "patch",
        "machineosconfigs.machineconfiguration.openshift.io/status",
    );
    assert!(throttled < 20, "{throttled} status patches");

    c.server.controls().clear();
    c.until(&kinds::machine_os_config(), "pool worker catches up", |l| {
        recorded(l, "worker")
    })
    .await;
    ctl.stop().await;
}
