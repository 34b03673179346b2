//! `machineos rollout status`, row by row: a pool moving, held back, halted, done.

mod common;

use common::*;
use machineos_rollout::vocab::NodeState;
use machineos_rollout::{decide, status};

#[test]
fn a_rollout_from_start_to_done() {
    let mut o = cluster(3, None);
    o.pools[0].min_ready_seconds = 60;
    let s = status(&o, "worker", NOW).unwrap();
    assert_eq!((s.total, s.updated, s.done, s.halted), (3, 0, false, false));
    assert_eq!(s.image.as_deref(), Some(NEW));

    // The first node targeted: staging (pulling ahead), then draining by the agent's step.
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    let s = status(&o, "worker", NOW).unwrap();
    assert_eq!(s.moving.len(), 1, "{s:?}");
    let first = s.moving[0].0.clone();
    assert_eq!(s.moving[0].1, "staging");
    let n = o.nodes.iter_mut().find(|n| n.name == first).unwrap();
    n.annotations.state = Some(NodeState::Working);
    n.annotations.step = Some("draining".into());
    assert_eq!(
        status(&o, "worker", NOW).unwrap().moving,
        [(first.clone(), "draining")]
    );

    // On the image, soaking; then available: one updated, nothing moving.
    let n = o.nodes.iter_mut().find(|n| n.name == first).unwrap();
    n.annotations.step = None;
    finish(n, NOW);
    let s = status(&o, "worker", NOW + 10).unwrap();
    assert_eq!(s.updated, 1);
    assert_eq!(s.moving, [(first.clone(), "soaking")]);
    let s = status(&o, "worker", NOW + 61).unwrap();
    assert!(s.moving.is_empty(), "{s:?}");

    // Every node through: done.
    let mut t = NOW + 100;
    for _ in 0..10 {
        let d = decide(&o, t);
        apply(&mut o, &d);
        for n in &mut o.nodes {
            if n.annotations.desired_image.as_deref() == Some(NEW)
                && n.annotations.current_image.as_deref() != Some(NEW)
            {
                finish(n, t);
            }
        }
        t += 100;
    }
    let s = status(&o, "worker", t).unwrap();
    assert!(s.done, "{s:?}");
    assert_eq!((s.updated, s.total), (3, 3));
}

#[test]
fn held_nodes_say_why_and_a_failed_node_halts() {
    let mut o = cluster(3, Some(machineos_rollout::MaxUnavailable::Count(2)));
    o.nodes[2].drain_blocked = Some("pod apps/web-0: PodDisruptionBudget web".into());
    o.nodes[2].unschedulable = true;
    let s = status(&o, "worker", NOW).unwrap();
    assert!(
        s.held
            .iter()
            .any(|h| h.node == "n02" && h.reason.starts_with("drain blocked: pod apps/web-0")),
        "{s:?}"
    );
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    let target = o
        .nodes
        .iter()
        .find(|n| n.annotations.desired_image.as_deref() == Some(NEW))
        .unwrap()
        .name
        .clone();
    let n = o.nodes.iter_mut().find(|n| n.name == target).unwrap();
    n.annotations.state = Some(NodeState::Degraded);
    n.annotations.reason = Some("booted the wrong image".into());
    let s = status(&o, "worker", NOW + 1).unwrap();
    assert!(s.halted, "{s:?}");
    assert!(!s.done);
    assert!(
        s.held
            .iter()
            .any(|h| h.node == target && h.reason == "Degraded: booted the wrong image"),
        "{s:?}"
    );
}

#[test]
fn a_pool_that_builds_nothing_has_no_status() {
    let mut o = cluster(1, None);
    o.pools[0].image = machineos_rollout::PoolImage::NotLayered;
    assert!(status(&o, "worker", NOW).is_err());
    assert!(status(&o, "nope", NOW).is_err());
}
