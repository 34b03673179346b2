//! The controller with the permissions `deploy/` gives it, enforced: the test API server
//! authorizes its ServiceAccount's token by `deploy/rbac.yaml`'s Roles and bindings, as a
//! real cluster would. A pool opts in, and its image is built, pushed and recorded — every
//! request the controller makes for that is allowed — while what the Role does not grant
//! (reading Secrets in another namespace, writing nodes' status) is refused.

mod common;

use common::*;
use kube::api::Api;
use machineos_controller::kinds;

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
