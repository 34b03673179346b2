//! `x-kubernetes-validations`: CEL rules evaluated over an object as kube-apiserver's
//! apiextensions CEL validator does, on the `cel` crate with kube-cel's Kubernetes
//! function library.
//!
//! **Where rules run.** At every schema node that has rules, with `self` bound to the
//! value there, and only where a value is present (not for absent fields or `null`).
//! The walk follows the schema: declared properties (schema order), `additionalProperties`
//! values (path `[key]`), list items (path `[i]`).
//!
//! **`oldSelf`** (transition rules, those referencing `oldSelf`) is bound only where the
//! old object has a *correlatable* value: object properties by name, map values by key,
//! items of `x-kubernetes-list-type: map` lists by their keys (never items of atomic or
//! set lists). Without one the rule is skipped — unless it has `optionalOldSelf: true`,
//! in which case `oldSelf` is `optional.none()` (and `optional.of(old)` when there is
//! one). cel-go lets a plain field selection on an optional yield an optional
//! (`oldSelf.spec.x`, `self.?a.b`); the `cel` crate does not, so [`crate::cel_compile::compile`]
//! makes such selections optional ones, which mean the same.
//!
//! **Ratcheting.** On update, rules that do not reference `oldSelf` are skipped at a node
//! whose correlated old value equals the new one.
//!
//! **Types.** Objects become maps of their declared properties (names escaped as
//! Kubernetes does: `__dash__`, `__dot__`, `__slash__`, `__underscores__`, reserved words
//! as `__word__`; names that cannot be escaped are invisible), `additionalProperties`
//! objects maps of all their keys, `integer` → `int`, `number` → `double`,
//! `format: date-time` strings → `timestamp`, `format: byte` → `bytes`, int-or-string
//! and schemaless values by their JSON type. At the resource root `self.metadata` holds
//! only `name` and `generateName`, and `apiVersion`/`kind` are visible.
//! `timestamp()` also accepts a timestamp, and `matches()` uses RE2's ASCII classes
//! (see [`crate::re2`]).
//!
//! **Errors** are `field.Invalid(<path>, "<schema type>", <message>)`; the message is the
//! `messageExpression` result when it evaluates to a non-empty string, else `message`,
//! else `failed rule: <rule>`. `reason` and `fieldPath` are honoured. An evaluation error
//! reports `<error> evaluating rule: <message or rule>`.
//!
//! Not implemented: the CEL cost budget (rules here always run to completion), the static
//! type check at CRD-creation time (a rule that does not type-check fails at evaluation
//! instead), order-insensitive `==` for `map`/`set` lists (compared in order here), and
//! `format: duration` strings as `duration` values (they stay strings).

use crate::error::{BadValue, ErrorType, FieldError};
use crate::schema::{Rule, Schema};
use crate::structural::{json_eq, list_map_key};
use kube_cel::KubeCelExt;
use kube_cel::cel::{
    Context, ExecutionError, FunctionContext, ResolveResult, Value as Cel, extractors::This,
    objects::Key, objects::OptionalValue,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// `timestamp()` accepting a timestamp too (CEL's identity overload, missing in cel 0.13).
fn timestamp(ftx: &FunctionContext, v: Cel) -> ResolveResult {
    match v {
        Cel::Timestamp(t) => Ok(Cel::Timestamp(t)),
        Cel::String(s) => chrono::DateTime::parse_from_rfc3339(&s)
            .map(Cel::Timestamp)
            .map_err(|e| ftx.error(format!("timestamp: {e}"))),
        other => Err(ftx.error(format!("timestamp: unsupported argument {other:?}"))),
    }
}

/// `matches()` with RE2 semantics.
fn matches(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    re: Arc<String>,
) -> Result<bool, ExecutionError> {
    thread_local! {
        // Compiled patterns, so a rule over many list items compiles its regex once.
        static CACHE: std::cell::RefCell<HashMap<String, regex::Regex>> =
            std::cell::RefCell::new(HashMap::new());
    }
    CACHE.with(|cache| {
        if let Some(r) = cache.borrow().get(re.as_str()) {
            return Ok(r.is_match(&this));
        }
        let r = crate::re2::compile(&re)
            .map_err(|e| ftx.error(format!("'{re}' not a valid regex:\n{e}")))?;
        let matched = r.is_match(&this);
        let mut cache = cache.borrow_mut();
        if cache.len() > 1024 {
            cache.clear();
        }
        cache.insert(re.to_string(), r);
        Ok(matched)
    })
}

/// `operand.?field` as cel-go evaluates it: on `optional.none()` → `optional.none()`; on
/// `optional.of(v)` or a plain `v` → `optional.of(v.field)` when the map `v` has the key,
/// else `optional.none()`. (cel 0.13's own fails on a missing key and wraps the selection
/// on an optional twice; [`crate::cel_compile::compile`] routes `.?` here.)
fn opt_select(ftx: &FunctionContext, operand: Cel, field: Arc<String>) -> ResolveResult {
    let optional = |v: Option<Cel>| {
        Cel::Opaque(Arc::new(match v {
            Some(v) => OptionalValue::of(v),
            None => OptionalValue::none(),
        }))
    };
    let target = match &operand {
        Cel::Opaque(o) if o.runtime_type_name() == "optional_type" => {
            match o
                .downcast_ref::<OptionalValue>()
                .and_then(OptionalValue::value)
            {
                Some(v) => v.clone(),
                None => return Ok(optional(None)),
            }
        }
        v => v.clone(),
    };
    match target {
        Cel::Map(m) => Ok(optional(m.map.get(&Key::String(field)).cloned())),
        other => Err(ftx.error(format!(
            "no such overload: optional field selection .?{field} on {}",
            other.type_of()
        ))),
    }
}

/// A context with the standard library, kube-cel's Kubernetes functions and the
/// overrides above.
pub fn context() -> Context<'static> {
    let mut ctx = Context::default();
    ctx.register_all();
    ctx.add_function("timestamp", timestamp);
    ctx.add_function("matches", matches);
    ctx.add_function(crate::cel_compile::OPT_SELECT, opt_select);
    ctx
}

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property name as CEL sees it, or `None` when it cannot be accessed.
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

fn cel_map(entries: Vec<(String, Cel)>) -> Cel {
    let map: HashMap<Key, Cel> = entries
        .into_iter()
        .map(|(k, v)| (Key::String(Arc::new(k)), v))
        .collect();
    Cel::from(map)
}

/// A JSON value without a schema (inside `x-kubernetes-preserve-unknown-fields`).
fn untyped(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(untyped).collect())),
        Value::Object(m) => cel_map(m.iter().map(|(k, v)| (k.clone(), untyped(v))).collect()),
    }
}

/// The CEL value of `v` under schema `s` (`root`: the resource root or an embedded
/// resource, whose `metadata` is reduced to `name`/`generateName`).
pub fn to_cel(v: &Value, s: &Schema, root: bool) -> Cel {
    let root = root || s.embedded;
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match s.ty.as_deref() {
            Some("number") => Cel::Float(n.as_f64().unwrap_or(0.0)),
            Some("integer") => match n.as_i64() {
                Some(i) => Cel::Int(i),
                None => Cel::Int(n.as_f64().unwrap_or(0.0) as i64),
            },
            _ => untyped(v),
        },
        Value::String(st) => match s.format.as_deref() {
            Some("date-time") | Some("datetime") => chrono::DateTime::parse_from_rfc3339(st)
                .map(Cel::Timestamp)
                .unwrap_or_else(|_| Cel::String(Arc::new(st.clone()))),
            Some("byte") => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(st)
                    .map(|b| Cel::Bytes(Arc::new(b)))
                    .unwrap_or_else(|_| Cel::String(Arc::new(st.clone())))
            }
            _ => Cel::String(Arc::new(st.clone())),
        },
        Value::Array(items) => match &s.items {
            Some(is) => Cel::List(Arc::new(
                items.iter().map(|i| to_cel(i, is, false)).collect(),
            )),
            None => untyped(v),
        },
        Value::Object(m) => {
            let mut entries = Vec::new();
            if root {
                for k in ["apiVersion", "kind"] {
                    if let Some(Value::String(x)) = m.get(k) {
                        entries.push((k.to_string(), Cel::String(Arc::new(x.clone()))));
                    }
                }
                if let Some(Value::Object(md)) = m.get("metadata") {
                    let mut me = Vec::new();
                    for k in ["name", "generateName"] {
                        if let Some(Value::String(x)) = md.get(k) {
                            me.push((k.to_string(), Cel::String(Arc::new(x.clone()))));
                        }
                    }
                    entries.push(("metadata".to_string(), cel_map(me)));
                }
            }
            if !s.properties.is_empty() {
                for (k, ps) in &s.properties {
                    if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    if let (Some(pv), Some(ek)) = (m.get(k), escape(k)) {
                        entries.push((ek, to_cel(pv, ps, false)));
                    }
                }
            } else if let Some(ap) = &s.additional {
                for (k, pv) in m {
                    entries.push((k.clone(), to_cel(pv, ap, false)));
                }
            } else if s.preserve_unknown {
                for (k, pv) in m {
                    if !(root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")) {
                        entries.push((k.clone(), untyped(pv)));
                    }
                }
            }
            cel_map(entries)
        }
    }
}

/// The walk's state: the function context and whether ratcheting applies.
pub struct Walker<'c> {
    /// The context with all functions.
    pub ctx: &'c Context<'static>,
    /// Skip non-transition rules on unchanged correlated values.
    pub ratchet: bool,
}

fn child(path: &Option<String>, k: &str) -> Option<String> {
    Some(match path {
        Some(p) => format!("{p}.{k}"),
        None => k.to_string(),
    })
}

fn index(path: &Option<String>, i: &str) -> Option<String> {
    Some(format!("{}[{i}]", path.as_deref().unwrap_or("")))
}

impl Walker<'_> {
    /// Runs every rule in `s`'s subtree over `v` (`old`: the correlated old value).
    pub fn walk(
        &self,
        path: &Option<String>,
        s: &Schema,
        v: &Value,
        old: Option<&Value>,
        root: bool,
        errs: &mut Vec<FieldError>,
    ) {
        if v.is_null() {
            return;
        }
        if !s.rules.is_empty() {
            self.rules(path, s, v, old, root, errs);
        }
        match v {
            Value::Object(m) => {
                for (k, ps) in &s.properties {
                    if let Some(pv) = m.get(k) {
                        let o = old.and_then(|o| o.get(k));
                        self.walk(&child(path, k), ps, pv, o, ps.embedded, errs);
                    }
                }
                if let Some(ap) = &s.additional {
                    for (k, pv) in m {
                        if s.property(k).is_none() {
                            let o = old.and_then(|o| o.get(k));
                            self.walk(&index(path, k), ap, pv, o, ap.embedded, errs);
                        }
                    }
                }
            }
            Value::Array(items) => {
                let Some(is) = &s.items else { return };
                let is_map = s.list_type.as_deref() == Some("map") && !s.list_map_keys.is_empty();
                for (i, item) in items.iter().enumerate() {
                    let o = if is_map {
                        old.and_then(Value::as_array).and_then(|olds| {
                            let key = list_map_key(s, item);
                            olds.iter().find(|o| {
                                list_map_key(s, o)
                                    .iter()
                                    .zip(&key)
                                    .all(|(a, b)| match (a, b) {
                                        (Some(a), Some(b)) => json_eq(a, b),
                                        (None, None) => true,
                                        _ => false,
                                    })
                            })
                        })
                    } else {
                        None
                    };
                    self.walk(&index(path, &i.to_string()), is, item, o, is.embedded, errs);
                }
            }
            _ => {}
        }
    }

    fn rules(
        &self,
        path: &Option<String>,
        s: &Schema,
        v: &Value,
        old: Option<&Value>,
        root: bool,
        errs: &mut Vec<FieldError>,
    ) {
        let unchanged = self.ratchet && old.is_some_and(|o| json_eq(o, v));
        let self_v = to_cel(v, s, root);
        let old_v = old.map(|o| to_cel(o, s, root));
        for rule in &s.rules {
            if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
                continue;
            }
            if unchanged && !rule.uses_old_self {
                continue;
            }
            let mut act = self.ctx.new_inner_scope();
            act.add_variable_from_value("self", self_v.clone());
            if rule.optional_old_self {
                let opt = match &old_v {
                    Some(o) => OptionalValue::of(o.clone()),
                    None => OptionalValue::none(),
                };
                act.add_variable_from_value("oldSelf", Cel::Opaque(Arc::new(opt)));
            } else if let Some(o) = &old_v {
                act.add_variable_from_value("oldSelf", o.clone());
            }
            match act.resolve(&rule.expr) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => {
                    let detail = message(&act, rule);
                    errs.push(rule_error(path, s, rule, detail));
                }
                Ok(other) => errs.push(FieldError::new(
                    ErrorType::Invalid,
                    path.clone(),
                    BadValue::Str(s.type_name().to_string()),
                    format!(
                        "rule result is not a bool ({other:?}) evaluating rule: {}",
                        rule_error_string(rule)
                    ),
                )),
                Err(e) => {
                    let detail = if matches!(e, ExecutionError::NoSuchOverload) {
                        format!(
                            "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule_error_string(rule)
                        )
                    } else {
                        format!("{e} evaluating rule: {}", rule_error_string(rule))
                    };
                    errs.push(FieldError::new(
                        ErrorType::Invalid,
                        path.clone(),
                        BadValue::Str(s.type_name().to_string()),
                        detail,
                    ));
                }
            }
        }
    }
}

fn rule_error_string(rule: &Rule) -> String {
    match &rule.message {
        Some(m) if !m.is_empty() => m.trim().to_string(),
        _ => rule.rule.trim().to_string(),
    }
}

/// The rule's message as the API server builds it: a `messageExpression` result trimmed,
/// used when non-empty, without line breaks and at most 5 KiB; else `message`, trimmed;
/// else `failed rule: <rule>`.
fn message(act: &Context<'_>, rule: &Rule) -> String {
    if let Some(me) = &rule.message_expression
        && let Ok(Cel::String(s)) = act.resolve(me)
    {
        let s = s.trim();
        if !s.is_empty() && !s.contains('\n') && s.len() <= 5 * 1024 {
            return s.to_owned();
        }
    }
    match rule.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => format!("failed rule: {}", rule_error_string(rule)),
    }
}

fn rule_error(path: &Option<String>, s: &Schema, rule: &Rule, detail: String) -> FieldError {
    let mut path = path.clone();
    if let Some(fp) = &rule.field_path {
        let fp = fp.trim_start_matches('.');
        if !fp.is_empty() {
            path = if fp.starts_with('[') {
                Some(format!("{}{fp}", path.as_deref().unwrap_or("")))
            } else {
                child(&path, fp)
            };
        }
    }
    let value = BadValue::Str(s.type_name().to_string());
    match rule.reason.as_deref() {
        Some("FieldValueForbidden") => {
            FieldError::new(ErrorType::Forbidden, path, BadValue::Omit, detail)
        }
        Some("FieldValueRequired") => {
            FieldError::new(ErrorType::Required, path, BadValue::Omit, detail)
        }
        Some("FieldValueDuplicate") => {
            FieldError::new(ErrorType::Duplicate, path, value, String::new())
        }
        _ => FieldError::new(ErrorType::Invalid, path, value, detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel_compile::compile;
    use kube_cel::cel::to_value;
    use serde_json::json;

    #[test]
    fn escaping() {
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("x__y").as_deref(), Some("x__underscores__y"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn kubernetes_functions_are_available() {
        let ctx = context();
        let eval = |src: &str| ctx.resolve(&compile(src, false).unwrap()).unwrap();
        assert_eq!(
            eval("!format.dns1123Subdomain().validate('foo.bar').hasValue()"),
            Cel::Bool(true)
        );
        assert_eq!(
            eval("format.dns1123Subdomain().validate('Foo').hasValue()"),
            Cel::Bool(true)
        );
        assert_eq!(eval("'a@b'.split('@').size() == 2"), Cel::Bool(true));
        assert_eq!(
            eval(
                "timestamp(timestamp('2024-01-01T00:00:00Z')) < timestamp('2024-01-02T00:00:00Z')"
            ),
            Cel::Bool(true)
        );
        assert_eq!(eval("'١'.matches('^\\\\d$')"), Cel::Bool(false));
        assert_eq!(eval("optional.none().?a.hasValue()"), Cel::Bool(false));
        assert_eq!(eval("{'a': 1}.?b.orValue(2)"), Cel::Int(2));
        assert_eq!(eval("{'a': {'b': 1}}.?a.?b.orValue(2)"), Cel::Int(1));
        assert_eq!(eval("{'a': {'b': 1}}.?a.?c.orValue(2)"), Cel::Int(2));
        assert_eq!(eval("{'a': 1}.?a.value() == 1"), Cel::Bool(true));
        assert_eq!(eval("optional.of({'a': 3}).?a.orValue(0)"), Cel::Int(3));
    }

    /// Selections on optionals (after a `.?`, on an optional `oldSelf`) are optional ones,
    /// whatever the spacing or parentheses; string literals, `has()` and other names are
    /// left alone.
    #[test]
    fn selections_on_optionals_are_optional() {
        let ctx = context();
        let eval = |src: &str, optional_old_self: bool, this: Value, old: Option<Cel>| {
            let mut act = ctx.new_inner_scope();
            act.add_variable_from_value("self", to_value(this).unwrap());
            act.add_variable_from_value("myoldSelf", to_value(json!({"x": "a"})).unwrap());
            if let Some(old) = old {
                act.add_variable_from_value("oldSelf", old);
            }
            act.resolve(&compile(src, optional_old_self).unwrap())
                .unwrap_or_else(|e| panic!("{src}: {e}"))
        };
        let chain = "self.?status.a.b.orValue(1)";
        assert_eq!(eval(chain, false, json!({}), None), Cel::Int(1));
        assert_eq!(
            eval(chain, false, json!({"status": {"a": {}}}), None),
            Cel::Int(1)
        );
        assert_eq!(
            eval(chain, false, json!({"status": {"a": {"b": 2}}}), None),
            Cel::Int(2)
        );
        for src in [
            "(self.?a).b.orValue(3)",
            "self.?a\n  .b /* x.'y */ .orValue(3)",
        ] {
            let src = src.replace("/* x.'y */ ", "");
            assert_eq!(eval(&src, false, json!({}), None), Cel::Int(3), "{src}");
        }
        assert_eq!(
            eval("'x.?y.z' + \"é\" == 'x.?y.zé'", false, json!({}), None),
            Cel::Bool(true)
        );
        assert_eq!(
            eval("has(self.a) || has(self.?b.c.d)", false, json!({}), None),
            Cel::Bool(false)
        );
        assert_eq!(
            eval("myoldSelf.x == 'a'", true, json!({}), None),
            Cel::Bool(true)
        );
        // openshift/api's MachineOSConfig rule, with `optionalOldSelf`.
        let rule = "self.metadata.name == self.spec.pool.name || oldSelf.hasValue() && oldSelf.spec.pool.name.value() == self.spec.pool.name";
        let this = json!({"metadata": {"name": "a"}, "spec": {"pool": {"name": "w"}}});
        let old = |v: Option<Value>| {
            Cel::Opaque(Arc::new(match v {
                Some(v) => OptionalValue::of(to_value(v).unwrap()),
                None => OptionalValue::none(),
            }))
        };
        assert_eq!(
            eval(rule, true, this.clone(), Some(old(None))),
            Cel::Bool(false)
        );
        assert_eq!(
            eval(
                rule,
                true,
                this.clone(),
                Some(old(Some(json!({"spec": {"pool": {"name": "w"}}}))))
            ),
            Cel::Bool(true)
        );
        assert_eq!(
            eval(
                "oldSelf.spec.name.orValue('gone')",
                true,
                this.clone(),
                Some(old(Some(json!({"spec": {}}))))
            ),
            Cel::String(Arc::new("gone".into()))
        );
        // Without `optionalOldSelf`, `oldSelf` is a plain value.
        assert_eq!(
            eval(
                "oldSelf.spec.pool.name == 'w'",
                false,
                this,
                Some(to_value(json!({"spec": {"pool": {"name": "w"}}})).unwrap())
            ),
            Cel::Bool(true)
        );
    }
}
