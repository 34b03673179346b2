//! `data:` URL decoding, exactly as Ignition's decoder (vincent-petithory/dataurl) does.
//!
//! Written by hand because Ignition's grammar is stricter and different from RFC 2397
//! decoders on crates.io: `+` is a literal, raw spaces and non-ASCII are errors, base64
//! needs padding and skips only newlines, and the error texts are part of the contract
//! (`illegal base64 data at input byte 0`).
//!
//! [`parse`] checks the header and the data's characters in one pass over the bytes;
//! [`DataUrl::reader`] then decodes as it is read, so a URL of any size is decoded with a
//! few kilobytes of memory (the layer writer streams file contents straight from the
//! config's text), and [`decode`] collects it for the small things that need it whole.

/// Why a `data:` URL could not be decoded; the message is the decoder's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DataUrlError(pub String);

impl machineos_diagnostics::Classify for DataUrlError {
    /// `InvalidDataUrl`.
    fn reason(&self) -> &'static str {
        "InvalidDataUrl"
    }

    /// Always permanent: the URL must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

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

fn is_url_byte(c: u8) -> bool {
    c.is_ascii()
        && !c.is_ascii_control()
        && !matches!(
            c,
            b' ' | b'<'
                | b'>'
                | b'#'
                | b'"'
                | b'{'
                | b'}'
                | b'|'
                | b'\\'
                | b'^'
                | b'['
                | b']'
                | b'`'
        )
}

fn is_base64_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'\n')
}

/// A `data:` URL whose header and characters are valid: its data, not yet decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataUrl<'a> {
    data: &'a str,
    base64: bool,
}

/// Decode a `data:` URL into its bytes (the media type and parameters are checked, then
/// dropped: Ignition ignores them).
pub fn decode(url: &str) -> Result<Vec<u8>, DataUrlError> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut parse(url)?.reader(), &mut out).map_err(into_error)?;
    Ok(out)
}

/// Check a whole `data:` URL, decoding it without keeping the bytes: what [`decode`]
/// would say, in constant memory.
pub fn check(url: &str) -> Result<u64, DataUrlError> {
    std::io::copy(&mut parse(url)?.reader(), &mut std::io::sink()).map_err(into_error)
}

/// The decoder's error behind an I/O error of a [`DataReader`].
pub fn into_error(e: std::io::Error) -> DataUrlError {
    match e.get_ref().and_then(|e| e.downcast_ref::<DataUrlError>()) {
        Some(d) => d.clone(),
        None => DataUrlError(e.to_string()),
    }
}

impl<'a> DataUrl<'a> {
    /// A reader of the decoded bytes; a decoding error is an I/O error wrapping the
    /// [`DataUrlError`] (see [`into_error`]).
    pub fn reader(&self) -> DataReader<'a> {
        DataReader {
            src: self.data.as_bytes(),
            pos: 0,
            base64: self.base64,
            pending: [0; 3],
            pending_len: 0,
            pending_pos: 0,
            done: false,
        }
    }
}

/// Parse a `data:` URL's header and check its data's characters, without decoding.
pub fn parse(url: &str) -> Result<DataUrl<'_>, DataUrlError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return err("missing data prefix");
    };
    let bytes = rest.as_bytes();
    let mut i = 0;
    let mut base64 = false;
    // Every character of the grammar is ASCII; a non-ASCII byte fails every check below,
    // as the non-ASCII character it belongs to would.
    let peek = |i: usize| {
        bytes
            .get(i)
            .map(|&b| if b.is_ascii() { b as char } else { '\u{80}' })
    };

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
            let ty = &rest[start..i];
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
                    let attr = &rest[start..i];
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
                unquote_go(&rest[start..i])?;
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
                check_unescape(&rest.as_bytes()[start..i])?;
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

    let data = &rest[i..];
    let valid = if base64 {
        data.bytes().all(is_base64_byte)
    } else {
        data.bytes().all(is_url_byte)
    };
    if !valid {
        return err("invalid data character");
    }
    Ok(DataUrl { data, base64 })
}

/// The decoded bytes of a [`DataUrl`], produced as they are read.
#[derive(Debug)]
pub struct DataReader<'a> {
    src: &'a [u8],
    pos: usize,
    base64: bool,
    /// Decoded bytes that did not fit the caller's buffer.
    pending: [u8; 3],
    pending_len: usize,
    pending_pos: usize,
    done: bool,
}

impl std::io::Read for DataReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() && self.pending_pos < self.pending_len {
            buf[n] = self.pending[self.pending_pos];
            self.pending_pos += 1;
            n += 1;
        }
        if n == buf.len() || self.done {
            return Ok(n);
        }
        let r = if self.base64 {
            self.base64_into(&mut buf[n..])
        } else {
            self.unescape_into(&mut buf[n..])
        };
        match r {
            Ok(k) => Ok(n + k),
            Err(e) => {
                self.done = true;
                Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            }
        }
    }
}

/// RFC 2396 unescaping as the decoder does it: `%XX` only, everything else literal. The
/// value of the `%XX` at `i`, or the decoder's error.
fn unescape_at(b: &[u8], i: usize) -> Result<u8, DataUrlError> {
    let hex = |j: usize| -> Result<u8, DataUrlError> {
        match b.get(j) {
            None => err("rfc2396: unexpected end of unescape sequence"),
            // The decoder reports the '%' (0x25), not the offending byte.
            Some(h) => (*h as char).to_digit(16).map(|d| d as u8).ok_or_else(|| {
                DataUrlError("rfc2396: invalid char 0x25 in unescape sequence".into())
            }),
        }
    };
    Ok(hex(i + 1)? * 16 + hex(i + 2)?)
}

/// Whether `b` unescapes (a parameter value, which is then dropped).
fn check_unescape(b: &[u8]) -> Result<(), DataUrlError> {
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii() {
            return err("rfc2396: non-ASCII char detected");
        }
        if b[i] == b'%' {
            unescape_at(b, i)?;
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

impl DataReader<'_> {
    /// Unescape into `out`; how many bytes were written (0 at the end).
    fn unescape_into(&mut self, out: &mut [u8]) -> Result<usize, DataUrlError> {
        let b = self.src;
        let mut n = 0;
        while n < out.len() && self.pos < b.len() {
            // A run of literal bytes at once.
            let run = b[self.pos..]
                .iter()
                .take(out.len() - n)
                .position(|&c| c == b'%')
                .unwrap_or_else(|| (b.len() - self.pos).min(out.len() - n));
            out[n..n + run].copy_from_slice(&b[self.pos..self.pos + run]);
            n += run;
            self.pos += run;
            if n < out.len() && self.pos < b.len() && b[self.pos] == b'%' {
                out[n] = unescape_at(b, self.pos)?;
                n += 1;
                self.pos += 3;
            }
        }
        if self.pos >= b.len() {
            self.done = true;
        }
        Ok(n)
    }

    /// Go's `base64.StdEncoding` decoding into `out` (at least one byte of room); how many
    /// bytes were written (0 at the end). Padding is required, `\r`/`\n` are skipped,
    /// non-zero trailing bits are tolerated, errors name the input byte offset.
    fn base64_into(&mut self, out: &mut [u8]) -> Result<usize, DataUrlError> {
        let src = self.src;
        let corrupt = |at: usize| DataUrlError(format!("illegal base64 data at input byte {at}"));
        let skip_nl = |mut si: usize| {
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            si
        };
        let mut n = 0;
        while out.len() - n >= 3 || (n == 0 && !self.done) {
            // Fast path: four symbols with no newline or padding among them.
            if let Some(quad) = src.get(self.pos..self.pos + 4)
                && out.len() - n >= 3
            {
                let v = [
                    B64[quad[0] as usize],
                    B64[quad[1] as usize],
                    B64[quad[2] as usize],
                    B64[quad[3] as usize],
                ];
                if v.iter().all(|&x| x < 64) {
                    let w = (u32::from(v[0]) << 18)
                        | (u32::from(v[1]) << 12)
                        | (u32::from(v[2]) << 6)
                        | u32::from(v[3]);
                    out[n] = (w >> 16) as u8;
                    out[n + 1] = (w >> 8) as u8;
                    out[n + 2] = w as u8;
                    n += 3;
                    self.pos += 4;
                    continue;
                }
            }
            // The general case, as Go's decoder reads one quantum.
            let mut quad = [0u8; 4];
            let mut j = 0;
            let mut last = false;
            let mut si = self.pos;
            while j < 4 {
                si = skip_nl(si);
                if si == src.len() {
                    if j == 0 {
                        self.done = true;
                        self.pos = si;
                        return Ok(n);
                    }
                    return Err(corrupt(si - j));
                }
                let c = src[si];
                si += 1;
                let v = B64[c as usize];
                if v < 64 {
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
                last = true;
                break;
            }
            self.pos = si;
            let w = (u32::from(quad[0]) << 18)
                | (u32::from(quad[1]) << 12)
                | (u32::from(quad[2]) << 6)
                | u32::from(quad[3]);
            let bytes = [(w >> 16) as u8, (w >> 8) as u8, w as u8];
            let k = j - 1;
            let room = (out.len() - n).min(k);
            out[n..n + room].copy_from_slice(&bytes[..room]);
            n += room;
            if room < k {
                self.pending[..k - room].copy_from_slice(&bytes[room..k]);
                self.pending_len = k - room;
                self.pending_pos = 0;
            }
            if last {
                self.done = true;
                return Ok(n);
            }
            if room < k {
                return Ok(n);
            }
        }
        Ok(n)
    }
}

/// The value of each base64 symbol, 64 for anything else.
const B64: [u8; 256] = {
    let mut t = [64u8; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'/' as usize] = 63;
    t
};

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

#[cfg(test)]
#[path = "dataurl_reference.rs"]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reads all of `r` through buffers of `size` bytes.
    fn read_in(mut r: DataReader<'_>, size: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; size];
        loop {
            match std::io::Read::read(&mut r, &mut buf) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return Err(into_error(e).0),
            }
        }
    }

    proptest! {
        /// The streaming decoders give what the whole-input ones gave — bytes or the
        /// same error — whatever the reader's buffer size.
        #[test]
        fn streaming_matches_the_reference(
            data in "[A-Za-z0-9+/=\n\r%]{0,64}",
            size in prop_oneof![Just(1usize), Just(2), Just(3), Just(4), Just(7), Just(64 << 10)],
        ) {
            let b64 = format!("data:;base64,{data}");
            let reference = reference::base64_std_decode(data.as_bytes()).map_err(|e| e.0);
            let parsed = parse(&b64);
            if let Ok(url) = parsed {
                prop_assert_eq!(read_in(url.reader(), size), reference);
            } else {
                // Only a character the grammar refuses stops it before decoding.
                prop_assert!(data.contains('\r') || data.contains('%'));
            }
            let plain: String = data.chars().filter(|c| !matches!(c, '\n' | '\r')).collect();
            let url = format!("data:,{plain}");
            let reference = reference::unescape(&plain).map_err(|e| e.0);
            prop_assert_eq!(read_in(parse(&url).unwrap().reader(), size), reference);
        }
    }

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
