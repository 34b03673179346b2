//! What kube-apiserver's typed registries of built-in kinds do to a written object beyond
//! the generic store's rules ([`crate::store`]): the decoding of the v1 types and the few
//! `strategy.go` validations the machineos controller and agent can trip over. Pure
//! functions over `serde_json::Value`; the store calls [`prepare`] on every create and
//! main-endpoint update (patches and applies end in one), then [`validate`].
//!
//! Contract, each rule with the kube-apiserver source it follows:
//! * **`stringData`** of a core/v1 Secret is folded into `data` (each value base64-encoded,
//!   `stringData` winning over `data` for the same key) and never stored or returned —
//!   `pkg/apis/core/v1/conversion.go` (`Convert_v1_Secret_To_core_Secret`: "StringData
//!   overwrites Data"; the internal type has no `stringData`).
//! * **an empty `metadata.generateName`** (protobuf bodies carry every string field, so
//!   `kubectl create secret|configmap` sends `""`) is dropped, of every kind —
//!   `ObjectMeta.GenerateName` is `json:"generateName,omitempty"` in
//!   `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go`.
//! * **Pod** (`pkg/apis/core/validation/validation.go`, `ValidatePodSpec` →
//!   `validateContainers`): at least one container (`spec.containers: Required value`),
//!   each with a `name` and an `image` (`spec.containers[0].image: Required value`).
//! * **Job** (`pkg/apis/batch/validation/validation.go`, `validateJobSpec`): the template's
//!   pod spec as a Pod's, at `spec.template.spec`, then its `restartPolicy`: absent or
//!   `Always` (what `SetDefaults_PodSpec` makes of absent) is `Required value: valid
//!   values: "OnFailure", "Never"`, any other value but those two `Unsupported value`.
//! * **Secret** (`pkg/apis/core/validation/validation.go`, `ValidateSecret`): type
//!   `kubernetes.io/dockerconfigjson` needs `data[.dockerconfigjson]` (after `stringData`
//!   is folded) holding a JSON object, type `kubernetes.io/dockercfg` likewise
//!   `data[.dockercfg]`. An unparsable one is `Invalid value: "<secret contents
//!   redacted>"` with the parser's reason (serde_json's wording; Go's `encoding/json`
//!   words syntax errors differently).
//! * **unconditional updates** ([`allows_unconditional_update`], [`resource_version_required`]):
//!   a PUT without `metadata.resourceVersion` of a kind whose strategy's
//!   `AllowUnconditionalUpdate()` is false — custom resources
//!   (`apiextensions-apiserver/pkg/registry/customresource/strategy.go`), CRDs
//!   (`…/registry/customresourcedefinition/strategy.go`) and OpenShift Builds — is a 422
//!   `<plural>.<group> "x" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be
//!   specified for an update`, whose `details.kind` is the plural, as
//!   `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` (`Update`)
//!   builds it. Every other built-in kind here allows it.
//!
//! Simplifications: nothing else of the built-in kinds is validated (no container name
//! format, ports, volumes, resources; no `data` key or size checks, no malformed-base64
//! 400; no other Secret type's keys; no immutability of a Pod's spec, a Job's template or
//! a Secret's type on update; init containers unchecked). Validation runs on creates and
//! main-endpoint updates, not on `/status` writes (which keep the stored spec).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use machineos_crd_validation::{BadValue, ErrorType, FieldError};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resource::{GroupResource, ResourceInfo};

/// The Secret type whose `.dockerconfigjson` key is required.
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
/// The legacy Secret type whose `.dockercfg` key is required.
pub const DOCKERCFG: &str = "kubernetes.io/dockercfg";

fn is(info: &ResourceInfo, group: &str, kind: &str) -> bool {
    info.group == group && info.kind == kind
}

/// Rewrites a written object as kube-apiserver's decoding does (see the module
/// documentation): `stringData` folded into `data` (Secrets), an empty `generateName`
/// dropped.
pub fn prepare(info: &ResourceInfo, obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        && m.get("generateName").and_then(Value::as_str) == Some("")
    {
        m.remove("generateName");
    }
    if is(info, "", "Secret") {
        fold_string_data(obj);
    }
}

/// `stringData` into `data`, base64-encoded, `stringData` winning; `stringData` removed.
fn fold_string_data(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let Some(sd) = o.remove("stringData") else {
        return;
    };
    let Some(sd) = sd.as_object().filter(|m| !m.is_empty()) else {
        return;
    };
    if !o.get("data").is_some_and(Value::is_object) {
        o.insert("data".into(), Value::Object(Map::new()));
    }
    if let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) {
        for (k, v) in sd {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            data.insert(k.clone(), Value::String(STANDARD.encode(text)));
        }
    }
}

/// The field errors of a built-in object (empty when it is valid or of a kind not checked).
pub fn validate(info: &ResourceInfo, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if is(info, "", "Pod") {
        pod_spec(obj.get("spec"), "spec", &mut errs);
    } else if is(info, "batch", "Job") {
        job_spec(obj.get("spec"), &mut errs);
    } else if is(info, "", "Secret") {
        secret(obj, &mut errs);
    }
    errs
}

fn required(field: String, detail: &str) -> FieldError {
    FieldError::new(
        ErrorType::Required,
        Some(field),
        BadValue::Omit,
        detail.into(),
    )
}

fn empty_str(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str).is_none_or(str::is_empty)
}

/// `validateContainers` of a pod spec at `path`.
fn pod_spec(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if containers.is_empty() {
        errs.push(required(format!("{path}.containers"), ""));
        return;
    }
    for (i, c) in containers.iter().enumerate() {
        if empty_str(c.get("name")) {
            errs.push(required(format!("{path}.containers[{i}].name"), ""));
        }
        if empty_str(c.get("image")) {
            errs.push(required(format!("{path}.containers[{i}].image"), ""));
        }
    }
}

/// `validateJobSpec`: the template's pod spec, then its restart policy.
fn job_spec(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let pod = spec.and_then(|s| s.pointer("/template/spec"));
    pod_spec(pod, "spec.template.spec", errs);
    let field = "spec.template.spec.restartPolicy".to_string();
    match pod
        .and_then(|p| p.get("restartPolicy"))
        .and_then(Value::as_str)
    {
        None | Some("" | "Always") => {
            errs.push(required(field, r#"valid values: "OnFailure", "Never""#));
        }
        Some("OnFailure" | "Never") => {}
        Some(other) => errs.push(FieldError::new(
            ErrorType::NotSupported,
            Some(field),
            BadValue::Str(other.into()),
            r#"supported values: "OnFailure", "Never""#.into(),
        )),
    }
}

/// `ValidateSecret`'s checks of the docker config types.
fn secret(obj: &Value, errs: &mut Vec<FieldError>) {
    let key = match obj.get("type").and_then(Value::as_str) {
        Some(DOCKER_CONFIG_JSON) => ".dockerconfigjson",
        Some(DOCKERCFG) => ".dockercfg",
        _ => return,
    };
    let field = format!("data[{key}]");
    let Some(value) = obj.get("data").and_then(|d| d.get(key)) else {
        errs.push(required(field, ""));
        return;
    };
    // Malformed base64 is a decoding error (400) on a real server, before validation;
    // not reproduced, and not judged here.
    let Some(bytes) = value.as_str().and_then(|s| STANDARD.decode(s).ok()) else {
        return;
    };
    if let Some(reason) = not_a_json_object(&bytes) {
        errs.push(FieldError::new(
            ErrorType::Invalid,
            Some(field),
            BadValue::Str("<secret contents redacted>".into()),
            reason,
        ));
    }
}

/// Why `bytes` do not unmarshal into Go's `map[string]interface{}`, if they do not.
fn not_a_json_object(bytes: &[u8]) -> Option<String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Some("unexpected end of JSON input".into());
    }
    let go_type = match serde_json::from_slice::<Value>(bytes) {
        Err(e) => return Some(e.to_string()),
        Ok(Value::Object(_) | Value::Null) => return None,
        Ok(Value::Array(_)) => "array",
        Ok(Value::String(_)) => "string",
        Ok(Value::Number(_)) => "number",
        Ok(Value::Bool(_)) => "bool",
    };
    Some(format!(
        "json: cannot unmarshal {go_type} into Go value of type map[string]interface {{}}"
    ))
}

/// Whether a PUT without `metadata.resourceVersion` is taken (the strategy's
/// `AllowUnconditionalUpdate()`): false for custom resources, CRDs and Builds.
pub fn allows_unconditional_update(info: &ResourceInfo) -> bool {
    !info.is_custom()
        && !is(info, "apiextensions.k8s.io", "CustomResourceDefinition")
        && !is(info, "build.openshift.io", "Build")
}

/// The 422 of an update without a resourceVersion where one is required (`store.go`'s
/// `Update`: the group and the *resource* as the kind).
pub fn resource_version_required(gr: &GroupResource, name: &str) -> ApiError {
    ApiError::invalid(
        &gr.group,
        &gr.resource,
        name,
        vec![FieldError::new(
            ErrorType::Invalid,
            Some("metadata.resourceVersion".into()),
            BadValue::Go("0x0".into()),
            "must be specified for an update".into(),
        )],
    )
}
