//! The store's semantics, one test per semantic.

use serde_json::{Value, json};

use crate::clock::ManualClock;
use crate::error::ApiError;
use crate::list::{ListOptions, WatchOptions};
use crate::patch::PatchType;
use crate::resource::{GroupResource, Propagation};
use crate::selector::Selectors;
use crate::store::{DeleteOptions, Deleted, Store, StoreConfig, Subresource, WriteOptions};
use crate::watch::EventType;

const W: WriteOptions = WriteOptions { dry_run: false };

fn cm() -> GroupResource {
    GroupResource::new("", "configmaps")
}
fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}
fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}
fn nss() -> GroupResource {
    GroupResource::new("", "namespaces")
}
fn crds() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}
fn widgets() -> GroupResource {
    GroupResource::new("example.com", "widgets")
}

fn store() -> (Store, ManualClock) {
    let clock = ManualClock::new(1_704_067_200);
    let s = Store::new(StoreConfig {
        clock: std::sync::Arc::new(clock.clone()),
        seed: 42,
        history: 1000,
    });
    (s, clock)
}

fn rv(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn mk(s: &mut Store, name: &str, data: Value) -> Value {
    s.create(
        &cm(),
        Some("default"),
        &json!({"metadata": {"name": name}, "data": data}),
        W,
    )
    .unwrap()
}

fn owned(uid: &str, block: bool) -> Value {
    json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid,
            "blockOwnerDeletion": block}])
}

#[test]
fn create_sets_uid_creation_timestamp_and_type_meta() {
    let (mut s, _) = store();
    let o = mk(&mut s, "a", json!({"k": "v"}));
    assert_eq!(o["apiVersion"], "v1");
    assert_eq!(o["kind"], "ConfigMap");
    assert_eq!(o["metadata"]["namespace"], "default");
    assert_eq!(o["metadata"]["creationTimestamp"], "2024-01-01T00:00:00Z");
    assert_eq!(o["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(
        o["metadata"].get("generation").is_none(),
        "ConfigMaps have none"
    );
    let b = mk(&mut s, "b", json!({}));
    assert_ne!(o["metadata"]["uid"], b["metadata"]["uid"]);
    assert_eq!(s.get(&cm(), Some("default"), "a").unwrap(), o);
    // Deterministic: the same seed gives the same uid.
    let (mut s2, _) = store();
    assert_eq!(
        mk(&mut s2, "a", json!({"k": "v"}))["metadata"]["uid"],
        o["metadata"]["uid"]
    );
}

#[test]
fn generate_name_appends_five_random_characters() {
    let (mut s, _) = store();
    let o = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"generateName": "job-"}}),
            W,
        )
        .unwrap();
    let name = o["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
    let long = "a".repeat(70);
    let o = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"generateName": long}}),
            W,
        )
        .unwrap();
    assert_eq!(o["metadata"]["name"].as_str().unwrap().len(), 63);
    let e = s
        .create(&cm(), Some("default"), &json!({"metadata": {}}), W)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required"#
    );
}

#[test]
fn resource_versions_increase_across_resources() {
    let (mut s, _) = store();
    let start = s.resource_version();
    let a = mk(&mut s, "a", json!({}));
    let n = s
        .create(
            &GroupResource::new("", "nodes"),
            None,
            &json!({"metadata": {"name": "n1"}}),
            W,
        )
        .unwrap();
    let a2 = s
        .update(
            &cm(),
            Some("default"),
            "a",
            &json!({"metadata": {"name": "a"}, "data": {"x": "1"}}),
            W,
        )
        .unwrap();
    assert_eq!((rv(&a), rv(&n), rv(&a2)), (start + 1, start + 2, start + 3));
    assert_eq!(
        a["metadata"]["resourceVersion"],
        json!((start + 1).to_string())
    );
    assert_eq!(s.resource_version(), start + 3);
    // A no-op update commits nothing.
    let same = s.update(&cm(), Some("default"), "a", &a2, W).unwrap();
    assert_eq!((rv(&same), s.resource_version()), (start + 3, start + 3));
}

#[test]
fn create_of_an_existing_name_is_already_exists() {
    let (mut s, _) = store();
    mk(&mut s, "a", json!({}));
    let e = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": "a"}}),
            W,
        )
        .unwrap_err();
    assert!(matches!(e, ApiError::AlreadyExists { .. }));
    assert_eq!(e.to_string(), r#"configmaps "a" already exists"#);
    assert_eq!(e.code(), 409);
}

#[test]
fn missing_objects_are_not_found() {
    let (mut s, _) = store();
    let msg = r#"configmaps "x" not found"#;
    let e = s.get(&cm(), Some("default"), "x").unwrap_err();
    assert_eq!((e.to_string().as_str(), e.code()), (msg, 404));
    let e = s
        .update(
            &cm(),
            Some("default"),
            "x",
            &json!({"metadata": {"name": "x"}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.to_string(), msg);
    let e = s
        .delete(&cm(), Some("default"), "x", &DeleteOptions::default())
        .unwrap_err();
    assert_eq!(e.to_string(), msg);
    let e = s
        .create(&cm(), Some("nope"), &json!({"metadata": {"name": "x"}}), W)
        .unwrap_err();
    assert_eq!(e.to_string(), r#"namespaces "nope" not found"#);
    let e = s
        .get(&GroupResource::new("x.io", "things"), None, "a")
        .unwrap_err();
    assert_eq!(e.to_status()["reason"], "NotFound");
}

#[test]
fn stale_resource_version_is_a_conflict_and_none_is_unconditional() {
    let (mut s, _) = store();
    let a = mk(&mut s, "a", json!({"v": "1"}));
    let mut b = a.clone();
    b["data"]["v"] = json!("2");
    let b = s.update(&cm(), Some("default"), "a", &b, W).unwrap();
    let mut stale = a.clone();
    stale["data"]["v"] = json!("3");
    let e = s
        .update(&cm(), Some("default"), "a", &stale, W)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again"#
    );
    assert_eq!(e.code(), 409);
    let mut blind = stale.clone();
    blind["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let c = s.update(&cm(), Some("default"), "a", &blind, W).unwrap();
    assert_eq!(c["data"]["v"], "3");
    assert!(rv(&c) > rv(&b));
    let mut wrong_uid = c.clone();
    wrong_uid["metadata"]["uid"] = json!("other");
    let e = s
        .update(&cm(), Some("default"), "a", &wrong_uid, W)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Precondition failed: UID in precondition: other"),
        "{e}"
    );
}

#[test]
fn generation_bumps_only_on_spec_changes() {
    let (mut s, _) = store();
    let j = s
        .create(
            &jobs(),
            Some("default"),
            &json!({"metadata": {"name": "j"}, "spec": {"x": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}, "status": {"active": 9}}),
            W,
        )
        .unwrap();
    assert_eq!(j["metadata"]["generation"], 1);
    assert!(j.get("status").is_none(), "status dropped on create");
    let mut l = j.clone();
    l["metadata"]["labels"] = json!({"a": "b"});
    let l = s.update(&jobs(), Some("default"), "j", &l, W).unwrap();
    assert_eq!(l["metadata"]["generation"], 1, "metadata change");
    let st = s
        .update_status(
            &jobs(),
            Some("default"),
            "j",
            &json!({"status": {"active": 1}}),
            W,
        )
        .unwrap();
    assert_eq!(st["metadata"]["generation"], 1, "status change");
    let mut sp = st.clone();
    sp["spec"]["x"] = json!(2);
    let sp = s.update(&jobs(), Some("default"), "j", &sp, W).unwrap();
    assert_eq!(sp["metadata"]["generation"], 2, "spec change");
    // A client cannot set generation.
    let mut forged = sp.clone();
    forged["metadata"]["generation"] = json!(99);
    forged["metadata"]["annotations"] = json!({"x": "y"});
    let f = s.update(&jobs(), Some("default"), "j", &forged, W).unwrap();
    assert_eq!(f["metadata"]["generation"], 2);
}

#[test]
fn status_subresource_separates_status_from_the_rest() {
    let (mut s, _) = store();
    let p = s
        .create(
            &pods(),
            Some("default"),
            &json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}}),
            W,
        )
        .unwrap();
    assert_eq!(p["status"], json!({"phase": "Pending"}));
    // The main endpoint ignores status.
    let mut m = p.clone();
    m["status"] = json!({"phase": "Running"});
    m["spec"]["nodeName"] = json!("n2");
    let m = s.update(&pods(), Some("default"), "p", &m, W).unwrap();
    assert_eq!(
        (m["status"]["phase"].clone(), m["spec"]["nodeName"].clone()),
        (json!("Pending"), json!("n2"))
    );
    // /status changes only status, ignoring spec and metadata.
    let mut st = m.clone();
    st["status"] = json!({"phase": "Succeeded"});
    st["spec"]["nodeName"] = json!("n3");
    st["metadata"]["labels"] = json!({"a": "b"});
    let st = s
        .update_status(&pods(), Some("default"), "p", &st, W)
        .unwrap();
    assert_eq!(st["status"]["phase"], "Succeeded");
    assert_eq!(st["spec"]["nodeName"], "n2");
    assert!(st["metadata"].get("labels").is_none());
    // Stale resourceVersion on /status is still a conflict.
    let e = s
        .update_status(&pods(), Some("default"), "p", &m, W)
        .unwrap_err();
    assert_eq!(e.code(), 409);
    // No status subresource: 404.
    let e = s
        .update_status(&cm(), Some("default"), "x", &json!({}), W)
        .unwrap_err();
    assert_eq!(e.code(), 404);
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let (mut s, clock) = store();
    let a = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": "a", "finalizers": ["x/y"]}}),
            W,
        )
        .unwrap();
    clock.advance(10);
    let d = s
        .delete(&cm(), Some("default"), "a", &DeleteOptions::default())
        .unwrap();
    let Deleted::Pending(m) = d else {
        panic!("deleted despite a finalizer")
    };
    assert_eq!(m["metadata"]["deletionTimestamp"], "2024-01-01T00:00:10Z");
    assert_eq!(m["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(rv(&m) > rv(&a));
    // Adding a finalizer to a deleting object is forbidden.
    let mut more = m.clone();
    more["metadata"]["finalizers"] = json!(["x/y", "new/one"]);
    let e = s.update(&cm(), Some("default"), "a", &more, W).unwrap_err();
    assert_eq!(e.code(), 422);
    assert!(e.to_string().contains(r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"new/one"}"#), "{e}");
    // A second delete changes nothing.
    let again = s
        .delete(&cm(), Some("default"), "a", &DeleteOptions::default())
        .unwrap();
    assert_eq!(again, Deleted::Pending(m.clone()));
    // Removing the last finalizer deletes it.
    let mut done = m.clone();
    done["metadata"]["finalizers"] = json!([]);
    let gone = s.update(&cm(), Some("default"), "a", &done, W).unwrap();
    assert!(s.get(&cm(), Some("default"), "a").is_err());
    let last = s.changes_after(rv(&m)).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].1.kind, EventType::Deleted);
    assert_eq!(last[0].1.object, gone);
}

#[test]
fn generation_is_bumped_when_deletion_starts() {
    let (mut s, _) = store();
    s.create(
        &jobs(),
        Some("default"),
        &json!({"metadata": {"name": "j", "finalizers": ["f"]}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}}),
        W,
    )
    .unwrap();
    let d = s
        .delete(&jobs(), Some("default"), "j", &DeleteOptions::default())
        .unwrap();
    assert_eq!(d.object()["metadata"]["generation"], 2);
}

fn owner_and_dependents(s: &mut Store, block: bool) -> String {
    let owner = mk(s, "owner", json!({}));
    let uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    for name in ["d1", "d2"] {
        s.create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": name, "ownerReferences": owned(&uid, block)}}),
            W,
        )
        .unwrap();
    }
    uid
}

fn names(s: &Store) -> Vec<String> {
    s.list(&cm(), Some("default"), &ListOptions::default())
        .unwrap()
        .items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn background_deletion_removes_dependents_after_the_owner() {
    let (mut s, _) = store();
    owner_and_dependents(&mut s, false);
    let before = s.resource_version();
    let d = s
        .delete(
            &cm(),
            Some("default"),
            "owner",
            &DeleteOptions {
                propagation: Some(Propagation::Background),
                ..DeleteOptions::default()
            },
        )
        .unwrap();
    assert!(matches!(d, Deleted::Gone(_)));
    assert!(names(&s).is_empty());
    let order: Vec<String> = s
        .changes_after(before)
        .unwrap()
        .iter()
        .map(|(k, e)| format!("{} {}", e.kind.as_str(), k.name))
        .collect();
    assert_eq!(order, ["DELETED owner", "DELETED d1", "DELETED d2"]);
}

/// kube-apiserver answers the owner's DELETE at once; kube-controller-manager's garbage
/// collector deletes the dependents afterwards (`garbagecollector.go`, `attemptToDeleteItem`
/// from its work queue). Deferred, the store does the same.
#[test]
fn deferred_garbage_collection_leaves_dependents_until_the_collector_runs() {
    let (mut s, _) = store();
    s.set_gc_deferred(true);
    let uid = owner_and_dependents(&mut s, false);
    let bg = DeleteOptions {
        propagation: Some(Propagation::Background),
        ..DeleteOptions::default()
    };
    let d = s.delete(&cm(), Some("default"), "owner", &bg).unwrap();
    assert!(matches!(d, Deleted::Gone(_)));
    assert_eq!(
        names(&s),
        ["d1", "d2"],
        "the DELETE returned before the collector ran"
    );
    // A dependent created now, naming the owner that is gone, is accepted too.
    s.create(
        &cm(),
        Some("default"),
        &json!({"metadata": {"name": "late", "ownerReferences": owned(&uid, false)}}),
        W,
    )
    .unwrap();
    assert_eq!(names(&s), ["d1", "d2", "late"]);
    assert!(s.collect_deferred_garbage(), "the collector had work");
    assert!(names(&s).is_empty());
    assert!(!s.collect_deferred_garbage(), "nothing since");
    // Back to synchronous: the next delete takes its dependents with it.
    s.set_gc_deferred(false);
    owner_and_dependents(&mut s, false);
    s.delete(&cm(), Some("default"), "owner", &bg).unwrap();
    assert!(names(&s).is_empty());
}

#[test]
fn foreground_deletion_removes_dependents_first_and_blocking_ones_hold_the_owner() {
    let (mut s, _) = store();
    owner_and_dependents(&mut s, true);
    // d1 has a finalizer, so it lingers and blocks the owner.
    let mut d1 = s.get(&cm(), Some("default"), "d1").unwrap();
    d1["metadata"]["finalizers"] = json!(["hold"]);
    s.update(&cm(), Some("default"), "d1", &d1, W).unwrap();
    let fg = DeleteOptions {
        propagation: Some(Propagation::Foreground),
        ..DeleteOptions::default()
    };
    let d = s.delete(&cm(), Some("default"), "owner", &fg).unwrap();
    let Deleted::Pending(o) = d else {
        panic!("owner gone before its dependents")
    };
    assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        names(&s),
        ["d1", "owner"],
        "d2 deleted, d1 held by its finalizer"
    );
    let d1 = s.get(&cm(), Some("default"), "d1").unwrap();
    assert!(d1["metadata"]["deletionTimestamp"].is_string());
    // Releasing d1 lets the owner go.
    let mut rel = d1.clone();
    rel["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
    rel["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("finalizers");
    s.update(&cm(), Some("default"), "d1", &rel, W).unwrap();
    assert!(names(&s).is_empty());

    // Non-blocking dependents do not hold the owner.
    let (mut s, _) = store();
    owner_and_dependents(&mut s, false);
    let mut d1 = s.get(&cm(), Some("default"), "d1").unwrap();
    d1["metadata"]["finalizers"] = json!(["hold"]);
    s.update(&cm(), Some("default"), "d1", &d1, W).unwrap();
    let d = s.delete(&cm(), Some("default"), "owner", &fg).unwrap();
    assert!(matches!(d, Deleted::Pending(_)));
    assert_eq!(names(&s), ["d1"]);
}

#[test]
fn orphan_deletion_keeps_dependents_without_the_reference() {
    let (mut s, _) = store();
    owner_and_dependents(&mut s, true);
    s.delete(
        &cm(),
        Some("default"),
        "owner",
        &DeleteOptions {
            propagation: Some(Propagation::Orphan),
            ..DeleteOptions::default()
        },
    )
    .unwrap();
    assert_eq!(names(&s), ["d1", "d2"]);
    let d1 = s.get(&cm(), Some("default"), "d1").unwrap();
    assert!(d1["metadata"].get("ownerReferences").is_none());
    // Jobs orphan by default.
    let j = s
        .create(
            &jobs(),
            Some("default"),
            &json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}}),
            W,
        )
        .unwrap();
    let juid = j["metadata"]["uid"].as_str().unwrap();
    s.create(
        &pods(),
        Some("default"),
        &json!({"metadata": {"name": "p", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": juid}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        W,
    )
    .unwrap();
    s.delete(&jobs(), Some("default"), "j", &DeleteOptions::default())
        .unwrap();
    assert!(s.get(&pods(), Some("default"), "p").is_ok());
}

#[test]
fn dependents_with_another_live_owner_only_lose_the_reference() {
    let (mut s, _) = store();
    let a = mk(&mut s, "a", json!({}));
    let b = mk(&mut s, "b", json!({}));
    let refs = json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": a["metadata"]["uid"]},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": b["metadata"]["uid"]},
    ]);
    s.create(
        &cm(),
        Some("default"),
        &json!({"metadata": {"name": "d", "ownerReferences": refs}}),
        W,
    )
    .unwrap();
    s.delete(&cm(), Some("default"), "a", &DeleteOptions::default())
        .unwrap();
    let d = s.get(&cm(), Some("default"), "d").unwrap();
    assert_eq!(
        d["metadata"]["ownerReferences"].as_array().unwrap().len(),
        1
    );
    assert_eq!(d["metadata"]["ownerReferences"][0]["name"], "b");
    s.delete(&cm(), Some("default"), "b", &DeleteOptions::default())
        .unwrap();
    assert!(s.get(&cm(), Some("default"), "d").is_err());
}

#[test]
fn deleting_a_namespace_deletes_its_content_then_itself() {
    let (mut s, _) = store();
    s.create(&nss(), None, &json!({"metadata": {"name": "team"}}), W)
        .unwrap();
    s.create(&cm(), Some("team"), &json!({"metadata": {"name": "a"}}), W)
        .unwrap();
    s.create(
        &cm(),
        Some("team"),
        &json!({"metadata": {"name": "b", "finalizers": ["f"]}}),
        W,
    )
    .unwrap();
    let d = s
        .delete(&nss(), None, "team", &DeleteOptions::default())
        .unwrap();
    assert_eq!(d.object()["status"]["phase"], "Terminating");
    assert!(s.get(&cm(), Some("team"), "a").is_err());
    let e = s
        .create(&cm(), Some("team"), &json!({"metadata": {"name": "c"}}), W)
        .unwrap_err();
    assert_eq!(e.code(), 403);
    assert!(e.to_string().contains("because it is being terminated"));
    let mut b = s.get(&cm(), Some("team"), "b").unwrap();
    b["metadata"]["finalizers"] = json!([]);
    s.update(&cm(), Some("team"), "b", &b, W).unwrap();
    assert!(s.get(&nss(), None, "team").is_err());
}

#[test]
fn delete_preconditions() {
    let (mut s, _) = store();
    let a = mk(&mut s, "a", json!({}));
    let e = s
        .delete(
            &cm(),
            Some("default"),
            "a",
            &DeleteOptions {
                uid: Some("nope".into()),
                ..DeleteOptions::default()
            },
        )
        .unwrap_err();
    assert_eq!(e.code(), 409);
    assert!(
        e.to_string()
            .contains("Precondition failed: UID in precondition: nope")
    );
    let e = s
        .delete(
            &cm(),
            Some("default"),
            "a",
            &DeleteOptions {
                resource_version: Some("1".into()),
                ..DeleteOptions::default()
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("ResourceVersion in precondition: 1"));
    s.delete(
        &cm(),
        Some("default"),
        "a",
        &DeleteOptions {
            uid: a["metadata"]["uid"].as_str().map(String::from),
            resource_version: a["metadata"]["resourceVersion"].as_str().map(String::from),
            ..DeleteOptions::default()
        },
    )
    .unwrap();
}

#[test]
fn names_must_be_dns_subdomains_and_objects_small() {
    let (mut s, _) = store();
    let e = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": "Bad_Name"}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert!(e.to_string().starts_with(r#"ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#), "{e}");
    assert_eq!(
        e.to_status()["details"]["causes"][0]["field"],
        "metadata.name"
    );
    let e = s
        .create(&nss(), None, &json!({"metadata": {"name": "a.b"}}), W)
        .unwrap_err();
    assert!(e.to_string().contains("RFC 1123 label"), "{e}");
    let big = "x".repeat(crate::error::MAX_OBJECT_BYTES);
    let e = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": "big"}, "data": {"x": big}}),
            W,
        )
        .unwrap_err();
    assert_eq!(
        (e.code(), e.to_status()["reason"].clone()),
        (413, json!("RequestEntityTooLarge"))
    );
}

#[test]
fn wrong_type_meta_and_namespace_are_bad_requests() {
    let (mut s, _) = store();
    for body in [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}),
        json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
        json!({"metadata": {"name": "a", "namespace": "other"}}),
        json!({"metadata": {"name": "a", "resourceVersion": "5"}}),
        json!("not an object"),
    ] {
        let e = s.create(&cm(), Some("default"), &body, W).unwrap_err();
        assert_eq!(e.code(), 400, "{body}: {e}");
    }
    mk(&mut s, "a", json!({}));
    let e = s
        .update(
            &cm(),
            Some("default"),
            "a",
            &json!({"metadata": {"name": "b"}}),
            W,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the name of the object (b) does not match the name on the URL (a)"
    );
}

#[test]
fn dry_run_returns_the_result_without_storing() {
    let (mut s, _) = store();
    let before = s.resource_version();
    let d = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": "a"}}),
            WriteOptions::DRY_RUN,
        )
        .unwrap();
    assert_eq!(d["metadata"]["name"], "a");
    assert!(d["metadata"].get("resourceVersion").is_none());
    assert!(d["metadata"]["uid"].is_string());
    assert!(s.get(&cm(), Some("default"), "a").is_err());
    assert_eq!(s.resource_version(), before);
    let a = mk(&mut s, "a", json!({"k": "1"}));
    let mut u = a.clone();
    u["data"]["k"] = json!("2");
    let d = s
        .update(&cm(), Some("default"), "a", &u, WriteOptions::DRY_RUN)
        .unwrap();
    assert_eq!(d["data"]["k"], "2");
    let p = s
        .patch(
            &cm(),
            Some("default"),
            "a",
            PatchType::Merge,
            &json!({"data": {"k": "3"}}),
            Subresource::Main,
            WriteOptions::DRY_RUN,
        )
        .unwrap();
    assert_eq!(p["data"]["k"], "3");
    let d = s
        .delete(
            &cm(),
            Some("default"),
            "a",
            &DeleteOptions {
                dry_run: true,
                ..DeleteOptions::default()
            },
        )
        .unwrap();
    assert!(matches!(d, Deleted::Gone(_)));
    assert_eq!(s.get(&cm(), Some("default"), "a").unwrap(), a);
    assert_eq!(s.resource_version(), rv(&a));
}

#[test]
fn patches_go_through_update_semantics() {
    let (mut s, _) = store();
    let p = s
        .create(
            &pods(),
            Some("default"),
            &json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "a"}]}}),
            W,
        )
        .unwrap();
    let sm = s
        .patch(
            &pods(),
            Some("default"),
            "p",
            PatchType::Strategic,
            &json!({"spec": {"containers": [{"name": "d", "image": "b"}]}}),
            Subresource::Main,
            W,
        )
        .unwrap();
    assert_eq!(sm["spec"]["containers"].as_array().unwrap().len(), 2);
    let jp = s
        .patch(
            &pods(),
            Some("default"),
            "p",
            PatchType::Json,
            &json!([{"op": "test", "path": "/spec/containers/0/image", "value": "a"},
                    {"op": "replace", "path": "/spec/containers/0/image", "value": "z"}]),
            Subresource::Main,
            W,
        )
        .unwrap();
    assert_eq!(jp["spec"]["containers"][0]["image"], "z");
    let st = s
        .patch(
            &pods(),
            Some("default"),
            "p",
            PatchType::Merge,
            &json!({"status": {"phase": "Running"}, "spec": {"nodeName": "ignored"}}),
            Subresource::Status,
            W,
        )
        .unwrap();
    assert_eq!(st["status"]["phase"], "Running");
    assert!(st["spec"].get("nodeName").is_none());
    // A patch carrying a stale resourceVersion conflicts.
    let e = s
        .patch(&pods(), Some("default"), "p", PatchType::Merge,
            &json!({"metadata": {"resourceVersion": p["metadata"]["resourceVersion"]}, "spec": {"x": 1}}), Subresource::Main, W)
        .unwrap_err();
    assert_eq!(e.code(), 409);
    let e = s
        .patch(
            &pods(),
            Some("default"),
            "p",
            PatchType::Json,
            &json!([{"op": "test", "path": "/spec/containers/0/image", "value": "a"}]),
            Subresource::Main,
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 422);
}

#[test]
fn label_and_field_selectors_filter_lists() {
    let (mut s, _) = store();
    for (name, app, node) in [("a", "web", "n1"), ("b", "db", "n1"), ("c", "web", "n2")] {
        s.create(&pods(), Some("default"), &json!({"metadata": {"name": name, "labels": {"app": app}}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}), W)
            .unwrap();
    }
    let list = |l: Option<&str>, f: Option<&str>| -> Result<Vec<String>, ApiError> {
        Ok(s.list(
            &pods(),
            None,
            &ListOptions {
                label_selector: l.map(String::from),
                field_selector: f.map(String::from),
                ..ListOptions::default()
            },
        )?
        .items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect())
    };
    assert_eq!(list(Some("app=web"), None).unwrap(), ["a", "c"]);
    assert_eq!(
        list(Some("app=web"), Some("spec.nodeName=n1")).unwrap(),
        ["a"]
    );
    assert_eq!(list(None, Some("metadata.name!=a")).unwrap(), ["b", "c"]);
    assert_eq!(list(Some("app in (db)"), None).unwrap(), ["b"]);
    assert_eq!(list(Some("app in (db"), None).unwrap_err().code(), 400);
    assert_eq!(list(None, Some("spec.bogus=1")).unwrap_err().code(), 400);
}

#[test]
fn list_pages_with_limit_and_continue() {
    let (mut s, _) = store();
    for i in 0..5 {
        mk(&mut s, &format!("c{i}"), json!({}));
    }
    let first = s
        .list(
            &cm(),
            Some("default"),
            &ListOptions {
                limit: Some(2),
                ..ListOptions::default()
            },
        )
        .unwrap();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.remaining_item_count, Some(3));
    let list_rv = first.resource_version;
    // Changes after the first page do not show in later pages (a consistent snapshot).
    mk(&mut s, "c9", json!({}));
    s.delete(&cm(), Some("default"), "c3", &DeleteOptions::default())
        .unwrap();
    let mut names: Vec<String> = first
        .items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut token = first.continue_token.clone();
    while let Some(t) = token {
        let page = s
            .list(
                &cm(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    continue_token: Some(t),
                    ..ListOptions::default()
                },
            )
            .unwrap();
        assert_eq!(page.resource_version, list_rv);
        names.extend(
            page.items
                .iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string()),
        );
        token = page.continue_token;
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
    assert_eq!(
        first.to_json()["metadata"]["continue"],
        json!(first.continue_token)
    );
    // An expired token is 410.
    s.compact(s.resource_version());
    let e = s
        .list(
            &cm(),
            Some("default"),
            &ListOptions {
                limit: Some(2),
                continue_token: first.continue_token.clone(),
                ..ListOptions::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        (e.code(), e.to_status()["reason"].clone()),
        (410, json!("Expired"))
    );
    assert!(
        e.to_string()
            .starts_with("The provided continue parameter is too old")
    );
}

#[test]
fn list_resource_version_match() {
    let (mut s, _) = store();
    let a = mk(&mut s, "a", json!({"v": "1"}));
    let at = rv(&a);
    let mut b = a.clone();
    b["data"]["v"] = json!("2");
    s.update(&cm(), Some("default"), "a", &b, W).unwrap();
    mk(&mut s, "b", json!({}));
    let o = |rv: &str, m: Option<&str>| ListOptions {
        resource_version: Some(rv.into()),
        resource_version_match: m.map(String::from),
        ..ListOptions::default()
    };
    let exact = s
        .list(&cm(), Some("default"), &o(&at.to_string(), Some("Exact")))
        .unwrap();
    assert_eq!(exact.resource_version, at);
    assert_eq!(exact.items.len(), 1);
    assert_eq!(exact.items[0]["data"]["v"], "1");
    let latest = s
        .list(&cm(), Some("default"), &ListOptions::default())
        .unwrap();
    assert_eq!(
        (latest.items.len(), latest.resource_version),
        (2, s.resource_version())
    );
    let not_older = s
        .list(
            &cm(),
            Some("default"),
            &o(&at.to_string(), Some("NotOlderThan")),
        )
        .unwrap();
    assert_eq!(not_older.resource_version, s.resource_version());
    let any = s.list(&cm(), Some("default"), &o("0", None)).unwrap();
    assert_eq!(any.items.len(), 2);
    let e = s
        .list(&cm(), Some("default"), &o("999999", None))
        .unwrap_err();
    assert_eq!(
        (e.code(), e.to_string()),
        (
            504,
            format!(
                "Too large resource version: 999999, current: {}",
                s.resource_version()
            )
        )
    );
    s.compact(at + 1);
    let e = s
        .list(&cm(), Some("default"), &o(&at.to_string(), Some("Exact")))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("too old resource version: {at} ({})", at + 1)
    );
}

#[test]
fn watch_replays_changes_and_410s_after_compaction() {
    let (mut s, _) = store();
    let start = s.resource_version();
    let a = mk(&mut s, "a", json!({}));
    let mut a2 = a.clone();
    a2["data"] = json!({"x": "1"});
    let a2 = s.update(&cm(), Some("default"), "a", &a2, W).unwrap();
    s.delete(&cm(), Some("default"), "a", &DeleteOptions::default())
        .unwrap();
    let ev = s
        .watch_from(&cm(), Some("default"), start, &Selectors::default())
        .unwrap();
    let kinds: Vec<(EventType, u64)> = ev
        .iter()
        .map(|e| (e.kind, e.resource_version().unwrap_or(0)))
        .collect();
    assert_eq!(
        kinds,
        [
            (EventType::Added, start + 1),
            (EventType::Modified, start + 2),
            (EventType::Deleted, start + 3)
        ]
    );
    assert_eq!(ev[1].object, a2);
    // Other resources and namespaces are not seen.
    assert!(
        s.watch_from(&pods(), None, start, &Selectors::default())
            .unwrap()
            .is_empty()
    );
    s.compact(start + 2);
    assert_eq!(
        s.watch_from(&cm(), None, start + 2, &Selectors::default())
            .unwrap()
            .len(),
        1
    );
    let e = s
        .watch_from(&cm(), None, start + 1, &Selectors::default())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("too old resource version: {} ({})", start + 1, start + 2)
    );
    assert_eq!(e.code(), 410);
    // The history limit compacts on its own.
    let mut small = Store::new(StoreConfig {
        history: 3,
        ..StoreConfig::default()
    });
    for i in 0..5 {
        mk(&mut small, &format!("c{i}"), json!({}));
    }
    assert!(
        small
            .watch_from(
                &cm(),
                None,
                small.resource_version() - 3,
                &Selectors::default()
            )
            .is_ok()
    );
    assert!(
        small
            .watch_from(
                &cm(),
                None,
                small.resource_version() - 4,
                &Selectors::default()
            )
            .is_err()
    );
}

#[test]
fn watch_with_a_selector_sees_objects_enter_and_leave() {
    let (mut s, _) = store();
    let start = s.resource_version();
    let a = s
        .create(
            &cm(),
            Some("default"),
            &json!({"metadata": {"name": "a", "labels": {"app": "x"}}}),
            W,
        )
        .unwrap();
    let mut b = a.clone();
    b["metadata"]["labels"]["app"] = json!("y");
    let b = s.update(&cm(), Some("default"), "a", &b, W).unwrap();
    let mut c = b.clone();
    c["metadata"]["labels"]["app"] = json!("x");
    s.update(&cm(), Some("default"), "a", &c, W).unwrap();
    let reg = s.registry().clone();
    let sel = Selectors::parse(Some("app=x"), None, reg.get(&cm()).unwrap()).unwrap();
    let kinds: Vec<EventType> = s
        .watch_from(&cm(), None, start, &sel)
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [EventType::Added, EventType::Deleted, EventType::Added]
    );
}

#[test]
fn watch_start_modes_and_initial_events() {
    let (mut s, _) = store();
    mk(&mut s, "a", json!({}));
    let mid = s.resource_version();
    mk(&mut s, "b", json!({}));
    let w = |rv: Option<&str>, m: Option<&str>, sie: Option<bool>| WatchOptions {
        resource_version: rv.map(String::from),
        resource_version_match: m.map(String::from),
        send_initial_events: sie,
        allow_watch_bookmarks: true,
        ..WatchOptions::default()
    };
    let cur = s
        .watch(&cm(), Some("default"), &w(None, None, None))
        .unwrap();
    assert_eq!(cur.events.len(), 2);
    assert!(cur.events.iter().all(|e| e.kind == EventType::Added));
    assert_eq!(cur.resource_version, s.resource_version());
    let after = s
        .watch(
            &cm(),
            Some("default"),
            &w(Some(&mid.to_string()), None, None),
        )
        .unwrap();
    assert_eq!(after.events.len(), 1);
    assert_eq!(after.events[0].object["metadata"]["name"], "b");
    let stream = s
        .watch(
            &cm(),
            Some("default"),
            &w(None, Some("NotOlderThan"), Some(true)),
        )
        .unwrap();
    assert_eq!(stream.events.len(), 3);
    let end = &stream.events[2];
    assert_eq!(end.kind, EventType::Bookmark);
    assert_eq!(
        end.object["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(end.resource_version(), Some(s.resource_version()));
    let bm = s.bookmark(&cm()).unwrap();
    assert_eq!(
        (bm.kind, bm.resource_version()),
        (EventType::Bookmark, Some(s.resource_version()))
    );
    assert_eq!(
        s.watch(&cm(), None, &w(None, None, Some(true)))
            .unwrap_err()
            .code(),
        422
    );
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "required": ["size"],
                            "properties": {"size": {"type": "integer", "minimum": 1}, "mode": {"type": "string", "default": "fast"}},
                            "x-kubernetes-validations": [{"rule": "self.size < 10", "message": "size must be small"}]},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                    }
                }}
            }]
        }
    })
}

#[test]
fn crds_register_validate_and_unregister() {
    let (mut s, _) = store();
    let c = s.create(&crds(), None, &widget_crd(), W).unwrap();
    assert_eq!(c["status"]["conditions"][1]["type"], "Established");
    assert_eq!(c["status"]["acceptedNames"]["kind"], "Widget");
    assert!(s.registry().get(&widgets()).is_some());
    let w = s
        .create(&widgets(), Some("default"), &json!({"metadata": {"name": "w"}, "spec": {"size": 3, "junk": 1}, "status": {"ready": true}}), W)
        .unwrap();
    assert_eq!(w["apiVersion"], "example.com/v1");
    assert_eq!(
        w["spec"],
        json!({"size": 3, "mode": "fast"}),
        "defaulted and pruned"
    );
    assert!(w.get("status").is_none());
    assert_eq!(w["metadata"]["generation"], 1);
    let e = s
        .create(
            &widgets(),
            Some("default"),
            &json!({"metadata": {"name": "x"}, "spec": {"size": 0}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(
        e.to_string(),
        r#"Widget.example.com "x" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"#
    );
    let e = s
        .create(
            &widgets(),
            Some("default"),
            &json!({"metadata": {"name": "x"}, "spec": {"size": 20}}),
            W,
        )
        .unwrap_err();
    assert!(e.to_string().contains("size must be small"), "{e}");
    let st = e.to_status();
    assert_eq!(st["details"]["causes"][0]["field"], "spec");
    assert_eq!(st["details"]["group"], "example.com");
    let e = s
        .create(
            &widgets(),
            Some("default"),
            &json!({"metadata": {"name": "Bad"}, "spec": {}}),
            W,
        )
        .unwrap_err();
    let causes = e.to_status()["details"]["causes"].as_array().unwrap().len();
    assert!(causes >= 2, "name and schema errors together: {e}");
    let st = s
        .update_status(
            &widgets(),
            Some("default"),
            "w",
            // A custom resource's status needs its resourceVersion (store.go, Update).
            &json!({"metadata": {"resourceVersion": w["metadata"]["resourceVersion"]},
                "status": {"ready": true}}),
            W,
        )
        .unwrap();
    assert_eq!(st["status"]["ready"], true);
    assert_eq!(
        s.patch(
            &widgets(),
            Some("default"),
            "w",
            PatchType::Strategic,
            &json!({}),
            Subresource::Main,
            W
        )
        .unwrap_err()
        .code(),
        415
    );
    s.delete(
        &crds(),
        None,
        "widgets.example.com",
        &DeleteOptions::default(),
    )
    .unwrap();
    assert!(s.registry().get(&widgets()).is_none());
    assert!(s.objects().all(|(k, _)| k.gr != widgets()));
}

/// Pages across namespaces whose names sort differently as text than as keys ("a-b" < "a/"
/// but namespace "a" < "a-b"): every object once, in list order, whatever the page size.
#[test]
fn list_pages_across_namespaces_lose_nothing() {
    let (mut s, _) = store();
    for ns in ["a", "a-b", "b"] {
        s.create(
            &nss(),
            None,
            &json!({"metadata": {"name": ns}}),
            WriteOptions::default(),
        )
        .unwrap();
        for n in ["x", "y"] {
            s.create(
                &cm(),
                Some(ns),
                &json!({"metadata": {"name": n}}),
                WriteOptions::default(),
            )
            .unwrap();
        }
    }
    let all: Vec<String> = s
        .list(&cm(), None, &ListOptions::default())
        .unwrap()
        .items
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(all, ["a/x", "a/y", "a-b/x", "a-b/y", "b/x", "b/y"]);
    for limit in 1..=4 {
        let mut seen = Vec::new();
        let mut token = None;
        loop {
            let page = s
                .list(
                    &cm(),
                    None,
                    &ListOptions {
                        limit: Some(limit),
                        continue_token: token.clone(),
                        ..ListOptions::default()
                    },
                )
                .unwrap();
            seen.extend(page.items.iter().map(|o| {
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            }));
            token = page.continue_token;
            if token.is_none() {
                break;
            }
        }
        assert_eq!(seen, all, "limit {limit}");
    }
}
