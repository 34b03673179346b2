//! The rollout's side of the health gate: the gate handed with each move, canaries first,
//! a rolled-back node re-targeted at what it runs, the image it rolled back from quarantined
//! (nothing moves to it or pulls it, the pool says why), and the ways out — a new image, or
//! the quarantine lifted.

mod common;

use common::*;
use machineos_rollout::decide::{self as d_, condition, targeted};
use machineos_rollout::health::{Check, Gate, RolledBack};
use machineos_rollout::observed::{Canary, QuarantineObserved};
use machineos_rollout::vocab::{self, NodeState};
use machineos_rollout::{MaxUnavailable, Observed, PoolImage, decide};

fn gated(n: usize, max: Option<MaxUnavailable>) -> Observed {
    let mut o = cluster(n, max);
    o.pools[0].gate = Ok(Some(Gate {
        timeout_seconds: 120,
        soak_seconds: 0,
        daemon_sets: vec!["kube-system/cni".into()],
        conditions: Default::default(),
    }));
    o.quarantine.insert(
        NEW.into(),
        QuarantineObserved {
            name: "worker-new".into(),
            ..Default::default()
        },
    );
    o
}

/// What the agent leaves after rolling `node` back from NEW.
fn roll_back(o: &mut Observed, node: &str) {
    let n = o.nodes.iter_mut().find(|n| n.name == node).unwrap();
    let r = RolledBack {
        image: NEW.into(),
        config: "rendered-worker-new".into(),
        to: OLD.into(),
        check: Check::NodeReady,
        evidence: "Ready=False (KubeletNotReady)".into(),
        at: NOW * 1000,
    };
    n.annotations.state = Some(NodeState::Done);
    n.annotations.rolled_back_raw = Some(r.to_annotation());
    n.annotations.rolled_back = Some(r);
    n.ready = true;
}

fn cond<'a>(d: &'a machineos_rollout::Decision, t: &str) -> &'a d_::Condition {
    d.pools[0].conditions.iter().find(|c| c.type_ == t).unwrap()
}

#[test]
fn each_move_carries_the_pools_gate_and_none_without_one() {
    let o = gated(3, None);
    let d = decide(&o, NOW);
    let p = &d
        .node_patches
        .iter()
        .find(|p| p.annotations.contains_key(vocab::DESIRED_IMAGE))
        .unwrap();
    let g = p
        .annotations
        .get(vocab::HEALTH_GATE)
        .cloned()
        .flatten()
        .unwrap();
    assert_eq!(Gate::parse(&g).map(|g| g.timeout_seconds), Some(120));
    let d = decide(&cluster(3, None), NOW);
    assert!(
        d.node_patches
            .iter()
            .all(|p| !p.annotations.contains_key(vocab::HEALTH_GATE))
    );
    // A gate whose annotations cannot be read moves nothing, and says why.
    let mut o = gated(3, None);
    o.pools[0].gate = Err(machineos_rollout::health::GateError {
        key: vocab::HEALTH_TIMEOUT,
        message: "\"soon\" is not a duration".into(),
    });
    let d = decide(&o, NOW);
    assert!(targeted(&d).is_empty());
    assert!(
        cond(&d, condition::UPDATING)
            .message
            .contains("health gate"),
        "{:?}",
        cond(&d, condition::UPDATING)
    );
}

/// The whole loop on 12 nodes, `maxUnavailable: 3`: the first batch takes NEW, its nodes
/// roll back; NEW is quarantined, no other node is targeted or pulls it, the rolled-back
/// nodes go back to OLD, the pool is Degraded naming the image and the check; then a new
/// image moves all 12.
#[test]
fn a_rollback_quarantines_the_image_and_a_new_image_resumes() {
    let mut o = gated(12, Some(MaxUnavailable::Count(3)));
    let d = decide(&o, NOW);
    let first = targeted(&d);
    assert_eq!(first.len(), 3);
    apply(&mut o, &d);
    // The first batch boots NEW, fails the gate and is rolled back.
    for n in &first {
        roll_back(&mut o, n);
    }
    let d = decide(&o, NOW + 300);
    // Quarantined: the MachineOSImage says so, the pool is Degraded and names the image and
    // the check, an Event once, the image report RolloutFailed.
    let q = &d.quarantines[0];
    assert_eq!((q.name.as_str(), q.condition.status), ("worker-new", true));
    assert!(
        q.condition.message.contains("node Ready"),
        "{}",
        q.condition.message
    );
    assert!(cond(&d, condition::DEGRADED).status);
    let deg = cond(&d, condition::NODE_DEGRADED);
    assert!(
        deg.status
            && deg.reason == "ImageQuarantined"
            && deg.message.contains(NEW)
            && deg.message.contains("lift-quarantine"),
        "{deg:?}"
    );
    assert_eq!(
        d.events
            .iter()
            .filter(|e| e.reason == d_::reason::IMAGE_QUARANTINED)
            .count(),
        1
    );
    let (_, img_conds) = d.pools[0].image.as_ref().unwrap();
    let failed = img_conds
        .iter()
        .find(|c| c.type_ == condition::ROLLOUT_FAILED)
        .unwrap();
    assert_eq!((failed.status, failed.reason), (true, "Quarantined"));
    // Nothing else is targeted; nobody is told to pull NEW any more.
    for p in &d.node_patches {
        if first.contains(&p.node) {
            // Back to what it runs, without the plan and the gate.
            assert_eq!(
                p.annotations.get(vocab::DESIRED_IMAGE),
                Some(&Some(OLD.to_owned())),
                "{p:?}"
            );
            assert_eq!(
                p.annotations.get(vocab::DESIRED_CONFIG),
                Some(&Some("rendered-worker-old".to_owned()))
            );
            assert_eq!(p.annotations.get(vocab::HEALTH_GATE), Some(&None));
        } else {
            assert!(!p.annotations.contains_key(vocab::DESIRED_IMAGE), "{p:?}");
        }
        assert_ne!(
            p.annotations.get(vocab::STAGE_IMAGE),
            Some(&Some(NEW.to_owned()))
        );
    }
    apply(&mut o, &d);
    // The quarantine recorded: no second Event, still nothing moves, however long.
    o.quarantine.get_mut(NEW).unwrap().quarantined = Some(q.condition.message.clone());
    let d = decide(&o, NOW + 100_000);
    assert!(targeted(&d).is_empty());
    assert!(
        d.events
            .iter()
            .all(|e| e.reason != d_::reason::IMAGE_QUARANTINED)
    );
    assert!(
        o.nodes
            .iter()
            .all(|n| n.annotations.stage_image.as_deref() != Some(NEW)),
        "no node pulls a quarantined image"
    );
    // A new image (a fixed config built): not quarantined; all 12 move, the rolled-back ones
    // too, batch by batch.
    const FIXED: &str =
        "reg/os@sha256:3333333333333333333333333333333333333333333333333333333333333333";
    o.pools[0].image = PoolImage::Built(FIXED.into());
    o.pools[0].config = "rendered-worker-fixed".into();
    let mut t = NOW + 200_000;
    for _ in 0..10 {
        let d = decide(&o, t);
        apply(&mut o, &d);
        for n in &mut o.nodes {
            if n.annotations.desired_image.as_deref() == Some(FIXED) {
                finish(n, t);
                // The agent drops the record when it finishes an update.
                n.annotations.rolled_back = None;
                n.annotations.rolled_back_raw = None;
            }
        }
        t += 1000;
    }
    assert!(
        o.nodes
            .iter()
            .all(|n| n.annotations.current_image.as_deref() == Some(FIXED)),
        "{:?}",
        o.nodes
            .iter()
            .map(|n| n.annotations.current_image.clone())
            .collect::<Vec<_>>()
    );
    let d = decide(&o, t);
    assert!(cond(&d, condition::UPDATED).status);
}

#[test]
fn lifting_the_quarantine_clears_the_records_and_the_nodes_move_again() {
    let mut o = gated(4, Some(MaxUnavailable::Count(1)));
    let d = decide(&o, NOW);
    let first = targeted(&d).into_iter().next().unwrap();
    apply(&mut o, &d);
    roll_back(&mut o, &first);
    let d = decide(&o, NOW + 10);
    apply(&mut o, &d);
    let q = o.quarantine.get_mut(NEW).unwrap();
    q.quarantined = Some("node rolled back".into());
    q.lift = true;
    let d = decide(&o, NOW + 20);
    let q = &d.quarantines[0];
    assert!(q.lifted && !q.condition.status && q.condition.reason == "QuarantineLifted");
    // The record goes and the node is a candidate again at once: in the same patch (its
    // agent takes the record's removal as the lift: it starts the update afresh).
    let p = d.node_patches.iter().find(|p| p.node == first).unwrap();
    assert_eq!(p.annotations.get(vocab::ROLLED_BACK), Some(&None));
    assert_eq!(
        p.annotations.get(vocab::DESIRED_IMAGE),
        Some(&Some(NEW.to_owned()))
    );
    assert_eq!(targeted(&d).into_iter().collect::<Vec<_>>(), [first]);
}

/// Canaries move first and alone; the rest waits until each canary runs the image and is
/// available past the soak; a canary that rolls back quarantines the image before any other
/// node moved.
#[test]
fn canaries_go_first_and_a_failed_canary_stops_everyone() {
    let mut o = gated(6, Some(MaxUnavailable::Count(3)));
    o.pools[0].min_ready_seconds = 60;
    o.pools[0].canary = Some(Canary::Nodes(vec!["n04".into()]));
    let d = decide(&o, NOW);
    assert_eq!(targeted(&d).into_iter().collect::<Vec<_>>(), ["n04"]);
    apply(&mut o, &d);
    // Mid-update and soaking: still only the canary.
    assert!(targeted(&decide(&o, NOW + 10)).is_empty());
    let n = o.nodes.iter_mut().find(|n| n.name == "n04").unwrap();
    finish(n, NOW + 20);
    assert!(targeted(&decide(&o, NOW + 50)).is_empty(), "soaking");
    assert_eq!(
        targeted(&decide(&o, NOW + 90)).len(),
        3,
        "proven: the rest, 3 at a time"
    );
    // Count: the first in rollout order; a failed one quarantines before anyone else moves.
    let mut o = gated(6, Some(MaxUnavailable::Count(3)));
    o.pools[0].canary = Some(Canary::Count(2));
    let d = decide(&o, NOW);
    let canaries = targeted(&d);
    assert_eq!(canaries.len(), 2);
    apply(&mut o, &d);
    let c = canaries.iter().next().unwrap().clone();
    roll_back(&mut o, &c);
    let d = decide(&o, NOW + 100);
    assert!(
        targeted(&d).iter().all(|n| n == &c),
        "only the rolled-back one, back to OLD"
    );
    assert!(d.quarantines[0].condition.status);
    assert_eq!(Canary::parse("0"), None);
    assert_eq!(
        Canary::parse(" a, b "),
        Some(Canary::Nodes(vec!["a".into(), "b".into()]))
    );
}

#[test]
fn rollback_policy_pool_moves_the_quarantined_images_nodes_back_within_the_pools_limit() {
    let mut o = gated(12, Some(MaxUnavailable::Count(3)));
    // The first batch passes its gate and runs NEW; the second fails and is rolled back.
    let d = decide(&o, NOW);
    let passed = targeted(&d);
    apply(&mut o, &d);
    for n in &mut o.nodes {
        if passed.contains(&n.name) {
            finish(n, NOW);
        }
    }
    let d = decide(&o, NOW + 1000);
    let failed = targeted(&d);
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|n| !passed.contains(n)));
    apply(&mut o, &d);
    for n in &failed {
        roll_back(&mut o, n);
    }
    // The rolled-back nodes are re-targeted at what they run; then, with `node` (the
    // default), the nodes that passed stay on NEW.
    let d = decide(&o, NOW + 2000);
    assert_eq!(targeted(&d), failed);
    apply(&mut o, &d);
    let d = decide(&o, NOW + 2500);
    assert!(targeted(&d).is_empty(), "{:?}", targeted(&d));
    // `pool`, the image before known: they go back to it, as a rollout (3 at a time, gated).
    o.pools[0].rollback_pool = true;
    o.quarantine.get_mut(NEW).unwrap().previous = Some(machineos_rollout::observed::Previous {
        image: OLD.into(),
        config: "rendered-worker-old".into(),
    });
    let d = decide(&o, NOW + 3000);
    let back = targeted(&d);
    assert_eq!(back, passed, "the nodes on NEW, and only they");
    for p in d.node_patches.iter().filter(|p| back.contains(&p.node)) {
        assert_eq!(
            p.annotations.get(vocab::DESIRED_IMAGE),
            Some(&Some(OLD.to_owned()))
        );
        assert_eq!(
            p.annotations.get(vocab::DESIRED_CONFIG),
            Some(&Some("rendered-worker-old".to_owned()))
        );
    }
    let deg = cond(&d, condition::NODE_DEGRADED);
    assert!(
        deg.status
            && deg
                .message
                .contains(&format!("its nodes go back to image {OLD}")),
        "{deg:?}"
    );
    // Back on OLD: nothing more moves.
    apply(&mut o, &d);
    for n in o.nodes.iter().filter(|n| back.contains(&n.name)) {
        assert!(
            n.annotations.health_gate.is_some(),
            "a move back is gated as any: {n:?}"
        );
    }
    for n in &mut o.nodes {
        if back.contains(&n.name) {
            finish(n, NOW + 4000);
        }
    }
    let d = decide(&o, NOW + 5000);
    assert!(targeted(&d).is_empty(), "{:?}", targeted(&d));
    assert!(
        o.nodes
            .iter()
            .all(|n| n.annotations.current_image.as_deref() == Some(OLD))
    );
    // `pool` without a known previous image: said, nothing moves.
    let mut unknown = o.clone();
    unknown.quarantine.get_mut(NEW).unwrap().previous = None;
    let d = decide(&unknown, NOW + 6000);
    assert!(
        cond(&d, condition::NODE_DEGRADED)
            .message
            .contains("the image before it is not known"),
        "{:?}",
        cond(&d, condition::NODE_DEGRADED)
    );
}
