//! `metadata` as the API server reads and validates it: names (DNS-1123 subdomain or label,
//! with apimachinery's messages), `generateName`, finalizers, owner references, the
//! generation rule, and the object size limit.
//!
//! All functions are pure, over `serde_json::Value`.

use machineos_crd_validation::{BadValue, ErrorType, FieldError};
use serde_json::{Map, Value};

use crate::error::{ApiError, MAX_OBJECT_BYTES};
use crate::resource::NameRule;

/// apimachinery's `DNS1123SubdomainErrorMsg`.
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// apimachinery's `DNS1123LabelErrorMsg`.
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// The longest `generateName` prefix kept (63 minus the 5 random characters).
pub const MAX_GENERATE_NAME_PREFIX: usize = 58;

/// Whether `s` is an RFC 1123 label's characters (the length is checked apart).
pub(crate) fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The field errors of `name` under `rule`, at `metadata.name` (empty when valid).
pub fn validate_name(name: &str, rule: NameRule) -> Vec<FieldError> {
    let field = Some("metadata.name".to_string());
    let bad = |detail: &str| {
        FieldError::new(
            ErrorType::Invalid,
            field.clone(),
            BadValue::Str(name.into()),
            detail.into(),
        )
    };
    let mut errs = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                errs.push(bad("must be no more than 253 characters"));
            }
            if !name.split('.').all(is_label) {
                errs.push(bad(SUBDOMAIN_MSG));
            }
        }
        NameRule::Label => {
            if name.len() > 63 {
                errs.push(bad("must be no more than 63 characters"));
            }
            if !is_label(name) {
                errs.push(bad(LABEL_MSG));
            }
        }
    }
    errs
}

/// The `name or generateName is required` error.
pub fn name_required() -> FieldError {
    FieldError::new(
        ErrorType::Required,
        Some("metadata.name".into()),
        BadValue::Omit,
        "name or generateName is required".into(),
    )
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata`, created when missing (and replacing a non-object).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(m) = obj else {
        unreachable!("made an object above")
    };
    let meta = m
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    crate::json::strings_at(obj, "/metadata/finalizers")
}

/// Sets `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(obj: &mut Value, f: &[String]) {
    let m = meta_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert(
            "finalizers".into(),
            Value::Array(f.iter().map(|s| Value::String(s.clone())).collect()),
        );
    }
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// One `metadata.ownerReferences` entry: the owner's uid and whether it blocks deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// The owner's uid.
    pub uid: String,
    /// `blockOwnerDeletion`.
    pub block: bool,
}

/// `metadata.ownerReferences`.
pub fn owner_refs(obj: &Value) -> Vec<OwnerRef> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    Some(OwnerRef {
                        uid: r.get("uid")?.as_str()?.to_string(),
                        block: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the owner references whose uid `drop` returns true for.
pub fn retain_owner_refs(obj: &mut Value, drop: impl Fn(&str) -> bool) {
    let m = meta_mut(obj);
    if let Some(Value::Array(a)) = m.get_mut("ownerReferences") {
        a.retain(|r| !r.get("uid").and_then(Value::as_str).is_some_and(&drop));
        if a.is_empty() {
            m.remove("ownerReferences");
        }
    }
}

/// Whether `a` and `b` differ in what bumps `metadata.generation`: anything outside
/// `metadata`, and outside `status` too when the kind has a status subresource.
pub fn generation_changes(a: &Value, b: &Value, status_subresource: bool) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        let mut m = v.as_object().cloned().unwrap_or_default();
        m.remove("metadata");
        if status_subresource {
            m.remove("status");
        }
        m
    };
    strip(a) != strip(b)
}

/// 413 when `obj` serializes to more than [`MAX_OBJECT_BYTES`].
pub fn check_size(obj: &Value) -> Result<(), ApiError> {
    let n = serde_json::to_vec(obj).map_or(usize::MAX, |v| v.len());
    if n > MAX_OBJECT_BYTES {
        return Err(ApiError::TooLarge {
            limit: MAX_OBJECT_BYTES,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_dns_1123() {
        let cases: Vec<(&str, NameRule, Option<&str>)> = vec![
            ("a", NameRule::Subdomain, None),
            ("a.b-c.d0", NameRule::Subdomain, None),
            ("Foo", NameRule::Subdomain, Some(SUBDOMAIN_MSG)),
            ("a..b", NameRule::Subdomain, Some(SUBDOMAIN_MSG)),
            ("-a", NameRule::Subdomain, Some(SUBDOMAIN_MSG)),
            ("a_b", NameRule::Subdomain, Some(SUBDOMAIN_MSG)),
            ("a.b", NameRule::Label, Some(LABEL_MSG)),
            ("my-ns", NameRule::Label, None),
        ];
        for (name, rule, want) in cases {
            let errs = validate_name(name, rule);
            assert_eq!(errs.first().map(|e| e.detail.as_str()), want, "{name}");
        }
        let long = "a".repeat(254);
        assert_eq!(
            validate_name(&long, NameRule::Subdomain)[0].detail,
            "must be no more than 253 characters"
        );
        assert_eq!(
            validate_name(&"a".repeat(64), NameRule::Label)[0].detail,
            "must be no more than 63 characters"
        );
        assert_eq!(
            validate_name("Foo", NameRule::Subdomain)[0].to_string(),
            format!(r#"metadata.name: Invalid value: "Foo": {SUBDOMAIN_MSG}"#)
        );
    }

    #[test]
    fn generation_ignores_metadata_and_status() {
        let a = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}, "status": {"s": 1}});
        let relabel = json!({"metadata": {}, "spec": {"x": 1}, "status": {"s": 2}});
        let respec = json!({"metadata": {}, "spec": {"x": 2}, "status": {"s": 1}});
        assert!(!generation_changes(&a, &relabel, true));
        assert!(generation_changes(&a, &relabel, false));
        assert!(generation_changes(&a, &respec, true));
    }

    #[test]
    fn owner_refs_and_finalizers() {
        let mut o = json!({"metadata": {"finalizers": ["a", "b"], "ownerReferences": [
            {"uid": "u1", "blockOwnerDeletion": true}, {"uid": "u2"}]}});
        assert_eq!(finalizers(&o), ["a", "b"]);
        assert_eq!(
            owner_refs(&o),
            [
                OwnerRef {
                    uid: "u1".into(),
                    block: true
                },
                OwnerRef {
                    uid: "u2".into(),
                    block: false
                }
            ]
        );
        retain_owner_refs(&mut o, |u| u == "u1");
        assert_eq!(owner_refs(&o).len(), 1);
        retain_owner_refs(&mut o, |_| true);
        assert!(o.pointer("/metadata/ownerReferences").is_none());
        set_finalizers(&mut o, &[]);
        assert!(o.pointer("/metadata/finalizers").is_none());
    }

    #[test]
    fn size_limit() {
        assert!(check_size(&json!({"data": "x".repeat(1000)})).is_ok());
        let big = json!({"data": "x".repeat(MAX_OBJECT_BYTES)});
        assert_eq!(
            check_size(&big).unwrap_err().to_status()["code"],
            json!(413)
        );
    }
}
