//! Source URLs as Ignition validates them: Go's `net/url.Parse` (what it rejects) and the
//! scheme checks of `config/v2_2/types/url.go` (spec 2) and `v2/config/v3_0/types/url.go`
//! (spec 3.0, which the converter validates its output against).

use machineos_ignition::dataurl;

/// What `url.Parse` makes of a URL that it accepts.
struct Parsed {
    scheme: String,
    raw_query: String,
}

fn unhex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Go's `shouldEscape(c, encodeHost)` for ASCII bytes.
fn host_char_needs_escape(c: u8) -> bool {
    !(c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'-' | b'_'
                | b'.'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        ))
}

/// Go's `unescape` as far as its errors go: `%` must start two hex digits; in a host,
/// escapes are for non-ASCII bytes (or `%25`) only and some ASCII bytes are not allowed.
fn check_escapes(s: &str, host: bool) -> Result<(), ()> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(h), Some(_)) = (
                    b.get(i + 1).copied().and_then(unhex),
                    b.get(i + 2).copied().and_then(unhex),
                ) else {
                    return Err(());
                };
                if host && h < 8 && &b[i..i + 3] != b"%25" {
                    return Err(());
                }
                i += 3;
            }
            c => {
                if host && c < 0x80 && host_char_needs_escape(c) {
                    return Err(());
                }
                i += 1;
            }
        }
    }
    Ok(())
}

/// `validOptionalPort`.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|c| c.is_ascii_digit()))
}

/// `parseHost`.
fn check_host(host: &str) -> Result<(), ()> {
    if let Some(rest) = host.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err(());
        };
        if !valid_optional_port(&rest[end + 1..]) {
            return Err(());
        }
        // A zone (`%25…`) may hold any escaped byte.
        let inside = &rest[..end];
        return match inside.find("%25") {
            Some(z) => check_escapes(&inside[..z], true).and(check_escapes(&inside[z..], false)),
            None => check_escapes(inside, true),
        };
    }
    if let Some(i) = host.rfind(':')
        && !valid_optional_port(&host[i..])
    {
        return Err(());
    }
    check_escapes(host, true)
}

/// `url.Parse`, reduced to whether it fails and the scheme and query it finds.
fn parse(raw: &str) -> Result<Parsed, ()> {
    let (url, frag) = raw.split_once('#').unwrap_or((raw, ""));
    if url.bytes().any(|c| c < 0x20 || c == 0x7f) {
        return Err(());
    }
    // getScheme
    let mut scheme = "";
    let mut rest = url;
    for (i, c) in url.bytes().enumerate() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.') {
            if i == 0 {
                break;
            }
            continue;
        }
        if c == b':' {
            if i == 0 {
                return Err(());
            }
            scheme = &url[..i];
            rest = &url[i + 1..];
        }
        break;
    }
    let scheme = scheme.to_ascii_lowercase();
    let (rest, raw_query) = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        (&rest[..rest.len() - 1], "")
    } else {
        rest.split_once('?').unwrap_or((rest, ""))
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // Opaque: nothing more is parsed, the fragment aside.
            check_escapes(frag, false)?;
            return Ok(Parsed {
                scheme,
                raw_query: raw_query.to_string(),
            });
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err(());
        }
    }
    let mut path = rest;
    if (!scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, p) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        let host = match authority.rfind('@') {
            Some(i) => {
                check_escapes(&authority[..i], false)?;
                &authority[i + 1..]
            }
            None => authority,
        };
        check_host(host)?;
        path = p;
    }
    check_escapes(path, false)?;
    check_escapes(frag, false)?;
    Ok(Parsed {
        scheme,
        raw_query: raw_query.to_string(),
    })
}

/// Go's `url.QueryUnescape`, or `None` when it fails.
fn query_unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let h = b.get(i + 1).copied().and_then(unhex)?;
                let l = b.get(i + 2).copied().and_then(unhex)?;
                out.push(h << 4 | l);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// `u.Query()["versionId"]`: the first value, when the key is there.
fn version_id(raw_query: &str) -> Option<String> {
    raw_query
        .split('&')
        .filter(|part| !part.is_empty() && !part.contains(';'))
        .filter_map(|part| {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            Some((query_unescape(k)?, query_unescape(v)?))
        })
        .find(|(k, _)| k == "versionId")
        .map(|(_, v)| v)
}

fn check_scheme(s: &str, parsed: &Parsed, schemes: &[&str]) -> Result<(), String> {
    match parsed.scheme.as_str() {
        sc if schemes.contains(&sc) => Ok(()),
        "s3" => match version_id(&parsed.raw_query) {
            Some(v) if v.is_empty() => Err("invalid S3 object VersionId".into()),
            _ => Ok(()),
        },
        "data" => dataurl::check(s).map(|_| ()).map_err(|e| e.0),
        _ => Err("invalid url scheme".into()),
    }
}

/// The URL as `url.Parse` then `URL.String` give it back, as far as it matters here: with
/// its scheme in lower case. `None` when `url.Parse` refuses it.
pub(crate) fn reserialize(s: &str) -> Option<String> {
    let p = parse(s).ok()?;
    Some(format!("{}{}", p.scheme, &s[p.scheme.len()..]))
}

/// The scheme `url.Parse` finds (lowercased), when it accepts the URL.
pub(crate) fn scheme(s: &str) -> Option<String> {
    parse(s).ok().map(|p| p.scheme)
}

/// Spec 2.x `validateURL`: empty is fine (an empty file); `oem://` is allowed.
pub(crate) fn check_v2(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    let parsed = parse(s).map_err(|()| "unable to parse url".to_string())?;
    check_scheme(s, &parsed, &["http", "https", "oem", "tftp"])
}

/// Spec 3.0 `validateURL`: no `oem://`, and an empty URL has no scheme.
pub(crate) fn check_v3(s: &str) -> Result<(), String> {
    let parsed = parse(s).map_err(|()| "unable to parse url".to_string())?;
    check_scheme(s, &parsed, &["http", "https", "tftp"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_and_v3() {
        type Case<'a> = (&'a str, Result<(), &'a str>, Result<(), &'a str>);
        let cases: &[Case] = &[
            ("", Ok(()), Err("invalid url scheme")),
            ("data:,hello", Ok(()), Ok(())),
            ("data:,100%25", Ok(()), Ok(())),
            (
                "data:,100%",
                Err("rfc2396: unexpected end of unescape sequence"),
                Err("rfc2396: unexpected end of unescape sequence"),
            ),
            ("https://example.com/a%20b?x=1#f", Ok(()), Ok(())),
            ("HTTP://example.com", Ok(()), Ok(())),
            ("oem:///config.ign", Ok(()), Err("invalid url scheme")),
            ("tftp://h/f", Ok(()), Ok(())),
            (
                "s3://bucket/key?versionId=",
                Err("invalid S3 object VersionId"),
                Err("invalid S3 object VersionId"),
            ),
            ("s3://bucket/key?versionId=1", Ok(()), Ok(())),
            (
                "ftp://h/f",
                Err("invalid url scheme"),
                Err("invalid url scheme"),
            ),
            (
                "/etc/foo",
                Err("invalid url scheme"),
                Err("invalid url scheme"),
            ),
            (
                ":foo",
                Err("unable to parse url"),
                Err("unable to parse url"),
            ),
            (
                "http://h/a%zz",
                Err("unable to parse url"),
                Err("unable to parse url"),
            ),
            (
                "http://h:port/",
                Err("unable to parse url"),
                Err("unable to parse url"),
            ),
            (
                "http://[::1/",
                Err("unable to parse url"),
                Err("unable to parse url"),
            ),
            (
                "http://h/\n",
                Err("unable to parse url"),
                Err("unable to parse url"),
            ),
        ];
        for (url, v2, v3) in cases {
            assert_eq!(
                check_v2(url).as_ref().map(|_| ()).map_err(|e| e.as_str()),
                *v2,
                "v2 {url:?}"
            );
            assert_eq!(
                check_v3(url).as_ref().map(|_| ()).map_err(|e| e.as_str()),
                *v3,
                "v3 {url:?}"
            );
        }
    }
}
