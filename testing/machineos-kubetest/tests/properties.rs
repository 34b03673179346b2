//! Properties of any sequence of operations: resourceVersions strictly increase, and the
//! event log replays to the current state.

use std::collections::BTreeMap;

use machineos_kubetest::{
    DeleteOptions, EventType, GroupResource, ObjectKey, PatchType, Propagation, Store, StoreConfig,
    Subresource, WriteOptions,
};
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Op {
    Create {
        name: u8,
        finalizer: bool,
        owner: Option<u8>,
    },
    Update {
        name: u8,
        value: u8,
        stale: bool,
    },
    ClearFinalizers {
        name: u8,
    },
    Patch {
        name: u8,
        value: u8,
    },
    Delete {
        name: u8,
        policy: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8, any::<bool>(), proptest::option::of(0..4u8)).prop_map(
            |(name, finalizer, owner)| Op::Create {
                name,
                finalizer,
                owner
            }
        ),
        (0..4u8, any::<u8>(), any::<bool>()).prop_map(|(name, value, stale)| Op::Update {
            name,
            value,
            stale
        }),
        (0..4u8).prop_map(|name| Op::ClearFinalizers { name }),
        (0..4u8, any::<u8>()).prop_map(|(name, value)| Op::Patch { name, value }),
        (0..4u8, 0..4u8).prop_map(|(name, policy)| Op::Delete { name, policy }),
    ]
}

fn rv(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn apply(s: &mut Store, op: &Op) {
    let gr = GroupResource::new("", "configmaps");
    let ns = Some("default");
    let w = WriteOptions::default();
    let n = |i: &u8| format!("c{i}");
    match op {
        Op::Create {
            name,
            finalizer,
            owner,
        } => {
            let mut o = json!({"metadata": {"name": n(name)}, "data": {}});
            if *finalizer {
                o["metadata"]["finalizers"] = json!(["test/hold"]);
            }
            if let Some(owner) = owner
                && let Ok(ow) = s.get(&gr, ns, &n(owner))
            {
                o["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": n(owner), "uid": ow["metadata"]["uid"], "blockOwnerDeletion": true}]);
            }
            let _ = s.create(&gr, ns, &o, w);
        }
        Op::Update { name, value, stale } => {
            if let Ok(mut o) = s.get(&gr, ns, &n(name)) {
                o["data"] = json!({"v": value.to_string()});
                if *stale {
                    o["metadata"]["resourceVersion"] = json!("1");
                }
                let _ = s.update(&gr, ns, &n(name), &o, w);
            }
        }
        Op::ClearFinalizers { name } => {
            let _ = s.patch(
                &gr,
                ns,
                &n(name),
                PatchType::Merge,
                &json!({"metadata": {"finalizers": null}}),
                Subresource::Main,
                w,
            );
        }
        Op::Patch { name, value } => {
            let _ = s.patch(
                &gr,
                ns,
                &n(name),
                PatchType::Json,
                &json!([{"op": "add", "path": "/data/p", "value": value.to_string()}]),
                Subresource::Main,
                w,
            );
        }
        Op::Delete { name, policy } => {
            let propagation = match policy {
                0 => None,
                1 => Some(Propagation::Background),
                2 => Some(Propagation::Foreground),
                _ => Some(Propagation::Orphan),
            };
            let _ = s.delete(
                &gr,
                ns,
                &n(name),
                &DeleteOptions {
                    propagation,
                    ..DeleteOptions::default()
                },
            );
        }
    }
}

proptest! {
    #[test]
    fn resource_versions_increase_and_the_log_replays_to_the_state(ops in proptest::collection::vec(op(), 1..40)) {
        let mut s = Store::new(StoreConfig::default());
        let mut last = s.resource_version();
        for op in &ops {
            apply(&mut s, op);
            prop_assert!(s.resource_version() >= last);
            last = s.resource_version();
        }
        // Replay the whole log from the beginning.
        let events = s.changes_after(0).unwrap();
        let mut prev = 0;
        let mut state: BTreeMap<ObjectKey, Value> = BTreeMap::new();
        for (key, e) in &events {
            let r = e.resource_version().unwrap_or(0);
            prop_assert!(r > prev, "resourceVersion {} after {}", r, prev);
            prev = r;
            match e.kind {
                EventType::Added => {
                    prop_assert!(!state.contains_key(key), "ADDED twice: {:?}", key);
                    state.insert(key.clone(), e.object.clone());
                }
                EventType::Modified => {
                    prop_assert!(state.contains_key(key), "MODIFIED before ADDED: {:?}", key);
                    state.insert(key.clone(), e.object.clone());
                }
                EventType::Deleted => {
                    prop_assert!(state.remove(key).is_some(), "DELETED unknown: {:?}", key);
                }
                EventType::Bookmark => prop_assert!(false, "bookmark in the log"),
            }
        }
        prop_assert_eq!(prev, s.resource_version());
        let current: BTreeMap<ObjectKey, Value> = s.objects().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(&state, &current);
        for v in current.values() {
            prop_assert!(rv(v) <= s.resource_version());
        }
        // No dependent outlives all of its owners unless it is itself held by a finalizer.
        let uids: Vec<&str> = current.values().filter_map(|v| v["metadata"]["uid"].as_str()).collect();
        for v in current.values() {
            if let Some(refs) = v["metadata"]["ownerReferences"].as_array() {
                let alive = refs.iter().any(|r| r["uid"].as_str().is_some_and(|u| uids.contains(&u)));
                prop_assert!(alive || v["metadata"]["deletionTimestamp"].is_string(), "orphaned dependent {}", v);
            }
        }
        // The watch of configmaps from the start agrees with a list.
        let mut watched: BTreeMap<String, Value> = BTreeMap::new();
        let sel = machineos_kubetest::Selectors::default();
        let gr = GroupResource::new("", "configmaps");
        for e in s.watch_from(&gr, None, 0, &sel).unwrap() {
            let name = e.object["metadata"]["name"].as_str().unwrap_or("").to_string();
            if e.kind == EventType::Deleted { watched.remove(&name); } else { watched.insert(name, e.object); }
        }
        let listed = s.list(&gr, None, &Default::default()).unwrap();
        prop_assert_eq!(watched.into_values().collect::<Vec<_>>(), listed.items);
        // Exact lists at every past resourceVersion equal the replay up to it.
        let mut replay: BTreeMap<String, Value> = BTreeMap::new();
        for (key, e) in &events {
            if key.gr == gr {
                if e.kind == EventType::Deleted { replay.remove(&key.name); } else { replay.insert(key.name.clone(), e.object.clone()); }
            }
            let at = e.resource_version().unwrap_or(0);
            let exact = s.list(&gr, None, &machineos_kubetest::ListOptions {
                resource_version: Some(at.to_string()),
                resource_version_match: Some("Exact".into()),
                ..Default::default()
            }).unwrap();
            prop_assert_eq!(&replay.values().cloned().collect::<Vec<_>>(), &exact.items, "at {}", at);
        }
    }
}
