//! The executor: each lifecycle [`Action`](machineos_build_lifecycle::Action) (and each render [`RenderPlan`]) as API server and
//! registry writes. Thin on purpose — every decision was taken by
//! `machineos_build_lifecycle::decide()` or [`crate::render::plan`].
//!
//! Guarantees:
//! * **Idempotent writes.** Create → AlreadyExists is success (names are hashes of their
//!   content); delete → NotFound is success; status writes are read-modify-write with the
//!   object's `resourceVersion`, so a concurrent change gives 409 and the pass is decided
//!   again on fresh state instead of overwriting it.
//! * **Terminal conditions never change**: a build status write first re-reads the build and
//!   is skipped unless the build is still in the phase the decision saw (the lifecycle's
//!   `from`); the CRD's own CEL rules refuse the rest.
//! * Condition `lastTransitionTime` moves only when a condition's status changes.
//! * Errors are [`ExecError`]s that say whether retrying helps and carry a metric label.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference as CoreRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType as KubeEventType, Recorder};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{
    BuildStatusUpdate, EventType, ObjectRef, PoolCondition, RegistryImage, Timestamp,
};
use machineos_diagnostics::{Classify, Retry};
use serde_json::{Value, json};

use crate::kinds;
use crate::observe::build_phase;
use crate::render::RenderPlan;

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The API server refused or failed.
    #[error("{op} {object}: {error}")]
    Api {
        /// What was being done.
        op: &'static str,
        /// The object (kind/name).
        object: String,
        /// The error.
        error: Box<kube::Error>,
    },
    /// A registry operation failed.
    #[error("{op} {object}: {message}")]
    Registry {
        /// What was being done.
        op: &'static str,
        /// The image.
        object: String,
        /// Why.
        message: String,
        /// Whether retrying can help.
        retry: Retry,
    },
    /// The input the action needs is missing (a Secret, the rendered config).
    #[error("{object}: {message}")]
    Missing {
        /// The object.
        object: String,
        /// What is missing.
        message: String,
    },
}

impl Classify for ExecError {
    fn reason(&self) -> &'static str {
        match self {
            ExecError::Api { error, .. } => match error.as_ref() {
                kube::Error::Api(s) if s.code == 409 => "Conflict",
                kube::Error::Api(s) if s.code == 404 => "NotFound",
                kube::Error::Api(s) if s.code == 422 || s.code == 400 => "Invalid",
                kube::Error::Api(s) if s.code >= 500 => "ApiServerError",
                kube::Error::Api(s) if s.code == 429 => "Throttled",
                _ => "ApiError",
            },
            ExecError::Registry { .. } => "RegistryError",
            ExecError::Missing { .. } => "MissingInput",
        }
    }
    fn retry(&self) -> Retry {
        match self {
            ExecError::Api { error, .. } => match error.as_ref() {
                kube::Error::Api(s) if s.code == 422 || s.code == 400 || s.code == 403 => {
                    Retry::Permanent
                }
                _ => Retry::Transient,
            },
            ExecError::Registry { retry, .. } => *retry,
            ExecError::Missing { .. } => Retry::Transient,
        }
    }
}

fn api_err(op: &'static str, object: String) -> impl FnOnce(kube::Error) -> ExecError {
    move |error| ExecError::Api {
        op,
        object,
        error: Box::new(error),
    }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// RFC 3339 of a timestamp (seconds).
pub fn rfc3339(t: Timestamp) -> String {
    k8s_openapi::jiff::Timestamp::from_second(t)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Now, in seconds since the Unix epoch (the lifecycle's [`Timestamp`]).
pub fn now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as Timestamp)
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Create `obj` with `api`; AlreadyExists is success.
pub async fn create(api: &Api<DynamicObject>, obj: Value, what: String) -> Result<(), ExecError> {
    let obj: DynamicObject = serde_json::from_value(obj).map_err(|e| ExecError::Missing {
        object: what.clone(),
        message: format!("encoding: {e}"),
    })?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(409) => Ok(()),
        Err(e) => Err(api_err("creating", what)(e)),
    }
}

/// Delete `name`; NotFound is success.
pub async fn delete(api: &Api<DynamicObject>, name: &str, what: String) -> Result<(), ExecError> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_err("deleting", what)(e)),
    }
}

/// JSON-merge-patch `name`.
pub async fn merge(
    api: &Api<DynamicObject>,
    name: &str,
    patch: Value,
    what: String,
) -> Result<(), ExecError> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(api_err("patching", what))
}

/// Read-modify-write a status with optimistic concurrency: `edit` gets the current object
/// and its `status` (`{}` when it has none) to change, and says whether to write it.
pub async fn edit_status(
    api: &Api<DynamicObject>,
    name: &str,
    what: String,
    edit: impl FnOnce(&DynamicObject, &mut Value) -> bool,
) -> Result<bool, ExecError> {
    let mut obj = api
        .get(name)
        .await
        .map_err(api_err("reading", what.clone()))?;
    let mut status = obj.data.get("status").cloned().unwrap_or_else(|| json!({}));
    if !edit(&obj, &mut status) {
        return Ok(false);
    }
    obj.data["status"] = status;
    obj.metadata.managed_fields = None;
    api.replace_status(name, &PostParams::default(), &obj)
        .await
        .map(|_| true)
        .map_err(api_err("writing the status of", what))
}

/// A status's `conditions` list (empty when it has none).
pub fn conditions_of(status: &Value) -> Vec<Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// `new` (a condition with its type and status) with its `lastTransitionTime`: that of the
/// condition of the same type in `old` when the status did not change, else now.
fn with_transition_time(old: &[Value], mut new: Value) -> Value {
    let kept = old
        .iter()
        .find(|o| o.get("type") == new.get("type"))
        .filter(|o| o.get("status") == new.get("status"))
        .and_then(|o| o.get("lastTransitionTime"))
        .filter(|t| !t.is_null())
        .cloned();
    new["lastTransitionTime"] = kept.unwrap_or_else(|| json!(now_time()));
    new
}

/// The conditions with `c` set: its `lastTransitionTime` moves only if its status changed.
pub fn set_condition(conditions: &[Value], c: &PoolCondition) -> Vec<Value> {
    let new = with_transition_time(
        conditions,
        json!({"type": c.type_, "status": c.status, "reason": c.reason, "message": c.message}),
    );
    let mut out = conditions.to_vec();
    match out.iter().position(|o| o.get("type") == new.get("type")) {
        Some(i) => out[i] = new,
        None => out.push(new),
    }
    out
}

/// Set (or, with `None`, remove) one annotation with a JSON merge patch.
pub async fn set_annotation(
    api: &Api<DynamicObject>,
    name: &str,
    key: &str,
    value: Option<&str>,
    what: String,
) -> Result<(), ExecError> {
    let mut annotations = serde_json::Map::new();
    annotations.insert(key.to_owned(), json!(value));
    merge(
        api,
        name,
        json!({"metadata": {"annotations": annotations}}),
        what,
    )
    .await
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
                list = set_condition(&list, c);
            }
            status["conditions"] = Value::Array(list);
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
            let list = set_condition(&conditions_of(status), c);
            status["conditions"] = Value::Array(list);
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
        let old = conditions_of(status);
        let conditions: Vec<Value> = u
            .conditions
            .iter()
            .map(|c| {
                with_transition_time(
                    &old,
                    json!({
                        "type": c.type_, "status": c.status, "reason": c.reason,
                        "message": c.message, "observedGeneration": c.observed_generation,
                    }),
                )
            })
            .collect();
        status["conditions"] = Value::Array(conditions);
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
#[allow(clippy::too_many_arguments)]
pub fn build_object(
    name: &str,
    rendered_config: &str,
    machine_os_config: &str,
    push_spec: &str,
    labels: &[(String, String)],
    annotations: &[(String, String)],
    owner: &ObjectRef,
) -> Value {
    let labels: BTreeMap<&str, &str> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let annotations: BTreeMap<&str, &str> = annotations
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSBuild",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": owner_refs(owner),
        },
        "spec": {
            "machineConfig": {"name": rendered_config},
            "machineOSConfig": {"name": machine_os_config},
            "renderedImagePushSpec": push_spec,
        }
    })
}

fn owner_refs(owner: &ObjectRef) -> Value {
    match &owner.uid {
        Some(uid) if !uid.is_empty() => json!([{
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": owner.kind,
            "name": owner.name,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }]),
        _ => json!([]),
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
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1alpha1",
        "kind": "MachineOSImage",
        "metadata": {"name": name, "ownerReferences": owner_refs(owner)},
        "spec": spec,
    })
}

/// Carry out a render plan.
pub async fn render(client: &Client, plan: &RenderPlan) -> Result<(), ExecError> {
    let pools = kinds::all(client, &kinds::pool());
    if let Some(mc) = &plan.create {
        let name = mc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        create(
            &kinds::all(client, &kinds::machine_config()),
            mc.clone(),
            format!("MachineConfig {name}"),
        )
        .await?;
    }
    if let Some(c) = &plan.spec_configuration {
        merge(
            &pools,
            &plan.pool,
            json!({"spec": {"configuration": c}}),
            format!("MachineConfigPool {}", plan.pool),
        )
        .await?;
    }
    if plan.status_configuration.is_some() || plan.condition.is_some() {
        edit_status(
            &pools,
            &plan.pool,
            format!("MachineConfigPool {}", plan.pool),
            |_, status| {
                if let Some(c) = &plan.status_configuration {
                    status["configuration"] = c.clone();
                }
                if let Some(c) = &plan.condition {
                    status["conditions"] = Value::Array(set_condition(&conditions_of(status), c));
                }
                true
            },
        )
        .await?;
    }
    Ok(())
}

/// Events: kube-runtime's recorder (events.k8s.io/v1, with series aggregation). Events about
/// cluster-scoped objects go to namespace `default`: kube-apiserver refuses any other
/// namespace for them (`legacyValidateEvent`: "does not match event.namespace").
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// A recorder reporting as `machineos-controller` / `instance`.
    pub fn new(client: Client, instance: &str) -> Self {
        Events {
            recorder: Recorder::new(
                client,
                kube::runtime::events::Reporter {
                    controller: "machineos-controller".into(),
                    instance: Some(instance.to_owned()),
                },
            ),
        }
    }

    /// Publish one Event; failures are logged, never fatal (Events are best effort).
    pub async fn publish(&self, object: &ObjectRef, type_: EventType, reason: &str, note: &str) {
        let (api_version, kind) = match object.kind.as_str() {
            "ConfigMap" | "Secret" => ("v1", object.kind.as_str()),
            "MachineOSImage" | "MachineImage" => (
                "machineconfiguration.openshift.io/v1alpha1",
                object.kind.as_str(),
            ),
            k => ("machineconfiguration.openshift.io/v1", k),
        };
        let reference = CoreRef {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(object.name.clone()),
            namespace: object.namespace.clone(),
            uid: object.uid.clone(),
            ..CoreRef::default()
        };
        let ev = Event {
            type_: match type_ {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: reason.to_owned(),
            note: Some(truncate(note, 1024)),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference).await {
            tracing::warn!(object = %object.name, reason, error = %e, "recording an Event failed");
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The uid of a named object in a list, if present.
pub fn uid_of(objs: &[std::sync::Arc<DynamicObject>], name: &str) -> Option<String> {
    objs.iter()
        .find(|o| o.name_any() == name)
        .and_then(|o| o.uid())
}
