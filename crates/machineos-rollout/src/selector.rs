//! Label selectors (`matchLabels` + `matchExpressions`) as Kubernetes evaluates them, for
//! pools' and MachineImages' `nodeSelector`s. Written here rather than taken from kube-rs so
//! the decision crate stays free of the client stack; the controller converts
//! `LabelSelector`s with [`Selector::new`] and a malformed one is an error naming its path.

use std::collections::BTreeMap;

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key In (values)`.
    In(String, Vec<String>),
    /// `key NotIn (values)`.
    NotIn(String, Vec<String>),
    /// `key` is present.
    Exists(String),
    /// `key` is absent.
    DoesNotExist(String),
}

/// A label selector. The empty selector matches everything (as in Kubernetes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// `matchLabels`, then `matchExpressions`, all ANDed.
    pub requirements: Vec<Requirement>,
}

/// A `matchExpressions` entry Kubernetes would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SelectorError {
    /// JSON path of the offending entry.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl Selector {
    /// From `matchLabels` and `(key, operator, values)` expressions; `path` names the
    /// selector in errors (e.g. `spec.nodeSelector`).
    pub fn new(
        path: &str,
        match_labels: &BTreeMap<String, String>,
        expressions: &[(String, String, Vec<String>)],
    ) -> Result<Selector, SelectorError> {
        let mut requirements: Vec<Requirement> = match_labels
            .iter()
            .map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()]))
            .collect();
        for (i, (key, op, values)) in expressions.iter().enumerate() {
            let err = |message: &str| SelectorError {
                path: format!("{path}.matchExpressions[{i}]"),
                message: message.to_owned(),
            };
            requirements.push(match op.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(err("values must be non-empty for In and NotIn"));
                }
                "In" => Requirement::In(key.clone(), values.clone()),
                "NotIn" => Requirement::NotIn(key.clone(), values.clone()),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(err("values must be empty for Exists and DoesNotExist"));
                }
                "Exists" => Requirement::Exists(key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(key.clone()),
                other => return Err(err(&format!("unknown operator {other:?}"))),
            });
        }
        Ok(Selector { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn kubernetes_semantics() {
        let ml = labels(&[("role", "worker")]);
        let ex = vec![
            (
                "zone".to_owned(),
                "In".to_owned(),
                vec!["a".to_owned(), "b".to_owned()],
            ),
            ("canary".to_owned(), "DoesNotExist".to_owned(), vec![]),
            ("tier".to_owned(), "NotIn".to_owned(), vec!["db".to_owned()]),
        ];
        let s = Selector::new("spec.nodeSelector", &ml, &ex).unwrap();
        let cases = [
            (vec![("role", "worker"), ("zone", "a")], true),
            (vec![("role", "worker"), ("zone", "c")], false),
            (
                vec![("role", "worker"), ("zone", "b"), ("canary", "")],
                false,
            ),
            (
                vec![("role", "worker"), ("zone", "b"), ("tier", "db")],
                false,
            ),
            (
                vec![("role", "worker"), ("zone", "b"), ("tier", "web")],
                true,
            ),
            (vec![("zone", "a")], false),
        ];
        for (l, want) in cases {
            assert_eq!(s.matches(&labels(&l)), want, "{l:?}");
        }
        assert!(Selector::default().matches(&labels(&[])));
        let bad = Selector::new(
            "spec.nodeSelector",
            &BTreeMap::new(),
            &[("k".into(), "In".into(), vec![])],
        );
        assert_eq!(
            bad.unwrap_err().to_string(),
            "spec.nodeSelector.matchExpressions[0]: values must be non-empty for In and NotIn"
        );
    }
}
