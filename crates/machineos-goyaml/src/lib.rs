//! The exact YAML bytes Go's `sigs.k8s.io/yaml` / `github.com/ghodss/yaml` `Marshal` writes
//! for a value, as the Machine Config Operator uses it to name rendered MachineConfigs
//! (`pkg/controller/render/hash.go`: an MD5 over a salt and `yaml.Marshal(spec)`).
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

mod emitter;

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

fn push_key(path: &mut String, key: &str) {
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

/// The text yaml.v2 writes for a JSON number Go encoded: integers as they are; a float as
/// Go's JSON writes it, read back by yaml.v2 (an integer if it is one) and written with
/// `strconv.FormatFloat(f, 'g', -1, 64)`.
fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let text = go_json_float(f);
    let plain = text.replace('_', "");
    if let Ok(i) = plain.parse::<i64>() {
        return i.to_string();
    }
    if let Ok(u) = plain.parse::<u64>() {
        return u.to_string();
    }
    format_g(plain.parse::<f64>().unwrap_or(f))
}

/// Shortest decimal digits and decimal-point position of a finite, non-zero `f`:
/// `|f| = 0.d₁d₂… × 10^dp`.
fn shortest_digits(f: f64) -> (String, i32) {
    let e = format!("{:e}", f.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    (digits, exp + 1)
}

fn format_e(neg: bool, digits: &str, dp: i32) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&digits[..1]);
    if digits.len() > 1 {
        s.push('.');
        s.push_str(&digits[1..]);
    }
    let exp = dp - 1;
    s.push('e');
    s.push(if exp < 0 { '-' } else { '+' });
    s.push_str(&format!("{:02}", exp.abs()));
    s
}

fn format_f(neg: bool, digits: &str, dp: i32) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if dp <= 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat((-dp) as usize));
        s.push_str(digits);
    } else if dp as usize >= digits.len() {
        s.push_str(digits);
        s.push_str(&"0".repeat(dp as usize - digits.len()));
    } else {
        s.push_str(&digits[..dp as usize]);
        s.push('.');
        s.push_str(&digits[dp as usize..]);
    }
    s
}

/// Go's `encoding/json` text of a float64: `'f'` format between 1e-6 and 1e21, `'e'` format
/// (with `e-07` cleaned to `e-7`) outside.
fn go_json_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let (digits, dp) = shortest_digits(f);
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        let mut s = format_e(f < 0.0, &digits, dp);
        let n = s.len();
        if n >= 4
            && s.as_bytes()[n - 4] == b'e'
            && s.as_bytes()[n - 3] == b'-'
            && s.as_bytes()[n - 2] == b'0'
        {
            s.remove(n - 2);
        }
        s
    } else {
        format_f(f < 0.0, &digits, dp)
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 64)` with yaml.v2's names for infinities and NaN: the
/// shortest digits, in `%e` form when the exponent is below -4 or at least 6.
fn format_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let (digits, dp) = shortest_digits(f);
    let exp = dp - 1;
    if !(-4..6).contains(&exp) {
        format_e(f < 0.0, &digits, dp)
    } else {
        format_f(f < 0.0, &digits, dp)
    }
}

/// Whether yaml.v2's `resolve("", s)` reads the plain scalar `s` as a string.
fn resolves_to_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null",
        "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    let hint = match s.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => 0,
    };
    if hint == 0 {
        return true;
    }
    if SPECIAL.contains(&s) {
        return false;
    }
    match hint {
        b'.' => go_parse_float(s).is_none(),
        b'D' | b'S' => {
            if timestamp::parses(s) {
                return false;
            }
            let plain = s.replace('_', "");
            if go_parse_int(&plain).is_some() {
                return false;
            }
            // yaml.v2 then tries "0b"/"-0b" prefixes, which ParseInt with base 0 has
            // already accepted or refused.
            !(is_yaml_style_float(&plain) && go_parse_float(&plain).is_some())
        }
        _ => true,
    }
}

/// `strconv.ParseInt(s, 0, 64)` or `strconv.ParseUint(s, 0, 64)` succeeds (after yaml.v2
/// removed underscores).
fn go_parse_int(s: &str) -> Option<()> {
    let (neg, body) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return None;
    }
    let lower = |c: u8| c | 0x20;
    let b = body.as_bytes();
    let (base, digits) = if b[0] == b'0' {
        if b.len() >= 3 && lower(b[1]) == b'b' {
            (2, &body[2..])
        } else if b.len() >= 3 && lower(b[1]) == b'o' {
            (8, &body[2..])
        } else if b.len() >= 3 && lower(b[1]) == b'x' {
            (16, &body[2..])
        } else {
            (8, &body[1..])
        }
    } else {
        (10, body)
    };
    if digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, base).ok()?
    };
    if neg {
        // ParseInt: the magnitude must fit an i64.
        (magnitude <= 1 << 63).then_some(())
    } else {
        Some(())
    }
}

/// yaml.v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// `strconv.ParseFloat(s, 64)` succeeds: decimal or hexadecimal mantissa with an optional
/// sign and exponent, or `inf`/`infinity`/`nan` in any case; out of range is an error.
fn go_parse_float(s: &str) -> Option<f64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" || lower == "nan" {
        return Some(f64::NAN);
    }
    // Hexadecimal floats never reach here: yaml.v2 calls ParseFloat only on text starting
    // with '.' or matching its decimal float pattern.
    let b = body.as_bytes();
    let mut i = 0;
    let mut mantissa_digits = 0;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        mantissa_digits += usize::from(b[i] != b'_');
        i += 1;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            mantissa_digits += usize::from(b[i] != b'_');
            i += 1;
        }
    }
    if mantissa_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    if i != b.len() || body.contains('_') {
        // Go accepts underscores only after a base prefix.
        return None;
    }
    let f: f64 = s.parse().ok()?;
    f.is_finite().then_some(f)
}

/// yaml.v2's `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    i += 1;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 2 {
            i += 1;
        }
        let group = &b[start..i];
        let ok = match group {
            [d] => d.is_ascii_digit(),
            [a, d] => (b'0'..=b'5').contains(a) && d.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

mod reader {
    //! What yaml.v2's reader and scanner do to the JSON text Go's encoder wrote. Go escapes
    //! every control character below U+0020, `"`, `\\`, `<`, `>`, `&`, U+2028 and U+2029;
    //! everything else is raw, so three things can happen:
    //!
    //! * the reader refuses U+007F, the C1 controls but NEL, U+FFFE and U+FFFF anywhere
    //!   (`readerc.go`: "control characters are not allowed");
    //! * a raw NEL (U+0085) is a line break inside a double-quoted scalar, folded as YAML
    //!   folds quoted scalars ([`fold`]); in a key it makes a multi-line key the parser
    //!   refuses; followed by `---` or `...` and a blank it is a document marker;
    //! * lines are counted by NELs, for yaml.v2's "line N" in its messages.
    //!
    //! The reader decodes ahead of the scanner (a raw buffer of 512 bytes at a time), so a
    //! refused character is reported before a parse error earlier in the text; here it
    //! always is (exact for texts within the look-ahead, the only case the golden corpus
    //! can tell apart).

    use super::{GoYamlError, push_key};
    use serde_json::Value;

    const NEL: char = '\u{85}';

    /// Walks `value` in the order Go's encoder writes it (object keys sorted by bytes),
    /// counting line breaks in `line`: for refused characters only (`reader`), or for the
    /// scanner's and parser's errors.
    pub(super) fn check(
        value: &Value,
        path: &mut String,
        line: &mut usize,
        reader: bool,
    ) -> Result<(), GoYamlError> {
        match value {
            Value::String(s) => string(s, path, line, reader),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    check(item, path, line, reader)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let len = path.len();
                    push_key(path, key);
                    string(key, path, line, reader)?;
                    if !reader && key.contains(NEL) {
                        return Err(GoYamlError::KeyLineBreak {
                            path: path.clone(),
                            line: *line,
                        });
                    }
                    check(&map[key.as_str()], path, line, reader)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
        }
    }

    fn string(s: &str, path: &str, line: &mut usize, reader: bool) -> Result<(), GoYamlError> {
        let chars: Vec<char> = s.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let code = u32::from(c);
            if reader
                && (code == 0x7F
                    || ((0x80..=0x9F).contains(&code) && c != NEL)
                    || code == 0xFFFE
                    || code == 0xFFFF)
            {
                return Err(GoYamlError::ControlCharacters {
                    path: path.to_owned(),
                    character: c,
                });
            }
            if !reader && c == NEL {
                *line += 1;
                let next: String = chars[i + 1..].iter().take(3).collect();
                let blank_after = matches!(chars.get(i + 4).copied(), Some(' ' | NEL));
                if (next == "---" || next == "...") && blank_after {
                    return Err(GoYamlError::DocumentIndicator {
                        path: path.to_owned(),
                        line: *line + 1,
                    });
                }
            }
        }
        Ok(())
    }

    /// The value yaml.v2's scanner reads from the double-quoted JSON string `s`
    /// (`yaml_parser_scan_flow_scalar`): at a raw NEL, the spaces before it are dropped,
    /// the spaces after it skipped, and the breaks folded — one break becomes a space, each
    /// further one a `\n`.
    pub(super) fn fold(s: &str) -> std::borrow::Cow<'_, str> {
        if !s.contains(NEL) {
            return s.into();
        }
        let chars: Vec<char> = s.chars().collect();
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < chars.len() {
            // Non-blank characters.
            while i < chars.len() && chars[i] != ' ' && chars[i] != NEL {
                out.push(chars[i]);
                i += 1;
            }
            let mut whitespaces = String::new();
            let mut leading_blanks = false;
            let mut trailing_breaks = String::new();
            while i < chars.len() && (chars[i] == ' ' || chars[i] == NEL) {
                if chars[i] == ' ' {
                    if !leading_blanks {
                        whitespaces.push(' ');
                    }
                } else if !leading_blanks {
                    whitespaces.clear();
                    leading_blanks = true;
                } else {
                    trailing_breaks.push('\n');
                }
                i += 1;
            }
            if leading_blanks {
                if trailing_breaks.is_empty() {
                    out.push(' ');
                } else {
                    out.push_str(&trailing_breaks);
                }
            } else {
                out.push_str(&whitespaces);
            }
        }
        out.into()
    }
}

mod timestamp {
    //! yaml.v2's `parseTimestamp`: four digits and `-`, then one of Go layouts
    //! `2006-1-2T15:4:5.999999999Z07:00` (also with `t`), `2006-1-2 15:4:5.999999999` and
    //! `2006-1-2`, with `time.Parse`'s field rules (month and day one or two digits and in
    //! range, hour/minute/second one or two digits and in range, fraction optional (`.` or
    //! `,`, up to nine digits), zone `Z`
    //! or `±hh:mm`).

    pub(super) fn parses(s: &str) -> bool {
        let b = s.as_bytes();
        if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
            return false;
        }
        let year: u32 = s[..4].parse().unwrap_or(0);
        let mut p = Parser { b, i: 5 };
        let Some(month) = p.num(1, 2) else {
            return false;
        };
        if !p.eat(b'-') {
            return false;
        }
        let Some(day) = p.num(1, 2) else { return false };
        if !(1..=12).contains(&month) || day < 1 || day > days_in(month, year) {
            return false;
        }
        if p.done() {
            return true;
        }
        let sep = p.b[p.i];
        let zoned = match sep {
            b'T' | b't' => true,
            b' ' => false,
            _ => return false,
        };
        p.i += 1;
        let Some(hour) = p.num(1, 2) else {
            return false;
        };
        if !p.eat(b':') {
            return false;
        }
        let Some(minute) = p.num(1, 2) else {
            return false;
        };
        if !p.eat(b':') {
            return false;
        }
        let Some(second) = p.num(1, 2) else {
            return false;
        };
        if hour > 23 || minute > 59 || second > 59 {
            return false;
        }
        // An optional fraction: '.' or ',' and up to nine digits (a tenth is left over).
        if matches!(p.b.get(p.i), Some(b'.' | b','))
            && p.b.get(p.i + 1).is_some_and(u8::is_ascii_digit)
        {
            p.i += 1;
            let start = p.i;
            while p.i - start < 9 && p.b.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
        }
        if !zoned {
            return p.done();
        }
        match p.b.get(p.i) {
            Some(b'Z') => {
                p.i += 1;
                p.done()
            }
            Some(b'+' | b'-') => {
                p.i += 1;
                let (Some(h), true, Some(m)) = (p.fixed2(), p.eat(b':'), p.fixed2()) else {
                    return false;
                };
                h <= 24 && m <= 60 && p.done()
            }
            _ => false,
        }
    }

    struct Parser<'a> {
        b: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn done(&self) -> bool {
            self.i == self.b.len()
        }
        fn eat(&mut self, c: u8) -> bool {
            let ok = self.b.get(self.i) == Some(&c);
            self.i += usize::from(ok);
            ok
        }
        fn num(&mut self, min: usize, max: usize) -> Option<u32> {
            let start = self.i;
            while self.i - start < max && self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if self.i - start < min {
                return None;
            }
            std::str::from_utf8(&self.b[start..self.i])
                .ok()?
                .parse()
                .ok()
        }
        fn fixed2(&mut self) -> Option<u32> {
            self.num(2, 2)
        }
    }

    fn days_in(month: u32, year: u32) -> u32 {
        match month {
            2 if year.is_multiple_of(4)
                && (!year.is_multiple_of(100) || year.is_multiple_of(400)) =>
            {
                29
            }
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }
}

#[cfg(test)]
mod tests;
