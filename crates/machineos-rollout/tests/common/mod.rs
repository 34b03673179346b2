//! Fixtures shared by the rollout's tests: a worker pool, nodes on the old config and
//! image, and what an agent does to a node (apply a patch, finish an update).
#![allow(dead_code)]

use std::collections::BTreeMap;

use machineos_rollout::vocab::{self, NodeState};
use machineos_rollout::{
    MaxUnavailable, NodeAnnotations, NodeObserved, Observed, PoolImage, PoolObserved, Selector,
};

pub const OLD: &str =
    "reg/os@sha256:0000000000000000000000000000000000000000000000000000000000000000";
pub const NEW: &str =
    "reg/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
pub const CANARY: &str =
    "reg/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";
pub const NOW: i64 = 1_000_000;

pub fn worker_selector() -> Selector {
    let ml: BTreeMap<String, String> =
        [("node-role.kubernetes.io/worker".to_owned(), String::new())].into();
    Selector::new("spec.nodeSelector", &ml, &[]).unwrap()
}

pub fn pool(max: Option<MaxUnavailable>, image: PoolImage) -> PoolObserved {
    PoolObserved {
        name: "worker".into(),
        node_selector: Some(worker_selector()),
        config: "rendered-worker-new".into(),
        image,
        paused: false,
        max_unavailable: max,
        min_ready_seconds: 0,
        max_staging: None,
        conditions: BTreeMap::new(),
        gate: Ok(None),
        canary: None,
        rollback_pool: false,
    }
}

/// A worker on the old config and image, Done and Ready for long.
pub fn node(name: &str, zone: Option<&str>, created: i64) -> NodeObserved {
    let mut labels: BTreeMap<String, String> =
        [("node-role.kubernetes.io/worker".to_owned(), String::new())].into();
    if let Some(z) = zone {
        labels.insert(vocab::ZONE_LABEL.into(), z.into());
    }
    NodeObserved {
        name: name.into(),
        labels,
        created,
        ready: true,
        ready_since: Some(0),
        unschedulable: false,
        annotations: NodeAnnotations {
            current_config: Some("rendered-worker-old".into()),
            desired_config: Some("rendered-worker-old".into()),
            current_image: Some(OLD.into()),
            desired_image: Some(OLD.into()),
            state: Some(NodeState::Done),
            live_apply: true,
            ..Default::default()
        },
        drain_blocked: None,
        move_plan: None,
        health: None,
    }
}

pub fn cluster(n: usize, max: Option<MaxUnavailable>) -> Observed {
    Observed {
        pools: vec![pool(max, PoolImage::Built(NEW.into()))],
        nodes: (0..n)
            .map(|i| {
                node(
                    &format!("n{i:02}"),
                    Some(["b", "a", "c"][i % 3]),
                    100 - i as i64,
                )
            })
            .collect(),
        machine_images: vec![],
        image_manifests: Default::default(),
        controller_node: None,
        quarantine: Default::default(),
    }
}

/// Move a node onto what it is desired to run (as its agent would) at `at`.
pub fn finish(n: &mut NodeObserved, at: i64) {
    let a = &mut n.annotations;
    a.current_config = a.desired_config.clone();
    a.current_image = a.desired_image.clone();
    a.state = Some(NodeState::Done);
    n.ready = true;
    n.ready_since = Some(at);
}

pub fn apply(o: &mut Observed, d: &machineos_rollout::Decision) {
    for p in &d.node_patches {
        let n = o.nodes.iter_mut().find(|n| n.name == p.node).unwrap();
        let mut map = BTreeMap::new();
        let a = &n.annotations;
        for (k, v) in [
            (vocab::CURRENT_CONFIG, &a.current_config),
            (vocab::DESIRED_CONFIG, &a.desired_config),
            (vocab::CURRENT_IMAGE, &a.current_image),
            (vocab::DESIRED_IMAGE, &a.desired_image),
            (vocab::REASON, &a.reason),
            (vocab::STAGE_IMAGE, &a.stage_image),
            (vocab::STAGED_IMAGE, &a.staged_image),
            (vocab::PULL_SECRET, &a.pull_secret),
            (vocab::DRIVEN_BY, &a.driven_by),
            (vocab::IMAGE_MANIFESTS, &a.image_manifests),
            (machineos_disruption::NODE_DISRUPTION, &a.disruption),
            (vocab::HEALTH_GATE, &a.health_gate),
            (vocab::ROLLED_BACK, &a.rolled_back_raw),
        ] {
            if let Some(v) = v {
                map.insert(k.to_owned(), v.clone());
            }
        }
        if let Some(s) = a.state {
            map.insert(vocab::STATE.to_owned(), s.as_str().to_owned());
        }
        if a.live_apply {
            map.insert(
                vocab::AGENT_FEATURES.to_owned(),
                vocab::FEATURE_LIVE_APPLY.to_owned(),
            );
        }
        for (k, v) in &p.annotations {
            match v {
                Some(v) => map.insert((*k).to_owned(), v.clone()),
                None => map.remove(*k),
            };
        }
        n.annotations = NodeAnnotations::from_map(&map);
    }
}
