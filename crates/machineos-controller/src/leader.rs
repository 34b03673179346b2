//! Leader election with a `coordination.k8s.io/v1` Lease in the controller's namespace, with
//! client-go `leaderelection` (`LeaseLock`) semantics, so one of two replicas acts and the other
//! stands by.
//!
//! Contract:
//! * **Acquire** when the Lease is absent (create it), has no holder (released), or its
//!   holder's lease has expired *as observed locally*: like client-go, the expiry is the local
//!   [`tokio::time::Instant`] at which this replica last saw the Lease's spec change plus the
//!   record's `leaseDurationSeconds` — never the remote `renewTime`, so clock skew between
//!   replicas does not matter (only their clock rates).
//! * **Renew** every [`LeaderConfig::retry_period`] while leading; **step down** (leadership
//!   `false`) when no renewal has succeeded for [`LeaderConfig::renew_deadline`] (each attempt
//!   is bounded by the time left), or at once when the Lease names another live holder. Since
//!   `renew_deadline < lease_duration`, the old leader stops before anyone may take over.
//! * Writes use optimistic concurrency: `create` for an absent Lease, otherwise `replace`
//!   carrying the resourceVersion just read. A 409 means another candidate wrote first: not
//!   an error, it is logged at debug and the next attempt re-reads.
//! * `leaseTransitions` is incremented when the holder changes (also after a release);
//!   `acquireTime` is kept across renewals.
//! * On graceful shutdown (the [`CancellationToken`]) a leader first publishes `false`, then
//!   releases the Lease as client-go's `ReleaseOnCancel` does (`holderIdentity` cleared,
//!   `leaseDurationSeconds: 1`), so a standby takes over at its next attempt. A renewal the
//!   shutdown cut off may have reached the server: the release then conflicts, and is made
//!   again on the Lease as it is while I still hold it (never when another replica does).
//!   A task that is
//!   aborted or panics releases nothing (the standby waits out the lease), and its
//!   [`Leadership`] then reads `false` (the channel closed).
//! * The decision — given the observed Lease, my identity and the local elapsed times —
//!   is the pure [`decide`]; the task only reads, decides, writes and publishes.
//!
//! Why not `kube-lease-manager` (0.13, in the workspace): it decides expiry from the remote
//! `renewTime` against the local wall clock (plus a "grace"), keeps reporting leadership while
//! renewals fail (it only backs off; there is no renew deadline), takes durations in whole
//! seconds, and writes with server-side apply rather than resourceVersion preconditions.
//!
//! Simplifications: no jitter on the candidates' retry period (client-go's `JitterFactor`);
//! a leader that steps down keeps running as a candidate (client-go's `Run` returns and
//! processes usually exit); identities must be unique per process (e.g. `<pod>_<random>`), as
//! a replica whose identity the Lease names renews it without waiting.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The default Lease name.
pub const DEFAULT_LEASE_NAME: &str = "machineos-controller";

/// How the election runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    /// The namespace of the Lease (the controller's own).
    pub namespace: String,
    /// The Lease's name (default [`DEFAULT_LEASE_NAME`]).
    pub lease_name: String,
    /// This replica's identity (unique per process), written as `holderIdentity`.
    pub identity: String,
    /// How long a holder's lease lasts after its last observed change (default 15 s; written as
    /// `leaseDurationSeconds`, rounded up to whole seconds, at least 1).
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal (default 10 s; must be
    /// below `lease_duration`).
    pub renew_deadline: Duration,
    /// The interval between attempts, for the leader and the candidates (default 2 s).
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// The defaults (client-go's and the MCO's: 15 s / 10 s / 2 s) for `identity` in
    /// `namespace`.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaderConfig {
            namespace: namespace.into(),
            lease_name: DEFAULT_LEASE_NAME.to_string(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    fn lease_duration_seconds(&self) -> i32 {
        let whole =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(whole.max(1)).unwrap_or(i32::MAX)
    }
}

/// What a read of the Lease showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The read failed (or has not happened): nothing is known.
    Unknown,
    /// No Lease of that name.
    Absent,
    /// The Lease's holder and duration.
    Present {
        /// `holderIdentity`; `None` or empty: released.
        holder: Option<String>,
        /// `leaseDurationSeconds` as a duration (`None`: the field is missing).
        lease_duration: Option<Duration>,
    },
}

impl Observation {
    fn of(lease: Option<&Lease>) -> Observation {
        match lease {
            None => Observation::Absent,
            Some(l) => {
                let spec = l.spec.as_ref();
                Observation::Present {
                    holder: spec.and_then(|s| s.holder_identity.clone()),
                    lease_duration: spec
                        .and_then(|s| s.lease_duration_seconds)
                        .map(|d| Duration::from_secs(u64::try_from(d).unwrap_or(0))),
                }
            }
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Create the Lease naming me (`leaseTransitions: 0`).
    Create,
    /// Take the Lease over (`leaseTransitions + 1`, new `acquireTime`).
    Acquire,
    /// Renew my own Lease (`acquireTime` and `leaseTransitions` kept).
    Renew,
    /// Someone else holds a live lease (or nothing is known): do nothing now.
    Wait,
    /// Stop leading now.
    StepDown,
}

/// The election's decision, a pure function.
///
/// * `since_observed_change`: local time elapsed since this replica last saw the Lease's
///   spec change (client-go's `observedTime`).
/// * `since_last_renewal`: `Some(elapsed since my last successful write)` while I lead,
///   `None` while I do not.
///
/// A leader past its renew deadline steps down whatever the Lease says; a leader that sees
/// another holder whose lease is live steps down at once (client-go would wait out its
/// deadline; stopping sooner is never less safe).
pub fn decide(
    observation: &Observation,
    identity: &str,
    since_observed_change: Duration,
    since_last_renewal: Option<Duration>,
    renew_deadline: Duration,
) -> Decision {
    let leading = since_last_renewal.is_some();
    if since_last_renewal.is_some_and(|d| d >= renew_deadline) {
        return Decision::StepDown;
    }
    match observation {
        Observation::Unknown => Decision::Wait,
        Observation::Absent => Decision::Create,
        Observation::Present {
            holder,
            lease_duration,
        } => match holder.as_deref() {
            None | Some("") => Decision::Acquire,
            Some(h) if h == identity => Decision::Renew,
            Some(_) => {
                let live = lease_duration.is_some_and(|d| since_observed_change < d);
                match (live, leading) {
                    (false, _) => Decision::Acquire,
                    (true, true) => Decision::StepDown,
                    (true, false) => Decision::Wait,
                }
            }
        },
    }
}

/// A handle on this replica's leadership (cheap to clone). After the election task has ended
/// (shutdown, abort, panic) it reads "not leader".
#[derive(Debug, Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
}

impl Leadership {
    /// A handle driven by hand through the returned sender, starting at `leader` (for running
    /// without election, and for tests); it reads `false` once the sender is dropped.
    pub fn manual(leader: bool) -> (Leadership, watch::Sender<bool>) {
        let (tx, rx) = watch::channel(leader);
        (Leadership { rx }, tx)
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        self.rx.has_changed().is_ok() && *self.rx.borrow()
    }

    /// Waits until this replica leads: `true`, or `false` if the election task ended first.
    pub async fn wait_until_leader(&self) -> bool {
        let mut rx = self.rx.clone();
        // `wait_for` accepts a last value `true` even after the sender is gone.
        let led = rx.wait_for(|l| *l).await.is_ok();
        led && rx.has_changed().is_ok()
    }

    /// Waits until this replica does not lead (at once if it does not lead now), or the
    /// election task has ended.
    pub async fn lost(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|l| !*l).await;
    }

    /// Waits for the next change of leadership and returns the new value; `None` when the
    /// election task has ended (leadership is then `false`).
    pub async fn changed(&mut self) -> Option<bool> {
        match self.rx.changed().await {
            Ok(()) => Some(*self.rx.borrow_and_update()),
            Err(_) => None,
        }
    }
}

/// Starts the election: a task that runs until `shutdown` is cancelled (then releases the
/// Lease if it leads) and the handle on its outcome.
pub fn spawn(
    client: kube::Client,
    cfg: LeaderConfig,
    shutdown: CancellationToken,
) -> (Leadership, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let elector = Elector {
        api: Api::namespaced(client, &cfg.namespace),
        cfg,
        observed: None,
        last_renewal: None,
        last_written: None,
        tx,
    };
    let task = tokio::spawn(elector.run(shutdown));
    (Leadership { rx }, task)
}

/// What one attempt achieved.
enum Outcome {
    /// My write succeeded: I lead.
    Wrote(Box<Lease>),
    /// The decision was to wait.
    Waited,
    /// Step down.
    StepDown,
    /// Another candidate wrote first (409).
    Conflict,
}

struct Elector {
    api: Api<Lease>,
    cfg: LeaderConfig,
    /// The Lease's spec as last seen and the local time it last changed.
    observed: Option<(Option<LeaseSpec>, Instant)>,
    /// The local time of my last successful write while I lead.
    last_renewal: Option<Instant>,
    /// The Lease as my last successful write returned it (for the release).
    last_written: Option<Lease>,
    tx: watch::Sender<bool>,
}

impl Elector {
    async fn run(mut self, shutdown: CancellationToken) {
        let name = self.cfg.lease_name.clone();
        tracing::info!(lease = %name, identity = %self.cfg.identity, "leader election started");
        loop {
            let budget = match self.last_renewal {
                Some(t) => self.cfg.renew_deadline.saturating_sub(t.elapsed()),
                None => self.cfg.renew_deadline,
            };
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = tokio::time::timeout(budget, self.attempt()) => r,
            };
            match attempt {
                Ok(Ok(Outcome::Wrote(lease))) => {
                    self.last_renewal = Some(Instant::now());
                    self.last_written = Some(*lease);
                    self.publish(true);
                }
                Ok(Ok(Outcome::StepDown)) => self.step_down("another replica holds the Lease"),
                Ok(Ok(Outcome::Waited)) => {}
                Ok(Ok(Outcome::Conflict)) => {
                    tracing::debug!(lease = %name, "another candidate wrote the Lease first");
                }
                Ok(Err(e)) => tracing::warn!(lease = %name, error = %e, "Lease attempt failed"),
                Err(_) => tracing::warn!(lease = %name, "Lease attempt timed out"),
            }
            if self
                .last_renewal
                .is_some_and(|t| t.elapsed() >= self.cfg.renew_deadline)
            {
                self.step_down("no renewal succeeded within the renew deadline");
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
        self.release().await;
        tracing::info!(lease = %name, identity = %self.cfg.identity, "leader election stopped");
    }

    fn publish(&mut self, leading: bool) {
        let changed = self
            .tx
            .send_if_modified(|l| std::mem::replace(l, leading) != leading);
        if changed && leading {
            tracing::info!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, "became leader");
        }
    }

    fn step_down(&mut self, why: &str) {
        self.last_renewal = None;
        self.last_written = None;
        if self.tx.send_if_modified(|l| std::mem::replace(l, false)) {
            tracing::warn!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, why, "stepped down");
        }
    }

    /// Reads the Lease, decides and writes.
    async fn attempt(&mut self) -> Result<Outcome, kube::Error> {
        let name = &self.cfg.lease_name;
        let current = self.api.get_opt(name).await?;
        let now = Instant::now();
        let spec = current.as_ref().and_then(|l| l.spec.clone());
        match &self.observed {
            Some((seen, _)) if *seen == spec => {}
            _ => self.observed = Some((spec.clone(), now)),
        }
        let since_change = self
            .observed
            .as_ref()
            .map(|(_, t)| now.saturating_duration_since(*t))
            .unwrap_or_default();
        let decision = decide(
            &Observation::of(current.as_ref()),
            &self.cfg.identity,
            since_change,
            self.last_renewal.map(|t| now.saturating_duration_since(t)),
            self.cfg.renew_deadline,
        );
        let stamp = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let old = spec.unwrap_or_default();
        let mut next_spec = LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease_duration_seconds()),
            acquire_time: Some(stamp.clone()),
            renew_time: Some(stamp),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };
        let written = match (decision, current) {
            (Decision::Wait, _) => return Ok(Outcome::Waited),
            (Decision::StepDown, _) => return Ok(Outcome::StepDown),
            (Decision::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(next_spec.clone()),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (Decision::Acquire | Decision::Renew, Some(mut lease)) => {
                let transitions = old.lease_transitions.unwrap_or(0);
                if decision == Decision::Renew {
                    next_spec.acquire_time = old.acquire_time.or(next_spec.acquire_time);
                    next_spec.lease_transitions = Some(transitions);
                } else {
                    next_spec.lease_transitions = Some(transitions.saturating_add(1));
                }
                lease.spec = Some(next_spec.clone());
                self.api.replace(name, &PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(lease) => {
                // What the server stored (its MicroTime precision), so the next read is
                // not mistaken for someone else's change.
                self.observed = Some((lease.spec.clone(), Instant::now()));
                Ok(Outcome::Wrote(Box::new(lease)))
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Publishes `false`, then releases the Lease if I lead (client-go `ReleaseOnCancel`).
    async fn release(&mut self) {
        let was_leading = self.last_renewal.is_some();
        self.step_down_quietly();
        let Some(mut lease) = self.last_written.take().filter(|_| was_leading) else {
            return;
        };
        let name = self.cfg.lease_name.clone();
        let me = self.cfg.identity.clone();
        let api = self.api.clone();
        // A renewal cut off by the shutdown may have reached the server after all: then the
        // Lease is newer than my last write, the release conflicts, and it is made again on
        // the Lease as it is — as long as I still hold it (a few times at most).
        let release = async move {
            for _ in 0..3 {
                let stamp = MicroTime(k8s_openapi::jiff::Timestamp::now());
                let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions);
                lease.spec = Some(LeaseSpec {
                    holder_identity: None,
                    lease_duration_seconds: Some(1),
                    acquire_time: Some(stamp.clone()),
                    renew_time: Some(stamp),
                    lease_transitions: transitions,
                    ..LeaseSpec::default()
                });
                match api.replace(&name, &PostParams::default(), &lease).await {
                    Ok(_) => return Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        let Some(now) = api.get_opt(&name).await? else {
                            return Ok(false);
                        };
                        let holder = now.spec.as_ref().and_then(|s| s.holder_identity.clone());
                        if holder.as_deref() != Some(me.as_str()) {
                            return Ok(false);
                        }
                        lease = now;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(false)
        };
        let name = &self.cfg.lease_name;
        match tokio::time::timeout(self.cfg.renew_deadline, release).await {
            Ok(Ok(true)) => tracing::info!(lease = %name, "released the Lease"),
            Ok(Ok(false)) => {
                tracing::info!(lease = %name, "the Lease is no longer mine to release")
            }
            Ok(Err(e)) => tracing::warn!(lease = %name, error = %e, "could not release the Lease"),
            Err(_) => tracing::warn!(lease = %name, "releasing the Lease timed out"),
        }
    }

    fn step_down_quietly(&mut self) {
        self.last_renewal = None;
        self.tx.send_if_modified(|l| std::mem::replace(l, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn present(holder: Option<&str>, secs: Option<u64>) -> Observation {
        Observation::Present {
            holder: holder.map(str::to_string),
            lease_duration: secs.map(Duration::from_secs),
        }
    }

    #[test]
    fn the_decision_table() {
        let s = Duration::from_secs;
        let deadline = s(10);
        // (observation, since observed change, since my last renewal, expected)
        let rows: Vec<(Observation, Duration, Option<Duration>, Decision)> = vec![
            // Nothing known: wait (a leader keeps leading until its deadline).
            (Observation::Unknown, s(0), None, Decision::Wait),
            (Observation::Unknown, s(100), Some(s(3)), Decision::Wait),
            // Absent: create it.
            (Observation::Absent, s(0), None, Decision::Create),
            (Observation::Absent, s(0), Some(s(1)), Decision::Create),
            // Released (no or empty holder): acquire at once, whatever the duration.
            (present(None, Some(15)), s(0), None, Decision::Acquire),
            (present(Some(""), Some(1)), s(0), None, Decision::Acquire),
            // Mine: renew (also when I am not leading yet, e.g. after stepping down).
            (
                present(Some("me"), Some(15)),
                s(0),
                Some(s(2)),
                Decision::Renew,
            ),
            (present(Some("me"), Some(15)), s(0), None, Decision::Renew),
            // Another holder, live as observed locally: wait; expired: take it over.
            (present(Some("b"), Some(15)), s(14), None, Decision::Wait),
            (present(Some("b"), Some(15)), s(15), None, Decision::Acquire),
            (present(Some("b"), Some(15)), s(60), None, Decision::Acquire),
            // A holder without a duration is never live.
            (present(Some("b"), None), s(0), None, Decision::Acquire),
            // A leader that sees another live holder steps down.
            (
                present(Some("b"), Some(15)),
                s(1),
                Some(s(1)),
                Decision::StepDown,
            ),
            // ... but takes an expired one back (it was mine until someone wrote).
            (
                present(Some("b"), Some(15)),
                s(20),
                Some(s(1)),
                Decision::Acquire,
            ),
            // Past the renew deadline: step down, whatever the Lease says.
            (
                present(Some("me"), Some(15)),
                s(0),
                Some(s(10)),
                Decision::StepDown,
            ),
            (Observation::Unknown, s(0), Some(s(11)), Decision::StepDown),
            (Observation::Absent, s(0), Some(s(10)), Decision::StepDown),
        ];
        for (i, (obs, change, renewal, want)) in rows.into_iter().enumerate() {
            assert_eq!(
                decide(&obs, "me", change, renewal, deadline),
                want,
                "row {i}: {obs:?} {change:?} {renewal:?}"
            );
        }
    }

    #[test]
    fn lease_duration_seconds_round_up_to_at_least_one() {
        let mut c = LeaderConfig::new("ns", "me");
        assert_eq!(c.lease_duration_seconds(), 15);
        c.lease_duration = Duration::from_millis(2500);
        assert_eq!(c.lease_duration_seconds(), 3);
        c.lease_duration = Duration::ZERO;
        assert_eq!(c.lease_duration_seconds(), 1);
    }
}
