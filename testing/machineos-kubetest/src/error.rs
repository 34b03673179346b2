//! The store's errors, and the Kubernetes `Status` object each becomes.
//!
//! [`ApiError`] is what every store operation fails with: a typed value (so tests match on
//! the variant) whose `Display` is the `Status.message` kube-apiserver sends, in its own
//! format (`configmaps "x" not found`, `Operation cannot be fulfilled on configmaps "x": the
//! object has been modified; please apply your changes to the latest version and try
//! again`, `ConfigMap "X" is invalid: metadata.name: Invalid value: …`), and whose
//! [`ApiError::to_status`] is the whole `Status` object with `reason`, `code` and `details`
//! (`details.causes` from the validator's field errors for `Invalid`), as
//! `k8s.io/apimachinery/pkg/api/errors` builds them.
//!
//! Where this harness answers differently from a real server it says so on the variant
//! (`TooLarge`).

use machineos_crd_validation::error::go_quote;
use machineos_crd_validation::{Errors, FieldError};
use machineos_diagnostics::{Classify, Retry};
use serde_json::{Map, Value, json};

use crate::key::GroupResource;

/// The largest object (serialized JSON, in bytes) the store accepts: etcd's default request
/// limit, 1.5 MiB.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// A failed store operation, as a Kubernetes API error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 404 `NotFound`: no such object.
    #[error("{} {} not found", .gr, go_quote(.name))]
    NotFound {
        /// The resource looked in.
        gr: GroupResource,
        /// The object's name.
        name: String,
    },
    /// 404 `NotFound`: no such resource (an unknown group/resource, an unregistered CRD).
    #[error("the server could not find the requested resource")]
    UnknownResource {
        /// The resource asked for.
        gr: GroupResource,
    },
    /// 409 `AlreadyExists`: a create of an existing name.
    #[error("{} {} already exists", .gr, go_quote(.name))]
    AlreadyExists {
        /// The resource.
        gr: GroupResource,
        /// The object's name.
        name: String,
    },
    /// 409 `Conflict`: a stale resourceVersion or a failed precondition.
    #[error("Operation cannot be fulfilled on {} {}: {}", .gr, go_quote(.name), .detail)]
    Conflict {
        /// The resource.
        gr: GroupResource,
        /// The object's name.
        name: String,
        /// Why (`the object has been modified; …`, `Precondition failed: …`).
        detail: String,
    },
    /// 422 `Invalid`: the object fails validation; `errors` become `details.causes`.
    #[error("{}", .errors.status_message(&group_kind(.group, .kind), .name))]
    Invalid {
        /// The API group (empty for core).
        group: String,
        /// The kind (`ConfigMap`, `MachineConfigPool`).
        kind: String,
        /// The object's name (may be empty).
        name: String,
        /// The field errors.
        errors: Errors,
    },
    /// 410 `Expired`: a resourceVersion or continue token older than the retained history.
    #[error("{message}")]
    Gone {
        /// `too old resource version: X (Y)` or the continue-token text.
        message: String,
    },
    /// 400 `BadRequest`: an unparsable selector, patch or option.
    #[error("{message}")]
    BadRequest {
        /// What is wrong.
        message: String,
    },
    /// 405 `MethodNotAllowed`: the verb does not apply to this resource.
    #[error("{verb} is not supported on resources of kind {}", go_quote(&.gr.to_string()))]
    MethodNotAllowed {
        /// The resource.
        gr: GroupResource,
        /// The verb (`create`, `patch`, …).
        verb: String,
    },
    /// 403 `Forbidden`: e.g. new content in a namespace that is being terminated.
    #[error("{} {} is forbidden: {}", .gr, go_quote(.name), .detail)]
    Forbidden {
        /// The resource.
        gr: GroupResource,
        /// The object's name.
        name: String,
        /// Why.
        detail: String,
    },
    /// 413 `RequestEntityTooLarge`: an object over [`MAX_OBJECT_BYTES`]. A real server
    /// answers 413 only for request bodies over 3 MiB and fails objects over etcd's 1.5 MiB
    /// with a 500 `etcdserver: request is too large`; this harness uses the 413 at etcd's
    /// limit so clients see one clear answer.
    #[error("Request entity too large: limit is {limit}")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// 415 `UnsupportedMediaType`: a patch type the resource does not take (strategic
    /// merge patch on a custom resource).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    UnsupportedPatch,
    /// 415 `UnsupportedMediaType`: a request body in a media type (or of a kind in that
    /// media type) this server does not decode.
    #[error("{message}")]
    UnsupportedMediaType {
        /// What is not supported.
        message: String,
    },
    /// 422 `Invalid` without a kind: a JSON patch that cannot be applied (a failed `test`
    /// op, a missing path). kube-apiserver's generic message, the cause in `details`.
    #[error("the server rejected our request due to an error in our request")]
    PatchFailed {
        /// The patch library's explanation, sent as the one cause.
        cause: String,
    },
    /// 409 `Conflict` of a server-side apply: fields other managers own would change
    /// (`conflict.go`'s `NewConflictError`; no name or kind in `details`, as there).
    #[error("{message}")]
    ApplyConflict {
        /// `Apply failed with 1 conflict: conflict with "mgr": .data.x`.
        message: String,
        /// Per conflict: the cause's message (`conflict with "mgr"`) and field (`.data.x`).
        causes: Vec<(String, String)>,
    },
    /// 504 `Timeout`: a list at a resourceVersion newer than the store's.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The store's current resourceVersion.
        current: u64,
    },
}

/// `Kind` for the core group, `Kind.group` otherwise (Go's `GroupKind.String()`).
pub fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            message: message.into(),
        }
    }

    /// The stale-resourceVersion conflict on `gr`/`name`.
    pub fn stale(gr: &GroupResource, name: &str) -> ApiError {
        ApiError::Conflict {
            gr: gr.clone(),
            name: name.to_string(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        }
    }

    /// An `Invalid` error from one field error.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: Vec<FieldError>) -> ApiError {
        ApiError::Invalid {
            group: group.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            errors: Errors(errors),
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } | ApiError::UnknownResource { .. } => 404,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => 409,
            ApiError::Invalid { .. } | ApiError::PatchFailed { .. } => 422,
            ApiError::Gone { .. } => 410,
            ApiError::BadRequest { .. } => 400,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::Forbidden { .. } => 403,
            ApiError::TooLarge { .. } => 413,
            ApiError::UnsupportedPatch | ApiError::UnsupportedMediaType { .. } => 415,
            ApiError::TooLargeResourceVersion { .. } => 504,
        }
    }

    /// The `Status.reason`.
    pub fn status_reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::UnknownResource { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } | ApiError::PatchFailed { .. } => "Invalid",
            ApiError::Gone { .. } => "Expired",
            ApiError::BadRequest { .. } => "BadRequest",
            ApiError::MethodNotAllowed { .. } => "MethodNotAllowed",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::TooLarge { .. } => "RequestEntityTooLarge",
            ApiError::UnsupportedPatch | ApiError::UnsupportedMediaType { .. } => {
                "UnsupportedMediaType"
            }
            ApiError::TooLargeResourceVersion { .. } => "Timeout",
        }
    }

    /// The `Status` object a real server sends for this error.
    pub fn to_status(&self) -> Value {
        let mut details = Map::new();
        let gr_details = |d: &mut Map<String, Value>, gr: &GroupResource, name: &str| {
            if !name.is_empty() {
                d.insert("name".into(), json!(name));
            }
            if !gr.group.is_empty() {
                d.insert("group".into(), json!(gr.group));
            }
            d.insert("kind".into(), json!(gr.resource));
        };
        match self {
            ApiError::NotFound { gr, name }
            | ApiError::AlreadyExists { gr, name }
            | ApiError::Conflict { gr, name, .. }
            | ApiError::Forbidden { gr, name, .. } => gr_details(&mut details, gr, name),
            ApiError::MethodNotAllowed { gr, .. } => gr_details(&mut details, gr, ""),
            ApiError::Invalid {
                group,
                kind,
                name,
                errors,
            } => {
                if !name.is_empty() {
                    details.insert("name".into(), json!(name));
                }
                if !group.is_empty() {
                    details.insert("group".into(), json!(group));
                }
                details.insert("kind".into(), json!(kind));
                let causes: Vec<Value> = errors
                    .0
                    .iter()
                    .map(|e| {
                        json!({
                            "reason": e.cause_reason(),
                            "message": e.body(),
                            "field": e.field_text(),
                        })
                    })
                    .collect();
                details.insert("causes".into(), Value::Array(causes));
            }
            ApiError::PatchFailed { cause } => {
                details.insert(
                    "causes".into(),
                    json!([{"reason": "UnexpectedServerResponse", "message": cause}]),
                );
            }
            ApiError::ApplyConflict { causes, .. } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|(message, field)| {
                        json!({"reason": "FieldManagerConflict", "message": message, "field": field})
                    })
                    .collect();
                details.insert("causes".into(), Value::Array(causes));
            }
            ApiError::TooLargeResourceVersion { .. } => {
                details.insert(
                    "causes".into(),
                    json!([{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]),
                );
                details.insert("retryAfterSeconds".into(), json!(1));
            }
            ApiError::UnknownResource { .. }
            | ApiError::Gone { .. }
            | ApiError::BadRequest { .. }
            | ApiError::TooLarge { .. }
            | ApiError::UnsupportedPatch
            | ApiError::UnsupportedMediaType { .. } => {}
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.status_reason(),
            "code": self.code(),
        });
        if !details.is_empty()
            && let Some(m) = status.as_object_mut()
        {
            m.insert("details".into(), Value::Object(details));
        }
        status
    }
}

impl Classify for ApiError {
    fn reason(&self) -> &'static str {
        self.status_reason()
    }
    fn retry(&self) -> Retry {
        match self {
            // A conflict clears on re-read; a newer resourceVersion arrives with time.
            ApiError::Conflict { .. } | ApiError::TooLargeResourceVersion { .. } => {
                Retry::Transient
            }
            _ => Retry::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_crd_validation::{BadValue, ErrorType};

    fn cm() -> GroupResource {
        GroupResource::new("", "configmaps")
    }

    #[test]
    fn messages_reasons_and_codes_follow_the_api_server() {
        let mcp = GroupResource::new("machineconfiguration.openshift.io", "machineconfigpools");
        let cases: Vec<(ApiError, &str, &str, u16, Retry)> = vec![
            (
                ApiError::NotFound {
                    gr: cm(),
                    name: "x".into(),
                },
                r#"configmaps "x" not found"#,
                "NotFound",
                404,
                Retry::Permanent,
            ),
            (
                ApiError::NotFound {
                    gr: mcp.clone(),
                    name: "w".into(),
                },
                r#"machineconfigpools.machineconfiguration.openshift.io "w" not found"#,
                "NotFound",
                404,
                Retry::Permanent,
            ),
            (
                ApiError::AlreadyExists {
                    gr: cm(),
                    name: "x".into(),
                },
                r#"configmaps "x" already exists"#,
                "AlreadyExists",
                409,
                Retry::Permanent,
            ),
            (
                ApiError::stale(&cm(), "x"),
                r#"Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply your changes to the latest version and try again"#,
                "Conflict",
                409,
                Retry::Transient,
            ),
            (
                ApiError::Gone {
                    message: "too old resource version: 3 (7)".into(),
                },
                "too old resource version: 3 (7)",
                "Expired",
                410,
                Retry::Permanent,
            ),
            (
                ApiError::bad_request("bad"),
                "bad",
                "BadRequest",
                400,
                Retry::Permanent,
            ),
            (
                ApiError::MethodNotAllowed {
                    gr: cm(),
                    verb: "deletecollection".into(),
                },
                r#"deletecollection is not supported on resources of kind "configmaps""#,
                "MethodNotAllowed",
                405,
                Retry::Permanent,
            ),
            (
                ApiError::TooLarge {
                    limit: MAX_OBJECT_BYTES,
                },
                "Request entity too large: limit is 1572864",
                "RequestEntityTooLarge",
                413,
                Retry::Permanent,
            ),
        ];
        for (e, msg, reason, code, retry) in cases {
            assert_eq!(e.to_string(), msg);
            let s = e.to_status();
            assert_eq!(s["message"], msg);
            assert_eq!(s["reason"], reason);
            assert_eq!(s["code"], code);
            assert_eq!(s["kind"], "Status");
            assert_eq!(s["status"], "Failure");
            machineos_diagnostics::check_classified(&e, reason, retry).unwrap();
        }
        let s = ApiError::NotFound {
            gr: mcp,
            name: "w".into(),
        }
        .to_status();
        assert_eq!(
            s["details"],
            json!({"name": "w", "group": "machineconfiguration.openshift.io", "kind": "machineconfigpools"})
        );
    }

    #[test]
    fn invalid_carries_field_causes() {
        let e = ApiError::invalid(
            "",
            "ConfigMap",
            "Bad",
            vec![FieldError::new(
                ErrorType::Invalid,
                Some("metadata.name".into()),
                BadValue::Str("Bad".into()),
                "x".into(),
            )],
        );
        assert_eq!(
            e.to_string(),
            r#"ConfigMap "Bad" is invalid: metadata.name: Invalid value: "Bad": x"#
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(
            s["details"]["causes"],
            json!([{"reason": "FieldValueInvalid", "message": "Invalid value: \"Bad\": x", "field": "metadata.name"}])
        );
        assert_eq!(s["details"]["kind"], "ConfigMap");
    }
}
