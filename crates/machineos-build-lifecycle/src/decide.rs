//! [`decide()`]: for each pool, what should happen next — the MCO BuildController's
//! reconcile (MCO `pkg/controller/build/reconciler.go`, `docs/mco-behaviour.md` §2.2–§2.7) as a pure
//! function of [`Observed`] state.
//!
//! Per pool, in order:
//! 1. **Opt-in and configuration** ([`crate::config::resolve`]): a MachineOSConfig, or the legacy label +
//!    `on-cluster-build-config` ConfigMap as an implicit one (no `imageBuilderType` → the
//!    native builder; `custom-pod-builder` → Job, `openshift-image-builder` → OpenShift
//!    Build). A missing or invalid ConfigMap, Secret or field, or a backend this controller
//!    does not run yet, becomes `ImageBuildDegraded=True` (reason `InvalidConfiguration` or
//!    `BuilderNotSupported`) and a Warning Event `ConfigReconcileFailed` naming the object
//!    and field, and a permanent [`Requeue`]; nothing is built natively in its place. The
//!    first pass that finds the configuration usable again clears it (`BuildRecovered`),
//!    and a `RegistryAccess=False` it caused turns `Unknown` while the registry is checked
//!    again (`clear_fixed_causes`) — not a pass later, when the check has answered.
//! 2. **Identity**: the target build `<pool>-<hash>` of the inputs ([`crate::identity`]).
//! 3. **One active build per MachineOSConfig**: every other unfinished build becomes
//!    Interrupted (and is cancelled on its backend) before the target is created — the MCO
//!    deletes them (`deleteOtherBuildsForMachineOSConfig`); machineos keeps them, Interrupted,
//!    for retention to collect, so their history stays readable.
//! 4. **The target**: absent → check the registry for `repo:<name>` (present → a build
//!    record that is Succeeded at once, the image reused; absent → create and start it;
//!    an error → wait, never rebuild on an auth or 5xx error, as the MCO). Present → follow
//!    its backend through Prepared → Building → Succeeded | Failed with [`transition`];
//!    a Succeeded build that the MachineOSConfig does not point at yet is checked in the
//!    registry before it is adopted (gone → deleted and rebuilt). A backend failure
//!    classified transient (the registry or the API server unavailable) is retried —
//!    cancelled and started again after [`TRANSIENT_RETRY_BACKOFF`], up to
//!    [`TRANSIENT_ATTEMPTS`] attempts, the pool's condition saying which attempt failed and
//!    when the next starts — before it is booked Failed; a permanent one is booked at once.
//! 5. **Rebuild annotation**: a terminal target is deleted (and rebuilt on the next pass,
//!    without reuse); the annotation is removed when the new build is created, or at once if
//!    the target is already running.
//! 6. **Gate**: while the pool is degraded for another reason (`RenderDegraded`,
//!    `PinnedImageSetsDegraded`, `PoolSynchronizerDegraded`), nothing new is created or
//!    started; running builds are still followed and recorded. Unlike the MCO, `NodeDegraded`
//!    does not gate: a node that failed its update is fixed by a new image, which re-targets
//!    it, so a degraded node must not stop the build that would fix it.
//! 7. **Records**: on success the MachineOSConfig status (or, legacy, the pool annotation
//!    `newestImageEquivalentConfig`), a MachineOSImage, `ImageBuildDegraded=False`; on
//!    failure `ImageBuildDegraded=True` with the MCO's message shape and Events
//!    `BuildFailed` + `BuildDegraded`. Legacy pools also get the four legacy conditions with
//!    exactly one True. Conditions are set and Events recorded only on change.
//! 8. **Retention** ([`crate::retention()`]) last.
//!
//! Events are the MCO's reasons (`BuildStarted`, `BuildPreparing`, `BuildBuilding`,
//! `BuildCompleted`, `BuildFailed`, `BuildInterrupted`, `BuildDeleted`, `RebuildRequested`,
//! `PoolConfigChanged`, `BuildDegraded`, `BuildRecovered`, `ConfigReconcileFailed`).
//!
//! Not decided here: a pool that no longer opts in (its MachineOSConfig deleted) gets no
//! action — its builds go with their owner through Kubernetes garbage collection, and the
//! deletion of their registry images on that path is the executor's (the MCO's
//! `deleteMachineOSConfig`).

use std::time::Duration;

use machineos_diagnostics::{Backoff, Retry};

use crate::action::{Action, BuildStatusUpdate, EventType, ObjectRef, Requeue};
use crate::config::{Effective, PoolContext, context};
use crate::identity::{BuildInputs, PushTarget};
use crate::observed::{
    Backend, BackendStatus, BuildObserved, Observed, OptIn, PoolCondition, PoolObserved,
    RegistryImage, RegistryObservation, Timestamp,
};
use crate::phase::{Phase, transition};
use crate::vocab::{self, event};

/// Decide what to do next, for every pool, then retention.
pub fn decide(observed: &Observed, now: Timestamp) -> Vec<Action> {
    let mut out = Vec::new();
    for p in &observed.pools {
        // A MachineOSConfig that lacked its pool and has it now: said at once.
        if let Some(OptIn::MachineOSConfig(m)) = &p.opt_in
            && m.condition(vocab::POOL_FOUND)
                .is_some_and(|c| c.status != "True")
        {
            out.push(Action::SetMachineOSConfigCondition {
                machine_os_config: m.name.clone(),
                condition: cond(
                    vocab::POOL_FOUND,
                    true,
                    vocab::REASON_POOL_FOUND,
                    format!("MachineConfigPool {} exists", p.pool.name),
                ),
            });
        }
        let ctx = context(observed, p);
        decide_pool(observed, p, &ctx, now, &mut out);
        if let PoolContext::Ready { eff, target, .. } = &ctx {
            out.extend(crate::retention::for_pool(
                observed,
                p,
                eff,
                Some(target),
                now,
            ));
        }
    }
    out
}

/// What to say on the MachineOSConfigs no pool takes ([`Observed::unbound_machine_os_configs`]):
/// `MachineConfigPoolFound=False` naming the field and the pool, and one Warning Event when
/// that changes. Nothing is built for them. Pure, like [`decide`]; the controller calls it
/// once per pass.
pub fn decide_unbound(observed: &Observed) -> Vec<Action> {
    let mut out = Vec::new();
    for u in &observed.unbound_machine_os_configs {
        let m = &u.config;
        let message = match &u.pool {
            Some(pool) => format!(
                "spec.machineConfigPool.name: MachineConfigPool {pool} does not exist; no image \
                 is built for this MachineOSConfig until it does (kubectl get \
                 machineconfigpools lists the pools)"
            ),
            None => "spec.machineConfigPool.name is not set: the MachineOSConfig names no \
                     pool, and nothing is built for it"
                .to_owned(),
        };
        let c = cond(
            vocab::POOL_FOUND,
            false,
            vocab::REASON_POOL_NOT_FOUND,
            message,
        );
        if m.condition(vocab::POOL_FOUND) == Some(&c) {
            continue;
        }
        out.push(Action::SetMachineOSConfigCondition {
            machine_os_config: m.name.clone(),
            condition: c.clone(),
        });
        out.push(Action::Event {
            object: ObjectRef {
                uid: Some(m.uid.clone()),
                ..ObjectRef::cluster("MachineOSConfig", &m.name)
            },
            type_: EventType::Warning,
            reason: vocab::REASON_POOL_NOT_FOUND.to_owned(),
            message: c.message,
        });
    }
    out
}

struct PoolOut<'a> {
    observed: &'a Observed,
    p: &'a PoolObserved,
    now: Timestamp,
    actions: Vec<Action>,
    events: Vec<Action>,
    requeue: Option<Requeue>,
}

impl PoolOut<'_> {
    fn event(&mut self, object: ObjectRef, type_: EventType, reason: &str, message: String) {
        self.events.push(Action::Event {
            object,
            type_,
            reason: reason.to_owned(),
            message,
        });
    }

    fn build_ref(&self, name: &str) -> ObjectRef {
        ObjectRef::cluster("MachineOSBuild", name)
    }

    fn requeue(&mut self, reason: &'static str, retry: Retry, after_seconds: Option<u64>) {
        self.requeue = Some(Requeue {
            pool: self.p.pool.name.clone(),
            reason,
            retry,
            after_seconds,
        });
    }

    /// Set pool conditions that differ from what is observed; `BuildRecovered`/`BuildDegraded`
    /// Events on `ImageBuildDegraded` flips.
    fn pool_conditions(&mut self, want: Vec<PoolCondition>) {
        let pool = &self.p.pool;
        for c in want {
            let old = pool.condition(&c.type_);
            if old == Some(&c) {
                continue;
            }
            if c.type_ == vocab::IMAGE_BUILD_DEGRADED {
                let was = old.is_some_and(|o| o.status == "True");
                let pref = ObjectRef::cluster("MachineConfigPool", &pool.name);
                if was && c.status == "False" {
                    self.event(
                        pref,
                        EventType::Normal,
                        event::BUILD_RECOVERED,
                        format!("Pool {} image build recovered", pool.name),
                    );
                } else if !was && c.status == "True" {
                    self.event(
                        pref,
                        EventType::Warning,
                        event::BUILD_DEGRADED,
                        c.message.clone(),
                    );
                }
            }
            self.actions.push(Action::SetPoolCondition {
                pool: pool.name.clone(),
                condition: c,
            });
        }
    }

    fn finish(self, out: &mut Vec<Action>) {
        out.extend(self.actions);
        out.extend(self.events);
        out.extend(self.requeue.map(Action::Requeue));
    }
}

fn cond(type_: &str, status: bool, reason: &str, message: String) -> PoolCondition {
    PoolCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message,
    }
}

/// The pool conditions for a target build in `phase` (MCO `syncBuildFailureStatus`; the
/// legacy four with exactly one True, as the first BuildController kept them). `message`:
/// the failure, or why a pending build waits (appended; empty: nothing to add).
fn pool_conditions_for(
    pool: &str,
    eff: &Effective,
    build: &str,
    phase: Phase,
    message: &str,
) -> Vec<PoolCondition> {
    let legacy_true = match phase {
        Phase::Initial | Phase::Prepared => vocab::BUILD_PENDING,
        Phase::Building => vocab::BUILDING,
        Phase::Succeeded => vocab::BUILD_SUCCESS,
        Phase::Failed => vocab::BUILD_FAILED,
        Phase::Interrupted => return Vec::new(),
    };
    let degraded = phase == Phase::Failed;
    let msg = if degraded {
        format!(
            "Failed to build OS image for pool {pool} (MachineOSBuild: {build}): Failed: {message}"
        )
    } else if message.is_empty() {
        format!("MachineOSBuild {build}: {}", phase.reason_message().1)
    } else {
        format!(
            "MachineOSBuild {build}: {}: {message}",
            phase.reason_message().1
        )
    };
    let mut v = vec![cond(
        vocab::IMAGE_BUILD_DEGRADED,
        degraded,
        legacy_true,
        msg.clone(),
    )];
    if eff.legacy {
        for t in vocab::LEGACY_POOL_CONDITIONS {
            let on = t == legacy_true;
            v.push(cond(t, on, t, if on { msg.clone() } else { String::new() }));
        }
    }
    v
}

fn decide_pool(
    observed: &Observed,
    p: &PoolObserved,
    ctx: &PoolContext,
    now: Timestamp,
    out: &mut Vec<Action>,
) {
    let mut o = PoolOut {
        observed,
        p,
        now,
        actions: Vec::new(),
        events: Vec::new(),
        requeue: None,
    };
    match ctx {
        PoolContext::NotOptedIn => {
            // The build conditions go with the opt-in: a MachineOSConfig deleted mid-build
            // leaves no "Image Build In Progress" behind (no Event: nothing recovered).
            let pool = &p.pool;
            let mut want = Vec::new();
            if pool.condition(vocab::IMAGE_BUILD_DEGRADED).is_some() {
                want.push(cond(
                    vocab::IMAGE_BUILD_DEGRADED,
                    false,
                    vocab::REASON_NOT_LAYERED,
                    format!(
                        "Pool {} is not layered: no MachineOSConfig (or layering label) opts it in",
                        pool.name
                    ),
                ));
            }
            for t in vocab::LEGACY_POOL_CONDITIONS {
                if pool.condition(t).is_some_and(|c| c.status == "True") {
                    want.push(cond(t, false, t, String::new()));
                }
            }
            for c in want {
                if pool.condition(&c.type_) != Some(&c) {
                    o.actions.push(Action::SetPoolCondition {
                        pool: pool.name.clone(),
                        condition: c,
                    });
                }
            }
        }
        PoolContext::Invalid(e) => {
            let c = cond(vocab::IMAGE_BUILD_DEGRADED, true, e.reason, e.to_string());
            if p.pool.condition(vocab::IMAGE_BUILD_DEGRADED) != Some(&c) {
                o.actions.push(Action::SetPoolCondition {
                    pool: p.pool.name.clone(),
                    condition: c,
                });
                o.event(
                    (*e.object).clone(),
                    EventType::Warning,
                    event::CONFIG_RECONCILE_FAILED,
                    e.to_string(),
                );
            }
            // The push Secret (or the push spec) is what failed: the MachineOSConfig says so
            // itself (an admin reading it sees why nothing is built), and does not keep
            // saying `RegistryAccess=True` about a Secret that is gone.
            if let Some(OptIn::MachineOSConfig(m)) = &p.opt_in
                && e.field.starts_with("spec.renderedImagePush")
            {
                let c = cond(vocab::REGISTRY_ACCESS, false, e.reason, e.to_string());
                if m.condition(vocab::REGISTRY_ACCESS) != Some(&c) {
                    o.actions.push(Action::SetMachineOSConfigCondition {
                        machine_os_config: m.name.clone(),
                        condition: c,
                    });
                }
            }
            o.requeue(e.reason, Retry::Permanent, None);
        }
        PoolContext::Waiting(_, r) => o.requeue = Some(r.clone()),
        PoolContext::Ready {
            eff,
            inputs,
            target,
        } => ready(&mut o, eff, inputs, target),
    }
    o.finish(out);
}

fn sorted_builds(p: &PoolObserved) -> Vec<&BuildObserved> {
    let mut b: Vec<&BuildObserved> = p.builds.iter().collect();
    b.sort_by(|x, y| (x.created, &x.name).cmp(&(y.created, &y.name)));
    b
}

fn status(
    b: &BuildObserved,
    to: Phase,
    message: Option<&str>,
    start: Option<Timestamp>,
    end: Option<Timestamp>,
    digested: Option<String>,
    backend: Backend,
) -> Option<Action> {
    // Every status write passes the transition gate; an illegal one is never emitted.
    let to = transition(b.phase, to).ok()?;
    Some(Action::SetBuildStatus(BuildStatusUpdate {
        build: b.name.clone(),
        from: b.phase,
        to,
        conditions: to.conditions(message, b.generation),
        build_start: b.build_start.or(start),
        build_end: b.build_end.or(end),
        digested_image: b.digested_image.clone().or(digested),
        builder: backend,
    }))
}

fn ready(o: &mut PoolOut<'_>, eff: &Effective, inputs: &BuildInputs, target: &str) {
    let p = o.p;
    let pool = p.pool.name.as_str();
    let builds = sorted_builds(p);
    let existing = builds.iter().copied().find(|b| b.name == target);
    let degraded = p.pool.degraded_for_another_reason().cloned();
    let push = PushTarget {
        repository: eff.push_repository.clone(),
        tag: target.to_owned(),
        extra_tag: eff.extra_tag.clone(),
    };
    let mosc_ref = eff.owner.clone();

    // Will the target be (or is it) the active build after this pass?
    let mut create = false;
    let mut reuse: Option<RegistryImage> = None;
    match existing {
        Some(t) if eff.rebuild && t.phase.is_terminal() => {
            o.actions.push(Action::DeleteBuild {
                build: t.name.clone(),
            });
            o.event(
                mosc_ref.clone(),
                EventType::Normal,
                event::REBUILD_REQUESTED,
                format!("Rebuild requested: deleting MachineOSBuild {}", t.name),
            );
            o.requeue("RebuildRequested", Retry::Transient, Some(1));
            interrupt_others(o, &builds, target, eff.backend);
            return;
        }
        Some(t) if t.phase == Phase::Interrupted => {
            // The current inputs' build was cancelled: start it over (after deletion).
            if degraded.is_none() {
                o.actions.push(Action::DeleteBuild {
                    build: t.name.clone(),
                });
                o.requeue("RestartingInterruptedBuild", Retry::Transient, Some(1));
            } else {
                o.requeue("PoolDegraded", Retry::Permanent, None);
            }
            return;
        }
        Some(_) => {
            if eff.rebuild {
                // Already running: the rebuild is honoured by this build.
                o.actions.push(Action::RemoveRebuildAnnotation {
                    machine_os_config: eff.machine_os_config.clone(),
                });
            }
        }
        None => {
            if degraded.is_some() {
                o.requeue("PoolDegraded", Retry::Permanent, None);
                return;
            }
            if eff.rebuild {
                create = true;
            } else {
                match p.registry.get(target) {
                    None => {
                        o.actions.push(Action::CheckRegistry {
                            build: target.to_owned(),
                            pullspec: push.pullspec(),
                            push_secret: eff.push_secret.clone(),
                        });
                        clear_fixed_causes(o, eff, target, &push, true);
                        o.requeue("CheckingRegistry", Retry::Transient, Some(1));
                        return;
                    }
                    Some(RegistryObservation::Absent) => create = true,
                    Some(RegistryObservation::Present(img)) => {
                        create = true;
                        reuse = Some(img.clone());
                    }
                    Some(RegistryObservation::Error { message, transient }) => {
                        registry_error(o, eff, &push, message, *transient);
                        return;
                    }
                }
            }
        }
    }

    interrupt_others(o, &builds, target, eff.backend);

    let base = inputs.base_image.clone();
    let rendered = p.pool.rendered_config.clone().unwrap_or_default();
    if create {
        o.actions.push(Action::CreateBuild {
            name: target.to_owned(),
            rendered_config: rendered.clone(),
            machine_os_config: eff.machine_os_config.clone(),
            rendered_image_push_spec: push.pullspec(),
            labels: vec![
                (vocab::TARGET_POOL_LABEL.to_owned(), pool.to_owned()),
                (
                    vocab::RENDERED_MACHINE_CONFIG_LABEL.to_owned(),
                    rendered.clone(),
                ),
                (
                    vocab::MACHINE_OS_CONFIG_LABEL.to_owned(),
                    eff.machine_os_config.clone(),
                ),
            ],
            annotations: vec![
                (
                    vocab::RENDERED_IMAGE_PUSH_SECRET_ANNOTATION.to_owned(),
                    eff.push_secret.clone(),
                ),
                (
                    vocab::BUILDER_ANNOTATION.to_owned(),
                    eff.backend.as_str().to_owned(),
                ),
            ],
            owner: mosc_ref.clone(),
        });
        let fresh = BuildObserved {
            name: target.to_owned(),
            generation: 1,
            created: o.now,
            rendered_config: rendered.clone(),
            ..Default::default()
        };
        if let Some(img) = reuse {
            o.actions.extend(status(
                &fresh,
                Phase::Succeeded,
                Some("Build Ready: image reused from the registry"),
                None,
                None,
                Some(img.image.clone()),
                eff.backend,
            ));
            o.event(
                o.build_ref(target),
                EventType::Normal,
                event::BUILD_COMPLETED,
                format!(
                    "MachineOSBuild {target}: image {} already in the registry, reused",
                    img.image
                ),
            );
            succeeded(o, eff, &fresh, &img, &base, &inputs.extensions_image);
        } else {
            o.actions.push(start(eff, inputs, target, &push));
            // The registry check (with its push preflight) ran unless a rebuild skipped it.
            if !eff.legacy && !eff.rebuild {
                o.actions.push(Action::SetMachineOSConfigCondition {
                    machine_os_config: eff.machine_os_config.clone(),
                    condition: cond(
                        vocab::REGISTRY_ACCESS,
                        true,
                        vocab::REASON_REGISTRY_ACCESS_VERIFIED,
                        format!(
                            "{} answered with Secret {}/{}, which may push there",
                            push.repository, o.observed.namespace, eff.push_secret
                        ),
                    ),
                });
            }
            if let Some(prev) = builds.iter().rev().find(|b| b.rendered_config != rendered) {
                o.event(
                    ObjectRef::cluster("MachineConfigPool", pool),
                    EventType::Normal,
                    event::POOL_CONFIG_CHANGED,
                    format!(
                        "Pool {pool} moved from {} to {rendered}: MachineOSBuild {target}",
                        prev.rendered_config
                    ),
                );
            }
            o.event(
                o.build_ref(target),
                EventType::Normal,
                event::BUILD_STARTED,
                format!(
                    "MachineOSBuild {target} started on the {} builder",
                    eff.backend.as_str()
                ),
            );
            if eff.rebuild {
                o.actions.push(Action::RemoveRebuildAnnotation {
                    machine_os_config: eff.machine_os_config.clone(),
                });
                o.event(
                    mosc_ref.clone(),
                    EventType::Normal,
                    event::REBUILD_REQUESTED,
                    format!("Rebuild requested: MachineOSBuild {target} started"),
                );
            }
            let conds = pool_conditions_for(pool, eff, target, Phase::Initial, "");
            o.pool_conditions(conds);
        }
        return;
    }

    let Some(t) = existing else { return };
    clear_fixed_causes(o, eff, target, &push, false);
    follow(o, eff, inputs, t, &push, degraded.is_some());
}

/// The configuration is usable again: what said otherwise is over now, not one pass later.
/// `checking` (a new target's registry check is asked for): `ImageBuildDegraded=True` for a
/// configuration cause (a Secret, a field, the base image, an unsupported builder) or a
/// failed build of older inputs turns `False` (with `BuildRecovered`); otherwise the target
/// exists and its phase's conditions say the same. Both ways, `RegistryAccess=False` for a
/// configuration cause turns `Unknown` until the registry answers (a check, or the build's
/// push: [`succeeded`] makes it `True`). A failed registry check is not cleared here: only
/// the next check's answer can say it is fixed.
fn clear_fixed_causes(
    o: &mut PoolOut<'_>,
    eff: &Effective,
    target: &str,
    push: &PushTarget,
    checking: bool,
) {
    if checking
        && o.p
            .pool
            .condition(vocab::IMAGE_BUILD_DEGRADED)
            .is_some_and(|c| c.status == "True" && c.reason != vocab::REASON_REGISTRY_CHECK_FAILED)
    {
        let want = pool_conditions_for(
            &o.p.pool.name,
            eff,
            target,
            Phase::Initial,
            &format!("checking {} for an image of these inputs", push.pullspec()),
        );
        o.pool_conditions(want);
    }
    if let Some(OptIn::MachineOSConfig(m)) = &o.p.opt_in
        && m.condition(vocab::REGISTRY_ACCESS).is_some_and(|c| {
            c.status == "False"
                && c.reason != vocab::REASON_REGISTRY_CHECK_FAILED
                && c.reason != vocab::REASON_REGISTRY_UNAVAILABLE
        })
    {
        o.actions.push(Action::SetMachineOSConfigCondition {
            machine_os_config: m.name.clone(),
            condition: PoolCondition {
                type_: vocab::REGISTRY_ACCESS.to_owned(),
                status: "Unknown".to_owned(),
                reason: vocab::REASON_REGISTRY_CHECKING.to_owned(),
                message: if checking {
                    format!(
                        "checking {} with Secret {}/{}",
                        push.repository, o.observed.namespace, eff.push_secret
                    )
                } else {
                    format!(
                        "Secret {}/{} is usable again; MachineOSBuild {target} pushes to {} \
                         with it",
                        o.observed.namespace, eff.push_secret, push.repository
                    )
                },
            },
        });
    }
}

fn start(eff: &Effective, inputs: &BuildInputs, target: &str, push: &PushTarget) -> Action {
    Action::StartBuild {
        build: target.to_owned(),
        backend: eff.backend,
        inputs: inputs.clone(),
        push: push.clone(),
        push_secret: eff.push_secret.clone(),
        base_image_pull_secret: eff.base_image_pull_secret.clone(),
    }
}

fn registry_error(
    o: &mut PoolOut<'_>,
    eff: &Effective,
    push: &PushTarget,
    message: &str,
    transient: bool,
) {
    if transient {
        // Unreachable, 5xx, timeout: not the user's fault and not degraded yet, but said —
        // on the MachineOSConfig (not `RegistryAccess=True` about a repository that was
        // never checked) and in one Warning Event per message.
        if let Some(OptIn::MachineOSConfig(m)) = &o.p.opt_in {
            let c = cond(
                vocab::REGISTRY_ACCESS,
                false,
                vocab::REASON_REGISTRY_UNAVAILABLE,
                format!(
                    "{} did not answer the check with Secret {}/{} (checked again every 30 s): {message}",
                    push.repository, o.observed.namespace, eff.push_secret
                ),
            );
            if m.condition(vocab::REGISTRY_ACCESS) != Some(&c) {
                let msg = c.message.clone();
                o.actions.push(Action::SetMachineOSConfigCondition {
                    machine_os_config: eff.machine_os_config.clone(),
                    condition: c,
                });
                o.event(
                    eff.owner.clone(),
                    EventType::Warning,
                    vocab::REASON_REGISTRY_UNAVAILABLE,
                    msg,
                );
            }
        }
        o.requeue(
            vocab::REASON_REGISTRY_UNAVAILABLE,
            Retry::Transient,
            Some(30),
        );
        return;
    }
    let c = cond(
        vocab::IMAGE_BUILD_DEGRADED,
        true,
        vocab::REASON_REGISTRY_CHECK_FAILED,
        format!(
            "checking {} with Secret {}/{} failed: {message}",
            push.pullspec(),
            o.observed.namespace,
            eff.push_secret
        ),
    );
    let msg = c.message.clone();
    if o.p.pool.condition(vocab::IMAGE_BUILD_DEGRADED) != Some(&c) {
        o.actions.push(Action::SetPoolCondition {
            pool: o.p.pool.name.clone(),
            condition: c,
        });
        if !eff.legacy {
            o.actions.push(Action::SetMachineOSConfigCondition {
                machine_os_config: eff.machine_os_config.clone(),
                condition: cond(
                    vocab::REGISTRY_ACCESS,
                    false,
                    vocab::REASON_REGISTRY_CHECK_FAILED,
                    msg.clone(),
                ),
            });
        }
        o.event(
            eff.owner.clone(),
            EventType::Warning,
            event::CONFIG_RECONCILE_FAILED,
            msg,
        );
    }
    o.requeue(vocab::REASON_REGISTRY_CHECK_FAILED, Retry::Permanent, None);
}

/// Other unfinished builds: record what their backend finished with, else interrupt them.
fn interrupt_others(
    o: &mut PoolOut<'_>,
    builds: &[&BuildObserved],
    target: &str,
    backend: Backend,
) {
    for b in builds
        .iter()
        .filter(|b| b.name != target && b.phase.is_active())
    {
        match &b.backend {
            Some(finished @ (BackendStatus::Succeeded { .. } | BackendStatus::Failed { .. })) => {
                o.actions.extend(finished_status(b, finished, backend))
            }
            running => {
                if running.is_some() {
                    o.actions.push(Action::CancelBuild {
                        build: b.name.clone(),
                    });
                }
                let start = b.build_start;
                let end = start.map(|s| o.now.max(s + 1));
                let msg = format!("Build Interrupted: superseded by MachineOSBuild {target}");
                o.actions.extend(status(
                    b,
                    Phase::Interrupted,
                    Some(&msg),
                    None,
                    end,
                    None,
                    backend,
                ));
                o.event(
                    o.build_ref(&b.name),
                    EventType::Normal,
                    event::BUILD_INTERRUPTED,
                    msg,
                );
            }
        }
    }
}

/// The target exists: follow its backend, or make sure its success is recorded.
fn follow(
    o: &mut PoolOut<'_>,
    eff: &Effective,
    inputs: &BuildInputs,
    t: &BuildObserved,
    push: &PushTarget,
    degraded: bool,
) {
    let pool = o.p.pool.name.clone();
    let name = t.name.as_str();
    match t.phase {
        Phase::Succeeded => {
            let recorded = match &o.p.opt_in {
                Some(OptIn::MachineOSConfig(m)) => {
                    m.current_build.as_deref() == Some(name)
                        && m.current_image_pull_spec.is_some()
                        && m.current_image_pull_spec == t.digested_image
                }
                _ => {
                    o.p.pool
                        .annotations
                        .get(vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION)
                        == t.digested_image.as_ref()
                }
            };
            // The MachineOSImage needs the per-architecture digests, which only the registry
            // (or the backend) knows: without the record, look again.
            let recorded = recorded && o.observed.machine_os_images.iter().any(|i| i.name == name);
            let image = match (&t.digested_image, recorded) {
                (Some(d), true) => RegistryImage {
                    image: d.clone(),
                    architectures: registry_arches(o.p, name),
                    variant: None,
                },
                // Not adopted yet: the image must still be in the registry (`docs/mco-behaviour.md` §2.7).
                _ => match o.p.registry.get(name) {
                    None => {
                        o.actions.push(Action::CheckRegistry {
                            build: name.to_owned(),
                            pullspec: push.pullspec(),
                            push_secret: eff.push_secret.clone(),
                        });
                        o.requeue("CheckingRegistry", Retry::Transient, Some(1));
                        return;
                    }
                    Some(RegistryObservation::Present(img)) => img.clone(),
                    Some(RegistryObservation::Absent) => {
                        if !degraded {
                            o.actions.push(Action::DeleteBuild {
                                build: name.to_owned(),
                            });
                            o.event(o.build_ref(name), EventType::Normal, event::BUILD_DELETED, format!("MachineOSBuild {name}: its image {} is gone from the registry; building it again", push.pullspec()));
                            o.requeue("ImageGone", Retry::Transient, Some(1));
                        }
                        return;
                    }
                    Some(RegistryObservation::Error { message, transient }) => {
                        registry_error(o, eff, push, message, *transient);
                        return;
                    }
                },
            };
            succeeded(
                o,
                eff,
                t,
                &image,
                &inputs.base_image,
                &inputs.extensions_image,
            );
        }
        Phase::Failed => {
            let message = failed_message(t);
            let conds = pool_conditions_for(&pool, eff, name, Phase::Failed, &message);
            o.pool_conditions(conds);
            book_failure(o, t);
        }
        Phase::Interrupted => {}
        Phase::Initial | Phase::Prepared | Phase::Building => match &t.backend {
            None => {
                if degraded {
                    o.requeue("PoolDegraded", Retry::Permanent, None);
                } else {
                    // Created but never started, or lost with a restarted controller: start
                    // (or adopt) it; a native build of the same inputs pushes the same digest.
                    o.actions.push(start(eff, inputs, name, push));
                    o.requeue("BuildRunning", Retry::Transient, Some(10));
                }
            }
            Some(BackendStatus::Pending { detail }) => {
                if t.phase == Phase::Initial {
                    o.actions.extend(status(
                        t,
                        Phase::Prepared,
                        None,
                        None,
                        None,
                        None,
                        eff.backend,
                    ));
                    o.event(
                        o.build_ref(name),
                        EventType::Normal,
                        event::BUILD_PREPARING,
                        format!("MachineOSBuild {name} prepared and pending"),
                    );
                }
                let conds = pool_conditions_for(
                    &pool,
                    eff,
                    name,
                    Phase::Prepared,
                    detail.as_deref().unwrap_or(""),
                );
                o.pool_conditions(conds);
                o.requeue("BuildPending", Retry::Transient, Some(10));
            }
            Some(BackendStatus::Running { since }) => {
                if t.phase != Phase::Building {
                    o.actions.extend(status(
                        t,
                        Phase::Building,
                        None,
                        Some(*since),
                        None,
                        None,
                        eff.backend,
                    ));
                    o.event(
                        o.build_ref(name),
                        EventType::Normal,
                        event::BUILD_BUILDING,
                        format!("MachineOSBuild {name} building"),
                    );
                }
                let conds = pool_conditions_for(&pool, eff, name, Phase::Building, "");
                o.pool_conditions(conds);
                o.requeue("BuildRunning", Retry::Transient, Some(10));
            }
            Some(finished @ BackendStatus::Succeeded { image, .. }) => {
                o.actions.extend(finished_status(t, finished, eff.backend));
                o.event(
                    o.build_ref(name),
                    EventType::Normal,
                    event::BUILD_COMPLETED,
                    format!("MachineOSBuild {name} succeeded: {}", image.image),
                );
                succeeded(
                    o,
                    eff,
                    t,
                    image,
                    &inputs.base_image,
                    &inputs.extensions_image,
                );
            }
            Some(finished @ BackendStatus::Failed { error, at }) => {
                if error.retry == Retry::Transient
                    && retry_transient(o, eff, t, &error.message, error.reason, *at)
                {
                    return;
                }
                o.actions.extend(finished_status(t, finished, eff.backend));
                // A transient failure says how to build again.
                let attempts = t.retries.count + 1;
                let hint = match (&o.p.opt_in, error.retry) {
                    (_, Retry::Permanent) => String::new(),
                    (Some(OptIn::MachineOSConfig(m)), Retry::Transient) => format!(
                        " (transient, {}, {attempts} attempt(s): annotate MachineOSConfig {} with {} to build again)",
                        error.reason,
                        m.name,
                        vocab::REBUILD_ANNOTATION
                    ),
                    (_, Retry::Transient) => format!(
                        " (transient, {}, {attempts} attempt(s): building again may succeed)",
                        error.reason
                    ),
                };
                o.event(
                    o.build_ref(name),
                    EventType::Warning,
                    event::BUILD_FAILED,
                    format!("MachineOSBuild {name} failed: {}{hint}", error.message),
                );
                let conds = pool_conditions_for(&pool, eff, name, Phase::Failed, &error.message);
                o.pool_conditions(conds);
                book_failure(o, t);
            }
        },
    }
}

/// The status write recording what a backend finished with (Succeeded or Failed; `None`
/// for any other report, or a transition the gate refuses): `buildStart` kept, else the
/// creation time; `buildEnd` the backend's time, at least a second after the start (the
/// API requires end after start).
fn finished_status(
    b: &BuildObserved,
    finished: &BackendStatus,
    builder: Backend,
) -> Option<Action> {
    let (to, message, at, image) = match finished {
        BackendStatus::Succeeded { image, at } => {
            (Phase::Succeeded, None, *at, Some(image.image.clone()))
        }
        BackendStatus::Failed { error, at } => {
            (Phase::Failed, Some(error.message.as_str()), *at, None)
        }
        _ => return None,
    };
    let start = b.build_start.unwrap_or(b.created);
    status(
        b,
        to,
        message,
        Some(start),
        Some(at.max(start + 1)),
        image,
        builder,
    )
}

fn registry_arches(p: &PoolObserved, name: &str) -> Vec<(String, String)> {
    match p.registry.get(name) {
        Some(RegistryObservation::Present(img)) => img.architectures.clone(),
        _ => Vec::new(),
    }
}

/// How a failed build is booked. A permanent failure (a bad configuration, a missing base,
/// denied credentials) waits for its inputs to change or a rebuild: the MCO's `BuildFailed`.
/// A transient one (the registry or the API server unavailable, a timeout) is booked under
/// the error's own reason and retry class and looked at again after
/// [`TRANSIENT_FAILURE_RECHECK_SECONDS`], so metrics and logs tell an outage from a bad
/// configuration. The build stays Failed either way, as the MCO's does: a rebuild is asked
/// for with the rebuild annotation.
fn book_failure(o: &mut PoolOut<'_>, t: &BuildObserved) {
    match &t.backend {
        Some(BackendStatus::Failed { error, .. }) if error.retry == Retry::Transient => o.requeue(
            error.reason,
            Retry::Transient,
            Some(TRANSIENT_FAILURE_RECHECK_SECONDS),
        ),
        _ => o.requeue("BuildFailed", Retry::Permanent, None),
    }
}

/// When a build that failed transiently, and is not retried any more, is looked at again.
pub const TRANSIENT_FAILURE_RECHECK_SECONDS: u64 = 60;

/// How many times a build is attempted, in all, while its failures are transient (the first
/// attempt and the retries) before it is booked Failed.
pub const TRANSIENT_ATTEMPTS: u32 = 5;

/// The wait before each retry after a transient failure, counted from the failure: 10 s,
/// doubling, at most 2 minutes (10, 20, 40, 80 s for [`TRANSIENT_ATTEMPTS`] = 5: a registry
/// or API server back within about 2.5 minutes lets the build finish by itself).
pub const TRANSIENT_RETRY_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_secs(10), Duration::from_secs(120));

/// A build whose backend failed transiently: start it again after the backoff, while
/// attempts remain (`true`: handled — waiting or retried, not booked); `false` when the
/// attempts are used up and the failure is booked as usual.
///
/// While it waits the build keeps its phase and the pool's condition says what failed, the
/// attempt and when the next one starts; the retry is a Warning Event `BuildRetrying` and
/// [`Action::RetryBuild`]. A failure reported from before the last retry (a backend that has
/// not forgotten it yet) is the one already retried, not a new one.
fn retry_transient(
    o: &mut PoolOut<'_>,
    eff: &Effective,
    t: &BuildObserved,
    message: &str,
    reason: &'static str,
    failed_at: Timestamp,
) -> bool {
    let retries = t.retries;
    if retries.last_at.is_some_and(|last| failed_at <= last) {
        o.requeue("BuildRetrying", Retry::Transient, Some(1));
        return true;
    }
    if retries.count + 1 >= TRANSIENT_ATTEMPTS {
        return false;
    }
    let name = t.name.as_str();
    let attempt = retries.count + 1;
    let wait = TRANSIENT_RETRY_BACKOFF.delay(attempt).as_secs() as Timestamp;
    let due = failed_at + wait;
    if o.now < due {
        let phase = match t.phase {
            Phase::Initial | Phase::Prepared => Phase::Prepared,
            _ => Phase::Building,
        };
        let detail = format!(
            "attempt {attempt} of {TRANSIENT_ATTEMPTS} failed transiently ({reason}): {message}; \
             retrying in {}s",
            due - o.now
        );
        let conds = pool_conditions_for(&o.p.pool.name, eff, name, phase, &detail);
        o.pool_conditions(conds);
        o.requeue(reason, Retry::Transient, Some((due - o.now) as u64));
        return true;
    }
    o.actions.push(Action::RetryBuild {
        build: name.to_owned(),
        retries: attempt,
        at: o.now,
    });
    o.event(
        o.build_ref(name),
        EventType::Warning,
        event::BUILD_RETRYING,
        format!(
            "MachineOSBuild {name} failed transiently ({reason}): {message}; starting attempt {} of {TRANSIENT_ATTEMPTS}",
            attempt + 1
        ),
    );
    o.requeue("BuildRetrying", Retry::Transient, Some(1));
    true
}

fn failed_message(t: &BuildObserved) -> String {
    match &t.backend {
        Some(BackendStatus::Failed { error, .. }) => error.message.clone(),
        _ => "Build Failed".to_owned(),
    }
}

/// Record a success: MachineOSConfig status (or the legacy pool annotation), the
/// MachineOSImage, the pool conditions.
fn succeeded(
    o: &mut PoolOut<'_>,
    eff: &Effective,
    t: &BuildObserved,
    image: &RegistryImage,
    base: &str,
    extensions: &Option<String>,
) {
    let p = o.p;
    let name = t.name.as_str();
    // What the pool had before this image, as recorded until now.
    let previous_image = match &p.opt_in {
        Some(OptIn::MachineOSConfig(m)) => m.current_image_pull_spec.clone(),
        _ => p
            .pool
            .annotations
            .get(vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION)
            .cloned(),
    }
    .filter(|i| i != &image.image);
    match &p.opt_in {
        Some(OptIn::MachineOSConfig(m)) => {
            // The image is in the repository, pushed or found with the push Secret: a
            // `RegistryAccess` left `Unknown` (or `False` from a cause since fixed) says so.
            if m.condition(vocab::REGISTRY_ACCESS)
                .is_some_and(|c| c.status != "True")
            {
                o.actions.push(Action::SetMachineOSConfigCondition {
                    machine_os_config: m.name.clone(),
                    condition: cond(
                        vocab::REGISTRY_ACCESS,
                        true,
                        vocab::REASON_REGISTRY_ACCESS_VERIFIED,
                        format!(
                            "{} holds the image of MachineOSBuild {name}, reached with Secret \
                             {}/{}",
                            eff.push_repository, o.observed.namespace, eff.push_secret
                        ),
                    ),
                });
            }
            if m.current_build.as_deref() != Some(name)
                || m.current_image_pull_spec.as_deref() != Some(image.image.as_str())
                || m.observed_generation != Some(m.generation)
            {
                o.actions.push(Action::UpdateMachineOSConfigStatus {
                    machine_os_config: m.name.clone(),
                    current_image_pull_spec: image.image.clone(),
                    machine_os_build: name.to_owned(),
                    observed_generation: m.generation,
                });
            }
        }
        _ => {
            let key = vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION;
            if p.pool.annotations.get(key) != Some(&image.image) {
                o.actions.push(Action::SetPoolAnnotation {
                    pool: p.pool.name.clone(),
                    key: key.to_owned(),
                    value: image.image.clone(),
                });
            }
        }
    }
    if !o.observed.machine_os_images.iter().any(|i| i.name == name) {
        o.actions.push(Action::CreateMachineOSImage {
            name: name.to_owned(),
            pool: p.pool.name.clone(),
            rendered_config: if t.rendered_config.is_empty() {
                p.pool.rendered_config.clone().unwrap_or_default()
            } else {
                t.rendered_config.clone()
            },
            build: name.to_owned(),
            image: image.clone(),
            base_image: base.to_owned(),
            extensions_image: extensions.clone(),
            previous_image,
            owner: ObjectRef::cluster("MachineOSBuild", name),
        });
    }
    let conds = pool_conditions_for(&p.pool.name, eff, name, Phase::Succeeded, "");
    o.pool_conditions(conds);
}
