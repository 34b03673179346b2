//! [`apply()`]: the executor's effects on the observed state, modelled purely — what the world
//! looks like after the actions of [`crate::decide()`] have been carried out and nothing else
//! happened (no backend progress, registry answers "absent" for what was asked).
//!
//! The tests use it to check that deciding again asks for nothing twice; an executor can use
//! it for a dry run. It is a model, not the executor: Events and requeues have no effect here,
//! and it makes no API call.

use crate::action::Action;
use crate::observed::{
    BackendStatus, BuildObserved, MachineOSImageObserved, Observed, OptIn, PoolCondition,
    RegistryObservation, Timestamp,
};
use crate::vocab;

/// Apply `actions` to `observed`, as if carried out at `now`.
pub fn apply(observed: &mut Observed, actions: &[Action], now: Timestamp) {
    for a in actions {
        apply_one(observed, a, now);
    }
}

fn pool_of_build<'a>(o: &'a mut Observed, build: &str) -> Option<&'a mut BuildObserved> {
    o.pools
        .iter_mut()
        .flat_map(|p| p.builds.iter_mut())
        .find(|b| b.name == build)
}

fn apply_one(o: &mut Observed, a: &Action, now: Timestamp) {
    match a {
        Action::CheckRegistry { build, .. } => {
            for p in &mut o.pools {
                if p.builds.iter().any(|b| &b.name == build)
                    || build.starts_with(&format!("{}-", p.pool.name))
                {
                    p.registry
                        .entry(build.clone())
                        .or_insert(RegistryObservation::Absent);
                }
            }
        }
        Action::CreateBuild {
            name,
            rendered_config,
            machine_os_config,
            ..
        } => {
            let Some(p) = o.pools.iter_mut().find(|p| match &p.opt_in {
                Some(OptIn::MachineOSConfig(m)) => &m.name == machine_os_config,
                _ => &p.pool.name == machine_os_config,
            }) else {
                return;
            };
            if p.builds.iter().all(|b| &b.name != name) {
                p.builds.push(BuildObserved {
                    name: name.clone(),
                    generation: 1,
                    created: now,
                    rendered_config: rendered_config.clone(),
                    ..Default::default()
                });
            }
        }
        Action::StartBuild { build, .. } => {
            if let Some(b) = pool_of_build(o, build)
                && b.backend.is_none()
            {
                b.backend = Some(BackendStatus::Pending { detail: None });
            }
        }
        Action::CancelBuild { build } => {
            if let Some(b) = pool_of_build(o, build) {
                b.backend = None;
            }
        }
        Action::RetryBuild { build, retries, at } => {
            if let Some(b) = pool_of_build(o, build) {
                b.backend = None;
                b.retries = crate::observed::Retries {
                    count: *retries,
                    last_at: Some(*at),
                };
            }
        }
        Action::SetBuildStatus(u) => {
            if let Some(b) = pool_of_build(o, &u.build)
                && crate::phase::transition(b.phase, u.to).is_ok()
            {
                b.phase = u.to;
                b.build_start = b.build_start.or(u.build_start);
                b.build_end = b.build_end.or(u.build_end);
                b.digested_image = b.digested_image.clone().or(u.digested_image.clone());
            }
        }
        Action::DeleteBuild { build } => {
            for p in &mut o.pools {
                p.builds.retain(|b| &b.name != build);
            }
        }
        Action::RemoveRebuildAnnotation { machine_os_config } => {
            for p in &mut o.pools {
                if let Some(OptIn::MachineOSConfig(m)) = &mut p.opt_in
                    && &m.name == machine_os_config
                {
                    m.annotations.remove(vocab::REBUILD_ANNOTATION);
                }
            }
        }
        Action::UpdateMachineOSConfigStatus {
            machine_os_config,
            current_image_pull_spec,
            machine_os_build,
            observed_generation,
        } => {
            for p in &mut o.pools {
                if let Some(OptIn::MachineOSConfig(m)) = &mut p.opt_in
                    && &m.name == machine_os_config
                {
                    m.current_image_pull_spec = Some(current_image_pull_spec.clone());
                    m.current_build = Some(machine_os_build.clone());
                    m.observed_generation = Some(*observed_generation);
                }
            }
        }
        Action::CreateMachineOSImage {
            name,
            pool,
            build,
            image,
            ..
        } => {
            if o.machine_os_images.iter().all(|i| &i.name != name) {
                o.machine_os_images.push(MachineOSImageObserved {
                    name: name.clone(),
                    pool: pool.clone(),
                    build: Some(build.clone()),
                    image: image.image.clone(),
                });
            }
        }
        Action::DeleteMachineOSImage { name } => o.machine_os_images.retain(|i| &i.name != name),
        Action::DeleteRegistryImage { image, .. } => {
            for p in &mut o.pools {
                for r in p.registry.values_mut() {
                    if matches!(r, RegistryObservation::Present(i) if &i.image == image) {
                        *r = RegistryObservation::Absent;
                    }
                }
            }
        }
        Action::SetPoolCondition { pool, condition } => {
            if let Some(p) = o.pools.iter_mut().find(|p| &p.pool.name == pool) {
                let conds: &mut Vec<PoolCondition> = &mut p.pool.conditions;
                match conds.iter_mut().find(|c| c.type_ == condition.type_) {
                    Some(c) => *c = condition.clone(),
                    None => conds.push(condition.clone()),
                }
            }
        }
        Action::SetPoolAnnotation { pool, key, value } => {
            if let Some(p) = o.pools.iter_mut().find(|p| &p.pool.name == pool) {
                p.pool.annotations.insert(key.clone(), value.clone());
            }
        }
        Action::SetMachineOSConfigCondition {
            machine_os_config,
            condition,
        } => {
            let bound = o.pools.iter_mut().filter_map(|p| match &mut p.opt_in {
                Some(OptIn::MachineOSConfig(m)) => Some(m.as_mut()),
                _ => None,
            });
            let unbound = o
                .unbound_machine_os_configs
                .iter_mut()
                .map(|u| &mut u.config);
            for m in bound.chain(unbound) {
                if &m.name == machine_os_config {
                    match m.conditions.iter_mut().find(|c| c.type_ == condition.type_) {
                        Some(c) => *c = condition.clone(),
                        None => m.conditions.push(condition.clone()),
                    }
                }
            }
        }
        Action::Event { .. } | Action::Requeue(_) => {}
    }
}
