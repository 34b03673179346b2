//! What each move of a rollout costs its node, read from the test API server as `machineos
//! rollout plan` reads it: the nodes' `currentConfig`, the rendered MachineConfigs, and the
//! `MachineConfiguration` object `cluster` when the cluster serves one (its CRD created
//! here, schemaless) — else the MCO's defaults.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use machineos_controller::kinds;
use machineos_controller::rollout::disruption_from_cluster;
use machineos_disruption::{Action, Class};
use serde_json::json;

fn rendered(name: &str, files: &[(&str, &str)]) -> serde_json::Value {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|(p, d)| json!({"path": p, "contents": {"source": format!("data:,{d}")}, "mode": 420}))
        .collect();
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": files}}},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_move_costs_what_the_policies_say_defaults_then_the_clusters() {
    let c = Cluster::start().await;
    let base = [("/etc/containers/policy.json", "1"), ("/etc/motd", "1")];
    c.apply(
        &kinds::machine_config(),
        rendered("rendered-worker-a", &base),
    )
    .await;
    c.apply(
        &kinds::machine_config(),
        rendered(
            "rendered-worker-b",
            &[("/etc/containers/policy.json", "2"), ("/etc/motd", "1")],
        ),
    )
    .await;
    c.apply(
        &kinds::machine_config(),
        rendered(
            "rendered-worker-c",
            &[("/etc/containers/policy.json", "2"), ("/etc/motd", "0")],
        ),
    )
    .await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    for (name, current) in [
        ("w1", Some("rendered-worker-a")),
        ("w2", Some("rendered-worker-c")),
        ("w3", None),
        ("w4", Some("rendered-worker-gone")),
    ] {
        let mut annotations = serde_json::Map::new();
        if let Some(cfg) = current {
            annotations.insert(
                "machineconfiguration.openshift.io/currentConfig".into(),
                json!(cfg),
            );
        }
        let node =
            serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}}))
                .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let all: Vec<String> = ["w1", "w2", "w3", "w4"].map(String::from).to_vec();

    // No MachineConfiguration served: the MCO's defaults.
    let (d, source) = disruption_from_cluster(&c.client, "rendered-worker-b", &all)
        .await
        .unwrap();
    assert_eq!(source, "the MCO's defaults");
    let classes: Vec<(&str, Class)> = d.nodes.iter().map(|n| (n.node.as_str(), n.class)).collect();
    assert_eq!(
        classes,
        [
            ("w1", Class::Reload),
            ("w2", Class::Reboot),
            ("w3", Class::Reboot),
            ("w4", Class::Reboot)
        ]
    );
    assert_eq!(d.nodes[0].actions, [Action::Reload("crio.service".into())]);
    assert_eq!(d.nodes[1].reasons[0].change, "file /etc/motd");
    assert!(d.nodes[2].reasons[0].change.contains("no currentConfig"));
    assert!(
        d.nodes[3].reasons[0]
            .change
            .contains("rendered-worker-gone is gone")
    );
    assert_eq!(d.class, Class::Reboot);

    // The cluster's MachineConfiguration: /etc/motd needs nothing.
    machine_configuration(
        &c,
        json!({"nodeDisruptionPolicy": {"files": [
            {"path": "/etc/motd", "actions": [{"type": "None"}]}]}}),
    )
    .await;
    let (d, source) = disruption_from_cluster(&c.client, "rendered-worker-b", &all[..2])
        .await
        .unwrap();
    assert_eq!(source, "MachineConfiguration cluster");
    // w2 differs from the target in /etc/motd alone: nothing to do now.
    assert_eq!(d.nodes[1].class, Class::None, "{:?}", d.nodes[1]);
    assert_eq!(d.nodes[1].actions, [Action::None]);
    assert_eq!(d.class, Class::Reload, "w1's reload is the strongest");

    // A policy the API server's rules refuse never reaches the controller: the CRD machineos
    // ships carries openshift/api's rules, and the API server names the field. (Where the
    // object is stored without them, the controller's own check of the same rules refuses
    // it: machineos-disruption's `PolicyConfig::validate`, table-tested there.)
    let api = kinds::all(&c.client, &kinds::machine_configuration());
    let e = api
        .patch(
            "cluster",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"nodeDisruptionPolicy": {"sshkey": {"actions": [
                {"type": "Reboot"}, {"type": "Drain"}]}}}}),
            ),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("spec.nodeDisruptionPolicy.sshkey.actions")
            && e.to_string()
                .contains("Reboot action can only be specified standalone"),
        "{e}"
    );
    let (d, source) = disruption_from_cluster(&c.client, "rendered-worker-b", &all[..2])
        .await
        .unwrap();
    assert_eq!(source, "MachineConfiguration cluster");
    assert_eq!(d.class, Class::Reload, "the stored policies still hold");
}
