//! What the rollout decides from: the layered pools (their rendered config, the image built
//! for it once its build Succeeded, `maxUnavailable`, `paused`, the soak), every node (labels,
//! the MCO's and machineos's annotations, readiness and since when, cordon, zone, age, a
//! blocked drain, the agent's timing of its updates and its rollback records), the
//! MachineImages, the per-architecture manifests of the multi-architecture images
//! MachineOSImages record and their quarantine; each pool's health gate and canaries. Built
//! by the controller from its caches; plain data.

use std::collections::BTreeMap;

use crate::selector::Selector;
use crate::vocab::{self, NodeState};

pub use machineos_vocab::Timestamp;

/// `maxUnavailable`: a count or a percentage of the nodes it applies to — or a value that is
/// neither, which moves no node (it is not silently read as 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    /// A number of nodes.
    Count(i64),
    /// A percentage, rounded down.
    Percent(i64),
    /// Set, but not a non-negative integer or a non-negative percentage (`"abc"`, `-1`,
    /// `"-50%"`, `"3"`: an int-or-string's string must be a percentage, as kube's
    /// `GetScaledValueFromIntOrPercent` requires).
    Invalid,
}

impl MaxUnavailable {
    /// The words of a condition about an [`MaxUnavailable::Invalid`] value.
    pub const INVALID: &str =
        "spec.maxUnavailable is not a non-negative integer or percentage (\"25%\")";

    /// Parse an annotation's text: `3` or `25%`; anything else is
    /// [`MaxUnavailable::Invalid`].
    pub fn parse_text(s: &str) -> MaxUnavailable {
        let s = s.trim();
        match s.strip_suffix('%') {
            Some(p) => p
                .parse()
                .ok()
                .filter(|p: &i64| *p >= 0)
                .map(MaxUnavailable::Percent),
            None => s
                .parse()
                .ok()
                .filter(|c: &i64| *c >= 0)
                .map(MaxUnavailable::Count),
        }
        .unwrap_or(MaxUnavailable::Invalid)
    }

    /// Parse the int-or-string form (`2`, `"10%"`); anything else set is
    /// [`MaxUnavailable::Invalid`]; `null` is `None` (the default, 1).
    pub fn parse(v: &serde_json::Value) -> Option<MaxUnavailable> {
        let valid = match v {
            serde_json::Value::Null => return None,
            serde_json::Value::Number(n) => n.as_i64().map(MaxUnavailable::Count),
            serde_json::Value::String(s) => s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .map(MaxUnavailable::Percent),
            _ => None,
        };
        Some(match valid {
            Some(MaxUnavailable::Count(n) | MaxUnavailable::Percent(n)) if n < 0 => {
                MaxUnavailable::Invalid
            }
            Some(m) => m,
            None => MaxUnavailable::Invalid,
        })
    }

    /// How many of `total` nodes may be unavailable: scaled and rounded down, at least 1
    /// (the MCO's `maxUnavailable`: 0 becomes 1); 0 for an invalid value.
    pub fn scaled(limit: Option<MaxUnavailable>, total: usize) -> usize {
        let n = match limit {
            None => 1,
            Some(MaxUnavailable::Count(c)) => c,
            Some(MaxUnavailable::Percent(p)) => p.saturating_mul(total as i64) / 100,
            Some(MaxUnavailable::Invalid) => return 0,
        };
        usize::try_from(n).unwrap_or(0).max(1)
    }
}

#[cfg(test)]
mod max_unavailable_tests {
    use super::MaxUnavailable::{self, *};
    use serde_json::json;

    #[test]
    fn int_or_percentage_else_invalid_and_invalid_moves_nothing() {
        let cases = [
            (json!(2), Some(Count(2))),
            (json!(0), Some(Count(0))),
            (json!("10%"), Some(Percent(10))),
            (json!(null), None),
            (json!("abc"), Some(Invalid)),
            (json!(-1), Some(Invalid)),
            (json!("-50%"), Some(Invalid)),
            (json!("3"), Some(Invalid)),
            (json!(1.5), Some(Invalid)),
            (json!(true), Some(Invalid)),
        ];
        for (v, want) in cases {
            assert_eq!(MaxUnavailable::parse(&v), want, "{v}");
        }
        assert_eq!(MaxUnavailable::scaled(Some(Invalid), 10), 0);
        assert_eq!(MaxUnavailable::scaled(Some(Count(0)), 10), 1);
        assert_eq!(MaxUnavailable::scaled(Some(Percent(25)), 10), 2);
        assert_eq!(MaxUnavailable::scaled(None, 10), 1);
    }
}

/// Where a pool's image stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolImage {
    /// The build for the pool's current rendered config Succeeded: this image, by digest.
    Built(String),
    /// Not yet: why (shown in the `Updating` condition; nothing moves).
    Pending(String),
    /// The pool builds no image: its nodes are not the rollout's (a MachineImage may still
    /// move them, within the pool's `maxUnavailable`).
    NotLayered,
}

/// One pool (layered or not: membership and `maxUnavailable` matter for both).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolObserved {
    /// Its name.
    pub name: String,
    /// Its `spec.nodeSelector` (a pool without one selects no node).
    pub node_selector: Option<Selector>,
    /// The rendered MachineConfig it is to run (`spec.configuration.name`).
    pub config: String,
    /// Its image.
    pub image: PoolImage,
    /// `spec.paused`: builds run, nodes do not move.
    pub paused: bool,
    /// `spec.maxUnavailable`.
    pub max_unavailable: Option<MaxUnavailable>,
    /// How long a node must have been Ready after its update before its slot frees.
    pub min_ready_seconds: i64,
    /// `machineos.io/max-staging`: how many of its nodes may pull the image ahead of their
    /// turn at once (a count or a percentage of its members, at least 1); `None`: all.
    pub max_staging: Option<MaxUnavailable>,
    /// The statuses of its conditions now (type → True/False), so Events fire on change
    /// and `Degraded` aggregates `RenderDegraded` and `ImageBuildDegraded`.
    pub conditions: BTreeMap<String, bool>,
    /// The health gate its nodes are handed with each move (`None`: turned off), or why its
    /// annotations cannot be read (nothing moves then: a gate asked for is never dropped).
    pub gate: Result<Option<crate::health::Gate>, crate::health::GateError>,
    /// [`vocab::CANARY`]: the nodes that move first and must pass the gate before the rest.
    pub canary: Option<Canary>,
    /// [`vocab::ROLLBACK_POLICY`] is `pool`: a quarantined image's nodes go back to the
    /// previous image too.
    pub rollback_pool: bool,
}

/// A pool's canary nodes ([`vocab::CANARY`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Canary {
    /// The first `n` of its nodes in rollout order.
    Count(usize),
    /// These nodes (those of them in the pool).
    Nodes(Vec<String>),
}

impl Canary {
    /// Parse the annotation: a count, or comma-separated node names; `None` when empty or 0.
    pub fn parse(s: &str) -> Option<Canary> {
        let s = s.trim();
        if let Ok(n) = s.parse::<usize>() {
            return (n > 0).then_some(Canary::Count(n));
        }
        let names: Vec<String> = s
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        (!names.is_empty()).then_some(Canary::Nodes(names))
    }
}

/// A MachineOSImage's quarantine, as the rollout reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuarantineObserved {
    /// The MachineOSImage.
    pub name: String,
    /// Its `Quarantined` condition is True: the message it says (which node, which check).
    pub quarantined: Option<String>,
    /// [`vocab::LIFT_QUARANTINE`] is set: the quarantine is to be lifted.
    pub lift: bool,
    /// The image the pool ran before this one and the rendered MachineConfig it was built
    /// from (its MachineOSImage's previous image, while that MachineOSImage exists): where
    /// [`PoolObserved::rollback_pool`] moves the nodes back to.
    pub previous: Option<Previous>,
}

/// An image the pool ran before, with its rendered MachineConfig.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Previous {
    /// The image, by digest.
    pub image: String,
    /// Its rendered MachineConfig.
    pub config: String,
}

/// A node's annotations, as far as the rollout reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAnnotations {
    /// `currentConfig`.
    pub current_config: Option<String>,
    /// `desiredConfig`.
    pub desired_config: Option<String>,
    /// `currentImage`.
    pub current_image: Option<String>,
    /// `desiredImage`.
    pub desired_image: Option<String>,
    /// `state` (`None` when absent or unknown).
    pub state: Option<NodeState>,
    /// `reason`.
    pub reason: Option<String>,
    /// [`vocab::STAGE_IMAGE`].
    pub stage_image: Option<String>,
    /// [`vocab::STAGED_IMAGE`].
    pub staged_image: Option<String>,
    /// [`vocab::PULL_SECRET`].
    pub pull_secret: Option<String>,
    /// [`vocab::DRIVEN_BY`].
    pub driven_by: Option<String>,
    /// The agent's step in [`vocab::PROGRESS`] (`draining`, `deploying`, `rebooting`,
    /// `degraded`), for `machineos rollout status`; nothing decides on it.
    pub step: Option<String>,
    /// When the agent started the update in progress ([`vocab::PROGRESS`]'s
    /// `updateStarted`), only if that progress is for the desired config and image; for
    /// `machineos rollout status`'s estimate, nothing decides on it.
    pub update_started: Option<Timestamp>,
    /// The last update the agent finished and timed ([`vocab::LAST_UPDATE`]); for
    /// `machineos rollout status`'s estimate, nothing decides on it.
    pub last_update: Option<LastUpdate>,
    /// [`vocab::IMAGE_MANIFESTS`], as written (the rollout rewrites it when it differs).
    pub image_manifests: Option<String>,
    /// [`NODE_DISRUPTION`](machineos_disruption::NODE_DISRUPTION), as written: the plan of
    /// the move the desired annotations name.
    pub disruption: Option<String>,
    /// That plan, parsed once here (the decision asks of it for every node, several times
    /// per pass); `None` when absent or unreadable.
    pub disruption_plan: Option<machineos_disruption::NodePlan>,
    /// The agent could not apply the move the desired annotations name live
    /// ([`vocab::PROGRESS`]'s `rebootRequired`): it waits, in service, for a slot.
    pub reboot_required: bool,
    /// [`vocab::AGENT_FEATURES`]: the agent applies moves below `Drain` live.
    pub live_apply: bool,
    /// [`vocab::HEALTH_GATE`], as written.
    pub health_gate: Option<String>,
    /// [`vocab::ROLLED_BACK`], as written.
    pub rolled_back_raw: Option<String>,
    /// That record, parsed (`None` when absent or unreadable).
    pub rolled_back: Option<crate::health::RolledBack>,
}

/// The [`vocab::LAST_UPDATE`] annotation: the last update the agent finished and timed. The
/// agent writes it, the rollout reads it (this type is the format both use).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LastUpdate {
    /// The rendered config it updated to.
    pub config: String,
    /// The image it updated to, by digest.
    pub image: String,
    /// When the agent began the update (milliseconds since the Unix epoch).
    pub started: i64,
    /// When the node ran the target and the agent was done (milliseconds since the epoch).
    pub finished: i64,
}

impl LastUpdate {
    /// The annotation value (JSON).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse the annotation value; `None` for anything unreadable.
    pub fn parse(s: &str) -> Option<LastUpdate> {
        serde_json::from_str(s).ok()
    }

    /// Whether it is the update to `config` and `image`.
    pub fn is_to(&self, config: &str, image: &str) -> bool {
        self.config == config && self.image == image
    }

    /// How long it took, in whole seconds (`None` when it finished before it started: a
    /// clock that stepped back).
    pub fn seconds(&self) -> Option<u64> {
        u64::try_from(self.finished.checked_sub(self.started)?)
            .ok()
            .map(|ms| ms / 1000)
    }
}

/// The [`vocab::IMAGE_MANIFESTS`] annotation, and the rollout's record of every
/// multi-architecture image: per image (its index pullspec, `repo@sha256:…`), each
/// architecture's (`kubernetes.io/arch`) manifest pullspec in the same repository. The
/// rollout writes it, the agent reads it (this type is the format both use).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ImageManifests(pub BTreeMap<String, BTreeMap<String, String>>);

impl ImageManifests {
    /// The annotation value (JSON).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse the annotation value; `None` for anything unreadable.
    pub fn parse(s: &str) -> Option<ImageManifests> {
        serde_json::from_str(s).ok()
    }

    /// The manifest of `image` for `arch`, when `image` is a recorded index that has one.
    pub fn manifest(&self, image: &str, arch: &str) -> Option<&str> {
        self.0.get(image)?.get(arch).map(String::as_str)
    }

    /// The entries of `images` (those recorded), for one node's annotation.
    pub fn only<'a>(&self, images: impl IntoIterator<Item = &'a str>) -> ImageManifests {
        ImageManifests(
            images
                .into_iter()
                .filter_map(|i| Some((i.to_owned(), self.0.get(i)?.clone())))
                .collect(),
        )
    }
}

impl NodeAnnotations {
    /// Read them from a node's annotation map.
    pub fn from_map(a: &BTreeMap<String, String>) -> NodeAnnotations {
        let get = |k: &str| a.get(k).filter(|v| !v.is_empty()).cloned();
        let progress = a
            .get(vocab::PROGRESS)
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok());
        let desired_config = get(vocab::DESIRED_CONFIG);
        let desired_image = get(vocab::DESIRED_IMAGE);
        // The start of the update to what is desired now (not of an older target).
        let update_started = progress
            .as_ref()
            .filter(|p| {
                let target = |k: &str| p.get("target")?.get(k)?.as_str();
                target("image") == desired_image.as_deref()
                    && target("config") == Some(desired_config.as_deref().unwrap_or_default())
            })
            .and_then(|p| p.get("updateStarted")?.as_i64())
            .map(|ms| ms.div_euclid(1000));
        NodeAnnotations {
            current_config: get(vocab::CURRENT_CONFIG),
            desired_config,
            current_image: get(vocab::CURRENT_IMAGE),
            desired_image,
            state: a.get(vocab::STATE).and_then(|s| NodeState::parse(s)),
            reason: get(vocab::REASON),
            stage_image: get(vocab::STAGE_IMAGE),
            staged_image: get(vocab::STAGED_IMAGE),
            pull_secret: get(vocab::PULL_SECRET),
            driven_by: get(vocab::DRIVEN_BY),
            step: progress
                .as_ref()
                .and_then(|p| p.get("step")?.as_str().map(str::to_owned)),
            update_started,
            last_update: a.get(vocab::LAST_UPDATE).and_then(|v| LastUpdate::parse(v)),
            image_manifests: get(vocab::IMAGE_MANIFESTS),
            disruption_plan: a
                .get(machineos_disruption::NODE_DISRUPTION)
                .and_then(|v| machineos_disruption::NodePlan::parse(v)),
            disruption: get(machineos_disruption::NODE_DISRUPTION),
            reboot_required: progress
                .as_ref()
                .filter(|p| {
                    let target = |k: &str| p.get("target")?.get(k)?.as_str();
                    target("image").is_some()
                        && target("image") == a.get(vocab::DESIRED_IMAGE).map(String::as_str)
                        && target("config").unwrap_or_default()
                            == a.get(vocab::DESIRED_CONFIG).map_or("", String::as_str)
                })
                .and_then(|p| p.get("rebootRequired")?.as_bool())
                .unwrap_or(false),
            live_apply: a
                .get(vocab::AGENT_FEATURES)
                .is_some_and(|f| f.split(',').any(|x| x.trim() == vocab::FEATURE_LIVE_APPLY)),
            health_gate: get(vocab::HEALTH_GATE),
            rolled_back: a
                .get(vocab::ROLLED_BACK)
                .and_then(|v| crate::health::RolledBack::parse(v)),
            rolled_back_raw: get(vocab::ROLLED_BACK),
        }
    }
}

/// One node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeObserved {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// The `Ready` condition is True.
    pub ready: bool,
    /// When `Ready` last changed (its `lastTransitionTime`).
    pub ready_since: Option<Timestamp>,
    /// `spec.unschedulable` (cordoned, by anyone).
    pub unschedulable: bool,
    /// The annotations.
    pub annotations: NodeAnnotations,
    /// The agent reports its drain blocked or failed (MachineConfigNode `Drained=False`):
    /// the message, typically naming the pod and its PodDisruptionBudget.
    pub drain_blocked: Option<String>,
    /// What moving it to its pool's rendered config and built image costs, by the node
    /// disruption policies (the controller decides it from the config the node runs);
    /// `None`: not known, a reboot.
    pub move_plan: Option<machineos_disruption::NodePlan>,
    /// Its agent's health gate verdict (MachineConfigNode `NodeHealthy`: status, reason,
    /// message), for `machineos rollout plan`; nothing decides on it.
    pub health: Option<(String, String, String)>,
}

impl NodeObserved {
    /// `topology.kubernetes.io/zone`.
    pub fn zone(&self) -> Option<&str> {
        self.labels.get(vocab::ZONE_LABEL).map(String::as_str)
    }

    /// Whether the update in flight is applied to the running, schedulable node (its plan,
    /// written with the desired annotations, is below `Drain`): such a node stays available.
    pub fn updating_live(&self) -> bool {
        let a = &self.annotations;
        let (Some(config), Some(image)) = (a.desired_config.as_deref(), a.desired_image.as_deref())
        else {
            return false;
        };
        !self.unschedulable
            && a.disruption_plan
                .as_ref()
                .is_some_and(|p| p.is_for(config, image) && !p.class.takes_slot())
    }

    /// Whether moving it to `config` and `image` takes no rollout slot: its plan is for that
    /// move and below `Drain`, and its agent applies such moves live.
    pub fn moves_live(&self, config: &str, image: &str) -> bool {
        self.annotations.live_apply
            && self
                .move_plan
                .as_ref()
                .is_some_and(|p| p.is_for(config, image) && !p.class.takes_slot())
    }

    /// Whether its agent waits for a slot to reboot into the move the desired annotations
    /// name (it could not apply it live) and has none yet (its plan is still below `Drain`).
    pub fn awaits_reboot_slot(&self) -> bool {
        self.annotations.reboot_required && self.updating_live()
    }
}

/// Which nodes a MachineImage targets.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageTarget {
    /// One node.
    Node(String),
    /// The nodes a selector matches, at most `max_unavailable` (default 1) at a time.
    Selector {
        /// The selector.
        selector: Selector,
        /// The limit.
        max_unavailable: Option<MaxUnavailable>,
    },
}

/// One MachineImage.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineImageObserved {
    /// Its name.
    pub name: String,
    /// The image, by digest.
    pub image: String,
    /// The nodes.
    pub target: ImageTarget,
    /// `namespace/name` of the Secret its nodes pull with.
    pub pull_secret: Option<String>,
    /// The statuses of its conditions now (Events fire on change).
    pub conditions: BTreeMap<String, bool>,
}

impl MachineImageObserved {
    /// Whether it targets `node`.
    pub fn matches(&self, node: &NodeObserved) -> bool {
        match &self.target {
            ImageTarget::Node(n) => *n == node.name,
            ImageTarget::Selector { selector, .. } => selector.matches(&node.labels),
        }
    }
}

/// Everything the rollout decides from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// Every pool; only layered ones ([`PoolImage`] not `NotLayered`) roll their nodes.
    pub pools: Vec<PoolObserved>,
    /// Every node.
    pub nodes: Vec<NodeObserved>,
    /// Every MachineImage.
    pub machine_images: Vec<MachineImageObserved>,
    /// The per-architecture manifests of every multi-architecture image a MachineOSImage
    /// records (single-architecture images are not listed).
    pub image_manifests: ImageManifests,
    /// The node the controller runs on: updated last.
    pub controller_node: Option<String>,
    /// The quarantine state of every image a MachineOSImage records, by its pullspec.
    pub quarantine: BTreeMap<String, QuarantineObserved>,
}
