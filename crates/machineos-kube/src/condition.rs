//! Conditions, and the one rule for writing them: [`upsert_condition`] replaces the
//! condition of the same type (or appends one), and its `lastTransitionTime` moves only
//! when its `status` changes.
//!
//! Two shapes share the rule through [`Condition`]: `metav1.Condition` (k8s-openapi's, on
//! the typed objects the agent writes) and [`ConditionView`], the lenient shape of the
//! conditions in a cached object's JSON — `metav1.Condition`s and the MCO's older
//! `MachineConfigPoolCondition`s (no `observedGeneration`, a `reason` that may be absent)
//! alike — that keeps any field it does not know.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as MetaCondition, Time};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What [`upsert_condition`] needs of a condition.
pub trait Condition {
    /// Its `type`.
    fn kind(&self) -> &str;
    /// Its `status`.
    fn status(&self) -> &str;
    /// Take `old`'s `lastTransitionTime`.
    fn keep_transition_time(&mut self, old: &Self);
}

/// Set `new` in `list`: it replaces the condition of its type, keeping that one's
/// `lastTransitionTime` when the status did not change (`new` carries the time to use when
/// it did), or is appended. Whether anything but the transition time changed is returned.
pub fn upsert_condition<C: Condition + PartialEq>(list: &mut Vec<C>, mut new: C) -> bool {
    match list.iter_mut().find(|o| o.kind() == new.kind()) {
        Some(old) => {
            if old.status() == new.status() {
                new.keep_transition_time(old);
            }
            let changed = *old != new;
            *old = new;
            changed
        }
        None => {
            list.push(new);
            true
        }
    }
}

impl Condition for MetaCondition {
    fn kind(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn keep_transition_time(&mut self, old: &Self) {
        self.last_transition_time = old.last_transition_time.clone();
    }
}

/// A condition as a cached object's JSON holds it, read leniently.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    /// `type`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `status`: `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// `reason`.
    #[serde(default)]
    pub reason: String,
    /// `message`.
    #[serde(default)]
    pub message: String,
    /// `lastTransitionTime`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Value>,
    /// `observedGeneration` (metav1 conditions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Fields this view does not know, kept as they are.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl ConditionView {
    /// A condition of `type_` with `status`, `reason` and `message`, transitioning now.
    pub fn new(type_: &str, status: &str, reason: &str, message: &str) -> ConditionView {
        ConditionView {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            last_transition_time: serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now()))
                .ok(),
            observed_generation: None,
            other: Map::new(),
        }
    }

    /// The conditions at `status.conditions` of an object's status (`status` the status
    /// object); an entry that is not a condition object is skipped.
    pub fn list_of(status: &Value) -> Vec<ConditionView> {
        status
            .get("conditions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| serde_json::from_value(c.clone()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `list` as the JSON of a `conditions` field.
    pub fn to_json(list: &[ConditionView]) -> Value {
        Value::Array(
            list.iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect(),
        )
    }

    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

impl Condition for ConditionView {
    fn kind(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn keep_transition_time(&mut self, old: &Self) {
        if old
            .last_transition_time
            .as_ref()
            .is_some_and(|t| !t.is_null())
        {
            self.last_transition_time = old.last_transition_time.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(t: &str, status: &str) -> ConditionView {
        ConditionView {
            last_transition_time: Some(json!(t)),
            ..ConditionView::new("Ready", status, "R", "m")
        }
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut list = vec![at("2026-01-01T00:00:00Z", "True")];
        // Same status, new message: the old time stays.
        let changed = upsert_condition(
            &mut list,
            ConditionView {
                message: "other".into(),
                ..at("2026-02-02T00:00:00Z", "True")
            },
        );
        assert!(changed);
        assert_eq!(
            list[0].last_transition_time,
            Some(json!("2026-01-01T00:00:00Z"))
        );
        assert_eq!(list[0].message, "other");
        // Nothing new: unchanged.
        let same = list[0].clone();
        assert!(!upsert_condition(&mut list, same));
        // A new status: the new time.
        upsert_condition(&mut list, at("2026-03-03T00:00:00Z", "False"));
        assert_eq!(
            list[0].last_transition_time,
            Some(json!("2026-03-03T00:00:00Z"))
        );
        // Another type is appended.
        upsert_condition(&mut list, ConditionView::new("Other", "True", "", ""));
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn views_keep_what_they_do_not_know_and_skip_what_is_not_a_condition() {
        let status = json!({"conditions": [
            {"type": "Updated", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "extra": 1},
            "nonsense",
            {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "observedGeneration": 3}
        ]});
        let list = ConditionView::list_of(&status);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].other.get("extra"), Some(&json!(1)));
        assert_eq!(list[1].observed_generation, Some(3));
        assert!(list[0].is_true() && !list[1].is_true());
        let back = ConditionView::to_json(&list);
        assert_eq!(back[0]["extra"], json!(1));
        assert_eq!(back[0].get("observedGeneration"), None);
        assert_eq!(ConditionView::list_of(&json!({})), vec![]);
    }

    #[test]
    fn metav1_conditions_follow_the_same_rule() {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let c = |status: &str, s: i64| MetaCondition {
            type_: "Drained".into(),
            status: status.into(),
            reason: "R".into(),
            message: String::new(),
            last_transition_time: t(s),
            observed_generation: None,
        };
        let mut list = vec![c("True", 10)];
        upsert_condition(&mut list, c("True", 20));
        assert_eq!(list[0].last_transition_time, t(10));
        upsert_condition(&mut list, c("False", 30));
        assert_eq!(list[0].last_transition_time, t(30));
    }
}
