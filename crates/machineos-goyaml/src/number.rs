//! Numbers as they come out of the MCO's pipeline: Go's JSON text of the value, read back by
//! yaml.v2 (an integer if it is one), and written by yaml.v2 with
//! `strconv.FormatFloat(f, 'g', -1, 64)`.

/// The text yaml.v2 writes for a JSON number Go encoded: integers as they are; a float as
/// Go's JSON writes it, read back by yaml.v2 (an integer if it is one) and written with
/// `strconv.FormatFloat(f, 'g', -1, 64)`.
pub(crate) fn number(n: &serde_json::Number) -> String {
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
    // `digits` are ASCII digits (from Rust's `{:e}`), at least one for a finite value.
    let (first, rest) = digits.split_at(digits.len().min(1));
    s.push_str(if first.is_empty() { "0" } else { first });
    if !rest.is_empty() {
        s.push('.');
        s.push_str(rest);
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
pub(crate) fn go_json_float(f: f64) -> String {
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
