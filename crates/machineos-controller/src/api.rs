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

use k8s_openapi::api::core::v1::ObjectReference as CoreRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType as KubeEventType, Recorder};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{EventType, ObjectRef, PoolCondition, Timestamp};
use machineos_diagnostics::{Classify, Retry};
use serde_json::{Value, json};

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
pub(crate) fn with_transition_time(old: &[Value], mut new: Value) -> Value {
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
