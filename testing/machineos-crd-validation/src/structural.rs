//! OpenAPI schema validation of a pruned, defaulted object, with kube-openapi's checks,
//! order and messages as apiextensions-apiserver turns them into `field.Error`s.
//!
//! Per node, in kube-openapi's validator order: type (`TypeInvalid`, `must be of type`),
//! `allOf`/`anyOf`/`oneOf`/`not`, string (`maxLength` → `Too long`, `minLength`,
//! `pattern`; first failure only), `format` (`date-time`, `date`, `byte`, `uuid*`, `ipv4`,
//! `ipv6`, `cidr`, `mac`; a mismatch is `TypeInvalid`), number (`multipleOf`, `minimum`,
//! `maximum`), array (items first, then `minItems`, `maxItems` → `Too many`,
//! `uniqueItems`), `enum` (`Unsupported value`), object (`minProperties`,
//! `maxProperties`, properties in schema order, then `required` → `Required value`).
//! Messages are kube-openapi's (`<name> in body should be at least 1 chars long`) with
//! `<name>` relative to the validated subtree, and the field path is the subtree's prefix
//! joined with it (`status` + `osImageStream.name`).
//!
//! **Ratcheting** (`CRDValidationRatcheting`, on by default since Kubernetes 1.30): on an
//! update, a node's own errors are dropped when the node has a correlated old value equal
//! to the new one. Correlation: object properties by name, map values by key, items of
//! `x-kubernetes-list-type: map` lists by their keys and of `set` lists by value; items
//! of atomic lists have no old value.
//!
//! [`list_sets_and_maps`] is the separate `x-kubernetes-list-type` uniqueness pass
//! (`structurallisttype.ValidateListSetsAndMaps`): `Duplicate value` with the key map of
//! a repeated `map`-list item, or the repeated `set` item; not ratcheted.

use crate::error::{BadValue, ErrorType, FieldError, go_quote};
use crate::schema::Schema;
use serde_json::Value;

/// Where a validation runs: the field-path prefix of the subtree (`None` at the object
/// root, `Some("status")` for a status update), and whether ratcheting applies.
pub struct Scope<'a> {
    /// The field path of the validated value.
    pub prefix: Option<&'a str>,
    /// Drop errors of unchanged, correlated nodes.
    pub ratchet: bool,
}

fn field_of(prefix: Option<&str>, name: &str) -> Option<String> {
    match (prefix, name.trim_start_matches('.')) {
        (p, "") => p.map(str::to_string),
        (Some(p), n) => Some(if n.starts_with('[') {
            format!("{p}{n}")
        } else {
            format!("{p}.{n}")
        }),
        (None, n) => Some(n.to_string()),
    }
}

/// The JSON type name kube-openapi infers for a value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON equality with numbers compared by value (Go's `DeepEqual` after conversion).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// The key values of a `map`-list item, in key order (`None` for a missing key).
pub fn list_map_key<'v>(s: &Schema, item: &'v Value) -> Vec<Option<&'v Value>> {
    s.list_map_keys.iter().map(|k| item.get(k)).collect()
}

/// The old item correlated with `item` of a list with schema `s`, if any.
pub fn correlate_item<'o>(s: &Schema, item: &Value, old: Option<&'o Value>) -> Option<&'o Value> {
    let old_items = old?.as_array()?;
    match s.list_type.as_deref() {
        Some("map") if !s.list_map_keys.is_empty() => {
            let key = list_map_key(s, item);
            old_items.iter().find(|o| {
                list_map_key(s, o)
                    .iter()
                    .zip(&key)
                    .all(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => json_eq(a, b),
                        (None, None) => true,
                        _ => false,
                    })
            })
        }
        Some("set") => old_items.iter().find(|o| json_eq(o, item)),
        _ => None,
    }
}

/// Validates `v` (named `name` in kube-openapi's terms, `""` at the validated root)
/// against `s`, appending to `errs`.
pub fn validate(
    scope: &Scope<'_>,
    s: &Schema,
    v: &Value,
    old: Option<&Value>,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let mut own = Vec::new();
    node(scope, s, v, name, &mut own);
    let unchanged = scope.ratchet && old.is_some_and(|o| json_eq(o, v));
    if !unchanged {
        errs.extend(
            own.iter()
                .filter(|e| e.0 == Order::Before)
                .map(|e| e.1.clone()),
        );
    }
    // Children.
    match v {
        Value::Array(items) => {
            if let Some(is) = &s.items {
                for (i, item) in items.iter().enumerate() {
                    let old_item = correlate_item(s, item, old);
                    validate(scope, is, item, old_item, &format!("{name}[{i}]"), errs);
                }
            }
        }
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                if let Some(pv) = map.get(k) {
                    let old_v = old.and_then(|o| o.get(k));
                    validate(scope, prop, pv, old_v, &join(name, k), errs);
                }
            }
            if let Some(ap) = &s.additional {
                for (k, pv) in map {
                    if s.property(k).is_none() {
                        let old_v = old.and_then(|o| o.get(k));
                        validate(scope, ap, pv, old_v, &join(name, k), errs);
                    }
                }
            }
        }
        _ => {}
    }
    if !unchanged {
        errs.extend(own.into_iter().filter(|e| e.0 == Order::After).map(|e| e.1));
    }
}

fn join(name: &str, k: &str) -> String {
    if name.is_empty() {
        k.to_string()
    } else {
        format!("{name}.{k}")
    }
}

/// Whether a node's own error is reported before or after its children's (kube-openapi
/// validates array items before `minItems`, and object `required` after properties).
#[derive(PartialEq, Clone, Copy)]
enum Order {
    Before,
    After,
}

fn body_name(name: &str) -> String {
    name.to_string()
}

fn msg(name: &str, rest: &str) -> String {
    format!("{} in body {rest}", body_name(name))
}

fn push(
    out: &mut Vec<(Order, FieldError)>,
    order: Order,
    scope: &Scope<'_>,
    name: &str,
    kind: ErrorType,
    value: BadValue,
    detail: String,
) {
    out.push((
        order,
        FieldError::new(kind, field_of(scope.prefix, name), value, detail),
    ));
}

/// A node's own checks (not its children's).
fn node(scope: &Scope<'_>, s: &Schema, v: &Value, name: &str, out: &mut Vec<(Order, FieldError)>) {
    use ErrorType as T;
    use Order::{After, Before};
    let types: Vec<&str> = if s.int_or_string {
        vec!["integer", "string"]
    } else {
        s.ty.as_deref().into_iter().collect()
    };
    if v.is_null() {
        if !types.is_empty() && !s.nullable {
            let t = types.join(",");
            push(
                out,
                Before,
                scope,
                name,
                T::TypeInvalid,
                BadValue::Str("null".into()),
                msg(name, &format!("must be of type {t}: \"null\"")),
            );
        }
        if let Some(en) = &s.enum_values
            && !en.iter().any(Value::is_null)
        {
            push(
                out,
                Before,
                scope,
                name,
                T::NotSupported,
                BadValue::Str("null".into()),
                supported(en),
            );
        }
        return;
    }
    // Type.
    let jt = json_type(v);
    if !types.is_empty() {
        let is_float_int = jt == "number"
            && v.as_f64().is_some_and(|f| f.fract() == 0.0)
            && types.contains(&"integer");
        let is_int_float = jt == "integer" && types.contains(&"number");
        let format_exempt = s.format.is_some()
            && !types.contains(&"number")
            && !types.contains(&"integer")
            && matches!(jt, "string" | "array");
        if !(format_exempt || types.contains(&jt) || is_float_int || is_int_float) {
            let t = types.join(",");
            push(
                out,
                Before,
                scope,
                name,
                T::TypeInvalid,
                BadValue::Str(jt.into()),
                msg(name, &format!("must be of type {t}: {}", go_quote(jt))),
            );
            // kube-openapi runs the other validators by the value's kind; the enum check
            // still applies, the rest would only repeat the type mismatch.
            if let Some(en) = &s.enum_values
                && !en.iter().any(|e| json_eq(e, v))
            {
                push(
                    out,
                    Before,
                    scope,
                    name,
                    T::NotSupported,
                    BadValue::of_json(v),
                    supported(en),
                );
            }
            return;
        }
    }
    composition(scope, s, v, name, out);
    match v {
        Value::String(st) => {
            let chars = st.chars().count() as i64;
            let value = BadValue::Str(st.clone());
            if let Some(max) = s.max_length
                && chars > max
            {
                push(
                    out,
                    Before,
                    scope,
                    name,
                    T::TooLong,
                    value.clone(),
                    format!("may not be more than {max} bytes"),
                );
            } else if let Some(min) = s.min_length
                && chars < min
            {
                push(
                    out,
                    Before,
                    scope,
                    name,
                    T::Invalid,
                    value.clone(),
                    msg(name, &format!("should be at least {min} chars long")),
                );
            } else if let Some((p, re)) = &s.pattern
                && !re.is_match(st)
            {
                push(
                    out,
                    Before,
                    scope,
                    name,
                    T::Invalid,
                    value.clone(),
                    msg(name, &format!("should match '{p}'")),
                );
            }
            if let Some(f) = &s.format
                && !crate::formats::valid(f, st)
            {
                push(
                    out,
                    Before,
                    scope,
                    name,
                    T::TypeInvalid,
                    value,
                    msg(name, &format!("must be of type {f}: {}", go_quote(st))),
                );
            }
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            let value = BadValue::Go(crate::error::go_number(n));
            if let Some(m) = s.multiple_of
                && m > 0.0
                && !is_json_integer(if m < 1.0 { 1.0 / m * f } else { f / m })
            {
                push(
                    out,
                    Before,
                    scope,
                    name,
                    T::Invalid,
                    value.clone(),
                    msg(name, &format!("should be a multiple of {}", bound(m))),
                );
            }
            if let Some(min) = s.minimum {
                let bad = if s.exclusive_minimum {
                    f <= min
                } else {
                    f < min
                };
                if bad {
                    let op = if s.exclusive_minimum {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    push(
                        out,
                        Before,
                        scope,
                        name,
                        T::Invalid,
                        value.clone(),
                        msg(name, &format!("should be {op} {}", bound(min))),
                    );
                }
            }
            if let Some(max) = s.maximum {
                let bad = if s.exclusive_maximum {
                    f >= max
                } else {
                    f > max
                };
                if bad {
                    let op = if s.exclusive_maximum {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    push(
                        out,
                        Before,
                        scope,
                        name,
                        T::Invalid,
                        value,
                        msg(name, &format!("should be {op} {}", bound(max))),
                    );
                }
            }
        }
        Value::Array(items) => {
            let n = items.len() as i64;
            if let Some(min) = s.min_items
                && n < min
            {
                push(
                    out,
                    After,
                    scope,
                    name,
                    T::Invalid,
                    BadValue::Go(n.to_string()),
                    msg(name, &format!("should have at least {min} items")),
                );
            }
            if let Some(max) = s.max_items
                && n > max
            {
                let unit = if max == 1 { "item" } else { "items" };
                push(
                    out,
                    After,
                    scope,
                    name,
                    T::TooMany,
                    BadValue::Go(n.to_string()),
                    format!("must have at most {max} {unit}"),
                );
            }
            if s.unique_items
                && items
                    .iter()
                    .enumerate()
                    .any(|(i, a)| items[..i].iter().any(|b| json_eq(a, b)))
            {
                push(
                    out,
                    After,
                    scope,
                    name,
                    T::Invalid,
                    BadValue::of_json(v),
                    msg(name, "shouldn't contain duplicates"),
                );
            }
        }
        _ => {}
    }
    if let Some(en) = &s.enum_values
        && !en.iter().any(|e| json_eq(e, v))
    {
        let order = if v.is_array() { After } else { Before };
        push(
            out,
            order,
            scope,
            name,
            T::NotSupported,
            BadValue::of_json(v),
            supported(en),
        );
    }
    if let Value::Object(map) = v {
        let n = map.len() as i64;
        if let Some(min) = s.min_properties
            && n < min
        {
            push(
                out,
                Before,
                scope,
                name,
                T::Invalid,
                BadValue::Go(n.to_string()),
                msg(name, &format!("should have at least {min} properties")),
            );
        }
        if let Some(max) = s.max_properties
            && n > max
        {
            let unit = if max == 1 { "item" } else { "items" };
            push(
                out,
                Before,
                scope,
                name,
                T::TooMany,
                BadValue::Go(n.to_string()),
                format!("must have at most {max} {unit}"),
            );
        }
        for k in &s.required {
            if !map.contains_key(k) {
                push(
                    out,
                    After,
                    scope,
                    &join(name, k),
                    T::Required,
                    BadValue::Omit,
                    String::new(),
                );
            }
        }
    }
}

/// A `minimum`/`maximum`/`multipleOf` bound as kube-openapi prints it (`%v` of the
/// native value: integral bounds as integers).
fn bound(b: f64) -> String {
    if b.fract() == 0.0 && b.abs() < 9.0e15 {
        format!("{}", b as i64)
    } else {
        crate::error::go_float(b)
    }
}

/// `supported values: "a", "b"` (non-string values as JSON, then quoted).
fn supported(en: &[Value]) -> String {
    let vals: Vec<String> = en
        .iter()
        .map(|e| match e {
            Value::String(s) => go_quote(s),
            other => go_quote(&other.to_string()),
        })
        .collect();
    if vals.is_empty() {
        String::new()
    } else {
        format!("supported values: {}", vals.join(", "))
    }
}

/// `allOf`/`anyOf`/`oneOf`/`not`, which a structural schema may carry with value
/// validations only. Sub-schema errors are reported like kube-openapi's (not
/// `*Validation` errors for the composite ones: `Invalid value: ""` at the prefix).
fn composition(
    scope: &Scope<'_>,
    s: &Schema,
    v: &Value,
    name: &str,
    out: &mut Vec<(Order, FieldError)>,
) {
    let check = |sub: &Schema| {
        let mut e = Vec::new();
        validate(
            &Scope {
                prefix: scope.prefix,
                ratchet: false,
            },
            sub,
            v,
            None,
            name,
            &mut e,
        );
        e
    };
    let composite = |out: &mut Vec<(Order, FieldError)>, text: String| {
        out.push((
            Order::Before,
            FieldError::new(
                ErrorType::Invalid,
                scope.prefix.map(str::to_string),
                BadValue::Str(String::new()),
                text,
            ),
        ))
    };
    for sub in &s.all_of {
        out.extend(check(sub).into_iter().map(|e| (Order::Before, e)));
    }
    if !s.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = s.any_of.iter().map(check).collect();
        if !results.iter().any(Vec::is_empty) {
            composite(
                out,
                format!(
                    "{} must validate at least one schema (anyOf)",
                    body_name(name)
                ),
            );
            if let Some(first) = results.into_iter().next() {
                out.extend(first.into_iter().map(|e| (Order::Before, e)));
            }
        }
    }
    if !s.one_of.is_empty() {
        let ok = s.one_of.iter().filter(|sub| check(sub).is_empty()).count();
        if ok != 1 {
            composite(
                out,
                format!(
                    "{} must validate one and only one schema (oneOf)",
                    body_name(name)
                ),
            );
        }
    }
    if let Some(not) = &s.not
        && check(not).is_empty()
    {
        composite(
            out,
            format!("{} must not validate the schema (not)", body_name(name)),
        );
    }
}

/// go-openapi's `swag.IsFloat64AJSONInteger`, as kube-openapi's `MultipleOf` tests the
/// quotient (`1/factor*value` for factors below 1): an integer within a relative error of
/// 1e-9, so `0.3` is a multiple of `0.1`.
fn is_json_integer(f: f64) -> bool {
    const EPSILON: f64 = 1e-9;
    const MAX_JSON: f64 = 9_007_199_254_740_992.0; // 2^53
    if !f.is_finite() || !(-MAX_JSON..=MAX_JSON).contains(&f) {
        return false;
    }
    let g = f.trunc();
    let diff = (f - g).abs();
    if f == g {
        return true;
    }
    if f == 0.0 || g == 0.0 || diff < f64::MIN_POSITIVE {
        return diff < EPSILON * f64::MIN_POSITIVE;
    }
    diff / (f.abs() + g.abs()).min(f64::MAX) < EPSILON
}

/// A value as a string equal for values Go's `reflect.DeepEqual` of decoded JSON finds
/// equal: object keys sorted, numbers as written.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The `x-kubernetes-list-type` uniqueness pass over the whole object (`path` is the
/// field path of `v`, `None` at the root).
pub fn list_sets_and_maps(path: Option<&str>, s: &Schema, v: &Value, errs: &mut Vec<FieldError>) {
    let child = |k: &str| match path {
        Some(p) => format!("{p}.{k}"),
        None => k.to_string(),
    };
    match v {
        Value::Array(items) => {
            let base = path.unwrap_or("");
            match s.list_type.as_deref() {
                Some("set") => {
                    // listtype's validateSet: a value is reported once, at its second
                    // occurrence; values are compared as Go compares them (by canonical
                    // JSON, so 1 and 1.0 differ), with one hash pass.
                    let mut seen: std::collections::HashMap<String, u32> =
                        std::collections::HashMap::new();
                    for (i, item) in items.iter().enumerate() {
                        let times = seen.entry(canonical(item)).or_insert(0);
                        *times += 1;
                        if *times == 2 {
                            errs.push(FieldError::new(
                                ErrorType::Duplicate,
                                Some(format!("{base}[{i}]")),
                                BadValue::of_json(item),
                                String::new(),
                            ));
                        }
                    }
                }
                Some("map") => {
                    // listtype's validateMap: null items are skipped, the first item that
                    // is not an object ends the check; keys hashed once per list.
                    let mut seen: std::collections::HashSet<String> =
                        std::collections::HashSet::new();
                    for (i, item) in items.iter().enumerate() {
                        if item.is_null() {
                            continue;
                        }
                        if !item.is_object() {
                            errs.push(FieldError::new(
                                ErrorType::Invalid,
                                Some(format!("{base}[{i}]")),
                                BadValue::of_json(item),
                                "must be an object for an array of list-type map".into(),
                            ));
                            break;
                        }
                        let key = list_map_key(s, item);
                        let hashed = key
                            .iter()
                            .map(|k| k.map_or_else(|| "\u{0}absent".to_owned(), canonical))
                            .collect::<Vec<_>>()
                            .join("\u{0}");
                        if !seen.insert(hashed) {
                            let mut km = serde_json::Map::new();
                            for (k, kv) in s.list_map_keys.iter().zip(&key) {
                                if let Some(kv) = kv {
                                    km.insert(k.clone(), (*kv).clone());
                                }
                            }
                            errs.push(FieldError::new(
                                ErrorType::Duplicate,
                                Some(format!("{base}[{i}]")),
                                BadValue::Go(crate::error::go_sharp_v(&Value::Object(km))),
                                String::new(),
                            ));
                        }
                    }
                }
                _ => {}
            }
            if let Some(is) = &s.items {
                for (i, item) in items.iter().enumerate() {
                    list_sets_and_maps(Some(&format!("{base}[{i}]")), is, item, errs);
                }
            }
        }
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                if let Some(pv) = map.get(k) {
                    list_sets_and_maps(Some(&child(k)), prop, pv, errs);
                }
            }
            if let Some(ap) = &s.additional {
                for (k, pv) in map {
                    if s.property(k).is_none() {
                        let p = format!("{}[{k}]", path.unwrap_or(""));
                        list_sets_and_maps(Some(&p), ap, pv, errs);
                    }
                }
            }
        }
        _ => {}
    }
}
