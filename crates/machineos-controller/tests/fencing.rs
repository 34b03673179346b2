//! Writes fenced by leadership: a leader whose Lease renewals fail while one of its writes
//! hangs steps down, and from then on nothing more is written — the pass it was in is
//! abandoned at its next await, not finished on a stale view.

mod common;

use std::time::Duration;

use common::*;
use machineos_controller::controller::run;
use machineos_controller::health::Health;
use machineos_controller::leader::{self, LeaderConfig};
use machineos_controller::metrics::Metrics;
use machineos_kubetest::control::{Fault, RequestCounts, RequestMatch};
use tokio_util::sync::CancellationToken;

/// Writes (any verb that changes something) other than the Lease's.
fn writes(counts: &RequestCounts) -> Vec<((String, String), u64)> {
    counts
        .0
        .iter()
        .filter(|((verb, resource), _)| {
            ["create", "update", "patch", "delete"].contains(&verb.as_str())
                && !resource.starts_with("leases")
        })
        .map(|(k, n)| (k.clone(), *n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_its_lease_mid_pass_writes_nothing_more() {
    let c = Cluster::start().await;
    let shutdown = CancellationToken::new();
    let mut cfg = LeaderConfig::new(NS, "replica-a");
    cfg.lease_duration = Duration::from_secs(3);
    cfg.renew_deadline = Duration::from_secs(2);
    cfg.retry_period = Duration::from_millis(250);
    let (leadership, elector) = leader::spawn(client_of(&c.server).await, cfg, shutdown.clone());
    let mut opts = c.options();
    opts.leader_election = true;
    let task = tokio::spawn(run(
        client_of(&c.server).await,
        opts,
        Metrics::new(),
        Health::default(),
        leadership.clone(),
        shutdown.clone(),
    ));
    tokio::time::timeout(EVENTUALLY, leadership.wait_until_leader())
        .await
        .expect("never led");

    // The MachineOSBuild's creation hangs for 4 s at the API server.
    let builds = "/apis/machineconfiguration.openshift.io/v1/machineosbuilds";
    c.server.controls().delay(
        RequestMatch::path(builds).method("POST"),
        Duration::from_secs(4),
        Some(1),
    );
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "hello\n").await;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while c.server.controls().counts().get(
        "create",
        "machineosbuilds.machineconfiguration.openshift.io",
    ) == 0
    {
        assert!(tokio::time::Instant::now() < deadline, "no build created");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // While it hangs, every Lease write fails: the leader steps down at its renew deadline.
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    for m in ["PUT", "POST", "PATCH"] {
        c.server.controls().fail_next(
            RequestMatch::path(leases.clone()).method(m),
            u32::MAX,
            Fault::internal_error(),
        );
    }
    tokio::time::timeout(EVENTUALLY, leadership.lost())
        .await
        .expect("the leader never stepped down");
    let at_step_down = c.server.controls().counts();
    // The hung create returns meanwhile; whatever the pass would have written after it is not.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let since = c.server.controls().counts().since(&at_step_down);
    assert_eq!(writes(&since), vec![], "written after stepping down");
    assert!(!leadership.is_leader());

    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    let _ = tokio::time::timeout(Duration::from_secs(30), elector).await;
}
