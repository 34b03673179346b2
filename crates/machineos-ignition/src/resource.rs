//! Resources: the bytes of a `source`, decoded, decompressed and verified as Ignition does.
//!
//! Only `data:` URLs (and the empty source) are fetched; a remote scheme is an explicit
//! error, never a silent skip, because a build must not depend on the network.
//!
//! Contents stream: [`open`] decodes and decompresses as it is read, [`measure`] runs that
//! stream through the verification hash to learn the size — so a file of any size (a 200 MB
//! `data:` URL, a gzip bomb inflating to gigabytes) costs the layer writer constant memory.
//! Only [`fetch`], for child configs, collects the bytes, up to a cap.

use std::io::Read;

use sha2::{Digest, Sha256, Sha512};

use crate::dataurl;
use crate::model::Resource;

/// Why a resource's bytes could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The `data:` URL does not decode.
    #[error("decoding data URL: {0}")]
    DataUrl(dataurl::DataUrlError),
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
    /// More bytes than may be held in memory for this use.
    #[error("the contents are larger than {0} bytes, the most read into memory here")]
    TooLarge(u64),
}

// By hand, not `#[from]`: the message already shows the decoder's error, so it is not also
// the `source()` (the workspace's convention for causes).
impl From<dataurl::DataUrlError> for FetchError {
    fn from(e: dataurl::DataUrlError) -> Self {
        FetchError::DataUrl(e)
    }
}

impl machineos_diagnostics::Classify for FetchError {
    /// `InvalidDataUrl`, `UnsupportedSource` (a remote scheme), `InvalidGzip`,
    /// `UnsupportedCompression`, `HashMismatch`, `InvalidVerificationHash` or
    /// `ContentsTooLarge`.
    fn reason(&self) -> &'static str {
        match self {
            FetchError::DataUrl(_) => "InvalidDataUrl",
            FetchError::Remote(_) => "UnsupportedSource",
            FetchError::Gzip(_) => "InvalidGzip",
            FetchError::Compression => "UnsupportedCompression",
            FetchError::Hash { .. } => "HashMismatch",
            FetchError::HashSpec(_) => "InvalidVerificationHash",
            FetchError::TooLarge(_) => "ContentsTooLarge",
        }
    }

    /// Always permanent: resources are `data:` URLs decoded in memory, never fetched over a
    /// network or read from a disk, so the same config fails the same way again.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// The decoded and decompressed bytes of `res` as a stream (not verified: [`measure`]
/// verifies), or `None` when it has no `source`. Decoding errors surface as I/O errors; see
/// [`fetch_error`].
pub fn open(res: &Resource) -> Result<Option<Box<dyn Read + Send + '_>>, FetchError> {
    let Some(source) = res.source.as_deref() else {
        return Ok(None);
    };
    let raw: Box<dyn Read + Send + '_> = if source.is_empty() {
        Box::new(std::io::empty())
    } else if source.starts_with("data:") {
        Box::new(dataurl::parse(source)?.reader())
    } else {
        let shown = source.split_once(':').map_or(source, |(scheme, _)| scheme);
        return Err(FetchError::Remote(format!(
            "{shown}:… (only data: URLs can be used)"
        )));
    };
    Ok(Some(match res.compression.as_deref() {
        None | Some("") => raw,
        Some("gzip") => Box::new(GzipStream(flate2::read::MultiGzDecoder::new(raw))),
        Some(_) => return Err(FetchError::Compression),
    }))
}

/// A gzip decoder whose errors say they are gzip's.
struct GzipStream<R>(flate2::read::MultiGzDecoder<R>);

impl<R: Read> Read for GzipStream<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            // A data: URL error from below stays what it is.
            if e.get_ref().is_some_and(|i| i.is::<dataurl::DataUrlError>()) {
                e
            } else {
                std::io::Error::new(e.kind(), GzipError(e.to_string()))
            }
        })
    }
}

#[derive(Debug)]
struct GzipError(String);

impl std::fmt::Display for GzipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GzipError {}

/// The [`FetchError`] an I/O error of an [`open`] stream stands for.
pub fn fetch_error(e: std::io::Error) -> FetchError {
    if let Some(inner) = e.get_ref() {
        if let Some(d) = inner.downcast_ref::<dataurl::DataUrlError>() {
            return FetchError::DataUrl(d.clone());
        }
        if let Some(g) = inner.downcast_ref::<GzipError>() {
            return FetchError::Gzip(g.0.clone());
        }
    }
    FetchError::Gzip(e.to_string())
}

/// Decode, decompress and verify `res` without keeping its bytes: its size, or `None` when
/// it has no `source`.
pub fn measure(res: &Resource) -> Result<Option<u64>, FetchError> {
    let Some(mut stream) = open(res)? else {
        return Ok(None);
    };
    let size = match res.verification.hash.as_deref() {
        None => std::io::copy(&mut stream, &mut std::io::sink()).map_err(fetch_error)?,
        Some(spec) => {
            let (mut hasher, expected) = hasher_for(spec)?;
            let size = std::io::copy(&mut stream, &mut hasher).map_err(fetch_error)?;
            check_sum(hasher.finish(), expected)?;
            size
        }
    };
    Ok(Some(size))
}

/// The decompressed, verified bytes of `res`, or `None` when it has no `source`; more than
/// `max` bytes is an error.
pub fn fetch(res: &Resource, max: u64) -> Result<Option<Vec<u8>>, FetchError> {
    let Some(stream) = open(res)? else {
        return Ok(None);
    };
    let mut data = Vec::new();
    stream
        .take(max.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(fetch_error)?;
    if data.len() as u64 > max {
        return Err(FetchError::TooLarge(max));
    }
    if let Some(spec) = res.verification.hash.as_deref() {
        verify(spec, &data)?;
    }
    Ok(Some(data))
}

enum AnyHasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl std::io::Write for AnyHasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl AnyHasher {
    fn update(&mut self, data: &[u8]) {
        match self {
            AnyHasher::Sha256(h) => h.update(data),
            AnyHasher::Sha512(h) => h.update(data),
        }
    }
    fn finish(self) -> Vec<u8> {
        match self {
            AnyHasher::Sha256(h) => h.finalize().to_vec(),
            AnyHasher::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

/// The hasher a `sha256-<hex>` / `sha512-<hex>` spec names, and the expected sum.
fn hasher_for(spec: &str) -> Result<(AnyHasher, Vec<u8>), FetchError> {
    let (func, expected) = spec
        .split_once('-')
        .ok_or(FetchError::HashSpec("malformed hash specifier"))?;
    let hasher = match func {
        "sha256" => AnyHasher::Sha256(Sha256::new()),
        "sha512" => AnyHasher::Sha512(Sha512::new()),
        _ => return Err(FetchError::HashSpec("unrecognized hash function")),
    };
    let expected = decode_hex(expected).map_err(|_| FetchError::HashSpec("malformed hash sum"))?;
    Ok((hasher, expected))
}

fn check_sum(calculated: Vec<u8>, expected: Vec<u8>) -> Result<(), FetchError> {
    if calculated != expected {
        return Err(FetchError::Hash {
            calculated: hex::encode(calculated),
            expected: hex::encode(expected),
        });
    }
    Ok(())
}

/// Check `data` against `sha256-<hex>` / `sha512-<hex>` (hex in either case, as Ignition
/// decodes it before comparing).
pub fn verify(spec: &str, data: &[u8]) -> Result<(), FetchError> {
    let (mut hasher, expected) = hasher_for(spec)?;
    hasher.update(data);
    check_sum(hasher.finish(), expected)
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
            source: source.map(Into::into),
            compression: compression.map(str::to_string),
            verification: crate::model::Verification {
                hash: hash.map(str::to_string),
            },
            ..Default::default()
        }
    }

    fn fetch_all(r: &Resource) -> Result<Option<Vec<u8>>, FetchError> {
        let got = fetch(r, u64::MAX);
        // Streaming says the same: the size, or the same error.
        assert_eq!(
            measure(r),
            got.clone().map(|d| d.map(|d| d.len() as u64)),
            "{r:?}"
        );
        got
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
        assert_eq!(fetch_all(&res(None, None, None)).unwrap(), None);
        assert_eq!(fetch_all(&res(Some(""), None, None)).unwrap(), Some(vec![]));
        assert_eq!(
            fetch_all(&res(Some(&gz_url), Some("gzip"), Some(sha_hello))).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert_eq!(
            fetch_all(&res(Some("data:,hello%0A"), None, Some(sha_hello))).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert!(matches!(
            fetch_all(&res(Some("data:,hello"), None, Some(sha_hello))),
            Err(FetchError::Hash { .. })
        ));
        // Ignition decodes the expected sum, so upper-case hex matches too.
        let upper = format!("sha256-{}", sha_hello["sha256-".len()..].to_uppercase());
        assert_eq!(
            fetch_all(&res(Some("data:,hello%0A"), None, Some(&upper))).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert!(matches!(
            fetch_all(&res(Some("data:,hello"), Some("gzip"), None)),
            Err(FetchError::Gzip(_))
        ));
        assert!(matches!(
            fetch_all(&res(Some("https://example.com/x"), None, None)),
            Err(FetchError::Remote(_))
        ));
        assert!(matches!(
            fetch_all(&res(Some("data:,x"), Some("xz"), None)),
            Err(FetchError::Compression)
        ));
    }

    #[test]
    fn a_gzip_bomb_streams_in_constant_memory_and_is_capped_when_collected() {
        // 64 MiB of zeros in a few KiB of config.
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut e, &vec![0u8; 64 << 20]).unwrap();
        let url = format!("data:;base64,{}", base64_encode(&e.finish().unwrap()));
        assert!(url.len() < 200 << 10);
        let r = res(Some(&url), Some("gzip"), None);
        assert_eq!(measure(&r).unwrap(), Some(64 << 20));
        assert_eq!(fetch(&r, 1 << 20), Err(FetchError::TooLarge(1 << 20)));
        let mut n = 0u64;
        let mut s = open(&r).unwrap().unwrap();
        let mut buf = [0u8; 4096];
        loop {
            let k = s.read(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        assert_eq!(n, 64 << 20);
    }

    fn base64_encode(b: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b)
    }
}
