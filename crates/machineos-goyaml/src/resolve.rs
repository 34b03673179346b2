//! yaml.v2's `resolve` for a plain scalar (`resolve.go`), as its encoder asks it whether a
//! string could be written unquoted: the special words (`y`, `on`, `null`, `.inf`, …), Go's
//! integer and float syntaxes, timestamps, and `isBase60Float`.

use crate::timestamp;

/// Whether yaml.v2's `resolve("", s)` reads the plain scalar `s` as a string.
pub(crate) fn resolves_to_string(s: &str) -> bool {
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

/// What yaml.v2's `resolve` makes of a plain scalar in an untyped value (a timestamp
/// stays a string there: see [`crate::decode`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str,
}

/// yaml.v2's `resolve("", s)` for the plain scalar `s`, into the Go value an untyped decode
/// gets.
pub(crate) fn resolve_plain(s: &str) -> Plain {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Plain::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Plain::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Plain::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match s.as_bytes().first() {
        Some(b'.') => go_parse_float(s).map_or(Plain::Str, Plain::Float),
        Some(b'+' | b'-' | b'0'..=b'9') => {
            if timestamp::parses(s) {
                return Plain::Str;
            }
            let plain = s.replace('_', "");
            match go_parse_int(&plain) {
                Some((false, m)) => {
                    return i64::try_from(m).map_or(Plain::Uint(m), Plain::Int);
                }
                Some((true, m)) if m <= 1 << 63 => {
                    #[allow(clippy::cast_possible_wrap)]
                    return Plain::Int((m as i64).wrapping_neg());
                }
                _ => {}
            }
            if is_yaml_style_float(&plain)
                && let Some(f) = go_parse_float(&plain)
            {
                return Plain::Float(f);
            }
            Plain::Str
        }
        _ => Plain::Str,
    }
}

/// `strconv.ParseInt(s, 0, 64)` or `strconv.ParseUint(s, 0, 64)` succeeds (after yaml.v2
/// removed underscores): the sign and the magnitude.
fn go_parse_int(s: &str) -> Option<(bool, u64)> {
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
        (magnitude <= 1 << 63).then_some((true, magnitude))
    } else {
        Some((false, magnitude))
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
pub(crate) fn is_base60_float(s: &str) -> bool {
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
