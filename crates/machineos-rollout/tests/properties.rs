//! Properties of the rollout over random clusters and random agent timings: never more than
//! `maxUnavailable` members of a pool unavailable at any step (MachineImage moves included),
//! a node is targeted at most once per target (so drained at most once), and every node is
//! eventually updated when none fails.

mod common;
use common::*;

use std::collections::{BTreeMap, BTreeSet};

use machineos_rollout::decide as d_;
use machineos_rollout::vocab;
use machineos_rollout::{ImageTarget, MachineImageObserved, MaxUnavailable, Observed, decide};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Scenario {
    nodes: usize,
    max: Option<MaxUnavailable>,
    min_ready: i64,
    canary: Option<usize>,
    /// Nodes that start Degraded on the old image (bit i: node i).
    degraded: u64,
    /// Nodes that start just Ready (soaking), e.g. all of a freshly installed pool.
    fresh: u64,
    /// Per step: which in-flight nodes finish (by a rolling seed) and how far time moves.
    steps: Vec<(u64, i64)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        1usize..60,
        prop_oneof![
            Just(None),
            (0i64..8).prop_map(|c| Some(MaxUnavailable::Count(c))),
            (0i64..60).prop_map(|p| Some(MaxUnavailable::Percent(p))),
        ],
        prop_oneof![Just(0i64), 1i64..120],
        proptest::option::of(0usize..60),
        prop_oneof![3 => Just(0u64), 1 => any::<u64>().prop_map(|b| b & b.rotate_left(7) & b.rotate_left(13))],
        prop_oneof![2 => Just(0u64), 1 => Just(u64::MAX), 1 => any::<u64>()],
        proptest::collection::vec((any::<u64>(), 0i64..90), 400),
    )
        .prop_map(|(nodes, max, min_ready, canary, degraded, fresh, steps)| Scenario {
            nodes,
            max,
            min_ready,
            canary: canary.filter(|c| *c < nodes),
            degraded,
            fresh,
            steps,
        })
}

fn run(s: &Scenario) -> Result<(), TestCaseError> {
    let mut o: Observed = cluster(s.nodes, s.max);
    o.pools[0].min_ready_seconds = s.min_ready;
    if let Some(c) = s.canary {
        o.machine_images.push(MachineImageObserved {
            name: "canary".into(),
            image: CANARY.into(),
            target: ImageTarget::Node(format!("n{c:02}")),
            pull_secret: None,
            conditions: BTreeMap::new(),
        });
    }
    let mut was_degraded = BTreeSet::new();
    for (i, n) in o.nodes.iter_mut().enumerate() {
        if s.degraded >> (i % 64) & 1 == 1 {
            n.annotations.state = Some(machineos_rollout::vocab::NodeState::Degraded);
            was_degraded.insert(n.name.clone());
        }
        if s.fresh >> (i % 64) & 1 == 1 {
            n.ready_since = Some(NOW);
        }
    }
    // Nodes already unavailable may be moved without a slot: the bound is the limit or what
    // was unavailable to begin with, whichever is larger.
    let initially = o
        .nodes
        .iter()
        .filter(|n| d_::unavailable(n, NOW, s.min_ready).is_some())
        .count();
    let limit = MaxUnavailable::scaled(s.max, s.nodes).max(initially);
    let mut now = NOW;
    let mut targeted: BTreeMap<(String, String), u32> = BTreeMap::new();
    for (seed, dt) in &s.steps {
        let d = decide(&o, now);
        for p in &d.node_patches {
            if let Some(Some(img)) = p.annotations.get(vocab::DESIRED_IMAGE) {
                *targeted.entry((p.node.clone(), img.clone())).or_default() += 1;
            }
        }
        apply(&mut o, &d);
        let unavailable = o
            .nodes
            .iter()
            .filter(|n| d_::unavailable(n, now, s.min_ready).is_some())
            .count();
        prop_assert!(
            unavailable <= limit,
            "{unavailable} unavailable > {limit} at {now}"
        );
        // And the rollout itself never disrupts more than maxUnavailable at once (a node
        // Degraded to begin with holds a slot of its own).
        let moving = o
            .nodes
            .iter()
            .filter(|n| d_::in_flight(n) && !was_degraded.contains(&n.name))
            .count();
        let max = MaxUnavailable::scaled(s.max, s.nodes);
        prop_assert!(moving <= max, "{moving} moving > {max} at {now}");
        // Agents: some in-flight nodes finish now.
        let mut bits = *seed;
        for n in o.nodes.iter_mut() {
            if d_::in_flight(n) {
                if bits & 1 == 1 {
                    finish(n, now);
                }
                bits = bits.rotate_right(1);
            }
        }
        now += dt;
    }
    // Drained at most once per target.
    for (k, times) in &targeted {
        prop_assert_eq!(*times, 1, "{:?} targeted {} times", k, times);
    }
    // Finish what is in flight, let everything soak, and run to the end.
    for _ in 0..(s.nodes * 2 + 4) {
        let d = decide(&o, now);
        apply(&mut o, &d);
        for n in o.nodes.iter_mut().filter(|n| d_::in_flight(n)) {
            finish(n, now);
        }
        now += s.min_ready + 1;
    }
    let d = decide(&o, now);
    let want: BTreeSet<(String, &str)> = o
        .nodes
        .iter()
        .map(|n| {
            let canary = s.canary.is_some_and(|c| n.name == format!("n{c:02}"));
            (n.name.clone(), if canary { CANARY } else { NEW })
        })
        .collect();
    let got: BTreeSet<(String, &str)> = o
        .nodes
        .iter()
        .map(|n| {
            let img = n.annotations.current_image.as_deref().unwrap_or("");
            (
                n.name.clone(),
                if img == CANARY {
                    CANARY
                } else if img == NEW {
                    NEW
                } else {
                    "old"
                },
            )
        })
        .collect();
    prop_assert_eq!(got, want);
    // Every node counts as updated but a canary that kept a config other than the pool's
    // (a MachineImage moves the image only): the pool's count says what nodes run.
    let config = o.pools[0].config.clone();
    let lagging = o
        .nodes
        .iter()
        .filter(|n| {
            n.annotations.current_image.as_deref() == Some(CANARY)
                && n.annotations.current_config.as_deref() != Some(config.as_str())
        })
        .count();
    prop_assert_eq!(d.pools[0].counts.updated, (s.nodes - lagging) as i32);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn never_beyond_the_limit_and_every_node_updated(s in scenario()) {
        run(&s)?;
    }
}
