//! The rollout sub-controller: moves the nodes of layered pools (and of MachineImages) onto
//! their images, under `maxUnavailable`. Each pass, on the loop's one snapshot and the build
//! sub-controller's view of which image each pool rolls:
//!
//! * **observe** — `observe` (pure), on a blocking thread;
//! * **decide** — [`machineos_rollout::decide()`] (pure);
//! * **execute** — `execute`: node annotations, MachineConfigNodes, statuses (with what
//!   moving onto each pool's image costs its nodes, [`disruption`], pure, on the same
//!   blocking thread as observe), Events; and before it `secrets`: the agents' copy of the
//!   MachineImages' pull Secrets.
//!
//! **Expectations.** What this controller just wrote (node annotations, MachineConfigNodes)
//! must be in the cache before the next decision, or that decision would count a targeted
//! node available still (and could exceed `maxUnavailable`) and write again; until then the
//! pass waits (stale expectations are dropped after 10 s). Time-dependent (the soak), so a
//! pass asks to come back when the next soaking node's slot frees.

pub mod disruption;
pub(crate) mod execute;
pub(crate) mod observe;
mod plan;
mod secrets;

pub use plan::{
    disruption_from_cluster, plan_default_cluster, plan_from_cluster, plan_with_disruption,
    status_from_cluster,
};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use crate::api;
use crate::observe::Snapshot;
use crate::pass::{Cx, Requeue};

/// The rollout sub-controller's state between passes.
#[derive(Default)]
pub(crate) struct RolloutController {
    /// Nodes just patched: the annotations the cache must show before the next decision,
    /// and when.
    expected: HashMap<String, (BTreeMap<&'static str, Option<String>>, Instant)>,
    /// MachineConfigNodes just created, until the cache shows them.
    mcn_expected: HashMap<String, Instant>,
    /// The node disruption policies last read (see [`disruption`]).
    policies: Option<disruption::Policies>,
    /// The rollback records counted in `machineos_rollback_total` (node, image, when).
    rollbacks_counted: std::collections::HashSet<(String, String, i64)>,
    /// When this replica's rollout began (milliseconds): older records are not counted.
    started_ms: Option<i64>,
}

impl RolloutController {
    /// The rollout: observe (on the caches' current contents, which include what the
    /// lifecycle just recorded), decide, apply. Time-dependent (the soak), so it requeues
    /// itself for the moment the next soaking node's slot frees.
    pub(crate) async fn pass(
        &mut self,
        cx: &Cx<'_>,
        s: &Snapshot,
        lifecycle: &machineos_build_lifecycle::Observed,
    ) -> Requeue {
        let mut requeue = Requeue::default();
        // Expectations: what this controller just wrote (node annotations, MachineConfigNodes)
        // must be in the cache before the next decision, or that decision would count a
        // targeted node available still (and could exceed maxUnavailable) and write again.
        // Stale ones (10 s) are dropped.
        if !self.expected.is_empty() || !self.mcn_expected.is_empty() {
            let nodes: HashMap<String, &Arc<Node>> =
                s.nodes.iter().map(|n| (n.name_any(), n)).collect();
            self.expected.retain(|node, (changes, at)| {
                let seen = nodes.get(node).is_some_and(|n| {
                    let a = n.annotations();
                    changes.iter().all(|(k, v)| a.get(*k) == v.as_ref())
                });
                !seen && at.elapsed() < Duration::from_secs(10)
            });
            let mcns: std::collections::HashSet<String> = s
                .machine_config_nodes
                .iter()
                .map(|m| m.name_any())
                .collect();
            self.mcn_expected
                .retain(|name, at| !mcns.contains(name) && at.elapsed() < Duration::from_secs(10));
        }
        if !self.expected.is_empty() || !self.mcn_expected.is_empty() {
            requeue.after(Duration::from_millis(100));
            return requeue;
        }
        let now = api::now();
        let (controller_node, min_ready) = (cx.opts.node_name.clone(), cx.opts.min_ready_seconds);
        if !self
            .policies
            .as_ref()
            .is_some_and(disruption::Policies::fresh)
        {
            self.policies = Some(disruption::Policies::read(cx.client).await);
        }
        let policies = self.policies.clone();
        let (s, lifecycle) = (s.clone(), lifecycle.clone());
        let wait_for_changes = cx.opts.image_changes;
        let decided = tokio::task::spawn_blocking(move || {
            let mut o = observe::observe(&s, &lifecycle, controller_node.as_deref(), min_ready);
            // A pool whose new image is still being compared with its nodes' waits briefly:
            // that comparison decides what moving onto it costs.
            let waiting = if wait_for_changes {
                disruption::awaiting_changes(&s, &o, now)
            } else {
                Vec::new()
            };
            for (i, why) in &waiting {
                o.pools[*i].image = machineos_rollout::observed::PoolImage::Pending(why.clone());
            }
            // What each move costs, decided before anything moves: the plan each node is
            // handed with its desired annotations, and the MachineOSImages' record.
            let costs = match policies {
                Some(p) => {
                    let moves = disruption::moves(&s, &o, &p);
                    let mut plans = disruption::plans(&moves);
                    for n in &mut o.nodes {
                        n.move_plan = plans.remove(&n.name);
                    }
                    disruption::for_pools(&moves, &p)
                }
                None => Default::default(),
            };
            let d = machineos_rollout::decide(&o, now);
            (s, o, d, costs, !waiting.is_empty())
        })
        .await;
        let Ok((s, o, d, costs, waiting)) = decided else {
            return requeue;
        };
        if waiting {
            // The comparison's write wakes the pass too; this bounds the wait's end.
            requeue.after(Duration::from_secs(1));
        }
        // The pull credentials a node will be told to use are in the agents' copy first.
        let copied = secrets::sync(cx.client, &s).await;
        let mut done = execute::execute(cx.client, cx.events, &s, &o, &d, &costs).await;
        if let Err(e) = copied {
            done.failures.push(e);
        }
        let now_i = Instant::now();
        for (node, changes) in done.patched {
            self.expected.insert(node, (changes, now_i));
        }
        for name in done.created {
            self.mcn_expected.insert(name, now_i);
        }
        // Each rollback record counted once, by the pool its node belongs to.
        let started = *self.started_ms.get_or_insert(now.saturating_mul(1000));
        let views = machineos_rollout::decide::views(&o);
        for v in &views {
            let Some(r) = &v.node.annotations.rolled_back else {
                continue;
            };
            let key = (v.node.name.clone(), r.image.clone(), r.at);
            if r.at >= started && self.rollbacks_counted.insert(key) {
                let pool = v.pool.map_or("", |p| o.pools[p].name.as_str());
                cx.metrics.rollback(pool);
            }
        }
        for r in &d.pools {
            cx.metrics.rollout(
                &r.pool,
                r.halted,
                i64::from(r.counts.updated),
                i64::from(r.counts.unavailable),
                i64::from(r.counts.degraded),
                i64::from(r.counts.drain_blocked),
            );
            cx.metrics
                .rollout_targeted(&r.pool, r.targeted.len() as u64);
        }
        if !done.failures.is_empty() {
            for e in &done.failures {
                if matches!(e, api::ExecError::Api(k) if k.code() == Some(409)) {
                    // A node changed since the decision (its patch is conditional): decided
                    // again on the next pass, which its watch event brings.
                    tracing::debug!(error = %e, "rollout write conflicted (deciding again)");
                } else {
                    tracing::warn!(error = %e, "rollout write failed (retrying)");
                }
            }
            requeue.after(Duration::from_secs(1));
        }
        // The next soaking node's slot frees at ready_since + minReadySeconds.
        let soon = views
            .iter()
            .filter_map(|v| {
                let min = v.pool.map_or(0, |p| o.pools[p].min_ready_seconds);
                let since = v.node.ready_since?;
                let left = since.saturating_add(min).saturating_sub(now);
                (v.node.ready && left > 0).then_some(left)
            })
            .min();
        if let Some(secs) = soon {
            let secs = u64::try_from(secs).unwrap_or(0).min(86_400);
            requeue.after(Duration::from_millis(secs * 1000 + 200));
        }
        requeue
    }
}
