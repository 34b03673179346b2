//! [`Events`]: kube-runtime's recorder (events.k8s.io/v1, with series aggregation), as the
//! controller and the agent publish: best effort (a failure is logged, never returned), the
//! note bounded to the API's 1 KiB, the action the reason.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// An Event recorder for one reporting component.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// Events reported by `controller` (`machineos-controller`, `machineos-agent`) /
    /// `instance` (the replica, the node).
    pub fn new(client: Client, controller: &str, instance: &str) -> Events {
        Events {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: controller.to_owned(),
                    instance: Some(instance.to_owned()),
                },
            ),
        }
    }

    /// Publish one Event about `object`.
    pub async fn publish(&self, object: &ObjectReference, warning: bool, reason: &str, note: &str) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(truncate(note, 1024)),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, object).await {
            let name = object.name.as_deref().unwrap_or_default();
            tracing::warn!(object = %name, reason, error = %e, "recording an Event failed");
        }
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
