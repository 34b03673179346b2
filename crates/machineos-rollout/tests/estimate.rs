//! `machineos rollout status`'s estimate of the time left, row by row: from the update times
//! the agent recorded in this rollout, over the batches the pool's capacity allows.

mod common;

use std::collections::BTreeMap;

use common::*;
use machineos_rollout::observed::LastUpdate;
use machineos_rollout::status::NO_NODE_FINISHED;
use machineos_rollout::vocab::{self, NodeState};
use machineos_rollout::{MaxUnavailable, NodeAnnotations, NodeObserved, Observed, status};

const NEW_CONFIG: &str = "rendered-worker-new";

/// The record of an update to `config` and `image` that took `minutes`, an hour ago.
fn record(config: &str, image: &str, minutes: i64) -> LastUpdate {
    let started = (NOW - 3600) * 1000;
    LastUpdate {
        config: config.into(),
        image: image.into(),
        started,
        finished: started + minutes * 60_000,
    }
}

/// `n` on the pool's config and image, Done, Ready for long, its update timed (`minutes`).
fn updated(n: &mut NodeObserved, minutes: i64) {
    let a = &mut n.annotations;
    a.current_config = Some(NEW_CONFIG.into());
    a.desired_config = Some(NEW_CONFIG.into());
    a.current_image = Some(NEW.into());
    a.desired_image = Some(NEW.into());
    a.state = Some(NodeState::Done);
    a.last_update = Some(record(NEW_CONFIG, NEW, minutes));
}

/// `n` moving to the pool's image, its update started `ago` seconds before `NOW` (if known).
fn moving(n: &mut NodeObserved, ago: Option<i64>) {
    let a = &mut n.annotations;
    a.desired_config = Some(NEW_CONFIG.into());
    a.desired_image = Some(NEW.into());
    a.state = Some(NodeState::Working);
    a.step = Some("draining".into());
    a.update_started = ago.map(|s| NOW - s);
    n.unschedulable = true;
}

/// 9 workers, `maxUnavailable: 2`; the first three updated in 7, 5 and 6 minutes.
fn three_measured() -> Observed {
    let mut o = cluster(9, Some(MaxUnavailable::Count(2)));
    for (n, minutes) in o.nodes.iter_mut().zip([7, 5, 6]) {
        updated(n, minutes);
    }
    o
}

fn left(o: &Observed) -> (Option<u64>, Option<&'static str>) {
    let s = status(o, "worker", NOW).unwrap();
    (s.estimate.map(|e| e.seconds_left), s.no_estimate)
}

#[test]
fn no_estimate_before_a_node_has_finished() {
    let mut o = cluster(9, Some(MaxUnavailable::Count(2)));
    let s = status(&o, "worker", NOW).unwrap();
    assert_eq!((s.estimate, s.no_estimate), (None, Some(NO_NODE_FINISHED)));
    // Moving is not finished: still none.
    moving(&mut o.nodes[0], Some(60));
    moving(&mut o.nodes[1], Some(60));
    assert_eq!(left(&o), (None, Some(NO_NODE_FINISHED)));
}

#[test]
fn three_measured_six_left_capacity_two_is_three_batches_of_the_median() {
    let o = three_measured();
    let s = status(&o, "worker", NOW).unwrap();
    let e = s.estimate.clone().expect("an estimate");
    assert_eq!(e.per_node_seconds, 6 * 60, "the median of 5m, 6m, 7m");
    assert_eq!(e.measured_nodes, 3);
    assert_eq!(e.soak_seconds, 0);
    assert_eq!(e.seconds_left, 18 * 60, "ceil(6 / 2) = 3 batches of 6m");
    assert_eq!(s.no_estimate, None);
    // As `-o json` prints it.
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json["estimate"],
        serde_json::json!({"secondsLeft": 1080, "perNodeSeconds": 360, "soakSeconds": 0,
            "measuredNodes": 3})
    );
    assert_eq!(json["noEstimate"], serde_json::Value::Null);
}

#[test]
fn an_even_count_takes_the_middle_two() {
    let mut o = three_measured();
    updated(&mut o.nodes[3], 10);
    let e = status(&o, "worker", NOW).unwrap().estimate.unwrap();
    assert_eq!((e.per_node_seconds, e.measured_nodes), (390, 4), "6m30s");
}

#[test]
fn moving_nodes_count_for_the_rest_of_their_time() {
    // Two of the six left are moving, 2m and 4m into their update: their slots free after
    // 4m and 2m; the four waiting take them as they free.
    let mut o = three_measured();
    moving(&mut o.nodes[3], Some(120));
    moving(&mut o.nodes[4], Some(240));
    assert_eq!(left(&o), (Some(18 * 60 - 120), None));

    // Past the median: floored at zero, not negative.
    let mut o = three_measured();
    moving(&mut o.nodes[3], Some(3600));
    moving(&mut o.nodes[4], Some(3600));
    assert_eq!(left(&o), (Some(12 * 60), None));

    // No recorded start (an agent that does not record it yet): counted in full.
    let mut o = three_measured();
    moving(&mut o.nodes[3], None);
    moving(&mut o.nodes[4], None);
    assert_eq!(left(&o), (Some(18 * 60), None));
}

#[test]
fn the_soak_is_part_of_each_node_and_a_soaking_node_counts_its_rest() {
    // minReadySeconds 60: a node takes 6m + 1m. One updated node soaks 40s more, so one slot
    // is free now and the other after 40s: 6 left → 3 rounds of 7m, the second slot 40s late.
    let mut o = three_measured();
    o.nodes.push(node("n09", Some("a"), 50));
    o.pools[0].min_ready_seconds = 60;
    updated(&mut o.nodes[3], 6);
    o.nodes[3].ready_since = Some(NOW - 20);
    let s = status(&o, "worker", NOW).unwrap();
    assert!(s.moving.iter().any(|(n, p)| n == "n03" && *p == "soaking"));
    let e = s.estimate.unwrap();
    assert_eq!((e.per_node_seconds, e.soak_seconds), (360, 60));
    assert_eq!(e.seconds_left, 40 + 3 * 420);
}

#[test]
fn durations_from_another_image_or_config_are_ignored() {
    let mut o = cluster(9, Some(MaxUnavailable::Count(2)));
    // The waiting nodes carry their records of the previous rollout (the old image).
    for n in &mut o.nodes {
        n.annotations.last_update = Some(record("rendered-worker-old", OLD, 1));
    }
    // Updated, but the records are of other targets: the old image, another config.
    updated(&mut o.nodes[0], 6);
    o.nodes[0].annotations.last_update = Some(record(NEW_CONFIG, OLD, 1));
    updated(&mut o.nodes[1], 6);
    o.nodes[1].annotations.last_update = Some(record("rendered-worker-older", NEW, 1));
    assert_eq!(left(&o), (None, Some(NO_NODE_FINISHED)));

    // One record of this rollout: it alone is the measure.
    updated(&mut o.nodes[2], 10);
    let e = status(&o, "worker", NOW).unwrap().estimate.unwrap();
    assert_eq!((e.per_node_seconds, e.measured_nodes), (600, 1));
    assert_eq!(e.seconds_left, 3 * 600, "6 left, 2 at a time");
}

#[test]
fn halted_paused_or_done_has_no_estimate() {
    let mut paused = three_measured();
    paused.pools[0].paused = true;
    assert_eq!(left(&paused), (None, Some("the pool is paused")));

    let mut halted = three_measured();
    moving(&mut halted.nodes[3], Some(60));
    halted.nodes[3].annotations.state = Some(NodeState::Degraded);
    halted.nodes[3].annotations.reason = Some("booted the wrong image".into());
    let s = status(&halted, "worker", NOW).unwrap();
    assert!(s.halted, "{s:?}");
    assert_eq!(
        (s.estimate, s.no_estimate),
        (None, Some("the rollout is halted"))
    );

    let mut done = three_measured();
    for n in &mut done.nodes {
        updated(n, 6);
    }
    let s = status(&done, "worker", NOW).unwrap();
    assert!(s.done, "{s:?}");
    assert_eq!((s.estimate, s.no_estimate), (None, None));
}

#[test]
fn members_unavailable_for_other_reasons_take_slots_as_the_plan_assumes() {
    // One waiting node NotReady: it keeps a slot (capacity 2 - 1) and is not counted; the
    // other five go one at a time.
    let mut o = three_measured();
    o.nodes[8].ready = false;
    assert_eq!(left(&o), (Some(5 * 360), None));

    // maxUnavailable 1 and a member cordoned by an admin: no slot frees, no estimate.
    let mut o = three_measured();
    o.pools[0].max_unavailable = Some(MaxUnavailable::Count(1));
    o.nodes[8].unschedulable = true;
    let s = status(&o, "worker", NOW).unwrap();
    assert_eq!(s.estimate, None);
    assert!(
        s.no_estimate.is_some_and(|w| w.starts_with("no slot")),
        "{s:?}"
    );

    // Only a NotReady node left: nothing to estimate from.
    let mut o = three_measured();
    for n in &mut o.nodes[3..8] {
        updated(n, 6);
    }
    o.nodes[8].ready = false;
    assert_eq!(left(&o), (None, Some("only held nodes are left")));
}

#[test]
fn the_agent_s_timing_annotations_are_read_for_the_desired_target_only() {
    let progress = |image: &str| {
        format!(
            r#"{{"target":{{"config":"{NEW_CONFIG}","image":"{image}"}},"updateStarted":1700000000123,"step":"draining","drainStarted":0,"attempts":0,"failures":0}}"#
        )
    };
    let mut map: BTreeMap<String, String> = [
        (vocab::DESIRED_CONFIG, NEW_CONFIG.to_owned()),
        (vocab::DESIRED_IMAGE, NEW.to_owned()),
        (vocab::PROGRESS, progress(NEW)),
        (
            vocab::LAST_UPDATE,
            record("rendered-worker-old", OLD, 5).to_annotation(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let a = NodeAnnotations::from_map(&map);
    assert_eq!(a.update_started, Some(1_700_000_000));
    assert_eq!(a.step.as_deref(), Some("draining"));
    assert_eq!(
        a.last_update.as_ref().and_then(LastUpdate::seconds),
        Some(300)
    );
    // A progress of an older target (the desired image changed since): not this update's.
    map.insert(vocab::PROGRESS.into(), progress(OLD));
    assert_eq!(NodeAnnotations::from_map(&map).update_started, None);
    // Unreadable or backwards records are no measure.
    map.insert(vocab::LAST_UPDATE.into(), "{not json".into());
    assert_eq!(NodeAnnotations::from_map(&map).last_update, None);
    let backwards = LastUpdate {
        finished: 0,
        ..record(NEW_CONFIG, NEW, 5)
    };
    assert_eq!(backwards.seconds(), None);
}
