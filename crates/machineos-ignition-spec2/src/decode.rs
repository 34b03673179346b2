//! JSON → Go-shaped structs, decoded the way Go's `encoding/json` (Ignition's fork,
//! `ajeddeloh/go-json`) does: object keys match struct tags exactly or else
//! case-insensitively, `null` leaves a value alone (or clears a pointer or slice), unknown
//! keys are skipped, and a value of the wrong JSON type is a type error that names the Go
//! type (`json: cannot unmarshal number into Go value of type string`). Go keeps decoding
//! after a type error and reports the first one, except that a number where no number fits
//! aborts the decode with that error; so does this.

use serde_json::{Map, Value};

/// The first type error of a decode, at a JSON path of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypeError {
    /// Where, such as `$.storage.files.0.mode`.
    pub path: String,
    /// Go's message.
    pub message: String,
}

/// A decode in progress.
#[derive(Debug, Default)]
pub(crate) struct Dec {
    error: Option<TypeError>,
    aborted: bool,
    /// The Go name of the named scalar type being decoded (`types.SSHAuthorizedKey` for a
    /// string), for messages.
    named: Option<&'static str>,
}

impl Dec {
    pub(crate) fn new() -> Dec {
        Dec::default()
    }

    /// The first type error, if any.
    pub(crate) fn finish(self) -> Option<TypeError> {
        self.error
    }

    /// The Go name of the scalar type being decoded: its named type's, or `plain`.
    fn scalar(&self, plain: &'static str) -> &'static str {
        self.named.unwrap_or(plain)
    }

    /// Decodes with `name` as the Go name of the field's scalar type.
    pub(crate) fn named<T: Decode>(
        &mut self,
        name: Option<&'static str>,
        v: &Value,
        path: &str,
        out: &mut T,
    ) {
        let saved = std::mem::replace(&mut self.named, name);
        T::decode(self, v, path, out);
        self.named = saved;
    }

    fn type_error(&mut self, path: &str, value: &str, go_type: &str, abort: bool) {
        if self.aborted {
            return;
        }
        let e = TypeError {
            path: path.to_string(),
            message: format!("json: cannot unmarshal {value} into Go value of type {go_type}"),
        };
        if abort {
            // Go's decoder panics on these; the panic's error replaces any saved one.
            self.error = Some(e);
            self.aborted = true;
        } else if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// A custom `UnmarshalJSON` failed: Go aborts the decode with its error.
    pub(crate) fn custom_error(&mut self, path: &str, message: &str) {
        if self.aborted {
            return;
        }
        self.error = Some(TypeError {
            path: path.to_string(),
            message: message.to_string(),
        });
        self.aborted = true;
    }

    /// A value that does not fit the number type `go_type`.
    pub(crate) fn number_error(&mut self, path: &str, v: &Value, go_type: &str) {
        match v {
            Value::Null => {}
            Value::Number(n) => {
                self.type_error(path, &format!("number {}", number_text(n)), go_type, false)
            }
            _ => self.mismatch(path, v, go_type),
        }
    }

    /// A value that does not fit `go_type` (a struct, a string, a slice, a bool).
    fn mismatch(&mut self, path: &str, v: &Value, go_type: &str) {
        let (kind, abort) = match v {
            Value::Null => return,
            Value::Bool(_) => ("bool", false),
            Value::Number(_) => ("number", true),
            Value::String(_) => ("string", false),
            Value::Array(_) => ("array", false),
            Value::Object(_) => ("object", false),
        };
        self.type_error(path, kind, go_type, abort);
    }

    /// The members of an object decoded into a struct of type `go_type` whose JSON tags are
    /// `tags`: for each key (in document order) the index of the field it sets. `None` for
    /// `null` (nothing to do) and for a non-object (a type error).
    pub(crate) fn object<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
        go_type: &str,
        tags: &[&str],
    ) -> Option<Vec<(usize, &'v Value, String)>> {
        if self.aborted {
            return None;
        }
        let Value::Object(map) = v else {
            self.mismatch(path, v, go_type);
            return None;
        };
        Some(
            map.iter()
                .filter_map(|(k, val)| {
                    field_index(tags, k).map(|i| (i, val, format!("{path}.{k}")))
                })
                .collect(),
        )
    }
}

/// Which field a key sets: the exact tag, or else the first tag equal ignoring case.
pub(crate) fn field_index(tags: &[&str], key: &str) -> Option<usize> {
    tags.iter()
        .position(|t| *t == key)
        .or_else(|| tags.iter().position(|t| t.eq_ignore_ascii_case(key)))
}

/// A Go type that JSON decodes into.
pub(crate) trait Decode: Default {
    /// The Go type's name, for messages (`string`, `types.File`, `[]types.File`).
    fn go_type() -> String;
    /// Decodes `v` into `out`, merging into what is there as Go does.
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self);
}

impl Decode for String {
    fn go_type() -> String {
        "string".into()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::String(s) => *out = s.clone(),
            _ => {
                let name = d.scalar("string");
                d.mismatch(path, v, name)
            }
        }
    }
}

impl Decode for bool {
    fn go_type() -> String {
        "bool".into()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::Bool(b) => *out = *b,
            _ => d.mismatch(path, v, "bool"),
        }
    }
}

/// A number's JSON text as Go's messages quote it (`number 1.5`).
fn number_text(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (None, Some(u), _) => u.to_string(),
        (None, None, Some(f)) => format!("{f:?}"),
        (None, None, None) => n.to_string(),
    }
}

impl Decode for i64 {
    fn go_type() -> String {
        "int".into()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::Number(n) => match n.as_i64() {
                // Go parses the literal as an integer: `1.0` and `1e3` are errors.
                Some(i) if !n.is_f64() => *out = i,
                _ => d.type_error(path, &format!("number {}", number_text(n)), "int", false),
            },
            _ => d.mismatch(path, v, "int"),
        }
    }
}

impl<T: Decode> Decode for Option<T> {
    fn go_type() -> String {
        T::go_type()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        if v.is_null() {
            *out = None;
            return;
        }
        T::decode(d, v, path, out.get_or_insert_with(T::default));
    }
}

impl<T: Decode> Decode for Vec<T> {
    fn go_type() -> String {
        format!("[]{}", T::go_type())
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::Null => out.clear(),
            Value::Array(items) => {
                // Go decodes into the existing elements, then truncates.
                out.truncate(items.len());
                for (i, item) in items.iter().enumerate() {
                    if out.len() <= i {
                        out.push(T::default());
                    }
                    if let Some(slot) = out.get_mut(i) {
                        T::decode(d, item, &format!("{path}.{i}"), slot);
                    }
                }
            }
            _ => {
                let name = match d.named {
                    Some(n) => format!("[]{n}"),
                    None => Self::go_type(),
                };
                d.mismatch(path, v, &name)
            }
        }
    }
}

/// Declares a Go struct: its Rust mirror (fields in Go's declaration order, embedded
/// structs flattened), its JSON tags, and its decoder. `as "types.X"` names the Go type of
/// a field's strings (a named string type), for messages.
macro_rules! go_struct {
    ($(#[$meta:meta])* $name:ident = $go:literal {
        $($field:ident : $ty:ty = $tag:literal $(as $named:literal)?),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub(crate) struct $name {
            $(pub(crate) $field: $ty,)*
        }

        impl $name {
            /// The JSON tags of the fields, in declaration order.
            #[allow(dead_code)]
            pub(crate) const TAGS: &'static [&'static str] = &[$($tag),*];
        }

        impl $crate::decode::Decode for $name {
            fn go_type() -> String {
                $go.into()
            }
            #[allow(unused_assignments)]
            fn decode(
                d: &mut $crate::decode::Dec,
                v: &serde_json::Value,
                path: &str,
                out: &mut Self,
            ) {
                let Some(members) = d.object(v, path, $go, Self::TAGS) else {
                    return;
                };
                for (i, val, p) in members {
                    let mut idx = 0usize;
                    $(
                        if i == idx {
                            #[allow(unused_mut)]
                            let mut named: Option<&'static str> = None;
                            $(named = Some($named);)?
                            d.named(named, val, &p, &mut out.$field);
                        }
                        idx += 1;
                    )*
                }
            }
        }
    };
}

pub(crate) use go_struct;

/// The keys of an object that no tag claims exactly: `(key, tag it was matched to
/// case-insensitively)`, in document order. Go's decoder uses such keys for the field they
/// match ignoring case, and its validator still reports them as unrecognized.
pub(crate) fn unrecognized<'a>(
    map: &'a Map<String, Value>,
    tags: &[&'static str],
) -> Vec<(&'a str, Option<&'static str>)> {
    map.keys()
        .filter(|k| !tags.contains(&k.as_str()))
        .map(|k| {
            let similar = tags.iter().find(|t| t.eq_ignore_ascii_case(k)).copied();
            (k.as_str(), similar)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    go_struct! {
        Inner = "types.Inner" { a: String = "a", n: Option<i64> = "n" }
    }
    go_struct! {
        Outer = "types.Outer" { inner: Inner = "inner", list: Vec<Inner> = "list", flag: bool = "flag" }
    }

    fn decode(v: Value) -> (Outer, Option<TypeError>) {
        let mut d = Dec::new();
        let mut out = Outer::default();
        Outer::decode(&mut d, &v, "$", &mut out);
        (out, d.finish())
    }

    #[test]
    fn keys_match_exactly_then_ignoring_case() {
        let (o, e) = decode(json!({"INNER": {"A": "x"}, "Flag": true}));
        assert_eq!(e, None);
        assert_eq!(o.inner.a, "x");
        assert!(o.flag);
    }

    #[test]
    fn null_is_a_no_op_for_values_and_clears_pointers() {
        let (o, e) = decode(json!({"inner": {"a": "x", "n": 1}, "flag": null}));
        assert_eq!((o.inner.n, o.flag, e), (Some(1), false, None));
        let (o, _) = decode(json!({"inner": {"n": 1}, "Inner": {"n": null, "a": null}}));
        assert_eq!((o.inner.n, o.inner.a.as_str()), (None, ""));
    }

    #[test]
    fn first_type_error_wins_and_numbers_abort() {
        let (_, e) = decode(json!({"inner": {"a": true}, "flag": "yes"}));
        assert_eq!(
            e,
            Some(TypeError {
                path: "$.inner.a".into(),
                message: "json: cannot unmarshal bool into Go value of type string".into()
            })
        );
        let (_, e) = decode(json!({"inner": {"a": true}, "list": [{"a": 5}]}));
        assert_eq!(
            e.map(|e| (e.path, e.message)),
            Some((
                "$.list.0.a".into(),
                "json: cannot unmarshal number into Go value of type string".into()
            ))
        );
        let (_, e) = decode(json!({"inner": {"n": 1.5}}));
        assert_eq!(
            e.map(|e| e.message),
            Some("json: cannot unmarshal number 1.5 into Go value of type int".into())
        );
        let (_, e) = decode(json!({"list": {}}));
        assert_eq!(
            e.map(|e| e.message),
            Some("json: cannot unmarshal object into Go value of type []types.Inner".into())
        );
    }
}
