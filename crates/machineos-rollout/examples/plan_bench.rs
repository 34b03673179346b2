//! Planning a rollout of 5 000 nodes (the README's figure): a pool across 3 zones with
//! `maxUnavailable: 10%`, 2 % of the nodes NotReady, one canary MachineImage; the median of
//! 21 runs of `decide` and of `plan`. Run with `cargo run --release -p machineos-rollout
//! --example plan_bench [NODES]`.

use std::collections::BTreeMap;
use std::time::Instant;

use machineos_rollout::vocab::{self, NodeState};
use machineos_rollout::{
    ImageTarget, MachineImageObserved, MaxUnavailable, NodeAnnotations, NodeObserved, Observed,
    PoolImage, PoolObserved, Selector, decide, plan,
};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    let role: BTreeMap<String, String> =
        [("node-role.kubernetes.io/worker".to_owned(), String::new())].into();
    let old = format!("reg/os@sha256:{}", "0".repeat(64));
    let new = format!("reg/os@sha256:{}", "1".repeat(64));
    let o = Observed {
        pools: vec![PoolObserved {
            name: "worker".into(),
            node_selector: Selector::new("spec.nodeSelector", &role, &[]).ok(),
            config: "rendered-worker-new".into(),
            image: PoolImage::Built(new),
            paused: false,
            max_unavailable: Some(MaxUnavailable::Percent(10)),
            min_ready_seconds: 30,
            max_staging: None,
            conditions: BTreeMap::new(),
            gate: Ok(None),
            canary: None,
            rollback_pool: false,
        }],
        nodes: (0..n)
            .map(|i| {
                let mut labels = role.clone();
                labels.insert(vocab::ZONE_LABEL.into(), format!("zone-{}", i % 3));
                NodeObserved {
                    name: format!("node-{i:05}"),
                    labels,
                    created: (i as i64 * 7919) % 100_000,
                    ready: i % 50 != 0,
                    ready_since: Some(0),
                    unschedulable: false,
                    annotations: NodeAnnotations {
                        current_config: Some("rendered-worker-old".into()),
                        desired_config: Some("rendered-worker-old".into()),
                        current_image: Some(old.clone()),
                        desired_image: Some(old.clone()),
                        state: Some(NodeState::Done),
                        ..Default::default()
                    },
                    drain_blocked: None,
                    move_plan: None,
                    health: None,
                }
            })
            .collect(),
        machine_images: vec![MachineImageObserved {
            name: "canary".into(),
            image: format!("reg/os@sha256:{}", "2".repeat(64)),
            target: ImageTarget::Node("node-00001".into()),
            pull_secret: None,
            conditions: BTreeMap::new(),
        }],
        image_manifests: Default::default(),
        controller_node: Some("node-00002".into()),
        quarantine: Default::default(),
    };
    let median = |f: &dyn Fn() -> usize| {
        let mut times: Vec<f64> = (0..21)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let d = median(&|| decide(&o, 1_000_000).node_patches.len());
    let p = median(&|| plan(&o, "worker", 1_000_000).map_or(0, |p| p.batches.len()));
    let batches = plan(&o, "worker", 1_000_000).map_or(0, |p| p.batches.len());
    println!("{n} nodes: decide {d:.1} ms, plan {p:.1} ms (median of 21; {batches} batches)");
}
