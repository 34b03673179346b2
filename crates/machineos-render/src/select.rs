//! Which MachineConfigs belong to a pool: the pool's `spec.machineConfigSelector` (Kubernetes
//! label-selector semantics), or — when there is no pool manifest, as on the CLI — the
//! role-label convention the MCO's default and custom pools follow.
//!
//! Without a pool manifest, pool `P` selects `machineconfiguration.openshift.io/role In (P)`
//! for `P` = `master` or `worker`, and `role In (worker, P)` for any other `P`: the MCO's
//! documented custom pool (`infra`, …) selects the worker MachineConfigs too and layers its own
//! on top (the merge orders worker MachineConfigs first, so the custom role's win).
//!
//! A pool whose selector is missing or empty selects nothing, as in the MCO's render
//! controller; that is reported as an error rather than rendering an empty config.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use machineos_api::v1::{MachineConfig, MachineConfigPool};
use machineos_api::{MASTER_ROLE, ROLE_LABEL, WORKER_ROLE};
use machineos_diagnostics::{Classify, Retry};

/// Why a label selector is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error at {path}: {message}")]
pub struct SelectorError {
    /// JSON path within the selector, such as `matchExpressions.0.operator`.
    pub path: String,
    /// What is wrong, in Kubernetes' words where it has them.
    pub message: String,
}

/// Why a pool's MachineConfigs cannot be selected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// The pool manifest's selector is malformed.
    #[error("MachineConfigPool {pool:?}: error at $.spec.machineConfigSelector.{}: {}", .error.path, .error.message)]
    InvalidSelector {
        /// The pool.
        pool: String,
        /// What is wrong (part of the message, not the `source()`).
        error: SelectorError,
    },
    /// The pool manifest has no selector, or an empty one: it selects nothing.
    #[error(
        "MachineConfigPool {pool:?}: spec.machineConfigSelector is missing or empty, so it selects no MachineConfigs"
    )]
    EmptySelector {
        /// The pool.
        pool: String,
    },
    /// The pool manifest is for another pool than the one asked for.
    #[error("MachineConfigPool manifest is named {manifest:?}, not {pool:?}")]
    PoolNameMismatch {
        /// The name asked for.
        pool: String,
        /// `metadata.name` of the manifest.
        manifest: String,
    },
    /// Nothing matched: the MCO's wording, then — when MachineConfigs were offered — how
    /// many, the selector they miss and one's labels (the usual cause: the role label
    /// missing or misspelt).
    #[error("couldn't find any MachineConfigs for pool: {pool}{hint}")]
    NoMachineConfigs {
        /// The pool.
        pool: String,
        /// `""`, or ` (3 MachineConfigs exist, none with labels matching …)`.
        hint: String,
    },
}

impl Classify for SelectorError {
    /// `InvalidLabelSelector`.
    fn reason(&self) -> &'static str {
        "InvalidLabelSelector"
    }

    /// Always permanent: the selector must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

impl Classify for SelectError {
    /// `InvalidLabelSelector`, `EmptyMachineConfigSelector`, `PoolNameMismatch`, or
    /// `NoMachineConfigSelected`.
    fn reason(&self) -> &'static str {
        match self {
            SelectError::InvalidSelector { error, .. } => error.reason(),
            SelectError::EmptySelector { .. } => "EmptyMachineConfigSelector",
            SelectError::PoolNameMismatch { .. } => "PoolNameMismatch",
            SelectError::NoMachineConfigs { .. } => "NoMachineConfigSelected",
        }
    }

    /// Always permanent: the pool or the MachineConfigs must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// One parsed requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    /// Label present with one of the values.
    In(String, Vec<String>),
    /// Label absent, or present with none of the values.
    NotIn(String, Vec<String>),
    /// Label present.
    Exists(String),
    /// Label absent.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A label selector, parsed: requirements that all must hold. An empty selector (no
/// requirement) matches everything in Kubernetes; [`select_for_pool`] treats it as selecting
/// nothing, as the MCO does for pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// The selector as `kubectl get -l` writes one: `k=v`, `k in (a,b)`, `k notin (a)`, `k`,
/// `!k`, comma-separated.
impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r {
                Requirement::In(k, vs) if vs.len() == 1 => format!("{k}={}", vs[0]),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl Selector {
    /// Parse a Kubernetes `LabelSelector` with `metav1.LabelSelectorAsSelector`'s rules:
    /// `In`/`NotIn` need values, `Exists`/`DoesNotExist` must have none.
    pub fn parse(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::In(k.clone(), vec![v.clone()]));
        }
        for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
            let values = e.values.clone().unwrap_or_default();
            let err = |field: &str, message: String| SelectorError {
                path: format!("matchExpressions.{i}.{field}"),
                message,
            };
            let req = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(err(
                        "values",
                        "for 'in', 'notin' operators, values set can't be empty".into(),
                    ));
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(err(
                        "values",
                        "values set must be empty for exists and does not exist".into(),
                    ));
                }
                "In" => Requirement::In(e.key.clone(), values),
                "NotIn" => Requirement::NotIn(e.key.clone(), values),
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                other => {
                    return Err(err(
                        "operator",
                        format!("{other:?} is not a valid label selector operator"),
                    ));
                }
            };
            requirements.push(req);
        }
        Ok(Selector { requirements })
    }

    /// The selector for a pool without a manifest (see the module documentation).
    pub fn for_role(pool_name: &str) -> Self {
        let roles = if pool_name == WORKER_ROLE || pool_name == MASTER_ROLE {
            vec![pool_name.to_owned()]
        } else {
            vec![WORKER_ROLE.to_owned(), pool_name.to_owned()]
        };
        Selector {
            requirements: vec![Requirement::In(ROLE_LABEL.to_owned(), roles)],
        }
    }

    /// Whether it has no requirement at all.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a set of labels satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// The MachineConfigs of pool `pool_name`, in input order: chosen by `pool`'s
/// `spec.machineConfigSelector` when a manifest is given, else by the role-label convention.
pub fn select_for_pool<'a>(
    pool: Option<&MachineConfigPool>,
    pool_name: &str,
    mcs: &'a [MachineConfig],
) -> Result<Vec<&'a MachineConfig>, SelectError> {
    let selector = match pool {
        None => Selector::for_role(pool_name),
        Some(p) => {
            if let Some(manifest) = p.metadata.name.as_deref()
                && manifest != pool_name
            {
                return Err(SelectError::PoolNameMismatch {
                    pool: pool_name.to_owned(),
                    manifest: manifest.to_owned(),
                });
            }
            let empty = LabelSelector::default();
            let raw = p.spec.machine_config_selector.as_ref().unwrap_or(&empty);
            let selector = Selector::parse(raw).map_err(|error| SelectError::InvalidSelector {
                pool: pool_name.to_owned(),
                error,
            })?;
            if selector.is_empty() {
                return Err(SelectError::EmptySelector {
                    pool: pool_name.to_owned(),
                });
            }
            selector
        }
    };
    let no_labels = BTreeMap::new();
    let selected: Vec<&MachineConfig> = mcs
        .iter()
        .filter(|mc| selector.matches(mc.metadata.labels.as_ref().unwrap_or(&no_labels)))
        .collect();
    if selected.is_empty() {
        let hint = match mcs.first() {
            None => String::new(),
            Some(first) => {
                let labels = first
                    .metadata
                    .labels
                    .iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>();
                format!(
                    " ({} MachineConfig{} exist{}, none with labels matching the pool's \
                     selector {selector}; {} has {})",
                    mcs.len(),
                    if mcs.len() == 1 { "" } else { "s" },
                    if mcs.len() == 1 { "s" } else { "" },
                    first.metadata.name.as_deref().unwrap_or("the first"),
                    if labels.is_empty() {
                        "no labels".to_owned()
                    } else {
                        labels.join(",")
                    }
                )
            }
        };
        return Err(SelectError::NoMachineConfigs {
            pool: pool_name.to_owned(),
            hint,
        });
    }
    Ok(selected)
}
