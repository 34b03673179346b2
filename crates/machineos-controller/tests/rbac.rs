//! The controller with the permissions `deploy/` gives it, enforced: the test API server
//! authorizes its ServiceAccount's token by `deploy/rbac.yaml`'s Roles and bindings, and
//! checks owner references as OpenShift's OwnerReferencesPermissionEnforcement admission
//! does, as a real cluster would. Leader election runs, a pool opts in, its image is built,
//! pushed and recorded, and its node is targeted — every request the controller makes for
//! that is allowed — while what the Role does not grant (reading Secrets in another
//! namespace) is refused. Then the audit: every grant this path left unused is one that
//! another path uses (named below), so the Roles hold no verb the controller never uses.

mod common;

use common::*;
use std::time::Duration;

use kube::api::{Api, PostParams};
use machineos_controller::kinds;
use machineos_controller::leader::{self, LeaderConfig};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_builds_and_records_with_the_rbac_of_deploy() {
    let c = Cluster::start().await;
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/rbac.yaml"
    ))
    .unwrap();
    assert_eq!(c.server.apply_rbac_yaml(&rbac), Ok(4));
    let kc = c
        .server
        .service_account_kubeconfig(NS, "machineos-controller")
        .unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&kc).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    let sa = kube::Client::try_from(machineos_kube::client_config(cfg)).unwrap();

    // What the Role does not grant is refused.
    let elsewhere: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(sa.clone(), "default");
    assert!(matches!(
        elsewhere.list(&Default::default()).await,
        Err(kube::Error::Api(s)) if s.code == 403
    ));

    // Leader election with the ServiceAccount: the Lease created, renewed, released.
    let stop = tokio_util::sync::CancellationToken::new();
    let (leadership, election) = leader::spawn(
        sa.clone(),
        LeaderConfig {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(100),
            ..LeaderConfig::new(NS, "rbac-test")
        },
        stop.clone(),
    );
    assert!(leadership.wait_until_leader().await);

    // A worker node: the rollout targets it with the pool's image.
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "worker-0", "labels": {"node-role.kubernetes.io/worker": ""}},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(c.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    c.setup(
        &format!("{}/machineos/worker:latest", c.registry.host()),
        "hello\n",
    )
    .await;
    let ctl = c.controller_as(sa, c.options()).await;
    let builds = c
        .until(&kinds::build(), "one Succeeded build", |l| {
            l.iter().any(|b| phase(b) == "Succeeded")
        })
        .await;
    let image = builds[0].data["status"]["digestedImagePushSpec"]
        .as_str()
        .unwrap()
        .to_owned();
    c.until_recorded("the image recorded", "currentImagePullSpec", &image)
        .await;
    c.until(&kinds::machine_config_node(), "the node targeted", |l| {
        !l.is_empty()
    })
    .await;
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(c.client.clone());
    for _ in 0..600 {
        let n = nodes.get("worker-0").await.unwrap();
        if n.metadata
            .annotations
            .unwrap_or_default()
            .values()
            .any(|v| *v == image)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ctl.stop().await;
    stop.cancel();
    election.await.unwrap();
    // Nothing the controller asked for on the way was refused (a 403 is retried and logged,
    // so the build could have got through anyway): only the test's own probe.
    let denied = c.server.denied();
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert!(denied[0].contains("list secrets. default/-"), "{denied:#?}");

    // The audit. What this path did not use, each used elsewhere:
    let expected = [
        // Retention deletes old builds and images (build/execute.rs DeleteBuild,
        // DeleteMachineOSImage); a transient failure's retry annotates the build (RetryBuild).
        "ClusterRole machineos-controller: patch machineosbuilds.machineconfiguration.openshift.io",
        "ClusterRole machineos-controller: delete machineosbuilds.machineconfiguration.openshift.io",
        "ClusterRole machineos-controller: delete machineosimages.machineconfiguration.openshift.io",
        // MachineImages: their status (rollout/execute.rs).
        "ClusterRole machineos-controller: get machineimages.machineconfiguration.openshift.io",
        "ClusterRole machineos-controller: update machineimages/status.machineconfiguration.openshift.io",
        // The Job and OpenShift Build backends: their ephemeral ConfigMaps and merged pull
        // Secret, the Job or Build (runsteps.rs).
        "Role machineos/machineos-controller: create configmaps",
        "Role machineos/machineos-controller: create secrets",
        "Role machineos/machineos-controller: delete configmaps",
        "Role machineos/machineos-controller: delete secrets",
        "Role machineos/machineos-controller: create jobs.batch",
        "Role machineos/machineos-controller: delete jobs.batch",
        "Role machineos/machineos-controller: create builds.build.openshift.io",
        "Role machineos/machineos-controller: delete builds.build.openshift.io",
        // A MachineConfigNode whose spec changed (the node left for another pool).
        "ClusterRole machineos-controller: patch machineconfignodes.machineconfiguration.openshift.io",
        // The agents' copy of the MachineImages' pull Secrets (rollout/secrets.rs).
        "Role machineos/machineos-controller: update secrets [machineos-node-pull-secrets]",
        // An Event repeated: its series patched (machineos-kube events.rs).
        "ClusterRole machineos-controller: patch events.events.k8s.io",
        // A lifted quarantine's annotation removed (rollout/execute.rs).
        "ClusterRole machineos-controller: patch machineosimages.machineconfiguration.openshift.io",
        // The merged node disruption policies, on a cluster serving MachineConfiguration
        // (rollout/disruption.rs).
        "ClusterRole machineos-controller: patch machineconfigurations/status.operator.openshift.io [cluster]",
    ];
    let mut unused = c.server.unused_grants(NS, "machineos-controller");
    unused.sort();
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(unused, expected);
}
