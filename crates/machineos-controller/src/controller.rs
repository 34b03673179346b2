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
//!   (1 s doubling to 32 s, [`POOL_BACKOFF`], or longer when the API server asked for
//!   it with a 429's Retry-After, at most [`MAX_RETRY_AFTER`]: [`pool_wait`]) without
//!   holding up the other pools. No request waits inside the client: it retries nothing
//!   by itself (`machineos_kube::client_config`), so a throttled write costs one failed
//!   call and its pool a requeue, not the pass.
//! * **Only the leader acts.** A standby keeps its caches warm, serves `/metrics` and
//!   `/readyz`, and runs no pass (see [`crate::leader`]); a replica that stops being the
//!   leader — also in the middle of a pass, which is then abandoned before its next write —
//!   stops its builds, which the new leader adopts. Node writes are conditional on the
//!   resourceVersion they were decided from and status writes are read-modify-write with
//!   it, so what a stale view decided is refused rather than applied.

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
use crate::changes::ChangesController;
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

/// The longest wait a server's Retry-After imposes on a pool (a bigger one is capped: the
/// pool is tried again then, and throttled again if the server still wants it).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long a pool waits after its `failures`-th consecutive failed pass: the backoff, or
/// what the API server asked for if that is longer (bounded). Pure.
pub fn pool_wait(failures: u32, retry_after: Option<Duration>) -> Duration {
    let backoff = POOL_BACKOFF.delay(failures);
    retry_after.map_or(backoff, |r| backoff.max(r.min(MAX_RETRY_AFTER)))
}

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
    changes: ChangesController,
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
    let changes = ChangesController::new(
        opts.registry.clone(),
        opts.cache_dir.clone(),
        &opts.platform.architecture,
        wake.clone(),
    );
    let mut state = Loop {
        events: Events::new(client.clone(), &opts.identity),
        client,
        opts,
        caches,
        metrics,
        render: RenderController::default(),
        build,
        rollout: RolloutController::default(),
        changes,
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
            state.changes.cancel_all();
            continue;
        }
        // Coalesce a burst of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let started = Instant::now();
        // A pass is fenced by leadership: when the Lease is lost (or not renewed within its
        // deadline) mid-pass, the pass is dropped at its next await — no write it has not
        // sent yet goes out — and the builds stop, as a standby's do.
        let stepped_down = tokio::select! {
            () = state.pass() => false,
            () = leadership.lost() => true,
        };
        if stepped_down {
            tracing::warn!("leadership lost during a pass: the pass is abandoned");
            state.build.cancel_all();
            state.changes.cancel_all();
            continue;
        }
        tracing::debug!(ms = started.elapsed().as_millis() as u64, "pass");
    }
    state.build.cancel_all();
    state.changes.cancel_all();
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
                    let wait = pool_wait(n, e.retry_after());
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
        if self.opts.image_changes {
            requeue.merge(self.changes.pass(&cx, &s));
        }
        if let Some(d) = requeue.0 {
            self.requeue_in(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_waits_its_backoff_or_what_the_server_asked_for_bounded() {
        let s = Duration::from_secs;
        let cases = [
            (1, None, s(1)),
            (3, None, s(4)),
            (1, Some(s(5)), s(5)),
            (3, Some(s(2)), s(4)),
            (1, Some(s(1000)), MAX_RETRY_AFTER),
            (20, None, s(32)),
        ];
        for (n, retry_after, want) in cases {
            assert_eq!(pool_wait(n, retry_after), want, "{n} {retry_after:?}");
        }
    }
}
