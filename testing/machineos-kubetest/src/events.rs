//! One Event, two APIs: kube-apiserver stores `events.k8s.io/v1` and core `v1` Events in
//! one table, so an Event a controller writes through `events.k8s.io` (as kube-runtime's
//! recorder does) shows in `kubectl get events` and `kubectl describe`, which read core
//! `v1`. The store ([`crate::store::Store`]) keeps the two resources apart and mirrors every
//! write of an `events.k8s.io` Event into a core `v1` Event of the same namespace and name
//! ([`core_event_of`]), and its deletion.
//!
//! The field mapping is kube-apiserver's conversion (`pkg/apis/events/v1/conversion.go`
//! with the internal `core.Event` both versions share): `regarding` → `involvedObject`,
//! `note` → `message`, `deprecatedSource` → `source`, `deprecatedFirstTimestamp` /
//! `deprecatedLastTimestamp` / `deprecatedCount` → `firstTimestamp` / `lastTimestamp` /
//! `count`, `reportingController` → `reportingComponent`; `reason`, `type`, `action`,
//! `related`, `eventTime`, `series` and `reportingInstance` keep their names; metadata is
//! the same object's (name, namespace, uid, labels, creation time).
//!
//! Simplifications: one direction only (a core `v1` write is not mirrored into
//! `events.k8s.io`), and the mirror has its own resourceVersion.

use serde_json::{Map, Value, json};

/// The core `v1` Event kube-apiserver serves for the `events.k8s.io/v1` Event `e`.
pub fn core_event_of(e: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let mut metadata = e.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = metadata.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    out.insert("metadata".into(), metadata);
    let renamed = [
        ("regarding", "involvedObject"),
        ("note", "message"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("reportingController", "reportingComponent"),
    ];
    for (from, to) in renamed {
        if let Some(v) = e.get(from).filter(|v| !v.is_null()) {
            out.insert(to.into(), v.clone());
        }
    }
    for same in [
        "reason",
        "type",
        "action",
        "related",
        "eventTime",
        "series",
        "reportingInstance",
    ] {
        if let Some(v) = e.get(same).filter(|v| !v.is_null()) {
            out.insert(same.into(), v.clone());
        }
    }
    // The internal type's defaults as core v1 shows them.
    out.entry("involvedObject").or_insert_with(|| json!({}));
    out.entry("source").or_insert_with(|| json!({}));
    out.entry("firstTimestamp").or_insert(Value::Null);
    out.entry("lastTimestamp").or_insert(Value::Null);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_map_as_kube_apiserver_converts_them() {
        let e = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "worker.1", "namespace": "default", "uid": "u", "resourceVersion": "9"},
            "regarding": {"kind": "MachineOSConfig", "name": "worker", "uid": "w"},
            "note": "MachineConfigPool worker does not exist",
            "reason": "MachineConfigPoolNotFound", "type": "Warning", "action": "Reconcile",
            "reportingController": "machineos-controller", "reportingInstance": "pod-1",
            "eventTime": "2026-12-04T05:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-12-04T05:01:00.000000Z"},
            "deprecatedCount": 2,
        });
        let c = core_event_of(&e);
        assert_eq!(c["apiVersion"], "v1");
        assert_eq!(c["metadata"]["name"], "worker.1");
        assert_eq!(c["metadata"]["uid"], "u");
        assert!(c["metadata"].get("resourceVersion").is_none());
        assert_eq!(c["involvedObject"]["kind"], "MachineOSConfig");
        assert_eq!(c["message"], "MachineConfigPool worker does not exist");
        assert_eq!(c["reportingComponent"], "machineos-controller");
        assert_eq!(c["reportingInstance"], "pod-1");
        assert_eq!(c["count"], 2);
        assert_eq!(c["series"]["count"], 2);
        assert_eq!(c["source"], json!({}));
        assert_eq!(c["firstTimestamp"], Value::Null);
        assert!(c.get("note").is_none() && c.get("regarding").is_none());
    }
}
