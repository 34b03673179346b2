//! Label and field selectors, parsed from their query-string forms and matched against
//! objects.
//!
//! Label selectors follow `k8s.io/apimachinery/pkg/labels`: comma-separated requirements
//! `key`, `!key`, `key=v`, `key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`,
//! `key>n`, `key<n`; `!=` and `notin` also match objects without the key. Keys must be
//! qualified names and values label values. Field selectors follow
//! `k8s.io/apimachinery/pkg/fields`: `path=v`, `path==v`, `path!=v`, comma-separated, with
//! `\` escaping; a path is checked against the resource's supported field labels
//! (`metadata.name` and `metadata.namespace` everywhere, `spec.nodeName` for pods,
//! `involvedObject.*` for events, …) and read from the object as a string (`true`/`false`
//! for booleans, empty when absent).
//!
//! Every parse error is a 400 BadRequest; the texts follow the Go parsers' (`found ',',
//! expected: identifier`, `invalid selector: 'x'; can't understand 'x'`,
//! `field label not supported: spec.x`) but are not byte-for-byte guaranteed for the
//! label parser's rarer errors.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::ApiError;
use crate::resource::ResourceInfo;

/// A label requirement's operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelOp {
    /// `key=v`, `key==v`, `key in (…)`.
    In(BTreeSet<String>),
    /// `key!=v`, `key notin (…)`.
    NotIn(BTreeSet<String>),
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>n`.
    Gt(i64),
    /// `key<n`.
    Lt(i64),
}

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator and values.
    pub op: LabelOp,
}

/// A parsed label selector: all requirements must hold (empty matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Id(String),
    Eq,
    DoubleEq,
    NotEq,
    Not,
    Open,
    Close,
    Comma,
    Gt,
    Lt,
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Tok::Id(s) => s.clone(),
            Tok::Eq => "=".into(),
            Tok::DoubleEq => "==".into(),
            Tok::NotEq => "!=".into(),
            Tok::Not => "!".into(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
        }
    }
}

fn lex(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::DoubleEq);
                } else {
                    out.push(Tok::Eq);
                }
            }
            '!' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::NotEq);
                } else {
                    out.push(Tok::Not);
                }
            }
            '(' | ')' | ',' | '>' | '<' => {
                chars.next();
                out.push(match c {
                    '(' => Tok::Open,
                    ')' => Tok::Close,
                    ',' => Tok::Comma,
                    '>' => Tok::Gt,
                    _ => Tok::Lt,
                });
            }
            _ => {
                let mut id = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "=!(),<>".contains(c) {
                        break;
                    }
                    id.push(c);
                    chars.next();
                }
                out.push(Tok::Id(id));
            }
        }
    }
    out
}

fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

fn is_label_value(v: &str) -> bool {
    v.is_empty() || (is_qualified_name(v) && !v.contains('/'))
}

fn found(tok: Option<&Tok>, expected: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: found '{}', expected: {expected}",
        tok.map(Tok::text).unwrap_or_default()
    ))
}

impl LabelSelector {
    /// Parses the string form (`app=web,tier in (a,b),!canary`).
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let toks = lex(s);
        let mut reqs = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let negated = toks[i] == Tok::Not;
            if negated {
                i += 1;
            }
            let key = match toks.get(i) {
                Some(Tok::Id(k)) => k.clone(),
                t => return Err(found(t, "identifier")),
            };
            if !is_qualified_name(&key) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label key {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                )));
            }
            i += 1;
            let op = if negated {
                LabelOp::DoesNotExist
            } else {
                match toks.get(i) {
                    None | Some(Tok::Comma) => LabelOp::Exists,
                    Some(Tok::Eq | Tok::DoubleEq | Tok::NotEq) => {
                        let neg = toks[i] == Tok::NotEq;
                        i += 1;
                        let v = match toks.get(i) {
                            Some(Tok::Id(v)) => {
                                i += 1;
                                v.clone()
                            }
                            None | Some(Tok::Comma) => String::new(),
                            t => return Err(found(t, "identifier")),
                        };
                        check_value(&v)?;
                        let set = BTreeSet::from([v]);
                        if neg {
                            LabelOp::NotIn(set)
                        } else {
                            LabelOp::In(set)
                        }
                    }
                    Some(Tok::Gt | Tok::Lt) => {
                        let gt = toks[i] == Tok::Gt;
                        i += 1;
                        let n = match toks.get(i) {
                            Some(Tok::Id(v)) => v.parse::<i64>().map_err(|_| {
                                ApiError::bad_request(format!(
                                    "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {v:?}"
                                ))
                            })?,
                            t => return Err(found(t, "identifier")),
                        };
                        i += 1;
                        if gt { LabelOp::Gt(n) } else { LabelOp::Lt(n) }
                    }
                    Some(Tok::Id(w)) if w == "in" || w == "notin" => {
                        let notin = w == "notin";
                        i += 1;
                        if toks.get(i) != Some(&Tok::Open) {
                            return Err(found(toks.get(i), "'(' after 'in'"));
                        }
                        i += 1;
                        let mut set = BTreeSet::new();
                        loop {
                            match toks.get(i) {
                                Some(Tok::Id(v)) => {
                                    check_value(v)?;
                                    set.insert(v.clone());
                                    i += 1;
                                }
                                Some(Tok::Comma | Tok::Close) => {
                                    set.insert(String::new());
                                }
                                t => return Err(found(t, "identifier or ')'")),
                            }
                            match toks.get(i) {
                                Some(Tok::Comma) => i += 1,
                                Some(Tok::Close) => {
                                    i += 1;
                                    break;
                                }
                                t => return Err(found(t, "',' or ')'")),
                            }
                        }
                        if notin {
                            LabelOp::NotIn(set)
                        } else {
                            LabelOp::In(set)
                        }
                    }
                    t => return Err(found(t, "'=', '!=', '==', 'in', notin'")),
                }
            };
            reqs.push(Requirement { key, op });
            match toks.get(i) {
                None => {}
                Some(Tok::Comma) if i + 1 < toks.len() => i += 1,
                t => return Err(found(t, "','")),
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match (&r.op, get(&r.key)) {
            (LabelOp::Exists, v) => v.is_some(),
            (LabelOp::DoesNotExist, v) => v.is_none(),
            (LabelOp::In(set), Some(v)) => set.contains(v),
            (LabelOp::In(_), None) => false,
            (LabelOp::NotIn(set), Some(v)) => !set.contains(v),
            (LabelOp::NotIn(_), None) => true,
            (LabelOp::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (LabelOp::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (LabelOp::Gt(_) | LabelOp::Lt(_), None) => false,
        })
    }
}

fn check_value(v: &str) -> Result<(), ApiError> {
    if is_label_value(v) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )))
    }
}

/// One field requirement: `path=value` or `path!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path (`spec.nodeName`).
    pub path: String,
    /// The value compared with.
    pub value: String,
    /// `!=` (else `=`/`==`).
    pub negated: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldRequirement>);

/// Splits on unescaped `sep`.
fn split_escaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            if let Some(p) = parts.last_mut() {
                p.push('\\');
                p.push(c);
            }
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(String::new());
        } else if let Some(p) = parts.last_mut() {
            p.push(c);
        }
    }
    parts
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

impl FieldSelector {
    /// Parses the string form (`metadata.name=x,spec.nodeName!=n`).
    pub fn parse(s: &str) -> Result<FieldSelector, ApiError> {
        if s.trim().is_empty() {
            return Ok(FieldSelector::default());
        }
        let mut reqs = Vec::new();
        for part in split_escaped(s, ',') {
            let ops = ["!=", "==", "="];
            let hit = ops
                .iter()
                .filter_map(|op| part.find(op).map(|i| (i, *op)))
                .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())));
            let Some((i, op)) = hit else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let path = part[..i].trim().to_string();
            if path.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            }
            reqs.push(FieldRequirement {
                path,
                value: unescape(&part[i + op.len()..]),
                negated: op == "!=",
            });
        }
        Ok(FieldSelector(reqs))
    }

    /// 400 unless every path is a field label of `info`.
    pub fn check(&self, info: &ResourceInfo) -> Result<(), ApiError> {
        for r in &self.0 {
            let known = r.path == "metadata.name"
                || r.path == "metadata.namespace"
                || info.field_labels.contains(&r.path);
            if !known {
                return Err(ApiError::bad_request(if info.is_custom() {
                    format!(
                        "{:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                        r.path
                    )
                } else {
                    format!("field label not supported: {}", r.path)
                }));
            }
        }
        Ok(())
    }

    /// Whether every requirement holds for `obj`.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let mut cur = Some(obj);
            for seg in r.path.split('.') {
                cur = cur.and_then(|v| v.get(seg));
            }
            let v = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (v == r.value) != r.negated
        })
    }
}

/// A label and a field selector together: what list and watch filter by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    /// The label selector.
    pub labels: LabelSelector,
    /// The field selector.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Parses both (absent = everything) and checks the field paths against `info`.
    pub fn parse(
        labels: Option<&str>,
        fields: Option<&str>,
        info: &ResourceInfo,
    ) -> Result<Selectors, ApiError> {
        let s = Selectors {
            labels: LabelSelector::parse(labels.unwrap_or(""))?,
            fields: FieldSelector::parse(fields.unwrap_or(""))?,
        };
        s.fields.check(info)?;
        Ok(s)
    }

    /// Whether `obj` matches both.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{GroupResource, Registry};
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n", "namespace": "ns", "labels": labels}, "spec": {"nodeName": "node1", "unschedulable": true}})
    }

    #[test]
    fn label_selectors() {
        let o = obj(json!({"app": "web", "tier": "front", "n": "5"}));
        let bare = obj(json!({}));
        let cases: Vec<(&str, bool, bool)> = vec![
            // selector, matches o, matches bare
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app = web", true, false),
            ("app!=web", false, true),
            ("app!=db", true, true),
            ("app in (web, db)", true, false),
            ("app notin (web)", false, true),
            ("app notin (db)", true, true),
            ("app", true, false),
            ("!app", false, true),
            ("app,tier=front", true, false),
            ("app=web,tier=back", false, false),
            ("n>4", true, false),
            ("n<5", false, false),
            ("example.com/role", false, false),
            ("app in (web,)", true, false),
        ];
        for (s, want_o, want_bare) in cases {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(
                (sel.matches(&o), sel.matches(&bare)),
                (want_o, want_bare),
                "{s}"
            );
        }
    }

    #[test]
    fn label_selector_errors_are_bad_requests() {
        for (s, msg) in [
            ("app in web", "found 'web', expected: '(' after 'in'"),
            ("=x", "found '=', expected: identifier"),
            ("a,", "found ',', expected: ','"),
            ("a b", "found 'b', expected: '=', '!=', '==', 'in', notin'"),
            ("a=b c", "found 'c', expected: ','"),
            ("-a=b", "invalid label key"),
            ("a=-b", "invalid label value"),
            ("a>x", "must be an integer"),
        ] {
            let e = LabelSelector::parse(s).unwrap_err();
            assert_eq!(e.code(), 400, "{s}");
            assert!(e.to_string().contains(msg), "{s}: {e}");
        }
    }

    #[test]
    fn field_selectors() {
        let reg = Registry::builtin();
        let pods = reg.get(&GroupResource::new("", "pods")).unwrap();
        let o = obj(json!({}));
        let cases: Vec<(&str, bool)> = vec![
            ("", true),
            ("metadata.name=n", true),
            ("metadata.name==n", true),
            ("metadata.name!=n", false),
            ("metadata.namespace=ns,spec.nodeName=node1", true),
            ("spec.nodeName=node2", false),
            ("spec.nodeName=", false),
            ("status.phase=", true),
        ];
        for (s, want) in cases {
            let sel = FieldSelector::parse(s).unwrap();
            sel.check(pods).unwrap();
            assert_eq!(sel.matches(&o), want, "{s}");
        }
        let nodes = reg.get(&GroupResource::new("", "nodes")).unwrap();
        let sel = FieldSelector::parse("spec.unschedulable=true").unwrap();
        sel.check(nodes).unwrap();
        assert!(sel.matches(&o));
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "p"}});
        let events = reg.get(&GroupResource::new("", "events")).unwrap();
        let sel = FieldSelector::parse("involvedObject.kind=Pod,involvedObject.name=p").unwrap();
        sel.check(events).unwrap();
        assert!(sel.matches(&ev));

        let e = FieldSelector::parse("spec.x=1")
            .unwrap()
            .check(pods)
            .unwrap_err();
        assert_eq!(e.to_string(), "field label not supported: spec.x");
        let e = FieldSelector::parse("nonsense").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid selector: 'nonsense'; can't understand 'nonsense'"
        );
        assert_eq!(e.code(), 400);
        let esc = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
        assert_eq!(esc.0[0].value, "a,b");
    }
}
