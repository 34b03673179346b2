//! The rollout decision: [`decide`] turns what was observed into node annotation patches,
//! pool / MachineOSImage / MachineImage statuses and Events. Pure; the controller applies.
//!
//! The rules (`docs/mco-behaviour.md` §3.1, with machineos's additions):
//! * **Membership.** A node belongs to the pool whose `nodeSelector` matches it; matched by
//!   `worker` and a custom pool it belongs to the custom one (the MCO's rule); matched by two
//!   custom pools, to none (nothing moves it).
//! * **Who drives a node.** A node one MachineImage matches follows that MachineImage; two or
//!   more → a conflict, reported on each, and nobody moves the node; otherwise its pool,
//!   if layered.
//! * **Gate.** A pool's nodes move only once the build for its current rendered config
//!   Succeeded ([`PoolImage::Built`]); then `desiredConfig` and `desiredImage` are set
//!   together, in one patch, and only on nodes whose turn it is. Paused pools move nothing.
//! * **Unavailable** = NotReady, cordoned (by anyone), Degraded, mid-update (desired ≠
//!   current, or state Working/Rebooting) — whoever drives it — or Ready for less than the
//!   pool's `minReadySeconds` (the soak: a slot frees only once the node booted the desired
//!   image, is Ready and stayed Ready that long).
//! * **Capacity** of a pool = `maxUnavailable` scaled over its members (rounded down, at
//!   least 1) − its unavailable members. Re-targeting a node Degraded on an older image takes
//!   no slot (it holds one already), so a failure never blocks the next build. MachineImages are served first, each within its own
//!   `maxUnavailable` **and** its nodes' pool capacity, so the pool's limit holds whoever
//!   moves its nodes; then the pool's candidates take what is left.
//! * **Order**: zone (`topology.kubernetes.io/zone`, lexical, nodes without one last), then
//!   oldest first, then name; the controller's own node last.
//! * **Halt**: a node Degraded on the current target holds its slot and stops the rollout
//!   (no new node is targeted or staged): `NodeDegraded=True` naming the node and reason,
//!   a Warning Event on the change, the MachineOSImage `RolloutFailed`. A new target
//!   (another build, which a degraded node does not hold back) re-targets degraded nodes as
//!   candidates, and the condition says so: the way out is always a new image.
//! * **Staging**: every node a (running) rollout targets and that does not run its image yet
//!   gets [`vocab::STAGE_IMAGE`] at once, whatever its turn; the agent pulls it without
//!   disruption. A pool's [`vocab::MAX_STAGING`] paces it: at most that many nodes pulling at
//!   once (a count or a percentage, at least 1), in rollout order, so the next batches are
//!   staged first and a pool does not pull all at once. A MachineImage's `pullSecret` is passed in [`vocab::PULL_SECRET`].
//! * **Health gate** (`crate::health`): every move carries the pool's gate
//!   ([`vocab::HEALTH_GATE`], the node's pool's for a MachineImage's move); a pool whose gate
//!   annotations cannot be read moves nothing and says why in `Updating`.
//! * **Canaries** ([`vocab::CANARY`]): while any canary of a pool does not run its image,
//!   done and available past the soak, only canaries are candidates.
//! * **Rollback and quarantine**: a node whose [`vocab::ROLLED_BACK`] record names its
//!   desired image is targeted at what it runs again (no plan, no gate). The image a record
//!   names, or a MachineOSImage says is `Quarantined`, is quarantined ([`quarantined`]): a
//!   pool or MachineImage whose image it is targets and stages nothing (its pulls are
//!   withdrawn), the pool is `Degraded` naming the image, the check and the ways out (a new
//!   build; [`vocab::LIFT_QUARANTINE`] on the MachineOSImage), its MachineOSImage
//!   `RolloutFailed` (`Quarantined`) and `Quarantined=True`, a Warning Event
//!   (`ImageQuarantined`) when the MachineOSImage did not say so yet. A lift clears the
//!   records naming the image (the node is a candidate again in the same decision) and the
//!   executor removes the annotation after the node patches. A pool with
//!   [`vocab::ROLLBACK_POLICY`] `pool` whose image is quarantined rolls out to the image
//!   before it instead ([`crate::observed::QuarantineObserved::previous`]: the nodes on the
//!   bad image move back within the pool's limit, gated), saying so; unknown: nothing moves.
//! * **Multi-architecture images**: hosts report the manifest they booted, not the index
//!   `desiredImage` names. Every node whose `desiredImage` or [`vocab::STAGE_IMAGE`] (as this
//!   pass leaves them) is an index a MachineOSImage records gets those indexes'
//!   per-architecture manifests in [`vocab::IMAGE_MANIFESTS`], in the same patch; it is
//!   removed when neither is. `desiredImage` stays the index (the pullspec the pool records).

use std::collections::{BTreeMap, BTreeSet};

use crate::observed::{
    Canary, ImageTarget, MachineImageObserved, MaxUnavailable, NodeObserved, Observed, PoolImage,
    PoolObserved, Timestamp,
};
use crate::vocab::{self, NodeState};

/// The keys the rollout writes on nodes.
pub const MANAGED_KEYS: [&str; 6] = [
    vocab::DESIRED_CONFIG,
    vocab::DESIRED_IMAGE,
    vocab::DRIVEN_BY,
    vocab::STAGE_IMAGE,
    vocab::PULL_SECRET,
    vocab::IMAGE_MANIFESTS,
];

/// Annotation changes for one node: key → new value (`None` removes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePatch {
    /// The node.
    pub node: String,
    /// The changes (only keys whose value changes).
    pub annotations: BTreeMap<&'static str, Option<String>>,
}

/// A condition to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// Its type.
    pub type_: &'static str,
    /// True or False.
    pub status: bool,
    /// A CamelCase reason.
    pub reason: &'static str,
    /// A message.
    pub message: String,
}

/// The node counts of a pool or MachineImage status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes.
    pub machine: i32,
    /// Nodes running what they should.
    pub updated: i32,
    /// Nodes updated and available.
    pub ready: i32,
    /// Nodes unavailable (see the module docs).
    pub unavailable: i32,
    /// Nodes Degraded.
    pub degraded: i32,
    /// Nodes whose agent reports its drain blocked or failed (a PodDisruptionBudget, an
    /// eviction refused).
    pub drain_blocked: i32,
}

/// What the rollout reports for a layered pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReport {
    /// The pool.
    pub pool: String,
    /// Its counts.
    pub counts: Counts,
    /// `Updated`, `Updating`, `NodeDegraded`, `Degraded`.
    pub conditions: Vec<Condition>,
    /// The pool's built image and its MachineOSImage's `RollingOut` / `RolledOut` /
    /// `RolloutFailed` conditions.
    pub image: Option<(String, Vec<Condition>)>,
    /// Stopped by a failed node.
    pub halted: bool,
    /// Nodes targeted in this decision, in order.
    pub targeted: Vec<String>,
}

/// What the rollout reports for a MachineImage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReport {
    /// The MachineImage.
    pub name: String,
    /// Its counts.
    pub counts: Counts,
    /// `Updated`, `Updating`, `Degraded`, `Conflict`.
    pub conditions: Vec<Condition>,
}

/// The kind of object an Event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventObject {
    /// A MachineConfigPool.
    Pool,
    /// A MachineImage.
    MachineImage,
}

/// An Event to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The object's kind.
    pub kind: EventObject,
    /// The object's name.
    pub name: String,
    /// Warning (true) or Normal.
    pub warning: bool,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// The decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Node annotation changes.
    pub node_patches: Vec<NodePatch>,
    /// Layered pools' statuses.
    pub pools: Vec<PoolReport>,
    /// MachineImages' statuses.
    pub machine_images: Vec<ImageReport>,
    /// Events.
    pub events: Vec<Event>,
    /// Every MachineOSImage's `Quarantined` condition, and whether its
    /// [`vocab::LIFT_QUARANTINE`] annotation is to be removed (the lift is done: the node
    /// records are removed in this decision's node patches, which the executor applies
    /// first).
    pub quarantines: Vec<QuarantineReport>,
}

/// What the rollout reports for one MachineOSImage's quarantine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineReport {
    /// The MachineOSImage.
    pub name: String,
    /// Its image.
    pub image: String,
    /// Its `Quarantined` condition.
    pub condition: Condition,
    /// Remove its [`vocab::LIFT_QUARANTINE`] annotation.
    pub lifted: bool,
}

pub use machineos_vocab::condition;

pub use machineos_vocab::reason;

/// Who moves a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// Its (layered) pool.
    Pool(usize),
    /// One MachineImage.
    Image(usize),
    /// Several MachineImages: nobody.
    Conflict,
    /// Nobody (no pool, or a pool that builds no image).
    Nobody,
}

/// A node as the decision sees it.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    /// The node.
    pub node: &'a NodeObserved,
    /// Its pool (index into `Observed::pools`).
    pub pool: Option<usize>,
    /// Who moves it.
    pub driver: Driver,
    /// MachineImages that match it.
    pub images: Vec<usize>,
}

/// A node is mid-update: desired differs from current, or the agent is at work.
pub fn in_flight(n: &NodeObserved) -> bool {
    let a = &n.annotations;
    (a.desired_image.is_some()
        && (a.desired_image != a.current_image || a.desired_config != a.current_config))
        || matches!(a.state, Some(NodeState::Working | NodeState::Rebooting))
}

/// The agent reports the node failed.
pub fn degraded(n: &NodeObserved) -> bool {
    matches!(
        n.annotations.state,
        Some(NodeState::Degraded | NodeState::Unreconcilable)
    )
}

/// Why a node is unavailable, if it is.
pub fn unavailable(n: &NodeObserved, now: Timestamp, min_ready: i64) -> Option<&'static str> {
    if !n.ready {
        Some("NotReady")
    } else if degraded(n) {
        Some("Degraded")
    } else if in_flight(n) && !n.updating_live() {
        Some("Updating")
    } else if n.unschedulable {
        Some("Cordoned")
    } else if n
        .ready_since
        .is_some_and(|t| now.saturating_sub(t) < min_ready)
    {
        Some("Soaking")
    } else {
        None
    }
}

/// Whether the node runs `image` with `config` and the agent is done.
pub fn at_target(n: &NodeObserved, config: Option<&str>, image: &str) -> bool {
    let a = &n.annotations;
    a.current_image.as_deref() == Some(image)
        && a.desired_image.as_deref() == Some(image)
        && config.is_none_or(|c| {
            a.current_config.as_deref() == Some(c) && a.desired_config.as_deref() == Some(c)
        })
        && a.state == Some(NodeState::Done)
}

/// The pool of each node (the MCO's rule: a custom pool wins over `worker`; two custom
/// pools, none).
pub fn membership(o: &Observed, n: &NodeObserved) -> Option<usize> {
    let matching: Vec<usize> = o
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.node_selector
                .as_ref()
                .is_some_and(|s| s.matches(&n.labels))
        })
        .map(|(i, _)| i)
        .collect();
    match matching.as_slice() {
        [one] => Some(*one),
        [] => None,
        many => {
            let custom: Vec<usize> = many
                .iter()
                .copied()
                .filter(|&i| o.pools[i].name != "worker")
                .collect();
            match custom.as_slice() {
                [one] => Some(*one),
                _ => None,
            }
        }
    }
}

/// Every node's pool, MachineImages and driver.
pub fn views(o: &Observed) -> Vec<NodeView<'_>> {
    o.nodes
        .iter()
        .map(|node| {
            let pool = membership(o, node);
            let images: Vec<usize> = o
                .machine_images
                .iter()
                .enumerate()
                .filter(|(_, mi)| mi.matches(node))
                .map(|(i, _)| i)
                .collect();
            let driver = match (images.as_slice(), pool) {
                ([one], _) => Driver::Image(*one),
                ([_, _, ..], _) => Driver::Conflict,
                ([], Some(p)) if o.pools[p].image != PoolImage::NotLayered => Driver::Pool(p),
                ([], _) => Driver::Nobody,
            };
            NodeView {
                node,
                pool,
                driver,
                images,
            }
        })
        .collect()
}

/// The rollout order: the controller's node last, then zone (none last), age, name.
pub fn order_key<'a>(
    n: &'a NodeObserved,
    controller_node: Option<&str>,
) -> (bool, bool, &'a str, Timestamp, &'a str) {
    let zone = n.zone();
    (
        controller_node == Some(n.name.as_str()),
        zone.is_none(),
        zone.unwrap_or(""),
        n.created,
        n.name.as_str(),
    )
}

/// A node may be given a new target: Ready, not mid-update, and not already there.
pub fn candidate(n: &NodeObserved, config: Option<&str>, image: &str) -> bool {
    let a = &n.annotations;
    let targeted = a.desired_image.as_deref() == Some(image)
        && config.is_none_or(|c| a.desired_config.as_deref() == Some(c));
    n.ready && !targeted && (!in_flight(n) || degraded(n))
}

/// The candidates (indices into `views`) that move now, in rollout order ([`order_key`]).
///
/// One rule for pools and MachineImages: a node takes a slot of its driver's own limit
/// (`room`: a MachineImage's `maxUnavailable` less its members unavailable now; unbounded for
/// a pool, whose limit is its capacity) and one of its pool's `capacity` (the pool's
/// `maxUnavailable` less its members unavailable now, whoever drives them), and `capacity` is
/// charged for what is picked, so what a MachineImage moves is not moved again by the pool.
/// A node Degraded on an older image is counted unavailable already: moving it on makes
/// nothing more unavailable, so it takes no slot — else a Degraded node would block the next
/// build forever under `maxUnavailable: 1`. (Not so a cordoned or soaking node: those are
/// unavailable too, but moving them is a disruption the limit is there for.)
pub fn pick(
    views: &[NodeView<'_>],
    candidates: Vec<usize>,
    controller_node: Option<&str>,
    room: i64,
    capacity: &mut [i64],
) -> Vec<usize> {
    pick_with(views, candidates, controller_node, room, capacity, |_| {
        false
    })
}

/// [`pick`], where a candidate `free` says of takes no slot at all: its move is applied to
/// the running, schedulable node (a live configuration change below `Drain`), so it leaves
/// no one short of capacity.
pub fn pick_with(
    views: &[NodeView<'_>],
    mut candidates: Vec<usize>,
    controller_node: Option<&str>,
    mut room: i64,
    capacity: &mut [i64],
    free: impl Fn(usize) -> bool,
) -> Vec<usize> {
    candidates.sort_by(|&a, &b| {
        order_key(views[a].node, controller_node).cmp(&order_key(views[b].node, controller_node))
    });
    let mut picked = Vec::new();
    for i in candidates {
        if !degraded(views[i].node) && !free(i) {
            let pool_room = views[i].pool.map_or(i64::MAX, |p| capacity[p]);
            if room <= 0 || pool_room <= 0 {
                continue;
            }
            room -= 1;
            if let Some(p) = views[i].pool {
                capacity[p] -= 1;
            }
        }
        picked.push(i);
    }
    picked
}

/// Which of a pool's `driven` nodes are to stage `img` now: every one not running it, or —
/// with `max_staging` — at most that many (scaled over the pool's `members`, at least 1)
/// pulling at once, in rollout order ([`order_key`]), so the next batches are always the
/// ones staged. A node already told to stage it, or targeted at it, keeps it (its pull is
/// under way, or done: `machineos.io/staged-image` says so) and counts while it pulls.
/// An invalid `max_staging` paces nothing.
fn staging(
    views: &[NodeView<'_>],
    driven: &[usize],
    img: &str,
    max_staging: Option<MaxUnavailable>,
    members: usize,
    controller: Option<&str>,
) -> BTreeSet<usize> {
    let mut need: Vec<usize> = driven
        .iter()
        .copied()
        .filter(|&i| views[i].node.annotations.current_image.as_deref() != Some(img))
        .collect();
    let limit = match max_staging {
        None | Some(MaxUnavailable::Invalid) => return need.into_iter().collect(),
        Some(m) => MaxUnavailable::scaled(Some(m), members).max(1),
    };
    let given = |i: usize| {
        let a = &views[i].node.annotations;
        a.stage_image.as_deref() == Some(img) || a.desired_image.as_deref() == Some(img)
    };
    let pulled = |i: usize| views[i].node.annotations.staged_image.as_deref() == Some(img);
    let pulling = need.iter().filter(|&&i| given(i) && !pulled(i)).count();
    let mut room = limit.saturating_sub(pulling);
    need.sort_by(|&a, &b| {
        order_key(views[a].node, controller).cmp(&order_key(views[b].node, controller))
    });
    let mut out = BTreeSet::new();
    for i in need {
        if given(i) {
            out.insert(i);
        } else if room > 0 {
            room -= 1;
            out.insert(i);
        }
    }
    out
}

/// The config a MachineImage's node keeps: its desired one, else its current one, else
/// its pool's (a MachineImage moves the image only, so no config-only reboot follows).
fn kept_config(v: &NodeView<'_>, o: &Observed) -> Option<String> {
    let a = &v.node.annotations;
    a.desired_config
        .clone()
        .or_else(|| a.current_config.clone())
        .or_else(|| v.pool.map(|p| o.pools[p].config.clone()))
        // A pool not rendered yet names no config.
        .filter(|c| !c.is_empty())
}

/// One decision's working state, shared by its parts: the node views, what each node's
/// managed annotations should become (absent key: no opinion), the Events, and each pool's
/// capacity left (its `maxUnavailable` less its members unavailable, whoever drives them).
struct Pass<'a> {
    o: &'a Observed,
    views: Vec<NodeView<'a>>,
    now: Timestamp,
    want: Vec<BTreeMap<&'static str, Option<String>>>,
    events: Vec<Event>,
    capacity: Vec<i64>,
    /// The quarantined images: image → why.
    quarantined: BTreeMap<String, String>,
}

/// The images quarantined now, each with why: those a node rolled back from (its
/// [`vocab::ROLLED_BACK`] record) and those a MachineOSImage says are — except those whose
/// MachineOSImage asks to lift it.
pub fn quarantined(o: &Observed) -> BTreeMap<String, String> {
    let lifting = |img: &str| o.quarantine.get(img).is_some_and(|q| q.lift);
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in &o.nodes {
        if let Some(r) = &n.annotations.rolled_back
            && !lifting(&r.image)
        {
            out.entry(r.image.clone()).or_default().push(format!(
                "node {} rolled back: {} ({})",
                n.name, r.check, r.evidence
            ));
        }
    }
    let mut out: BTreeMap<String, String> =
        out.into_iter().map(|(k, v)| (k, v.join("; "))).collect();
    for (img, q) in &o.quarantine {
        if let Some(why) = &q.quarantined
            && !q.lift
        {
            out.entry(img.clone()).or_insert_with(|| why.clone());
        }
    }
    out
}

/// Decide, at `now`: MachineImages first (explicit intent, within their own limit and the
/// pool's), then each layered pool, then nodes nobody drives.
pub fn decide(o: &Observed, now: Timestamp) -> Decision {
    let views = views(o);
    let capacity: Vec<i64> = o
        .pools
        .iter()
        .enumerate()
        .map(|(pi, p)| {
            let members: Vec<&NodeView<'_>> = views.iter().filter(|v| v.pool == Some(pi)).collect();
            let unavailable = members
                .iter()
                .filter(|v| unavailable(v.node, now, p.min_ready_seconds).is_some())
                .count();
            MaxUnavailable::scaled(p.max_unavailable, members.len()) as i64 - unavailable as i64
        })
        .collect();
    let mut pass = Pass {
        o,
        want: vec![BTreeMap::new(); views.len()],
        views,
        now,
        events: Vec::new(),
        capacity,
        quarantined: quarantined(o),
    };
    pass.rolled_back();
    let machine_images = o
        .machine_images
        .iter()
        .enumerate()
        .map(|(i, mi)| pass.machine_image(i, mi))
        .collect();
    let pools = o
        .pools
        .iter()
        .enumerate()
        .filter_map(|(pi, p)| pass.pool(pi, p))
        .collect();
    pass.finish(pools, machine_images)
}

impl Pass<'_> {
    /// Nodes rolled back from their desired image are targeted at what they run again (their
    /// agent does nothing more for the failed target), without the move's plan and gate; the
    /// records of images whose quarantine is lifted are removed (such a node is a candidate
    /// again in the next decision).
    fn rolled_back(&mut self) {
        for (i, v) in self.views.iter().enumerate() {
            let a = &v.node.annotations;
            let Some(r) = &a.rolled_back else { continue };
            if a.desired_image.as_deref() == Some(r.image.as_str())
                && a.current_image.as_deref() != Some(r.image.as_str())
            {
                let w = &mut self.want[i];
                w.insert(
                    vocab::DESIRED_IMAGE,
                    a.current_image.clone().or_else(|| Some(r.to.clone())),
                );
                w.insert(vocab::DESIRED_CONFIG, a.current_config.clone());
                w.insert(machineos_disruption::NODE_DISRUPTION, None);
                w.insert(vocab::HEALTH_GATE, None);
            }
            if self.o.quarantine.get(&r.image).is_some_and(|q| q.lift) {
                self.want[i].insert(vocab::ROLLED_BACK, None);
            }
        }
    }

    /// One MachineImage: its nodes targeted within its limit and their pools', its report.
    fn machine_image(&mut self, mi_index: usize, mi: &MachineImageObserved) -> ImageReport {
        let Pass {
            o,
            views,
            now,
            want,
            events,
            capacity,
            quarantined,
        } = self;
        let (o, now, views): (&Observed, Timestamp, &[NodeView<'_>]) = (o, *now, views);
        let controller = o.controller_node.as_deref();
        let min_ready = |v: &NodeView<'_>| v.pool.map_or(0, |p| o.pools[p].min_ready_seconds);
        let members: Vec<usize> = (0..views.len())
            .filter(|&i| views[i].driver == Driver::Image(mi_index))
            .collect();
        let conflicted: Vec<usize> = (0..views.len())
            .filter(|&i| views[i].driver == Driver::Conflict && views[i].images.contains(&mi_index))
            .collect();
        let limit = match &mi.target {
            ImageTarget::Node(_) => 1,
            ImageTarget::Selector {
                max_unavailable, ..
            } => MaxUnavailable::scaled(*max_unavailable, members.len()),
        };
        let unavailable_now = members
            .iter()
            .filter(|&&i| unavailable(views[i].node, now, min_ready(&views[i])).is_some())
            .count();
        let failed: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| {
                degraded(views[i].node)
                    && views[i].node.annotations.desired_image.as_deref() == Some(mi.image.as_str())
            })
            .collect();
        let halted = !failed.is_empty() || quarantined.contains_key(&mi.image);
        let room = limit as i64 - unavailable_now as i64;
        let cands: Vec<usize> = members
            .iter()
            .copied()
            // A node with no config at all (no pool, never configured) cannot be given one.
            .filter(|&i| {
                candidate(views[i].node, None, &mi.image) && kept_config(&views[i], o).is_some()
            })
            // A gate asked for is never dropped: a node whose pool's gate is unreadable
            // waits (the pool says why).
            .filter(|&i| views[i].pool.is_none_or(|p| o.pools[p].gate.is_ok()))
            .collect();
        let quarantine = quarantined.get(&mi.image);
        for &i in &members {
            let w = &mut want[i];
            let a = &views[i].node.annotations;
            w.insert(vocab::PULL_SECRET, mi.pull_secret.clone());
            if !halted {
                w.insert(
                    vocab::STAGE_IMAGE,
                    (a.current_image.as_deref() != Some(mi.image.as_str()))
                        .then(|| mi.image.clone()),
                );
            } else if quarantine.is_some() && a.stage_image.as_deref() == Some(mi.image.as_str()) {
                // A quarantined image is pulled by no node.
                w.insert(vocab::STAGE_IMAGE, None);
            }
        }
        if !halted {
            for i in pick(views, cands, controller, room, capacity) {
                let w = &mut want[i];
                w.insert(vocab::DESIRED_IMAGE, Some(mi.image.clone()));
                w.insert(vocab::DESIRED_CONFIG, kept_config(&views[i], o));
                w.insert(vocab::DRIVEN_BY, Some(format!("MachineImage/{}", mi.name)));
                // An image change alone: the default, a reboot.
                w.insert(machineos_disruption::NODE_DISRUPTION, None);
                w.insert(vocab::HEALTH_GATE, gate_of(o, views[i].pool));
                events.push(Event {
                    kind: EventObject::MachineImage,
                    name: mi.name.clone(),
                    warning: false,
                    reason: reason::SET_DESIRED_CONFIG,
                    message: format!("Targeted node {} to image {}", views[i].node.name, mi.image),
                });
            }
        }
        let counts = count(views, &members, now, min_ready, |i| {
            at_target(views[i].node, None, &mi.image)
        });
        let mut conditions = progress_conditions(&counts, "", &mi.image, None);
        if !conflicted.is_empty()
            && let Some(u) = conditions
                .iter_mut()
                .find(|c| c.type_ == condition::UPDATED && c.status)
        {
            // Nodes it matches but may not move (another MachineImage matches them too) are
            // not updated with its image: not Updated, whatever its uncontested nodes run.
            u.status = false;
            u.reason = "Conflict";
            u.message = format!(
                "{} node(s) it matches are also matched by another MachineImage and not moved",
                conflicted.len()
            );
        }
        conditions.push(Condition {
            type_: condition::DEGRADED,
            status: halted,
            reason: match (halted, quarantine) {
                (false, _) => "AsExpected",
                (true, Some(_)) if failed.is_empty() => reason::IMAGE_QUARANTINED,
                (true, _) => "NodeDegraded",
            },
            message: match quarantine {
                Some(why) if failed.is_empty() => format!(
                    "image {} is quarantined: {why}; no node is moved to it. Another image \
                     on this MachineImage, or the nodes' {} annotation removed, resumes",
                    mi.image,
                    vocab::ROLLED_BACK
                ),
                _ => degraded_message(views, &failed),
            },
        });
        let conflict_message = conflicted
            .iter()
            .map(|&i| {
                let others: Vec<&str> = views[i]
                    .images
                    .iter()
                    .filter(|&&j| j != mi_index)
                    .map(|&j| o.machine_images[j].name.as_str())
                    .collect();
                format!(
                    "node {} is also matched by MachineImage {}",
                    views[i].node.name,
                    others.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let in_conflict = !conflicted.is_empty();
        if in_conflict
            && !mi
                .conditions
                .get(condition::CONFLICT)
                .copied()
                .unwrap_or(false)
        {
            events.push(Event {
                kind: EventObject::MachineImage,
                name: mi.name.clone(),
                warning: true,
                reason: reason::MACHINE_IMAGE_CONFLICT,
                message: format!("{conflict_message}: neither moves it"),
            });
        }
        conditions.push(Condition {
            type_: condition::CONFLICT,
            status: in_conflict,
            reason: if in_conflict {
                "NodeMatchedTwice"
            } else {
                "AsExpected"
            },
            message: if in_conflict {
                format!("{conflict_message}: neither moves it")
            } else {
                String::new()
            },
        });
        ImageReport {
            name: mi.name.clone(),
            counts,
            conditions,
        }
    }

    /// One pool (`None` when it is not layered): its nodes targeted within its capacity,
    /// its report.
    fn pool(&mut self, pi: usize, p: &PoolObserved) -> Option<PoolReport> {
        let Pass {
            o,
            views,
            now,
            want,
            events,
            capacity,
            quarantined,
        } = self;
        let (o, now, views): (&Observed, Timestamp, &[NodeView<'_>]) = (o, *now, views);
        let controller = o.controller_node.as_deref();
        let min_ready = |v: &NodeView<'_>| v.pool.map_or(0, |p| o.pools[p].min_ready_seconds);
        if p.image == PoolImage::NotLayered {
            return None;
        }
        let members: Vec<usize> = (0..views.len())
            .filter(|&i| views[i].pool == Some(pi))
            .collect();
        let driven: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| views[i].driver == Driver::Pool(pi))
            .collect();
        let image = match &p.image {
            PoolImage::Built(img) => Some(img.as_str()),
            _ => None,
        };
        let failed: Vec<usize> = driven
            .iter()
            .copied()
            .filter(|&i| {
                let a = &views[i].node.annotations;
                degraded(views[i].node)
                    && image.is_some_and(|img| a.desired_image.as_deref() == Some(img))
                    && a.desired_config.as_deref() == Some(p.config.as_str())
            })
            .collect();
        let all_failed: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| degraded(views[i].node))
            .collect();
        let halted = !failed.is_empty();
        // The pool's image is quarantined: nothing moves to it, nothing pulls it.
        let quarantine = image.and_then(|img| quarantined.get(img).map(|why| (img, why.clone())));
        if let Some((img, _)) = &quarantine {
            for &i in &driven {
                if views[i].node.annotations.stage_image.as_deref() == Some(*img) {
                    want[i].insert(vocab::STAGE_IMAGE, None);
                }
            }
        }
        // `machineos.io/rollback-policy: pool`: the quarantined image's nodes go back to the
        // image the pool ran before, as a rollout to it (within the pool's limit, gated).
        let revert = quarantine
            .as_ref()
            .filter(|_| p.rollback_pool)
            .and_then(|(img, _)| o.quarantine.get(*img)?.previous.clone());
        let gate_error = p.gate.as_ref().err();
        let mut targeted = Vec::new();
        let reverted;
        let (goal, goal_image) = match &revert {
            Some(prev) => {
                reverted = PoolObserved {
                    image: PoolImage::Built(prev.image.clone()),
                    config: prev.config.clone(),
                    ..p.clone()
                };
                (&reverted, Some(prev.image.as_str()))
            }
            None => (p, image),
        };
        if let (Some(img), false, false, true, None) = (
            goal_image,
            p.paused,
            halted,
            quarantine.is_none() || revert.is_some(),
            gate_error,
        ) {
            // The pool whose image nodes move to: itself, or itself going back.
            let p = goal;
            let stage = staging(
                views,
                &driven,
                img,
                p.max_staging,
                members.len(),
                controller,
            );
            for &i in &driven {
                let w = &mut want[i];
                // Mid-update (e.g. its MachineImage just deleted), the node may still need the
                // secret it is pulling with.
                if !in_flight(views[i].node) || degraded(views[i].node) {
                    w.insert(vocab::PULL_SECRET, None);
                }
                w.insert(
                    vocab::STAGE_IMAGE,
                    stage.contains(&i).then(|| img.to_owned()),
                );
            }
            // A node whose live move was refused waits, in service, for a slot to reboot:
            // granted before new moves (it is mid-update), by a plan that takes one.
            // For the move it is making (its desired annotations), also when the pool has
            // moved on since: it is mid-update and may not be given another target.
            let waiting: Vec<usize> = driven
                .iter()
                .copied()
                .filter(|&i| views[i].node.awaits_reboot_slot())
                .collect();
            for i in pick(views, waiting, controller, i64::MAX, capacity) {
                let a = &views[i].node.annotations;
                let grant = machineos_disruption::NodePlan {
                    config: a.desired_config.clone().unwrap_or_default(),
                    image: a.desired_image.clone().unwrap_or_default(),
                    class: machineos_disruption::Class::Reboot,
                    actions: vec![machineos_disruption::Action::Reboot],
                };
                want[i].insert(
                    machineos_disruption::NODE_DISRUPTION,
                    Some(grant.to_annotation()),
                );
                events.push(Event {
                    kind: EventObject::Pool,
                    name: p.name.clone(),
                    warning: false,
                    reason: reason::SET_DESIRED_CONFIG,
                    message: format!(
                        "Granted node {} a slot to reboot into image {} (it could not apply the change live)",
                        views[i].node.name, grant.image
                    ),
                });
            }
            let mut cands: Vec<usize> = driven
                .iter()
                .copied()
                .filter(|&i| candidate(views[i].node, Some(&p.config), img))
                .collect();
            // Canaries first: the rest waits until every canary runs the image, passed its
            // gate (the agent finished) and is available past the soak.
            if let Some(canaries) = canaries(views, &driven, p.canary.as_ref(), controller) {
                let proven = canaries.iter().all(|&i| {
                    at_target(views[i].node, Some(&p.config), img)
                        && unavailable(views[i].node, now, p.min_ready_seconds).is_none()
                });
                if !proven {
                    cands.retain(|i| canaries.contains(i));
                }
            }
            // The pool's own limit is its capacity: no further bound. A move applied live
            // takes no slot.
            let free = |i: usize| views[i].node.moves_live(&p.config, img);
            for i in pick_with(views, cands, controller, i64::MAX, capacity, free) {
                let w = &mut want[i];
                w.insert(vocab::DESIRED_CONFIG, Some(p.config.clone()));
                w.insert(vocab::DESIRED_IMAGE, Some(img.to_owned()));
                // The plan of this move, for the agent (none known: a reboot).
                w.insert(
                    machineos_disruption::NODE_DISRUPTION,
                    views[i]
                        .node
                        .move_plan
                        .as_ref()
                        .filter(|m| m.is_for(&p.config, img))
                        .map(machineos_disruption::NodePlan::to_annotation),
                );
                w.insert(
                    vocab::DRIVEN_BY,
                    Some(format!("MachineConfigPool/{}", p.name)),
                );
                w.insert(vocab::HEALTH_GATE, gate_of(o, Some(pi)));
                targeted.push(views[i].node.name.clone());
                events.push(Event {
                    kind: EventObject::Pool,
                    name: p.name.clone(),
                    warning: false,
                    reason: reason::SET_DESIRED_CONFIG,
                    message: format!(
                        "Targeted node {} to MachineConfig {} and image {img}",
                        views[i].node.name, p.config
                    ),
                });
            }
        }
        // Counts: a node a MachineImage holds is updated only when it also runs the pool's
        // config (it keeps the config it had, so after a config change it is not): the pool
        // is Updated only when every node runs its config, which its `status.configuration`
        // waits for too. Held nodes are named in the conditions either way.
        let counts = count(views, &members, now, min_ready, |i| match views[i].driver {
            Driver::Image(j) => {
                at_target(views[i].node, Some(&p.config), &o.machine_images[j].image)
            }
            _ => image.is_some_and(|img| at_target(views[i].node, Some(&p.config), img)),
        });
        let held: Vec<String> = members
            .iter()
            .filter_map(|&i| match views[i].driver {
                Driver::Image(j) => Some(format!(
                    "{} (MachineImage {})",
                    views[i].node.name, o.machine_images[j].name
                )),
                _ => None,
            })
            .collect();
        let pending = match &p.image {
            PoolImage::Pending(why) => Some(why.as_str()),
            _ => None,
        };
        let what = match image {
            Some(img) => format!("MachineConfig {} and image {img}", p.config),
            None => format!("MachineConfig {}", p.config),
        };
        let mut conditions = progress_conditions(&counts, &what, "", pending);
        // Nodes this pool selects that belong to no pool (another custom pool selects them
        // too: the MCO's rule gives them to neither): said, not silently dropped.
        let ambiguous: Vec<String> = views
            .iter()
            .filter(|v| v.pool.is_none())
            .filter_map(|v| {
                let matching: Vec<&str> = o
                    .pools
                    .iter()
                    .filter(|q| q.name != "worker")
                    .filter(|q| {
                        q.node_selector
                            .as_ref()
                            .is_some_and(|s| s.matches(&v.node.labels))
                    })
                    .map(|q| q.name.as_str())
                    .collect();
                (matching.len() > 1 && matching.contains(&p.name.as_str()))
                    .then(|| format!("{} (pools {})", v.node.name, matching.join(", ")))
            })
            .collect();
        if !ambiguous.is_empty() {
            for c in conditions.iter_mut().filter(|c| !c.message.is_empty()) {
                c.message.push_str(&format!(
                    "; selected by more than one custom pool, so in none until a selector \
                     excludes it: {}",
                    ambiguous.join(", ")
                ));
            }
        }
        if !held.is_empty() {
            for c in conditions.iter_mut().filter(|c| !c.message.is_empty()) {
                let what = if c.type_ == condition::UPDATED {
                    "the pool's config, their own image"
                } else {
                    "their config until their MachineImage lets go"
                };
                c.message.push_str(&format!(
                    "; held by MachineImages ({what}): {}",
                    held.join(", ")
                ));
            }
        }
        if let Some(c) = conditions
            .iter_mut()
            .find(|c| c.type_ == condition::UPDATING)
        {
            if let (Some((img, why)), true) = (&quarantine, c.status) {
                c.message
                    .push_str(&format!("; image {img} is quarantined ({why})"));
            } else if let (Some(e), true) = (gate_error, c.status) {
                c.message
                    .push_str(&format!("; no node is targeted: the health gate: {e}"));
            } else if halted && c.status {
                c.message.push_str("; rollout halted by a failed node");
            } else if p.paused && c.status {
                c.message.push_str("; the pool is paused");
            } else if p.max_unavailable == Some(MaxUnavailable::Invalid) && c.status {
                c.message.push_str(&format!(
                    "; no node is targeted: {}",
                    MaxUnavailable::INVALID
                ));
            }
        }
        // A quarantined image is a node failure too: the pool's `NodeDegraded` (and so
        // `Degraded`) names the image, the node and the check.
        let node_degraded = !all_failed.is_empty() || quarantine.is_some();
        let mut nd_message = degraded_message(views, &all_failed);
        if let Some((img, cause)) = &quarantine {
            let mosi = o.quarantine.get(*img).map_or_else(
                || "its MachineOSImage".to_owned(),
                |q| format!("MachineOSImage {}", q.name),
            );
            let back = match &revert {
                Some(prev) => format!(
                    "; its nodes go back to image {} ({}: pool)",
                    prev.image,
                    vocab::ROLLBACK_POLICY
                ),
                None if p.rollback_pool => format!(
                    "; {}: pool, but the image before it is not known (no MachineOSImage \
                     of it): its nodes stay",
                    vocab::ROLLBACK_POLICY
                ),
                None => String::new(),
            };
            let message = format!(
                "image {img} is quarantined: {cause}; no node is moved to it{back}. A new \
                 build (a changed MachineConfig or base image) resumes the rollout, or \
                 annotate {mosi} with {} to try it again",
                vocab::LIFT_QUARANTINE
            );
            if o.quarantine
                .get(*img)
                .is_none_or(|q| q.quarantined.is_none())
            {
                events.push(Event {
                    kind: EventObject::Pool,
                    name: p.name.clone(),
                    warning: true,
                    reason: reason::IMAGE_QUARANTINED,
                    message: message.clone(),
                });
            }
            if !nd_message.is_empty() {
                nd_message.push_str("; ");
            }
            nd_message.push_str(&message);
        }
        if halted {
            nd_message.push_str(&format!(
                "; rollout halted: {} node(s) not yet targeted",
                driven
                    .iter()
                    .filter(|&&i| image.is_some_and(|img| candidate(
                        views[i].node,
                        Some(&p.config),
                        img
                    )) && !degraded(views[i].node))
                    .count()
            ));
            let blocking: Vec<&str> = failed
                .iter()
                .map(|&i| views[i].node.name.as_str())
                .collect();
            nd_message.push_str(&format!(
                "; to recover, fix the cause and apply a new MachineConfig to the pool: its \
                 image is built while nodes are degraded and re-targets {}",
                blocking.join(", ")
            ));
            if !p
                .conditions
                .get(condition::NODE_DEGRADED)
                .copied()
                .unwrap_or(false)
            {
                events.push(Event {
                    kind: EventObject::Pool,
                    name: p.name.clone(),
                    warning: true,
                    reason: reason::ROLLOUT_HALTED,
                    message: nd_message.clone(),
                });
            }
        }
        conditions.push(Condition {
            type_: condition::NODE_DEGRADED,
            status: node_degraded,
            reason: if quarantine.is_some() && all_failed.is_empty() {
                "ImageQuarantined"
            } else if node_degraded {
                "NodeDegraded"
            } else {
                "AsExpected"
            },
            message: nd_message.clone(),
        });
        let render = p
            .conditions
            .get(condition::RENDER_DEGRADED)
            .copied()
            .unwrap_or(false);
        let build = p
            .conditions
            .get(condition::IMAGE_BUILD_DEGRADED)
            .copied()
            .unwrap_or(false);
        let degraded_any = node_degraded || render || build;
        let why: Vec<&str> = [
            (node_degraded, condition::NODE_DEGRADED),
            (render, condition::RENDER_DEGRADED),
            (build, condition::IMAGE_BUILD_DEGRADED),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, t)| *t)
        .collect();
        conditions.push(Condition {
            type_: condition::DEGRADED,
            status: degraded_any,
            reason: if degraded_any {
                "Degraded"
            } else {
                "AsExpected"
            },
            message: if degraded_any {
                format!("{} True", why.join(", "))
            } else {
                String::new()
            },
        });
        let image_report = image.map(|img| {
            let on_image = driven
                .iter()
                .filter(|&&i| at_target(views[i].node, Some(&p.config), img))
                .count();
            let available = driven
                .iter()
                .filter(|&&i| unavailable(views[i].node, now, p.min_ready_seconds).is_none())
                .count();
            let done = on_image == driven.len() && available == driven.len();
            let quarantined_now = quarantine.is_some();
            let failed_now = halted || quarantined_now;
            (
                img.to_owned(),
                vec![
                    Condition {
                        type_: condition::ROLLING_OUT,
                        status: !done && !failed_now,
                        reason: if done {
                            "RolledOut"
                        } else if quarantined_now {
                            "Quarantined"
                        } else if halted {
                            "Halted"
                        } else if p.paused {
                            "Paused"
                        } else {
                            "RollingOut"
                        },
                        message: format!(
                            "{on_image} of {} nodes of pool {} run the image",
                            driven.len(),
                            p.name
                        ),
                    },
                    Condition {
                        type_: condition::ROLLED_OUT,
                        status: done,
                        reason: if done { "RolledOut" } else { "RollingOut" },
                        message: format!(
                            "{on_image} of {} nodes of pool {} run the image",
                            driven.len(),
                            p.name
                        ),
                    },
                    Condition {
                        type_: condition::ROLLOUT_FAILED,
                        status: failed_now,
                        reason: if quarantined_now {
                            "Quarantined"
                        } else if halted {
                            "NodeDegraded"
                        } else {
                            "AsExpected"
                        },
                        message: match &quarantine {
                            Some((_, why)) => why.clone(),
                            None => degraded_message(views, &failed),
                        },
                    },
                ],
            )
        });
        Some(PoolReport {
            pool: p.name.clone(),
            counts,
            conditions,
            image: image_report,
            halted,
            targeted,
        })
    }

    /// Nodes nobody drives lose what the rollout staged or passed for them; the node
    /// patches are what changes.
    fn finish(self, pools: Vec<PoolReport>, machine_images: Vec<ImageReport>) -> Decision {
        let Pass {
            o,
            views,
            mut want,
            events,
            quarantined,
            ..
        } = self;
        let quarantines = o
            .quarantine
            .iter()
            .map(|(img, q)| {
                let why = quarantined.get(img);
                QuarantineReport {
                    name: q.name.clone(),
                    image: img.clone(),
                    condition: Condition {
                        type_: condition::QUARANTINED,
                        status: why.is_some(),
                        reason: match (why, q.lift) {
                            (Some(_), _) => "NodeRolledBack",
                            (None, true) => "QuarantineLifted",
                            (None, false) => "AsExpected",
                        },
                        message: why.cloned().unwrap_or_default(),
                    },
                    lifted: q.lift,
                }
            })
            .collect();
        for (i, v) in views.iter().enumerate() {
            if matches!(v.driver, Driver::Nobody) && (!in_flight(v.node) || degraded(v.node)) {
                want[i].insert(vocab::STAGE_IMAGE, None);
                want[i].insert(vocab::PULL_SECRET, None);
            }
            // The manifests of the images the node is left with (desired and staged).
            let after = |k: &'static str| match want[i].get(k) {
                Some(w) => w.clone(),
                None => current(v.node, k).map(str::to_owned),
            };
            let (desired, stage) = (after(vocab::DESIRED_IMAGE), after(vocab::STAGE_IMAGE));
            let manifests = o
                .image_manifests
                .only(desired.iter().chain(stage.iter()).map(String::as_str));
            want[i].insert(
                vocab::IMAGE_MANIFESTS,
                (!manifests.0.is_empty()).then(|| manifests.to_annotation()),
            );
        }
        let node_patches = views
            .iter()
            .zip(want)
            .filter_map(|(v, w)| {
                let changes: BTreeMap<&'static str, Option<String>> = w
                    .into_iter()
                    .filter(|(k, val)| current(v.node, k) != val.as_deref())
                    .collect();
                (!changes.is_empty()).then(|| NodePatch {
                    node: v.node.name.clone(),
                    annotations: changes,
                })
            })
            .collect();
        Decision {
            node_patches,
            pools,
            machine_images,
            events,
            quarantines,
        }
    }
}

/// The node's current value of a managed key.
fn current<'a>(n: &'a NodeObserved, key: &str) -> Option<&'a str> {
    let a = &n.annotations;
    match key {
        vocab::DESIRED_CONFIG => a.desired_config.as_deref(),
        vocab::DESIRED_IMAGE => a.desired_image.as_deref(),
        vocab::DRIVEN_BY => a.driven_by.as_deref(),
        vocab::STAGE_IMAGE => a.stage_image.as_deref(),
        vocab::PULL_SECRET => a.pull_secret.as_deref(),
        vocab::IMAGE_MANIFESTS => a.image_manifests.as_deref(),
        machineos_disruption::NODE_DISRUPTION => a.disruption.as_deref(),
        vocab::HEALTH_GATE => a.health_gate.as_deref(),
        vocab::ROLLED_BACK => a.rolled_back_raw.as_deref(),
        _ => None,
    }
}

/// The health gate a node of pool `pool` is handed with a move (none without a pool, or
/// with the pool's gate off).
fn gate_of(o: &Observed, pool: Option<usize>) -> Option<String> {
    pool.and_then(|p| o.pools[p].gate.as_ref().ok().cloned().flatten())
        .map(|g| g.to_annotation())
}

/// A pool's canaries among its `driven` nodes (indices into `views`), in rollout order.
pub fn canaries(
    views: &[NodeView<'_>],
    driven: &[usize],
    canary: Option<&Canary>,
    controller: Option<&str>,
) -> Option<Vec<usize>> {
    let mut ordered = driven.to_vec();
    ordered.sort_by(|&a, &b| {
        order_key(views[a].node, controller).cmp(&order_key(views[b].node, controller))
    });
    Some(match canary? {
        Canary::Count(n) => ordered.into_iter().take(*n).collect(),
        Canary::Nodes(names) => ordered
            .into_iter()
            .filter(|&i| names.contains(&views[i].node.name))
            .collect(),
    })
}

fn count(
    views: &[NodeView<'_>],
    members: &[usize],
    now: Timestamp,
    min_ready: impl Fn(&NodeView<'_>) -> i64,
    updated: impl Fn(usize) -> bool,
) -> Counts {
    let mut c = Counts::default();
    for &i in members {
        let n = views[i].node;
        let up = updated(i);
        let avail = unavailable(n, now, min_ready(&views[i])).is_none();
        c.machine += 1;
        c.updated += i32::from(up);
        c.ready += i32::from(up && avail);
        c.unavailable += i32::from(!avail);
        c.degraded += i32::from(degraded(n));
        c.drain_blocked += i32::from(n.drain_blocked.is_some());
    }
    c
}

/// `Updated` and `Updating` from counts.
fn progress_conditions(
    c: &Counts,
    what: &str,
    image: &str,
    pending: Option<&str>,
) -> Vec<Condition> {
    let target = if what.is_empty() {
        format!("image {image}")
    } else {
        what.to_owned()
    };
    // Updated means updated and available: a node still soaking (or NotReady) is not done.
    let all = c.updated == c.machine && c.ready == c.machine;
    let updating_message = match pending {
        Some(why) => format!(
            "{} of {} nodes updated; waiting for the image: {why}",
            c.updated, c.machine
        ),
        None => format!("{} of {} nodes updated to {target}", c.updated, c.machine),
    };
    vec![
        Condition {
            type_: condition::UPDATED,
            status: all && pending.is_none(),
            reason: if all && pending.is_none() {
                "AllNodesUpdated"
            } else {
                "Updating"
            },
            message: if all && pending.is_none() {
                format!("All nodes are updated with {target}")
            } else {
                String::new()
            },
        },
        Condition {
            type_: condition::UPDATING,
            status: !all || pending.is_some(),
            reason: if pending.is_some() {
                "ImageBuildPending"
            } else if all {
                "AllNodesUpdated"
            } else {
                "Updating"
            },
            message: if !all || pending.is_some() {
                updating_message
            } else {
                String::new()
            },
        },
    ]
}

/// The MCO's `Node X is reporting: "reason"`, for each failed node.
fn degraded_message(views: &[NodeView<'_>], failed: &[usize]) -> String {
    failed
        .iter()
        .map(|&i| {
            let n = views[i].node;
            format!(
                "Node {} is reporting: {:?}",
                n.name,
                n.annotations.reason.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The node names a decision targets (pool and MachineImage), for tests and the plan.
pub fn targeted(d: &Decision) -> BTreeSet<String> {
    d.node_patches
        .iter()
        .filter(|p| p.annotations.contains_key(vocab::DESIRED_IMAGE))
        .map(|p| p.node.clone())
        .collect()
}
