//! `data:` URL decoding, exactly as Ignition's decoder (vincent-petithory/dataurl) does.
//!
//! Written by hand because Ignition's grammar is stricter and different from RFC 2397
//! decoders on crates.io: `+` is a literal, raw spaces and non-ASCII are errors, base64
//! needs padding and skips only newlines, and the error texts are part of the contract
//! (`illegal base64 data at input byte 0`).

/// Why a `data:` URL could not be decoded; the message is the decoder's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DataUrlError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, DataUrlError> {
    Err(DataUrlError(msg.into()))
}

fn is_tspecial(c: u8) -> bool {
    matches!(
        c,
        b'(' | b')'
            | b'<'
            | b'>'
            | b'@'
            | b','
            | b';'
            | b':'
            | b'\\'
            | b'"'
            | b'/'
            | b'['
            | b']'
            | b'?'
            | b'='
    )
}

/// A MIME token character: ASCII, not control, not space, not a tspecial.
fn is_token(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && c != ' ' && !is_tspecial(c as u8)
}

fn is_url_char(c: char) -> bool {
    c.is_ascii()
        && !c.is_ascii_control()
        && !matches!(
            c,
            ' ' | '<' | '>' | '#' | '"' | '{' | '}' | '|' | '\\' | '^' | '[' | ']' | '`'
        )
}

fn is_base64_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '\n')
}

/// Decode a `data:` URL into its bytes (the media type and parameters are checked, then
/// dropped: Ignition ignores them).
pub fn decode(url: &str) -> Result<Vec<u8>, DataUrlError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return err("missing data prefix");
    };
    let chars: Vec<char> = rest.chars().collect();
    let mut i = 0;
    let mut base64 = false;
    let peek = |i: usize| chars.get(i).copied();

    // Media type, optional.
    match peek(i) {
        Some(';') | Some(',') => {}
        None => return err("missing comma before data"),
        Some(c) if c == 'x' || c == 'X' || is_token(c) => {
            let start = i;
            let x_token = (c == 'x' || c == 'X') && peek(i + 1) == Some('-');
            loop {
                match peek(i) {
                    Some('/') => break,
                    None => return err("missing media type slash"),
                    Some(c) if is_token(c) => i += 1,
                    Some(_) => return err("invalid character for media type"),
                }
            }
            let ty: String = chars[start..i].iter().collect();
            let known = [
                "text",
                "image",
                "audio",
                "video",
                "application",
                "message",
                "multipart",
            ]
            .iter()
            .any(|p| ty.starts_with(p));
            if !x_token && !known {
                return err("invalid media type");
            }
            i += 1; // '/'
            loop {
                match peek(i) {
                    Some(';') | Some(',') => break,
                    None => return err("incomplete media type"),
                    Some(c) if is_token(c) => i += 1,
                    Some(_) => return err("invalid character for media subtype"),
                }
            }
        }
        Some(_) => return err("invalid character after data prefix"),
    }

    // Parameters, and the base64 marker.
    while peek(i) == Some(';') {
        i += 1;
        match peek(i) {
            None | Some('=') | Some(',') => return err("unterminated parameter sequence"),
            Some(c) if is_token(c) => {}
            Some(_) => return err("invalid character for parameter attribute"),
        }
        let start = i;
        loop {
            match peek(i) {
                Some('=') => break,
                Some(',') => {
                    let attr: String = chars[start..i].iter().collect();
                    if attr != "base64" {
                        return err(format!("expected base64, got {attr}"));
                    }
                    base64 = true;
                    break;
                }
                None => return err("unterminated parameter sequence"),
                Some(c) if is_token(c) => i += 1,
                Some(_) => return err("invalid character for parameter attribute"),
            }
        }
        if base64 {
            break;
        }
        i += 1; // '='
        match peek(i) {
            Some('"') => {
                i += 1;
                let start = i;
                loop {
                    match peek(i) {
                        None => return err("unclosed quoted string"),
                        Some('\\') => match peek(i + 1) {
                            None => return err("unexpected eof"),
                            Some(c) if c.is_ascii() => i += 2,
                            Some(_) => return err("invalid escaped character"),
                        },
                        Some('"') => break,
                        Some(c) if c.is_ascii() => i += 1,
                        Some(_) => return err("invalid character for parameter value"),
                    }
                }
                let raw: String = chars[start..i].iter().collect();
                unquote_go(&raw)?;
                i += 1; // closing quote
            }
            None => return err("missing comma before data"),
            Some(c) if is_token(c) => {
                let start = i;
                loop {
                    match peek(i) {
                        Some(';') | Some(',') => break,
                        None => return err("missing comma before data"),
                        Some(c) if is_token(c) => i += 1,
                        Some(_) => return err("invalid character for parameter value"),
                    }
                }
                let raw: String = chars[start..i].iter().collect();
                unescape(&raw)?;
            }
            Some(_) => return err("invalid character for parameter value"),
        }
        match peek(i) {
            Some(';') | Some(',') => {}
            None => return err("missing comma before data"),
            Some(_) => return err("expected semicolon or comma"),
        }
    }
    match peek(i) {
        Some(',') => i += 1,
        None => return err("missing comma before data"),
        Some(_) => return err("expected semicolon or comma"),
    }

    let data = &chars[i..];
    if base64 {
        if data.iter().any(|&c| !is_base64_char(c)) {
            return err("invalid data character");
        }
        let s: String = data.iter().collect();
        base64_std_decode(s.as_bytes())
    } else {
        if data.iter().any(|&c| !is_url_char(c)) {
            return err("invalid data character");
        }
        let s: String = data.iter().collect();
        unescape(&s)
    }
}

/// RFC 2396 unescaping as the decoder does it: `%XX` only, everything else literal.
fn unescape(s: &str) -> Result<Vec<u8>, DataUrlError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !c.is_ascii() {
            return err("rfc2396: non-ASCII char detected");
        }
        if c == b'%' {
            let hex = |j: usize| -> Result<u8, DataUrlError> {
                match b.get(j) {
                    None => err("rfc2396: unexpected end of unescape sequence"),
                    // The decoder reports the '%' (0x25), not the offending byte.
                    Some(h) => (*h as char).to_digit(16).map(|d| d as u8).ok_or_else(|| {
                        DataUrlError("rfc2396: invalid char 0x25 in unescape sequence".into())
                    }),
                }
            };
            let hi = hex(i + 1)?;
            let lo = hex(i + 2)?;
            out.push(hi * 16 + lo);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

/// Check a quoted parameter value unquotes as Go's `strconv.Unquote` would accept.
fn unquote_go(raw: &str) -> Result<(), DataUrlError> {
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '\\' | '"' | '\'') => {}
                Some('x') => {
                    for _ in 0..2 {
                        if !it.next().is_some_and(|h| h.is_ascii_hexdigit()) {
                            return err("invalid syntax");
                        }
                    }
                }
                Some('0'..='7') => {
                    for _ in 0..2 {
                        if !it.next().is_some_and(|h| ('0'..='7').contains(&h)) {
                            return err("invalid syntax");
                        }
                    }
                }
                Some('u') | Some('U') => {}
                _ => return err("invalid syntax"),
            }
        } else if c == '\n' {
            return err("invalid syntax");
        }
    }
    Ok(())
}

fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Go's `base64.StdEncoding.DecodeString`: padding required, `\r`/`\n` skipped,
/// non-zero trailing bits tolerated, errors name the input byte offset.
pub(crate) fn base64_std_decode(src: &[u8]) -> Result<Vec<u8>, DataUrlError> {
    let corrupt = |at: usize| DataUrlError(format!("illegal base64 data at input byte {at}"));
    let skip_nl = |mut si: usize| {
        while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
            si += 1;
        }
        si
    };
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    loop {
        let mut quad = [0u8; 4];
        let mut j = 0;
        let mut done = false;
        while j < 4 {
            si = skip_nl(si);
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                return Err(corrupt(si - j));
            }
            let c = src[si];
            si += 1;
            if let Some(v) = b64_value(c) {
                quad[j] = v;
                j += 1;
                continue;
            }
            if c != b'=' {
                return Err(corrupt(si - 1));
            }
            // Padding: only after 2 or 3 symbols, and "==" after 2.
            match j {
                0 | 1 => return Err(corrupt(si - 1)),
                2 => {
                    si = skip_nl(si);
                    if si == src.len() {
                        return Err(corrupt(src.len()));
                    }
                    if src[si] != b'=' {
                        return Err(corrupt(si - 1));
                    }
                    si += 1;
                }
                _ => {}
            }
            si = skip_nl(si);
            if si < src.len() {
                return Err(corrupt(si));
            }
            done = true;
            break;
        }
        let v = (u32::from(quad[0]) << 18)
            | (u32::from(quad[1]) << 12)
            | (u32::from(quad[2]) << 6)
            | u32::from(quad[3]);
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..j - 1]);
        if done {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let ok: &[(&str, &[u8])] = &[
            ("data:,", b""),
            ("data:,hello%20world", b"hello world"),
            ("data:,a+b", b"a+b"),
            ("data:,%00", b"\0"),
            (
                "data:text/plain;charset=utf-8,caf%C3%A9%0A",
                "café\n".as_bytes(),
            ),
            ("data:;base64,aGk=", b"hi"),
            ("data:;base64,aGVsbG8=", b"hello"),
            ("data:text/plain;base64,aGVs\nbG8=", b"hello"),
            ("data:application/octet-stream;base64,", b""),
            ("data:text/plain;charset=\"utf-8\",x", b"x"),
            ("data:x-foo/bar,x", b"x"),
            ("data:,a/b?c=d&e", b"a/b?c=d&e"),
        ];
        for (url, want) in ok {
            assert_eq!(
                decode(url).unwrap_or_else(|e| panic!("{url}: {e}")),
                *want,
                "{url}"
            );
        }
        let bad: &[(&str, &str)] = &[
            ("hello", "missing data prefix"),
            ("data:", "missing comma before data"),
            ("data:text", "missing media type slash"),
            ("data:foo/bar,x", "invalid media type"),
            ("data:,hello world", "invalid data character"),
            ("data:,café", "invalid data character"),
            ("data:,50%", "rfc2396: unexpected end of unescape sequence"),
            (
                "data:,%zz",
                "rfc2396: invalid char 0x25 in unescape sequence",
            ),
            ("data:;base64,aGk", "illegal base64 data at input byte 0"),
            ("data:;base64,aG-k", "invalid data character"),
            ("data:;base64,aGk=x", "illegal base64 data at input byte 4"),
            ("data:;base65,aGk=", "expected base64, got base65"),
            ("data:;,x", "unterminated parameter sequence"),
            ("data:text/plain;a=b", "missing comma before data"),
            ("data:,{}", "invalid data character"),
        ];
        for (url, want) in bad {
            assert_eq!(decode(url).unwrap_err().0, *want, "{url}");
        }
    }
}
