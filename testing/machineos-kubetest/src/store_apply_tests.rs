//! Server-side apply and managedFields through the store: create-on-apply, conflicts,
//! force, removal, dryRun, preconditions, `/status`, custom resources typed by their CRD
//! schema, and the `Update` entries of creates, updates and patches.

use serde_json::{Value, json};

use crate::clock::ManualClock;
use crate::patch::PatchType;
use crate::resource::GroupResource;
use crate::store::{Store, StoreConfig, Subresource, WriteOptions};
use crate::store_apply::{ApplyOptions, FieldManager, parse_apply_body};

const W: WriteOptions = WriteOptions { dry_run: false };
const T0: &str = "2024-01-01T00:00:00Z";

fn cm() -> GroupResource {
    GroupResource::new("", "configmaps")
}
fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn store() -> (Store, ManualClock) {
    let clock = ManualClock::new(1_704_067_200);
    let s = Store::new(StoreConfig {
        clock: std::sync::Arc::new(clock.clone()),
        seed: 7,
        history: 1000,
    });
    (s, clock)
}

fn ao(manager: &str, force: bool) -> ApplyOptions {
    ApplyOptions {
        manager: manager.into(),
        force,
        dry_run: false,
    }
}

fn cmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data})
}

fn apply_cm(s: &mut Store, config: &Value, o: &ApplyOptions) -> Result<(Value, bool), String> {
    s.apply(&cm(), Some("default"), "x", config, Subresource::Main, o)
        .map_err(|e| e.to_string())
}

/// `manager` → (operation, fieldsV1) of an object's managedFields.
fn entries(o: &Value) -> Vec<(String, String, Value)> {
    o["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                        e["fieldsV1"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn apply_creates_then_merges_and_records_the_applier() {
    let (mut s, clock) = store();
    let (o, created) = apply_cm(&mut s, &cmap(json!({"a": "1"})), &ao("ssa", false)).unwrap();
    assert!(created);
    assert_eq!(o["data"], json!({"a": "1"}));
    assert_eq!(o["metadata"]["namespace"], "default");
    assert_eq!(
        o["metadata"]["managedFields"],
        json!([{"manager": "ssa", "operation": "Apply", "apiVersion": "v1", "time": T0,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}])
    );
    // Re-applying the same configuration changes nothing (no new resourceVersion).
    clock.advance(60);
    let (again, created) = apply_cm(&mut s, &cmap(json!({"a": "1"})), &ao("ssa", false)).unwrap();
    assert!(!created);
    assert_eq!(again, o);
    // A second applier adds a field; both keep theirs.
    let (o, _) = apply_cm(&mut s, &cmap(json!({"b": "2"})), &ao("other", false)).unwrap();
    assert_eq!(o["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(entries(&o).len(), 2);
    // Wrong type, managedFields in the body, a missing manager: 400s and a 422.
    let wrong = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    assert_eq!(
        apply_cm(&mut s, &wrong, &ao("ssa", false)).unwrap_err(),
        "invalid object type: /v1, Kind=Secret"
    );
    let mut mf = cmap(json!({}));
    mf["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        apply_cm(&mut s, &mf, &ao("ssa", false)).unwrap_err(),
        "metadata.managedFields must be nil"
    );
    assert_eq!(
        apply_cm(&mut s, &cmap(json!({})), &ao("", false)).unwrap_err(),
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    let other_name = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}});
    let err = s
        .apply(
            &cm(),
            Some("default"),
            "z",
            &other_name,
            Subresource::Main,
            &ao("m", false),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the name of the object (y) does not match the name on the URL (z)"
    );
}

#[test]
fn conflicts_force_and_removal_through_the_store() {
    let (mut s, _) = store();
    let create = FieldManager::named("kubectl-create");
    s.as_manager(&create, |s| {
        s.create(&cm(), Some("default"), &cmap(json!({"a": "1"})), W)
    })
    .unwrap();
    let err = s
        .apply(
            &cm(),
            Some("default"),
            "x",
            &cmap(json!({"a": "2"})),
            Subresource::Main,
            &ao("ssa", false),
        )
        .unwrap_err();
    assert_eq!(err.code(), 409);
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a"#
    );
    assert_eq!(
        s.get(&cm(), Some("default"), "x").unwrap()["data"]["a"],
        "1",
        "a conflict changes nothing"
    );
    let (o, _) = apply_cm(&mut s, &cmap(json!({"a": "2", "b": "3"})), &ao("ssa", true)).unwrap();
    assert_eq!(o["data"], json!({"a": "2", "b": "3"}));
    assert_eq!(
        entries(&o),
        vec![
            (
                "ssa".into(),
                "Apply".into(),
                json!({"f:data": {"f:a": {}, "f:b": {}}})
            ),
            (
                "kubectl-create".into(),
                "Update".into(),
                json!({"f:data": {}})
            ),
        ]
    );
    // Dropping b from the configuration removes it; dryRun stores nothing.
    let dry = ApplyOptions {
        dry_run: true,
        ..ao("ssa", false)
    };
    let before = s.get(&cm(), Some("default"), "x").unwrap();
    let (would, _) = apply_cm(&mut s, &cmap(json!({"a": "2"})), &dry).unwrap();
    assert_eq!(would["data"], json!({"a": "2"}));
    assert_eq!(s.get(&cm(), Some("default"), "x").unwrap(), before);
    let (o, _) = apply_cm(&mut s, &cmap(json!({"a": "2"})), &ao("ssa", false)).unwrap();
    assert_eq!(o["data"], json!({"a": "2"}));
    // A stale resourceVersion in the configuration is the update's 409.
    let mut stale = cmap(json!({"a": "3"}));
    stale["metadata"]["resourceVersion"] = json!("1");
    let err = apply_cm(&mut s, &stale, &ao("ssa", false)).unwrap_err();
    assert!(err.contains("the object has been modified"), "{err}");
}

#[test]
fn updates_record_their_manager_and_managed_fields_can_be_replaced() {
    let (mut s, clock) = store();
    let mk = FieldManager::from_request(&[], Some("kubectl/v1.32.4 (linux/amd64) kubernetes/abc"));
    assert_eq!(mk.name(), "kubectl");
    assert_eq!(FieldManager::default().name(), "unknown");
    let o = s
        .as_manager(&mk, |s| {
            s.create(&cm(), Some("default"), &cmap(json!({"a": "1"})), W)
        })
        .unwrap();
    assert_eq!(
        entries(&o),
        vec![(
            "kubectl".into(),
            "Update".into(),
            json!({"f:data": {".": {}, "f:a": {}}})
        )]
    );
    clock.advance(60);
    // A merge patch by another manager takes a and adds b.
    let (code, o) = s
        .patch_as(
            &FieldManager::named("patcher"),
            &cm(),
            Some("default"),
            "x",
            PatchType::Merge,
            &json!({"data": {"a": "9", "b": "2"}}),
            Subresource::Main,
            W,
        )
        .unwrap();
    assert_eq!(code, 200);
    let e = entries(&o);
    assert_eq!(
        e[1],
        (
            "patcher".into(),
            "Update".into(),
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        )
    );
    assert_eq!(
        o["metadata"]["managedFields"][1]["time"],
        "2024-01-01T00:01:00Z"
    );
    // A PUT without managedFields keeps them; one with [] clears them; one with its own
    // entries replaces them.
    let mut body = o.clone();
    body["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    body["data"]["c"] = json!("3");
    let o = s
        .as_manager(&FieldManager::named("put"), |s| {
            s.update(&cm(), Some("default"), "x", &body, W)
        })
        .unwrap();
    assert_eq!(entries(&o).len(), 3);
    let mut body = o.clone();
    body["metadata"]["managedFields"] = json!([]);
    let o = s
        .as_manager(&FieldManager::named("put"), |s| {
            s.update(&cm(), Some("default"), "x", &body, W)
        })
        .unwrap();
    assert!(o["metadata"].get("managedFields").is_none(), "{o}");
    let mut body = o.clone();
    body["metadata"]["managedFields"] = json!([{"manager": "mine", "operation": "Update",
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
    let o = s
        .as_manager(&FieldManager::named("put"), |s| {
            s.update(&cm(), Some("default"), "x", &body, W)
        })
        .unwrap();
    assert_eq!(entries(&o)[0].0, "mine");
    // Library writes without a field manager keep the entries.
    let mut body = o.clone();
    body["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    body["data"]["d"] = json!("4");
    let o2 = s.update(&cm(), Some("default"), "x", &body, W).unwrap();
    assert_eq!(
        o2["metadata"]["managedFields"],
        o["metadata"]["managedFields"]
    );
}

#[test]
fn patch_options_are_validated_as_the_api_server_does() {
    let (mut s, _) = store();
    let none = FieldManager::default();
    let err = s
        .patch_as(
            &none,
            &cm(),
            Some("default"),
            "x",
            PatchType::Apply,
            &cmap(json!({})),
            Subresource::Main,
            W,
        )
        .unwrap_err();
    let st = err.to_status();
    assert_eq!(
        (st["code"].clone(), st["reason"].clone()),
        (json!(422), json!("Invalid"))
    );
    assert_eq!(
        st["details"]["causes"],
        json!([{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}])
    );
    let forced = FieldManager::from_request(&[("force".into(), "true".into())], None);
    assert_eq!(
        forced.check(PatchType::Merge).unwrap_err().to_string(),
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
    );
    let (code, _) = s
        .patch_as(
            &FieldManager::named("m"),
            &cm(),
            Some("default"),
            "x",
            PatchType::Apply,
            &cmap(json!({"a": "1"})),
            Subresource::Main,
            W,
        )
        .unwrap();
    assert_eq!(code, 201, "apply creates");
    assert_eq!(
        parse_apply_body(b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: '1'\n").unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}})
    );
    assert_eq!(parse_apply_body(b"").unwrap(), json!({}));
    assert_eq!(parse_apply_body(b"[1]").unwrap_err().code(), 400);
}

#[test]
fn status_apply_owns_only_status_and_main_apply_ignores_it() {
    let (mut s, _) = store();
    let pod = |extra: Value| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let (Some(m), Value::Object(e)) = (p.as_object_mut(), extra) {
            m.extend(e);
        }
        p
    };
    let (o, _) = s
        .apply(
            &pods(),
            Some("default"),
            "p",
            &pod(json!({"status": {"phase": "Running"}})),
            Subresource::Main,
            &ao("ctl", false),
        )
        .unwrap();
    assert_eq!(
        o["status"]["phase"], "Pending",
        "status is not written through the main endpoint"
    );
    assert!(entries(&o)[0].2.get("f:status").is_none(), "{o}");
    let status = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    let (o, _) = s
        .apply(
            &pods(),
            Some("default"),
            "p",
            &status,
            Subresource::Status,
            &ao("kubelet", false),
        )
        .unwrap();
    assert_eq!(o["status"]["phase"], "Running");
    assert_eq!(o["spec"]["containers"][0]["image"], "i");
    let kubelet = o["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubelet")
        .unwrap();
    assert_eq!(kubelet["subresource"], "status");
    assert_eq!(
        kubelet["fieldsV1"],
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:phase": {}}})
    );
    // The conflict names the subresource.
    let err = s
        .apply(
            &pods(),
            Some("default"),
            "p",
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Failed"}}),
            Subresource::Status,
            &ao("other", false),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubelet" with subresource "status": .status.phase"#
    );
    // Through /status a missing object is a 404.
    let err = s
        .apply(
            &pods(),
            Some("default"),
            "nope",
            &status,
            Subresource::Status,
            &ao("k", false),
        )
        .unwrap_err();
    assert_eq!(err.code(), 404);
}

#[test]
fn custom_resources_merge_by_their_crd_schema() {
    let (mut s, _) = store();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "parts": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "count": {"type": "integer"}}}}}}}}}}]}
    });
    s.create(
        &GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions"),
        None,
        &crd,
        W,
    )
    .unwrap();
    let w = GroupResource::new("example.com", "widgets");
    let widget = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    s.apply(
        &w,
        Some("default"),
        "w",
        &widget(json!({"size": 1, "parts": [{"name": "a", "count": 1}]})),
        Subresource::Main,
        &ao("one", false),
    )
    .unwrap();
    let (o, _) = s
        .apply(
            &w,
            Some("default"),
            "w",
            &widget(json!({"parts": [{"name": "b", "count": 2}]})),
            Subresource::Main,
            &ao("two", false),
        )
        .unwrap();
    assert_eq!(
        o["spec"]["parts"],
        json!([{"name": "a", "count": 1}, {"name": "b", "count": 2}]),
        "items merged by the CRD's list-map key"
    );
    assert_eq!(o["metadata"]["generation"], 2);
    let (o, _) = s
        .apply(
            &w,
            Some("default"),
            "w",
            &widget(json!({"size": 1})),
            Subresource::Main,
            &ao("one", false),
        )
        .unwrap();
    assert_eq!(o["spec"]["parts"], json!([{"name": "b", "count": 2}]));
    // Schema validation still applies to the merged object.
    let err = s
        .apply(
            &w,
            Some("default"),
            "w",
            &widget(json!({"size": "big"})),
            Subresource::Main,
            &ao("one", false),
        )
        .unwrap_err();
    assert_eq!(err.code(), 422, "{err}");
}
