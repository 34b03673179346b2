//! Watch events as pure data: the [`WatchEvent`] type, the events a selector sees for one
//! change ([`filter_change`]), bookmarks ([`bookmark`]) and the streaming-list start of a
//! watch with `sendInitialEvents=true` ([`initial_events`]).
//!
//! A change to an object that a selector watches turns into what kube-apiserver's watch
//! cache sends: `ADDED`/`MODIFIED`/`DELETED` as recorded when the object matched before
//! and after; `ADDED` when it starts matching, `DELETED` (with the new object) when it
//! stops matching; nothing when it matched neither before nor after.

use serde_json::{Value, json};

use crate::selector::Selectors;

/// A watch event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
    /// `BOOKMARK`.
    Bookmark,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
        }
    }
}

/// One watch event: a type and the object at that resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// The type.
    pub kind: EventType,
    /// The object (for a bookmark, only kind, apiVersion and metadata).
    pub object: Value,
}

impl WatchEvent {
    /// The `{"type": …, "object": …}` JSON of a watch stream line.
    pub fn to_json(&self) -> Value {
        json!({"type": self.kind.as_str(), "object": self.object})
    }

    /// The object's `metadata.resourceVersion`, parsed.
    pub fn resource_version(&self) -> Option<u64> {
        self.object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
    }
}

/// The annotation marking the bookmark that ends the initial events of a streaming list.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A bookmark at `rv` for objects of `api_version`/`kind`.
pub fn bookmark(api_version: &str, kind: &str, rv: u64) -> WatchEvent {
    WatchEvent {
        kind: EventType::Bookmark,
        object: json!({
            "kind": kind,
            "apiVersion": api_version,
            "metadata": {"resourceVersion": rv.to_string()},
        }),
    }
}

/// The start of a watch with `sendInitialEvents=true`: a synthetic `ADDED` for each object
/// of the current state (already filtered, in list order), then a bookmark at `rv` carrying
/// the `k8s.io/initial-events-end: "true"` annotation.
pub fn initial_events(items: &[Value], api_version: &str, kind: &str, rv: u64) -> Vec<WatchEvent> {
    let mut out: Vec<WatchEvent> = items
        .iter()
        .map(|o| WatchEvent {
            kind: EventType::Added,
            object: o.clone(),
        })
        .collect();
    let mut end = bookmark(api_version, kind, rv);
    if let Some(m) = end
        .object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    {
        m.insert("annotations".into(), json!({INITIAL_EVENTS_END: "true"}));
    }
    out.push(end);
    out
}

/// What a watcher with `sel` sees of one recorded change: `prev` is the object before it
/// (none for a creation), `kind`/`object` the recorded event.
pub fn filter_change(
    sel: &Selectors,
    kind: EventType,
    object: &Value,
    prev: Option<&Value>,
) -> Option<WatchEvent> {
    let now = sel.matches(object);
    let before = prev.is_some_and(|p| sel.matches(p));
    let out = match kind {
        EventType::Added if now => EventType::Added,
        EventType::Modified if now && before => EventType::Modified,
        EventType::Modified if now => EventType::Added,
        EventType::Modified if before => EventType::Deleted,
        EventType::Deleted if before || now => EventType::Deleted,
        _ => return None,
    };
    Some(WatchEvent {
        kind: out,
        object: object.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::LabelSelector;

    fn o(app: &str) -> Value {
        json!({"metadata": {"name": "x", "labels": {"app": app}}})
    }

    #[test]
    fn selector_transitions() {
        let sel = Selectors {
            labels: LabelSelector::parse("app=web").unwrap(),
            ..Selectors::default()
        };
        let t = |k, obj: &Value, prev: Option<&Value>| {
            filter_change(&sel, k, obj, prev).map(|e| e.kind)
        };
        use EventType::*;
        let (web, db) = (o("web"), o("db"));
        assert_eq!(t(Added, &web, None), Some(Added));
        assert_eq!(t(Added, &db, None), None);
        assert_eq!(t(Modified, &web, Some(&web)), Some(Modified));
        assert_eq!(t(Modified, &web, Some(&db)), Some(Added));
        assert_eq!(t(Modified, &db, Some(&web)), Some(Deleted));
        assert_eq!(t(Modified, &db, Some(&db)), None);
        assert_eq!(t(Deleted, &web, Some(&web)), Some(Deleted));
        assert_eq!(t(Deleted, &db, Some(&db)), None);
    }

    #[test]
    fn initial_events_end_with_an_annotated_bookmark() {
        let ev = initial_events(&[o("a"), o("b")], "v1", "ConfigMap", 7);
        assert_eq!(ev.len(), 3);
        assert!(ev[..2].iter().all(|e| e.kind == EventType::Added));
        assert_eq!(
            ev[2].to_json(),
            json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                "metadata": {"resourceVersion": "7", "annotations": {"k8s.io/initial-events-end": "true"}}}})
        );
        assert_eq!(ev[2].resource_version(), Some(7));
        assert_eq!(
            bookmark("v1", "Pod", 3).object["metadata"],
            json!({"resourceVersion": "3"})
        );
    }
}
