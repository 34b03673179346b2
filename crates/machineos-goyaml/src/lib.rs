//! YAML as Go's `sigs.k8s.io/yaml` over gopkg.in/yaml.v2 has it, both ways: the JSON its
//! `YAMLToJSON` — kubectl — reads from a manifest ([`from_str_documents`], the `decode`
//! module: YAML 1.1's `0644` and `yes`), and the exact YAML bytes its `Marshal` (with
//! `github.com/ghodss/yaml`'s) writes for a value, as the Machine Config Operator uses it to
//! name rendered MachineConfigs (`pkg/controller/render/hash.go`: an MD5 over a salt and
//! `yaml.Marshal(spec)`); the rest of this page is about the writer.
//!
//! `Marshal` encodes the value with Go's `encoding/json`, parses that JSON back with
//! gopkg.in/yaml.v2 (2.4.0, the version the MCO vendors) into maps and scalars, and writes it
//! with yaml.v2's encoder. So the bytes depend on three things this crate reproduces:
//!
//! * **the data yaml.v2 sees** ([`to_yaml`] takes it as a [`serde_json::Value`]: which keys
//!   exist is the caller's business — Go's struct tags decide it, not this crate): integers
//!   stay integers, floats go through Go's JSON float text and are read back as yaml.v2 does;
//!   raw characters yaml.v2's reader refuses in the JSON text (U+007F, the C1 controls but
//!   NEL, U+FFFE, U+FFFF — Go escapes the other controls) fail with yaml.v2's own message,
//!   `yaml: control characters are not allowed` ([`GoYamlError::ControlCharacters`]);
//! * **the encoder's choices** (`encode.go`): map keys in yaml.v2's "natural" order (runs of
//!   digits compare as numbers, letters before other characters), strings containing `\n`
//!   asked for as literal blocks, strings that would read back as another type (`"true"`,
//!   `"y"`, `"1.5"`, `"0755"`, `"2024-01-02"`, `"1:20"`, `""`) double-quoted, the rest plain;
//! * **the emitter** (`emitterc.go`, in the `emitter` module): block collections, `{}`/`[]` for empty
//!   ones, sequences in mappings not indented, style downgrades (plain → single-quoted →
//!   double-quoted) from its scalar analysis, folding of long plain and quoted scalars at
//!   spaces past column 80, escapes (`\x7F`, `\u2028`, `\U0001F600` — characters outside
//!   the Basic Multilingual Plane are not "printable" to it).
//!
//! Why by hand: no Rust YAML library reproduces another implementation's output byte for
//! byte, and the MCO's names are an MD5 of exactly these bytes — one space of difference is
//! another name. serde-saphyr, serde_yaml and yaml-rust2 each have their own quoting,
//! folding (none folds at 80 columns) and key order. The port is small (the subset JSON data
//! reaches: no tags, anchors, flow styles or folded blocks) and is checked against the Go
//! libraries themselves: `tests/golden/` holds outputs of a Go program built from the
//! MCO's vendored yaml.v2 and ghodss/yaml (see `tests/golden/README.md`).

mod decode;
mod emitter;
mod number;
mod reader;
mod resolve;
mod timestamp;

pub use decode::{DecodeError, from_str_documents};
use number::number;
use resolve::{is_base60_float, resolves_to_string};

use serde_json::Value;

/// Why a value has no YAML form in yaml.v2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoYamlError {
    /// A string holds a character yaml.v2's reader refuses in its input (Go's JSON writes it
    /// raw): the MCO fails to name such a rendered config.
    #[error(
        "error converting JSON to YAML: yaml: control characters are not allowed (U+{:04X} in {path})",
        u32::from(*character)
    )]
    ControlCharacters {
        /// JSON path of the string (`$.config.systemd.units[0].contents`), or of the key.
        path: String,
        /// The character.
        character: char,
    },
    /// A map key holds a raw NEL (U+0085), a line break inside the key yaml.v2 reads back:
    /// a key must be on one line, so the parser stops (yaml.v2's message and line).
    #[error(
        "error converting JSON to YAML: yaml: line {line}: did not find expected ',' or '}}' (key at {path})"
    )]
    KeyLineBreak {
        /// JSON path of the key.
        path: String,
        /// The line yaml.v2 reports (the line breaks before the `:` after the key).
        line: usize,
    },
    /// A string holds a raw NEL directly followed by `---` or `...` and a blank: a document
    /// marker at the start of a line inside a quoted scalar (yaml.v2's message and line).
    #[error(
        "error converting JSON to YAML: yaml: line {line}: found unexpected document indicator (in {path})"
    )]
    DocumentIndicator {
        /// JSON path of the string.
        path: String,
        /// The line yaml.v2 reports.
        line: usize,
    },
}

impl machineos_diagnostics::Classify for GoYamlError {
    /// `ControlCharacters`, `KeyLineBreak` or `DocumentIndicator`.
    fn reason(&self) -> &'static str {
        match self {
            GoYamlError::ControlCharacters { .. } => "ControlCharacters",
            GoYamlError::KeyLineBreak { .. } => "KeyLineBreak",
            GoYamlError::DocumentIndicator { .. } => "DocumentIndicator",
        }
    }

    /// Permanent: the input must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// A node of the document the encoder builds: scalars carry the style the encoder asks for.
#[derive(Debug)]
enum Node {
    Scalar(String, emitter::Style),
    Sequence(Vec<Node>),
    Mapping(Vec<(Node, Node)>),
}

/// The YAML `sigs.k8s.io/yaml.Marshal` (over yaml.v2 2.4.0) writes for a value whose Go
/// JSON encoding is `value`.
pub fn to_yaml(value: &Value) -> Result<String, GoYamlError> {
    let mut path = String::from("$");
    reader::check(value, &mut path, &mut 0, true)?;
    reader::check(value, &mut path, &mut 0, false)?;
    let node = node(value);
    let bytes = emitter::Emitter::new().document(&node);
    // The emitter copies whole characters of valid UTF-8 and writes ASCII around them.
    Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
}

/// The document yaml.v2's encoder builds from the data its decoder read (strings with a raw
/// NEL folded as its scanner folds them; [`reader::check`] has refused what it cannot read).
fn node(value: &Value) -> Node {
    match value {
        Value::Null => plain("null"),
        Value::Bool(b) => plain(if *b { "true" } else { "false" }),
        Value::Number(n) => plain(&number(n)),
        Value::String(s) => string(&reader::fold(s)),
        Value::Array(items) => Node::Sequence(items.iter().map(node).collect()),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| key_order(a, b));
            Node::Mapping(
                keys.into_iter()
                    .map(|key| (string(&reader::fold(key)), node(&map[key.as_str()])))
                    .collect(),
            )
        }
    }
}

pub(crate) fn push_key(path: &mut String, key: &str) {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str(&format!("[{}]", Value::String(key.to_owned())));
    }
}

fn plain(s: &str) -> Node {
    Node::Scalar(s.to_owned(), emitter::Style::Plain)
}

/// `encoder.stringv` for an untagged string.
fn string(s: &str) -> Node {
    let can_use_plain = resolves_to_string(s) && !is_base60_float(s);
    let style = if s.contains('\n') {
        emitter::Style::Literal
    } else if can_use_plain {
        emitter::Style::Plain
    } else {
        emitter::Style::DoubleQuoted
    };
    Node::Scalar(s.to_owned(), style)
}

/// yaml.v2's `keyList.Less` for two string keys: letters compare as characters and sort
/// before non-letters; runs of digits compare by value, then by length.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let less = |a: &[char], b: &[char]| -> bool {
        let mut i = 0;
        while i < a.len() && i < b.len() {
            if a[i] == b[i] {
                i += 1;
                continue;
            }
            let al = a[i].is_alphabetic();
            let bl = b[i].is_alphabetic();
            if al && bl {
                return a[i] < b[i];
            }
            if al || bl {
                return bl;
            }
            let (mut an, mut bn): (i64, i64) = (0, 0);
            if a[i] == '0' || b[i] == '0' {
                let mut j = i;
                while j > 0 && a[j - 1].is_ascii_digit() {
                    j -= 1;
                    if a[j] != '0' {
                        an = 1;
                        bn = 1;
                        break;
                    }
                }
            }
            let mut ai = i;
            while ai < a.len() && a[ai].is_ascii_digit() {
                an = an
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(a[ai] as u8 - b'0'));
                ai += 1;
            }
            let mut bi = i;
            while bi < b.len() && b[bi].is_ascii_digit() {
                bn = bn
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(b[bi] as u8 - b'0'));
                bi += 1;
            }
            if an != bn {
                return an < bn;
            }
            if ai != bi {
                return ai < bi;
            }
            return a[i] < b[i];
        }
        a.len() < b.len()
    };
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if less(&a, &b) {
        Ordering::Less
    } else if less(&b, &a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

#[cfg(test)]
mod tests;
