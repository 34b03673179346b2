//! The build sub-controller's executor: one pool's lifecycle [`Action`]s, in order, as API
//! server and registry writes — thin, every decision was `machineos_build_lifecycle::decide`'s.
//!
//! * A registry check the lifecycle asks for is done at once and the pool decided again
//!   with the answer ([`run_pool`], at most four rounds).
//! * The first write that fails stops the pool's remaining actions (they are decided again)
//!   and is returned; the loop backs the pool off.
//! * **Terminal conditions never change**: a build status write first re-reads the build and
//!   is skipped unless the build is still in the phase the decision saw (the lifecycle's
//!   `from`); the CRD's own CEL rules refuse the rest.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{
    Action, BuildInputs, BuildStatusUpdate, ObjectRef, Observed, PoolCondition, PoolObserved,
    PushTarget, RegistryImage, RegistryObservation, decide,
};
use machineos_diagnostics::{Classify, Retry};
use serde_json::{Value, json};

use super::Ctx;
use crate::api::{self, ExecError, conditions_of, edit_status, rfc3339, set_condition};
use crate::builder::BuildRequest;
use crate::kinds;
use crate::metrics::ReconcileResult;
use crate::observe::{self, Snapshot, build_phase};
use crate::registry_ops;
use machineos_kube::ConditionView;
use machineos_kube::condition::Condition as _;

/// What carrying out a pool's actions taught the controller.
#[derive(Default)]
pub(crate) struct Executed {
    /// Registry answers by build name, with the key of the credentials that got them
    /// ([`registry_ops::credentials_key`]).
    pub answers: Vec<(String, RegistryObservation, u64)>,
    /// Registry answers to forget (the build was deleted).
    pub forget: Vec<String>,
    /// The soonest requeue asked for.
    pub requeue: Option<Duration>,
}

impl Executed {
    fn requeue_in(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }
}

/// Decide one pool and carry its actions out; again with a registry answer, at most a few
/// times.
pub(crate) async fn run_pool(
    ctx: &Ctx<'_>,
    s: &Snapshot,
    shared: &Observed,
    mut p: PoolObserved,
) -> (String, Result<Executed, ExecError>) {
    let mut all = Executed::default();
    for _ in 0..4 {
        let one = Observed {
            pools: vec![p.clone()],
            ..shared.clone()
        };
        let actions = decide(&one, api::now());
        match execute(ctx, s, &p, actions).await {
            Ok(done) => {
                let again = !done.answers.is_empty();
                for (build, answer, _) in &done.answers {
                    p.registry.insert(build.clone(), answer.clone());
                }
                all.answers.extend(done.answers);
                all.forget.extend(done.forget);
                if let Some(d) = done.requeue {
                    all.requeue_in(d);
                }
                if !again {
                    break;
                }
            }
            Err(e) => return (p.pool.name.clone(), Err(e)),
        }
    }
    (p.pool.name.clone(), Ok(all))
}

/// Say on each MachineOSConfig no pool takes that its pool is missing
/// ([`machineos_build_lifecycle::decide_unbound`]): its condition, then one Event.
pub(crate) async fn run_unbound(ctx: &Ctx<'_>, o: &Observed) -> Result<(), ExecError> {
    for a in machineos_build_lifecycle::decide_unbound(o) {
        match a {
            Action::SetMachineOSConfigCondition {
                machine_os_config,
                condition,
            } => {
                set_machine_os_config_condition(ctx.client, &machine_os_config, &condition).await?
            }
            Action::Event {
                object,
                type_,
                reason,
                message,
            } => ctx.events.publish(&object, type_, &reason, &message).await,
            _ => {}
        }
    }
    Ok(())
}

/// Carry out one pool's actions in order.
async fn execute(
    ctx: &Ctx<'_>,
    s: &Snapshot,
    p: &PoolObserved,
    actions: Vec<Action>,
) -> Result<Executed, ExecError> {
    let started = Instant::now();
    let mut done = Executed::default();
    let mut events = Vec::new();
    let mut conds = Vec::new();
    for a in actions {
        match a {
            Action::CheckRegistry {
                build,
                pullspec,
                push_secret,
            } => {
                let creds = s
                    .dockerconfigjson(&push_secret)
                    .into_iter()
                    .collect::<Vec<_>>();
                let key = registry_ops::credentials_key(&creds);
                let obs = match ctx.opts.registry.client(&creds) {
                    // A build will push here when the tag is absent: the push preflight
                    // asks now whether the Secret may, not after the build.
                    Ok(r) => registry_ops::check(&r, &pullspec, &s.namespace, &push_secret).await,
                    Err(e) => RegistryObservation::Error {
                        transient: e.is_transient(),
                        message: e.message,
                    },
                };
                tracing::info!(pool = %p.pool.name, build = %build, answer = ?obs, "registry checked");
                done.answers.push((build, obs, key));
            }
            Action::CreateBuild {
                name,
                rendered_config,
                machine_os_config,
                rendered_image_push_spec,
                labels,
                annotations,
                owner,
            } => {
                let obj = build_object(
                    &name,
                    &rendered_config,
                    &machine_os_config,
                    &rendered_image_push_spec,
                    &labels,
                    &annotations,
                    &owner,
                )
                .map_err(|e| ExecError::Missing {
                    object: format!("MachineOSBuild {name}"),
                    message: format!("encoding: {e}"),
                })?;
                api::create(
                    &kinds::all(ctx.client, &kinds::build()),
                    obj,
                    format!("MachineOSBuild {name}"),
                )
                .await?;
                tracing::info!(pool = %p.pool.name, build = %name, "MachineOSBuild created");
                ctx.metrics.config_change(&p.pool.name);
            }
            Action::StartBuild {
                build,
                backend,
                inputs,
                push,
                push_secret,
                base_image_pull_secret,
            } => {
                let Some(builder) = ctx.builders.get(backend) else {
                    // The lifecycle only starts supported backends.
                    continue;
                };
                let request = build_request(
                    s,
                    p,
                    build,
                    inputs,
                    push,
                    &push_secret,
                    base_image_pull_secret.as_deref(),
                )?;
                ctx.metrics.build_started(&p.pool.name);
                builder.start(request);
            }
            Action::CancelBuild { build } => ctx.builders.cancel(&build),
            Action::RetryBuild { build, retries, at } => {
                // Recorded first: a retry whose record failed is not made, so the attempts
                // stay bounded whatever fails.
                use machineos_build_lifecycle::vocab::{
                    BUILD_RETRIED_AT_ANNOTATION, BUILD_RETRIES_ANNOTATION,
                };
                api::merge(
                    &kinds::all(ctx.client, &kinds::build()),
                    &build,
                    serde_json::json!({"metadata": {"annotations": {
                        BUILD_RETRIES_ANNOTATION: retries.to_string(),
                        BUILD_RETRIED_AT_ANNOTATION: at.to_string(),
                    }}}),
                    format!("MachineOSBuild {build}"),
                )
                .await?;
                ctx.builders.cancel(&build);
                tracing::warn!(pool = %p.pool.name, build = %build, retries, "build started again after a transient failure");
            }
            Action::SetBuildStatus(u) => {
                if set_build_status(ctx.client, &ctx.opts.namespace, &u).await? {
                    tracing::info!(pool = %p.pool.name, build = %u.build, from = ?u.from, to = ?u.to, "build status");
                    ctx.metrics.build_state(&p.pool.name, u.to);
                    if u.to.is_terminal() {
                        let secs = match (ctx.native.took(&u.build), u.build_start, u.build_end) {
                            (Some(t), _, _) => t.as_secs_f64(),
                            (None, Some(a), Some(b)) => (b - a).max(0) as f64,
                            _ => 0.0,
                        };
                        ctx.metrics.build_finished(&p.pool.name, u.to, secs);
                    }
                }
            }
            Action::DeleteBuild { build } => {
                ctx.builders.cancel(&build);
                api::delete(
                    &kinds::all(ctx.client, &kinds::build()),
                    &build,
                    format!("MachineOSBuild {build}"),
                )
                .await?;
                done.forget.push(build);
            }
            Action::RemoveRebuildAnnotation { machine_os_config } => {
                api::set_annotation(
                    &kinds::all(ctx.client, &kinds::machine_os_config()),
                    &machine_os_config,
                    machineos_build_lifecycle::vocab::REBUILD_ANNOTATION,
                    None,
                    format!("MachineOSConfig {machine_os_config}"),
                )
                .await?;
            }
            Action::UpdateMachineOSConfigStatus {
                machine_os_config,
                current_image_pull_spec,
                machine_os_build,
                observed_generation,
            } => {
                let api = kinds::all(ctx.client, &kinds::machine_os_config());
                let what = format!("MachineOSConfig {machine_os_config}");
                api::set_annotation(
                    &api,
                    &machine_os_config,
                    machineos_build_lifecycle::vocab::CURRENT_MACHINE_OS_BUILD_ANNOTATION,
                    Some(&machine_os_build),
                    what.clone(),
                )
                .await?;
                api::edit_status(&api, &machine_os_config, what, |_, st| {
                    st["currentImagePullSpec"] = serde_json::json!(current_image_pull_spec);
                    st["machineOSBuild"] = serde_json::json!({
                        "group": "machineconfiguration.openshift.io",
                        "resource": "machineosbuilds",
                        "name": machine_os_build,
                    });
                    st["observedGeneration"] = serde_json::json!(observed_generation);
                    true
                })
                .await?;
                tracing::info!(pool = %p.pool.name, build = %machine_os_build, image = %current_image_pull_spec, "MachineOSConfig points at the new image");
            }
            Action::CreateMachineOSImage {
                name,
                pool,
                rendered_config,
                build,
                image,
                base_image,
                extensions_image,
                previous_image,
                owner,
            } => {
                let mut owner = owner;
                if owner.uid.is_none() {
                    owner.uid = api::uid_of(&s.builds, &owner.name);
                }
                let obj = image_object(
                    &name,
                    &pool,
                    &rendered_config,
                    &build,
                    &image,
                    &base_image,
                    extensions_image.as_deref(),
                    previous_image.as_deref(),
                    &owner,
                );
                api::create(
                    &kinds::all(ctx.client, &kinds::image()),
                    obj,
                    format!("MachineOSImage {name}"),
                )
                .await?;
            }
            Action::DeleteMachineOSImage { name } => {
                api::delete(
                    &kinds::all(ctx.client, &kinds::image()),
                    &name,
                    format!("MachineOSImage {name}"),
                )
                .await?;
            }
            Action::DeleteRegistryImage { image, push_secret } => {
                let creds: Vec<(String, Vec<u8>)> = push_secret
                    .as_deref()
                    .and_then(|n| s.dockerconfigjson(n))
                    .into_iter()
                    .collect();
                let registry =
                    ctx.opts
                        .registry
                        .client(&creds)
                        .map_err(|e| ExecError::Registry {
                            op: "deleting",
                            object: image.clone(),
                            message: e.message,
                            retry: e.retry,
                        })?;
                let outcome = registry_ops::delete(&registry, &image)
                    .await
                    .map_err(|message| ExecError::Registry {
                        op: "deleting",
                        object: image.clone(),
                        message,
                        retry: Retry::Transient,
                    })?;
                tracing::info!(pool = %p.pool.name, %image, ?outcome, "registry image deleted (retention)");
            }
            Action::SetPoolCondition { condition, .. } => conds.push(condition),
            Action::SetMachineOSConfigCondition {
                machine_os_config,
                condition,
            } => {
                set_machine_os_config_condition(ctx.client, &machine_os_config, &condition).await?;
            }
            Action::SetPoolAnnotation { pool, key, value } => {
                api::set_annotation(
                    &kinds::all(ctx.client, &kinds::pool()),
                    &pool,
                    &key,
                    Some(&value),
                    format!("MachineConfigPool {pool}"),
                )
                .await?;
            }
            Action::Event {
                object,
                type_,
                reason,
                message,
            } => events.push((object, type_, reason, message)),
            Action::Requeue(r) => {
                ctx.metrics
                    .reconcile(ReconcileResult::Requeue, r.reason, 0.0);
                if let Some(after) = r.after_seconds {
                    // The lifecycle's requeues are safety nets; state changes wake the
                    // loop earlier.
                    done.requeue_in(Duration::from_secs(after));
                }
            }
        }
    }
    if !conds.is_empty() {
        set_pool_conditions(ctx.client, &p.pool.name, &conds).await?;
    }
    for (object, type_, reason, message) in events {
        ctx.events.publish(&object, type_, &reason, &message).await;
    }
    ctx.metrics
        .reconcile(ReconcileResult::Ok, "", started.elapsed().as_secs_f64());
    Ok(done)
}

/// Everything a backend needs to run `build`, from the snapshot: the rendered MachineConfig
/// (typed, and as stored for the MachineConfig ConfigMap), the Secrets' bytes, the
/// MachineOSConfig, the architectures.
#[allow(clippy::too_many_arguments)]
fn build_request(
    s: &Snapshot,
    p: &PoolObserved,
    build: String,
    inputs: BuildInputs,
    push: PushTarget,
    push_secret: &str,
    base_image_pull_secret: Option<&str>,
) -> Result<BuildRequest, ExecError> {
    let rendered_name = p.pool.rendered_config.clone().unwrap_or_default();
    let rendered_obj = s
        .machine_configs
        .iter()
        .find(|m| m.name_any() == rendered_name)
        .ok_or_else(|| ExecError::Missing {
            object: format!("MachineConfig {rendered_name}"),
            message: "not in the cache".into(),
        })?;
    let rendered_json =
        serde_json::to_vec(rendered_obj.as_ref()).map_err(|e| ExecError::Missing {
            object: format!("MachineConfig {rendered_name}"),
            message: e.to_string(),
        })?;
    let rendered: machineos_api::v1::MachineConfig = rendered_obj
        .as_ref()
        .clone()
        .try_parse()
        .map_err(|e| ExecError::Missing {
            object: format!("MachineConfig {rendered_name}"),
            message: e.to_string(),
        })?;
    let bytes = |name: &str| {
        s.dockerconfigjson(name)
            .map(|(_, b)| (name.to_owned(), b))
            .ok_or_else(|| ExecError::Missing {
                object: format!("Secret {}/{name}", s.namespace),
                message: "not in the cache, or without .dockerconfigjson".into(),
            })
    };
    let push_secret = bytes(push_secret)?;
    let pull_secret = match &base_image_pull_secret {
        Some(n) => Some(bytes(n)?),
        None => None,
    };
    let build_obj = s.builds.iter().find(|b| b.name_any() == build);
    let machine_os_config = build_obj
        .and_then(|b| {
            observe::view_of::<machineos_kube::mco::MachineOSBuildView>("MachineOSBuild", b)
                .spec
                .machine_os_config
                .name
        })
        .unwrap_or_else(|| p.pool.name.clone());
    let pool_obj = s.pools.iter().find(|o| o.name_any() == p.pool.name);
    let mosc_obj = s
        .machine_os_configs
        .iter()
        .find(|o| o.name_any() == machine_os_config);
    let architectures = crate::arches::for_pool(
        pool_obj.map(AsRef::as_ref),
        mosc_obj.map(AsRef::as_ref),
        &s.nodes,
    );
    let boot_guard = machineos_vocab::build::boot_guard_on(
        mosc_obj
            .and_then(|o| {
                o.annotations()
                    .get(machineos_vocab::build::BOOT_GUARD_ANNOTATION)
            })
            .map(String::as_str),
    );
    Ok(BuildRequest {
        architectures,
        boot_guard,
        namespace: s.namespace.clone(),
        build_uid: build_obj.and_then(|b| b.uid()).unwrap_or_default(),
        build,
        machine_os_config,
        pool: p.pool.name.clone(),
        rendered,
        rendered_json,
        inputs,
        push,
        push_secret,
        pull_secret,
    })
}

/// Set pool conditions (one read-modify-write for all of them).
pub async fn set_pool_conditions(
    client: &Client,
    pool: &str,
    conds: &[PoolCondition],
) -> Result<(), ExecError> {
    let api = kinds::all(client, &kinds::pool());
    edit_status(
        &api,
        pool,
        format!("MachineConfigPool {pool}"),
        |_, status| {
            let mut list = conditions_of(status);
            for c in conds {
                set_condition(&mut list, c);
            }
            status["conditions"] = ConditionView::to_json(&list);
            true
        },
    )
    .await
    .map(|_| ())
}

/// Set one condition in a MachineOSConfig's `status.conditions` (metav1.Condition: the
/// transition time moves only when the status does).
pub async fn set_machine_os_config_condition(
    client: &Client,
    name: &str,
    c: &PoolCondition,
) -> Result<(), ExecError> {
    let api = kinds::all(client, &kinds::machine_os_config());
    edit_status(
        &api,
        name,
        format!("MachineOSConfig {name}"),
        |_, status| {
            let mut list = conditions_of(status);
            set_condition(&mut list, c);
            status["conditions"] = ConditionView::to_json(&list);
            true
        },
    )
    .await
    .map(|_| ())
}

/// Write a build's status if it is still in `u.from`. A Job-built build's
/// `status.builder.job` names its Job in `namespace` (the CRD requires it for `Job`).
pub async fn set_build_status(
    client: &Client,
    namespace: &str,
    u: &BuildStatusUpdate,
) -> Result<bool, ExecError> {
    let api = kinds::all(client, &kinds::build());
    edit_status(&api, &u.build, format!("MachineOSBuild {}", u.build), |obj, status| {
        if build_phase(obj) != u.from {
            tracing::info!(build = %u.build, want = ?u.from, "build moved on since the decision; skipping its status write");
            return false;
        }
        // The decided conditions, in the decided order, each keeping its transition time
        // when its status did not change.
        let old = conditions_of(status);
        let conditions: Vec<ConditionView> = u
            .conditions
            .iter()
            .map(|c| {
                let mut new = ConditionView {
                    observed_generation: Some(c.observed_generation),
                    ..ConditionView::new(&c.type_, &c.status, &c.reason, &c.message)
                };
                if let Some(o) = old.iter().find(|o| o.type_ == c.type_ && o.status == c.status) {
                    new.keep_transition_time(o);
                }
                new
            })
            .collect();
        status["conditions"] = ConditionView::to_json(&conditions);
        if let Some(s) = u.build_start {
            status["buildStart"] = json!(rfc3339(s));
        }
        if let Some(e) = u.build_end {
            status["buildEnd"] = json!(rfc3339(e));
        }
        if let Some(d) = &u.digested_image {
            status["digestedImagePushSpec"] = json!(d);
        }
        status["builder"] = json!({"imageBuilderType": u.builder.as_str()});
        if u.builder == machineos_build_lifecycle::Backend::Job {
            status["builder"]["job"] = json!({
                "group": "batch",
                "resource": "jobs",
                "namespace": namespace,
                "name": machineos_buildrequest::objects::names::job_name(&u.build),
            });
        }
        true
    })
    .await
}

/// The MachineOSBuild object a CreateBuild action describes.
pub fn build_object(
    name: &str,
    rendered_config: &str,
    machine_os_config: &str,
    push_spec: &str,
    labels: &[(String, String)],
    annotations: &[(String, String)],
    owner: &ObjectRef,
) -> Result<Value, serde_json::Error> {
    use machineos_api::v1::{
        MachineConfigReference, MachineOSBuild, MachineOSBuildSpec, MachineOSConfigReference,
    };
    let mut b = MachineOSBuild::new(
        name,
        MachineOSBuildSpec {
            machine_config: MachineConfigReference {
                name: rendered_config.to_owned(),
            },
            machine_os_config: MachineOSConfigReference {
                name: machine_os_config.to_owned(),
            },
            rendered_image_push_spec: push_spec.to_owned(),
        },
    );
    b.metadata.labels = Some(labels.iter().cloned().collect());
    b.metadata.annotations = Some(annotations.iter().cloned().collect());
    b.metadata.owner_references = Some(owner_refs(owner));
    serde_json::to_value(&b)
}

/// The controller owner reference of an object owned by `owner` (none while its uid is
/// unknown).
fn owner_refs(owner: &ObjectRef) -> Vec<OwnerReference> {
    match &owner.uid {
        Some(uid) if !uid.is_empty() => vec![OwnerReference {
            api_version: "machineconfiguration.openshift.io/v1".into(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        _ => Vec::new(),
    }
}

/// The MachineOSImage record of a build.
#[allow(clippy::too_many_arguments)]
pub fn image_object(
    name: &str,
    pool: &str,
    rendered_config: &str,
    build: &str,
    image: &RegistryImage,
    base_image: &str,
    extensions_image: Option<&str>,
    previous_image: Option<&str>,
    owner: &ObjectRef,
) -> Value {
    let arches: Vec<Value> = image
        .architectures
        .iter()
        .map(|(a, d)| json!({"architecture": a, "digest": d}))
        .collect();
    let mut spec = json!({
        "machineConfigPool": {"name": pool},
        "machineConfig": {"name": rendered_config},
        "machineOSBuild": {"name": build},
        "image": image.image,
        "architectures": arches,
        "baseImage": base_image,
    });
    if let Some(e) = extensions_image {
        spec["extensionsImage"] = json!(e);
    }
    if let Some(v) = &image.variant {
        let mut variant = json!({"kind": v.kind});
        for (key, value) in [
            ("id", &v.id),
            ("versionID", &v.version_id),
            ("variantID", &v.variant_id),
        ] {
            if !value.is_empty() {
                variant[key] = json!(value);
            }
        }
        spec["variant"] = variant;
    }
    let mut metadata = json!({"name": name, "ownerReferences": owner_refs(owner)});
    if let Some(previous) = previous_image {
        metadata["annotations"] =
            json!({ machineos_vocab::build::PREVIOUS_IMAGE_ANNOTATION: previous });
    }
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1alpha1",
        "kind": "MachineOSImage",
        "metadata": metadata,
        "spec": spec,
    })
}
