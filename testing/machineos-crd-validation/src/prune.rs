//! What kube-apiserver does to a custom resource before validating it: defaulting,
//! pruning of unknown fields, and removal of `null`s the schema does not allow.
//!
//! The order is the apiserver's decoder's: [`default`] (`structuraldefaulting.Default`:
//! a missing field, or a `null` in a non-nullable one, gets the schema's `default`,
//! recursively, also inside defaulted values), then [`prune`]
//! (`structuralpruning.Prune`: fields the schema does not declare are dropped unless
//! `x-kubernetes-preserve-unknown-fields` or `additionalProperties` allows them; at the
//! resource root and in embedded resources `apiVersion`, `kind` and `metadata` are kept),
//! then [`drop_nulls`] (`PruneNonNullableNullsWithoutDefaults`: a `null` property of a
//! non-nullable schema without a default is removed, as if it had not been sent).
//! `metadata` itself is left alone: coercing it to `ObjectMeta` is the server's job.

use crate::schema::Schema;
use serde_json::Value;

fn is_non_nullable_null(v: &Value, s: &Schema) -> bool {
    v.is_null() && !s.nullable
}

/// Applies `default`s, as `structuraldefaulting.Default`.
pub fn default(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                match map.get(k) {
                    None => {
                        map.insert(k.clone(), d.clone());
                    }
                    Some(v) if is_non_nullable_null(v, prop) => {
                        map.insert(k.clone(), d.clone());
                    }
                    Some(_) => {}
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.property(k) {
                    default(v, prop);
                } else if let Some(ap) = &s.additional {
                    if is_non_nullable_null(v, ap)
                        && let Some(d) = &ap.default
                    {
                        *v = d.clone();
                    }
                    default(v, ap);
                }
            }
        }
        Value::Array(items) => {
            let Some(is) = &s.items else { return };
            for v in items.iter_mut() {
                if is_non_nullable_null(v, is)
                    && let Some(d) = &is.default
                {
                    *v = d.clone();
                }
                default(v, is);
            }
        }
        _ => {}
    }
}

/// Drops unknown fields, as `structuralpruning.Prune` with `isResourceRoot` at the top.
pub fn prune(x: &mut Value, s: &Schema, is_resource_root: bool) {
    prune_node(x, Some(s), is_resource_root || s.embedded)
}

fn prune_node(x: &mut Value, s: Option<&Schema>, embedded: bool) {
    if let Some(s) = s
        && s.preserve_unknown
    {
        skip_prune(x, s);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                map.clear();
                return;
            };
            map.retain(|k, v| {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    return true;
                }
                if let Some(prop) = s.property(k) {
                    prune_node(v, Some(prop), prop.embedded);
                    true
                } else if let Some(ap) = &s.additional {
                    prune_node(v, Some(ap), ap.embedded);
                    true
                } else {
                    false
                }
            });
        }
        Value::Array(items) => {
            let is = s.and_then(|s| s.items.as_deref());
            for v in items {
                prune_node(v, is, is.is_some_and(|i| i.embedded));
            }
        }
        _ => {}
    }
}

fn skip_prune(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if s.embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(prop) = s.property(k) {
                    prune_node(v, Some(prop), prop.embedded);
                } else if let Some(ap) = &s.additional {
                    prune_node(v, Some(ap), ap.embedded);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = &s.items {
                for v in items {
                    skip_prune(v, is);
                }
            }
        }
        _ => {}
    }
}

/// Removes `null` properties whose schema is neither nullable nor defaulted, as
/// `structuraldefaulting.PruneNonNullableNullsWithoutDefaults`.
pub fn drop_nulls(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(map) => {
            map.retain(|k, v| {
                let prop = s.property(k).or(s.additional.as_deref());
                match prop {
                    Some(p) if v.is_null() && !p.nullable && p.default.is_none() => false,
                    Some(p) => {
                        drop_nulls(v, p);
                        true
                    }
                    None => true,
                }
            });
        }
        Value::Array(items) => {
            if let Some(is) = &s.items {
                for v in items {
                    drop_nulls(v, is);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::parse(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "a": {"type": "string", "default": "x"},
                    "n": {"type": "integer", "nullable": true},
                    "m": {"type": "integer"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"known": {"type": "object", "properties": {}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "list": {"type": "array", "items": {"type": "object",
                             "properties": {"k": {"type": "string", "default": "d"}}}},
                }},
            }
        }))
        .unwrap()
    }

    #[test]
    fn prune_default_and_nulls() {
        let s = schema();
        let mut obj = json!({
            "apiVersion": "v", "kind": "K", "metadata": {"name": "x", "whatever": 1},
            "extra": 1,
            "spec": {
                "a": null, "n": null, "m": null, "unknown": true,
                "free": {"anything": {"deep": 1}, "known": {"dropped": 1}},
                "labels": {"x": "y"},
                "list": [{"other": 1}, {"k": "set"}],
            }
        });
        default(&mut obj, &s);
        prune(&mut obj, &s, true);
        drop_nulls(&mut obj, &s);
        assert_eq!(
            obj,
            json!({
                "apiVersion": "v", "kind": "K", "metadata": {"name": "x", "whatever": 1},
                "spec": {
                    "a": "x", "n": null,
                    "free": {"anything": {"deep": 1}, "known": {}},
                    "labels": {"x": "y"},
                    "list": [{"k": "d"}, {"k": "set"}],
                }
            })
        );
    }
}
