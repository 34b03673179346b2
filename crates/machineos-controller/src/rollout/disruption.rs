//! What moving onto its image costs each layered pool's nodes still to move, recorded on the
//! image's MachineOSImage (`status.disruption`): pure, over the pass's snapshot and
//! observation, with the node disruption policies the pass read
//! ([`machineos_disruption::for_nodes`]: each node's `currentConfig` to the pool's rendered
//! config; a node without one, or whose MachineConfig is gone, counts as a reboot).
//!
//! The policies are the `MachineConfiguration` object `cluster`'s merged over the MCO's
//! defaults, read at most every [`POLICY_TTL`] ([`Policies`]); without the object (or the
//! CRD), or when it cannot be read or is invalid, the MCO's defaults (logged).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::{Client, ResourceExt};
use machineos_api::v1alpha1::{ClassCount, ImageDisruption};
use machineos_disruption::{Class, ClusterPolicies};
use machineos_rollout::observed::PoolImage;

use crate::kinds;
use crate::observe::Snapshot;

/// How long read policies are used before they are read again.
pub const POLICY_TTL: Duration = Duration::from_secs(30);

/// The policies the controller uses, and where they came from.
#[derive(Debug, Clone)]
pub struct Policies {
    /// The merged policies.
    pub policies: ClusterPolicies,
    /// `MachineConfiguration cluster` or `the MCO's defaults`.
    pub source: String,
    read_at: Instant,
}

impl Policies {
    fn defaults() -> Policies {
        Policies {
            policies: ClusterPolicies::defaults(),
            source: "the MCO's defaults".into(),
            read_at: Instant::now(),
        }
    }

    /// Whether these were read less than [`POLICY_TTL`] ago.
    pub fn fresh(&self) -> bool {
        self.read_at.elapsed() < POLICY_TTL
    }

    /// The cluster's policies, read now.
    pub async fn read(client: &Client) -> Policies {
        let api = kinds::all(client, &kinds::machine_configuration());
        let object = match api.get_opt("cluster").await {
            Ok(Some(o)) => o,
            Ok(None) => return Policies::defaults(),
            Err(kube::Error::Api(e)) if e.code == 404 => return Policies::defaults(),
            Err(e) => {
                tracing::warn!(error = %e, "reading MachineConfiguration cluster (using the MCO's default disruption policies)");
                return Policies::defaults();
            }
        };
        let value = serde_json::to_value(&object).unwrap_or_default();
        match ClusterPolicies::of_machine_configuration(Some(&value)) {
            Ok(policies) => Policies {
                policies,
                source: "MachineConfiguration cluster".into(),
                read_at: Instant::now(),
            },
            Err(e) => {
                tracing::warn!(error = %e, "MachineConfiguration cluster (using the MCO's default disruption policies)");
                Policies::defaults()
            }
        }
    }
}

fn class_name(c: Class) -> String {
    format!("{c:?}")
}

/// Per layered pool with a built image: what its members not on the image cost to move
/// (`None` for a pool none of whose members is left to move).
pub fn for_pools(
    s: &Snapshot,
    o: &machineos_rollout::Observed,
    policies: &Policies,
) -> BTreeMap<String, Option<ImageDisruption>> {
    // Only the MachineConfigs named (pools' targets, nodes' current configs) are read.
    let mut wanted: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for pool in &o.pools {
        wanted.insert(pool.config.as_str());
    }
    for n in &o.nodes {
        wanted.extend(n.annotations.current_config.as_deref());
    }
    let mcs: BTreeMap<String, machineos_api::v1::MachineConfig> = s
        .machine_configs
        .iter()
        .filter(|m| wanted.contains(m.name_any().as_str()))
        .filter_map(|m| {
            let v = serde_json::to_value(m.as_ref()).ok()?;
            Some((m.name_any(), serde_json::from_value(v).ok()?))
        })
        .collect();
    let mut out = BTreeMap::new();
    for pool in &o.pools {
        let PoolImage::Built(image) = &pool.image else {
            continue;
        };
        let Some(target) = mcs.get(&pool.config) else {
            continue;
        };
        let moves: Vec<(String, Result<&machineos_api::v1::MachineConfig, String>)> = o
            .nodes
            .iter()
            .filter(|n| {
                pool.node_selector
                    .as_ref()
                    .is_some_and(|sel| sel.matches(&n.labels))
            })
            .filter(|n| n.annotations.current_image.as_deref() != Some(image.as_str()))
            .map(|n| {
                let mc = match n.annotations.current_config.as_deref() {
                    None | Some("") => Err(format!("Node {} has no currentConfig", n.name)),
                    Some(c) => mcs
                        .get(c)
                        .ok_or_else(|| format!("its MachineConfig {c} is gone")),
                };
                (n.name.clone(), mc)
            })
            .collect();
        if moves.is_empty() {
            out.insert(pool.name.clone(), None);
            continue;
        }
        let d = machineos_disruption::for_nodes(&moves, target, &policies.policies);
        let mut counts: BTreeMap<Class, i64> = BTreeMap::new();
        for n in &d.nodes {
            *counts.entry(n.class).or_default() += 1;
        }
        out.insert(
            pool.name.clone(),
            Some(ImageDisruption {
                class: class_name(d.class),
                nodes: counts
                    .into_iter()
                    .rev()
                    .map(|(class, count)| ClassCount {
                        class: class_name(class),
                        count,
                    })
                    .collect(),
                policies: policies.source.clone(),
                acted_on: false,
            }),
        );
    }
    out
}
