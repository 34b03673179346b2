//! The API writes every sub-controller shares: create (AlreadyExists is success), delete
//! (NotFound is success), merge patches, read-modify-write of a status with the object's
//! `resourceVersion`, conditions whose `lastTransitionTime` moves only when their status
//! does, annotations, Events — and [`ExecError`], the one error of a write, which says
//! whether retrying helps and carries a metric label. The sub-controllers' executors
//! (`build::execute`, `render::execute`, `rollout::execute`) are made of these.
//!
//! Guarantees:
//! * **Idempotent writes.** Create → AlreadyExists is success (names are hashes of their
//!   content); delete → NotFound is success; status writes are read-modify-write with the
//!   object's `resourceVersion`, so a concurrent change gives 409 and the pass is decided
//!   again on fresh state instead of overwriting it.
//! * Condition `lastTransitionTime` moves only when a condition's status changes.
//! * Errors are [`ExecError`]s that say whether retrying helps and carry a metric label.

use crate::kinds;
use k8s_openapi::api::core::v1::ObjectReference as CoreRef;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{EventType, ObjectRef, PoolCondition};
use machineos_diagnostics::{Classify, Retry};
use machineos_kube::error::code;
use machineos_kube::{ConditionView, KubeError, api_err, upsert_condition};
use serde_json::{Value, json};

pub use machineos_kube::time::{now, rfc3339};

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The API server refused or failed.
    #[error("{0}")]
    Api(KubeError),
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

impl ExecError {
    /// How long the API server asked to be left alone (a 429's `retryAfterSeconds`).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ExecError::Api(e) => e.retry_after(),
            _ => None,
        }
    }
}

impl From<KubeError> for ExecError {
    fn from(e: KubeError) -> ExecError {
        ExecError::Api(e)
    }
}

impl Classify for ExecError {
    fn reason(&self) -> &'static str {
        match self {
            ExecError::Api(e) => e.reason(),
            ExecError::Registry { .. } => "RegistryError",
            ExecError::Missing { .. } => "MissingInput",
        }
    }
    fn retry(&self) -> Retry {
        match self {
            ExecError::Api(e) => e.retry(),
            ExecError::Registry { retry, .. } => *retry,
            ExecError::Missing { .. } => Retry::Transient,
        }
    }
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
        Err(e) => Err(api_err("creating", what)(e).into()),
    }
}

/// Delete `name`; NotFound is success.
pub async fn delete(api: &Api<DynamicObject>, name: &str, what: String) -> Result<(), ExecError> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_err("deleting", what)(e).into()),
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
        .map_err(|e| api_err("patching", what)(e).into())
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
        .map_err(|e| api_err("writing the status of", what)(e).into())
}

/// A status's `conditions` list (empty when it has none), read leniently.
pub fn conditions_of(status: &Value) -> Vec<ConditionView> {
    ConditionView::list_of(status)
}

/// Set `c` in `conditions`: its `lastTransitionTime` moves only if its status changed.
pub fn set_condition(conditions: &mut Vec<ConditionView>, c: &PoolCondition) {
    upsert_condition(
        conditions,
        ConditionView::new(&c.type_, &c.status, &c.reason, &c.message),
    );
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

/// Events (see [`machineos_kube::Events`]) about the lifecycle's objects. Events about
/// cluster-scoped objects go to namespace `default`: kube-apiserver refuses any other
/// namespace for them (`legacyValidateEvent`: "does not match event.namespace").
///
/// Every Event names its object's uid: `kubectl describe` finds an object's Events by
/// `involvedObject.uid` among other fields, so an Event without it is invisible there. A
/// reference the deciders made without one (they name objects by kind and name) gets it
/// from the API server, one GET per such Event (the MCO kinds only; a ConfigMap's or
/// Secret's Event keeps none); an object that does not exist keeps none.
pub struct Events {
    events: machineos_kube::Events,
    client: Client,
}

impl Events {
    /// A recorder reporting as `machineos-controller` / `instance`.
    pub fn new(client: Client, instance: &str) -> Self {
        Events {
            events: machineos_kube::Events::new(client.clone(), "machineos-controller", instance),
            client,
        }
    }

    /// The uid of `object`, read from the API server (`None`: an unknown kind, or absent).
    async fn uid_of(&self, object: &ObjectRef) -> Option<String> {
        let ar = match object.kind.as_str() {
            "MachineConfigPool" => kinds::pool(),
            "MachineConfig" => kinds::machine_config(),
            "MachineOSConfig" => kinds::machine_os_config(),
            "MachineOSBuild" => kinds::build(),
            "MachineOSImage" => kinds::image(),
            "MachineImage" => kinds::machine_image(),
            // ConfigMaps and Secrets: the Role lists and watches them but has no `get`, and
            // their Events are mostly about ones that do not exist.
            _ => return None,
        };
        let api: Api<DynamicObject> = match &object.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        match api.get_metadata_opt(&object.name).await {
            Ok(found) => found.and_then(|o| o.metadata.uid),
            Err(e) => {
                tracing::debug!(object = %object.name, error = %e, "reading an Event's object uid");
                None
            }
        }
    }

    /// Publish one Event; failures are logged, never fatal (Events are best effort).
    pub async fn publish(&self, object: &ObjectRef, type_: EventType, reason: &str, note: &str) {
        let uid = match &object.uid {
            Some(uid) => Some(uid.clone()),
            None => self.uid_of(object).await,
        };
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
            uid,
            ..CoreRef::default()
        };
        let warning = matches!(type_, EventType::Warning);
        self.events.publish(&reference, warning, reason, note).await;
    }
}

/// The uid of a named object in a list, if present.
pub fn uid_of(objs: &[std::sync::Arc<DynamicObject>], name: &str) -> Option<String> {
    objs.iter()
        .find(|o| o.name_any() == name)
        .and_then(|o| o.uid())
}
