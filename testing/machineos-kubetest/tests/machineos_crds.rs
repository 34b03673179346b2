//! machineos's own CRDs (`machineos_api::crds()`, what `machineos crds` prints) installed in
//! the store: objects are created through them, and schema and CEL rejections come back as
//! 422 `Status` objects carrying the validator's message and causes.

use machineos_kubetest::{
    DeleteOptions, GroupResource, ListOptions, Store, StoreConfig, WriteOptions,
};
use serde_json::{Value, json};

const GROUP: &str = "machineconfiguration.openshift.io";
const W: WriteOptions = WriteOptions { dry_run: false };

fn store_with_crds() -> Store {
    let mut s = Store::new(StoreConfig::default());
    let crd_gr = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
    for crd in machineos_api::crds() {
        let crd = serde_json::to_value(&crd).expect("a CRD serializes");
        s.create(&crd_gr, None, &crd, W)
            .unwrap_or_else(|e| panic!("{}: {e}", crd["metadata"]["name"]));
    }
    s
}

fn pool(status: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"pinnedImageSets": [{"name": "test-pinnedimageset"}]},
        "status": status,
    })
}

#[test]
fn machineos_crds_register_every_kind() {
    let s = store_with_crds();
    for kind in [
        "MachineConfig",
        "MachineConfigPool",
        "MachineOSConfig",
        "MachineOSBuild",
        "MachineConfigNode",
    ] {
        let info = s
            .registry()
            .by_kind(GROUP, kind)
            .unwrap_or_else(|| panic!("{kind}"));
        assert!(info.is_custom());
        assert!(!info.namespaced, "{kind} is cluster-scoped");
    }
    let mcp = s
        .registry()
        .get(&GroupResource::new(GROUP, "machineconfigpools"))
        .unwrap();
    assert!(mcp.status_subresource);
    assert!(
        !mcp.printer_columns.is_empty(),
        "printer columns kept for Table rendering"
    );
    assert!(!s.registry().resolve("mcp").is_empty());
}

#[test]
fn a_machine_config_pool_is_created_and_its_status_cel_rule_enforced() {
    let mut s = store_with_crds();
    let gr = GroupResource::new(GROUP, "machineconfigpools");
    let created = s.create(&gr, None, &pool(json!({})), W).unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    let sync = |updated: i64| {
        json!({"poolSynchronizersStatus": [{
            "poolSynchronizerType": "PinnedImageSets", "machineCount": 3,
            "updatedMachineCount": updated, "readyMachineCount": 3,
            "availableMachineCount": 3, "unavailableMachineCount": 0, "observedGeneration": 1}]})
    };
    // A custom resource's update names the resourceVersion it read (store.go, Update).
    let with_rv = |mut o: Value, from: &Value| {
        o["metadata"]["resourceVersion"] = from["metadata"]["resourceVersion"].clone();
        o
    };
    let ok = s
        .update_status(&gr, None, "worker", &with_rv(pool(sync(3)), &created), W)
        .unwrap();
    assert_eq!(
        ok["status"]["poolSynchronizersStatus"][0]["machineCount"],
        3
    );
    let e = s
        .update_status(&gr, None, "worker", &with_rv(pool(sync(4)), &ok), W)
        .unwrap_err();
    let status = e.to_status();
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    let msg = status["message"].as_str().unwrap();
    assert!(
        msg.starts_with(
            r#"MachineConfigPool.machineconfiguration.openshift.io "worker" is invalid: "#
        ),
        "{msg}"
    );
    assert!(
        msg.contains("machineCount must be greater than or equal to updatedMachineCount"),
        "{msg}"
    );
    let causes = status["details"]["causes"].as_array().unwrap();
    assert!(
        causes.iter().any(|c| c["reason"] == "FieldValueInvalid"
            && c["field"]
                .as_str()
                .is_some_and(|f| f.starts_with("status.poolSynchronizersStatus"))
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("updatedMachineCount"))),
        "{causes:?}"
    );
    assert_eq!(status["details"]["kind"], "MachineConfigPool");
    assert_eq!(status["details"]["group"], GROUP);
    // A schema rejection on create.
    let e = s
        .create(
            &gr,
            None,
            &json!({"metadata": {"name": "bad"}, "spec": {"osImageStream": {"name": ""}}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert!(
        e.to_string()
            .contains("spec.osImageStream.name in body should be at least 1 chars long"),
        "{e}"
    );
}

#[test]
fn a_machine_os_build_is_created_listed_and_deleted() {
    let mut s = store_with_crds();
    let gr = GroupResource::new(GROUP, "machineosbuilds");
    let mosb = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSBuild",
        "metadata": {"generateName": "worker-"},
        "spec": {
            "machineConfig": {"name": "rendered-worker-abcd"},
            "machineOSConfig": {"name": "worker"},
            "renderedImagePushSpec": "quay.io/mco/renderedImage:latest"
        }
    });
    let b = s.create(&gr, None, &mosb, W).unwrap();
    let name = b["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("worker-"));
    // Status with imageBuilderType Job but no job reference violates a CEL rule.
    let mut bad = b.clone();
    bad["status"] = json!({"builder": {"imageBuilderType": "Job"}});
    let e = s.update_status(&gr, None, &name, &bad, W).unwrap_err();
    assert!(
        e.to_string()
            .contains("job is required when imageBuilderType is Job, and forbidden otherwise"),
        "{e}"
    );
    let list = s.list(&gr, None, &ListOptions::default()).unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.kind, "MachineOSBuildList");
    s.delete(&gr, None, &name, &DeleteOptions::default())
        .unwrap();
    assert_eq!(s.get(&gr, None, &name).unwrap_err().code(), 404);
}
