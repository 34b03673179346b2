//! The controller with the permissions `deploy/` gives it, enforced: the test API server
//! authorizes its ServiceAccount's token by `deploy/rbac.yaml`'s Roles and bindings, as a
//! real cluster would. A pool opts in, and its image is built, pushed and recorded — every
//! request the controller makes for that is allowed — while what the Role does not grant
//! (reading Secrets in another namespace, writing nodes' status) is refused.

mod common;

use common::*;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use machineos_controller::kinds;
use serde_json::Value;

/// `deploy/rbac.yaml`'s ClusterRole, ClusterRoleBinding, Role and RoleBinding, created as
/// `kubectl apply` would.
async fn apply_deploy_rbac(c: &Cluster) -> usize {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/rbac.yaml");
    let yaml = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let mut applied = 0;
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let plural = match kind.as_str() {
            "ClusterRole" => "clusterroles",
            "ClusterRoleBinding" => "clusterrolebindings",
            "Role" => "roles",
            "RoleBinding" => "rolebindings",
            _ => continue,
        };
        let gvk = kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", &kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        let obj: DynamicObject = serde_json::from_value(doc).unwrap();
        let api: Api<DynamicObject> = match obj.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(c.client.clone(), ns, &ar),
            None => Api::all_with(c.client.clone(), &ar),
        };
        api.create(&PostParams::default(), &obj).await.unwrap();
        applied += 1;
    }
    applied
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_builds_and_records_with_the_rbac_of_deploy() {
    let c = Cluster::start().await;
    assert_eq!(apply_deploy_rbac(&c).await, 4);
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
    ctl.stop().await;
    // Nothing the controller asked for on the way was refused (a 403 is retried and logged,
    // so the build could have got through anyway): only the test's own probe.
    let denied = c.server.denied();
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert!(denied[0].contains("list secrets. default/-"), "{denied:#?}");
}
