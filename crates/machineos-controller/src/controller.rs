//! The controller's loop: wake-ups, leadership, requeues and per-pool backoff — and
//! nothing else. Each pass takes one `Snapshot` of the caches
//! (`crate::caches`) and runs the sub-controllers on it in order, each `observe → decide →
//! execute` with its executor beside it:
//!
//! 1. `crate::render` — pools' MachineConfigs → rendered MachineConfigs (off where the
//!    MCO renders);
//! 2. `crate::build` — the MachineOSBuild lifecycle and the builder backends;
//! 3. [`crate::rollout`] — nodes onto their pool's (or MachineImage's) image.
//!
//! * **Level-triggered, one pass for everything.** The sub-controllers decide from the
//!   whole observed state, so the loop does not track which event concerned which object:
//!   any change wakes it (a [`Notify`] permit, so no wake-up is lost), bursts coalesce, and
//!   each pass decides on the caches' current contents. What one sub-controller writes, the
//!   others see on the next pass (the write's own watch event brings it).
//! * **Outcomes are data.** A pass returns when it wants to run again
//!   (`Requeue`) and, per pool, whether the build executor's writes
//!   failed; the loop keeps the clock: the soonest requeue, and a failed pool backed off
//!   (1 s doubling to 32 s, [`POOL_BACKOFF`]) without holding up the other pools.
//! * **Only the leader acts.** A standby keeps its caches warm, serves `/metrics` and
//!   `/readyz`, and runs no pass (see [`crate::leader`]); a replica that stops being the
//!   leader stops its builds, which the new leader adopts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use machineos_diagnostics::{Backoff, Classify};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::api::Events;
use crate::build::BuildController;
use crate::caches::Caches;
use crate::health::Health;
use crate::kinds;
use crate::leader::Leadership;
use crate::metrics::{Metrics, ReconcileResult};
use crate::pass::{Cx, Requeue};
use crate::render::RenderController;
use crate::rollout::RolloutController;

pub use crate::options::{ControllerOptions, DEFAULT_INDEX_MEMORY};

/// A pool whose actions failed is tried again after 1 s, doubling, at most 32 s.
pub const POOL_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_secs(1), Duration::from_secs(32));

/// The loop's state: the sub-controllers, and what the loop itself needs.
struct Loop {
    client: Client,
    opts: ControllerOptions,
    caches: Caches,
    events: Events,
    metrics: Metrics,
    render: RenderController,
    build: BuildController,
    rollout: RolloutController,
    /// Per pool: consecutive failures and when to try again.
    backoff: HashMap<String, (u32, Instant)>,
    /// Soonest requeue.
    next: Option<Instant>,
}

/// Run the controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    opts: ControllerOptions,
    metrics: Metrics,
    health: Health,
    leadership: Leadership,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let wake = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    let openshift_build = match opts.openshift_build {
        Some(on) => on,
        None => {
            let served = client
                .list_api_group_resources(&kinds::openshift_build().api_version)
                .await
                .is_ok_and(|l| l.resources.iter().any(|r| r.name == "builds"));
            tracing::info!(served, "the OpenShift Build API (build.openshift.io/v1)");
            served
        }
    };
    let caches = Caches::start(&client, &opts.namespace, openshift_build, &wake, &mut tasks);
    let build = BuildController::new(&client, &opts, openshift_build, &wake, &metrics);
    let mut state = Loop {
        events: Events::new(client.clone(), &opts.identity),
        client,
        opts,
        caches,
        metrics,
        render: RenderController::default(),
        build,
        rollout: RolloutController::default(),
        backoff: HashMap::new(),
        next: None,
    };
    tokio::select! {
        () = shutdown.cancelled() => {
            for t in &tasks { t.abort(); }
            return Ok(());
        }
        r = state.caches.wait_ready() => r.map_err(|e| format!("caches: {e}"))?,
    }
    tracing::info!(namespace = %state.opts.namespace, "caches synced");
    health.set_ready(true);
    let mut leader_rx = leadership.clone();
    loop {
        health.beat();
        let deadline = state
            .next
            .take()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(60));
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = wake.notified() => {}
            () = tokio::time::sleep_until(deadline.into()) => {}
            Some(_) = leader_rx.changed() => {}
        }
        if !leadership.is_leader() {
            // A standby (or a leader that lost its Lease) stops its builds: the new leader
            // adopts them.
            state.build.cancel_all();
            continue;
        }
        // Coalesce a burst of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let started = Instant::now();
        state.pass().await;
        tracing::debug!(ms = started.elapsed().as_millis() as u64, "pass");
    }
    state.build.cancel_all();
    for t in &tasks {
        t.abort();
    }
    Ok(())
}

impl Loop {
    fn requeue_in(&mut self, d: Duration) {
        let at = Instant::now() + d;
        self.next = Some(self.next.map_or(at, |n| n.min(at)));
    }

    /// One pass: one snapshot, the sub-controllers in order, their outcomes booked.
    async fn pass(&mut self) {
        let s = self.caches.snapshot(&self.opts.namespace);
        let cx = Cx {
            client: &self.client,
            opts: &self.opts,
            events: &self.events,
            metrics: &self.metrics,
        };
        let mut requeue = Requeue::default();
        if self.opts.render {
            requeue.merge(self.render.pass(&cx, &s).await);
        }
        // Pools in backoff wait for it; the others are decided.
        let now = Instant::now();
        for (_, until) in self.backoff.values() {
            if *until > now {
                requeue.after(until.saturating_duration_since(now));
            }
        }
        let backoff = &self.backoff;
        let runnable = |pool: &str| backoff.get(pool).is_none_or(|(_, until)| *until <= now);
        let built = self.build.pass(&cx, &s, &runnable).await;
        requeue.merge(built.requeue);
        for (pool, result) in built.results {
            match result {
                Ok(()) => {
                    self.backoff.remove(&pool);
                }
                Err(e) => {
                    let n = self.backoff.get(&pool).map_or(0, |(n, _)| *n) + 1;
                    let wait = POOL_BACKOFF.delay(n);
                    tracing::warn!(pool = %pool, error = %e, retry = ?e.retry(), "action failed; pool requeued");
                    cx.metrics
                        .reconcile(ReconcileResult::Error, e.reason(), 0.0);
                    self.backoff.insert(pool, (n, Instant::now() + wait));
                    requeue.after(wait);
                }
            }
        }
        if self.opts.rollout {
            requeue.merge(self.rollout.pass(&cx, &s, &built.observed).await);
        }
        if let Some(d) = requeue.0 {
            self.requeue_in(d);
        }
    }
}
