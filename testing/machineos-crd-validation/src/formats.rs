//! The string `format`s kube-apiserver validates in custom resources.
//!
//! apiextensions-apiserver checks a fixed list of formats (the `format` field doc of
//! `JSONSchemaProps`); others are ignored. Implemented: `date-time`/`datetime` (RFC 3339,
//! via chrono; Go's strfmt additionally accepts a few lenient layouts, e.g. a `+0000`
//! offset without colon, which are rejected here), `date` (`YYYY-MM-DD`), `byte`
//! (standard base64), `uuid`, `uuid3`, `uuid4`, `uuid5`, `ipv4`, `ipv6`, `cidr`, `mac`.
//! Not implemented, so accepted unchecked: `bsonobjectid`, `uri`, `email`, `hostname`,
//! `isbn*`, `creditcard`, `ssn`, `hexcolor`, `rgbcolor`, `password` (trivially valid),
//! `duration` — none is used by the MCO's schemas.

use base64::Engine;

/// Whether `s` is valid for `format` (unknown formats are valid).
pub fn valid(format: &str, s: &str) -> bool {
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() && s.len() == 10,
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => is_uuid(format, s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        _ => true,
    }
}

fn is_uuid(format: &str, s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    for (i, c) in b.iter().enumerate() {
        let ok = if matches!(i, 8 | 13 | 18 | 23) {
            *c == b'-'
        } else {
            c.is_ascii_hexdigit()
        };
        if !ok {
            return false;
        }
    }
    let variant_ok = matches!(b[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b');
    match format {
        "uuid3" => b[14] == b'3',
        "uuid4" => b[14] == b'4' && variant_ok,
        "uuid5" => b[14] == b'5' && variant_ok,
        _ => true,
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    if ip.parse::<std::net::Ipv4Addr>().is_ok() {
        bits <= 32
    } else {
        ip.parse::<std::net::Ipv6Addr>().is_ok() && bits <= 128
    }
}

fn is_mac(s: &str) -> bool {
    let sep = if s.contains(':') {
        ':'
    } else if s.contains('-') {
        '-'
    } else {
        return false;
    };
    let parts: Vec<&str> = s.split(sep).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn formats() {
        assert!(valid("date-time", "2024-01-01T00:00:00Z"));
        assert!(valid("date-time", "2024-01-01T00:00:00.5+02:00"));
        assert!(!valid("date-time", "yesterday"));
        assert!(valid("date", "2024-02-29"));
        assert!(!valid("date", "2023-02-29"));
        assert!(valid("byte", "aGVsbG8="));
        assert!(!valid("byte", "not base64!"));
        assert!(valid("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!valid("uuid4", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(valid("cidr", "10.0.0.0/8"));
        assert!(!valid("cidr", "10.0.0.0/33"));
        assert!(valid("mac", "00:1a:2b:3c:4d:5e"));
        assert!(valid("int32", "anything"));
    }
}
