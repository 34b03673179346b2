//! Properties of `decide` over generated observations: deterministic, idempotent (deciding
//! again on what its actions produced asks for no build or start twice), convergent, at most
//! one active build per MachineOSConfig, only legal status transitions, nothing new in a
//! degraded pool, and build names / actions independent of input order.

mod common;

use machineos_diagnostics::Classified;
use std::collections::{BTreeMap, BTreeSet};

use common::*;
use machineos_build_lifecycle::config::{PoolContext, context};
use machineos_build_lifecycle::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct PoolGen {
    opt_in: u8,
    builder_job: bool,
    rendered: u32,
    rebuild: bool,
    degraded: bool,
    containerfiles: Vec<u8>,
    builds: Vec<(bool, u8, u8)>,
    registry: u8,
}

fn pool_gen() -> impl Strategy<Value = PoolGen> {
    (
        0u8..4,
        proptest::bool::weighted(0.2),
        0u32..3,
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.2),
        proptest::collection::vec(0u8..5, 0..3),
        proptest::collection::vec((any::<bool>(), 0u8..6, 0u8..5), 0..4),
        0u8..4,
    )
        .prop_map(
            |(
                opt_in,
                builder_job,
                rendered,
                rebuild,
                degraded,
                containerfiles,
                builds,
                registry,
            )| PoolGen {
                opt_in,
                builder_job,
                rendered,
                rebuild,
                degraded,
                containerfiles,
                builds,
                registry,
            },
        )
}

const ARCHES: [&str; 5] = ["ARM64", "AMD64", "PPC64LE", "S390X", "NoArch"];
const PHASES: [Phase; 6] = [
    Phase::Initial,
    Phase::Prepared,
    Phase::Building,
    Phase::Succeeded,
    Phase::Failed,
    Phase::Interrupted,
];

fn backend(n: u8, c: char) -> Option<BackendStatus> {
    match n {
        0 => None,
        1 => Some(BackendStatus::Pending { detail: None }),
        2 => Some(BackendStatus::Running { since: NOW - 5 }),
        3 => Some(BackendStatus::Succeeded {
            image: image(c),
            at: NOW - 1,
        }),
        _ => Some(BackendStatus::Failed {
            error: Classified::permanent("InvalidConfig", "error at $.spec.config: bad"),
            at: NOW - 1,
        }),
    }
}

fn build(
    o: &mut Observed,
    names: &[&str],
    gens: &[PoolGen],
    push_missing: bool,
    in_use: &[bool],
) -> Observed {
    for (i, (name, g)) in names.iter().zip(gens).enumerate() {
        let mut p = pool(name, g.rendered);
        match g.opt_in {
            0 => p.opt_in = None,
            1 => {
                p.pool
                    .labels
                    .insert(vocab::LAYERING_ENABLED_LABEL.into(), String::new());
                p.opt_in = Some(OptIn::Legacy(LegacyOptIn {
                    config_map: Some(BTreeMap::from([
                        (
                            "finalImagePullspec".into(),
                            format!("registry.local/os/{name}"),
                        ),
                        ("finalImagePushSecretName".into(), "push".into()),
                    ])),
                }));
            }
            _ => {
                let Some(OptIn::MachineOSConfig(m)) = &mut p.opt_in else {
                    unreachable!()
                };
                if g.builder_job {
                    m.image_builder_type = "Job".into();
                }
                if g.rebuild {
                    m.annotations
                        .insert(vocab::REBUILD_ANNOTATION.into(), String::new());
                }
                let arches: BTreeSet<u8> = g.containerfiles.iter().copied().collect();
                m.containerfiles = arches
                    .iter()
                    .map(|&a| {
                        (
                            ARCHES[a as usize].to_owned(),
                            format!("FROM configs AS final\n# {a}\n"),
                        )
                    })
                    .collect();
            }
        }
        if g.degraded {
            p.pool.conditions.push(PoolCondition {
                type_: "RenderDegraded".into(),
                status: "True".into(),
                ..Default::default()
            });
        }
        o.pools.push(p);
        let t = match context(o, &o.pools[i]) {
            PoolContext::Ready { target, .. } => Some(target),
            _ => None,
        };
        let mut taken = BTreeSet::new();
        for (j, (is_target, phase, be)) in g.builds.iter().enumerate() {
            let c = char::from(b'a' + (j as u8 % 6));
            let name = match (&t, is_target) {
                (Some(t), true) => t.clone(),
                _ => format!("{name}-old{j}"),
            };
            if !taken.insert(name.clone()) {
                continue;
            }
            let phase = PHASES[*phase as usize];
            o.pools[i].builds.push(BuildObserved {
                name,
                generation: 1,
                created: NOW - 1000 + j as i64,
                rendered_config: format!("rendered-{j}"),
                phase,
                build_start: (phase >= Phase::Building).then_some(NOW - 900),
                build_end: phase.is_terminal().then_some(NOW - 800),
                digested_image: (phase == Phase::Succeeded).then(|| image(c).image),
                backend: if phase.is_terminal() {
                    None
                } else {
                    backend(*be, c)
                },
                retries: Retries::default(),
            });
        }
        if let Some(t) = &t {
            let r = match g.registry {
                0 => None,
                1 => Some(RegistryObservation::Absent),
                2 => Some(RegistryObservation::Present(image('p'))),
                _ => Some(RegistryObservation::Error {
                    message: "503".into(),
                    transient: true,
                }),
            };
            if let Some(r) = r {
                o.pools[i].registry.insert(t.clone(), r);
            }
        }
    }
    if push_missing {
        o.secrets.remove("push");
    }
    for (k, used) in in_use.iter().enumerate() {
        if *used {
            o.images_in_use
                .push(image(char::from(b'a' + k as u8)).image);
        }
    }
    o.clone()
}

fn observed() -> impl Strategy<Value = Observed> {
    (
        proptest::collection::vec(pool_gen(), 1..4),
        proptest::bool::weighted(0.1),
        proptest::collection::vec(any::<bool>(), 6),
    )
        .prop_map(|(gens, push_missing, in_use)| {
            let names = ["worker", "infra", "master"];
            let mut o = world(Vec::new());
            build(&mut o, &names[..gens.len()], &gens, push_missing, &in_use)
        })
}

fn active_per_pool(o: &Observed) -> Vec<(String, usize)> {
    o.pools
        .iter()
        .map(|p| {
            (
                p.pool.name.clone(),
                p.builds.iter().filter(|b| b.phase.is_active()).count(),
            )
        })
        .collect()
}

fn sorted(a: &[Action]) -> Vec<String> {
    let mut v: Vec<String> = a.iter().map(|a| format!("{a:?}")).collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decide_is_deterministic(o in observed()) {
        prop_assert_eq!(decide(&o, NOW), decide(&o.clone(), NOW));
    }

    #[test]
    fn deciding_again_asks_for_no_build_or_start_twice(o in observed()) {
        let a1 = decide(&o, NOW);
        let mut o1 = o.clone();
        apply(&mut o1, &a1, NOW);
        let a2 = decide(&o1, NOW);
        let first: BTreeSet<String> = creates(&a1).into_iter().chain(starts(&a1)).collect();
        for n in creates(&a2).into_iter().chain(starts(&a2)) {
            prop_assert!(!first.contains(&n), "{} created or started twice:\n{:#?}\nthen\n{:#?}", n, a1, a2);
        }
    }

    #[test]
    fn decide_converges_and_builds_each_name_once_per_deletion(o in observed()) {
        let mut o = o;
        let mut created: BTreeMap<String, usize> = BTreeMap::new();
        let mut deleted: BTreeMap<String, usize> = BTreeMap::new();
        let mut fixpoint = false;
        for _ in 0..10 {
            let a = decide(&o, NOW);
            if !a.iter().any(Action::is_mutation) {
                fixpoint = true;
                break;
            }
            for x in &a {
                match x {
                    Action::StartBuild { build, .. } => {
                        // A start is only repeated for a build that was deleted in between.
                        let n = created.entry(build.clone()).or_default();
                        *n += 1;
                        prop_assert!(*n <= 1 + deleted.get(build).copied().unwrap_or(0), "{} started again", build);
                    }
                    Action::DeleteBuild { build } => *deleted.entry(build.clone()).or_default() += 1,
                    _ => {}
                }
            }
            apply(&mut o, &a, NOW);
        }
        prop_assert!(fixpoint, "no fixpoint in 10 rounds");
    }

    #[test]
    fn at_most_one_active_build_per_machineosconfig(o in observed()) {
        let mut o = o;
        let before: BTreeMap<String, usize> = active_per_pool(&o).into_iter().collect();
        for _ in 0..6 {
            let a = decide(&o, NOW);
            let building: BTreeSet<String> = creates(&a).into_iter().chain(starts(&a)).collect();
            apply(&mut o, &a, NOW);
            for (pool, n) in active_per_pool(&o) {
                let starts_here = building.iter().any(|b| b.starts_with(&format!("{pool}-")));
                if starts_here || before.get(&pool).copied().unwrap_or(0) <= 1 {
                    prop_assert!(n <= 1, "pool {} has {} active builds", pool, n);
                }
            }
        }
    }

    #[test]
    fn only_legal_transitions_and_nothing_new_in_a_degraded_pool(o in observed()) {
        let a = decide(&o, NOW);
        for x in &a {
            if let Action::SetBuildStatus(u) = x {
                prop_assert!(phase::transition(u.from, u.to).is_ok());
                prop_assert!(u.from != u.to);
            }
        }
        for p in &o.pools {
            if p.pool.degraded_for_another_reason().is_some() {
                let prefix = format!("{}-", p.pool.name);
                prop_assert!(!creates(&a).iter().chain(starts(&a).iter()).any(|n| n.starts_with(&prefix)));
            }
        }
    }

    #[test]
    fn names_and_actions_do_not_depend_on_input_order(o in observed(), seed in any::<u64>()) {
        let mut shuffled = o.clone();
        let rot = |n: usize| if n == 0 { 0 } else { (seed as usize) % n };
        let k = rot(shuffled.pools.len());
        shuffled.pools.rotate_left(k);
        for p in &mut shuffled.pools {
            let k = rot(p.builds.len());
            p.builds.rotate_left(k);
            p.builds.reverse();
            if let Some(OptIn::MachineOSConfig(m)) = &mut p.opt_in {
                m.containerfiles.reverse();
            }
        }
        for p in &o.pools {
            let q = shuffled.pools.iter().position(|q| q.pool.name == p.pool.name).unwrap();
            let i = o.pools.iter().position(|x| x.pool.name == p.pool.name).unwrap();
            match (context(&o, &o.pools[i]), context(&shuffled, &shuffled.pools[q])) {
                (PoolContext::Ready { target: a, .. }, PoolContext::Ready { target: b, .. }) => prop_assert_eq!(a, b),
                (a, b) => prop_assert_eq!(std::mem::discriminant(&a), std::mem::discriminant(&b)),
            }
        }
        prop_assert_eq!(sorted(&decide(&o, NOW)), sorted(&decide(&shuffled, NOW)));
    }
}
