//! Two controller replicas with leader election on one cluster: only the leader acts (one
//! build, one writer); when the leader stops renewing (killed: its task aborted, no
//! release), the standby takes over after the lease expires and carries on — a config edit
//! is then built by it.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use machineos_controller::app::run_with;
use machineos_controller::kinds;
use tokio_util::sync::CancellationToken;

async fn holder(c: &Cluster) -> Option<String> {
    let leases: kube::Api<Lease> = kube::Api::namespaced(c.client.clone(), NS);
    leases
        .get_opt("machineos-controller")
        .await
        .unwrap()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_the_standby_takes_over() {
    let c = Cluster::start().await;
    let push = format!("{}/machineos/worker:latest", c.registry.host());
    c.setup(&push, "a\n").await;

    let start = |id: &str| {
        let mut o = c.options();
        o.leader_election = true;
        o.identity = id.to_owned();
        o.lease_timings = (
            Duration::from_secs(2),
            Duration::from_millis(1500),
            Duration::from_millis(250),
        );
        let server = &c.server;
        let shutdown = CancellationToken::new();
        let s2 = shutdown.clone();
        async move {
            let client = client_of(server).await;
            (shutdown, tokio::spawn(run_with(client, o, s2)))
        }
    };
    let (stop_a, a) = start("replica-a").await;
    let first = loop {
        if let Some(h) = holder(&c).await {
            break h;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(first, "replica-a");
    let (stop_b, b) = start("replica-b").await;
    c.until(&kinds::build(), "one Succeeded build", |l| {
        l.len() == 1 && phase(&l[0]) == "Succeeded"
    })
    .await;
    // The standby did nothing: every Event so far was reported by replica-a, and one build
    // exists.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&c).await.as_deref(), Some("replica-a"));
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(c.client.clone(), "default");
    let reporters: std::collections::BTreeSet<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|e| e.reporting_instance.clone())
        .collect();
    assert_eq!(
        reporters,
        ["replica-a".to_string()].into_iter().collect(),
        "only the leader acts"
    );
    assert_eq!(
        c.get(&kinds::build())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // The leader is killed: no release. The standby takes over after the lease expires.
    a.abort();
    let _ = a.await;
    drop(stop_a);
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while holder(&c).await.as_deref() != Some("replica-b") {
        assert!(tokio::time::Instant::now() < deadline, "no takeover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "b\n"),
    )
    .await;
    let l = c
        .until(&kinds::build(), "a second Succeeded build", |l| {
            l.iter().filter(|b| phase(b) == "Succeeded").count() == 2
        })
        .await;
    let newest = l
        .iter()
        .max_by_key(|b| b.creation_timestamp())
        .unwrap()
        .name_any();
    c.until_recorded(
        "the MachineOSConfig on the new build",
        "machineOSBuild/name",
        newest.as_str(),
    )
    .await;
    let reporters: std::collections::BTreeSet<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|e| e.reporting_instance.clone())
        .collect();
    assert!(reporters.contains("replica-b"), "{reporters:?}");
    stop_b.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), b).await;
    assert_eq!(holder(&c).await, None, "released on graceful shutdown");
}
