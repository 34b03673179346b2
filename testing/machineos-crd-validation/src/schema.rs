//! A CRD version's structural `openAPIV3Schema`, parsed once with its patterns and CEL
//! rules compiled.
//!
//! [`Schema::parse`] reads the JSON form of a `JSONSchemaProps` (as in a CRD's
//! `spec.versions[].schema.openAPIV3Schema`) into a tree of [`Schema`] nodes keeping the
//! properties in document order (the order errors are reported in). It fails with a
//! [`SchemaError`] naming the JSON path of a `pattern` or CEL `rule` it cannot compile.
//! `description`, `example` and `externalDocs` are ignored. `x-kubernetes-int-or-string`
//! is treated as the apiserver treats it: type `integer,string`.

use crate::error::SchemaError;
use kube_cel::cel;
use serde_json::{Map, Value};

/// A compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub struct Rule {
    /// The rule text as written in the CRD.
    pub rule: String,
    /// `message`, when set.
    pub message: Option<String>,
    /// `messageExpression`, compiled, when set.
    pub message_expression: Option<cel::IdedExpr>,
    /// `reason` (`FieldValueInvalid` when unset).
    pub reason: Option<String>,
    /// `fieldPath`, a JSON path relative to the node (`.spec.x`), when set.
    pub field_path: Option<String>,
    /// `optionalOldSelf`.
    pub optional_old_self: bool,
    /// Whether the rule references `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// The compiled rule (rewritten for `optionalOldSelf`, see `cel_eval`).
    pub expr: cel::IdedExpr,
}

/// One schema node.
#[derive(Debug, Default)]
pub struct Schema {
    /// `type`, or `None` (int-or-string, preserve-unknown-fields without type).
    pub ty: Option<String>,
    /// `format`.
    pub format: Option<String>,
    /// `nullable`.
    pub nullable: bool,
    /// `default`.
    pub default: Option<Value>,
    /// `enum`.
    pub enum_values: Option<Vec<Value>>,
    /// `required`.
    pub required: Vec<String>,
    /// `properties`, in document order.
    pub properties: Vec<(String, Schema)>,
    /// `additionalProperties` as a schema (`true` is kept as an empty schema).
    pub additional: Option<Box<Schema>>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength`.
    pub min_length: Option<i64>,
    /// `maxLength`.
    pub max_length: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `pattern`, as written and compiled.
    pub pattern: Option<(String, regex::Regex)>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-validations`.
    pub rules: Vec<Rule>,
    /// `allOf` (value validations only, as in a structural schema).
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
}

fn err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: if path.is_empty() {
            ".".into()
        } else {
            path.into()
        },
        message: message.into(),
    }
}

fn int(m: &Map<String, Value>, k: &str) -> Option<i64> {
    m.get(k).and_then(Value::as_i64)
}

fn flag(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool).unwrap_or(false)
}

impl Schema {
    /// Parses a `JSONSchemaProps` JSON value.
    pub fn parse(v: &Value) -> Result<Schema, SchemaError> {
        Self::parse_at(v, "")
    }

    fn parse_at(v: &Value, path: &str) -> Result<Schema, SchemaError> {
        let Some(m) = v.as_object() else {
            return Err(err(path, "a schema must be an object"));
        };
        let mut s = Schema {
            ty: m.get("type").and_then(Value::as_str).map(str::to_string),
            format: m.get("format").and_then(Value::as_str).map(str::to_string),
            nullable: flag(m, "nullable"),
            default: m.get("default").cloned(),
            enum_values: m.get("enum").and_then(Value::as_array).cloned(),
            required: m
                .get("required")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            preserve_unknown: flag(m, "x-kubernetes-preserve-unknown-fields"),
            int_or_string: flag(m, "x-kubernetes-int-or-string"),
            embedded: flag(m, "x-kubernetes-embedded-resource"),
            minimum: m.get("minimum").and_then(Value::as_f64),
            exclusive_minimum: flag(m, "exclusiveMinimum"),
            maximum: m.get("maximum").and_then(Value::as_f64),
            exclusive_maximum: flag(m, "exclusiveMaximum"),
            multiple_of: m.get("multipleOf").and_then(Value::as_f64),
            min_length: int(m, "minLength"),
            max_length: int(m, "maxLength"),
            min_items: int(m, "minItems"),
            max_items: int(m, "maxItems"),
            min_properties: int(m, "minProperties"),
            max_properties: int(m, "maxProperties"),
            unique_items: flag(m, "uniqueItems"),
            list_type: m
                .get("x-kubernetes-list-type")
                .and_then(Value::as_str)
                .map(str::to_string),
            list_map_keys: m
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            ..Schema::default()
        };
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            let re = crate::re2::compile(p)
                .map_err(|e| err(&format!("{path}.pattern"), format!("pattern {p:?}: {e}")))?;
            s.pattern = Some((p.to_string(), re));
        }
        if let Some(props) = m.get("properties").and_then(Value::as_object) {
            for (k, pv) in props {
                let child = Self::parse_at(pv, &format!("{path}.properties.{k}"))?;
                s.properties.push((k.clone(), child));
            }
        }
        match m.get("additionalProperties") {
            Some(Value::Bool(true)) => s.additional = Some(Box::default()),
            Some(a @ Value::Object(_)) => {
                s.additional = Some(Box::new(Self::parse_at(
                    a,
                    &format!("{path}.additionalProperties"),
                )?))
            }
            _ => {}
        }
        if let Some(items) = m.get("items") {
            s.items = Some(Box::new(Self::parse_at(items, &format!("{path}.items"))?));
        }
        for (key, dst) in [
            ("allOf", &mut s.all_of),
            ("anyOf", &mut s.any_of),
            ("oneOf", &mut s.one_of),
        ] {
            if let Some(list) = m.get(key).and_then(Value::as_array) {
                for (i, sub) in list.iter().enumerate() {
                    dst.push(Self::parse_at(sub, &format!("{path}.{key}[{i}]"))?);
                }
            }
        }
        if let Some(n) = m.get("not") {
            s.not = Some(Box::new(Self::parse_at(n, &format!("{path}.not"))?));
        }
        if let Some(rules) = m.get("x-kubernetes-validations").and_then(Value::as_array) {
            for (i, r) in rules.iter().enumerate() {
                let at = format!("{path}.x-kubernetes-validations[{i}]");
                s.rules.push(parse_rule(r, &at)?);
            }
        }
        Ok(s)
    }

    /// The property schema `name`.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| s)
    }

    /// The type name CEL errors show for this node (`"object"`, `"string"`, … or `""`).
    pub fn type_name(&self) -> &str {
        self.ty.as_deref().unwrap_or("")
    }
}

fn parse_rule(r: &Value, at: &str) -> Result<Rule, SchemaError> {
    let Some(m) = r.as_object() else {
        return Err(err(at, "a validation rule must be an object"));
    };
    let Some(text) = m.get("rule").and_then(Value::as_str) else {
        return Err(err(at, "a validation rule needs `rule`"));
    };
    let optional_old_self = flag(m, "optionalOldSelf");
    let expr = crate::cel_compile::compile(text, optional_old_self)
        .map_err(|e| err(&format!("{at}.rule"), format!("{text:?}: {e}")))?;
    let uses_old_self = expr.references().has_variable("oldSelf");
    let message_expression = match m.get("messageExpression").and_then(Value::as_str) {
        Some(me) => Some(
            crate::cel_compile::compile(me, optional_old_self)
                .map_err(|e| err(&format!("{at}.messageExpression"), format!("{me:?}: {e}")))?,
        ),
        None => None,
    };
    Ok(Rule {
        rule: text.to_string(),
        message: m.get("message").and_then(Value::as_str).map(str::to_string),
        message_expression,
        reason: m.get("reason").and_then(Value::as_str).map(str::to_string),
        field_path: m
            .get("fieldPath")
            .and_then(Value::as_str)
            .map(str::to_string),
        optional_old_self,
        uses_old_self,
        expr,
    })
}
