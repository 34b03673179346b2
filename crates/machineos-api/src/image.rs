//! Image references by digest, parsed once at the edge so the rest of machineos never handles a
//! "pullspec that should contain a digest" as a bare string.
//!
//! The wire form is the MCO's `ImageDigestFormat`: `host[:port][/namespace]/name@sha256:<64 hex>`.
//! Parsing here is deliberately a little more lenient than the MCO's CEL rules on the
//! repository part (any non-empty name without whitespace or `@`), and exact on the digest.

use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest pullspec the MCO's API accepts.
pub const MAX_PULLSPEC_LEN: usize = 447;

/// Why a string is not a digest or a digested image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// No `@` separating the repository from the digest.
    #[error("image reference {0:?} has no digest (expected repo@sha256:<64 hex>)")]
    MissingDigest(String),
    /// Nothing before the `@`.
    #[error("image reference {0:?} has an empty repository")]
    EmptyRepository(String),
    /// Whitespace or a second `@` in the repository.
    #[error("image reference {0:?} has an invalid repository")]
    InvalidRepository(String),
    /// The digest is not `sha256:` followed by 64 lowercase hex digits.
    #[error("digest {0:?} is not sha256:<64 lowercase hex digits>")]
    InvalidDigest(String),
    /// Longer than [`MAX_PULLSPEC_LEN`].
    #[error("image reference is {0} characters long, more than the {MAX_PULLSPEC_LEN} allowed")]
    TooLong(usize),
}

/// A content digest: machineos has one digest type, the image crate's. The MCO's API
/// takes only `sha256:` followed by 64 lowercase hex digits ([`parse_sha256`]).
pub use machineos_image::Digest;

/// A digest as the MCO's API takes it: `sha256:` and 64 lowercase hex digits.
pub fn parse_sha256(s: &str) -> Result<Digest, ImageRefError> {
    match Digest::parse(s) {
        Ok(d) if d.algorithm() == machineos_image::digest::Algorithm::Sha256 => Ok(d),
        _ => Err(ImageRefError::InvalidDigest(s.to_owned())),
    }
}

/// The schema of a [`Digest`] field in the API (for `#[schemars(schema_with = …)]`).
pub fn digest_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^sha256:[a-f0-9]{64}$"
    })
}

/// An image by digest: `repository@sha256:<64 hex>`, as nodes must pull it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DigestedImage {
    repository: String,
    digest: Digest,
}

impl DigestedImage {
    /// Join a repository (`host[:port]/path/name`) and a digest.
    pub fn new(repository: &str, digest: Digest) -> Result<Self, ImageRefError> {
        format!("{repository}@{digest}").parse()
    }

    /// The part before `@`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The digest after `@`.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }
}

impl FromStr for DigestedImage {
    type Err = ImageRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() > MAX_PULLSPEC_LEN {
            return Err(ImageRefError::TooLong(s.len()));
        }
        let (repository, digest) = s
            .rsplit_once('@')
            .ok_or_else(|| ImageRefError::MissingDigest(s.to_owned()))?;
        if repository.is_empty() {
            return Err(ImageRefError::EmptyRepository(s.to_owned()));
        }
        if repository.contains('@') || repository.chars().any(char::is_whitespace) {
            return Err(ImageRefError::InvalidRepository(s.to_owned()));
        }
        Ok(DigestedImage {
            repository: repository.to_owned(),
            digest: parse_sha256(digest)?,
        })
    }
}

impl fmt::Display for DigestedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.repository, self.digest)
    }
}

impl Serialize for DigestedImage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DigestedImage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// CEL rule of openshift/api's digested image fields: the reference ends in `@sha256:<64 hex>`.
pub(crate) const DIGEST_SUFFIX_RULE: &str =
    "(self.split('@').size() == 2 && self.split('@')[1].matches('^sha256:[a-f0-9]{64}$'))";

/// Message of [`DIGEST_SUFFIX_RULE`].
pub(crate) const DIGEST_SUFFIX_MESSAGE: &str = "the OCI Image reference must end with a valid '@sha256:<digest>' suffix, where '<digest>' is 64 characters long";

impl JsonSchema for DigestedImage {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DigestedImage".into()
    }

    /// The MCO's `ImageDigestFormat`: length bounds, its digest rule and its
    /// `host[:port][/namespace]/name` rule.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_PULLSPEC_LEN,
            "x-kubernetes-validations": [{
                "rule": DIGEST_SUFFIX_RULE,
                "message": DIGEST_SUFFIX_MESSAGE
            }, {
                "rule": r"(self.split('@')[0].matches('^([a-zA-Z0-9-]+\\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?/([a-zA-Z0-9-_]{0,61}/)?[a-zA-Z0-9-_.]*?$'))",
                "message": "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme"
            }]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// Input, and either (repository, digest hex) or a fragment of the error.
    type Case<'a> = (&'a str, Result<(&'a str, &'a str), &'a str>);

    #[test]
    fn parses_digested_references() {
        let cases: &[Case] = &[
            (
                "quay.io/org/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Ok(("quay.io/org/os", HEX)),
            ),
            (
                "registry.local:5000/os:tag@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Ok(("registry.local:5000/os:tag", HEX)),
            ),
            ("quay.io/org/os:latest", Err("has no digest")),
            (
                "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Err("empty repository"),
            ),
            ("quay.io/os@sha512:abcd", Err("is not sha256")),
            (
                "quay.io/os@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                Err("is not sha256"),
            ),
            ("quay.io/os@sha256:0123", Err("is not sha256")),
            (
                "quay io/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Err("invalid repository"),
            ),
        ];
        for (input, want) in cases {
            let got = input.parse::<DigestedImage>();
            match (want, got) {
                (Ok((repo, hex)), Ok(img)) => {
                    assert_eq!(img.repository(), *repo, "{input}");
                    assert_eq!(img.digest().hex(), *hex, "{input}");
                    assert_eq!(img.to_string(), *input, "{input}");
                }
                (Err(fragment), Err(e)) => {
                    assert!(e.to_string().contains(fragment), "{input}: {e}");
                }
                (want, got) => panic!("{input}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn rejects_overlong_references() {
        let long = format!("{}@sha256:{HEX}", "r".repeat(MAX_PULLSPEC_LEN));
        assert_eq!(
            long.parse::<DigestedImage>(),
            Err(ImageRefError::TooLong(long.len()))
        );
    }

    #[test]
    fn serde_goes_through_parsing() {
        let ok: DigestedImage =
            serde_json::from_value(serde_json::json!(format!("q.io/a@sha256:{HEX}"))).unwrap();
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            serde_json::json!(format!("q.io/a@sha256:{HEX}"))
        );
        let err = serde_json::from_value::<DigestedImage>(serde_json::json!("q.io/a:latest"))
            .unwrap_err();
        assert!(err.to_string().contains("has no digest"), "{err}");
    }

    #[test]
    fn api_digests_are_sha256_only() {
        let d = Digest::from_sha256_bytes([0xab; 32]);
        assert_eq!(parse_sha256(d.as_str()), Ok(d));
        let sha512 = format!("sha512:{}", "ab".repeat(64));
        assert!(Digest::parse(&sha512).is_ok_and(|d| d.as_str() == sha512));
        assert_eq!(
            parse_sha256(&sha512),
            Err(ImageRefError::InvalidDigest(sha512.clone()))
        );
    }
}
