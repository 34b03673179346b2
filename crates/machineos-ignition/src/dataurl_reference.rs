//! The `data:` decoders as they were before they streamed (at 023ed85), kept as the oracle
//! the streaming ones are property-tested against.

use super::{DataUrlError, err};

/// RFC 2396 unescaping as the decoder does it: `%XX` only, everything else literal.
pub(super) fn unescape(s: &str) -> Result<Vec<u8>, DataUrlError> {
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
pub(super) fn base64_std_decode(src: &[u8]) -> Result<Vec<u8>, DataUrlError> {
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
