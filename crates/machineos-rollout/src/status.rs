//! `machineos rollout status`: where a pool's rollout stands, as `kubectl rollout status`
//! shows a Deployment's — the pool's image, updated of total, each moving node's phase, the
//! nodes that hold it back and why, and whether it is done or halted. Built from [`plan()`]
//! (the same observation and rules as [`decide()`]), plus the agent's step from the node's
//! progress annotation. Pure; time is an argument.
//!
//! A node's phase: `staging` (told to pre-pull, not staged yet), `draining`, `deploying`,
//! `rebooting` (the agent's step), `soaking` (on the image, within `minReadySeconds`),
//! `updating` (targeted, the agent has not reported a step yet).
//!
//! Not here yet: an estimate of the time left (the per-node update times are not recorded
//! anywhere the CLI can read).

use crate::decide::{self, decide};
use crate::observed::{NodeObserved, Observed, Timestamp};
use crate::plan::{PlanError, plan};
use crate::vocab::NodeState;

/// One node that holds the rollout back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// The node.
    pub node: String,
    /// Why: `Degraded: …`, `drain blocked: …`, `NotReady`, `follows MachineImage X`, ….
    pub reason: String,
}

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
}

/// The status of `pool` at `now`.
pub fn status(o: &Observed, pool: &str, now: Timestamp) -> Result<Status, PlanError> {
    let p = plan(o, pool, now)?;
    let d = decide(o, now);
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
