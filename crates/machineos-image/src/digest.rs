//! Content digests (`algo:hex`), validated once so that every blob, manifest and config is
//! addressed by a value that is known to be well formed, plus hashing adapters for streams.
//!
//! Only the two algorithms the OCI image spec registers are accepted: `sha256` (64 lowercase hex
//! digits) and `sha512` (128 lowercase hex digits).

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use machineos_diagnostics::{Classify, Retry};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256, Sha512};

/// Why a string is not a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// No `:` between algorithm and encoded hash.
    #[error("parsing digest {0:?}: missing ':' (expected <algorithm>:<hex>)")]
    MissingColon(String),
    /// The algorithm is neither `sha256` nor `sha512`.
    #[error(
        "parsing digest {input:?}: unsupported algorithm {algorithm:?} (expected sha256 or sha512)"
    )]
    UnsupportedAlgorithm {
        /// The whole input.
        input: String,
        /// The algorithm part.
        algorithm: String,
    },
    /// The hex part has the wrong length for its algorithm.
    #[error("parsing digest {input:?}: {algorithm} needs {expected} hex digits, found {found}")]
    BadLength {
        /// The whole input.
        input: String,
        /// The algorithm part.
        algorithm: &'static str,
        /// The required number of hex digits.
        expected: usize,
        /// The number of characters found.
        found: usize,
    },
    /// The hex part has a character other than `0-9a-f`.
    #[error("parsing digest {0:?}: the encoded part must be lowercase hex digits")]
    NotLowercaseHex(String),
}

impl Classify for DigestError {
    /// Always `InvalidDigest`: the input must change.
    fn reason(&self) -> &'static str {
        "InvalidDigest"
    }

    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// The hash algorithms a [`Digest`] may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// SHA-256, 64 hex digits.
    Sha256,
    /// SHA-512, 128 hex digits.
    Sha512,
}

impl Algorithm {
    /// The name used in digests, `sha256` or `sha512`.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// How many hex digits an encoded hash of this algorithm has.
    pub fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha512 => 128,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated content digest such as `sha256:<64 lowercase hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// Parse and validate `algo:hex`.
    pub fn parse(s: &str) -> Result<Digest, DigestError> {
        let Some((algo, hex)) = s.split_once(':') else {
            return Err(DigestError::MissingColon(s.to_owned()));
        };
        let algorithm = match algo {
            "sha256" => Algorithm::Sha256,
            "sha512" => Algorithm::Sha512,
            _ => {
                return Err(DigestError::UnsupportedAlgorithm {
                    input: s.to_owned(),
                    algorithm: algo.to_owned(),
                });
            }
        };
        if hex.len() != algorithm.hex_len() {
            return Err(DigestError::BadLength {
                input: s.to_owned(),
                algorithm: algorithm.as_str(),
                expected: algorithm.hex_len(),
                found: hex.chars().count(),
            });
        }
        if !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(DigestError::NotLowercaseHex(s.to_owned()));
        }
        Ok(Digest(s.to_owned()))
    }

    /// The SHA-256 digest of `data`.
    pub fn sha256(data: &[u8]) -> Digest {
        Digest::from_sha256_bytes(Sha256::digest(data).into())
    }

    /// A digest from a raw SHA-256 hash.
    pub fn from_sha256_bytes(bytes: [u8; 32]) -> Digest {
        Digest(format!("sha256:{}", hex::encode(bytes)))
    }

    /// The digest of `data` computed with this digest's algorithm (to verify content).
    pub fn same_algorithm_of(&self, data: &[u8]) -> Digest {
        match self.algorithm() {
            Algorithm::Sha256 => Digest::sha256(data),
            Algorithm::Sha512 => Digest(format!("sha512:{}", hex::encode(Sha512::digest(data)))),
        }
    }

    /// The whole digest, `algo:hex`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The algorithm part.
    pub fn algorithm(&self) -> Algorithm {
        if self.0.starts_with("sha512:") {
            Algorithm::Sha512
        } else {
            Algorithm::Sha256
        }
    }

    /// The hex-encoded hash after the `:`.
    pub fn hex(&self) -> &str {
        let algo_len = self.algorithm().as_str().len();
        &self.0[algo_len + 1..]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::parse(s)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A running hash of one [`Algorithm`].
#[derive(Debug, Clone)]
pub enum Hasher {
    /// SHA-256.
    Sha256(Sha256),
    /// SHA-512.
    Sha512(Sha512),
}

impl Hasher {
    /// A fresh hash of `algorithm`.
    pub fn new(algorithm: Algorithm) -> Hasher {
        match algorithm {
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            Algorithm::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }

    /// Hash `data` too.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// The digest of everything hashed.
    pub fn finish(self) -> Digest {
        match self {
            Hasher::Sha256(h) => Digest::from_sha256_bytes(h.finalize().into()),
            Hasher::Sha512(h) => Digest(format!("sha512:{}", hex::encode(h.finalize()))),
        }
    }
}

/// An [`io::Write`] adapter that hashes (SHA-256 unless told otherwise) and counts every
/// byte written through it.
#[derive(Debug)]
pub struct DigestWriter<W> {
    inner: W,
    hasher: Hasher,
    size: u64,
}

/// The SHA-256 [`DigestWriter`] ([`DigestWriter::new`] hashes SHA-256).
pub type Sha256Writer<W> = DigestWriter<W>;

impl<W: Write> DigestWriter<W> {
    /// Wrap `inner`, hashing SHA-256.
    pub fn new(inner: W) -> Self {
        Self::with_algorithm(inner, Algorithm::Sha256)
    }

    /// Wrap `inner`, hashing with `algorithm`.
    pub fn with_algorithm(inner: W, algorithm: Algorithm) -> Self {
        DigestWriter {
            inner,
            hasher: Hasher::new(algorithm),
            size: 0,
        }
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// A shared reference to the wrapped writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Stop hashing: the inner writer, the digest of everything written and its size. The
    /// inner writer is not flushed; flush it if it buffers.
    pub fn finish(self) -> (W, Digest, u64) {
        (self.inner, self.hasher.finish(), self.size)
    }
}

impl<W: Write> Write for DigestWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// An [`io::Read`] adapter that hashes (SHA-256 unless told otherwise) and counts every
/// byte read through it.
#[derive(Debug)]
pub struct DigestReader<R> {
    inner: R,
    hasher: Hasher,
    size: u64,
}

/// The SHA-256 [`DigestReader`] ([`DigestReader::new`] hashes SHA-256).
pub type Sha256Reader<R> = DigestReader<R>;

impl<R: Read> DigestReader<R> {
    /// Wrap `inner`, hashing SHA-256.
    pub fn new(inner: R) -> Self {
        Self::with_algorithm(inner, Algorithm::Sha256)
    }

    /// Wrap `inner`, hashing with `algorithm`.
    pub fn with_algorithm(inner: R, algorithm: Algorithm) -> Self {
        DigestReader {
            inner,
            hasher: Hasher::new(algorithm),
            size: 0,
        }
    }

    /// Bytes read so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The digest and size of everything read so far.
    pub fn finish(self) -> (Digest, u64) {
        (self.hasher.finish(), self.size)
    }

    /// Give back the wrapped reader, discarding the hash state.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for DigestReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
}

/// An [`io::Read`] adapter that checks what it passes on against a digest (with that
/// digest's algorithm) and, when given, a size: reading past the size, or reaching the end
/// with other bytes than the digest names, is an `InvalidData` error, so a reader that
/// drains the stream has every byte it was given verified.
#[derive(Debug)]
pub struct VerifyingReader<R> {
    inner: R,
    hasher: Option<Hasher>,
    expected: Digest,
    size: Option<u64>,
    read: u64,
}

impl<R: Read> VerifyingReader<R> {
    /// Check `inner` against `expected` and, if given, `size`.
    pub fn new(inner: R, expected: Digest, size: Option<u64>) -> Self {
        VerifyingReader {
            inner,
            hasher: Some(Hasher::new(expected.algorithm())),
            expected,
            size,
            read: 0,
        }
    }
}

impl<R: Read> Read for VerifyingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(hasher) = self.hasher.as_mut() else {
            return Ok(0);
        };
        let n = self.inner.read(buf)?;
        hasher.update(&buf[..n]);
        self.read += n as u64;
        let bad = |what: String| Err(io::Error::new(io::ErrorKind::InvalidData, what));
        if let Some(size) = self.size
            && self.read > size
        {
            return bad(format!(
                "blob {} is longer than the {size} bytes its descriptor says",
                self.expected
            ));
        }
        if n == 0 && !buf.is_empty() {
            if let Some(size) = self.size
                && self.read != size
            {
                return bad(format!(
                    "blob {} has {} bytes, its descriptor says {size}",
                    self.expected, self.read
                ));
            }
            let got = self.hasher.take().map(Hasher::finish);
            if got.as_ref() != Some(&self.expected) {
                return bad(format!(
                    "blob {} has digest {}",
                    self.expected,
                    got.map_or_else(String::new, |d| d.to_string())
                ));
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn verifying_reader_table() {
        let data = b"some blob bytes";
        let d256 = Digest::sha256(data);
        let d512 = Digest::parse(&format!("sha512:{}", "0".repeat(128)))
            .unwrap()
            .same_algorithm_of(data);
        let read = |d: &Digest, size: Option<u64>, bytes: &[u8]| {
            let mut out = Vec::new();
            VerifyingReader::new(bytes, d.clone(), size)
                .read_to_end(&mut out)
                .map(|_| out)
                .map_err(|e| e.to_string())
        };
        assert_eq!(read(&d256, Some(15), data).unwrap(), data);
        assert_eq!(read(&d512, None, data).unwrap(), data);
        let e = read(&d512, None, b"tampered blob!!").unwrap_err();
        assert!(e.contains("has digest sha512:"), "{e}");
        let e = read(&d256, Some(14), data).unwrap_err();
        assert!(e.contains("longer than the 14 bytes"), "{e}");
        let e = read(&d256, Some(16), data).unwrap_err();
        assert!(e.contains("has 15 bytes, its descriptor says 16"), "{e}");
        // Hashers of both algorithms agree with the one-shot functions.
        let mut h = Hasher::new(Algorithm::Sha512);
        h.update(&data[..4]);
        h.update(&data[4..]);
        assert_eq!(h.finish(), d512);
    }

    #[test]
    fn parse_table() {
        let h64 = "a".repeat(64);
        let h128 = "0".repeat(128);
        let length = |input: &str, algorithm, expected, found| DigestError::BadLength {
            input: input.to_owned(),
            algorithm,
            expected,
            found,
        };
        let upper = format!("sha256:{}", "A".repeat(64));
        let not_hex = format!("sha256:{}", "g".repeat(64));
        let short = format!("sha256:{}", &h64[..63]);
        let sha512_short = format!("sha512:{h64}");
        let md5 = format!("md5:{h64}");
        let spaced = format!("sha256:{h64} ");
        let cases: Vec<(String, Result<(), DigestError>)> = vec![
            (EMPTY.to_owned(), Ok(())),
            (format!("sha512:{h128}"), Ok(())),
            (upper.clone(), Err(DigestError::NotLowercaseHex(upper))),
            (not_hex.clone(), Err(DigestError::NotLowercaseHex(not_hex))),
            (short.clone(), Err(length(&short, "sha256", 64, 63))),
            (
                sha512_short.clone(),
                Err(length(&sha512_short, "sha512", 128, 64)),
            ),
            (
                md5.clone(),
                Err(DigestError::UnsupportedAlgorithm {
                    input: md5,
                    algorithm: "md5".to_owned(),
                }),
            ),
            (h64.clone(), Err(DigestError::MissingColon(h64.clone()))),
            (
                "sha256:".to_owned(),
                Err(length("sha256:", "sha256", 64, 0)),
            ),
            ("".to_owned(), Err(DigestError::MissingColon(String::new()))),
            (spaced.clone(), Err(length(&spaced, "sha256", 64, 65))),
        ];
        for (input, want) in cases {
            let got = Digest::parse(&input);
            match want {
                Ok(()) => assert_eq!(got.map(|d| d.to_string()), Ok(input.clone())),
                Err(e) => assert_eq!(got, Err(e), "{input}"),
            }
        }
    }

    #[test]
    fn parts() {
        let d = Digest::parse(EMPTY).unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha256);
        assert_eq!(d.hex(), &EMPTY[7..]);
        assert_eq!(d.as_str(), EMPTY);
        assert_eq!(d.to_string(), EMPTY);
        let s512 = format!("sha512:{}", "0".repeat(128));
        let d = Digest::parse(&s512).unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha512);
        assert_eq!(d.hex(), "0".repeat(128));
    }

    #[test]
    fn hashing() {
        assert_eq!(Digest::sha256(b"").as_str(), EMPTY);
        assert_eq!(
            Digest::parse(EMPTY).unwrap().same_algorithm_of(b""),
            Digest::sha256(b"")
        );
        let d512 = Digest::parse(&format!("sha512:{}", "0".repeat(128))).unwrap();
        assert!(
            d512.same_algorithm_of(b"")
                .as_str()
                .starts_with("sha512:cf83e1357eefb8bd")
        );
    }

    #[test]
    fn serde_validates() {
        let d: Digest = serde_json::from_str(&format!("\"{EMPTY}\"")).unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{EMPTY}\""));
        let err = serde_json::from_str::<Digest>("\"sha256:abc\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("sha256 needs 64 hex digits, found 3"), "{err}");
    }

    #[test]
    fn errors_name_input() {
        let err = Digest::parse("sha256:abc").unwrap_err().to_string();
        assert!(err.contains("sha256:abc"), "{err}");
        assert!(err.contains("64"), "{err}");
    }

    #[test]
    fn writer_and_reader() {
        let mut w = Sha256Writer::new(Vec::new());
        w.write_all(b"hello ").unwrap();
        w.write_all(b"world").unwrap();
        let (inner, digest, size) = w.finish();
        assert_eq!(inner, b"hello world");
        assert_eq!(digest, Digest::sha256(b"hello world"));
        assert_eq!(size, 11);

        let mut r = Sha256Reader::new(&b"hello world"[..]);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(r.size(), 11);
        let (digest, size) = r.finish();
        assert_eq!(digest, Digest::sha256(b"hello world"));
        assert_eq!(size, 11);
    }
}
