//! The rollout decision, table-driven: capacity with counts and percents and unavailable
//! nodes, zone-then-age order, the controller's node last, pause, the build gate, degraded
//! nodes and the halt, the soak, staging, MachineImages (targets, limits, conflicts,
//! removal), and the plan.

use std::collections::BTreeMap;

mod common;
use common::*;

use machineos_rollout::decide::{self as d_, condition, reason};
use machineos_rollout::vocab::{self, NodeState};
use machineos_rollout::{
    ImageTarget, MachineImageObserved, MaxUnavailable, NodeObserved, Observed, PoolImage,
    PoolObserved, Selector, decide, plan,
};

fn targeted(o: &Observed) -> Vec<String> {
    decide(o, NOW).pools[0].targeted.clone()
}

#[test]
fn capacity_is_max_unavailable_scaled_down_at_least_one_minus_unavailable() {
    let cases: Vec<(usize, Option<MaxUnavailable>, usize, usize)> = vec![
        // (nodes, maxUnavailable, unavailable beforehand, targeted)
        (10, None, 0, 1),
        (10, Some(MaxUnavailable::Count(3)), 0, 3),
        (10, Some(MaxUnavailable::Count(0)), 0, 1),
        (10, Some(MaxUnavailable::Percent(25)), 0, 2),
        (10, Some(MaxUnavailable::Percent(5)), 0, 1),
        (50, Some(MaxUnavailable::Percent(10)), 0, 5),
        (50, Some(MaxUnavailable::Percent(10)), 2, 3),
        (50, Some(MaxUnavailable::Percent(10)), 5, 0),
        (50, Some(MaxUnavailable::Percent(10)), 7, 0),
        (3, Some(MaxUnavailable::Count(10)), 0, 3),
        // Not silently 1: an invalid value moves nothing.
        (10, Some(MaxUnavailable::Invalid), 0, 0),
    ];
    for (n, max, down, want) in cases {
        let mut o = cluster(n, max);
        for node in o.nodes.iter_mut().rev().take(down) {
            node.ready = false;
        }
        assert_eq!(targeted(&o).len(), want, "{n} nodes, {max:?}, {down} down");
    }
    // And the pool says why.
    let d = decide(&cluster(4, Some(MaxUnavailable::Invalid)), NOW);
    let updating = cond(&d.pools[0].conditions, condition::UPDATING);
    assert!(
        updating.status && updating.message.ends_with(MaxUnavailable::INVALID),
        "{updating:?}"
    );
}

#[test]
fn every_kind_of_unavailable_counts() {
    type Make = fn(&mut NodeObserved);
    let kinds: Vec<(&str, Make)> = vec![
        ("NotReady", |n| n.ready = false),
        ("Cordoned", |n| n.unschedulable = true),
        ("Degraded", |n| {
            n.annotations.state = Some(NodeState::Degraded)
        }),
        ("Updating", |n| {
            n.annotations.state = Some(NodeState::Working)
        }),
        ("Updating", |n| {
            n.annotations.desired_image = Some(CANARY.into())
        }),
        ("Soaking", |n| n.ready_since = Some(NOW - 5)),
    ];
    for (why, f) in kinds {
        let mut o = cluster(4, Some(MaxUnavailable::Count(2)));
        o.pools[0].min_ready_seconds = 30;
        f(&mut o.nodes[3]);
        assert_eq!(d_::unavailable(&o.nodes[3], NOW, 30), Some(why));
        // One slot left; a node Degraded on an older image is moved without taking one.
        let t = targeted(&o);
        let free = why == "Degraded";
        assert_eq!(t.contains(&"n03".to_owned()), free, "{why}: {t:?}");
        assert_eq!(t.iter().filter(|n| *n != "n03").count(), 1, "{why}: {t:?}");
        assert_eq!(decide(&o, NOW).pools[0].counts.unavailable, 1, "{why}");
    }
}

#[test]
fn order_is_zone_then_oldest_then_name_and_the_controller_node_last() {
    let mut o = cluster(6, Some(MaxUnavailable::Count(6)));
    // zones: n00 b, n01 a, n02 c, n03 b, n04 a, n05 c; older = larger index.
    o.nodes.push(node("nozone", None, 0));
    o.pools[0].max_unavailable = Some(MaxUnavailable::Count(7));
    assert_eq!(
        targeted(&o),
        ["n04", "n01", "n03", "n00", "n05", "n02", "nozone"]
    );
    o.controller_node = Some("n04".into());
    assert_eq!(
        targeted(&o),
        ["n01", "n03", "n00", "n05", "n02", "nozone", "n04"]
    );
    o.pools[0].max_unavailable = Some(MaxUnavailable::Count(2));
    assert_eq!(targeted(&o), ["n01", "n03"]);
}

#[test]
fn desired_config_and_image_are_set_together_and_staging_goes_everywhere() {
    let o = cluster(4, None);
    let d = decide(&o, NOW);
    assert_eq!(d.node_patches.len(), 4);
    let first = &d
        .node_patches
        .iter()
        .find(|p| p.node == "n01")
        .unwrap()
        .annotations;
    assert_eq!(
        first[vocab::DESIRED_CONFIG].as_deref(),
        Some("rendered-worker-new")
    );
    assert_eq!(first[vocab::DESIRED_IMAGE].as_deref(), Some(NEW));
    assert_eq!(
        first[vocab::DRIVEN_BY].as_deref(),
        Some("MachineConfigPool/worker")
    );
    for p in &d.node_patches {
        assert_eq!(
            p.annotations[vocab::STAGE_IMAGE].as_deref(),
            Some(NEW),
            "{}",
            p.node
        );
        if p.node != "n01" {
            assert!(
                !p.annotations.contains_key(vocab::DESIRED_IMAGE),
                "{}",
                p.node
            );
            assert!(
                !p.annotations.contains_key(vocab::DESIRED_CONFIG),
                "{}",
                p.node
            );
        }
    }
    assert_eq!(d.events.len(), 1);
    assert_eq!(d.events[0].reason, reason::SET_DESIRED_CONFIG);
    assert!(d.events[0].message.contains("Targeted node n01"));
}

#[test]
fn nothing_moves_before_the_build_succeeded_or_while_paused() {
    let mut o = cluster(4, None);
    o.pools[0].image = PoolImage::Pending("MachineOSBuild worker-abc is Building".into());
    let d = decide(&o, NOW);
    assert!(d.node_patches.is_empty());
    let updating = cond(&d.pools[0].conditions, condition::UPDATING);
    assert!(updating.status);
    assert!(
        updating
            .message
            .contains("waiting for the image: MachineOSBuild worker-abc is Building")
    );
    assert!(d.pools[0].image.is_none());

    let mut o = cluster(4, None);
    o.pools[0].paused = true;
    let d = decide(&o, NOW);
    assert!(d.node_patches.is_empty(), "{:?}", d.node_patches);
    assert!(
        cond(&d.pools[0].conditions, condition::UPDATING)
            .message
            .ends_with("the pool is paused")
    );
}

fn cond<'a>(cs: &'a [d_::Condition], t: &str) -> &'a d_::Condition {
    cs.iter()
        .find(|c| c.type_ == t)
        .unwrap_or_else(|| panic!("no {t} in {cs:?}"))
}

#[test]
fn a_slot_frees_only_after_the_soak() {
    let mut o = cluster(3, None);
    o.pools[0].min_ready_seconds = 60;
    let d = decide(&o, NOW);
    assert_eq!(d_::targeted(&d).len(), 1);
    apply(&mut o, &d);
    let first = o.nodes.iter().position(|n| n.name == "n01").unwrap();
    // Mid-update: nothing else moves.
    assert!(d_::targeted(&decide(&o, NOW)).is_empty());
    finish(&mut o.nodes[first], NOW);
    assert!(
        d_::targeted(&decide(&o, NOW + 59)).is_empty(),
        "still soaking"
    );
    let d = decide(&o, NOW + 60);
    assert_eq!(d.pools[0].targeted, ["n00"]);
    assert_eq!(d.pools[0].counts.updated, 1);
}

#[test]
fn a_failed_node_holds_its_slot_and_halts_the_rollout() {
    let mut o = cluster(10, Some(MaxUnavailable::Count(3)));
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    let failed = o.nodes.iter().position(|n| n.name == "n04").unwrap();
    o.nodes[failed].annotations.state = Some(NodeState::Degraded);
    o.nodes[failed].annotations.reason = Some("booted reg/os@sha256:00…, expected …".into());
    for n in o
        .nodes
        .iter_mut()
        .filter(|n| n.name == "n01" || n.name == "n07")
    {
        finish(n, 0);
    }
    let d = decide(&o, NOW);
    assert!(d.pools[0].halted);
    assert!(d_::targeted(&d).is_empty(), "the failure does not spread");
    let nd = cond(&d.pools[0].conditions, condition::NODE_DEGRADED);
    assert!(nd.status);
    assert!(
        nd.message.starts_with("Node n04 is reporting: \"booted"),
        "{}",
        nd.message
    );
    assert!(
        nd.message
            .contains("rollout halted: 7 node(s) not yet targeted"),
        "{}",
        nd.message
    );
    assert!(
        nd.message.ends_with("re-targets n04"),
        "the way out is said: {}",
        nd.message
    );
    assert!(cond(&d.pools[0].conditions, condition::DEGRADED).status);
    assert_eq!(d.pools[0].counts.degraded, 1);
    assert_eq!(d.pools[0].counts.updated, 2);
    let (img, ics) = d.pools[0].image.as_ref().unwrap();
    assert_eq!(img, NEW);
    assert!(cond(ics, condition::ROLLOUT_FAILED).status);
    assert!(!cond(ics, condition::ROLLING_OUT).status);
    let halt: Vec<_> = d
        .events
        .iter()
        .filter(|e| e.reason == reason::ROLLOUT_HALTED)
        .collect();
    assert_eq!(halt.len(), 1);
    assert!(halt[0].warning);
    // Recorded: no second Event.
    o.pools[0]
        .conditions
        .insert(condition::NODE_DEGRADED.into(), true);
    assert!(
        decide(&o, NOW)
            .events
            .iter()
            .all(|e| e.reason != reason::ROLLOUT_HALTED)
    );
    // A new image re-targets the failed node (it is a candidate again).
    o.pools[0].image = PoolImage::Built(CANARY.into());
    let d = decide(&o, NOW);
    assert!(!d.pools[0].halted);
    assert!(
        d.pools[0].targeted.contains(&"n04".to_owned()),
        "{:?}",
        d.pools[0].targeted
    );
}

#[test]
fn statuses_when_everything_is_updated() {
    let mut o = cluster(3, None);
    for n in &mut o.nodes {
        n.annotations.desired_config = Some("rendered-worker-new".into());
        n.annotations.desired_image = Some(NEW.into());
        n.annotations.stage_image = Some(NEW.into());
        n.annotations.driven_by = Some("MachineConfigPool/worker".into());
        finish(n, 0);
    }
    let d = decide(&o, NOW);
    // Staging removed once the nodes run the image.
    assert!(
        d.node_patches
            .iter()
            .all(|p| p.annotations.get(vocab::STAGE_IMAGE) == Some(&None))
    );
    let r = &d.pools[0];
    assert_eq!(
        (
            r.counts.machine,
            r.counts.updated,
            r.counts.ready,
            r.counts.unavailable
        ),
        (3, 3, 3, 0)
    );
    assert!(cond(&r.conditions, condition::UPDATED).status);
    assert!(!cond(&r.conditions, condition::UPDATING).status);
    assert!(!cond(&r.conditions, condition::DEGRADED).status);
    let (_, ics) = r.image.as_ref().unwrap();
    assert!(cond(ics, condition::ROLLED_OUT).status);
}

#[test]
fn degraded_aggregates_render_and_build_conditions() {
    let mut o = cluster(1, None);
    o.pools[0]
        .conditions
        .insert(condition::IMAGE_BUILD_DEGRADED.into(), true);
    let d = decide(&o, NOW);
    let c = cond(&d.pools[0].conditions, condition::DEGRADED);
    assert!(c.status);
    assert_eq!(c.message, "ImageBuildDegraded True");
}

fn canary_image(name: &str, target: ImageTarget, image: &str) -> MachineImageObserved {
    MachineImageObserved {
        name: name.into(),
        image: image.into(),
        target,
        pull_secret: Some("machineos/canary-pull".into()),
        conditions: BTreeMap::new(),
    }
}

#[test]
fn a_machine_image_takes_its_node_out_of_the_pool_rollout_within_the_pool_limit() {
    let mut o = cluster(6, Some(MaxUnavailable::Count(2)));
    o.machine_images.push(canary_image(
        "canary",
        ImageTarget::Node("n01".into()),
        CANARY,
    ));
    let d = decide(&o, NOW);
    let p = d.node_patches.iter().find(|p| p.node == "n01").unwrap();
    eprintln!("{:?} {:?}", d.node_patches, d.pools[0].conditions);
    assert_eq!(p.annotations[vocab::DESIRED_IMAGE].as_deref(), Some(CANARY));
    // Only the image moves: the config stays.
    assert_eq!(p.annotations.get(vocab::DESIRED_CONFIG), None);
    assert_eq!(
        p.annotations[vocab::DRIVEN_BY].as_deref(),
        Some("MachineImage/canary")
    );
    assert_eq!(
        p.annotations[vocab::PULL_SECRET].as_deref(),
        Some("machineos/canary-pull")
    );
    assert_eq!(p.annotations[vocab::STAGE_IMAGE].as_deref(), Some(CANARY));
    // The pool's limit holds: 1 for the canary + 1 pool node.
    assert_eq!(d.pools[0].targeted, ["n04"]);
    assert_eq!(d_::targeted(&d).len(), 2);
    let mi = &d.machine_images[0];
    assert_eq!(mi.counts.machine, 1);
    assert!(cond(&mi.conditions, condition::UPDATING).status);

    // Deleting it returns the node to its pool's image through the normal rollout.
    apply(&mut o, &d);
    let c = o.nodes.iter().position(|n| n.name == "n01").unwrap();
    finish(&mut o.nodes[c], 0);
    let n4 = o.nodes.iter().position(|n| n.name == "n04").unwrap();
    finish(&mut o.nodes[n4], 0);
    o.machine_images.clear();
    let d = decide(&o, NOW);
    let p = d.node_patches.iter().find(|p| p.node == "n01").unwrap();
    assert_eq!(p.annotations[vocab::DESIRED_IMAGE].as_deref(), Some(NEW));
    assert_eq!(
        p.annotations[vocab::DRIVEN_BY].as_deref(),
        Some("MachineConfigPool/worker")
    );
    assert_eq!(p.annotations[vocab::PULL_SECRET], None);
}

#[test]
fn a_selector_machine_image_moves_at_most_its_max_unavailable() {
    let mut o = cluster(9, Some(MaxUnavailable::Count(9)));
    let ml: BTreeMap<String, String> = [(vocab::ZONE_LABEL.to_owned(), "a".to_owned())].into();
    o.machine_images.push(canary_image(
        "zone-a",
        ImageTarget::Selector {
            selector: Selector::new("spec.nodeSelector", &ml, &[]).unwrap(),
            max_unavailable: Some(MaxUnavailable::Count(2)),
        },
        CANARY,
    ));
    let d = decide(&o, NOW);
    let on_canary: Vec<&str> = d
        .node_patches
        .iter()
        .filter(|p| p.annotations.get(vocab::DESIRED_IMAGE) == Some(&Some(CANARY.into())))
        .map(|p| p.node.as_str())
        .collect();
    // zone a: n01, n04, n07; oldest first.
    assert_eq!(on_canary, ["n04", "n07"]);
    assert_eq!(d.machine_images[0].counts.machine, 3);
    assert_eq!(d.pools[0].targeted.len(), 6, "the other zones' nodes");
}

#[test]
fn two_machine_images_on_one_node_is_a_conflict_and_neither_moves_it() {
    let mut o = cluster(3, Some(MaxUnavailable::Count(3)));
    o.machine_images
        .push(canary_image("one", ImageTarget::Node("n01".into()), CANARY));
    let ml: BTreeMap<String, String> = [(vocab::ZONE_LABEL.to_owned(), "a".to_owned())].into();
    o.machine_images.push(canary_image(
        "two",
        ImageTarget::Selector {
            selector: Selector::new("spec.nodeSelector", &ml, &[]).unwrap(),
            max_unavailable: None,
        },
        NEW,
    ));
    let d = decide(&o, NOW);
    assert!(
        d.node_patches.iter().all(|p| p.node != "n01"),
        "{:?}",
        d.node_patches
    );
    for mi in &d.machine_images {
        let c = cond(&mi.conditions, condition::CONFLICT);
        assert!(c.status, "{}", mi.name);
        assert!(
            c.message
                .contains("node n01 is also matched by MachineImage"),
            "{}",
            c.message
        );
    }
    let conflicts: Vec<_> = d
        .events
        .iter()
        .filter(|e| e.reason == reason::MACHINE_IMAGE_CONFLICT)
        .collect();
    assert_eq!(conflicts.len(), 2);
    assert_eq!(d.pools[0].targeted, ["n00", "n02"]);
}

#[test]
fn membership_custom_pool_wins_over_worker() {
    let mut o = cluster(2, None);
    let ml: BTreeMap<String, String> = [("custom".to_owned(), "yes".to_owned())].into();
    o.pools.push(PoolObserved {
        name: "infra".into(),
        node_selector: Some(Selector::new("spec.nodeSelector", &ml, &[]).unwrap()),
        image: PoolImage::NotLayered,
        ..pool(None, PoolImage::NotLayered)
    });
    o.nodes[0].labels.insert("custom".into(), "yes".into());
    assert_eq!(d_::membership(&o, &o.nodes[0]), Some(1));
    let d = decide(&o, NOW);
    assert_eq!(d.pools.len(), 1, "only layered pools report");
    assert_eq!(d.pools[0].counts.machine, 1);
    assert!(d.node_patches.iter().all(|p| p.node != "n00"));
}

#[test]
fn the_plan_shows_batches_in_order_and_its_first_batch_is_the_decision() {
    let mut o = cluster(10, Some(MaxUnavailable::Percent(30)));
    o.nodes[9].ready = false;
    let p = plan(&o, "worker", NOW).unwrap();
    assert_eq!(p.max_unavailable, 3);
    assert_eq!(p.unavailable, [("n09".to_owned(), "NotReady")]);
    let names: Vec<Vec<&str>> = p
        .batches
        .iter()
        .map(|b| b.iter().map(|n| n.name.as_str()).collect())
        .collect();
    assert_eq!(names[0], targeted(&o));
    assert_eq!(
        names,
        [
            vec!["n07", "n04"],
            vec!["n01", "n06"],
            vec!["n03", "n00"],
            vec!["n08", "n05"],
            vec!["n02"]
        ]
    );
    assert_eq!(p.blocked, None);

    o.pools[0].paused = true;
    let p = plan(&o, "worker", NOW).unwrap();
    assert_eq!(p.blocked.as_deref(), Some("the pool is paused"));
    assert_eq!(p.batches[0].len(), 2, "the order it would take");

    assert!(plan(&o, "nope", NOW).is_err());
}

#[test]
fn a_pool_is_not_updated_while_its_last_nodes_soak() {
    let mut o = cluster(2, None);
    o.pools[0].min_ready_seconds = 60;
    for n in &mut o.nodes {
        n.annotations.desired_config = Some("rendered-worker-new".into());
        n.annotations.desired_image = Some(NEW.into());
        finish(n, NOW - 5);
    }
    let d = decide(&o, NOW);
    let r = &d.pools[0];
    assert_eq!(
        (r.counts.updated, r.counts.ready, r.counts.unavailable),
        (2, 0, 2)
    );
    assert!(!cond(&r.conditions, condition::UPDATED).status);
    assert!(cond(&r.conditions, condition::UPDATING).status);
    assert!(!cond(&r.image.as_ref().unwrap().1, condition::ROLLED_OUT).status);
    let d = decide(&o, NOW + 55);
    assert!(cond(&d.pools[0].conditions, condition::UPDATED).status);
    assert!(cond(&d.pools[0].image.as_ref().unwrap().1, condition::ROLLED_OUT).status);
}

#[test]
fn a_node_degraded_on_the_last_build_is_retargeted_by_the_next_under_max_unavailable_one() {
    let mut o = cluster(3, None);
    o.nodes[0].annotations.desired_image = Some(NEW.into());
    o.nodes[0].annotations.desired_config = Some("rendered-worker-new".into());
    o.nodes[0].annotations.state = Some(NodeState::Degraded);
    o.nodes[0].annotations.reason = Some("deploy failed".into());
    // Halted on NEW.
    assert!(targeted(&o).is_empty());
    // A new build: the degraded node is moved at once (it holds its slot already), and
    // nothing else until it recovers.
    o.pools[0].image = PoolImage::Built(CANARY.into());
    let d = decide(&o, NOW);
    assert_eq!(d.pools[0].targeted, ["n00"]);
}

#[test]
fn a_node_mid_update_keeps_its_pull_secret_when_its_machine_image_goes() {
    let mut o = cluster(2, None);
    let n = &mut o.nodes[0].annotations;
    n.desired_image = Some(CANARY.into());
    n.state = Some(NodeState::Working);
    n.pull_secret = Some("machineos/canary-pull".into());
    n.driven_by = Some("MachineImage/canary".into());
    let d = decide(&o, NOW);
    let p = d.node_patches.iter().find(|p| p.node == "n00");
    assert!(
        p.is_none_or(|p| !p.annotations.contains_key(vocab::PULL_SECRET)),
        "{p:?}"
    );
}

#[test]
fn a_machine_image_waits_for_a_config_to_keep() {
    // A node that never had a config, in a pool not rendered yet.
    let mut o = cluster(1, None);
    o.pools[0].config = String::new();
    o.pools[0].image = PoolImage::Pending("the pool is not rendered yet".into());
    o.nodes[0].annotations.current_config = None;
    o.nodes[0].annotations.desired_config = None;
    o.machine_images.push(canary_image(
        "canary",
        ImageTarget::Node("n00".into()),
        CANARY,
    ));
    assert!(d_::targeted(&decide(&o, NOW)).is_empty());
    o.pools[0].config = "rendered-worker-new".into();
    let d = decide(&o, NOW);
    let p = &d.node_patches[0].annotations;
    assert_eq!(
        p[vocab::DESIRED_CONFIG].as_deref(),
        Some("rendered-worker-new")
    );
    assert_eq!(p[vocab::DESIRED_IMAGE].as_deref(), Some(CANARY));
}

/// `pick`, the one node-picking rule of pools and MachineImages, directly: rollout order,
/// the driver's own room, the pool's capacity charged for what is picked, Degraded nodes free.
#[test]
fn pick_orders_candidates_and_charges_the_driver_and_the_pool() {
    // cluster(): n00 zone b, n01 zone a, n02 zone c, n03 zone b, n04 zone a; younger later.
    let o = cluster(5, Some(MaxUnavailable::Count(2)));
    let views = d_::views(&o);
    let all: Vec<usize> = (0..5).collect();
    let names = |picked: &[usize]| -> Vec<String> {
        picked.iter().map(|&i| views[i].node.name.clone()).collect()
    };
    // (own room, pool capacity, picked, capacity left)
    let cases: Vec<(i64, i64, Vec<&str>, i64)> = vec![
        (i64::MAX, 2, vec!["n04", "n01"], 0),
        (1, 2, vec!["n04"], 1),
        (3, 1, vec!["n04"], 0),
        (0, 5, vec![], 5),
        (i64::MAX, 0, vec![], 0),
        (i64::MAX, -1, vec![], -1),
        (i64::MAX, 9, vec!["n04", "n01", "n03", "n00", "n02"], 4),
    ];
    for (room, cap, want, left) in cases {
        let mut capacity = vec![cap];
        let picked = d_::pick(&views, all.clone(), None, room, &mut capacity);
        assert_eq!(names(&picked), want, "room {room}, capacity {cap}");
        assert_eq!(capacity, vec![left], "room {room}, capacity {cap}");
    }
    // The controller's node goes last.
    let mut capacity = vec![9];
    let picked = d_::pick(&views, all.clone(), Some("n04"), i64::MAX, &mut capacity);
    assert_eq!(names(&picked), ["n01", "n03", "n00", "n02", "n04"]);
    // A Degraded node takes no slot, of its driver or its pool.
    let mut o = cluster(5, Some(MaxUnavailable::Count(1)));
    o.nodes[2].annotations.state = Some(NodeState::Degraded);
    let views = d_::views(&o);
    let mut capacity = vec![1];
    let picked = d_::pick(&views, all.clone(), None, 1, &mut capacity);
    assert_eq!(names(&picked), ["n04", "n02"]);
    assert_eq!(capacity, vec![0]);
    // A node in no pool is bounded by its driver's room alone.
    let mut o = cluster(2, None);
    o.pools[0].node_selector = None;
    let views = d_::views(&o);
    assert!(views.iter().all(|v| v.pool.is_none()));
    let mut capacity = vec![0];
    let picked = d_::pick(&views, vec![0, 1], None, 1, &mut capacity);
    assert_eq!(names(&picked), ["n01"]);
}

/// A node a MachineImage holds keeps the config it had: after the pool's config changed it
/// does not run the pool's config, so the pool is not Updated (its `status.configuration`
/// waits for that node too), and the conditions name the node and the MachineImage. Once it
/// runs the pool's config, the pool is Updated — still naming it as held.
#[test]
fn a_node_held_by_a_machine_image_is_reported_as_held_not_updated() {
    let mut o = cluster(3, None);
    o.machine_images.push(canary_image(
        "canary",
        ImageTarget::Node("n01".into()),
        CANARY,
    ));
    for n in &mut o.nodes {
        let held = n.name == "n01";
        if held {
            // On the canary image, with the config it had before the pool moved.
            n.annotations.desired_image = Some(CANARY.into());
            n.annotations.driven_by = Some("MachineImage/canary".into());
        } else {
            n.annotations.desired_config = Some("rendered-worker-new".into());
            n.annotations.desired_image = Some(NEW.into());
            n.annotations.driven_by = Some("MachineConfigPool/worker".into());
        }
        finish(n, 0);
    }
    let d = decide(&o, NOW);
    let r = &d.pools[0];
    assert_eq!((r.counts.machine, r.counts.updated), (3, 2));
    let updated = cond(&r.conditions, condition::UPDATED);
    assert!(!updated.status, "{updated:?}");
    let updating = cond(&r.conditions, condition::UPDATING);
    assert!(
        updating.message.ends_with("held by MachineImages (their config until their MachineImage lets go): n01 (MachineImage canary)"),
        "{updating:?}"
    );
    // The held node on the pool's config: Updated, and still said to be held.
    let n1 = o.nodes.iter_mut().find(|n| n.name == "n01").unwrap();
    n1.annotations.current_config = Some("rendered-worker-new".into());
    n1.annotations.desired_config = Some("rendered-worker-new".into());
    let d = decide(&o, NOW);
    let r = &d.pools[0];
    assert_eq!(r.counts.updated, 3);
    let updated = cond(&r.conditions, condition::UPDATED);
    assert!(updated.status, "{updated:?}");
    assert!(
        updated.message.ends_with(
            "held by MachineImages (the pool's config, their own image): n01 (MachineImage canary)"
        ),
        "{updated:?}"
    );
}

/// MachineImages in conflict over a node are not Updated, even with nothing else to move.
#[test]
fn machine_images_in_conflict_are_not_updated() {
    let mut o = cluster(3, Some(MaxUnavailable::Count(3)));
    o.machine_images
        .push(canary_image("one", ImageTarget::Node("n01".into()), CANARY));
    o.machine_images
        .push(canary_image("two", ImageTarget::Node("n01".into()), NEW));
    let d = decide(&o, NOW);
    for mi in &d.machine_images {
        assert_eq!(mi.counts.machine, 0, "{}", mi.name);
        let u = cond(&mi.conditions, condition::UPDATED);
        assert!(!u.status, "{}: {u:?}", mi.name);
        assert_eq!(u.reason, "Conflict");
        assert!(cond(&mi.conditions, condition::CONFLICT).status);
    }
}

/// A node two custom pools select belongs to neither (the MCO's rule) — and both pools say so.
#[test]
fn a_node_selected_by_two_custom_pools_is_named_by_both() {
    let mut o = cluster(2, None);
    let ml: BTreeMap<String, String> = [("custom".to_owned(), "yes".to_owned())].into();
    for name in ["infra", "gpu"] {
        o.pools.push(PoolObserved {
            name: name.into(),
            node_selector: Some(Selector::new("spec.nodeSelector", &ml, &[]).unwrap()),
            ..pool(None, PoolImage::Built(NEW.into()))
        });
    }
    o.nodes[0].labels.insert("custom".into(), "yes".into());
    assert_eq!(d_::membership(&o, &o.nodes[0]), None);
    let d = decide(&o, NOW);
    for name in ["infra", "gpu"] {
        let r = d.pools.iter().find(|r| r.pool == name).unwrap();
        let c = r.conditions.iter().find(|c| !c.message.is_empty()).unwrap();
        assert!(
            c.message
                .ends_with("in none until a selector excludes it: n00 (pools infra, gpu)"),
            "{name}: {c:?}"
        );
    }
    assert!(d.node_patches.iter().all(|p| p.node != "n00"));
}

#[test]
fn a_blocked_drain_is_counted_for_its_pool() {
    let mut o = cluster(3, None);
    o.nodes[1].drain_blocked = Some("pod apps/web-0: PodDisruptionBudget web allows 0".into());
    let d = decide(&o, NOW);
    assert_eq!(d.pools[0].counts.drain_blocked, 1);
    assert_eq!(d.pools[0].counts.machine, 3);
}

/// NEW as a two-architecture index: its amd64 and arm64 manifests, as a MachineOSImage
/// records them.
fn new_is_an_index() -> machineos_rollout::ImageManifests {
    let m = |c: char| format!("reg/os@sha256:{}", c.to_string().repeat(64));
    machineos_rollout::ImageManifests(
        [(
            NEW.to_owned(),
            [("amd64".to_owned(), m('a')), ("arm64".to_owned(), m('b'))].into(),
        )]
        .into(),
    )
}

#[test]
fn a_multi_arch_image_passes_its_manifests_with_the_desired_and_stage_image() {
    let mut o = cluster(3, None);
    o.image_manifests = new_is_an_index();
    let want = new_is_an_index().to_annotation();
    let d = decide(&o, NOW);
    // Every node staging NEW gets its manifests, the targeted one in the patch that sets
    // desiredImage; desiredImage stays the index.
    assert_eq!(d.node_patches.len(), 3);
    for p in &d.node_patches {
        assert_eq!(p.annotations[vocab::STAGE_IMAGE].as_deref(), Some(NEW));
        assert_eq!(
            p.annotations[vocab::IMAGE_MANIFESTS].as_deref(),
            Some(want.as_str()),
            "{}",
            p.node
        );
    }
    let first = &d.node_patches.iter().find(|p| p.node == "n01").unwrap();
    assert_eq!(
        first.annotations[vocab::DESIRED_IMAGE].as_deref(),
        Some(NEW)
    );
    // Written once: the next pass leaves it be, through the update and after it.
    apply(&mut o, &d);
    let d = decide(&o, NOW);
    assert!(
        d.node_patches
            .iter()
            .all(|p| !p.annotations.contains_key(vocab::IMAGE_MANIFESTS)),
        "{:?}",
        d.node_patches
    );
    let n01 = o.nodes.iter_mut().find(|n| n.name == "n01").unwrap();
    finish(n01, NOW);
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    let n01 = o.nodes.iter().find(|n| n.name == "n01").unwrap();
    assert_eq!(n01.annotations.stage_image, None);
    assert_eq!(
        n01.annotations.image_manifests.as_deref(),
        Some(want.as_str()),
        "desiredImage is still the index"
    );
    // That pass targeted n00 (zone b) with NEW. A single-arch image next, room for all:
    // the manifests go with NEW from the node retargeted (in the patch that does it) and
    // from the one that only staged NEW; n00, still on its way to NEW, keeps them.
    o.pools[0].image = PoolImage::Built(CANARY.into());
    o.pools[0].config = "rendered-worker-newer".into();
    o.pools[0].max_unavailable = Some(MaxUnavailable::Count(3));
    let n00 = o.nodes.iter().find(|n| n.name == "n00").unwrap();
    assert_eq!(n00.annotations.desired_image.as_deref(), Some(NEW));
    let d = decide(&o, NOW + 1000);
    let patch = |n: &str| {
        &d.node_patches
            .iter()
            .find(|p| p.node == n)
            .unwrap()
            .annotations
    };
    assert_eq!(patch("n01")[vocab::DESIRED_IMAGE].as_deref(), Some(CANARY));
    assert_eq!(patch("n01").get(vocab::IMAGE_MANIFESTS), Some(&None));
    assert_eq!(patch("n02").get(vocab::IMAGE_MANIFESTS), Some(&None));
    assert_eq!(patch("n00")[vocab::STAGE_IMAGE].as_deref(), Some(CANARY));
    assert!(!patch("n00").contains_key(vocab::IMAGE_MANIFESTS));

    // A single-arch image never carries the annotation.
    let d = decide(&cluster(3, None), NOW);
    assert!(
        d.node_patches
            .iter()
            .all(|p| !p.annotations.contains_key(vocab::IMAGE_MANIFESTS))
    );
}

/// The nodes told to stage `NEW` after `o`'s decision, in name order.
fn staging_of(o: &Observed) -> Vec<String> {
    o.nodes
        .iter()
        .filter(|n| n.annotations.stage_image.as_deref() == Some(NEW))
        .map(|n| n.name.clone())
        .collect()
}

#[test]
fn paced_staging_pulls_at_most_max_staging_at_once_in_rollout_order() {
    // Six nodes in zones b, a, c, b, a, c (created newest last); one moves at a time.
    let mut o = cluster(6, Some(MaxUnavailable::Count(1)));
    o.pools[0].max_staging = Some(MaxUnavailable::Count(2));
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    // Rollout order: zone a (n04 before n01: created 100 - i, so n04 is the older), then b
    // (n03, n00), then c (n05, n02). The targeted node pulls as it deploys, and counts: one
    // more stages.
    let targeted: Vec<&str> = o
        .nodes
        .iter()
        .filter(|n| n.annotations.desired_image.as_deref() == Some(NEW))
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(targeted, ["n04"], "zone a, oldest first");
    assert_eq!(staging_of(&o), ["n01", "n04"], "the next in order stages");
    // Nothing more while both pull.
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    assert_eq!(staging_of(&o), ["n01", "n04"]);
    // n01 has pulled: the next one in order (zone b's oldest, n03) starts.
    o.nodes[1].annotations.staged_image = Some(NEW.into());
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    assert_eq!(staging_of(&o), ["n01", "n03", "n04"]);
}

#[test]
fn max_staging_as_a_percentage_invalid_or_absent() {
    for (max, want) in [
        // 50 % of 6.
        (Some(MaxUnavailable::Percent(50)), 3),
        // Rounded down, but at least one.
        (Some(MaxUnavailable::Percent(1)), 1),
        (Some(MaxUnavailable::Count(0)), 1),
        // Invalid or absent: no pacing, everyone stages.
        (Some(MaxUnavailable::Invalid), 6),
        (None, 6),
    ] {
        let mut o = cluster(6, Some(MaxUnavailable::Count(1)));
        o.pools[0].max_staging = max;
        let d = decide(&o, NOW);
        apply(&mut o, &d);
        assert_eq!(staging_of(&o).len(), want, "{max:?}");
    }
    for (text, want) in [
        ("3", MaxUnavailable::Count(3)),
        (" 25% ", MaxUnavailable::Percent(25)),
        ("-1", MaxUnavailable::Invalid),
        ("x%", MaxUnavailable::Invalid),
        ("", MaxUnavailable::Invalid),
    ] {
        assert_eq!(MaxUnavailable::parse_text(text), want, "{text:?}");
    }
}

/// The plan of moving a node onto the pool's target, as the controller decides it.
fn plan_of(class: machineos_disruption::Class) -> machineos_disruption::NodePlan {
    machineos_disruption::NodePlan {
        config: "rendered-worker-new".into(),
        image: NEW.into(),
        class,
        actions: vec![],
    }
}

#[test]
fn a_move_applied_live_takes_no_slot_and_its_node_stays_available() {
    use machineos_disruption::{Class, NODE_DISRUPTION};
    for (class, first_pass) in [
        (Class::None, 4),
        (Class::Reload, 4),
        (Class::Restart, 4),
        (Class::DaemonReload, 4),
        (Class::Drain, 1),
        (Class::SoftReboot, 1),
        (Class::Reboot, 1),
    ] {
        let mut o = cluster(4, Some(MaxUnavailable::Count(1)));
        for n in &mut o.nodes {
            n.move_plan = Some(plan_of(class));
        }
        let d = decide(&o, NOW);
        assert_eq!(d.pools[0].targeted.len(), first_pass, "{class:?}");
        // The plan goes with the desired annotations, for the agent.
        let p = d
            .node_patches
            .iter()
            .find(|p| p.annotations.contains_key(vocab::DESIRED_IMAGE))
            .unwrap();
        assert_eq!(
            p.annotations.get(NODE_DISRUPTION).cloned().flatten(),
            Some(plan_of(class).to_annotation()),
            "{class:?}"
        );
        apply(&mut o, &d);
        // In flight: a live one leaves capacity for others, a disruptive one does not.
        let unavailable = o
            .nodes
            .iter()
            .filter(|n| d_::unavailable(n, NOW, 0).is_some())
            .count();
        assert_eq!(
            unavailable,
            if class.takes_slot() { 1 } else { 0 },
            "{class:?}"
        );
        // A cordoned node is unavailable whatever its plan says.
        o.nodes[0].unschedulable = true;
        assert!(d_::unavailable(&o.nodes[0], NOW, 0).is_some());
    }
    // A plan for another move is no plan: a reboot, a slot.
    let mut o = cluster(4, Some(MaxUnavailable::Count(1)));
    for n in &mut o.nodes {
        n.move_plan = Some(machineos_disruption::NodePlan {
            config: "rendered-worker-older".into(),
            ..plan_of(Class::None)
        });
    }
    let d = decide(&o, NOW);
    assert_eq!(d.pools[0].targeted.len(), 1);
    assert!(
        d.node_patches
            .iter()
            .all(|p| !p.annotations.contains_key(NODE_DISRUPTION)),
        "nothing to remove, nothing written"
    );
    // A MachineImage's move drops the pool's plan.
    let mut o = cluster(1, None);
    o.nodes[0].annotations.disruption = Some(plan_of(Class::None).to_annotation());
    o.machine_images.push(MachineImageObserved {
        name: "canary".into(),
        image: CANARY.into(),
        target: ImageTarget::Node("n00".into()),
        pull_secret: None,
        conditions: BTreeMap::new(),
    });
    let d = decide(&o, NOW);
    assert_eq!(
        d.node_patches[0].annotations.get(NODE_DISRUPTION),
        Some(&None),
        "{:?}",
        d.node_patches
    );
}

#[test]
fn the_plan_puts_every_move_applied_live_in_the_first_batch() {
    use machineos_disruption::Class;
    let mut o = cluster(5, Some(MaxUnavailable::Count(1)));
    o.pools[0].paused = true;
    for (i, n) in o.nodes.iter_mut().enumerate() {
        // Two nodes reboot (a slot each), three move live.
        n.move_plan = Some(plan_of(if i < 2 { Class::Reboot } else { Class::Restart }));
    }
    let p = plan(&o, "worker", NOW).unwrap();
    let sizes: Vec<usize> = p.batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 1, 1], "{p:?}");
    o.pools[0].paused = false;
    let p = plan(&o, "worker", NOW).unwrap();
    let sizes: Vec<usize> = p.batches.iter().map(Vec::len).collect();
    assert_eq!(
        sizes,
        [4, 1],
        "the first batch: one reboot and every live move: {p:?}"
    );
}

#[test]
fn a_node_whose_agent_cannot_apply_live_takes_a_slot_and_a_refused_move_is_granted_one() {
    use machineos_disruption::{Class, NODE_DISRUPTION, NodePlan};
    // An older agent (no live-apply feature): its move takes a slot, whatever the plan.
    let mut o = cluster(4, Some(MaxUnavailable::Count(1)));
    for n in &mut o.nodes {
        n.move_plan = Some(plan_of(Class::None));
    }
    o.nodes[1].annotations.live_apply = false;
    o.nodes[2].annotations.live_apply = false;
    let d = decide(&o, NOW);
    let mut t = d.pools[0].targeted.clone();
    t.sort();
    assert_eq!(t.len(), 3, "two live moves and one slot: {t:?}");

    // All moved live; two agents refused (the image changes /usr): they wait, in service,
    // and get a slot one at a time (maxUnavailable 1).
    let mut o = cluster(4, Some(MaxUnavailable::Count(1)));
    for n in &mut o.nodes {
        n.move_plan = Some(plan_of(Class::None));
    }
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    for i in [0, 2] {
        let a = &mut o.nodes[i].annotations;
        a.state = Some(NodeState::Working);
        a.reboot_required = true;
    }
    assert!(o.nodes.iter().all(|n| d_::unavailable(n, NOW, 0).is_none()));
    let d = decide(&o, NOW);
    let grants: Vec<(&str, NodePlan)> = d
        .node_patches
        .iter()
        .filter_map(|p| {
            let v = p.annotations.get(NODE_DISRUPTION)?.as_deref()?;
            Some((p.node.as_str(), NodePlan::parse(v)?))
        })
        .collect();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(grants[0].1.class, Class::Reboot);
    apply(&mut o, &d);
    for i in [0, 2] {
        let a = &mut o.nodes[i].annotations;
        a.state = Some(NodeState::Working);
        a.reboot_required = true;
    }
    // The granted node counts unavailable now; the other still waits.
    let granted = o.nodes.iter().find(|n| n.name == grants[0].0).unwrap();
    assert_eq!(d_::unavailable(granted, NOW, 0), Some("Updating"));
    let d = decide(&o, NOW);
    assert!(
        d.node_patches
            .iter()
            .all(|p| !p.annotations.contains_key(NODE_DISRUPTION)),
        "{:?}",
        d.node_patches
    );
}

#[test]
fn a_node_waiting_for_a_reboot_slot_is_granted_one_for_its_own_move_after_the_pool_moved_on() {
    use machineos_disruption::{Class, NODE_DISRUPTION, NodePlan};
    let mut o = cluster(2, Some(MaxUnavailable::Count(1)));
    for n in &mut o.nodes {
        n.move_plan = Some(plan_of(Class::None));
    }
    let d = decide(&o, NOW);
    apply(&mut o, &d);
    o.nodes[0].annotations.state = Some(NodeState::Working);
    o.nodes[0].annotations.reboot_required = true;
    // A new build: the pool's target moved on.
    o.pools[0].config = "rendered-worker-newer".into();
    o.pools[0].image = PoolImage::Built(CANARY.into());
    let d = decide(&o, NOW);
    let grant = d
        .node_patches
        .iter()
        .find(|p| p.node == o.nodes[0].name)
        .and_then(|p| p.annotations.get(NODE_DISRUPTION).cloned().flatten())
        .and_then(|v| NodePlan::parse(&v))
        .expect("a grant");
    assert_eq!((grant.image.as_str(), grant.class), (NEW, Class::Reboot));
}
