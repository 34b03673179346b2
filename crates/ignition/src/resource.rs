//! Resources: the bytes of a `source`, decoded, decompressed and verified as Ignition does.
//!
//! Only `data:` URLs (and the empty source) are fetched; a remote scheme is an explicit
//! error, never a silent skip, because a build must not depend on the network.

use std::io::Read;

use sha2::{Digest, Sha256, Sha512};

use crate::dataurl;
use crate::model::Resource;

/// Why a resource's bytes could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The `data:` URL does not decode.
    #[error("decoding data URL: {0}")]
    DataUrl(#[from] dataurl::DataUrlError),
    /// A scheme we do not fetch.
    #[error("remote sources are not supported: {0}")]
    Remote(String),
    /// gzip decompression failed.
    #[error("decompressing gzip contents: {0}")]
    Gzip(String),
    /// Unknown compression.
    #[error("invalid compression method")]
    Compression,
    /// The hash did not match.
    #[error("hash verification failed (calculated {calculated} but expected {expected})")]
    Hash {
        /// What we computed.
        calculated: String,
        /// What the config said.
        expected: String,
    },
    /// A malformed `verification.hash`.
    #[error("{0}")]
    HashSpec(&'static str),
}

/// The decompressed, verified bytes of `res`, or `None` when it has no `source`.
pub fn fetch(res: &Resource) -> Result<Option<Vec<u8>>, FetchError> {
    let Some(source) = res.source.as_deref() else {
        return Ok(None);
    };
    let raw = if source.is_empty() {
        Vec::new()
    } else if source.starts_with("data:") {
        dataurl::decode(source)?
    } else {
        let shown = source.split_once(':').map_or(source, |(scheme, _)| scheme);
        return Err(FetchError::Remote(format!(
            "{shown}:… (only data: URLs can be used)"
        )));
    };
    let data = match res.compression.as_deref() {
        None | Some("") => raw,
        Some("gzip") => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(raw.as_slice())
                .read_to_end(&mut out)
                .map_err(|e| FetchError::Gzip(e.to_string()))?;
            out
        }
        Some(_) => return Err(FetchError::Compression),
    };
    if let Some(spec) = res.verification.hash.as_deref() {
        verify(spec, &data)?;
    }
    Ok(Some(data))
}

/// Check `data` against `sha256-<hex>` / `sha512-<hex>` (hex in either case, as Ignition
/// decodes it before comparing).
pub fn verify(spec: &str, data: &[u8]) -> Result<(), FetchError> {
    let (func, expected) = spec
        .split_once('-')
        .ok_or(FetchError::HashSpec("malformed hash specifier"))?;
    let calculated = match func {
        "sha256" => Sha256::digest(data).to_vec(),
        "sha512" => Sha512::digest(data).to_vec(),
        _ => return Err(FetchError::HashSpec("unrecognized hash function")),
    };
    let expected = decode_hex(expected).map_err(|_| FetchError::HashSpec("malformed hash sum"))?;
    if calculated != expected {
        return Err(FetchError::Hash {
            calculated: hex::encode(calculated),
            expected: hex::encode(expected),
        });
    }
    Ok(())
}

/// Go's `hex.DecodeString`: either case, an even number of digits; its error text.
pub fn decode_hex(s: &str) -> Result<Vec<u8>, String> {
    if let Some(c) = s.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(format!(
            "encoding/hex: invalid byte: U+{:04X} {c:?}",
            c as u32
        ));
    }
    hex::decode(s).map_err(|_| "encoding/hex: odd length hex string".to_string())
}

/// The scheme of a source URL as Go's `url.Parse` sees it (lowercased), or `None` when
/// the URL has none.
pub fn scheme(source: &str) -> Option<String> {
    let (scheme, _) = source.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        Some(scheme.to_ascii_lowercase())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(source: Option<&str>, compression: Option<&str>, hash: Option<&str>) -> Resource {
        Resource {
            source: source.map(str::to_string),
            compression: compression.map(str::to_string),
            verification: crate::model::Verification {
                hash: hash.map(str::to_string),
            },
            ..Default::default()
        }
    }

    #[test]
    fn fetch_table() {
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut e, b"hello\n").unwrap();
            e.finish().unwrap()
        };
        let gz_url = format!("data:;base64,{}", base64_encode(&gz));
        let sha_hello = "sha256-5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
        assert_eq!(fetch(&res(None, None, None)).unwrap(), None);
        assert_eq!(fetch(&res(Some(""), None, None)).unwrap(), Some(vec![]));
        assert_eq!(
            fetch(&res(Some(&gz_url), Some("gzip"), Some(sha_hello))).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert_eq!(
            fetch(&res(Some("data:,hello%0A"), None, Some(sha_hello))).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert!(matches!(
            fetch(&res(Some("data:,hello"), None, Some(sha_hello))),
            Err(FetchError::Hash { .. })
        ));
        // Ignition decodes the expected sum, so upper-case hex matches too.
        let upper = format!("sha256-{}", sha_hello["sha256-".len()..].to_uppercase());
        assert_eq!(
            fetch(&res(Some("data:,hello%0A"), None, Some(&upper))).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert!(matches!(
            fetch(&res(Some("data:,hello"), Some("gzip"), None)),
            Err(FetchError::Gzip(_))
        ));
        assert!(matches!(
            fetch(&res(Some("https://example.com/x"), None, None)),
            Err(FetchError::Remote(_))
        ));
        assert!(matches!(
            fetch(&res(Some("data:,x"), Some("xz"), None)),
            Err(FetchError::Compression)
        ));
    }

    fn base64_encode(b: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b)
    }
}
