//! kube-apiserver's `field.ErrorList`, rendered as its Go code renders it.
//!
//! A [`FieldError`] is one `k8s.io/apimachinery/pkg/util/validation/field.Error`: a type
//! (`Required value`, `Invalid value`, …), a field path (`spec.pool`, `<nil>` for the
//! object itself), the offending value as Go prints it (`"string"`, `5`,
//! `map[string]interface {}{"name":"a"}`) and a detail. [`Errors`] is the list; its
//! `Display` is the aggregate text kube-apiserver puts after `… is invalid: ` (one error
//! alone, several as `[e1, e2]`, duplicates dropped), so a client's substring checks see
//! the same text as against a real server. [`Errors::status_message`] gives the whole
//! `Status.message`, [`FieldError::cause_reason`] each `details.causes[].reason`.
//!
//! [`SchemaError`] is the other failure: a CRD schema this crate cannot use (a pattern or
//! CEL rule that does not compile).

use machineos_diagnostics::{Classify, Retry};
use serde_json::Value;
use std::fmt;

/// The `field.ErrorType` of a [`FieldError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// `Required value`: a required field is missing.
    Required,
    /// `Invalid value`: a value does not satisfy a constraint (bounds, pattern, CEL rule).
    Invalid,
    /// `Invalid value` from a type or format mismatch (`field.TypeInvalid`); blocks CEL.
    TypeInvalid,
    /// `Unsupported value`: not one of an enum's values.
    NotSupported,
    /// `Duplicate value`: a repeated key of a `map` list or item of a `set` list.
    Duplicate,
    /// `Too long`: a string over `maxLength`.
    TooLong,
    /// `Too many`: a list over `maxItems` or an object over `maxProperties`.
    TooMany,
    /// `Forbidden`: a CEL rule with `reason: FieldValueForbidden`.
    Forbidden,
    /// `Internal error`: a CEL rule that could not be evaluated at all.
    Internal,
}

impl ErrorType {
    /// The text Go's `ErrorType.String()` gives.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::Internal => "Internal error",
        }
    }

    /// The `metav1.CauseType` of a `Status` cause of this type.
    pub fn cause_reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::Internal => "InternalError",
        }
    }

    /// Whether kube-apiserver skips the CEL rules when the list holds an error of this type
    /// (`hasBlockingErr` in apiextensions-apiserver's `strategy.go`).
    pub fn is_blocking(self) -> bool {
        matches!(
            self,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    }
}

/// The offending value of a [`FieldError`], as Go's `ErrorBody` prints it.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// Not printed (`Required`, `Too long`, …).
    Omit,
    /// A string, printed quoted (`%q`).
    Str(String),
    /// Any other value, already rendered as Go prints it (`5`, `true`, `map[…]{…}`).
    Go(String),
}

impl BadValue {
    /// A JSON value as Go prints the equivalent unstructured value: strings quoted,
    /// numbers and booleans plain, `null` as `"null"`, objects and lists with `%#v`.
    pub fn of_json(v: &Value) -> BadValue {
        match v {
            Value::Null => BadValue::Str("null".into()),
            Value::String(s) => BadValue::Str(s.clone()),
            Value::Bool(b) => BadValue::Go(b.to_string()),
            Value::Number(n) => BadValue::Go(go_number(n)),
            Value::Array(_) | Value::Object(_) => BadValue::Go(go_sharp_v(v)),
        }
    }
}

/// One `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The error type.
    pub kind: ErrorType,
    /// The field path (`spec.pool`, `status.items[1].name`); `None` prints as `<nil>`.
    pub field: Option<String>,
    /// The offending value.
    pub value: BadValue,
    /// The detail after the value (may be empty).
    pub detail: String,
}

impl FieldError {
    /// A new error.
    pub fn new(kind: ErrorType, field: Option<String>, value: BadValue, detail: String) -> Self {
        FieldError {
            kind,
            field,
            value,
            detail,
        }
    }

    /// The text after `<field>: ` (Go's `ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = match (&self.kind, &self.value) {
            (
                ErrorType::Required
                | ErrorType::Forbidden
                | ErrorType::TooLong
                | ErrorType::Internal,
                _,
            )
            | (_, BadValue::Omit) => self.kind.as_str().to_string(),
            (_, BadValue::Str(v)) => format!("{}: {}", self.kind.as_str(), go_quote(v)),
            (_, BadValue::Go(v)) => format!("{}: {v}", self.kind.as_str()),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The field path as printed (`<nil>` for none).
    pub fn field_text(&self) -> &str {
        self.field.as_deref().unwrap_or("<nil>")
    }

    /// The `Status` cause reason of this error.
    pub fn cause_reason(&self) -> &'static str {
        self.kind.cause_reason()
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field_text(), self.body())
    }
}

/// An object rejected by validation: kube-apiserver's `field.ErrorList`, never empty.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Errors(pub Vec<FieldError>);

impl Errors {
    /// The `Status.message` a real server sends for this list on the object `name` of the
    /// group-kind `group_kind` (`MachineConfigNode.machineconfiguration.openshift.io`).
    pub fn status_message(&self, group_kind: &str, name: &str) -> String {
        format!("{group_kind} {} is invalid: {self}", go_quote(name))
    }

    /// Whether any error is of `kind`.
    pub fn has(&self, kind: ErrorType) -> bool {
        self.0.iter().any(|e| e.kind == kind)
    }
}

impl fmt::Display for Errors {
    /// `errs.ToAggregate().Error()`: duplicates dropped, one error alone, several in
    /// `[…]` joined by `, `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut seen: Vec<String> = Vec::new();
        for e in &self.0 {
            let s = e.to_string();
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
        if seen.len() == 1 {
            f.write_str(&seen[0])
        } else {
            write!(f, "[{}]", seen.join(", "))
        }
    }
}

impl Classify for Errors {
    fn reason(&self) -> &'static str {
        "Invalid"
    }
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// A CRD schema this crate cannot validate with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unusable CRD schema at {path}: {message}")]
pub struct SchemaError {
    /// Where in the `openAPIV3Schema` (`.properties.spec.x-kubernetes-validations[0]`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl Classify for SchemaError {
    fn reason(&self) -> &'static str {
        "InvalidSchema"
    }
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// Go's `strconv.Quote`, shared with the other crates that word messages as Go does.
pub use machineos_diagnostics::go_quote;

/// A JSON number as Go's `%v` prints the unstructured value (`int64` plain, `float64` in
/// the shortest `%g` form, e.g. `1e+06`).
pub fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A `float64` as Go's `%v` prints it: the shortest representation, in exponent form
/// (`1e+06`, `2.5e-05`) when the decimal exponent is below -4 or at least 6
/// (`strconv.FormatFloat(f, 'g', -1, 64)`).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` is the shortest round-tripping form: `d.ddde±x`.
    let e = format!("{f:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((e.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        // Plain decimal form, shortest digits.
        format!("{f}")
    }
}

/// Go's `%#v` of an unstructured JSON value (`map[string]interface {}{"a":"b"}`, keys
/// sorted; `[]interface {}{…}`; strings quoted; `interface {}(nil)` for null).
pub fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&map[k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_renderings() {
        assert_eq!(go_quote("a\"b\n"), r#""a\"b\n""#);
        assert_eq!(
            go_sharp_v(&json!({"fieldPath": "spec.x", "a": 1})),
            r#"map[string]interface {}{"a":1, "fieldPath":"spec.x"}"#
        );
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(100000.0), "100000");
    }

    #[test]
    fn error_bodies_and_aggregate() {
        let req = FieldError::new(
            ErrorType::Required,
            Some("spec.pool".into()),
            BadValue::Omit,
            String::new(),
        );
        let sentinel = FieldError::new(
            ErrorType::Invalid,
            None,
            BadValue::Str("null".into()),
            "x".into(),
        );
        let errs = Errors(vec![req.clone(), sentinel, req.clone()]);
        assert_eq!(
            errs.to_string(),
            r#"[spec.pool: Required value, <nil>: Invalid value: "null": x]"#
        );
        assert_eq!(Errors(vec![req]).to_string(), "spec.pool: Required value");
        let long = FieldError::new(
            ErrorType::TooLong,
            Some("spec.n".into()),
            BadValue::Str("aaa".into()),
            "may not be more than 2 bytes".into(),
        );
        assert_eq!(
            long.to_string(),
            "spec.n: Too long: may not be more than 2 bytes"
        );
        machineos_diagnostics::check_classified(
            &Errors(vec![long]),
            "Invalid",
            machineos_diagnostics::Retry::Permanent,
        )
        .unwrap();
    }
}
