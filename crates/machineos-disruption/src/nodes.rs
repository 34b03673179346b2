//! What a rollout's moves cost, node by node: each node's move from the rendered
//! MachineConfig it runs to the pool's target, decided by [`crate::decide()`], and the
//! strongest class over them — what `machineos rollout plan` shows as `disruption`.
//!
//! A node whose current rendered MachineConfig is unknown (no `currentConfig`, or the
//! MachineConfig is gone) is counted a `Reboot`, with the reason saying which: nothing
//! proves less is enough. A move whose images differ by more than the configs is decided
//! with their filesystem difference when it is known ([`NodeMove::image`],
//! [`crate::image::decide_across_images`]). Nodes with the same current config (and the
//! same image evidence) share one decision.

use std::collections::BTreeMap;

use machineos_api::v1::MachineConfig;
use serde::Serialize;

use crate::changes::ConfigChanges;
use crate::decide::{Class, Outcome, Reason, decide};
use crate::image::{ImageEvidence, decide_across_images, raise_by_paths};
use crate::policy::{Action, ClusterPolicies};

/// One node's move, when what it runs is known.
#[derive(Debug, Clone)]
pub struct NodeMove<'a> {
    /// The rendered MachineConfig it runs.
    pub config: &'a MachineConfig,
    /// What the filesystem difference between its image and the target's says, when it was
    /// measured from exactly its image.
    pub image: Option<ImageBasis<'a>>,
}

/// How a move's images relate, with their measured difference.
#[derive(Debug, Clone)]
pub enum ImageBasis<'a> {
    /// Two builds of one base: the configs decide, raised by what the paths need
    /// ([`crate::image::raise_by_paths`]).
    SameBase(&'a ImageEvidence),
    /// The images differ by more than the configs (how, for the reason shown): decided
    /// with the difference ([`crate::image::decide_across_images`]).
    Across(String, &'a ImageEvidence),
}

/// One node's move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruption {
    /// The node.
    pub node: String,
    /// The rendered MachineConfig it runs, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The class of its move.
    pub class: Class,
    /// Whether it is drained first.
    pub drain: bool,
    /// The actions, in order.
    pub actions: Vec<Action>,
    /// What decided it.
    pub reasons: Vec<Reason>,
}

/// A rollout's moves (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// The target rendered MachineConfig.
    pub to: String,
    /// The strongest class over the moves (`None` when nothing moves).
    pub class: Class,
    /// Per node, in the order given.
    pub nodes: Vec<NodeDisruption>,
}

/// The disruption of moving each of `moves` (node, the rendered MachineConfig it runs, or
/// why that is unknown) to `target` under `policies`, from the configs alone.
pub fn for_nodes(
    moves: &[(String, Result<&MachineConfig, String>)],
    target: &MachineConfig,
    policies: &ClusterPolicies,
) -> Disruption {
    let moves: Vec<(String, Result<NodeMove<'_>, String>)> = moves
        .iter()
        .map(|(node, m)| {
            let m = m.clone().map(|config| NodeMove {
                config,
                image: None,
            });
            (node.clone(), m)
        })
        .collect();
    for_node_moves(&moves, target, policies)
}

/// The disruption of moving each of `moves` (node, what it runs, or why that is unknown)
/// to `target` under `policies` (see the module documentation).
pub fn for_node_moves(
    moves: &[(String, Result<NodeMove<'_>, String>)],
    target: &MachineConfig,
    policies: &ClusterPolicies,
) -> Disruption {
    type Key = (String, Option<(Option<String>, ImageEvidence)>);
    let mut memo: BTreeMap<Key, Outcome> = BTreeMap::new();
    let mut nodes = Vec::new();
    for (node, current) in moves {
        let (from, outcome) = match current {
            Ok(m) => {
                let name = m.config.name().to_owned();
                let key = (
                    name.clone(),
                    m.image.as_ref().map(|b| match b {
                        ImageBasis::SameBase(e) => (None, (*e).clone()),
                        ImageBasis::Across(why, e) => (Some(why.clone()), (*e).clone()),
                    }),
                );
                let o = memo
                    .entry(key)
                    .or_insert_with(|| {
                        let changes = ConfigChanges::between(m.config, target);
                        match &m.image {
                            Some(ImageBasis::Across(why, evidence)) => {
                                decide_across_images(&changes, policies, evidence, why)
                            }
                            Some(ImageBasis::SameBase(evidence)) => {
                                raise_by_paths(decide(&changes, policies), evidence)
                            }
                            None => decide(&changes, policies),
                        }
                    })
                    .clone();
                (Some(name), o)
            }
            Err(why) => (
                None,
                Outcome {
                    actions: vec![Action::Reboot],
                    drain: true,
                    class: Class::Reboot,
                    reasons: vec![Reason {
                        change: why.clone(),
                        policy: None,
                        actions: vec![Action::Reboot],
                    }],
                },
            ),
        };
        nodes.push(NodeDisruption {
            node: node.clone(),
            from,
            class: outcome.class,
            drain: outcome.drain,
            actions: outcome.actions,
            reasons: outcome.reasons,
        });
    }
    Disruption {
        to: target.name().to_owned(),
        class: nodes.iter().map(|n| n.class).max().unwrap_or(Class::None),
        nodes,
    }
}
