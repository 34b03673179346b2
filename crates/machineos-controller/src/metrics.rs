//! The controller's Prometheus metrics: one `prometheus-client` registry behind a cheap,
//! cloneable [`Metrics`] handle with typed methods, encoded as OpenMetrics text for `/metrics`.
//!
//! Contract:
//! * The MCO's names (`ocl_metrics.go`) where they apply, with the same labels, so existing
//!   dashboards keep working: `ocl_build_state{pool,state}` (gauge: 1 for the phase of the
//!   pool's latest build, 0 for the other phases), `ocl_build_total{pool,state}` (counter of
//!   terminal outcomes: `succeeded`, `failed`, `interrupted`), `ocl_active_builds`,
//!   `ocl_build_duration_seconds{pool,state}`, `ocl_build_queue_duration_seconds`,
//!   `ocl_image_push_duration_seconds`, `ocl_image_push_total{pool,state}` (`succeeded` /
//!   `failed`), `ocl_build_start_timestamp_seconds{pool}`,
//!   `ocl_build_end_timestamp_seconds{pool}` (Unix seconds), `ocl_config_change_total{pool}`.
//! * machineos' own: `machineos_reconcile_total{result,reason}` (`result` is `ok`, `error` or
//!   `requeue`; `reason` the Requeue/Classify reason, empty for `ok`),
//!   `machineos_reconcile_duration_seconds`, `machineos_leader` (1 while this replica leads),
//!   `machineos_render_total{pool,result}` (`ok` / `error`); the rollout's
//!   `machineos_rollout_halted{pool}` (1 while a failed node stops the pool's rollout),
//!   `machineos_rollout_nodes{pool,state}` (`updated`, `unavailable`, `degraded`,
//!   `drain_blocked`: the agent reports its drain blocked or failed) and
//!   `machineos_rollout_targeted_total{pool}` (nodes given a new desired image),
//!   `machineos_rollback_total{pool}` (nodes their agent rolled back after the health gate
//!   failed: each rollback record counted once by the replica that sees it appear, records
//!   older than the replica's start not counted).
//! * State label values are the MachineOSBuild phases in lower case (`initial`, `prepared`,
//!   `building`, `succeeded`, `failed`, `interrupted`), from [`Phase`].
//! * Buckets: the MCO's build histogram spans 1 min…1 h, its queue 5 s…600 s and its push
//!   10 s…600 s because a pod build takes minutes. A native build here takes well under a
//!   second to minutes, so every duration histogram starts at 50 ms (reconciles at 1 ms)
//!   and still reaches the MCO's upper bounds, keeping its 60/300/600/1800/3600 s edges so
//!   quantiles stay comparable.
//! * Simplifications: no `ocl_build_job_state`, `ocl_build_retries_total`, push state gauge,
//!   rollout or adoption metrics (they belong to the Job backend and the node side).
//!   Cardinality is bounded by the pools; [`Metrics::forget_pool`] drops a deleted pool's
//!   gauges (counters are kept, as Prometheus expects).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use machineos_build_lifecycle::Phase;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every phase, in order (the values of the `state` label of `ocl_build_state`).
const PHASES: [Phase; 6] = [
    Phase::Initial,
    Phase::Prepared,
    Phase::Building,
    Phase::Succeeded,
    Phase::Failed,
    Phase::Interrupted,
];

/// Build and push durations: 50 ms to the MCO's 1 h.
const BUILD_BUCKETS: [f64; 15] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// Queue and push durations: 50 ms to the MCO's 600 s.
const SHORT_BUCKETS: [f64; 13] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Reconcile durations: 1 ms to 60 s.
const RECONCILE_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// The `state` label value of a phase.
pub fn phase_label(p: Phase) -> &'static str {
    match p {
        Phase::Initial => "initial",
        Phase::Prepared => "prepared",
        Phase::Building => "building",
        Phase::Succeeded => "succeeded",
        Phase::Failed => "failed",
        Phase::Interrupted => "interrupted",
    }
}

/// The outcome of one reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done; nothing to retry.
    Ok,
    /// Failed with an error.
    Error,
    /// Requeued (waiting for something, with a reason).
    Requeue,
}

impl ReconcileResult {
    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Ok => "ok",
            ReconcileResult::Error => "error",
            ReconcileResult::Requeue => "requeue",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolState {
    pool: String,
    state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    result: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolResult {
    pool: String,
    result: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn build_histogram() -> Histogram {
    Histogram::new(BUILD_BUCKETS)
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    build_state: Family<PoolState, Gauge>,
    build_total: Family<PoolState, Counter>,
    active_builds: Gauge,
    build_duration: HistogramFamily<PoolState>,
    queue_duration: Histogram,
    push_duration: Histogram,
    push_total: Family<PoolState, Counter>,
    build_start: Family<PoolLabels, FloatGauge>,
    build_end: Family<PoolLabels, FloatGauge>,
    config_change: Family<PoolLabels, Counter>,
    reconcile_total: Family<ReconcileLabels, Counter>,
    reconcile_duration: Histogram,
    leader: Gauge,
    render_total: Family<PoolResult, Counter>,
    rollout_halted: Family<PoolLabels, Gauge>,
    rollout_nodes: Family<PoolState, Gauge>,
    rollout_targeted: Family<PoolLabels, Counter>,
    rollback_total: Family<PoolLabels, Counter>,
}

/// The controller's metrics (cheap to clone; clones share the registry).
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn pool_state(pool: &str, state: &str) -> PoolState {
    PoolState {
        pool: pool.to_string(),
        state: state.to_string(),
    }
}

fn pool(pool: &str) -> PoolLabels {
    PoolLabels {
        pool: pool.to_string(),
    }
}

impl Metrics {
    /// A registry with every metric registered (at zero).
    pub fn new() -> Self {
        let mut r = Registry::default();
        let build_state = Family::<PoolState, Gauge>::default();
        r.register(
            "ocl_build_state",
            "The phase of each pool's latest build: 1 for the current phase, 0 for the others",
            build_state.clone(),
        );
        let build_total = Family::<PoolState, Counter>::default();
        // prometheus-client appends `_total` to counters.
        r.register(
            "ocl_build",
            "Builds finished, per pool and terminal state",
            build_total.clone(),
        );
        let active_builds = Gauge::default();
        r.register(
            "ocl_active_builds",
            "Builds running now",
            active_builds.clone(),
        );
        let build_duration =
            HistogramFamily::<PoolState>::new_with_constructor(build_histogram as fn() -> _);
        r.register(
            "ocl_build_duration_seconds",
            "Build duration from start to its terminal state",
            build_duration.clone(),
        );
        let queue_duration = Histogram::new(SHORT_BUCKETS);
        r.register(
            "ocl_build_queue_duration_seconds",
            "Time from a build's creation to its start",
            queue_duration.clone(),
        );
        let push_duration = Histogram::new(SHORT_BUCKETS);
        r.register(
            "ocl_image_push_duration_seconds",
            "Image push duration",
            push_duration.clone(),
        );
        let push_total = Family::<PoolState, Counter>::default();
        r.register(
            "ocl_image_push",
            "Image pushes, per pool and outcome",
            push_total.clone(),
        );
        let build_start = Family::<PoolLabels, FloatGauge>::default();
        r.register(
            "ocl_build_start_timestamp_seconds",
            "Unix time the pool's latest build started",
            build_start.clone(),
        );
        let build_end = Family::<PoolLabels, FloatGauge>::default();
        r.register(
            "ocl_build_end_timestamp_seconds",
            "Unix time the pool's latest build ended",
            build_end.clone(),
        );
        let config_change = Family::<PoolLabels, Counter>::default();
        r.register(
            "ocl_config_change",
            "Changes of a pool's build inputs that called for a new build",
            config_change.clone(),
        );
        let reconcile_total = Family::<ReconcileLabels, Counter>::default();
        r.register(
            "machineos_reconcile",
            "Reconciles, per result and reason",
            reconcile_total.clone(),
        );
        let reconcile_duration = Histogram::new(RECONCILE_BUCKETS);
        r.register(
            "machineos_reconcile_duration_seconds",
            "Reconcile duration",
            reconcile_duration.clone(),
        );
        let leader = Gauge::default();
        r.register(
            "machineos_leader",
            "1 while this replica holds the leader Lease",
            leader.clone(),
        );
        let render_total = Family::<PoolResult, Counter>::default();
        r.register(
            "machineos_render",
            "Renders of a pool's MachineConfigs, per result",
            render_total.clone(),
        );
        let rollout_halted = Family::<PoolLabels, Gauge>::default();
        r.register(
            "machineos_rollout_halted",
            "1 while a failed node stops the pool's rollout",
            rollout_halted.clone(),
        );
        let rollout_nodes = Family::<PoolState, Gauge>::default();
        r.register(
            "machineos_rollout_nodes",
            "The pool's nodes that are updated, unavailable, degraded, or whose drain is blocked",
            rollout_nodes.clone(),
        );
        let rollout_targeted = Family::<PoolLabels, Counter>::default();
        r.register(
            "machineos_rollout_targeted",
            "Nodes given a new desired config and image",
            rollout_targeted.clone(),
        );
        let rollback_total = Family::<PoolLabels, Counter>::default();
        r.register(
            "machineos_rollback",
            "Nodes their agent rolled back to the previous deployment after the health gate failed",
            rollback_total.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry: r,
                build_state,
                build_total,
                active_builds,
                build_duration,
                queue_duration,
                push_duration,
                push_total,
                build_start,
                build_end,
                config_change,
                reconcile_total,
                reconcile_duration,
                leader,
                render_total,
                rollout_halted,
                rollout_nodes,
                rollout_targeted,
                rollback_total,
            }),
        }
    }

    /// The pool's latest build is in `phase`: `ocl_build_state` 1 for it, 0 for the others.
    pub fn build_state(&self, pool: &str, phase: Phase) {
        for p in PHASES {
            let v = i64::from(p == phase);
            self.inner
                .build_state
                .get_or_create(&pool_state(pool, phase_label(p)))
                .set(v);
        }
    }

    /// The pool's build started now (`ocl_build_start_timestamp_seconds`).
    pub fn build_started(&self, pool_name: &str) {
        self.inner
            .build_start
            .get_or_create(&pool(pool_name))
            .set(unix_now());
    }

    /// The pool's build ended now in `phase` after `secs` seconds: counts it in
    /// `ocl_build_total`, observes `ocl_build_duration_seconds`, stamps
    /// `ocl_build_end_timestamp_seconds` and sets `ocl_build_state`. A non-terminal `phase`
    /// only sets the state.
    pub fn build_finished(&self, pool_name: &str, phase: Phase, secs: f64) {
        self.build_state(pool_name, phase);
        if !phase.is_terminal() {
            return;
        }
        let labels = pool_state(pool_name, phase_label(phase));
        self.inner.build_total.get_or_create(&labels).inc();
        self.inner
            .build_duration
            .get_or_create(&labels)
            .observe(secs);
        self.inner
            .build_end
            .get_or_create(&pool(pool_name))
            .set(unix_now());
    }

    /// `n` builds are running now (`ocl_active_builds`).
    pub fn set_active_builds(&self, n: i64) {
        self.inner.active_builds.set(n);
    }

    /// A build waited `secs` seconds between its creation and its start.
    pub fn queue_time(&self, secs: f64) {
        self.inner.queue_duration.observe(secs);
    }

    /// A push for `pool` ended (`ok` or not) after `secs` seconds.
    pub fn push(&self, pool_name: &str, ok: bool, secs: f64) {
        let state = if ok { "succeeded" } else { "failed" };
        self.inner
            .push_total
            .get_or_create(&pool_state(pool_name, state))
            .inc();
        self.inner.push_duration.observe(secs);
    }

    /// A pool's build inputs changed so that a new build is needed.
    pub fn config_change(&self, pool_name: &str) {
        self.inner
            .config_change
            .get_or_create(&pool(pool_name))
            .inc();
    }

    /// One reconcile ended with `result` (and `reason`, empty for [`ReconcileResult::Ok`])
    /// after `secs` seconds.
    pub fn reconcile(&self, result: ReconcileResult, reason: &str, secs: f64) {
        self.inner
            .reconcile_total
            .get_or_create(&ReconcileLabels {
                result: result.as_str().to_string(),
                reason: reason.to_string(),
            })
            .inc();
        self.inner.reconcile_duration.observe(secs);
    }

    /// Whether this replica leads (`machineos_leader`).
    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.set(i64::from(leader));
    }

    /// A render of `pool` ended, `ok` or not.
    pub fn render(&self, pool_name: &str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.inner
            .render_total
            .get_or_create(&PoolResult {
                pool: pool_name.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// The rollout's view of a pool: halted or not, and its node counts.
    pub fn rollout(
        &self,
        pool_name: &str,
        halted: bool,
        updated: i64,
        unavailable: i64,
        degraded: i64,
        drain_blocked: i64,
    ) {
        let i = &self.inner;
        i.rollout_halted
            .get_or_create(&pool(pool_name))
            .set(i64::from(halted));
        for (state, n) in [
            ("updated", updated),
            ("unavailable", unavailable),
            ("degraded", degraded),
            ("drain_blocked", drain_blocked),
        ] {
            i.rollout_nodes
                .get_or_create(&pool_state(pool_name, state))
                .set(n);
        }
    }

    /// `n` nodes of `pool` were targeted.
    pub fn rollout_targeted(&self, pool_name: &str, n: u64) {
        if n > 0 {
            self.inner
                .rollout_targeted
                .get_or_create(&pool(pool_name))
                .inc_by(n);
        }
    }

    /// A node of `pool` was rolled back (counted once per rollback record).
    pub fn rollback(&self, pool_name: &str) {
        self.inner
            .rollback_total
            .get_or_create(&pool(pool_name))
            .inc();
    }

    /// The pool was deleted: drops its state and timestamp gauges (counters stay).
    pub fn forget_pool(&self, pool_name: &str) {
        for p in PHASES {
            self.inner
                .build_state
                .remove(&pool_state(pool_name, phase_label(p)));
        }
        self.inner.build_start.remove(&pool(pool_name));
        self.inner.build_end.remove(&pool(pool_name));
        self.inner.rollout_halted.remove(&pool(pool_name));
        for state in ["updated", "unavailable", "degraded", "drain_blocked"] {
            self.inner
                .rollout_nodes
                .remove(&pool_state(pool_name, state));
        }
    }

    /// The OpenMetrics text of every metric (served with [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an encoder error would only truncate the text.
        if prometheus_client::encoding::text::encode(&mut out, &self.inner.registry).is_err() {
            tracing::warn!("encoding the metrics failed");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn every_metric_is_registered_and_the_text_ends_with_eof() {
        let m = Metrics::new();
        let t = m.encode();
        // Metrics without labels are there from the start (families only once used).
        for want in [
            "ocl_active_builds 0\n",
            "machineos_leader 0\n",
            "ocl_build_queue_duration_seconds_count 0\n",
            "ocl_image_push_duration_seconds_count 0\n",
            "machineos_reconcile_duration_seconds_count 0\n",
        ] {
            assert!(t.contains(want), "missing {want:?} in:\n{t}");
        }
        m.build_started("p");
        m.build_finished("p", Phase::Failed, 1.0);
        m.push("p", true, 1.0);
        m.config_change("p");
        m.reconcile(ReconcileResult::Error, "Conflict", 0.1);
        m.render("p", true);
        let t = m.encode();
        for (name, kind) in [
            ("ocl_build_state", "gauge"),
            ("ocl_build", "counter"),
            ("ocl_active_builds", "gauge"),
            ("ocl_build_duration_seconds", "histogram"),
            ("ocl_build_queue_duration_seconds", "histogram"),
            ("ocl_image_push_duration_seconds", "histogram"),
            ("ocl_image_push", "counter"),
            ("ocl_build_start_timestamp_seconds", "gauge"),
            ("ocl_build_end_timestamp_seconds", "gauge"),
            ("ocl_config_change", "counter"),
            ("machineos_reconcile", "counter"),
            ("machineos_reconcile_duration_seconds", "histogram"),
            ("machineos_leader", "gauge"),
            ("machineos_render", "counter"),
        ] {
            assert!(
                t.contains(&format!("# TYPE {name} {kind}\n")),
                "{name} missing:\n{t}"
            );
        }
        assert!(
            t.contains("ocl_build_total{pool=\"p\",state=\"failed\"} 1\n"),
            "{t}"
        );
        assert!(t.contains("machineos_reconcile_total{result=\"error\",reason=\"Conflict\"} 1\n"));
        assert!(t.ends_with("# EOF\n"), "{t}");
    }

    #[test]
    fn build_state_is_one_for_the_current_phase_only() {
        let m = Metrics::new();
        m.build_state("worker", Phase::Building);
        let t = m.encode();
        assert!(
            t.contains("ocl_build_state{pool=\"worker\",state=\"building\"} 1\n"),
            "{t}"
        );
        for other in ["initial", "prepared", "succeeded", "failed", "interrupted"] {
            assert!(
                t.contains(&format!(
                    "ocl_build_state{{pool=\"worker\",state=\"{other}\"}} 0\n"
                )),
                "{other}: {t}"
            );
        }
        m.build_finished("worker", Phase::Succeeded, 0.3);
        let t = m.encode();
        assert!(t.contains("ocl_build_state{pool=\"worker\",state=\"building\"} 0\n"));
        assert!(t.contains("ocl_build_state{pool=\"worker\",state=\"succeeded\"} 1\n"));
        assert!(
            t.contains("ocl_build_total{pool=\"worker\",state=\"succeeded\"} 1\n"),
            "{t}"
        );
        for (le, n) in [("0.25", 0), ("0.5", 1), ("3600.0", 1), ("+Inf", 1)] {
            let want = format!(
                "ocl_build_duration_seconds_bucket{{le=\"{le}\",pool=\"worker\",state=\"succeeded\"}} {n}\n"
            );
            assert!(t.contains(&want), "missing {want:?} in:\n{t}");
        }
        assert!(
            t.contains("ocl_build_duration_seconds_count{pool=\"worker\",state=\"succeeded\"} 1\n")
        );
        let end = line(&t, "ocl_build_end_timestamp_seconds{pool=\"worker\"} ").unwrap();
        let v: f64 = end.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v > 1.7e9, "{end}");
    }

    #[test]
    fn non_terminal_finishes_are_not_counted() {
        let m = Metrics::new();
        m.build_finished("infra", Phase::Building, 1.0);
        let t = m.encode();
        assert!(!t.contains("ocl_build_total{pool=\"infra\""), "{t}");
        assert!(t.contains("ocl_build_state{pool=\"infra\",state=\"building\"} 1\n"));
    }

    #[test]
    fn counters_gauges_and_histograms_follow_the_calls() {
        let m = Metrics::new();
        let clone = m.clone();
        clone.set_active_builds(3);
        m.queue_time(0.07);
        m.push("worker", true, 0.2);
        m.push("worker", false, 0.2);
        m.push("worker", true, 0.2);
        m.reconcile(ReconcileResult::Ok, "", 0.002);
        m.reconcile(ReconcileResult::Requeue, "PushSecretMissing", 0.001);
        m.reconcile(ReconcileResult::Requeue, "PushSecretMissing", 0.001);
        m.set_leader(true);
        m.render("worker", true);
        m.render("master", false);
        m.config_change("worker");
        m.build_started("worker");
        let t = m.encode();
        for want in [
            "ocl_active_builds 3\n",
            "ocl_build_queue_duration_seconds_count 1\n",
            "ocl_build_queue_duration_seconds_bucket{le=\"0.1\"} 1\n",
            "ocl_build_queue_duration_seconds_bucket{le=\"0.05\"} 0\n",
            "ocl_image_push_total{pool=\"worker\",state=\"succeeded\"} 2\n",
            "ocl_image_push_total{pool=\"worker\",state=\"failed\"} 1\n",
            "ocl_image_push_duration_seconds_count 3\n",
            "machineos_reconcile_total{result=\"ok\",reason=\"\"} 1\n",
            "machineos_reconcile_total{result=\"requeue\",reason=\"PushSecretMissing\"} 2\n",
            "machineos_reconcile_duration_seconds_count 3\n",
            "machineos_leader 1\n",
            "machineos_render_total{pool=\"worker\",result=\"ok\"} 1\n",
            "machineos_render_total{pool=\"master\",result=\"error\"} 1\n",
            "ocl_config_change_total{pool=\"worker\"} 1\n",
        ] {
            assert!(t.contains(want), "missing {want:?} in:\n{t}");
        }
        assert!(line(&t, "ocl_build_start_timestamp_seconds{pool=\"worker\"} ").is_some());
        m.set_leader(false);
        m.forget_pool("worker");
        let t = m.encode();
        assert!(t.contains("machineos_leader 0\n"));
        assert!(!t.contains("ocl_build_start_timestamp_seconds{pool=\"worker\"}"));
        assert!(t.contains("ocl_config_change_total{pool=\"worker\"} 1\n"));
    }
}
