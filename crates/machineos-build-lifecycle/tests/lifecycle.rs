//! The lifecycle of issue 14, row by row, as table tests of `decide` (no I/O).

mod common;

use std::collections::BTreeMap;

use common::*;
use machineos_build_lifecycle::vocab;
use machineos_build_lifecycle::*;
use machineos_diagnostics::{Classified, Retry};

#[test]
fn a_pool_that_opts_in_gets_a_build_that_succeeds_and_is_recorded() {
    let mut o = world(vec![pool("worker", 1)]);
    let t = target(&o, 0);
    assert!(t.starts_with("worker-") && t.len() == "worker-".len() + 32);

    // 1. The registry is asked first.
    let a = decide(&o, NOW);
    assert_eq!(
        mutations(&a),
        vec![&Action::CheckRegistry {
            build: t.clone(),
            pullspec: format!("registry.local:5000/os/worker:{t}"),
            push_secret: "push".into(),
        }]
    );
    apply(&mut o, &a, NOW);

    // 2. Absent: create with the MCO's labels and owner, and start on the native builder.
    let a = decide(&o, NOW);
    assert_eq!(creates(&a), vec![t.clone()]);
    assert_eq!(starts(&a), vec![t.clone()]);
    let Some(Action::CreateBuild {
        labels,
        annotations,
        owner,
        rendered_image_push_spec,
        ..
    }) = a.iter().find(|a| matches!(a, Action::CreateBuild { .. }))
    else {
        unreachable!()
    };
    assert_eq!(
        labels,
        &vec![
            (vocab::TARGET_POOL_LABEL.into(), "worker".into()),
            (
                vocab::RENDERED_MACHINE_CONFIG_LABEL.into(),
                "rendered-worker-1".into()
            ),
            (vocab::MACHINE_OS_CONFIG_LABEL.into(), "worker".into()),
        ]
    );
    assert!(annotations.contains(&(
        vocab::RENDERED_IMAGE_PUSH_SECRET_ANNOTATION.into(),
        "push".into()
    )));
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_deref()
        ),
        ("MachineOSConfig", "worker", Some("uid-mosc-worker"))
    );
    assert_eq!(
        rendered_image_push_spec,
        &format!("registry.local:5000/os/worker:{t}")
    );
    let Some(Action::StartBuild {
        backend,
        push,
        base_image_pull_secret,
        inputs,
        ..
    }) = a.iter().find(|a| matches!(a, Action::StartBuild { .. }))
    else {
        unreachable!()
    };
    assert_eq!(*backend, Backend::Native);
    assert_eq!(push.extra_tag.as_deref(), Some("latest"));
    assert_eq!(base_image_pull_secret.as_deref(), Some("pull"));
    assert_eq!(build_name("worker", inputs), t);
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "BuildPending")
    );
    assert!(events(&a).iter().any(|(r, _)| r == "BuildStarted"));
    apply(&mut o, &a, NOW);

    // 3. Pending → Prepared.
    let a = decide(&o, NOW);
    let u = status_of(&a, &t).unwrap();
    assert_eq!((u.from, u.to), (Phase::Initial, Phase::Prepared));
    assert!(starts(&a).is_empty());
    apply(&mut o, &a, NOW);

    // 3b. Still pending, and the backend says why: the pool's condition carries it; the
    // build's status is not rewritten.
    let why = "pod build-x-1 container build waiting: ImagePullBackOff: back-off pulling image";
    build_mut(&mut o, &t).backend = Some(BackendStatus::Pending {
        detail: Some(why.into()),
    });
    let a = decide(&o, NOW);
    assert!(status_of(&a, &t).is_none());
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "BuildPending")
    );
    assert!(c.message.ends_with(why), "{}", c.message);
    apply(&mut o, &a, NOW);

    // 4. Running → Building, buildStart from the backend.
    build_mut(&mut o, &t).backend = Some(BackendStatus::Running { since: NOW + 1 });
    let a = decide(&o, NOW + 2);
    let u = status_of(&a, &t).unwrap();
    assert_eq!(
        (u.from, u.to, u.build_start),
        (Phase::Prepared, Phase::Building, Some(NOW + 1))
    );
    let building = u.conditions.iter().find(|c| c.type_ == "Building").unwrap();
    assert_eq!(
        (
            building.status.as_str(),
            building.reason.as_str(),
            building.message.as_str()
        ),
        ("True", "Building", "Image Build In Progress")
    );
    assert_eq!(building.observed_generation, 1);
    assert_eq!(
        pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED)
            .unwrap()
            .reason,
        "Building"
    );
    apply(&mut o, &a, NOW + 2);

    // 5. Succeeded: status, MachineOSConfig status, MachineOSImage, pool condition.
    build_mut(&mut o, &t).backend = Some(BackendStatus::Succeeded {
        image: image('d'),
        at: NOW + 9,
    });
    let a = decide(&o, NOW + 10);
    let u = status_of(&a, &t).unwrap();
    assert_eq!(
        (u.to, u.build_start, u.build_end),
        (Phase::Succeeded, Some(NOW + 1), Some(NOW + 9))
    );
    assert_eq!(u.digested_image.as_deref(), Some(image('d').image.as_str()));
    assert!(a.contains(&Action::UpdateMachineOSConfigStatus {
        machine_os_config: "worker".into(),
        current_image_pull_spec: image('d').image,
        machine_os_build: t.clone(),
        observed_generation: 1,
    }));
    assert!(a.iter().any(
        |a| matches!(a, Action::CreateMachineOSImage { name, base_image, image: img, previous_image, .. }
        if *name == t && *base_image == base() && img.architectures.len() == 1
            // The pool's first image: nothing before it.
            && previous_image.is_none())
    ));
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "BuildSuccess")
    );
    assert!(events(&a).iter().any(|(r, _)| r == "BuildCompleted"));
    apply(&mut o, &a, NOW + 10);

    // 6. Steady: nothing more.
    let a = decide(&o, NOW + 20);
    assert!(mutations(&a).is_empty(), "{a:#?}");
}

#[test]
fn the_same_config_twice_is_one_build() {
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let t = target(&o, 0);
    build_mut(&mut o, &t).backend = Some(BackendStatus::Succeeded {
        image: image('d'),
        at: NOW + 5,
    });
    converge(&mut o, 6);
    // The same MachineConfigs again: the pool is re-rendered to the same content, even under
    // another name; the target is the same build, already recorded.
    o.pools[0].pool.rendered_config = Some("rendered-worker-1b".into());
    o.pools[0].rendered.as_mut().unwrap().name = "rendered-worker-1b".into();
    assert_eq!(target(&o, 0), t);
    let a = decide(&o, NOW + 30);
    assert!(creates(&a).is_empty() && starts(&a).is_empty(), "{a:#?}");
    assert_eq!(o.pools[0].builds.len(), 1);
}

#[test]
fn a_config_edit_makes_a_new_build_and_interrupts_the_old_one_first() {
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let old = target(&o, 0);
    build_mut(&mut o, &old).backend = Some(BackendStatus::Running { since: NOW });
    converge(&mut o, 6);

    o.pools[0] = PoolObserved {
        builds: o.pools[0].builds.clone(),
        opt_in: o.pools[0].opt_in.clone(),
        ..pool("worker", 2)
    };
    let new = target(&o, 0);
    assert_ne!(new, old);
    let rounds = converge(&mut o, 6);
    let a: Vec<Action> = rounds.concat();
    let pos = |f: &dyn Fn(&Action) -> bool| a.iter().position(f).unwrap();
    let cancel = pos(&|x| matches!(x, Action::CancelBuild { build } if *build == old));
    let interrupted = pos(
        &|x| matches!(x, Action::SetBuildStatus(u) if u.build == old && u.to == Phase::Interrupted),
    );
    let create = pos(&|x| matches!(x, Action::CreateBuild { name, .. } if *name == new));
    assert!(
        cancel < create && interrupted < create,
        "the old build stops before the new one exists"
    );
    let u = status_of(&a, &old).unwrap();
    assert_eq!(u.from, Phase::Building);
    assert!(u.build_end.is_some());
    let c = u
        .conditions
        .iter()
        .find(|c| c.type_ == "Interrupted")
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "Interrupted")
    );
    assert!(
        events(&a)
            .iter()
            .any(|(r, m)| r == "BuildInterrupted" && m.contains(&new))
    );
    assert!(
        events(&a).iter().any(|(r, m)| r == "PoolConfigChanged"
            && m.contains("rendered-worker-1 to rendered-worker-2"))
    );
    let active: Vec<_> = o.pools[0]
        .builds
        .iter()
        .filter(|b| b.phase.is_active())
        .map(|b| b.name.clone())
        .collect();
    assert_eq!(active, vec![new]);
}

#[test]
fn the_rebuild_annotation_rebuilds_once_and_is_removed() {
    let mut o = world(vec![pool("worker", 1)]);
    let t0 = target(&o, 0);
    o.pools[0]
        .registry
        .insert(t0, RegistryObservation::Present(image('d')));
    converge(&mut o, 6);
    let t = target(&o, 0);
    assert_eq!(o.pools[0].builds[0].phase, Phase::Succeeded);

    mosc_mut(&mut o, 0)
        .annotations
        .insert(vocab::REBUILD_ANNOTATION.into(), String::new());
    let a = decide(&o, NOW);
    assert_eq!(
        mutations(&a),
        vec![
            &Action::DeleteBuild { build: t.clone() },
            &Action::Event {
                object: ObjectRef {
                    uid: Some("uid-mosc-worker".into()),
                    ..ObjectRef::cluster("MachineOSConfig", "worker")
                },
                type_: EventType::Normal,
                reason: "RebuildRequested".into(),
                message: format!("Rebuild requested: deleting MachineOSBuild {t}"),
            }
        ]
    );
    apply(&mut o, &a, NOW);
    // The registry still has the image, but a rebuild never reuses it.
    let a = decide(&o, NOW);
    assert_eq!(
        (creates(&a), starts(&a)),
        (vec![t.clone()], vec![t.clone()])
    );
    assert!(!a.iter().any(|a| matches!(a, Action::CheckRegistry { .. })));
    assert!(a.contains(&Action::RemoveRebuildAnnotation {
        machine_os_config: "worker".into()
    }));
    apply(&mut o, &a, NOW);
    let rounds = converge(&mut o, 6);
    assert!(
        rounds
            .iter()
            .all(|r| creates(r).is_empty() && starts(r).is_empty())
    );

    // On a build that is already running, the annotation is honoured by it: just removed.
    mosc_mut(&mut o, 0)
        .annotations
        .insert(vocab::REBUILD_ANNOTATION.into(), String::new());
    let a = decide(&o, NOW);
    assert_eq!(
        mutations(&a),
        vec![&Action::RemoveRebuildAnnotation {
            machine_os_config: "worker".into()
        }]
    );
}

#[test]
fn an_image_already_in_the_registry_is_reused_without_a_build() {
    let mut o = world(vec![pool("worker", 1)]);
    let t = target(&o, 0);
    o.pools[0]
        .registry
        .insert(t.clone(), RegistryObservation::Present(image('e')));
    let a = decide(&o, NOW);
    assert_eq!(creates(&a), vec![t.clone()]);
    assert!(starts(&a).is_empty());
    let u = status_of(&a, &t).unwrap();
    assert_eq!(
        (u.from, u.to, u.build_start, u.build_end),
        (Phase::Initial, Phase::Succeeded, None, None)
    );
    assert_eq!(u.digested_image.as_deref(), Some(image('e').image.as_str()));
    assert!(a.iter().any(|a| matches!(a, Action::UpdateMachineOSConfigStatus { current_image_pull_spec, .. } if *current_image_pull_spec == image('e').image)));
    assert!(
        a.iter()
            .any(|a| matches!(a, Action::CreateMachineOSImage { .. }))
    );
    apply(&mut o, &a, NOW);
    assert!(mutations(&decide(&o, NOW)).is_empty());
}

#[test]
fn a_succeeded_build_is_checked_in_the_registry_before_it_is_adopted() {
    // The pool goes back to a config whose build succeeded earlier.
    let mut o = world(vec![pool("worker", 1)]);
    let t = target(&o, 0);
    o.pools[0].builds.push(BuildObserved {
        name: t.clone(),
        generation: 1,
        created: NOW - 100,
        rendered_config: "rendered-worker-1".into(),
        phase: Phase::Succeeded,
        build_start: Some(NOW - 100),
        build_end: Some(NOW - 50),
        digested_image: Some(image('f').image),
        backend: None,
        retries: Retries::default(),
    });
    let a = decide(&o, NOW);
    assert!(matches!(mutations(&a)[..], [Action::CheckRegistry { .. }]));
    // Present → adopted.
    let mut present = o.clone();
    present.pools[0]
        .registry
        .insert(t.clone(), RegistryObservation::Present(image('f')));
    let a = decide(&present, NOW);
    assert!(a.iter().any(|a| matches!(a, Action::UpdateMachineOSConfigStatus { machine_os_build, .. } if *machine_os_build == t)));
    assert!(creates(&a).is_empty() && starts(&a).is_empty());
    // Gone → deleted, then built again.
    o.pools[0]
        .registry
        .insert(t.clone(), RegistryObservation::Absent);
    let a = decide(&o, NOW);
    assert_eq!(mutations(&a)[0], &Action::DeleteBuild { build: t.clone() });
    apply(&mut o, &a, NOW);
    let a = decide(&o, NOW);
    assert_eq!(starts(&a), vec![t]);
    // A registry error is never a reason to rebuild (`docs/mco-behaviour.md` §2.7).
    let mut denied = present.clone();
    let td = target(&denied, 0);
    denied.pools[0].registry.insert(
        td,
        RegistryObservation::Error {
            message: "401 unauthorized".into(),
            transient: false,
        },
    );
    let a = decide(&denied, NOW);
    assert!(
        creates(&a).is_empty()
            && starts(&a).is_empty()
            && !a.iter().any(|a| matches!(a, Action::DeleteBuild { .. }))
    );
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).unwrap();
    assert!(
        c.status == "True"
            && c.message.contains("Secret machineos/push")
            && c.message.contains("401"),
        "{c:?}"
    );
    assert_eq!(requeue(&a).unwrap().retry, Retry::Permanent);
    let mut flaky = present;
    let tf = target(&flaky, 0);
    flaky.pools[0].registry.insert(
        tf,
        RegistryObservation::Error {
            message: "503".into(),
            transient: true,
        },
    );
    // A registry that does not answer (unreachable, 5xx) is not a degraded pool, but it is
    // said: RegistryAccess=False on the MachineOSConfig and one Warning Event, not repeated.
    let a = decide(&flaky, NOW);
    let [
        Action::SetMachineOSConfigCondition { condition, .. },
        Action::Event { .. },
    ] = mutations(&a)[..]
    else {
        panic!("{a:#?}")
    };
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        (
            vocab::REGISTRY_ACCESS,
            "False",
            vocab::REASON_REGISTRY_UNAVAILABLE
        )
    );
    assert!(condition.message.ends_with(": 503"), "{condition:?}");
    assert!(a.iter().any(|a| matches!(a, Action::Event { reason, .. }
        if reason == vocab::REASON_REGISTRY_UNAVAILABLE)));
    assert_eq!(requeue(&a).unwrap().retry, Retry::Transient);
    apply(&mut flaky, &a, NOW);
    let a = decide(&flaky, NOW);
    assert!(mutations(&a).is_empty(), "not repeated: {a:#?}");
}

#[test]
fn nothing_new_starts_while_the_pool_is_degraded_for_another_reason() {
    for type_ in vocab::BLOCKING_POOL_CONDITIONS {
        let mut o = world(vec![pool("worker", 1)]);
        o.pools[0].pool.conditions.push(PoolCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        });
        let a = decide(&o, NOW);
        assert!(mutations(&a).is_empty(), "{type_}: {a:#?}");
        assert_eq!(
            requeue(&a).map(|r| (r.reason, r.retry)),
            Some(("PoolDegraded", Retry::Permanent))
        );
    }
    // ImageBuildDegraded alone does not block (a retry must be possible).
    let mut o = world(vec![pool("worker", 1)]);
    o.pools[0].pool.conditions.push(PoolCondition {
        type_: vocab::IMAGE_BUILD_DEGRADED.into(),
        status: "True".into(),
        ..Default::default()
    });
    assert!(!mutations(&decide(&o, NOW)).is_empty());

    // A build lost by a restart is not restarted while degraded, but one that finished is
    // still recorded.
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let t = target(&o, 0);
    o.pools[0].pool.conditions.push(PoolCondition {
        type_: "RenderDegraded".into(),
        status: "True".into(),
        ..Default::default()
    });
    build_mut(&mut o, &t).backend = None;
    assert!(starts(&decide(&o, NOW)).is_empty());
    build_mut(&mut o, &t).backend = Some(BackendStatus::Succeeded {
        image: image('a'),
        at: NOW + 3,
    });
    assert_eq!(
        status_of(&decide(&o, NOW + 4), &t).map(|u| u.to),
        Some(Phase::Succeeded)
    );
}

/// A node that failed its update (`NodeDegraded=True`, set by the rollout) does not stop the
/// build that would fix it: a new rendered config builds, a rebuild is honoured, an
/// interrupted build restarts (unlike the MCO, which gates on `NodeDegraded` too).
#[test]
fn a_degraded_node_does_not_block_the_build_that_fixes_it() {
    let node_degraded = PoolCondition {
        type_: "NodeDegraded".into(),
        status: "True".into(),
        reason: "NodeDegraded".into(),
        message: "Node node-05 is reporting: booted the wrong image".into(),
    };
    assert!(!vocab::BLOCKING_POOL_CONDITIONS.contains(&"NodeDegraded"));
    // A new rendered config: checked in the registry, created, started.
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    o.pools[0].pool.conditions.push(node_degraded.clone());
    let old = target(&o, 0);
    let next = pool("worker", 2);
    o.pools[0].pool.rendered_config = next.pool.rendered_config;
    o.pools[0].rendered = next.rendered;
    let t = target(&o, 0);
    assert_ne!(t, old);
    let all = converge(&mut o, 6).concat();
    assert!(creates(&all).contains(&t), "{all:#?}");
    assert!(starts(&all).contains(&t), "{all:#?}");
    assert!(!all.iter().any(|a| matches!(
        a,
        Action::Requeue(Requeue {
            reason: "PoolDegraded",
            ..
        })
    )));
    // A rebuild of a failed target is honoured.
    build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
        error: Classified::permanent("InvalidConfig", "bad"),
        at: NOW + 9,
    });
    let a = decide(&o, NOW + 10);
    apply(&mut o, &a, NOW + 10);
    mosc_mut(&mut o, 0)
        .annotations
        .insert(vocab::REBUILD_ANNOTATION.into(), String::new());
    let a = decide(&o, NOW + 11);
    assert!(
        a.contains(&Action::DeleteBuild { build: t.clone() }),
        "{a:#?}"
    );
}

/// A MachineOSConfig deleted mid-build: the pool's build conditions do not keep saying
/// "Image Build In Progress" forever — they are set False (`NotLayered`), once, and a pool
/// that never had them gets none.
#[test]
fn a_pool_no_longer_opted_in_has_its_build_conditions_cleared() {
    let mut o = world(vec![pool("worker", 1)]);
    for _ in 0..3 {
        let a = decide(&o, NOW);
        apply(&mut o, &a, NOW);
    }
    let building = o.pools[0]
        .pool
        .condition(vocab::IMAGE_BUILD_DEGRADED)
        .cloned();
    assert!(building.is_some(), "the pool has its build condition");
    o.pools[0].opt_in = None;
    let a = decide(&o, NOW);
    let set: Vec<&PoolCondition> = a
        .iter()
        .filter_map(|a| match a {
            Action::SetPoolCondition { condition, .. } => Some(condition),
            _ => None,
        })
        .collect();
    assert_eq!(set.len(), 1, "{a:#?}");
    assert_eq!(
        (
            set[0].type_.as_str(),
            set[0].status.as_str(),
            set[0].reason.as_str()
        ),
        (
            vocab::IMAGE_BUILD_DEGRADED,
            "False",
            vocab::REASON_NOT_LAYERED
        )
    );
    assert!(
        a.iter().all(|a| !matches!(a, Action::Event { .. })),
        "nothing recovered: {a:#?}"
    );
    apply(&mut o, &a, NOW);
    assert!(mutations(&decide(&o, NOW)).is_empty(), "written once");
    // Never opted in: no condition appears.
    let mut o = world(vec![pool("plain", 1)]);
    o.pools[0].opt_in = None;
    assert!(mutations(&decide(&o, NOW)).is_empty());
}

#[test]
fn a_restarted_controller_adopts_the_build_in_flight() {
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let t = target(&o, 0);
    build_mut(&mut o, &t).backend = Some(BackendStatus::Running { since: NOW });
    converge(&mut o, 6);
    // The in-process build died with the controller: start it again, same name, no new build.
    build_mut(&mut o, &t).backend = None;
    let a = decide(&o, NOW + 5);
    assert_eq!((creates(&a), starts(&a)), (vec![], vec![t.clone()]));
    assert!(status_of(&a, &t).is_none());
}

fn legacy_pool(data: Option<&[(&str, &str)]>) -> PoolObserved {
    let mut p = pool("worker", 1);
    p.pool
        .labels
        .insert(vocab::LAYERING_ENABLED_LABEL.into(), String::new());
    p.opt_in = Some(OptIn::Legacy(LegacyOptIn {
        config_map: data.map(|d| {
            d.iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect::<BTreeMap<_, _>>()
        }),
    }));
    p
}

const LEGACY: &[(&str, &str)] = &[
    ("finalImagePullspec", "registry.local:5000/os/worker:latest"),
    ("finalImagePushSecretName", "push"),
    ("baseImagePullSecretName", "pull"),
];

#[test]
fn the_legacy_label_and_configmap_build_natively_and_annotate_the_pool() {
    let mut o = world(vec![legacy_pool(Some(LEGACY))]);
    let t = target(&o, 0);
    let rounds = converge(&mut o, 6);
    let a = rounds.concat();
    let Some(Action::CreateBuild {
        owner,
        machine_os_config,
        ..
    }) = a.iter().find(|a| matches!(a, Action::CreateBuild { .. }))
    else {
        panic!("no build: {a:#?}")
    };
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.uid.as_deref(),
            machine_os_config.as_str()
        ),
        ("MachineConfigPool", Some("uid-pool-worker"), "worker")
    );
    assert!(a.iter().any(|a| matches!(
        a,
        Action::StartBuild {
            backend: Backend::Native,
            ..
        }
    )));
    let cond = |o: &Observed, t: &str| o.pools[0].pool.condition(t).map(|c| c.status.clone());
    assert_eq!(cond(&o, "BuildPending").as_deref(), Some("True"));
    assert_eq!(cond(&o, "BuildSuccess").as_deref(), Some("False"));

    build_mut(&mut o, &t).backend = Some(BackendStatus::Running { since: NOW });
    converge(&mut o, 6);
    assert_eq!(cond(&o, "Building").as_deref(), Some("True"));
    assert_eq!(cond(&o, "BuildPending").as_deref(), Some("False"));

    build_mut(&mut o, &t).backend = Some(BackendStatus::Succeeded {
        image: image('c'),
        at: NOW + 9,
    });
    let a = decide(&o, NOW + 10);
    assert!(a.contains(&Action::SetPoolAnnotation {
        pool: "worker".into(),
        key: vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION.into(),
        value: image('c').image,
    }));
    assert!(
        !a.iter()
            .any(|a| matches!(a, Action::UpdateMachineOSConfigStatus { .. }))
    );
    apply(&mut o, &a, NOW + 10);
    for (t, want) in [
        ("BuildPending", "False"),
        ("Building", "False"),
        ("BuildSuccess", "True"),
        ("BuildFailed", "False"),
        ("ImageBuildDegraded", "False"),
    ] {
        assert_eq!(cond(&o, t).as_deref(), Some(want), "{t}");
    }
    assert!(mutations(&decide(&o, NOW + 11)).is_empty());
}

#[test]
fn configuration_errors_are_a_condition_and_an_event_naming_the_object_and_field() {
    type Edit = fn(&mut Observed);
    let mosc_cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "missing push secret",
            |o| {
                o.secrets.remove("push");
            },
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.renderedImagePushSecret.name: Secret machineos/push not found",
        ),
        (
            "unusable push secret",
            |o| {
                o.secrets.insert(
                    "push".into(),
                    SecretState::Invalid(
                        "type is Opaque, not kubernetes.io/dockerconfigjson".into(),
                    ),
                );
            },
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.renderedImagePushSecret.name: Secret machineos/push is not usable: type is Opaque",
        ),
        (
            "missing pull secret",
            |o| {
                o.secrets.remove("pull");
            },
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.baseImagePullSecret.name: Secret machineos/pull not found",
        ),
        (
            "bad push spec",
            |o| mosc_mut(o, 0).rendered_image_push_spec = "registry.local/os@sha256:00".into(),
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.renderedImagePushSpec: \"registry.local/os@sha256:00\" has a digest",
        ),
        (
            "unreadable field",
            |o| {
                mosc_mut(o, 0).unreadable = Some((
                    "spec.containerFile[0].content".into(),
                    "invalid type: integer `3`, expected a string".into(),
                ))
            },
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.containerFile[0].content: invalid type: integer `3`, expected a string",
        ),
        (
            "unknown builder",
            |o| mosc_mut(o, 0).image_builder_type = "PodImageBuilder".into(),
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.imageBuilder.imageBuilderType: unsupported value \"PodImageBuilder\"",
        ),
        (
            "Job builder",
            |o| mosc_mut(o, 0).image_builder_type = "Job".into(),
            "BuilderNotSupported",
            "MachineOSConfig worker: spec.imageBuilder.imageBuilderType: the Job builder is not supported yet by this controller (supported: Native); no build was started",
        ),
        (
            "duplicate containerfile",
            |o| {
                mosc_mut(o, 0).containerfiles =
                    vec![("".into(), "a".into()), ("NoArch".into(), "b".into())]
            },
            "InvalidConfiguration",
            "MachineOSConfig worker: spec.containerFile[1].containerfileArch: duplicate value \"NoArch\"",
        ),
        (
            "bad retention",
            |o| {
                mosc_mut(o, 0)
                    .annotations
                    .insert(vocab::RETAIN_SUCCEEDED_ANNOTATION.into(), "many".into());
            },
            "InvalidConfiguration",
            "MachineOSConfig worker: metadata.annotations[machineos.io/retain-succeeded-builds]: \"many\" is not a whole number",
        ),
        (
            "pool name too long for a tag",
            |o| {
                let long = "w".repeat(100);
                o.pools[0].pool.name = long.clone();
                mosc_mut(o, 0).name = long;
            },
            "InvalidConfiguration",
            "metadata.name: is too long",
        ),
    ];
    type LegacyCase<'a> = (&'a str, Option<&'a [(&'a str, &'a str)]>, &'a str, &'a str);
    let legacy_cases: Vec<LegacyCase> = vec![
        (
            "missing ConfigMap",
            None,
            "InvalidConfiguration",
            "ConfigMap machineos/on-cluster-build-config: not found; pool worker has the label machineconfiguration.openshift.io/layering-enabled",
        ),
        (
            "missing pullspec",
            Some(&[("finalImagePushSecretName", "push")]),
            "InvalidConfiguration",
            "ConfigMap machineos/on-cluster-build-config: data.finalImagePullspec: is required",
        ),
        (
            "missing push secret key",
            Some(&[("finalImagePullspec", "r.io/a/b")]),
            "InvalidConfiguration",
            "ConfigMap machineos/on-cluster-build-config: data.finalImagePushSecretName: is required",
        ),
        (
            "custom-pod-builder",
            Some(&[
                ("finalImagePullspec", "r.io/a/b"),
                ("finalImagePushSecretName", "push"),
                ("imageBuilderType", "custom-pod-builder"),
            ]),
            "BuilderNotSupported",
            "ConfigMap machineos/on-cluster-build-config: data.imageBuilderType: the Job builder is not supported yet",
        ),
        (
            "openshift-image-builder",
            Some(&[
                ("finalImagePullspec", "r.io/a/b"),
                ("finalImagePushSecretName", "push"),
                ("imageBuilderType", "openshift-image-builder"),
            ]),
            "BuilderNotSupported",
            "data.imageBuilderType: the OpenShiftBuild builder is not supported yet",
        ),
        (
            "bad builder",
            Some(&[
                ("finalImagePullspec", "r.io/a/b"),
                ("finalImagePushSecretName", "push"),
                ("imageBuilderType", "kaniko"),
            ]),
            "InvalidConfiguration",
            "data.imageBuilderType: unsupported value \"kaniko\"",
        ),
    ];
    // Each row: the world with the cause, the same world with the cause fixed (None where
    // the fix is another object: a pool renamed), the reason and message said.
    type Case<'a> = (String, Observed, Option<Observed>, &'a str, &'a str);
    let mut cases: Vec<Case> = Vec::new();
    for (name, edit, reason, message) in mosc_cases {
        let mut o = world(vec![pool("worker", 1)]);
        edit(&mut o);
        let fixed = (o.pools[0].pool.name == "worker").then(|| world(vec![pool("worker", 1)]));
        cases.push((name.into(), o, fixed, reason, message));
    }
    for (name, data, reason, message) in legacy_cases {
        cases.push((
            name.into(),
            world(vec![legacy_pool(data)]),
            Some(world(vec![legacy_pool(Some(LEGACY))])),
            reason,
            message,
        ));
    }
    for (name, mut o, fixed, reason, message) in cases {
        let a = decide(&o, NOW);
        assert!(
            creates(&a).is_empty() && starts(&a).is_empty(),
            "{name}: built anyway"
        );
        let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED)
            .unwrap_or_else(|| panic!("{name}: no condition"));
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", reason),
            "{name}"
        );
        assert!(
            c.message.contains(message),
            "{name}: {:?} lacks {message:?}",
            c.message
        );
        let ev = a.iter().find_map(|a| match a {
            Action::Event {
                object,
                type_: EventType::Warning,
                reason,
                message,
                ..
            } if reason == "ConfigReconcileFailed" => Some((object.clone(), message.clone())),
            _ => None,
        });
        let (object, ev_message) = ev.unwrap_or_else(|| panic!("{name}: no Event"));
        assert_eq!(ev_message, c.message, "{name}");
        assert!(
            c.message.starts_with(&format!("{} ", object.kind)),
            "{name}: event on {object:?}"
        );
        assert_eq!(
            requeue(&a).map(|r| (r.reason, r.retry)),
            Some((reason, Retry::Permanent)),
            "{name}"
        );
        // Reported once: the next pass sees the condition and stays quiet.
        apply(&mut o, &a, NOW);
        assert!(
            mutations(&decide(&o, NOW)).is_empty(),
            "{name}: reported twice"
        );

        // Fixed: the first pass clears what the cause said, with `BuildRecovered`.
        let Some(mut fixed) = fixed else { continue };
        carry_conditions(&o, &mut fixed);
        let a = decide(&fixed, NOW + 1);
        apply(&mut fixed, &a, NOW + 1);
        let c = fixed.pools[0]
            .pool
            .condition(vocab::IMAGE_BUILD_DEGRADED)
            .unwrap_or_else(|| panic!("{name}: no condition after the fix"));
        assert_eq!(
            c.status, "False",
            "{name}: still degraded after the fix: {a:#?}"
        );
        assert!(
            events(&a).iter().any(|(r, _)| r == "BuildRecovered"),
            "{name}: no BuildRecovered: {a:#?}"
        );
        if let Some(OptIn::MachineOSConfig(m)) = &fixed.pools[0].opt_in
            && let Some(r) = m.condition(vocab::REGISTRY_ACCESS)
        {
            assert_ne!(
                r.status, "False",
                "{name}: RegistryAccess still False: {r:?}"
            );
        }
    }
}

/// The conditions `from` carries (pool and MachineOSConfig), onto the same objects of `to`:
/// the objects as they are once the fix is made (a Secret created, a field edited) — their
/// status still what the cause made it.
fn carry_conditions(from: &Observed, to: &mut Observed) {
    for (f, t) in from.pools.iter().zip(to.pools.iter_mut()) {
        t.pool.conditions = f.pool.conditions.clone();
        if let (Some(OptIn::MachineOSConfig(fm)), Some(OptIn::MachineOSConfig(tm))) =
            (&f.opt_in, &mut t.opt_in)
        {
            tm.conditions = fm.conditions.clone();
        }
    }
}

#[test]
fn fixing_the_configuration_recovers_the_pool() {
    let mut o = world(vec![pool("worker", 1)]);
    o.secrets.remove("push");
    converge(&mut o, 3);
    o.secrets.insert("push".into(), SecretState::Usable);
    let a = converge(&mut o, 6).concat();
    assert_eq!(starts(&a).len(), 1);
    assert!(events(&a).iter().any(|(r, _)| r == "BuildRecovered"));
    assert_eq!(
        o.pools[0]
            .pool
            .condition(vocab::IMAGE_BUILD_DEGRADED)
            .unwrap()
            .status,
        "False"
    );
}

#[test]
fn the_job_builder_builds_once_its_backend_is_supported() {
    let mut o = world(vec![pool("worker", 1)]);
    mosc_mut(&mut o, 0).image_builder_type = "Job".into();
    o.supported_backends.push(Backend::Job);
    let a = converge(&mut o, 6).concat();
    assert!(a.iter().any(|a| matches!(
        a,
        Action::StartBuild {
            backend: Backend::Job,
            ..
        }
    )));
}

#[test]
fn a_failed_build_fails_with_the_engines_message() {
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let t = target(&o, 0);
    let msg = "error at $.spec.config.storage.files.3.path: path not absolute";
    build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
        error: Classified::permanent("InvalidConfig", msg),
        at: NOW + 4,
    });
    let a = decide(&o, NOW + 5);
    let u = status_of(&a, &t).unwrap();
    assert_eq!(u.to, Phase::Failed);
    let f = u.conditions.iter().find(|c| c.type_ == "Failed").unwrap();
    assert_eq!(
        (f.status.as_str(), f.reason.as_str(), f.message.as_str()),
        ("True", "Failed", msg)
    );
    assert!(u.digested_image.is_none() && u.build_end == Some(NOW + 4));
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).unwrap();
    assert_eq!(c.status, "True");
    assert_eq!(
        c.message,
        format!("Failed to build OS image for pool worker (MachineOSBuild: {t}): Failed: {msg}")
    );
    let ev = events(&a);
    assert!(
        ev.iter()
            .any(|(r, m)| r == "BuildFailed" && m.contains(msg))
    );
    assert!(ev.iter().any(|(r, _)| r == "BuildDegraded"));
    assert!(!a.iter().any(|a| matches!(
        a,
        Action::UpdateMachineOSConfigStatus { .. } | Action::CreateMachineOSImage { .. }
    )));
    apply(&mut o, &a, NOW + 5);
    // Failed stays failed: no retry until the inputs change or a rebuild is asked for.
    let a = decide(&o, NOW + 6);
    assert!(mutations(&a).is_empty(), "{a:#?}");
    assert_eq!(
        requeue(&a).map(|r| (r.reason, r.retry)),
        Some(("BuildFailed", Retry::Permanent))
    );
}

/// A backend's failure keeps its class: a permanent one is booked `BuildFailed` and waits
/// for a change; a transient one (a registry outage) under its own reason, looked at again
/// after a while, and its Event says how to build again. Both leave the build Failed.
#[test]
fn transient_and_permanent_build_failures_are_booked_apart() {
    let cases = [
        (
            Classified::permanent("InvalidConfig", "error at $.spec.config: bad"),
            ("BuildFailed", Retry::Permanent, None),
            false,
        ),
        (
            Classified {
                message: "pushing registry.local:5000/os/worker: 503 Service Unavailable".into(),
                reason: "RegistryUnavailable",
                retry: Retry::Transient,
            },
            (
                "RegistryUnavailable",
                Retry::Transient,
                Some(decide::TRANSIENT_FAILURE_RECHECK_SECONDS),
            ),
            true,
        ),
    ];
    for (error, booked, transient) in cases {
        let mut o = world(vec![pool("worker", 1)]);
        converge(&mut o, 6);
        let t = target(&o, 0);
        // The transient failure of the last attempt (the retries are tested below).
        build_mut(&mut o, &t).retries = Retries {
            count: decide::TRANSIENT_ATTEMPTS - 1,
            last_at: Some(NOW + 1),
        };
        build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
            error: error.clone(),
            at: NOW + 4,
        });
        let a = decide(&o, NOW + 5);
        assert_eq!(status_of(&a, &t).unwrap().to, Phase::Failed, "{error}");
        assert_eq!(
            requeue(&a).map(|r| (r.reason, r.retry, r.after_seconds)),
            Some(booked),
            "{error}"
        );
        let ev = events(&a);
        let (_, m) = ev.iter().find(|(r, _)| r == "BuildFailed").unwrap();
        assert!(m.contains(&error.message), "{m}");
        assert_eq!(
            m.contains(&format!(
                "annotate MachineOSConfig worker with {}",
                vocab::REBUILD_ANNOTATION
            )),
            transient,
            "{m}"
        );
        // Recorded as Failed, the booking is the same on later passes.
        apply(&mut o, &a, NOW + 5);
        let a = decide(&o, NOW + 6);
        assert!(mutations(&a).is_empty(), "{a:#?}");
        assert_eq!(
            requeue(&a).map(|r| (r.reason, r.retry, r.after_seconds)),
            Some(booked)
        );
    }
}

/// A transient failure is retried: the build keeps its phase, the pool's condition names the
/// failed attempt and when the next starts, the retry cancels the backend's failure and
/// starts the build again; a registry back in time lets it succeed without a rebuild
/// annotation, and only the last attempt's failure is booked Failed.
#[test]
fn a_transient_failure_is_retried_with_backoff_before_it_is_booked() {
    let outage = Classified {
        message: "pushing registry.local:5000/os/worker: 503 Service Unavailable".into(),
        reason: "RegistryUnavailable",
        retry: Retry::Transient,
    };
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let t = target(&o, 0);
    build_mut(&mut o, &t).backend = Some(BackendStatus::Running { since: NOW + 2 });
    let a = decide(&o, NOW + 3);
    apply(&mut o, &a, NOW + 3);
    assert_eq!(build_mut(&mut o, &t).phase, Phase::Building);

    let mut now = NOW + 4;
    for attempt in 1..decide::TRANSIENT_ATTEMPTS {
        build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
            error: outage.clone(),
            at: now,
        });
        let wait = decide::TRANSIENT_RETRY_BACKOFF.delay(attempt).as_secs() as i64;
        // Waiting: no status write, no start; the condition says which attempt and when.
        let a = decide(&o, now + 1);
        assert!(status_of(&a, &t).is_none(), "attempt {attempt}: {a:#?}");
        assert!(starts(&a).is_empty());
        let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED)
            .or_else(|| o.pools[0].pool.condition(vocab::IMAGE_BUILD_DEGRADED))
            .unwrap()
            .clone();
        assert_eq!(c.status, "False", "{c:?}");
        assert!(
            c.message.contains(&format!(
                "attempt {attempt} of {} failed transiently (RegistryUnavailable)",
                decide::TRANSIENT_ATTEMPTS
            )) && c.message.contains("503")
                && c.message.contains(&format!("retrying in {}s", wait - 1)),
            "{c:?}"
        );
        assert_eq!(
            requeue(&a).map(|r| (r.reason, r.retry, r.after_seconds)),
            Some((
                "RegistryUnavailable",
                Retry::Transient,
                Some(wait as u64 - 1)
            ))
        );
        apply(&mut o, &a, now + 1);
        // Due: retried, with a Warning Event; the backend's failure is forgotten.
        now += wait;
        let a = decide(&o, now);
        assert!(
            a.contains(&Action::RetryBuild {
                build: t.clone(),
                retries: attempt,
                at: now,
            }),
            "attempt {attempt}: {a:#?}"
        );
        assert!(status_of(&a, &t).is_none());
        let ev = events(&a);
        let (_, m) = ev.iter().find(|(r, _)| r == "BuildRetrying").unwrap();
        assert!(
            m.contains(&format!("starting attempt {}", attempt + 1)),
            "{m}"
        );
        apply(&mut o, &a, now);
        assert_eq!(
            build_mut(&mut o, &t).retries,
            Retries {
                count: attempt,
                last_at: Some(now)
            }
        );
        // The failure, if still reported from before the retry, is not counted again.
        let mut stale = o.clone();
        build_mut(&mut stale, &t).backend = Some(BackendStatus::Failed {
            error: outage.clone(),
            at: now - 1,
        });
        let a = decide(&stale, now + 1);
        assert!(mutations(&a).is_empty(), "{a:#?}");
        // The next pass starts it again, still Building.
        let a = decide(&o, now + 1);
        assert_eq!(starts(&a), vec![t.clone()]);
        apply(&mut o, &a, now + 1);
        now += 2;
    }
    // The last attempt fails too: booked Failed, the Event counting the attempts.
    build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
        error: outage.clone(),
        at: now,
    });
    let a = decide(&o, now + 1);
    assert_eq!(status_of(&a, &t).unwrap().to, Phase::Failed);
    let ev = events(&a);
    let (_, m) = ev.iter().find(|(r, _)| r == "BuildFailed").unwrap();
    assert!(
        m.contains(&format!("{} attempt(s)", decide::TRANSIENT_ATTEMPTS)),
        "{m}"
    );

    // Had the registry come back, the retried build succeeds by itself.
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
        error: outage.clone(),
        at: NOW + 4,
    });
    let later = NOW + 4 + decide::TRANSIENT_RETRY_BACKOFF.delay(1).as_secs() as i64;
    let a = decide(&o, later);
    apply(&mut o, &a, later);
    let a = decide(&o, later + 1);
    assert_eq!(starts(&a), vec![t.clone()]);
    apply(&mut o, &a, later + 1);
    build_mut(&mut o, &t).backend = Some(BackendStatus::Succeeded {
        image: image('a'),
        at: later + 2,
    });
    let a = decide(&o, later + 3);
    assert_eq!(status_of(&a, &t).unwrap().to, Phase::Succeeded);

    // A permanent failure is never retried.
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    build_mut(&mut o, &t).backend = Some(BackendStatus::Failed {
        error: Classified::permanent("InvalidConfig", "bad"),
        at: NOW + 4,
    });
    let a = decide(&o, NOW + 100);
    assert!(!a.iter().any(|a| matches!(a, Action::RetryBuild { .. })));
    assert_eq!(status_of(&a, &t).unwrap().to, Phase::Failed);
}

#[test]
fn terminal_conditions_never_change() {
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    let t = target(&o, 0);
    for (phase, backend) in [
        (
            Phase::Succeeded,
            Some(BackendStatus::Failed {
                error: Classified::permanent("InvalidConfig", "late"),
                at: NOW,
            }),
        ),
        (
            Phase::Failed,
            Some(BackendStatus::Succeeded {
                image: image('a'),
                at: NOW,
            }),
        ),
        (Phase::Failed, Some(BackendStatus::Running { since: NOW })),
        (
            Phase::Succeeded,
            Some(BackendStatus::Pending { detail: None }),
        ),
    ] {
        let mut o = o.clone();
        let b = build_mut(&mut o, &t);
        b.phase = phase;
        b.digested_image = Some(image('a').image);
        b.backend = backend;
        o.pools[0]
            .registry
            .insert(t.clone(), RegistryObservation::Present(image('a')));
        let a = decide(&o, NOW + 1);
        assert!(status_of(&a, &t).is_none(), "{phase:?}: {a:#?}");
    }
    // An older build that finished as Interrupted stays so, even if its backend reports.
    let mut o2 = world(vec![pool("worker", 2)]);
    o2.pools[0].builds.push(BuildObserved {
        name: "worker-old".into(),
        phase: Phase::Interrupted,
        backend: Some(BackendStatus::Succeeded {
            image: image('a'),
            at: NOW,
        }),
        ..Default::default()
    });
    let a = converge(&mut o2, 6).concat();
    assert!(status_of(&a, "worker-old").is_none());
    // And no action anywhere ever asks for an illegal transition.
    for x in &a {
        if let Action::SetBuildStatus(u) = x {
            assert!(phase::transition(u.from, u.to).is_ok());
        }
    }
}

fn succeeded_build(name: &str, created: Timestamp, c: char) -> BuildObserved {
    BuildObserved {
        name: name.into(),
        generation: 1,
        created,
        rendered_config: format!("rendered-{name}"),
        phase: Phase::Succeeded,
        build_start: Some(created),
        build_end: Some(created + 10),
        digested_image: Some(format!("registry.local:5000/os/worker@{}", digest(c))),
        backend: None,
        retries: Retries::default(),
    }
}

#[test]
fn retention_deletes_exactly_what_it_may() {
    let mut o = world(vec![pool("worker", 1)]);
    let t = target(&o, 0);
    // Eight succeeded builds, newest last; keep 3.
    let letters = ['1', '2', '3', '4', '5', '6', '7', '8'];
    for (i, c) in letters.iter().enumerate() {
        o.pools[0].builds.push(succeeded_build(
            &format!("worker-s{i}"),
            NOW - 10_000 + i as i64 * 100,
            *c,
        ));
        o.machine_os_images.push(MachineOSImageObserved {
            name: format!("worker-s{i}"),
            pool: "worker".into(),
            build: Some(format!("worker-s{i}")),
            image: format!("registry.local:5000/os/worker@{}", digest(*c)),
        });
    }
    // The target (current inputs) is the oldest of all, and Succeeded: always kept.
    let mut tb = succeeded_build(&t, NOW - 20_000, '9');
    tb.rendered_config = "rendered-worker-1".into();
    o.pools[0].builds.push(tb);
    o.pools[0]
        .registry
        .insert(t.clone(), RegistryObservation::Present(image('9')));
    {
        let m = mosc_mut(&mut o, 0);
        m.annotations
            .insert(vocab::RETAIN_SUCCEEDED_ANNOTATION.into(), "3".into());
        m.current_build = Some(t.clone());
        m.current_image_pull_spec = Some(image('9').image);
        m.observed_generation = Some(1);
    }
    // s1 is on a node (by digest, through a mirror); s2 shares its digest with kept s7.
    o.images_in_use
        .push(format!("mirror.local/os/worker@{}", digest('2')));
    o.pools[0].builds[2].digested_image =
        Some(format!("registry.local:5000/os/worker@{}", digest('8')));
    o.machine_os_images[2].image = format!("registry.local:5000/os/worker@{}", digest('8'));
    o.machine_os_images.push(MachineOSImageObserved {
        name: t.clone(),
        pool: "worker".into(),
        build: Some(t.clone()),
        image: image('9').image,
    });
    // Failed builds: one ended two days ago, one an hour ago.
    o.pools[0].builds.push(BuildObserved {
        name: "worker-f-old".into(),
        created: NOW - 200_000,
        phase: Phase::Failed,
        build_start: Some(NOW - 200_000),
        build_end: Some(NOW - 172_800),
        ..Default::default()
    });
    o.pools[0].builds.push(BuildObserved {
        name: "worker-f-new".into(),
        created: NOW - 4000,
        phase: Phase::Failed,
        build_start: Some(NOW - 4000),
        build_end: Some(NOW - 3600),
        ..Default::default()
    });
    // Another pool uses the same digest as s3 in its own build.
    let mut other = pool("infra", 1);
    other.builds.push(succeeded_build("infra-x", NOW, '4'));
    o.pools.push(other);

    let a = retention(&o, NOW);
    let deleted_builds: Vec<&str> = a
        .iter()
        .filter_map(|a| match a {
            Action::DeleteBuild { build } => Some(build.as_str()),
            _ => None,
        })
        .collect();
    let deleted_images: Vec<&str> = a
        .iter()
        .filter_map(|a| match a {
            Action::DeleteRegistryImage { image, .. } => Some(image.as_str()),
            _ => None,
        })
        .collect();
    let deleted_records: Vec<&str> = a
        .iter()
        .filter_map(|a| match a {
            Action::DeleteMachineOSImage { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    // Newest three kept (s5, s6, s7); s1 in use; the target and the current build kept.
    assert_eq!(
        deleted_builds,
        vec![
            "worker-f-old",
            "worker-s0",
            "worker-s2",
            "worker-s3",
            "worker-s4"
        ]
    );
    assert_eq!(
        deleted_records,
        vec!["worker-s0", "worker-s2", "worker-s3", "worker-s4"]
    );
    // s2's digest is s7's (kept); s3's digest is used by infra-x: neither is deleted.
    let d = |c| format!("registry.local:5000/os/worker@{}", digest(c));
    assert_eq!(deleted_images, vec![d('1'), d('5')]);
    for x in &deleted_images {
        assert!(
            !o.images_in_use
                .iter()
                .any(|u| u.ends_with(&x[x.find('@').unwrap()..]))
        );
    }
    // decide runs retention too, and once applied there is nothing left to delete.
    let a = decide(&o, NOW);
    apply(&mut o, &a, NOW);
    assert!(retention(&o, NOW).is_empty());
}

#[test]
fn an_unavailable_base_image_is_a_condition_and_an_event_naming_where_it_comes_from() {
    // Not resolved yet, no error known: wait quietly.
    let mut o = world(vec![pool("worker", 1)]);
    o.pools[0].base_image = None;
    let a = decide(&o, NOW);
    assert!(mutations(&a).is_empty(), "{a:?}");
    assert_eq!(requeue(&a).map(|r| r.reason), Some("WaitingForBaseImage"));

    // Known not to exist: ImageBuildDegraded naming the ConfigMap and its key, one Event,
    // nothing built, no retry until something changes.
    o.pools[0].base_image_error = Some(BaseImageError {
        object: ObjectRef::namespaced("ConfigMap", "machineos", "machine-config-osimageurl"),
        field: "data.baseOSContainerImage".into(),
        message: "registry.local:5000/os/base:1: no such image".into(),
    });
    let a = decide(&o, NOW);
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).expect("condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", vocab::REASON_BASE_IMAGE_UNAVAILABLE)
    );
    assert_eq!(
        c.message,
        "ConfigMap machineos/machine-config-osimageurl: data.baseOSContainerImage: \
         registry.local:5000/os/base:1: no such image"
    );
    assert_eq!(
        events(&a),
        vec![("ConfigReconcileFailed".to_string(), c.message.clone())]
    );
    assert!(creates(&a).is_empty() && starts(&a).is_empty());
    assert_eq!(requeue(&a).map(|r| r.retry), Some(Retry::Permanent));

    // Resolved: the condition clears in the same pass that asks the registry, and the pool
    // builds.
    apply(&mut o, &a, NOW);
    o.pools[0].base_image_error = None;
    o.pools[0].base_image = Some(base());
    let a = decide(&o, NOW);
    assert!(
        a.iter().any(|x| matches!(x, Action::CheckRegistry { .. })),
        "{a:?}"
    );
    assert!(creates(&a).is_empty(), "{a:?}");
    let c = pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED).expect("condition");
    assert_eq!(c.status, "False");
    assert!(
        events(&a).iter().any(|(r, _)| r == "BuildRecovered"),
        "{a:?}"
    );
    apply(&mut o, &a, NOW);
    let a = decide(&o, NOW);
    assert_eq!(creates(&a).len(), 1);
    assert!(
        !events(&a).iter().any(|(r, _)| r == "BuildRecovered"),
        "recovered once: {a:?}"
    );
}

#[test]
fn a_machine_os_config_naming_no_existing_pool_is_said_and_cleared_when_the_pool_comes() {
    let mut o = world(vec![]);
    o.unbound_machine_os_configs = vec![
        machineos_build_lifecycle::UnboundMachineOSConfig {
            config: mosc("workr"),
            pool: Some("workr".into()),
        },
        machineos_build_lifecycle::UnboundMachineOSConfig {
            config: MachineOSConfigObserved {
                name: "nameless".into(),
                ..mosc("x")
            },
            pool: None,
        },
    ];
    let a = machineos_build_lifecycle::decide_unbound(&o);
    let said: Vec<(&str, &PoolCondition)> = a
        .iter()
        .filter_map(|x| match x {
            Action::SetMachineOSConfigCondition {
                machine_os_config,
                condition,
            } => Some((machine_os_config.as_str(), condition)),
            _ => None,
        })
        .collect();
    assert_eq!(said.len(), 2, "{a:#?}");
    assert_eq!(said[0].0, "workr");
    assert_eq!(said[0].1.type_, vocab::POOL_FOUND);
    assert_eq!(said[0].1.status, "False");
    assert_eq!(said[0].1.reason, vocab::REASON_POOL_NOT_FOUND);
    assert!(
        said[0]
            .1
            .message
            .contains("MachineConfigPool workr does not exist"),
        "{}",
        said[0].1.message
    );
    assert!(
        said[1].1.message.contains("is not set"),
        "{}",
        said[1].1.message
    );
    let ev = events(&a);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(
        ev.iter()
            .all(|(reason, message)| reason == vocab::REASON_POOL_NOT_FOUND
                && message.contains("spec.machineConfigPool.name"))
    );
    // Said once: applied, the next pass says nothing.
    apply(&mut o, &a, NOW);
    assert_eq!(machineos_build_lifecycle::decide_unbound(&o), []);
    // Nothing is built for it: decide, over the pools, has no pool to act on.
    assert!(decide(&o, NOW).is_empty());

    // The pool comes: the MachineOSConfig is bound; its condition turns True at once.
    let mut p = pool("workr", 1);
    if let Some(OptIn::MachineOSConfig(m)) = &mut p.opt_in {
        m.conditions = o.unbound_machine_os_configs[0].config.conditions.clone();
    }
    let o = world(vec![p]);
    let a = decide(&o, NOW + 1);
    assert!(
        a.iter().any(
            |x| matches!(x, Action::SetMachineOSConfigCondition { condition, .. }
            if condition.type_ == vocab::POOL_FOUND && condition.status == "True")
        ),
        "{a:#?}"
    );
}

#[test]
fn a_deleted_push_secret_turns_registry_access_false() {
    let mut o = world(vec![pool("worker", 1)]);
    converge(&mut o, 6);
    assert_eq!(
        mosc_mut(&mut o, 0)
            .condition(vocab::REGISTRY_ACCESS)
            .map(|c| c.status.as_str()),
        Some("True")
    );
    o.secrets.remove("push");
    let a = decide(&o, NOW + 1);
    let set = a.iter().find_map(|x| match x {
        Action::SetMachineOSConfigCondition { condition, .. }
            if condition.type_ == vocab::REGISTRY_ACCESS =>
        {
            Some(condition.clone())
        }
        _ => None,
    });
    let c = set.unwrap_or_else(|| panic!("{a:#?}"));
    assert_eq!(c.status, "False");
    assert!(c.message.contains("push"), "{}", c.message);
    // Said once.
    apply(&mut o, &a, NOW + 1);
    assert!(!decide(&o, NOW + 2).iter().any(|x| matches!(
        x,
        Action::SetMachineOSConfigCondition { condition, .. }
            if condition.type_ == vocab::REGISTRY_ACCESS
    )));

    // Created again: the first pass no longer says False, nor is the pool degraded.
    o.secrets.insert("push".into(), SecretState::Usable);
    let a = decide(&o, NOW + 3);
    apply(&mut o, &a, NOW + 3);
    let access = mosc_mut(&mut o, 0)
        .condition(vocab::REGISTRY_ACCESS)
        .cloned()
        .expect("RegistryAccess");
    assert_ne!(access.status, "False", "{access:?}: {a:#?}");
    assert_eq!(
        o.pools[0]
            .pool
            .condition(vocab::IMAGE_BUILD_DEGRADED)
            .map(|c| c.status.as_str()),
        Some("False"),
        "{a:#?}"
    );
}

#[test]
fn a_push_secret_created_late_is_checked_then_verified_without_a_stale_false() {
    // The MachineOSConfig came first: its Secret was missing.
    let mut o = world(vec![pool("worker", 1)]);
    o.secrets.remove("push");
    converge(&mut o, 4);
    assert_eq!(
        mosc_mut(&mut o, 0)
            .condition(vocab::REGISTRY_ACCESS)
            .map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("False", vocab::REASON_INVALID_CONFIGURATION)),
        "the MachineOSConfig says why nothing is built"
    );
    // The registry check failed on a wrong Secret, then the Secret is replaced: the failed
    // check is not cleared before a new check answers (no flapping on every check).
    o.secrets.insert("push".into(), SecretState::Usable);
    let t = target(&o, 0);
    o.pools[0].registry.insert(
        t.clone(),
        RegistryObservation::Error {
            message: "401 Unauthorized".into(),
            transient: false,
        },
    );
    let a = decide(&o, NOW);
    apply(&mut o, &a, NOW);
    let m = mosc_mut(&mut o, 0)
        .condition(vocab::REGISTRY_ACCESS)
        .cloned();
    assert_eq!(
        m.as_ref().map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("False", vocab::REASON_REGISTRY_CHECK_FAILED))
    );
    // The Secret changes (the controller forgets the answers for the old credentials).
    o.pools[0].registry.clear();
    let a = decide(&o, NOW + 1);
    assert!(
        a.iter().any(|x| matches!(x, Action::CheckRegistry { .. })),
        "{a:#?}"
    );
    assert_eq!(
        pool_condition(&a, vocab::IMAGE_BUILD_DEGRADED),
        None,
        "a failed check stays until the next check answers: {a:#?}"
    );
    apply(&mut o, &a, NOW + 1);
    // The check answers: absent, the push preflight passed → the build starts, verified.
    let a = decide(&o, NOW + 2);
    assert_eq!(starts(&a).len(), 1, "{a:#?}");
    apply(&mut o, &a, NOW + 2);
    let m = mosc_mut(&mut o, 0)
        .condition(vocab::REGISTRY_ACCESS)
        .cloned();
    assert_eq!(
        m.as_ref().map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("True", vocab::REASON_REGISTRY_ACCESS_VERIFIED))
    );
    assert_eq!(
        o.pools[0]
            .pool
            .condition(vocab::IMAGE_BUILD_DEGRADED)
            .map(|c| c.status.as_str()),
        Some("False")
    );
}
