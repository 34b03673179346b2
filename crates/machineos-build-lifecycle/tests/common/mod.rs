//! Fixtures shared by the lifecycle table tests and the property tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use machineos_build_lifecycle::config::{PoolContext, context};
use machineos_build_lifecycle::*;

pub const NS: &str = "machineos";
pub const NOW: Timestamp = 1_800_000_000;

pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

pub fn base() -> String {
    format!("quay.io/fedora/fedora-coreos@{}", digest('b'))
}

pub fn mosc(pool: &str) -> MachineOSConfigObserved {
    MachineOSConfigObserved {
        name: pool.into(),
        uid: format!("uid-mosc-{pool}"),
        generation: 1,
        image_builder_type: "Native".into(),
        rendered_image_push_spec: "registry.local:5000/os/worker:latest".into(),
        rendered_image_push_secret: "push".into(),
        base_image_pull_secret: Some("pull".into()),
        ..Default::default()
    }
}

pub fn pool(name: &str, rendered: u32) -> PoolObserved {
    PoolObserved {
        pool: Pool {
            name: name.into(),
            uid: format!("uid-pool-{name}"),
            rendered_config: Some(format!("rendered-{name}-{rendered}")),
            ..Default::default()
        },
        opt_in: Some(OptIn::MachineOSConfig(Box::new(mosc(name)))),
        rendered: Some(RenderedConfig {
            name: format!("rendered-{name}-{rendered}"),
            content_digest: format!("sha256:content-{rendered}"),
            extensions_image: None,
        }),
        base_image: Some(base()),
        ..Default::default()
    }
}

pub fn world(pools: Vec<PoolObserved>) -> Observed {
    Observed {
        pools,
        secrets: BTreeMap::from([
            ("push".into(), SecretState::Usable),
            ("pull".into(), SecretState::Usable),
        ]),
        ..Observed::new(NS)
    }
}

/// The build for pool `i`'s current inputs.
pub fn target(o: &Observed, i: usize) -> String {
    match context(o, &o.pools[i]) {
        PoolContext::Ready { target, .. } => target,
        other => panic!("pool {i} not ready: {other:?}"),
    }
}

pub fn mosc_mut(o: &mut Observed, i: usize) -> &mut MachineOSConfigObserved {
    match &mut o.pools[i].opt_in {
        Some(OptIn::MachineOSConfig(m)) => m,
        _ => panic!("pool {i} has no MachineOSConfig"),
    }
}

pub fn build_mut<'a>(o: &'a mut Observed, name: &str) -> &'a mut BuildObserved {
    o.pools
        .iter_mut()
        .flat_map(|p| p.builds.iter_mut())
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("no build {name}"))
}

pub fn image(c: char) -> RegistryImage {
    RegistryImage {
        image: format!("registry.local:5000/os/worker@{}", digest(c)),
        architectures: vec![("amd64".into(), digest(c))],
        variant: None,
    }
}

/// Decide and apply until nothing changes (at most `limit` rounds); all actions, per round.
pub fn converge(o: &mut Observed, limit: usize) -> Vec<Vec<Action>> {
    let mut rounds = Vec::new();
    for _ in 0..limit {
        let a = decide(o, NOW);
        let done = !a.iter().any(Action::is_mutation);
        apply(o, &a, NOW);
        rounds.push(a);
        if done {
            return rounds;
        }
    }
    panic!("no fixpoint in {limit} rounds: {:#?}", rounds.last());
}

pub fn mutations(a: &[Action]) -> Vec<&Action> {
    a.iter().filter(|a| a.is_mutation()).collect()
}

pub fn creates(a: &[Action]) -> Vec<String> {
    a.iter()
        .filter_map(|a| match a {
            Action::CreateBuild { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

pub fn starts(a: &[Action]) -> Vec<String> {
    a.iter()
        .filter_map(|a| match a {
            Action::StartBuild { build, .. } => Some(build.clone()),
            _ => None,
        })
        .collect()
}

pub fn status_of<'a>(a: &'a [Action], build: &str) -> Option<&'a BuildStatusUpdate> {
    a.iter().find_map(|a| match a {
        Action::SetBuildStatus(u) if u.build == build => Some(u),
        _ => None,
    })
}

pub fn pool_condition<'a>(a: &'a [Action], type_: &str) -> Option<&'a PoolCondition> {
    a.iter().find_map(|a| match a {
        Action::SetPoolCondition { condition, .. } if condition.type_ == type_ => Some(condition),
        _ => None,
    })
}

pub fn events(a: &[Action]) -> Vec<(String, String)> {
    a.iter()
        .filter_map(|a| match a {
            Action::Event {
                reason, message, ..
            } => Some((reason.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

pub fn requeue(a: &[Action]) -> Option<&Requeue> {
    a.iter().find_map(|a| match a {
        Action::Requeue(r) => Some(r),
        _ => None,
    })
}
