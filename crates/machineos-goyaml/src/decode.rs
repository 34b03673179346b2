//! YAML read as `kubectl` reads a manifest: the JSON `sigs.k8s.io/yaml`'s `YAMLToJSON` makes
//! of each document (gopkg.in/yaml.v2's YAML 1.1 resolution into Go values, then
//! `encoding/json`), which is what kubectl sends and the cluster stores. So `mode: 0644` is
//! 420, `yes`/`on`/`y` are `true`, and a file reads the same through `machineos` as through
//! `kubectl apply`.
//!
//! The rules, from yaml.v2's `resolve.go` / `decode.go` and sigs.k8s.io/yaml's `yaml.go`:
//! * A **plain** scalar is resolved by yaml.v2 ([`crate::resolve::resolve_plain`]): the
//!   YAML 1.1 words (`y`, `Yes`, `on`, `OFF`, `~`, `null`, `.inf`, …), Go's integer syntax
//!   after underscores are removed (`0644` octal, `0x1F`, `0b101`, `0o17`, a sign), an
//!   integer past `int64` as `uint64`, then yaml.v2's decimal float pattern (`1e3`, `08`,
//!   a number past `uint64`); a timestamp-like scalar stays the **string** it was (yaml.v2
//!   keeps timestamps as text for untyped values). Quoted and block scalars are strings.
//! * Tags: `!!str` makes any scalar a string; `!!int`, `!!float`, `!!bool`, `!!null` resolve
//!   the text as a plain scalar would; `!!binary` is base64-decoded; other tags are ignored.
//! * Anchors and aliases copy the anchored value; `<<` merges a mapping (or a list of
//!   mappings) whose keys the mapping's own keys override; a repeated key keeps its last
//!   value.
//! * **Mapping keys** become strings as sigs.k8s.io/yaml writes them: booleans `true` /
//!   `false`, integers in decimal, floats as Go's `FormatFloat(f, 'g', -1, 32)`; a null or
//!   collection key is an error, as there.
//! * **Numbers** are what `encoding/json` writes and kubectl reads back: an integral float
//!   below 1e21 in magnitude becomes that integer (`1e3` → 1000, `08` → 8), any other float
//!   stays a float, an integer past `i64` is the `uint64` it is (what kubectl sends);
//!   infinities and NaN cannot be written (`json: unsupported value`).
//! * An empty document is [`Value::Null`] (the caller skips it, as kubectl does).
//!
//! Why by hand: no Rust YAML library implements yaml.v2's resolution (serde-saphyr's legacy
//! options differ on `08`, underscores, timestamps and keys), and the event parser
//! (`granit-parser`, serde-saphyr's own) does the syntax; this module only resolves.

use std::borrow::Cow;
use std::collections::HashMap;

use base64::Engine as _;
use granit_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};
use serde_json::{Map, Number, Value};

use crate::resolve::{Plain, resolve_plain};

/// Why a YAML text could not be read as kubectl reads it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line} column {column}: {message}")]
pub struct DecodeError {
    /// 1-based line of the node (or of the syntax error).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Every document of `text`, each as the JSON kubectl would send for it.
pub fn from_str_documents(text: &str) -> Result<Vec<Value>, DecodeError> {
    let mut d = Decoder {
        events: Parser::new_from_str(text),
        anchors: HashMap::new(),
        peeked: None,
    };
    let mut docs = Vec::new();
    loop {
        let Some((event, span)) = d.next()? else {
            return Ok(docs);
        };
        match event {
            Event::DocumentStart(..) => {
                d.anchors.clear();
                let (first, span) = d.expect()?;
                if matches!(first, Event::DocumentEnd) {
                    docs.push(Value::Null);
                    continue;
                }
                let value = d.node(first, span)?;
                docs.push(value);
                let (end, span) = d.expect()?;
                if !matches!(end, Event::DocumentEnd) {
                    return Err(at(span, "expected the end of the document".into()));
                }
            }
            Event::StreamStart | Event::StreamEnd => {}
            _ => return Err(at(span, "unexpected YAML event outside a document".into())),
        }
    }
}

struct Decoder<'a> {
    events: Parser<'a, granit_parser::StrInput<'a>>,
    anchors: HashMap<usize, Value>,
    peeked: Option<(Event<'a>, Span)>,
}

fn at(span: Span, message: String) -> DecodeError {
    DecodeError {
        line: span.start.line(),
        column: span.start.col() + 1,
        message,
    }
}

fn scan(e: ScanError) -> DecodeError {
    let m = e.marker();
    DecodeError {
        line: m.line(),
        column: m.col() + 1,
        message: e.to_string(),
    }
}

impl<'a> Decoder<'a> {
    fn next(&mut self) -> Result<Option<(Event<'a>, Span)>, DecodeError> {
        if let Some(p) = self.peeked.take() {
            return Ok(Some(p));
        }
        loop {
            match self.events.next() {
                None => return Ok(None),
                Some(Err(e)) => return Err(scan(e)),
                #[allow(unreachable_patterns)]
                Some(Ok((Event::Comment(..), _))) => continue,
                Some(Ok(ev)) => return Ok(Some(ev)),
            }
        }
    }

    fn expect(&mut self) -> Result<(Event<'a>, Span), DecodeError> {
        self.next()?.ok_or_else(|| DecodeError {
            line: 0,
            column: 0,
            message: "unexpected end of the YAML text".into(),
        })
    }

    /// The value of the node that starts with `event`.
    fn node(&mut self, event: Event<'a>, span: Span) -> Result<Value, DecodeError> {
        let (value, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                (scalar(&text, style, tag.as_deref(), span)?, anchor)
            }
            Event::Alias(id) => {
                return self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| at(span, "unknown anchor".into()));
            }
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (e, s) = self.expect()?;
                    if matches!(e, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(e, s)?);
                }
                (Value::Array(items), anchor)
            }
            Event::MappingStart(_, anchor, _) => (self.mapping()?, anchor),
            _ => return Err(at(span, "unexpected YAML event".into())),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
        Ok(value)
    }

    fn mapping(&mut self) -> Result<Value, DecodeError> {
        let mut own = Map::new();
        let mut merged = Map::new();
        loop {
            let (e, s) = self.expect()?;
            if matches!(e, Event::MappingEnd) {
                break;
            }
            let is_merge = matches!(&e, Event::Scalar(t, ScalarStyle::Plain, _, None) if t == "<<");
            let key = self.node(e, s)?;
            let (ve, vs) = self.expect()?;
            let value = self.node(ve, vs)?;
            if is_merge {
                let sources = match value {
                    Value::Object(m) => vec![m],
                    Value::Array(items) => {
                        let mut maps = Vec::new();
                        for item in items {
                            match item {
                                Value::Object(m) => maps.push(m),
                                _ => {
                                    return Err(at(
                                        s,
                                        "map merge requires map or sequence of maps as the value"
                                            .into(),
                                    ));
                                }
                            }
                        }
                        maps
                    }
                    _ => {
                        return Err(at(
                            s,
                            "map merge requires map or sequence of maps as the value".into(),
                        ));
                    }
                };
                // yaml.v2: in a list, earlier maps win over later ones.
                for m in sources {
                    for (k, v) in m {
                        merged.entry(k).or_insert(v);
                    }
                }
                continue;
            }
            own.insert(key_string(&key, s)?, value);
        }
        for (k, v) in own {
            merged.insert(k, v);
        }
        Ok(Value::Object(merged))
    }
}

/// A mapping key as sigs.k8s.io/yaml makes it a JSON object key.
fn key_string(key: &Value, span: Span) -> Result<String, DecodeError> {
    Ok(match key {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) => go_format_float32_g(f),
            _ => n.to_string(),
        },
        Value::Null => {
            return Err(at(span, "unsupported map key: null".into()));
        }
        Value::Array(_) | Value::Object(_) => {
            return Err(at(span, "unsupported map key: a collection".into()));
        }
    })
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)` for the floats a key can hold.
fn go_format_float32_g(f: f64) -> String {
    #[allow(clippy::cast_possible_truncation)]
    let short = f as f32;
    let exp = if short == 0.0 {
        0
    } else {
        short.abs().log10().floor() as i32
    };
    if (-4..21).contains(&exp) {
        format!("{short}")
    } else {
        let s = format!("{short:e}");
        // Rust writes `1e21`, Go `1e+21`.
        match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e:0>2}"),
            Some((m, e)) => format!("{m}e-{:0>2}", &e[1..]),
            None => s,
        }
    }
}

fn scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    span: Span,
) -> Result<Value, DecodeError> {
    let core =
        tag.and_then(|t| (t.handle() == "tag:yaml.org,2002:").then(|| Cow::Borrowed(t.suffix())));
    match core.as_deref() {
        Some("str") => return Ok(Value::String(text.to_owned())),
        Some("binary") => {
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|e| {
                    at(
                        span,
                        format!("!!binary value contains invalid base64 data: {e}"),
                    )
                })?;
            return Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        }
        Some("int" | "float" | "bool" | "null") => return json_of(resolve_plain(text), text, span),
        _ => {}
    }
    if style != ScalarStyle::Plain {
        return Ok(Value::String(text.to_owned()));
    }
    json_of(resolve_plain(text), text, span)
}

/// What `encoding/json` writes for the resolved value, as kubectl reads it back.
fn json_of(p: Plain, text: &str, span: Span) -> Result<Value, DecodeError> {
    Ok(match p {
        Plain::Null => Value::Null,
        Plain::Bool(b) => Value::Bool(b),
        Plain::Int(i) => Value::from(i),
        // Sent exactly as `encoding/json` writes a uint64.
        Plain::Uint(u) => Value::from(u),
        Plain::Float(f) if !f.is_finite() => {
            return Err(at(span, format!("json: unsupported value: {text}")));
        }
        Plain::Float(f) if f.fract() == 0.0 && f.abs() < 1e21 => {
            #[allow(clippy::cast_possible_truncation)]
            if f.abs() < 9.2e18 {
                Value::from(f as i64)
            } else {
                // Go writes all the digits; kubectl reads them back as a float past i64.
                Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        }
        Plain::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        Plain::Str => Value::String(text.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_1_1_as_kubectl_reads_it() {
        let cases = [
            ("mode: 0644", json!({"mode": 420})),
            (
                "v: [yes, off, y, n, True]",
                json!({"v": [true, false, true, false, true]}),
            ),
            (
                "v: [1_000, 08, 0x10, 1e3, .5]",
                json!({"v": [1000, 8, 16, 1000, 0.5]}),
            ),
            (
                "v: ['0644', 2024-01-02, 1:20]",
                json!({"v": ["0644", "2024-01-02", "1:20"]}),
            ),
            (
                "{on: 1, 2: 3, 1.5: 4}",
                json!({"true": 1, "2": 3, "1.5": 4}),
            ),
            (
                "a: &x {p: 1}\nb: {<<: *x, q: 2}",
                json!({"a": {"p": 1}, "b": {"p": 1, "q": 2}}),
            ),
            ("v:", json!({"v": null})),
        ];
        for (text, want) in cases {
            assert_eq!(from_str_documents(text).unwrap(), [want], "{text}");
        }
        assert_eq!(
            from_str_documents("---\n---\na: 1\n").unwrap(),
            [Value::Null, json!({"a": 1})]
        );
        let e = from_str_documents("v: .inf").unwrap_err();
        assert_eq!((e.line, e.column), (1, 4), "{e}");
        assert!(from_str_documents("{~: 1}").is_err());
        assert!(from_str_documents("a: [1").is_err());
    }
}
