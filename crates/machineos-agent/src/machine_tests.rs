//! Table tests of [`decide`]: every transition and safety rule; and a property test of
//! restarts (an agent rebuilt from the annotations alone) at any point of an update.

use super::*;
use machineos_host::{FakeHost, Host};
use proptest::prelude::*;

const A: &str =
    "quay.io/os/worker@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str =
    "quay.io/os/worker@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str =
    "quay.io/os/worker@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const NOW: Millis = 1_700_000_000_000;

fn policy() -> Policy {
    Policy {
        drain_timeout: Duration::from_secs(60),
        drain_retry: Duration::from_secs(5),
        drain_backoff_max: Duration::from_secs(40),
        reboot_timeout: Duration::from_secs(600),
        failure_backoff: Duration::from_secs(10),
    }
}

fn target() -> Target {
    Target {
        config: "rendered-worker-2".into(),
        image: B.into(),
    }
}

/// A node running A / rendered-worker-1, Done, asked for B / rendered-worker-2.
fn asked() -> Observed {
    let mut o = Observed {
        annotations: [
            (CURRENT_CONFIG, "rendered-worker-1"),
            (CURRENT_IMAGE, A),
            (DESIRED_CONFIG, "rendered-worker-2"),
            (DESIRED_IMAGE, B),
            (STATE, "Done"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
        ..Observed::default()
    };
    o.host.booted = Some(A.into());
    o.host.boot_id = "boot-0".into();
    o.rendered = Some(Rendered {
        kernel_arguments: vec!["nosmt".into()],
        ssh_keys: [("core".to_owned(), vec!["ssh-ed25519 AAAA".to_owned()])].into(),
    });
    o
}

fn at(mut o: Observed, step: Step) -> Observed {
    o.annotations.insert(
        PROGRESS.into(),
        Progress {
            target: target(),
            started: Some(NOW - 60_000),
            reboot_required: false,
            step,
        }
        .to_annotation(),
    );
    o.annotations.insert(STATE.into(), "Working".into());
    o
}

fn ours(mut o: Observed) -> Observed {
    o.unschedulable = true;
    o.annotations.insert(CORDONED_BY_AGENT.into(), B.into());
    o
}

fn draining(started: Millis, failures: u32, retry_at: Option<Millis>) -> Step {
    Step::Draining {
        drain_started: started,
        attempts: 1,
        failures,
        retry_at,
    }
}

fn patch_of(actions: &[Action]) -> BTreeMap<String, Option<String>> {
    let mut m = BTreeMap::new();
    for a in actions {
        if let Action::Annotate(p) = a {
            m.extend(p.clone());
        }
    }
    m
}

fn progress_of(actions: &[Action]) -> Option<Progress> {
    patch_of(actions)
        .get(PROGRESS)
        .cloned()
        .flatten()
        .and_then(|p| Progress::parse(&p))
}

fn has(actions: &[Action], f: impl Fn(&Action) -> bool) -> bool {
    actions.iter().any(f)
}

fn condition(actions: &[Action], t: &str) -> Option<(&'static str, &'static str)> {
    actions.iter().rev().find_map(|a| match a {
        Action::SetMcnCondition(c) if c.type_ == t => Some((c.status, c.reason)),
        _ => None,
    })
}

fn events(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn disruptive(a: &Action) -> bool {
    matches!(
        a,
        Action::Cordon | Action::Drain | Action::Deploy(_) | Action::Reboot | Action::Kargs { .. }
    )
}

#[test]
fn idle_is_a_fixed_point() {
    let mut o = asked();
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    assert_eq!(decide(&o, &policy(), NOW), vec![]);
    // No desired image at all (a non-layered pool): nothing either.
    o.annotations.remove(DESIRED_IMAGE);
    assert_eq!(decide(&o, &policy(), NOW), vec![]);
}

#[test]
fn staging_pulls_and_never_cordons_or_changes_state() {
    let mut o = asked();
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    o.annotations.insert(STAGE_IMAGE.into(), B.into());
    let a = decide(&o, &policy(), NOW);
    assert_eq!(a, vec![Action::WritePullSecret, Action::Pull(B.into())]);

    // Pulled: answered, still no state change or cordon.
    o.host.pulled.push(B.into());
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(STAGED_IMAGE), Some(&Some(B.to_owned())));
    assert!(!p.contains_key(STATE));
    assert!(!has(&a, disruptive));
    assert_eq!(condition(&a, mcn::IMAGE_PULLED), Some(("True", "Staged")));

    // Answered: idle again.
    o.annotations.insert(STAGED_IMAGE.into(), B.into());
    assert_eq!(decide(&o, &policy(), NOW), vec![]);
}

#[test]
fn a_failed_staging_pull_is_reported_and_retried_after_a_backoff() {
    let mut o = asked();
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    o.annotations.insert(STAGE_IMAGE.into(), B.into());
    o.failure = Some(HostFailure {
        op: HostOp::Pull,
        message: "dns".into(),
        transient: true,
        attempts: 2,
    });
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| matches!(a, Action::Pull(_))));
    assert!(has(&a, |a| *a == Action::Requeue(Duration::from_secs(20))));
    assert_eq!(
        condition(&a, mcn::IMAGE_PULLED),
        Some(("False", "PullFailed"))
    );
    assert!(!has(&a, disruptive));
    // The next pass (failure consumed) pulls again.
    o.failure = None;
    assert!(has(&decide(&o, &policy(), NOW), |a| matches!(
        a,
        Action::Pull(_)
    )));
}

#[test]
fn an_update_starts_by_cordoning_and_marking_the_cordon_as_ours() {
    let a = decide(&asked(), &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(STATE), Some(&Some("Working".to_owned())));
    assert_eq!(p.get(CORDONED_BY_AGENT), Some(&Some(B.to_owned())));
    assert!(has(&a, |a| *a == Action::Cordon));
    assert!(
        !has(&a, |a| *a == Action::Drain),
        "drains after the cordon is written"
    );
    assert_eq!(
        progress_of(&a).map(|p| p.step),
        Some(Step::Draining {
            drain_started: 0,
            attempts: 0,
            failures: 0,
            retry_at: None
        }),
        "the window opens at the first round"
    );
    assert_eq!(condition(&a, mcn::CORDONED), Some(("True", "Cordoned")));
    assert_eq!(
        condition(&a, mcn::UPDATE_PREPARED),
        Some(("True", "UpdatePrepared"))
    );
}

#[test]
fn a_node_cordoned_by_an_admin_is_not_marked_as_ours() {
    let mut o = asked();
    o.unschedulable = true;
    let a = decide(&o, &policy(), NOW);
    assert!(!patch_of(&a).contains_key(CORDONED_BY_AGENT));
    assert!(!has(&a, |a| *a == Action::Cordon));
}

#[test]
fn without_the_rendered_config_nothing_is_disrupted() {
    let mut o = asked();
    o.rendered = None;
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, disruptive));
    assert!(patch_of(&a).is_empty());
    assert_eq!(events(&a), vec!["RenderedConfigMissing"]);
}

#[test]
fn the_first_round_opens_the_drain_window() {
    let o = ours(at(asked(), draining(0, 0, None)));
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Drain));
    match progress_of(&a).map(|p| p.step) {
        Some(Step::Draining { drain_started, .. }) => assert_eq!(drain_started, NOW),
        s => panic!("{s:?}"),
    }
}

#[test]
fn an_uncordon_mid_drain_is_undone() {
    let mut o = ours(at(asked(), draining(NOW, 0, None)));
    o.unschedulable = false;
    o.annotations.remove(CORDONED_BY_AGENT);
    let a = decide(&o, &policy(), NOW + 1000);
    assert!(has(&a, |a| *a == Action::Cordon));
    assert_eq!(
        patch_of(&a).get(CORDONED_BY_AGENT),
        Some(&Some(B.to_owned()))
    );
    assert!(!has(&a, |a| *a == Action::Drain));
    assert_eq!(events(&a), vec!["Recordoned"]);
}

#[test]
fn a_finished_drain_moves_on_to_the_deploy() {
    let mut o = ours(at(asked(), draining(NOW, 0, None)));
    o.drain = Some(DrainOutcome::Drained);
    let a = decide(&o, &policy(), NOW + 1000);
    assert_eq!(progress_of(&a).map(|p| p.step), Some(Step::Deploying));
    assert_eq!(condition(&a, mcn::DRAINED), Some(("True", "Drained")));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Deploy(_) | Action::Reboot
    )));
}

#[test]
fn a_blocked_drain_reports_each_pod_and_retries_within_the_window() {
    let mut o = ours(at(asked(), draining(NOW, 0, None)));
    o.drain = Some(DrainOutcome::Blocked {
        pods: vec![BlockedPod {
            pod: "default/web-0".into(),
            message: "The disruption budget web needs 1 healthy pods".into(),
        }],
    });
    let a = decide(&o, &policy(), NOW + 1000);
    assert_eq!(events(&a), vec!["DrainBlocked"]);
    assert!(has(&a, |a| *a == Action::Requeue(Duration::from_secs(5))));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Deploy(_) | Action::Reboot | Action::Uncordon | Action::Drain
    )));
    // The wait's end: a new round (no outcome in memory).
    o.drain = None;
    assert!(has(&decide(&o, &policy(), NOW + 6000), |a| *a == Action::Drain));
}

/// The pass that notices the timeout may have run no round of its own: the failure then says
/// what the last finished round met (a PodDisruptionBudget), not "no round has finished".
#[test]
fn a_timed_out_drain_says_what_the_last_round_met() {
    let mut o = ours(at(asked(), draining(NOW, 1, None)));
    o.drain = None;
    o.last_drain = Some(DrainOutcome::Blocked {
        pods: vec![BlockedPod {
            pod: "default/web-0".into(),
            message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        }],
    });
    let a = decide(&o, &policy(), NOW + 61_000);
    let msg = a
        .iter()
        .find_map(|a| match a {
            Action::Event { reason, note, .. } if *reason == "DrainFailed" => Some(note.clone()),
            _ => None,
        })
        .expect("a DrainFailed Event");
    assert!(
        msg.contains("the last round's evictions were refused: default/web-0: Cannot evict pod"),
        "{msg}"
    );
    assert!(!msg.contains("no drain round has finished"), "{msg}");
}

#[test]
fn a_timed_out_drain_never_proceeds_keeps_the_cordon_and_backs_off() {
    for outcome in [
        None,
        Some(DrainOutcome::Blocked {
            pods: vec![BlockedPod {
                pod: "default/web-0".into(),
                message: "pdb web".into(),
            }],
        }),
        Some(DrainOutcome::Waiting {
            pods: vec!["default/slow".into()],
        }),
        Some(DrainOutcome::Error {
            message: "boom".into(),
        }),
    ] {
        let mut o = ours(at(asked(), draining(NOW, 1, None)));
        o.drain = outcome.clone();
        let a = decide(&o, &policy(), NOW + 61_000);
        assert_eq!(
            condition(&a, mcn::DRAINED),
            Some(("False", "DrainFailed")),
            "{outcome:?}"
        );
        assert!(events(&a).contains(&"DrainFailed"));
        assert!(!has(&a, |a| matches!(
            a,
            Action::Deploy(_) | Action::Reboot | Action::Uncordon | Action::Drain
        )));
        assert!(!patch_of(&a).contains_key(CORDONED_BY_AGENT));
        // Second failure: 5 s doubled.
        assert!(has(&a, |a| *a == Action::Requeue(Duration::from_secs(10))));
        match progress_of(&a).map(|p| p.step) {
            Some(Step::Draining {
                failures, retry_at, ..
            }) => {
                assert_eq!(failures, 2);
                assert_eq!(retry_at, Some(NOW + 61_000 + 10_000));
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(patch_of(&a).get(STATE), None, "state stays Working");
    }
}

#[test]
fn after_a_failed_drain_the_next_window_waits_for_the_backoff() {
    let o = ours(at(asked(), draining(NOW, 1, Some(NOW + 10_000))));
    assert_eq!(
        decide(&o, &policy(), NOW + 4_000),
        vec![Action::Requeue(Duration::from_secs(6))]
    );
    let a = decide(&o, &policy(), NOW + 10_000);
    assert!(has(&a, |a| *a == Action::Drain));
    match progress_of(&a).map(|p| p.step) {
        Some(Step::Draining {
            drain_started,
            failures,
            retry_at,
            ..
        }) => assert_eq!((drain_started, failures, retry_at), (NOW + 10_000, 1, None)),
        s => panic!("{s:?}"),
    }
}

#[test]
fn the_deploy_writes_credentials_keys_and_kargs_then_the_image() {
    let mut o = ours(at(asked(), Step::Deploying));
    o.host.kargs = vec!["quiet".into(), "old=1".into()];
    o.current_kargs = vec!["old=1".into()];
    let a = decide(&o, &policy(), NOW);
    assert_eq!(
        a,
        vec![
            Action::WritePullSecret,
            Action::WriteSshKeys {
                user: "core".into(),
                keys: vec!["ssh-ed25519 AAAA".into()]
            },
            Action::Deploy(B.into()),
            Action::Kargs {
                add: vec!["nosmt".into()],
                remove: vec!["old=1".into()]
            },
        ]
    );
    // Past the drain: a restarted agent never drains again.
    assert!(!has(&a, |a| *a == Action::Drain));
}

#[test]
fn a_deployed_image_records_the_boot_id_before_rebooting() {
    let mut o = ours(at(asked(), Step::Deploying));
    o.host.staged = Some(B.into());
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| *a == Action::Reboot), "the record first");
    assert_eq!(
        progress_of(&a).map(|p| p.step),
        Some(Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: None,
            soft: false,
            soft_reboots_before: 0,
        })
    );
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Rebooting".to_owned())));
    assert_eq!(
        condition(&a, mcn::APPLIED_OS_IMAGE),
        Some(("True", "Deployed"))
    );
}

#[test]
fn deploy_failures_retry_when_transient_and_degrade_when_not() {
    let mut o = ours(at(asked(), Step::Deploying));
    o.failure = Some(HostFailure {
        op: HostOp::Deploy,
        message: "registry 503".into(),
        transient: true,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW);
    assert_eq!(events(&a), vec!["HostRetry"]);
    assert!(has(&a, |a| *a == Action::Requeue(Duration::from_secs(10))));
    o.failure = Some(HostFailure {
        op: HostOp::Deploy,
        message: "manifest unknown".into(),
        transient: false,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Degraded".to_owned())));
    assert!(!has(&a, |a| *a == Action::Uncordon));
}

#[test]
fn the_reboot_is_requested_once() {
    let o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: None,
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Reboot));
    let p = progress_of(&a).expect("progress");
    assert_eq!(
        p.step,
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        }
    );
    // A restarted agent, same boot: waits, does not reboot again.
    let o = ours(at(asked(), p.step));
    let a = decide(&o, &policy(), NOW + 30_000);
    assert_eq!(a, vec![Action::Requeue(Duration::from_secs(570))]);
    // Only when the reboot never came does it ask again.
    let a = decide(&o, &policy(), NOW + 600_000);
    assert!(has(&a, |a| *a == Action::Reboot));
}

#[test]
fn a_boot_into_the_target_finishes_and_undoes_only_our_cordon() {
    let mut o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B.into());
    o.host.kargs = vec!["nosmt".into()];
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    assert_eq!(
        p.get(CURRENT_CONFIG),
        Some(&Some("rendered-worker-2".to_owned()))
    );
    assert_eq!(p.get(STATE), Some(&Some("Done".to_owned())));
    assert_eq!(p.get(PROGRESS), Some(&None));
    assert_eq!(p.get(CORDONED_BY_AGENT), Some(&None));
    assert!(has(&a, |a| *a == Action::Uncordon));
    assert!(!has(&a, |a| *a == Action::Reboot));
    // Done: the host's own pull credentials are put back.
    assert!(has(&a, |a| *a == Action::ReleasePullSecret));
    for t in [
        mcn::UPDATED,
        mcn::UPDATE_COMPLETE,
        mcn::REBOOTED,
        mcn::UNCORDONED,
    ] {
        assert_eq!(condition(&a, t).map(|c| c.0), Some("True"), "{t}");
    }

    // An admin's cordon stays.
    o.annotations.remove(CORDONED_BY_AGENT);
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| *a == Action::Uncordon));
    assert_eq!(condition(&a, mcn::UNCORDONED).map(|c| c.0), Some("False"));
}

#[test]
fn a_boot_into_the_wrong_image_degrades_naming_both() {
    let mut o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(C.into());
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(STATE), Some(&Some("Degraded".to_owned())));
    let reason = p.get(REASON).cloned().flatten().unwrap_or_default();
    assert!(reason.contains(B) && reason.contains(C), "{reason}");
    assert!(!has(&a, |a| *a == Action::Uncordon || *a == Action::Reboot));
    assert_eq!(condition(&a, mcn::NODE_DEGRADED).map(|c| c.0), Some("True"));

    // Degraded stays Degraded for this target…
    let mut o = ours(at(
        asked(),
        Step::Degraded {
            reason: reason.clone(),
        },
    ));
    o.annotations.insert(STATE.into(), "Degraded".into());
    o.annotations.insert(REASON.into(), reason);
    o.host.booted = Some(C.into());
    assert_eq!(decide(&o, &policy(), NOW), vec![]);
    // …until the target changes: then the update starts over.
    let mut o2 = o.clone();
    let d =
        "quay.io/os/worker@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
    o2.annotations.insert(DESIRED_IMAGE.into(), d.into());
    let a = decide(&o2, &policy(), NOW);
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Working".to_owned())));
    assert_eq!(
        patch_of(&a).get(CORDONED_BY_AGENT),
        None,
        "still ours, not re-marked"
    );
}

#[test]
fn an_abandoned_update_is_dropped_and_our_cordon_undone() {
    let mut o = ours(at(asked(), draining(NOW, 0, None)));
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(PROGRESS), Some(&None));
    assert_eq!(p.get(STATE), Some(&Some("Done".to_owned())));
    assert!(has(&a, |a| *a == Action::Uncordon));
}

#[test]
fn a_node_already_running_the_target_finishes_without_disruption() {
    let mut o = asked();
    o.host.booted = Some(B.into());
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, disruptive));
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Done".to_owned())));
}

#[test]
fn progress_round_trips_through_its_annotation() {
    for step in [
        draining(NOW, 2, Some(NOW + 5)),
        Step::Deploying,
        Step::Rebooting {
            boot_id_before_reboot: "b".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
        Step::Degraded { reason: "r".into() },
    ] {
        let p = Progress {
            target: target(),
            started: Some(NOW - 1),
            reboot_required: false,
            step,
        };
        assert_eq!(Progress::parse(&p.to_annotation()), Some(p));
    }
    let text = Progress {
        target: target(),
        started: None,
        reboot_required: false,
        step: draining(NOW, 0, None),
    }
    .to_annotation();
    assert!(text.contains("\"step\":\"draining\""), "{text}");
    assert!(text.contains("\"drainStarted\""), "{text}");
    assert_eq!(Progress::parse("{not json"), None);
}

// ---------------------------------------------------------------------------------------
// Restarts at any point

/// One step of the world.
#[derive(Debug, Clone)]
enum Ev {
    /// The agent runs one pass; the drain (if any) is blocked when `blocked`.
    Pass { blocked: bool },
    /// The agent is killed and restarted (nothing survives but the node and the host).
    Restart,
    /// The host reboots if a reboot was requested.
    Boot,
    /// Time passes.
    Wait(u64),
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        4 => any::<bool>().prop_map(|b| Ev::Pass { blocked: b }),
        2 => Just(Ev::Restart),
        1 => Just(Ev::Boot),
        1 => (0u64..120_000).prop_map(Ev::Wait),
    ]
}

struct World {
    o: Observed,
    host: FakeHost,
    now: Millis,
    drains_after_drained: u32,
    drained: bool,
    reboots: u32,
    reboot_before_drained: bool,
}

impl World {
    fn new() -> World {
        let o = asked();
        World {
            o,
            host: FakeHost::booted(A),
            now: NOW,
            drains_after_drained: 0,
            drained: false,
            reboots: 0,
            reboot_before_drained: false,
        }
    }

    fn pass(&mut self, blocked: bool) {
        self.o.host = self.host.status().unwrap_or_default();
        // Past the drain as persisted (a round whose success was never recorded may run
        // again after a restart; it finds nothing to evict).
        let past_drain = self.o.annotations.get(CURRENT_IMAGE).map(String::as_str) == Some(B)
            || self
                .o
                .progress()
                .is_some_and(|p| !matches!(p.step, Step::Draining { .. }));
        let actions = decide(&self.o, &policy(), self.now);
        self.o.drain = None;
        self.o.failure = None;
        for a in actions {
            match a {
                Action::Annotate(p) => {
                    for (k, v) in p {
                        match v {
                            Some(v) => self.o.annotations.insert(k, v),
                            None => self.o.annotations.remove(&k),
                        };
                    }
                }
                Action::Cordon => self.o.unschedulable = true,
                Action::Uncordon => self.o.unschedulable = false,
                Action::Drain => {
                    if past_drain {
                        self.drains_after_drained += 1;
                    }
                    self.o.drain = Some(if blocked {
                        DrainOutcome::Blocked {
                            pods: vec![BlockedPod {
                                pod: "d/p".into(),
                                message: "pdb".into(),
                            }],
                        }
                    } else {
                        self.drained = true;
                        DrainOutcome::Drained
                    });
                }
                Action::Deploy(i) => {
                    let _ = self.host.deploy(&i, None);
                }
                Action::Kargs { add, remove } => {
                    let _ = self.host.kargs(&add, &remove);
                }
                Action::Pull(i) => {
                    let _ = self.host.pull(&i, None);
                }
                Action::Reboot => {
                    self.reboots += 1;
                    if !self.drained {
                        self.reboot_before_drained = true;
                    }
                    let _ = self.host.reboot();
                }
                _ => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn restarts_never_drain_past_the_drain_nor_reboot_twice(evs in proptest::collection::vec(ev(), 0..80)) {
        let mut w = World::new();
        for e in evs {
            match e {
                Ev::Pass { blocked } => w.pass(blocked),
                Ev::Restart => {
                    w.o.drain = None;
                    w.o.failure = None;
                }
                Ev::Boot => {
                    if w.host.lock().reboot_requested {
                        w.host.boot();
                    }
                }
                Ev::Wait(ms) => w.now += ms as Millis,
            }
            prop_assert_eq!(w.drains_after_drained, 0, "a drain after the drain was recorded");
            // A reboot *request* is repeated only when no reboot came within
            // `reboot_timeout` (by design); the host never boots twice for the update.
            prop_assert!(!w.reboot_before_drained, "rebooted before the drain finished");
            prop_assert!(w.host.lock().boots <= 1, "booted {} times", w.host.lock().boots);
        }
        // Then let it finish: unblocked passes, the boot, time.
        for _ in 0..20 {
            w.now += 120_000;
            w.pass(false);
            if w.host.lock().reboot_requested {
                w.host.boot();
            }
        }
        prop_assert!(w.reboots >= 1);
        prop_assert_eq!(w.host.lock().boots, 1, "booted once");
        prop_assert_eq!(w.o.annotations.get(STATE).map(String::as_str), Some("Done"));
        prop_assert_eq!(w.o.annotations.get(CURRENT_IMAGE).map(String::as_str), Some(B));
        prop_assert!(!w.o.unschedulable, "uncordoned at the end");
        prop_assert!(!w.o.annotations.contains_key(PROGRESS));
        // Restarts or not, the update is timed from its start to its finish.
        let record = w.o.annotations.get(LAST_UPDATE).and_then(|v| LastUpdate::parse(v));
        prop_assert!(
            record.as_ref().is_some_and(|r| r.image == B
                && NOW <= r.started
                && r.started <= r.finished
                && r.finished <= w.now),
            "{:?}",
            record
        );
    }
}

#[test]
fn a_boot_without_the_rendered_kernel_arguments_is_degraded() {
    let mut o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B.into());
    o.host.kargs = vec![];
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(STATE), Some(&Some("Degraded".to_owned())));
    let reason = p.get(REASON).cloned().flatten().unwrap_or_default();
    assert!(
        reason.contains("without the kernel arguments [\"nosmt\"]"),
        "{reason}"
    );
}

#[test]
fn a_reboot_request_that_failed_is_retried_after_the_backoff_not_the_reboot_timeout() {
    let mut o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    o.host.boot_id = "boot-0".into();
    o.failure = Some(HostFailure {
        op: HostOp::Reboot,
        message: "Failed to connect to bus".into(),
        transient: true,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW + 1_000);
    let p = progress_of(&a).expect("the progress is rewritten");
    assert!(
        matches!(
            p.step,
            Step::Rebooting {
                reboot_requested: None,
                ..
            }
        ),
        "{p:?}"
    );
    assert!(has(
        &a,
        |a| matches!(a, Action::Requeue(d) if *d < Duration::from_secs(60))
    ));
}

#[test]
fn an_uncordon_between_the_drain_and_the_reboot_is_drained_again() {
    for step in [
        Step::Deploying,
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: None,
            soft: false,
            soft_reboots_before: 0,
        },
    ] {
        let mut o = at(asked(), step.clone());
        o.host.boot_id = "boot-0".into();
        o.unschedulable = false;
        let a = decide(&o, &policy(), NOW);
        assert!(has(&a, |a| *a == Action::Cordon), "{step:?}: {a:?}");
        assert!(!has(&a, |a| *a == Action::Reboot), "{step:?}: {a:?}");
        assert!(
            !has(&a, |a| matches!(a, Action::Deploy(_))),
            "{step:?}: {a:?}"
        );
        let p = progress_of(&a).expect("progress");
        assert!(
            matches!(
                p.step,
                Step::Draining {
                    drain_started: 0,
                    ..
                }
            ),
            "{step:?}: {p:?}"
        );
        assert_eq!(
            patch_of(&a).get(CORDONED_BY_AGENT),
            Some(&Some(B.to_owned()))
        );
    }
    // After the reboot, an uncordon is not a reason to drain again.
    let mut o = at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    );
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B.into());
    o.host.kargs = vec!["nosmt".into()];
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| *a == Action::Cordon), "{a:?}");
}

#[test]
fn a_target_moved_back_to_the_booted_image_unstages_the_other_one_first() {
    // Deployed A... no: booted A, B staged, and the target is now A again.
    let mut o = at(asked(), Step::Deploying);
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    o.host.booted = Some(A.into());
    o.host.staged = Some(B.into());
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Deploy(A.into())), "{a:?}");
    assert!(!has(&a, |a| *a == Action::Uncordon), "{a:?}");
    assert_eq!(patch_of(&a).get(STATE), None, "not Done yet: {a:?}");
    // Once the booted image is the next boot again, it finishes.
    o.host.staged = Some(A.into());
    let a = decide(&o, &policy(), NOW);
    assert_eq!(
        patch_of(&a).get(STATE),
        Some(&Some("Done".to_owned())),
        "{a:?}"
    );
}

/// A CI run's proptest case: the reboot never comes within `reboot_timeout`, so the request
/// is repeated — and the host still boots once, and the update finishes.
#[test]
fn a_repeated_reboot_request_still_boots_once() {
    let mut w = World::new();
    for _ in 0..6 {
        w.pass(false);
    }
    for ms in [0, 63_034, 40_153, 101_942, 69_218, 94_060, 111_593] {
        w.now += ms;
    }
    w.pass(false);
    for _ in 0..20 {
        w.now += 120_000;
        w.pass(false);
        if w.host.lock().reboot_requested {
            w.host.boot();
        }
    }
    assert_eq!(w.reboots, 2, "the request was repeated");
    assert_eq!(w.host.lock().boots, 1);
    assert_eq!(w.o.annotations.get(STATE).map(String::as_str), Some("Done"));
    assert_eq!(
        w.o.annotations.get(CURRENT_IMAGE).map(String::as_str),
        Some(B)
    );
}

#[test]
fn an_update_records_when_it_started_and_when_it_finished() {
    let mut w = World::new();
    w.pass(false);
    // The pass that cordons starts the update; the rollout reads the start (in seconds).
    let started = w.now;
    assert_eq!(w.o.progress().and_then(|p| p.started), Some(started));
    assert_eq!(
        machineos_rollout::NodeAnnotations::from_map(&w.o.annotations).update_started,
        Some(started / 1000)
    );
    let mut finished = None;
    for _ in 0..20 {
        w.now += 30_000;
        w.pass(false);
        if w.host.lock().reboot_requested {
            w.host.boot();
        }
        if let Some(p) = w.o.progress() {
            // Every step keeps the start; the record comes only with the finish.
            assert_eq!(p.started, Some(started), "{p:?}");
            assert!(!w.o.annotations.contains_key(LAST_UPDATE));
        }
        if finished.is_none() && w.o.annotations.get(STATE).map(String::as_str) == Some("Done") {
            finished = Some(w.now);
        }
    }
    let finished = finished.expect("the update finished");
    assert!(finished > started);
    let record =
        w.o.annotations
            .get(LAST_UPDATE)
            .and_then(|v| LastUpdate::parse(v));
    let want = LastUpdate {
        config: "rendered-worker-2".into(),
        image: B.into(),
        started,
        finished,
    };
    assert_eq!(record.as_ref(), Some(&want));
    // What the rollout reads: the record, and no update in progress.
    let seen = machineos_rollout::NodeAnnotations::from_map(&w.o.annotations);
    assert_eq!(seen.last_update, Some(want));
    assert_eq!(seen.update_started, None);
}

#[test]
fn an_update_finished_without_a_recorded_start_leaves_no_timing_record() {
    // The host runs the target already: nothing was timed, and an older record goes.
    let mut o = asked();
    o.host.booted = Some(B.into());
    let older = LastUpdate {
        config: "rendered-worker-1".into(),
        image: A.into(),
        started: NOW - 600_000,
        finished: NOW - 300_000,
    };
    o.annotations
        .insert(LAST_UPDATE.into(), older.to_annotation());
    let a = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Done".to_owned())));
    assert_eq!(patch_of(&a).get(LAST_UPDATE), Some(&None));

    // A progress written before the start was recorded (no `updateStarted`) still parses,
    // resumes and finishes, without a record.
    let text = format!(
        r#"{{"target":{{"config":"rendered-worker-2","image":"{B}"}},"step":"rebooting","bootIdBeforeReboot":"boot-0","rebootRequested":{NOW}}}"#
    );
    let p = Progress::parse(&text).expect("the older format parses");
    assert_eq!(p.started, None);
    let mut o = ours(asked());
    o.annotations.insert(PROGRESS.into(), text);
    o.annotations.insert(STATE.into(), "Rebooting".into());
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B.into());
    o.host.kargs = vec!["nosmt".into()];
    let a = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Done".to_owned())));
    assert!(!patch_of(&a).contains_key(LAST_UPDATE), "{a:?}");
    // Written with the start, the field is `updateStarted`.
    let with = Progress {
        started: Some(NOW),
        ..p
    }
    .to_annotation();
    assert!(with.contains(&format!("\"updateStarted\":{NOW}")), "{with}");
}

/// B as a two-architecture index: its amd64 and arm64 manifests.
const B_AMD64: &str =
    "quay.io/os/worker@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
const B_ARM64: &str =
    "quay.io/os/worker@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";

/// The rollout's [`IMAGE_MANIFESTS`] for `index` = B's manifests.
fn manifests_of(index: &str) -> String {
    ImageManifests(
        [(
            index.to_owned(),
            [("amd64", B_AMD64), ("arm64", B_ARM64)]
                .into_iter()
                .map(|(a, m)| (a.to_owned(), m.to_owned()))
                .collect(),
        )]
        .into(),
    )
    .to_annotation()
}

#[test]
fn a_multi_arch_target_booted_as_the_nodes_manifest_is_the_target() {
    // (the node's arch, the manifests the rollout passed, what booted, done?)
    let cases: [(Option<&str>, Option<&str>, &str, bool); 9] = [
        // B is an index: the host reports its manifest for the node's architecture.
        (Some("amd64"), Some(B), B_AMD64, true),
        (Some("arm64"), Some(B), B_ARM64, true),
        // Another architecture's manifest of the same index is not the target.
        (Some("amd64"), Some(B), B_ARM64, false),
        (Some("arm64"), Some(B), B_AMD64, false),
        // A host that reports the index itself runs the target too.
        (Some("amd64"), Some(B), B, true),
        // The architecture unknown: only the index itself.
        (None, Some(B), B_AMD64, false),
        // Manifests of another image say nothing about B.
        (Some("amd64"), Some(C), B_AMD64, false),
        // Single-arch (no manifests): the pullspec, exactly, as before.
        (Some("amd64"), None, B, true),
        (Some("amd64"), None, B_AMD64, false),
    ];
    for (arch, index, booted, done) in cases {
        let mut o = ours(at(
            asked(),
            Step::Rebooting {
                boot_id_before_reboot: "boot-0".into(),
                reboot_requested: Some(NOW),
                soft: false,
                soft_reboots_before: 0,
            },
        ));
        o.arch = arch.map(str::to_owned);
        if let Some(index) = index {
            o.annotations
                .insert(IMAGE_MANIFESTS.into(), manifests_of(index));
        }
        o.host.boot_id = "boot-1".into();
        o.host.booted = Some(booted.into());
        o.host.kargs = vec!["nosmt".into()];
        let a = decide(&o, &policy(), NOW);
        let p = patch_of(&a);
        let case = format!("{arch:?} {index:?} booted {booted}");
        if done {
            assert_eq!(p.get(STATE), Some(&Some("Done".to_owned())), "{case}");
            // What the node records is the pullspec the pool records: the index.
            assert_eq!(p.get(CURRENT_IMAGE), Some(&Some(B.to_owned())), "{case}");
            assert!(
                has(&a, |a| matches!(
                    a,
                    Action::SetMcnVersions { current_image: Some(i), .. } if i == B
                )),
                "{case}"
            );
            assert!(has(&a, |a| *a == Action::Uncordon), "{case}");
        } else {
            assert_eq!(p.get(STATE), Some(&Some("Degraded".to_owned())), "{case}");
            assert!(!p.contains_key(CURRENT_IMAGE), "{case}");
            let reason = p.get(REASON).cloned().flatten().unwrap_or_default();
            assert!(
                reason.contains(booted) && reason.contains(B),
                "{case}: {reason}"
            );
            assert!(!has(&a, |a| *a == Action::Uncordon), "{case}");
        }
    }
    // The reason names the manifest that was expected.
    let mut o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    o.arch = Some("amd64".into());
    o.annotations
        .insert(IMAGE_MANIFESTS.into(), manifests_of(B));
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B_ARM64.into());
    let reason = patch_of(&decide(&o, &policy(), NOW))
        .get(REASON)
        .cloned()
        .flatten()
        .unwrap_or_default();
    assert_eq!(
        reason,
        format!("booted {B_ARM64} after the reboot, expected {B} (its amd64 manifest {B_AMD64})")
    );
}

#[test]
fn a_host_that_deployed_the_index_is_running_it_without_the_manifests_annotation() {
    // A MachineImage may name an index no MachineOSImage lists: no manifests annotation. The
    // host says which reference it deployed the booted manifest from: that is the target.
    let mut o = ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    ));
    o.arch = Some("amd64".into());
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B_AMD64.into());
    o.host.kargs = vec!["nosmt".into()];
    o.host.references.insert(B_AMD64.into(), B.into());
    let p = patch_of(&decide(&o, &policy(), NOW));
    assert_eq!(p.get(STATE), Some(&Some("Done".to_owned())));
    assert_eq!(p.get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    // Deployed from another reference: still the wrong image.
    o.host.references.insert(B_AMD64.into(), C.into());
    let p = patch_of(&decide(&o, &policy(), NOW));
    assert_eq!(p.get(STATE), Some(&Some("Degraded".to_owned())));
}

#[test]
fn a_multi_arch_target_staged_pulled_or_running_as_the_nodes_manifest_is_recognised() {
    let multi = |mut o: Observed| {
        o.arch = Some("amd64".into());
        o.annotations
            .insert(IMAGE_MANIFESTS.into(), manifests_of(B));
        o
    };
    // Already running it: done without disruption, recording the index.
    let mut o = multi(asked());
    o.host.booted = Some(B_AMD64.into());
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, disruptive), "{a:?}");
    assert_eq!(patch_of(&a).get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    // Another architecture's manifest running: the update starts.
    o.host.booted = Some(B_ARM64.into());
    assert!(has(&decide(&o, &policy(), NOW), |a| *a == Action::Cordon));

    // Deployed: the host reports the manifest staged → on to the reboot (not another deploy).
    let mut o = multi(ours(at(asked(), Step::Deploying)));
    o.host.staged = Some(B_AMD64.into());
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| matches!(a, Action::Deploy(_))), "{a:?}");
    assert!(matches!(
        progress_of(&a).map(|p| p.step),
        Some(Step::Rebooting { .. })
    ));
    // The wrong architecture's manifest staged is not the target: deploy it.
    o.host.staged = Some(B_ARM64.into());
    assert!(has(&decide(&o, &policy(), NOW), |a| *a
        == Action::Deploy(B.into())));

    // Booted after the reboot with the target's manifest staged (as a host may report it):
    // finished, nothing restaged.
    let mut o = multi(ours(at(
        asked(),
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW),
            soft: false,
            soft_reboots_before: 0,
        },
    )));
    o.host.boot_id = "boot-1".into();
    o.host.booted = Some(B_AMD64.into());
    o.host.staged = Some(B_AMD64.into());
    o.host.kargs = vec!["nosmt".into()];
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| matches!(a, Action::Deploy(_))), "{a:?}");
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Done".to_owned())));

    // Staging: the manifest pulled is the stage image pulled (no pull again).
    let mut o = multi(asked());
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    o.annotations.insert(STAGE_IMAGE.into(), B.into());
    o.host.pulled = vec![B_AMD64.into()];
    let a = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&a).get(STAGED_IMAGE), Some(&Some(B.to_owned())));
    assert!(!has(&a, |a| matches!(a, Action::Pull(_))), "{a:?}");
    o.host.pulled = vec![B_ARM64.into()];
    assert_eq!(
        decide(&o, &policy(), NOW),
        vec![Action::WritePullSecret, Action::Pull(B.into())]
    );
}

// ---------------------------------------------------------------------------------------
// Moves applied live, soft reboots

/// `asked()` with the rollout's plan for the move: `class`, restarting chronyd.
fn planned(class: Class) -> Observed {
    let mut o = asked();
    let plan = NodePlan {
        config: "rendered-worker-2".into(),
        image: B.into(),
        class,
        actions: vec![machineos_disruption::Action::Restart(
            "chronyd.service".into(),
        )],
    };
    o.annotations
        .insert(NODE_DISRUPTION.into(), plan.to_annotation());
    // The image carries the same kernel arguments (a live move changes none).
    o.host.kargs = vec!["nosmt".into()];
    o
}

fn step_of(a: &[Action]) -> Option<Step> {
    progress_of(a).map(|p| p.step)
}

#[test]
fn a_live_move_stages_applies_and_runs_its_actions_without_cordon_drain_or_reboot() {
    let o = planned(Class::Restart);
    // Start: no cordon, straight to deploying.
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| *a == Action::Cordon));
    assert_eq!(step_of(&a), Some(Step::Deploying));
    assert_eq!(patch_of(&a).get(STATE), Some(&Some("Working".to_owned())));
    assert!(!patch_of(&a).contains_key(CORDONED_BY_AGENT));
    assert_eq!(events(&a), vec!["UpdateStarted"]);
    // Deploying on a schedulable node is the plan, not an uncordon to repair.
    let o = at(o, Step::Deploying);
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| *a == Action::Cordon), "{a:?}");
    assert!(has(&a, |a| *a == Action::Deploy(B.into())));
    // Staged: apply live with the plan's actions, in the same pass as the record.
    let mut o = o;
    o.host.staged = Some(B.into());
    let a = decide(&o, &policy(), NOW);
    assert_eq!(step_of(&a), Some(Step::Applying));
    assert!(has(&a, |a| *a
        == Action::ApplyLive {
            target: target(),
            actions: vec![Systemctl::Restart("chronyd.service".into())],
        }));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Reboot | Action::SoftReboot
    )));
    // Applied: done, the image the next boot, no reboot.
    let mut o = at(o, Step::Applying);
    o.applied = Some(target());
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    assert_eq!(p.get(STATE), Some(&Some("Done".to_owned())));
    assert_eq!(p.get(REBOOT_PENDING), Some(&Some(B.to_owned())));
    assert_eq!(p.get(PROGRESS), Some(&None));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Uncordon | Action::Reboot | Action::SoftReboot | Action::Cordon
    )));
    assert_eq!(
        condition(&a, mcn::APPLIED_FILES_AND_OS),
        Some(("True", "AppliedLive"))
    );
    assert_eq!(
        condition(&a, mcn::UPDATE_POST_ACTION_COMPLETE),
        Some(("True", "ActionsRun"))
    );
    assert_eq!(condition(&a, mcn::REBOOTED), None);
    // Then idle; once the host booted B (anyone's reboot), nothing is pending any more.
    for (k, v) in p {
        match v {
            Some(v) => o.annotations.insert(k, v),
            None => o.annotations.remove(&k),
        };
    }
    o.applied = None;
    assert_eq!(decide(&o, &policy(), NOW), vec![]);
    o.host.booted = Some(B.into());
    o.host.staged = None;
    let a = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&a).get(REBOOT_PENDING), Some(&None));
}

#[test]
fn a_restarted_agent_applies_again_and_a_refused_apply_reboots_instead() {
    let mut o = at(planned(Class::None), Step::Applying);
    o.host.staged = Some(B.into());
    // No memory of the apply: redone (it is idempotent).
    let a = decide(&o, &policy(), NOW);
    assert_eq!(
        a,
        vec![Action::ApplyLive {
            target: target(),
            actions: vec![Systemctl::Restart("chronyd.service".into())],
        }]
    );
    // A transient failure backs off.
    o.failure = Some(HostFailure {
        op: HostOp::Live,
        message: "EBUSY".into(),
        transient: true,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| matches!(a, Action::Requeue(_))));
    assert!(!has(&a, |a| *a == Action::Cordon));
    // Refused (the image changes /usr): no cordon on the agent's own say — it waits, in
    // service, for the rollout to grant a slot.
    o.failure = Some(HostFailure {
        op: HostOp::Live,
        message: "the staged image differs outside /etc and /var".into(),
        transient: false,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| *a == Action::Cordon), "{a:?}");
    assert_eq!(events(&a), vec!["LiveApplyRefused"]);
    assert_eq!(
        condition(&a, mcn::APPLIED_FILES_AND_OS),
        Some(("False", "LiveApplyRefused"))
    );
    let p = progress_of(&a).unwrap();
    assert!(p.reboot_required);
    assert_eq!(p.step, Step::Applying);
    o.failure = None;
    o.annotations.insert(PROGRESS.into(), p.to_annotation());
    // Waiting: nothing but a later look (the grant is a node change, which wakes it).
    let a = decide(&o, &policy(), NOW);
    assert!(a.iter().all(|a| matches!(a, Action::Requeue(_))), "{a:?}");
    // The grant: the rollout hands a plan that takes a slot. Cordoned, drained...
    let grant = NodePlan {
        config: "rendered-worker-2".into(),
        image: B.into(),
        class: Class::Reboot,
        actions: vec![machineos_disruption::Action::Reboot],
    };
    o.annotations
        .insert(NODE_DISRUPTION.into(), grant.to_annotation());
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Cordon), "{a:?}");
    let p2 = progress_of(&a).unwrap();
    assert!(p2.reboot_required, "kept with every later progress");
    // ...and after the drain, the staged image is rebooted into.
    let mut o = ours(o);
    let mut p3 = p2.clone();
    p3.step = Step::Deploying;
    o.annotations.insert(PROGRESS.into(), p3.to_annotation());
    let a = decide(&o, &policy(), NOW);
    assert!(matches!(
        progress_of(&a).map(|p| p.step),
        Some(Step::Rebooting { soft: false, .. })
    ));
}

#[test]
fn a_drain_move_drains_then_applies_live_and_uncordons_without_a_reboot() {
    let o = planned(Class::Drain);
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Cordon));
    let mut o = ours(at(o, Step::Deploying));
    o.host.staged = Some(B.into());
    let a = decide(&o, &policy(), NOW);
    assert_eq!(step_of(&a), Some(Step::Applying));
    // Uncordoned by someone before the apply: drained again.
    let mut u = at(o.clone(), Step::Applying);
    u.unschedulable = false;
    assert!(has(&decide(&u, &policy(), NOW), |a| *a == Action::Cordon));
    let mut o = at(o, Step::Applying);
    o.applied = Some(target());
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Uncordon));
    assert!(!has(&a, |a| matches!(
        a,
        Action::Reboot | Action::SoftReboot
    )));
    assert_eq!(patch_of(&a).get(REBOOT_PENDING), Some(&Some(B.to_owned())));
}

#[test]
fn a_soft_reboot_move_is_verified_by_the_soft_reboot_count_not_the_boot_id() {
    let mut o = ours(at(planned(Class::SoftReboot), Step::Deploying));
    o.host.staged = Some(B.into());
    o.host.soft_reboots = 2;
    let a = decide(&o, &policy(), NOW);
    let step = step_of(&a).unwrap();
    assert_eq!(
        step,
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: None,
            soft: true,
            soft_reboots_before: 2,
        }
    );
    let o = at(o, step);
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::SoftReboot));
    assert!(!has(&a, |a| *a == Action::Reboot));
    let asked_at = progress_of(&a).unwrap().step;
    // Soft-rebooted: same boot id, one more soft reboot, B booted: done.
    let mut o = at(o, asked_at.clone());
    o.host.soft_reboots = 3;
    o.host.booted = Some(B.into());
    o.host.staged = None;
    let a = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&a).get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    assert_eq!(condition(&a, mcn::REBOOTED), Some(("True", "Rebooted")));
    assert!(!patch_of(&a).contains_key(REBOOT_PENDING));
    // Where systemd does not count soft reboots (before 256): the target booted says so.
    let mut n = at(o.clone(), asked_at.clone());
    n.host.soft_reboots = 0;
    let a = decide(&n, &policy(), NOW);
    assert_eq!(patch_of(&a).get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    // Not yet soft-rebooted and uncordoned meanwhile: drained again, as for a reboot.
    let mut u = at(o.clone(), asked_at);
    u.host.soft_reboots = 2;
    u.host.booted = Some(A.into());
    u.host.staged = Some(B.into());
    u.unschedulable = false;
    assert!(has(&decide(&u, &policy(), NOW), |a| *a == Action::Cordon));
}

#[test]
fn a_plan_for_another_move_is_a_reboot() {
    let mut o = planned(Class::None);
    let other = NodePlan {
        config: "rendered-worker-3".into(),
        image: C.into(),
        class: Class::None,
        actions: vec![],
    };
    o.annotations
        .insert(NODE_DISRUPTION.into(), other.to_annotation());
    assert_eq!(o.class(&target()), Class::Reboot);
    assert!(has(&decide(&o, &policy(), NOW), |a| *a == Action::Cordon));
    o.annotations
        .insert(NODE_DISRUPTION.into(), "{not json".into());
    assert!(has(&decide(&o, &policy(), NOW), |a| *a == Action::Cordon));
}

#[test]
fn an_abandoned_update_restages_the_image_applied_live_not_the_booted_one() {
    // B was applied live (pending), C was being deployed, then the target went back to B.
    let mut o = planned(Class::None);
    o.annotations.insert(CURRENT_IMAGE.into(), B.into());
    o.annotations
        .insert(CURRENT_CONFIG.into(), "rendered-worker-2".into());
    o.annotations.insert(REBOOT_PENDING.into(), B.into());
    o.annotations.insert(
        PROGRESS.into(),
        Progress {
            target: Target {
                config: "rendered-worker-3".into(),
                image: C.into(),
            },
            started: None,
            reboot_required: false,
            step: Step::Deploying,
        }
        .to_annotation(),
    );
    o.host.staged = Some(C.into());
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Deploy(B.into())), "{a:?}");
}

/// A live move under restarts at any point: never cordoned, drained or rebooted; ends
/// applied, with B staged and pending.
#[derive(Debug, Clone)]
enum LiveEv {
    Pass,
    Restart,
    FailOnce,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_live_move_under_restarts_never_disrupts_and_ends_applied(
        evs in proptest::collection::vec(
            prop_oneof![4 => Just(LiveEv::Pass), 2 => Just(LiveEv::Restart), 1 => Just(LiveEv::FailOnce)],
            0..40,
        )
    ) {
        let host = FakeHost::booted(A);
        let mut o = planned(Class::Restart);
        let mut fail_next = false;
        let pass = |o: &mut Observed, fail: bool| -> Vec<Action> {
            o.host = host.status().unwrap_or_default();
            o.host.kargs = vec!["nosmt".into()];
            let actions = decide(o, &policy(), NOW);
            o.failure = None;
            o.applied = None;
            for a in &actions {
                match a {
                    Action::Annotate(p) => {
                        for (k, v) in p {
                            match v {
                                Some(v) => o.annotations.insert(k.clone(), v.clone()),
                                None => o.annotations.remove(k),
                            };
                        }
                    }
                    Action::Cordon => o.unschedulable = true,
                    Action::Deploy(i) => { let _ = host.deploy(i, None); }
                    Action::ApplyLive { target, actions } => {
                        if fail {
                            o.failure = Some(HostFailure { op: HostOp::Live, message: "EIO".into(), transient: true, attempts: 1 });
                        } else {
                            let _ = host.apply_live();
                            for op in actions { let _ = host.systemctl(op); }
                            o.applied = Some(target.clone());
                        }
                    }
                    _ => {}
                }
            }
            actions
        };
        for e in evs {
            let actions = match e {
                LiveEv::Pass => pass(&mut o, std::mem::take(&mut fail_next)),
                LiveEv::Restart => { o.applied = None; o.failure = None; vec![] }
                LiveEv::FailOnce => { fail_next = true; vec![] }
            };
            prop_assert!(!actions.iter().any(|a| matches!(a, Action::Cordon | Action::Drain | Action::Reboot | Action::SoftReboot)), "{:?}", actions);
        }
        for _ in 0..6 { pass(&mut o, false); }
        prop_assert!(!o.unschedulable);
        prop_assert_eq!(o.annotations.get(STATE).map(String::as_str), Some("Done"));
        prop_assert_eq!(o.annotations.get(CURRENT_IMAGE).map(String::as_str), Some(B));
        prop_assert_eq!(o.annotations.get(REBOOT_PENDING).map(String::as_str), Some(B));
        let s = host.lock();
        prop_assert_eq!(s.status.staged.as_deref(), Some(B));
        prop_assert_eq!(s.live_config.as_deref(), Some(B));
        prop_assert_eq!(s.status.boot_id.as_str(), "boot-0");
        prop_assert!(!s.reboot_requested && !s.soft_reboot_requested);
        prop_assert!(!s.systemctl.is_empty());
    }
}

/// B applied live (pending, staged), A booted: the node's state after a live move.
fn pending_b() -> Observed {
    let mut o = planned(Class::None);
    for (k, v) in [
        (CURRENT_IMAGE, B),
        (CURRENT_CONFIG, "rendered-worker-2"),
        (REBOOT_PENDING, B),
    ] {
        o.annotations.insert(k.into(), v.into());
    }
    o.host.staged = Some(B.into());
    o
}

#[test]
fn a_reboot_into_another_image_first_makes_the_live_applied_paths_that_images() {
    // Then C, a reboot: after the drain and the deploy, the live paths become C's before the
    // reboot (else the merge would keep B's as local changes).
    let mut o = ours(pending_b());
    for (k, v) in [(DESIRED_IMAGE, C), (DESIRED_CONFIG, "rendered-worker-3")] {
        o.annotations.insert(k.into(), v.into());
    }
    o.host.staged = Some(C.into());
    let c = Target {
        config: "rendered-worker-3".into(),
        image: C.into(),
    };
    o.annotations.insert(
        PROGRESS.into(),
        Progress {
            target: c.clone(),
            started: Some(NOW),
            reboot_required: false,
            step: Step::Rebooting {
                boot_id_before_reboot: "boot-0".into(),
                reboot_requested: None,
                soft: false,
                soft_reboots_before: 0,
            },
        }
        .to_annotation(),
    );
    let a = decide(&o, &policy(), NOW);
    let sync = a.iter().position(|a| {
        *a == Action::SyncLive {
            target: c.clone(),
            actions: vec![],
        }
    });
    let reboot = a.iter().position(|a| *a == Action::Reboot);
    assert!(sync.is_some() && sync < reboot, "{a:?}");
    // A failed sync stops the reboot and is retried (the request forgotten).
    o.annotations
        .insert(PROGRESS.into(), progress_of(&a).unwrap().to_annotation());
    o.failure = Some(HostFailure {
        op: HostOp::Live,
        message: "EIO".into(),
        transient: true,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW);
    assert!(matches!(
        progress_of(&a).map(|p| p.step),
        Some(Step::Rebooting {
            reboot_requested: None,
            ..
        })
    ));
    assert!(!has(&a, |a| *a == Action::Reboot));
}

#[test]
fn going_back_to_the_booted_image_undoes_the_live_apply_first() {
    // Desired A again (the booted image): B is unstaged, the live paths made A's, then done.
    let mut o = pending_b();
    for (k, v) in [(DESIRED_IMAGE, A), (DESIRED_CONFIG, "rendered-worker-1")] {
        o.annotations.insert(k.into(), v.into());
    }
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Deploy(A.into())), "{a:?}");
    o.host.staged = None;
    let back = Target {
        config: "rendered-worker-1".into(),
        image: A.into(),
    };
    let a = decide(&o, &policy(), NOW);
    assert_eq!(
        a,
        vec![Action::SyncLive {
            target: back.clone(),
            actions: vec![],
        }]
    );
    o.applied = Some(back);
    let a = decide(&o, &policy(), NOW);
    let p = patch_of(&a);
    assert_eq!(p.get(CURRENT_IMAGE), Some(&Some(A.to_owned())));
    assert_eq!(p.get(REBOOT_PENDING), Some(&None));
}

#[test]
fn an_image_applied_live_whose_staged_deployment_vanished_is_staged_again() {
    let mut o = pending_b();
    o.annotations.insert(DESIRED_IMAGE.into(), B.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-2".into());
    assert_eq!(
        decide(&o, &policy(), NOW),
        vec![],
        "idle while it is staged"
    );
    o.host.staged = None;
    let a = decide(&o, &policy(), NOW);
    assert!(has(&a, |a| *a == Action::Deploy(B.into())), "{a:?}");
    assert_eq!(events(&a), vec!["Restaged"]);
}

#[test]
fn a_refused_drain_move_reboots_within_its_own_slot_without_looping() {
    // A Drain move (cordoned, drained) whose live apply is refused: it holds a slot already,
    // so it drains (again) and reboots — it does not apply again.
    let mut o = ours(at(planned(Class::Drain), Step::Applying));
    o.host.staged = Some(B.into());
    o.failure = Some(HostFailure {
        op: HostOp::Live,
        message: "the staged image differs outside /etc and /var".into(),
        transient: false,
        attempts: 1,
    });
    let a = decide(&o, &policy(), NOW);
    let p = progress_of(&a).unwrap();
    assert!(p.reboot_required);
    o.failure = None;
    o.annotations.insert(PROGRESS.into(), p.to_annotation());
    let a = decide(&o, &policy(), NOW);
    assert!(!has(&a, |a| matches!(a, Action::ApplyLive { .. })), "{a:?}");
    assert!(matches!(step_of(&a), Some(Step::Draining { .. })), "{a:?}");
    // Drained: deployed image staged → a reboot, not a live apply.
    let mut p2 = progress_of(&a).unwrap();
    p2.step = Step::Deploying;
    o.annotations.insert(PROGRESS.into(), p2.to_annotation());
    let a = decide(&o, &policy(), NOW);
    assert!(matches!(step_of(&a), Some(Step::Rebooting { .. })), "{a:?}");
}

// ---------------------------------------------------------------------------------------
// The health gate and the rollback

fn gate(timeout_seconds: u64, soak_seconds: u64) -> Gate {
    Gate {
        timeout_seconds,
        soak_seconds,
        daemon_sets: vec!["kube-system/cni".into()],
        conditions: BTreeMap::new(),
    }
}

fn gated(mut o: Observed, g: &Gate) -> Observed {
    o.annotations.insert(HEALTH_GATE.into(), g.to_annotation());
    o
}

/// Ready (or not) with the CNI's pod Ready (or not).
fn health_of(ready: bool, cni: bool) -> NodeHealth {
    let mut h = NodeHealth::default();
    h.conditions.insert(
        "Ready".into(),
        (
            if ready { "True" } else { "False" }.into(),
            if ready {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            }
            .into(),
            String::new(),
        ),
    );
    h.daemon_set_pods.insert(
        "kube-system/cni".into(),
        if cni {
            health::PodHealth::Ready
        } else {
            health::PodHealth::NotReady("cni-x (Running, cni: CrashLoopBackOff)".into())
        },
    );
    h
}

/// Booted into B after the update's reboot, A kept as the rollback deployment.
fn booted_b(mut o: Observed) -> Observed {
    o.host.booted = Some(B.into());
    o.host.rollback = Some(A.into());
    o.host.boot_id = "boot-1".into();
    o.host.kargs = vec!["nosmt".into()];
    o
}

#[test]
fn a_boot_into_the_target_goes_to_the_gate_when_one_is_handed() {
    let rebooting = Step::Rebooting {
        boot_id_before_reboot: "boot-0".into(),
        reboot_requested: Some(NOW - 1000),
        soft: false,
        soft_reboots_before: 0,
    };
    // Without a gate: done at once, as before.
    let o = booted_b(ours(at(asked(), rebooting.clone())));
    let out = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&out).get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    // With one: at the gate; currentImage still A, the node still cordoned, state Working.
    let o = gated(booted_b(ours(at(asked(), rebooting))), &gate(600, 0));
    let out = decide(&o, &policy(), NOW);
    let p = patch_of(&out);
    assert!(!p.contains_key(CURRENT_IMAGE), "{p:?}");
    assert_eq!(p.get(STATE), Some(&Some("Working".to_owned())));
    assert_eq!(
        progress_of(&out).map(|p| p.step),
        Some(Step::Verifying {
            booted: NOW,
            healthy_since: None
        })
    );
    assert!(!has(&out, |a| matches!(a, Action::Uncordon)));
    assert_eq!(
        condition(&out, mcn::NODE_HEALTHY),
        Some(("Unknown", "Checking"))
    );
}

/// At the gate, by what the node shows and the time: done, soaking, waiting, rolled back
/// or Degraded.
#[test]
fn the_gate_decides_by_health_deadline_and_soak() {
    let g = gate(600, 30);
    let verifying = |healthy_since| Step::Verifying {
        booted: NOW,
        healthy_since,
    };
    let at_gate = |since, h: NodeHealth| {
        let mut o = gated(booted_b(ours(at(asked(), verifying(since)))), &g);
        o.health = Some(h);
        o
    };
    // Healthy, soak not begun: its start is recorded.
    let out = decide(
        &at_gate(None, health_of(true, true)),
        &policy(),
        NOW + 5_000,
    );
    assert_eq!(
        progress_of(&out).map(|p| p.step),
        Some(verifying(Some(NOW + 5_000)))
    );
    assert!(!has(&out, disruptive));
    // Healthy through the soak: done, uncordoned, NodeHealthy True.
    let out = decide(
        &at_gate(Some(NOW + 5_000), health_of(true, true)),
        &policy(),
        NOW + 35_000,
    );
    let p = patch_of(&out);
    assert_eq!(p.get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    assert!(has(&out, |a| matches!(a, Action::Uncordon)));
    assert_eq!(
        condition(&out, mcn::NODE_HEALTHY),
        Some(("True", "Healthy"))
    );
    // A break in the soak: it starts again.
    let out = decide(
        &at_gate(Some(NOW + 5_000), health_of(true, false)),
        &policy(),
        NOW + 20_000,
    );
    assert_eq!(progress_of(&out).map(|p| p.step), Some(verifying(None)));
    assert_eq!(
        condition(&out, mcn::NODE_HEALTHY),
        Some(("Unknown", "Checking"))
    );
    // Failing before the deadline: nothing but a later look.
    let out = decide(
        &at_gate(None, health_of(false, true)),
        &policy(),
        NOW + 599_000,
    );
    assert!(
        out.iter().all(|a| matches!(a, Action::Requeue(_))),
        "{out:?}"
    );
    // Failing at the deadline: rolling back to A, naming the check.
    let out = decide(
        &at_gate(None, health_of(true, false)),
        &policy(),
        NOW + 600_000,
    );
    match progress_of(&out).map(|p| p.step) {
        Some(Step::RollingBack {
            check,
            to,
            evidence,
            ..
        }) => {
            assert_eq!(check, Check::DaemonSet("kube-system/cni".into()));
            assert_eq!(to, A);
            assert!(evidence.contains("CrashLoopBackOff"), "{evidence}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events(&out), ["HealthGateFailed"]);
    assert!(
        !has(&out, disruptive),
        "the rollback is recorded before anything is done"
    );
    // No rollback deployment: Degraded, saying so.
    let mut o = at_gate(None, health_of(false, true));
    o.host.rollback = None;
    let out = decide(&o, &policy(), NOW + 600_000);
    assert_eq!(
        patch_of(&out).get(STATE),
        Some(&Some("Degraded".to_owned()))
    );
    let reason = patch_of(&out)
        .get(REASON)
        .cloned()
        .flatten()
        .unwrap_or_default();
    assert!(
        reason.contains("no deployment of") && reason.contains("node Ready"),
        "{reason}"
    );
    // A rollback deployment that is not what the node ran before: not rolled back to.
    let mut o = at_gate(None, health_of(false, true));
    o.host.rollback = Some(C.into());
    let out = decide(&o, &policy(), NOW + 600_000);
    assert_eq!(
        patch_of(&out).get(STATE),
        Some(&Some("Degraded".to_owned()))
    );
    // The gate removed meanwhile (turned off for the pool): done.
    let mut o = at_gate(None, health_of(false, true));
    o.annotations.remove(HEALTH_GATE);
    let out = decide(&o, &policy(), NOW + 1000);
    assert_eq!(patch_of(&out).get(CURRENT_IMAGE), Some(&Some(B.to_owned())));
    // Health not read this pass: a later look, nothing else.
    let mut o = at_gate(None, health_of(false, true));
    o.health = None;
    assert_eq!(
        decide(&o, &policy(), NOW + 700_000),
        vec![Action::Requeue(policy().failure_backoff)]
    );
}

fn rolling_back(requested: Option<Millis>) -> Step {
    Step::RollingBack {
        check: Check::NodeReady,
        evidence: "Ready=False (KubeletNotReady)".into(),
        to: A.into(),
        boot_id_before_reboot: "boot-1".into(),
        reboot_requested: requested,
    }
}

#[test]
fn a_rollback_is_requested_once_and_its_boot_verified() {
    let g = gate(600, 0);
    let o = gated(booted_b(ours(at(asked(), rolling_back(None)))), &g);
    let out = decide(&o, &policy(), NOW);
    assert_eq!(
        progress_of(&out).map(|p| p.step),
        Some(rolling_back(Some(NOW)))
    );
    let effects: Vec<&Action> = out
        .iter()
        .filter(|a| matches!(a, Action::Rollback(_) | Action::Reboot))
        .collect();
    assert_eq!(effects, [&Action::Rollback(A.into()), &Action::Reboot]);
    assert!(matches!(out[0], Action::Annotate(_)), "recorded first");
    // A restarted agent before the reboot: waits, asks nothing again.
    let o = gated(booted_b(ours(at(asked(), rolling_back(Some(NOW))))), &g);
    let out = decide(&o, &policy(), NOW + 1000);
    assert!(
        out.iter().all(|a| matches!(a, Action::Requeue(_))),
        "{out:?}"
    );
    // No reboot within the timeout: the reboot asked again, the rollback not (queued: the
    // tools toggle).
    let mut o = gated(booted_b(ours(at(asked(), rolling_back(Some(NOW))))), &g);
    o.host.rollback_queued = true;
    let out = decide(&o, &policy(), NOW + 600_000);
    assert!(has(&out, |a| matches!(a, Action::Reboot)));
    assert!(!has(&out, |a| matches!(a, Action::Rollback(_))));
    // Uncordoned meanwhile: cordoned again before the reboot.
    let mut o = gated(booted_b(at(asked(), rolling_back(None))), &g);
    o.unschedulable = false;
    let out = decide(&o, &policy(), NOW);
    assert!(has(&out, |a| matches!(a, Action::Cordon)));
    // Rebooted by someone else before the rollback's reboot was asked, into B again: the
    // rollback goes on from this boot (not Degraded), then is asked as usual.
    let mut o = gated(booted_b(ours(at(asked(), rolling_back(None)))), &g);
    o.host.boot_id = "boot-9".into();
    let out = decide(&o, &policy(), NOW);
    assert_eq!(
        progress_of(&out).map(|p| p.step),
        Some(Step::RollingBack {
            check: Check::NodeReady,
            evidence: "Ready=False (KubeletNotReady)".into(),
            to: A.into(),
            boot_id_before_reboot: "boot-9".into(),
            reboot_requested: None,
        }),
        "{out:?}"
    );
    assert!(!has(&out, |a| matches!(
        a,
        Action::Rollback(_) | Action::Reboot
    )));
    // Booted A: rolled back — uncordoned, Done, currentImage A, the record, the Event.
    let mut o = gated(ours(at(asked(), rolling_back(Some(NOW)))), &g);
    o.host.booted = Some(A.into());
    o.host.rollback = Some(B.into());
    o.host.boot_id = "boot-2".into();
    let out = decide(&o, &policy(), NOW + 60_000);
    let p = patch_of(&out);
    assert!(!p.contains_key(CURRENT_IMAGE), "currentImage stays A");
    assert_eq!(p.get(STATE), Some(&Some("Done".to_owned())));
    let record = p
        .get(ROLLED_BACK)
        .cloned()
        .flatten()
        .and_then(|v| RolledBack::parse(&v))
        .unwrap();
    assert_eq!((record.image.as_str(), record.to.as_str()), (B, A));
    assert_eq!(record.check, Check::NodeReady);
    assert_eq!(record.config, "rendered-worker-2");
    assert!(has(&out, |a| matches!(a, Action::Uncordon)));
    assert!(events(&out).contains(&"NodeRolledBack"));
    assert_eq!(
        condition(&out, mcn::NODE_HEALTHY),
        Some(("False", "RolledBack"))
    );
    // Booted something else: Degraded, naming both.
    let mut o = gated(ours(at(asked(), rolling_back(Some(NOW)))), &g);
    o.host.booted = Some(C.into());
    o.host.boot_id = "boot-2".into();
    let out = decide(&o, &policy(), NOW + 60_000);
    let reason = patch_of(&out)
        .get(REASON)
        .cloned()
        .flatten()
        .unwrap_or_default();
    assert!(reason.contains(C) && reason.contains(A), "{reason}");
    // A failed rollback: transient retried after a backoff (the request forgotten),
    // permanent Degraded.
    let mut o = gated(booted_b(ours(at(asked(), rolling_back(Some(NOW))))), &g);
    o.failure = Some(HostFailure {
        op: HostOp::Rollback,
        message: "rpm-ostreed busy".into(),
        transient: true,
        attempts: 1,
    });
    let out = decide(&o, &policy(), NOW + 1000);
    assert_eq!(progress_of(&out).map(|p| p.step), Some(rolling_back(None)));
    o.failure = Some(HostFailure {
        op: HostOp::Rollback,
        message: "No rollback available".into(),
        transient: false,
        attempts: 1,
    });
    let out = decide(&o, &policy(), NOW + 1000);
    assert_eq!(
        patch_of(&out).get(STATE),
        Some(&Some("Degraded".to_owned()))
    );
}

fn guard_record() -> machineos_boot_guard::Record {
    machineos_boot_guard::Record {
        from: "b2b2.0".into(),
        tool: "rpm-ostree".into(),
        check: machineos_boot_guard::CHECK.into(),
        evidence: "http://127.0.0.1:10248/healthz did not answer ok within 900s".into(),
        at: "2026-12-08T01:00:00Z".into(),
    }
}

#[test]
fn the_boot_guards_rollback_is_reported_as_the_agents_own_then_its_record_removed() {
    // The agent asked for the reboot into B; B booted, its kubelet never got healthy, the
    // guard rolled back and rebooted: the agent's first pass finds A booted, a new boot id,
    // and the guard's record.
    let mut o = ours(gated(
        at(
            asked(),
            Step::Rebooting {
                boot_id_before_reboot: "boot-0".into(),
                reboot_requested: Some(NOW - 1_200_000),
                soft: false,
                soft_reboots_before: 0,
            },
        ),
        &gate(600, 0),
    ));
    o.host.boot_id = "boot-2".into();
    o.host.rollback = Some(B.into());
    o.boot_guard = Some(guard_record());
    let out = decide(&o, &policy(), NOW);
    assert!(
        matches!(out.last(), Some(Action::ClearBootGuard)),
        "the record goes last, after the annotations that report it: {out:?}"
    );
    assert_eq!(
        progress_of(&out).map(|p| p.step),
        Some(Step::RolledBack { to: A.into() })
    );
    let record = patch_of(&out)
        .get(ROLLED_BACK)
        .cloned()
        .flatten()
        .and_then(|r| RolledBack::parse(&r))
        .expect("the rollback record the rollout quarantines by");
    assert_eq!(record.image, B);
    assert_eq!(record.to, A);
    assert_eq!(record.check, Check::BootGuard);
    assert!(record.evidence.contains("within 900s") && record.evidence.contains("rpm-ostree"));
    assert!(has(&out, |a| matches!(a, Action::Uncordon)), "{out:?}");
    assert!(has(
        &out,
        |a| matches!(a, Action::Event { reason, .. } if *reason == "NodeRolledBack")
    ));
    assert!(
        !has(&out, |a| matches!(a, Action::Rollback(_) | Action::Reboot)),
        "the guard did it: {out:?}"
    );

    // Restarted before the record was removed: the step says it is reported; only the file
    // goes.
    let mut after = o.clone();
    for (k, v) in patch_of(&out) {
        match v {
            Some(v) => after.annotations.insert(k, v),
            None => after.annotations.remove(&k),
        };
    }
    after.unschedulable = false;
    assert_eq!(decide(&after, &policy(), NOW), vec![Action::ClearBootGuard]);
    // Removed: a fixed point.
    after.boot_guard = None;
    assert_eq!(decide(&after, &policy(), NOW + 60_000), vec![]);
}

#[test]
fn a_node_without_current_image_re_targeted_at_what_it_rolled_back_to_keeps_its_record() {
    // Its first layered update failed: it never had a `currentImage`, so the rollout's
    // re-target at the image it runs is an update the agent finishes at once — and the record
    // that quarantines the bad image must survive that.
    let mut o = asked();
    o.annotations.remove(CURRENT_IMAGE);
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    let record = RolledBack {
        image: B.into(),
        config: "rendered-worker-2".into(),
        to: A.into(),
        check: Check::BootGuard,
        evidence: "healthz".into(),
        at: NOW,
    };
    o.annotations
        .insert(ROLLED_BACK.into(), record.to_annotation());
    let out = decide(&o, &policy(), NOW);
    let patch = patch_of(&out);
    assert_eq!(
        patch.get(CURRENT_IMAGE),
        Some(&Some(A.to_owned())),
        "{out:?}"
    );
    assert!(
        !patch.contains_key(ROLLED_BACK),
        "the record stays: {out:?}"
    );
    // A later update to another image that finishes does drop it.
    let mut next = o.clone();
    next.annotations.insert(CURRENT_IMAGE.into(), A.into());
    next.annotations.insert(DESIRED_IMAGE.into(), C.into());
    next.host.booted = Some(C.into());
    let next = at(
        next,
        Step::Rebooting {
            boot_id_before_reboot: "boot-0".into(),
            reboot_requested: Some(NOW - 1_000),
            soft: false,
            soft_reboots_before: 0,
        },
    );
    let mut next = next;
    next.host.boot_id = "boot-1".into();
    if let Some(r) = next.rendered.as_mut() {
        r.kernel_arguments.clear();
    }
    if let Some(p) = next.progress() {
        let mut p = p;
        p.target = Target {
            config: "rendered-worker-1".into(),
            image: C.into(),
        };
        next.annotations.insert(PROGRESS.into(), p.to_annotation());
    }
    let out = decide(&next, &policy(), NOW);
    assert_eq!(patch_of(&out).get(ROLLED_BACK), Some(&None), "{out:?}");
}

#[test]
fn a_boot_guard_rollback_no_update_was_booting_is_said_and_its_record_removed() {
    let mut o = asked();
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    o.boot_guard = Some(guard_record());
    let out = decide(&o, &policy(), NOW);
    assert!(
        has(
            &out,
            |a| matches!(a, Action::Event { reason, warning: true, .. } if *reason == "BootGuardRolledBack")
        ),
        "{out:?}"
    );
    assert!(matches!(out.last(), Some(Action::ClearBootGuard)));
    assert!(!patch_of(&out).contains_key(ROLLED_BACK), "{out:?}");
}

#[test]
fn rolled_back_is_a_fixed_point_until_the_rollout_names_another_target() {
    let mut o = gated(
        at(asked(), Step::RolledBack { to: A.into() }),
        &gate(600, 0),
    );
    o.annotations.insert(STATE.into(), "Done".into());
    o.host.booted = Some(A.into());
    o.host.rollback = Some(B.into());
    o.annotations.insert(
        ROLLED_BACK.into(),
        RolledBack {
            image: B.into(),
            config: "rendered-worker-2".into(),
            to: A.into(),
            check: Check::NodeReady,
            evidence: "Ready=False".into(),
            at: NOW,
        }
        .to_annotation(),
    );
    assert_eq!(decide(&o, &policy(), NOW + 3_600_000), vec![]);
    // The record removed (the quarantine lifted) while still targeted: the update starts
    // afresh.
    let mut lifted = o.clone();
    lifted.annotations.remove(ROLLED_BACK);
    lifted.unschedulable = false;
    let out = decide(&lifted, &policy(), NOW);
    assert!(has(&out, |a| matches!(a, Action::Cordon)), "{out:?}");
    assert!(matches!(
        progress_of(&out).map(|p| p.step),
        Some(Step::Draining { .. })
    ));
    // The rollout re-targets it to what it runs: the progress goes, quietly; the record stays.
    o.annotations.insert(DESIRED_IMAGE.into(), A.into());
    o.annotations
        .insert(DESIRED_CONFIG.into(), "rendered-worker-1".into());
    let out = decide(&o, &policy(), NOW);
    assert_eq!(patch_of(&out).get(PROGRESS), Some(&None));
    assert!(!patch_of(&out).contains_key(ROLLED_BACK));
    assert!(events(&out).is_empty(), "{:?}", events(&out));
}

/// Restarts, reboots and time in any order, on a node whose target never becomes healthy
/// (or always is): it is rolled back at most once, only when unhealthy, and ends on A with
/// the record — or on B, never rolled back.
#[derive(Debug, Clone)]
enum GateEv {
    Pass,
    Restart,
    Boot,
    Wait(u64),
}

fn gate_ev() -> impl Strategy<Value = GateEv> {
    prop_oneof![
        4 => Just(GateEv::Pass),
        2 => Just(GateEv::Restart),
        2 => Just(GateEv::Boot),
        2 => (0u64..400_000).prop_map(GateEv::Wait),
    ]
}

struct GateWorld {
    o: Observed,
    host: FakeHost,
    now: Millis,
    healthy: bool,
    rollbacks_queued: u32,
    /// Rollbacks asked while the rollback deployment boots next already: the real tools
    /// toggle, so each would undo the rollback (the host backends refuse to, as well).
    redundant: u32,
}

impl GateWorld {
    fn new(healthy: bool) -> GateWorld {
        GateWorld {
            o: gated(asked(), &gate(600, 30)),
            host: FakeHost::booted(A),
            now: NOW,
            healthy,
            rollbacks_queued: 0,
            redundant: 0,
        }
    }

    fn pass(&mut self) {
        self.o.host = self.host.status().unwrap_or_default();
        let booted_b = self.o.host.booted.as_deref() == Some(B);
        self.o.health = self
            .o
            .at_gate()
            .then(|| health_of(!booted_b || self.healthy, true));
        let actions = decide(&self.o, &policy(), self.now);
        self.o.drain = None;
        self.o.failure = None;
        for a in actions {
            match a {
                Action::Annotate(p) => {
                    for (k, v) in p {
                        match v {
                            Some(v) => self.o.annotations.insert(k, v),
                            None => self.o.annotations.remove(&k),
                        };
                    }
                }
                Action::Cordon => self.o.unschedulable = true,
                Action::Uncordon => self.o.unschedulable = false,
                Action::Drain => self.o.drain = Some(DrainOutcome::Drained),
                Action::Deploy(i) => {
                    let _ = self.host.deploy(&i, None);
                }
                Action::Kargs { add, remove } => {
                    let _ = self.host.kargs(&add, &remove);
                }
                Action::Rollback(to) => {
                    let before = self.host.lock().status.rollback_queued;
                    if self.host.lock().status.boots_next(&to) {
                        self.redundant += 1;
                    }
                    let _ = self.host.rollback(&to);
                    if !before && self.host.lock().status.rollback_queued {
                        self.rollbacks_queued += 1;
                    }
                }
                Action::Reboot => {
                    let _ = self.host.reboot();
                }
                _ => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn restarts_never_roll_back_twice_nor_a_healthy_node(
        healthy in any::<bool>(),
        evs in proptest::collection::vec(gate_ev(), 0..80),
    ) {
        let mut w = GateWorld::new(healthy);
        for e in evs {
            match e {
                GateEv::Pass => w.pass(),
                GateEv::Restart => {
                    w.o.drain = None;
                    w.o.failure = None;
                }
                GateEv::Boot => {
                    if w.host.lock().reboot_requested {
                        w.host.boot();
                    }
                }
                GateEv::Wait(ms) => w.now += ms as Millis,
            }
            prop_assert!(w.rollbacks_queued <= 1, "rolled back {} times", w.rollbacks_queued);
            prop_assert_eq!(w.redundant, 0, "a rollback asked while it boots next already");
            prop_assert!(!(healthy && w.rollbacks_queued > 0), "a healthy node was rolled back");
        }
        for _ in 0..30 {
            w.now += 120_000;
            w.pass();
            if w.host.lock().reboot_requested {
                w.host.boot();
            }
        }
        let booted = w.host.lock().status.booted.clone();
        if healthy {
            prop_assert_eq!(booted.as_deref(), Some(B));
            prop_assert_eq!(w.o.annotations.get(CURRENT_IMAGE).map(String::as_str), Some(B));
            prop_assert!(!w.o.annotations.contains_key(ROLLED_BACK));
        } else {
            prop_assert_eq!(w.rollbacks_queued, 1);
            prop_assert_eq!(booted.as_deref(), Some(A));
            prop_assert_eq!(w.o.annotations.get(CURRENT_IMAGE).map(String::as_str), Some(A));
            prop_assert!(w.o.annotations.contains_key(ROLLED_BACK));
            prop_assert_eq!(
                w.o.progress().map(|p| p.step),
                Some(Step::RolledBack { to: A.into() })
            );
        }
        prop_assert!(!w.o.unschedulable, "uncordoned at the end");
        prop_assert!(w.host.lock().boots <= 2, "booted {} times", w.host.lock().boots);
    }
}
