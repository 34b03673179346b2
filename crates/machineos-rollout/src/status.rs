//! `machineos rollout status`: where a pool's rollout stands, as `kubectl rollout status`
//! shows a Deployment's — the pool's image, updated of total, each moving node's phase, the
//! nodes that hold it back and why, and whether it is done or halted. Built from [`plan()`](crate::plan::plan)
//! (the same observation and rules as [`decide()`]), plus the agent's step from the node's
//! progress annotation. Pure; time is an argument.
//!
//! A node's phase: `staging` (told to pre-pull, not staged yet), `draining`, `deploying`,
//! `rebooting` (the agent's step), `soaking` (on the image, within `minReadySeconds`),
//! `updating` (targeted, the agent has not reported a step yet).
//!
//! The [`Estimate`] of the time left comes from the update times measured in this rollout.
//! The agent records when it started an update (in [`PROGRESS`](crate::vocab::PROGRESS))
//! and, when it finishes, the target with both times
//! ([`LAST_UPDATE`](crate::vocab::LAST_UPDATE)). A node's time is the median over the
//! members on the pool's image whose record is of the update to the pool's config and image
//! (records of other targets are ignored), plus the pool's `minReadySeconds` (a slot frees
//! after the soak). The remaining nodes — moving now, and the nodes in [`plan()`](crate::plan::plan)'s batches —
//! then go through as [`decide()`] moves them: at most the capacity [`plan()`](crate::plan::plan) assumes
//! (`maxUnavailable` scaled over the members, less the members held unavailable) at a time,
//! each slot taken again as it frees. A moving node counts for the rest of its time (the
//! node's time less the time since its update started, floored at its soak; in full when no
//! start is recorded), a soaking one for the rest of its soak. With nothing moving, that is
//! `ceil(nodes left / capacity)` batches × a node's time.
//!
//! Its limits: every node left is assumed to take as long as the median measured one, and
//! the members unavailable for other reasons (NotReady, cordoned, Degraded) to stay so, as
//! [`plan()`](crate::plan::plan) assumes: they take slots, and the NotReady ones (like those a MachineImage
//! moves) are not counted among the nodes left. There is none ([`Status::no_estimate`] says
//! why) before a node finished in this rollout, before the image is built, when no slot frees
//! for good, when only held nodes are left, when halted or paused; none and no reason once
//! done. O(n log n) in the nodes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::decide::{self, decide};
use crate::observed::{LastUpdate, NodeObserved, Observed, Timestamp};
use crate::plan::{Plan, PlanError, plan_from};
use crate::vocab::NodeState;

/// One node that holds the rollout back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// The node.
    pub node: String,
    /// Why: `Degraded: …`, `drain blocked: …`, `NotReady`, `follows MachineImage X`, ….
    pub reason: String,
}

/// The time left, estimated from the update times measured in this rollout (see the module
/// docs for how, and its limits).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// About how long until every node the rollout can move is updated and soaked.
    pub seconds_left: u64,
    /// A node's update time: the median of the measured ones (the agent's start to finish).
    pub per_node_seconds: u64,
    /// The pool's `minReadySeconds`, added to each node's time.
    pub soak_seconds: u64,
    /// How many nodes were measured.
    pub measured_nodes: usize,
}

/// Why there is no [`Estimate`]: no member on the image was timed to it yet.
pub const NO_NODE_FINISHED: &str = "no node has finished";

/// Where a pool's rollout stands (`-o json` prints it as is, in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The pool.
    pub pool: String,
    /// Its built image, if its build succeeded.
    pub image: Option<String>,
    /// Its members.
    pub total: usize,
    /// Members on the image (and config), the agent done.
    pub updated: usize,
    /// Nodes moving now, with their phase.
    pub moving: Vec<(String, &'static str)>,
    /// Nodes that hold the rollout back, and why.
    pub held: Vec<Held>,
    /// Why nothing moves now, if so (build pending, paused, halted, no capacity).
    pub blocked: Option<String>,
    /// `spec.paused`.
    pub paused: bool,
    /// A failed node stopped the rollout.
    pub halted: bool,
    /// Every member is on the image and available.
    pub done: bool,
    /// The time left, when it can be estimated.
    pub estimate: Option<Estimate>,
    /// Why there is no estimate (none once done).
    pub no_estimate: Option<&'static str>,
}

/// The status of `pool` at `now`.
pub fn status(o: &Observed, pool: &str, now: Timestamp) -> Result<Status, PlanError> {
    let d = decide(o, now);
    let p = plan_from(o, &d, pool, now)?;
    let report = d.pools.iter().find(|r| r.pool == pool);
    let observed = o.pools.iter().find(|x| x.name == pool);
    let paused = observed.is_some_and(|x| x.paused);
    let min_ready = observed.map_or(0, |x| x.min_ready_seconds);
    let node = |name: &str| o.nodes.iter().find(|n| n.name == name);

    let mut moving: Vec<(String, &'static str)> = p
        .in_flight
        .iter()
        .filter_map(|name| Some((name.clone(), phase(node(name)?))))
        .collect();
    let mut held = Vec::new();
    for name in &p.updated {
        if let Some(n) = node(name)
            && decide::unavailable(n, now, min_ready) == Some("Soaking")
        {
            moving.push((name.clone(), "soaking"));
        }
    }
    for (name, why) in &p.unavailable {
        let Some(n) = node(name) else { continue };
        let reason = if decide::degraded(n) {
            format!(
                "Degraded: {}",
                n.annotations
                    .reason
                    .as_deref()
                    .unwrap_or("(no reason given)")
            )
        } else if let Some(m) = &n.drain_blocked {
            format!("drain blocked: {m}")
        } else if *why == "Updating" || *why == "Soaking" {
            continue;
        } else {
            (*why).to_owned()
        };
        held.push(Held {
            node: name.clone(),
            reason,
        });
    }
    for (name, mi) in &p.machine_images {
        held.push(Held {
            node: name.clone(),
            reason: format!("follows MachineImage {mi}"),
        });
    }
    for name in &p.conflicts {
        held.push(Held {
            node: name.clone(),
            reason: "matched by two MachineImages".to_owned(),
        });
    }
    let halted = report.is_some_and(|r| r.halted);
    let done =
        p.image.is_some() && p.updated.len() == p.members && moving.is_empty() && held.is_empty();
    let (estimate, no_estimate) = if done {
        (None, None)
    } else if halted {
        (None, Some("the rollout is halted"))
    } else if paused {
        (None, Some("the pool is paused"))
    } else {
        match estimate(o, &p, min_ready, now) {
            Ok(e) => (Some(e), None),
            Err(why) => (None, Some(why)),
        }
    };
    Ok(Status {
        pool: p.pool,
        image: p.image,
        total: p.members,
        updated: p.updated.len(),
        moving,
        held,
        blocked: p.blocked,
        paused,
        halted,
        done,
        estimate,
        no_estimate,
    })
}

/// The time left of `p`'s rollout at `now` (see the module docs), or why there is none.
fn estimate(
    o: &Observed,
    p: &Plan,
    min_ready: i64,
    now: Timestamp,
) -> Result<Estimate, &'static str> {
    let image = p.image.as_deref().ok_or("the image is not built yet")?;
    let by_name: HashMap<&str, &NodeObserved> =
        o.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let node = |name: &str| by_name.get(name).copied();
    let mut measured: Vec<u64> = p
        .updated
        .iter()
        .filter_map(|name| node(name)?.annotations.last_update.as_ref())
        .filter(|u| u.is_to(&p.config, image))
        .filter_map(LastUpdate::seconds)
        .collect();
    measured.sort_unstable();
    let mid = measured.len() / 2;
    let per_node = match measured.len() {
        0 => return Err(NO_NODE_FINISHED),
        n if n % 2 == 1 => measured[mid],
        _ => measured[mid - 1].midpoint(measured[mid]),
    };
    let soak = u64::try_from(min_ready).unwrap_or(0);
    let slot = per_node.saturating_add(soak);
    // The capacity plan() assumes: maxUnavailable less the members that stay unavailable
    // (NotReady, cordoned or Degraded and not moving; any unavailable one a MachineImage
    // moves or two match).
    let others: HashSet<&str> = (p.machine_images.iter().map(|(n, _)| n))
        .chain(&p.conflicts)
        .map(String::as_str)
        .collect();
    let moving: HashSet<&str> = p.in_flight.iter().map(String::as_str).collect();
    let persistent = p
        .unavailable
        .iter()
        .filter(|(name, why)| {
            others.contains(name.as_str())
                || (matches!(*why, "NotReady" | "Cordoned" | "Degraded")
                    && !moving.contains(name.as_str()))
        })
        .count();
    let capacity = p.max_unavailable.saturating_sub(persistent);
    if capacity == 0 {
        return Err("no slot to move a node in (see blocked)");
    }
    let secs = |d: i64| u64::try_from(d).unwrap_or(0);
    // When each busy slot frees, from now: the moving nodes, then the soaking ones.
    let mut busy: BinaryHeap<Reverse<u64>> = p
        .in_flight
        .iter()
        .filter_map(|name| node(name))
        .map(|n| {
            let elapsed = n
                .annotations
                .update_started
                .map_or(0, |t| secs(now.saturating_sub(t)));
            Reverse(per_node.saturating_sub(elapsed).saturating_add(soak))
        })
        .collect();
    for name in &p.updated {
        if let Some(n) = node(name)
            && decide::unavailable(n, now, min_ready) == Some("Soaking")
        {
            let since = n.ready_since.unwrap_or(now);
            busy.push(Reverse(secs(
                min_ready.saturating_sub(now.saturating_sub(since)),
            )));
        }
    }
    let waiting: usize = p.batches.iter().map(Vec::len).sum();
    if waiting == 0 && busy.is_empty() {
        return Err("only held nodes are left");
    }
    // The waiting nodes take the slots as they free (the first ones now).
    let mut end = busy.iter().map(|Reverse(e)| *e).max().unwrap_or(0);
    let mut at = 0u64;
    for _ in 0..waiting {
        while busy.len() >= capacity {
            let Some(Reverse(free)) = busy.pop() else {
                break;
            };
            at = at.max(free);
        }
        let done = at.saturating_add(slot);
        end = end.max(done);
        busy.push(Reverse(done));
    }
    Ok(Estimate {
        seconds_left: end,
        per_node_seconds: per_node,
        soak_seconds: soak,
        measured_nodes: measured.len(),
    })
}

/// The phase of a node the rollout targeted.
fn phase(n: &NodeObserved) -> &'static str {
    let a = &n.annotations;
    if a.stage_image.is_some() && a.staged_image != a.stage_image && a.step.is_none() {
        return "staging";
    }
    match a.step.as_deref() {
        Some("draining") => "draining",
        Some("deploying") => "deploying",
        Some("rebooting") => "rebooting",
        _ if a.state == Some(NodeState::Rebooting) => "rebooting",
        _ => "updating",
    }
}
