//! The whole controller process: finds the cluster as kubectl does (in-cluster config, else
//! `KUBECONFIG`, else `~/.kube/config`: kube's `Config::infer`; no retries inside a request,
//! see `machineos_kube::client_config`), serves `/metrics`,
//! `/healthz`, `/readyz`, runs leader election (unless told not to) and the controller loop,
//! and shuts down gracefully when `shutdown` is cancelled: the loop stops and cancels its
//! builds, and the leader releases its Lease so a standby takes over at once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::controller::{ControllerOptions, run as run_loop};
use crate::health::{self, Health};
use crate::leader::{self, LeaderConfig, Leadership};
use crate::metrics::Metrics;

/// A task aborted when this is dropped: the elector and the endpoints die with the
/// controller however it ends — aborted from outside included, as a killed process's would.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long `/healthz` tolerates a loop that has not ticked.
pub const LIVENESS_STALENESS: Duration = Duration::from_secs(120);

/// Run until `shutdown` is cancelled (or the caches cannot start).
pub async fn run(opts: ControllerOptions, shutdown: CancellationToken) -> Result<(), String> {
    let found = |e: &dyn std::fmt::Display| {
        format!("finding the cluster (in-cluster, KUBECONFIG, ~/.kube/config): {e}")
    };
    // Nothing retried inside a request: a throttled call fails fast and only its own work
    // waits (`machineos_kube::client_config`).
    let config = kube::Config::infer().await.map_err(|e| found(&e))?;
    let client =
        kube::Client::try_from(machineos_kube::client_config(config)).map_err(|e| found(&e))?;
    run_with(client, opts, shutdown).await
}

/// [`run`] with a given client.
pub async fn run_with(
    client: kube::Client,
    opts: ControllerOptions,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let metrics = Metrics::new();
    let health = Health::new(LIVENESS_STALENESS);
    let mut served = None;
    if let Some(addr) = opts.listen {
        let (bound, task) = health::serve(addr, metrics.clone(), health.clone(), shutdown.clone())
            .await
            .map_err(|e| format!("listening on {addr}: {e}"))?;
        tracing::info!(addr = %bound, "health and metrics endpoints");
        served = Some(AbortOnDrop(task));
    }
    // Without leader election the sender lives as long as the loop (a dropped sender reads as
    // "not leader").
    let (leadership, _manual, elector) = if opts.leader_election {
        let mut cfg = LeaderConfig::new(opts.namespace.clone(), opts.identity.clone());
        cfg.lease_name = opts.lease_name.clone();
        (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) = opts.lease_timings;
        let (l, task) = leader::spawn(client.clone(), cfg, shutdown.clone());
        (l, None, Some(AbortOnDrop(task)))
    } else {
        let (l, tx) = Leadership::manual(true);
        (l, Some(tx), None)
    };
    {
        let metrics = metrics.clone();
        let mut watch = leadership.clone();
        metrics.set_leader(watch.is_leader());
        tokio::spawn(async move {
            while let Some(l) = watch.changed().await {
                tracing::info!(leader = l, "leadership changed");
                metrics.set_leader(l);
            }
        });
    }
    let result = run_loop(client, opts, metrics, health, leadership, shutdown.clone()).await;
    shutdown.cancel();
    // Graceful: the elector releases the Lease, the endpoints close.
    if let Some(mut t) = elector {
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut t.0).await;
    }
    if let Some(mut t) = served {
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut t.0).await;
    }
    result
}
