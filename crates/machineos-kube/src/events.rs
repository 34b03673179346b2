//! [`Events`]: the Event recorder the controller and the agent publish through
//! (events.k8s.io/v1, with series aggregation): best effort (a failure is logged, never
//! returned), the note bounded to the API's 1 KiB, the action the reason.
//!
//! Written here rather than taken from kube-runtime's `Recorder` because of one rule:
//! **an Event is one series only while its note stays the same.** kube-runtime (like
//! client-go's `events` broadcaster) keys its series by type, reason, action, reporter and
//! object — not the note — so a repeated reason keeps its *first* message and only its count
//! grows: "attempt 1, retrying in 1s" at count 6 while the agent was on attempt 6, "Secret …
//! not found" long after the error had changed. Here the note is part of the key: the same
//! message again bumps `series.count` and `series.lastObservedTime` (a merge patch), a new
//! message is a new Event. Series are forgotten after [`SERIES_WINDOW`] (kube-runtime's and
//! client-go's six minutes), and a series whose Event was deleted (TTL, an admin) starts a new
//! one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How long a series stays open: a repeat after that is a new Event.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// The API's bound on an Event's note, in bytes.
pub const MAX_NOTE: usize = 1024;

/// What makes two publications one series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    warning: bool,
    reason: String,
    note: String,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

/// A series published: the Event's name and namespace, its count, when it was last seen.
#[derive(Debug, Clone)]
struct Series {
    name: String,
    namespace: String,
    count: i32,
    last: Timestamp,
}

/// An Event recorder for one reporting component.
#[derive(Clone)]
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<HashMap<Key, Series>>>,
}

impl Events {
    /// Events reported by `controller` (`machineos-controller`, `machineos-agent`) /
    /// `instance` (the replica, the node).
    pub fn new(client: Client, controller: &str, instance: &str) -> Events {
        Events {
            client,
            controller: controller.to_owned(),
            instance: instance.to_owned(),
            series: Arc::default(),
        }
    }

    /// Publish one Event about `object`: a repeat of the same type, reason and note within
    /// [`SERIES_WINDOW`] counts up the open series, anything else is a new Event.
    pub async fn publish(&self, object: &ObjectReference, warning: bool, reason: &str, note: &str) {
        let note = truncate(note, MAX_NOTE);
        let key = Key {
            warning,
            reason: reason.to_owned(),
            note: note.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            uid: object.uid.clone(),
        };
        let now = Timestamp::now();
        let open = self.open_series(&key, now);
        let result = match open {
            Some(s) => match self.count_up(&s, now).await {
                // The Event is gone (expired, deleted): the series starts again.
                Err(kube::Error::Api(e)) if e.code == 404 => self.create(object, &key, now).await,
                other => other.map(|()| Series {
                    count: s.count + 1,
                    last: now,
                    ..s
                }),
            },
            None => self.create(object, &key, now).await,
        };
        match result {
            Ok(series) => {
                if let Ok(mut map) = self.series.lock() {
                    map.insert(key, series);
                }
            }
            Err(e) => {
                let name = object.name.as_deref().unwrap_or_default();
                tracing::warn!(object = %name, reason, error = %e, "recording an Event failed");
            }
        }
    }

    /// The series `key` continues, if one is open; closed series are dropped.
    fn open_series(&self, key: &Key, now: Timestamp) -> Option<Series> {
        let window = SignedDuration::try_from(SERIES_WINDOW).unwrap_or(SignedDuration::MAX);
        let mut map = self.series.lock().ok()?;
        map.retain(|_, s| now.duration_since(s.last) < window);
        map.get(key).cloned()
    }

    /// One more occurrence of an open series.
    async fn count_up(&self, s: &Series, now: Timestamp) -> Result<(), kube::Error> {
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &s.namespace);
        let patch = serde_json::json!({"series": EventSeries {
            count: s.count + 1,
            last_observed_time: MicroTime(now),
        }});
        api.patch(&s.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// A new Event (the first of its series), in the object's namespace (`default` for a
    /// cluster-scoped object, as client-go and kube-runtime do).
    async fn create(
        &self,
        object: &ObjectReference,
        key: &Key,
        now: Timestamp,
    ) -> Result<Series, kube::Error> {
        let namespace = object
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = format!(
            "{}.{:x}",
            object.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = K8sEvent {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            action: Some(key.reason.clone()),
            reason: Some(key.reason.clone()),
            note: Some(key.note.clone()),
            type_: Some(if key.warning { "Warning" } else { "Normal" }.to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(object.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        api.create(&PostParams::default(), &event).await?;
        Ok(Series {
            name,
            namespace,
            count: 1,
            last: now,
        })
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn truncates_on_a_character_boundary() {
        assert_eq!(super::truncate("abc", 5), "abc");
        assert_eq!(super::truncate("abcdef", 3), "abc");
        assert_eq!(super::truncate("aé", 2), "a");
    }
}
