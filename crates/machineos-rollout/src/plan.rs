//! `machineos rollout plan`: the order and batches a pool's rollout will take, from the same
//! rules as [`decide()`], without changing anything.
//!
//! The first batch is exactly what [`decide()`] targets now. Later batches assume every node
//! targeted before them succeeds and soaks; each takes `maxUnavailable` minus the members
//! unavailable for other reasons (NotReady, cordoned, Degraded, moved by a MachineImage),
//! which are assumed to stay so. When nothing can move now (build pending, paused, halted, no
//! capacity) [`Plan::blocked`] says why and the batches show the order it would take.
//! O(n log n) in the nodes: one decision, one sort.

use crate::decide::{self, Driver, decide};
use crate::observed::{MaxUnavailable, Observed, PoolImage, Timestamp};

/// A node in a batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlannedNode {
    /// Its name.
    pub name: String,
    /// Its zone.
    pub zone: Option<String>,
    /// Its creation time.
    pub created: Timestamp,
}

/// A pool's rollout plan (`-o json` prints it as is, in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The pool.
    pub pool: String,
    /// Its rendered config.
    pub config: String,
    /// Its built image, if its build succeeded.
    pub image: Option<String>,
    /// Its members.
    pub members: usize,
    /// `maxUnavailable` scaled over them.
    pub max_unavailable: usize,
    /// Members already on the target.
    pub updated: Vec<String>,
    /// Members moving now (targeted before this plan).
    pub in_flight: Vec<String>,
    /// Members unavailable now, and why.
    pub unavailable: Vec<(String, &'static str)>,
    /// Batches in order; the first is what the controller targets now (empty when blocked).
    pub batches: Vec<Vec<PlannedNode>>,
    /// Members a MachineImage drives (node, MachineImage): not in the batches.
    pub machine_images: Vec<(String, String)>,
    /// Members two MachineImages match: nobody moves them.
    pub conflicts: Vec<String>,
    /// Members not on the target that are not Ready: targeted once Ready, not in the batches.
    pub not_ready: Vec<String>,
    /// Why nothing moves now, if so.
    pub blocked: Option<String>,
    /// The health gate each moved node must pass (`off`, or why it cannot be read).
    pub health_gate: String,
    /// The canaries, when the pool names some: they move first, alone.
    pub canaries: Vec<String>,
    /// Members with a health verdict (node, verdict): at the gate, passed, failed, rolled
    /// back.
    pub health: Vec<(String, String)>,
}

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No such pool.
    #[error("no MachineConfigPool {0}")]
    NoPool(String),
    /// The pool builds no image.
    #[error(
        "MachineConfigPool {0} builds no image (no MachineOSConfig targets it): machineos does not roll its nodes"
    )]
    NotLayered(String),
}

/// The plan for `pool` at `now`.
pub fn plan(o: &Observed, pool: &str, now: Timestamp) -> Result<Plan, PlanError> {
    plan_from(o, &decide(o, now), pool, now)
}

/// [`plan()`] from the decision `d` already made on `o` at `now` (so a caller that needs the
/// decision too — [`crate::status()`] — decides once).
pub fn plan_from(
    o: &Observed,
    d: &crate::decide::Decision,
    pool: &str,
    now: Timestamp,
) -> Result<Plan, PlanError> {
    let (pi, p) = o
        .pools
        .iter()
        .enumerate()
        .find(|(_, p)| p.name == pool)
        .ok_or_else(|| PlanError::NoPool(pool.to_owned()))?;
    let image = match &p.image {
        PoolImage::NotLayered => return Err(PlanError::NotLayered(pool.to_owned())),
        PoolImage::Built(i) => Some(i.clone()),
        PoolImage::Pending(_) => None,
    };
    let report = d.pools.iter().find(|r| r.pool == pool);
    let views = decide::views(o);
    let members: Vec<&decide::NodeView<'_>> = views.iter().filter(|v| v.pool == Some(pi)).collect();
    let limit = MaxUnavailable::scaled(p.max_unavailable, members.len());
    let controller = o.controller_node.as_deref();
    let planned = |v: &decide::NodeView<'_>| PlannedNode {
        name: v.node.name.clone(),
        zone: v.node.zone().map(str::to_owned),
        created: v.node.created,
    };
    let first: Vec<String> = report.map(|r| r.targeted.clone()).unwrap_or_default();
    let first_set: std::collections::HashSet<&str> = first.iter().map(String::as_str).collect();
    let mut out = Plan {
        pool: pool.to_owned(),
        config: p.config.clone(),
        image: image.clone(),
        members: members.len(),
        max_unavailable: limit,
        updated: Vec::new(),
        in_flight: Vec::new(),
        unavailable: Vec::new(),
        batches: Vec::new(),
        machine_images: Vec::new(),
        conflicts: Vec::new(),
        not_ready: Vec::new(),
        blocked: None,
        health_gate: match &p.gate {
            Ok(Some(g)) => g.describe(),
            Ok(None) => "off".to_owned(),
            Err(e) => format!("unreadable: {e}"),
        },
        canaries: Vec::new(),
        health: Vec::new(),
    };
    for v in &members {
        let n = v.node;
        if let Some(r) = &n.annotations.rolled_back {
            out.health
                .push((n.name.clone(), format!("rolled back: {}", r.describe())));
        } else if let Some((status, reason, message)) = &n.health {
            out.health.push((
                n.name.clone(),
                format!("NodeHealthy={status} {reason}: {message}"),
            ));
        }
    }
    if p.canary.is_some() {
        let driven: Vec<usize> = views
            .iter()
            .enumerate()
            .filter(|(_, v)| v.driver == Driver::Pool(pi))
            .map(|(i, _)| i)
            .collect();
        out.canaries = decide::canaries(&views, &driven, p.canary.as_ref(), controller)
            .unwrap_or_default()
            .into_iter()
            .map(|i| views[i].node.name.clone())
            .collect();
    }
    let mut rest = Vec::new();
    let mut persistent = 0usize;
    for v in &members {
        let n = v.node;
        let why = decide::unavailable(n, now, p.min_ready_seconds);
        if let Some(why) = why {
            out.unavailable.push((n.name.clone(), why));
        }
        match v.driver {
            Driver::Image(j) => {
                out.machine_images
                    .push((n.name.clone(), o.machine_images[j].name.clone()));
                persistent += usize::from(why.is_some());
                continue;
            }
            Driver::Conflict => {
                out.conflicts.push(n.name.clone());
                persistent += usize::from(why.is_some());
                continue;
            }
            Driver::Pool(_) | Driver::Nobody => {}
        }
        let at = image
            .as_deref()
            .is_some_and(|img| decide::at_target(n, Some(&p.config), img));
        let moving = decide::in_flight(n) && !decide::degraded(n);
        if at {
            out.updated.push(n.name.clone());
        } else if moving {
            out.in_flight.push(n.name.clone());
        } else if !n.ready {
            out.not_ready.push(n.name.clone());
        } else if !first_set.contains(n.name.as_str()) {
            rest.push(*v);
        }
        // Update-related unavailability (moving, soaking) ends; anything else is assumed to stay.
        if matches!(why, Some("NotReady" | "Cordoned" | "Degraded")) && !moving {
            persistent += 1;
        }
    }
    rest.sort_by(|a, b| {
        decide::order_key(a.node, controller).cmp(&decide::order_key(b.node, controller))
    });
    let by_name: std::collections::HashMap<&str, &decide::NodeView<'_>> =
        members.iter().map(|v| (v.node.name.as_str(), *v)).collect();
    let first: Vec<PlannedNode> = first
        .iter()
        .filter_map(|n| by_name.get(n.as_str()).map(|v| planned(v)))
        .collect();
    let halted = report.is_some_and(|r| r.halted);
    let quarantined = image
        .as_deref()
        .and_then(|img| decide::quarantined(o).remove(img));
    out.blocked = match (&p.image, p.paused, halted) {
        (PoolImage::Pending(why), _, _) => Some(format!("waiting for the image: {why}")),
        _ if quarantined.is_some() => Some(format!(
            "the image is quarantined: {}",
            quarantined.unwrap_or_default()
        )),
        _ if p.gate.is_err() => Some(format!("the health gate: {}", out.health_gate)),
        (_, true, _) => Some("the pool is paused".to_owned()),
        (_, _, true) => Some("halted: a node failed on this image (see NodeDegraded)".to_owned()),
        _ if p.max_unavailable == Some(MaxUnavailable::Invalid) => {
            Some(MaxUnavailable::INVALID.to_owned())
        }
        _ if first.is_empty() && !rest.is_empty() => Some(format!(
            "no capacity now: {} of {} members unavailable, maxUnavailable {limit}",
            out.unavailable.len(),
            members.len()
        )),
        _ => None,
    };
    // Moves applied live take no slot: they all go with the first batch.
    let (live, rest): (Vec<&decide::NodeView<'_>>, Vec<&decide::NodeView<'_>>) =
        rest.into_iter().partition(|v| {
            image
                .as_deref()
                .is_some_and(|img| v.node.moves_live(&p.config, img))
        });
    let mut first = first;
    first.extend(live.iter().map(|v| planned(v)));
    if !first.is_empty() {
        out.batches.push(first);
    }
    let step = limit.saturating_sub(persistent);
    if step == 0 {
        if !rest.is_empty() {
            out.batches.push(rest.iter().map(|v| planned(v)).collect());
            out.blocked.get_or_insert_with(|| {
                format!(
                    "no capacity: {persistent} members stay unavailable, maxUnavailable {limit}"
                )
            });
        }
    } else {
        for chunk in rest.chunks(step) {
            out.batches.push(chunk.iter().map(|v| planned(v)).collect());
        }
    }
    Ok(out)
}
