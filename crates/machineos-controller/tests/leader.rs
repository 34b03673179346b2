//! Leader election against kubetest's API server over TLS: one leader of two, take-over after
//! a kill (lease expiry) and after a graceful shutdown (release), and a leader that cannot
//! renew stepping down and coming back. Short durations, generous "eventually" deadlines, no
//! assertion on elapsed time.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use machineos_controller::leader::{self, LeaderConfig, Leadership};
use machineos_kubetest::control::{Fault, RequestMatch};
use machineos_kubetest::http::{Server, new_store};
use tokio_util::sync::CancellationToken;

/// A generous deadline for "eventually".
const EVENTUALLY: Duration = Duration::from_secs(60);
const NS: &str = "machineos";

async fn setup() -> (Server, Client) {
    let s = Server::start_tls(new_store(), 0).await.unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&s.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    let c = Client::try_from(cfg).unwrap();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (s, c)
}

fn cfg(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(250),
        ..LeaderConfig::new(NS, identity)
    }
}

struct Candidate {
    id: &'static str,
    leadership: Leadership,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn candidate(c: &Client, cfg: LeaderConfig) -> Candidate {
    let id: &'static str = Box::leak(cfg.identity.clone().into_boxed_str());
    let shutdown = CancellationToken::new();
    let (leadership, task) = leader::spawn(c.clone(), cfg, shutdown.clone());
    Candidate {
        id,
        leadership,
        shutdown,
        task,
    }
}

async fn lease(c: &Client) -> Lease {
    Api::<Lease>::namespaced(c.clone(), NS)
        .get(leader::DEFAULT_LEASE_NAME)
        .await
        .unwrap()
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

fn transitions(l: &Lease) -> i32 {
    l.spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0)
}

/// Waits until exactly one of `cs` leads (never both) and returns its index.
async fn one_leader(cs: &[Candidate]) -> usize {
    let end = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let leading: Vec<usize> = (0..cs.len())
            .filter(|i| cs[*i].leadership.is_leader())
            .collect();
        assert!(leading.len() <= 1, "two leaders");
        if let [i] = leading[..] {
            return i;
        }
        assert!(tokio::time::Instant::now() < end, "no leader elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn eventually_leads(c: &Candidate) {
    tokio::time::timeout(EVENTUALLY, c.leadership.wait_until_leader())
        .await
        .unwrap_or_else(|_| panic!("{} never became leader", c.id));
    assert!(c.leadership.is_leader());
}

#[tokio::test(flavor = "multi_thread")]
async fn two_candidates_elect_exactly_one_leader_and_the_other_stands_by() {
    let (_s, c) = setup().await;
    let cs = [candidate(&c, cfg("a")), candidate(&c, cfg("b"))];
    let first = one_leader(&cs).await;
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some(cs[first].id));
    assert_eq!(transitions(&l), 0);
    assert_eq!(l.spec.as_ref().unwrap().lease_duration_seconds, Some(2));
    // For several retry periods and beyond a lease duration, the same one leads, alone,
    // renewing the Lease.
    let renewed = l.spec.as_ref().unwrap().renew_time.clone();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            cs[first].leadership.is_leader(),
            "the leader lost the lease"
        );
        assert!(!cs[1 - first].leadership.is_leader(), "two leaders");
    }
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some(cs[first].id));
    assert_ne!(
        l.spec.as_ref().unwrap().renew_time,
        renewed,
        "never renewed"
    );
    assert_eq!(transitions(&l), 0);
    for x in &cs {
        x.shutdown.cancel();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_leader_is_replaced_after_the_lease_expires() {
    let (_s, c) = setup().await;
    let mut cs = vec![candidate(&c, cfg("a")), candidate(&c, cfg("b"))];
    let first = one_leader(&cs).await;
    let dead = cs.remove(first);
    // A kill: the task is aborted, nothing is released.
    dead.task.abort();
    let _ = dead.task.await;
    assert!(
        !dead.leadership.is_leader(),
        "an ended election still reads leader"
    );
    assert!(!dead.leadership.wait_until_leader().await);
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some(dead.id), "released on abort");
    let standby = &cs[0];
    eventually_leads(standby).await;
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some(standby.id));
    assert_eq!(transitions(&l), 1);
    standby.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_shutdown_releases_the_lease_and_the_standby_takes_over() {
    let (_s, c) = setup().await;
    // A lease far longer than the deadline below: the standby can only take over in time
    // because the leader released the Lease.
    let long = |id| LeaderConfig {
        lease_duration: Duration::from_secs(600),
        ..cfg(id)
    };
    let mut cs = vec![candidate(&c, long("a")), candidate(&c, long("b"))];
    let first = one_leader(&cs).await;
    let old = cs.remove(first);
    let mut watch = old.leadership.clone();
    old.shutdown.cancel();
    tokio::time::timeout(EVENTUALLY, old.task)
        .await
        .expect("the election task did not stop")
        .unwrap();
    assert!(!old.leadership.is_leader());
    // The change to "not leader" was published (then the channel closed).
    let mut seen = Vec::new();
    while let Some(v) = watch.changed().await {
        seen.push(v);
    }
    assert_eq!(seen, [false]);
    let standby = &cs[0];
    tokio::time::timeout(
        Duration::from_secs(30),
        standby.leadership.wait_until_leader(),
    )
    .await
    .expect("the standby did not take over a released Lease");
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some(standby.id));
    assert_eq!(transitions(&l), 1);
    standby.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_that_cannot_renew_steps_down_and_recovers() {
    let (s, c) = setup().await;
    let a = candidate(&c, cfg("a"));
    eventually_leads(&a).await;
    // Every Lease write fails with 500 from now on.
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    for m in ["PUT", "POST", "PATCH"] {
        s.controls().fail_next(
            RequestMatch::path(leases.clone()).method(m),
            u32::MAX,
            Fault::internal_error(),
        );
    }
    tokio::time::timeout(EVENTUALLY, a.leadership.lost())
        .await
        .expect("the leader never stepped down");
    assert!(!a.leadership.is_leader());
    // Its renewals really failed: the Lease still names it, unchanged since the faults.
    assert_eq!(holder(&lease(&c).await).as_deref(), Some("a"));
    // Still down a few retry periods later.
    tokio::time::sleep(Duration::from_millis(750)).await;
    assert!(!a.leadership.is_leader());
    s.controls().clear();
    eventually_leads(&a).await;
    let l = lease(&c).await;
    assert_eq!(holder(&l).as_deref(), Some("a"));
    // The holder never changed.
    assert_eq!(transitions(&l), 0);
    a.shutdown.cancel();
    tokio::time::timeout(EVENTUALLY, a.task)
        .await
        .unwrap()
        .unwrap();
    // Released on shutdown.
    let l = lease(&c).await;
    assert_eq!(holder(&l), None);
    assert_eq!(l.spec.as_ref().unwrap().lease_duration_seconds, Some(1));
}

/// A sole leader that renews rarely (nothing it does races the test's own writes), once it
/// leads.
async fn rare_renewer(c: &Client) -> Candidate {
    let slow = LeaderConfig {
        lease_duration: Duration::from_secs(600),
        retry_period: Duration::from_secs(600),
        ..cfg("a")
    };
    let a = candidate(c, slow);
    eventually_leads(&a).await;
    a
}

/// The Lease written behind the leader's back, changed by `f`.
async fn rewrite_lease(
    c: &Client,
    f: impl FnOnce(&mut k8s_openapi::api::coordination::v1::LeaseSpec),
) {
    let mut l = lease(c).await;
    if let Some(spec) = l.spec.as_mut() {
        f(spec);
    }
    Api::<Lease>::namespaced(c.clone(), NS)
        .replace(leader::DEFAULT_LEASE_NAME, &PostParams::default(), &l)
        .await
        .unwrap();
}

/// Shut `a` down gracefully and wait for its election task to end.
async fn shut_down(a: Candidate) {
    a.shutdown.cancel();
    tokio::time::timeout(EVENTUALLY, a.task)
        .await
        .expect("the election task did not stop")
        .unwrap();
}

/// A renewal the server stored but whose answer the shutdown cut off leaves the Lease newer
/// than the leader's last write: its release conflicts, and is made again on the Lease as it
/// is, since the leader still holds it.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_after_a_renewal_it_did_not_see_still_releases() {
    let (_s, c) = setup().await;
    let a = rare_renewer(&c).await;
    // The unseen renewal: the same holder, a new renewTime and resourceVersion.
    rewrite_lease(&c, |spec| {
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    })
    .await;
    shut_down(a).await;
    assert_eq!(holder(&lease(&c).await), None, "released");
}

/// Someone else took the Lease meanwhile: the leader's release leaves it alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_never_clears_another_holder() {
    let (_s, c) = setup().await;
    let a = rare_renewer(&c).await;
    rewrite_lease(&c, |spec| spec.holder_identity = Some("intruder".into())).await;
    shut_down(a).await;
    assert_eq!(holder(&lease(&c).await).as_deref(), Some("intruder"));
}
