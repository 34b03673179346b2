//! Image references as users write them (`quay.io/a/b:tag`, `docker://…`, `oci:DIR:tag`),
//! parsed once into typed values with the normalisation containers/image and Docker apply, so
//! the rest of machineos never compares or splits reference strings.
//!
//! Registry references follow the distribution reference grammar, checked by hand:
//!
//! ```text
//! reference  := name [ ":" tag ] [ "@" digest ]
//! name       := [domain "/"] path-component ["/" path-component]*
//! domain     := host [":" port]      host := domain-name | "[" IPv6 "]"
//! path-component := [a-z0-9]+ (separator [a-z0-9]+)*   separator := "." | "_" | "__" | "-"+
//! tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//! ```
//!
//! The first component is a domain only if it contains `.` or `:` or is `localhost`; otherwise
//! the registry is `docker.io` (where a one-component repository gets `library/`). With neither
//! tag nor digest the tag is `latest`.
//!
//! Layout references are `oci:DIR[:tag][@digest]`: a trailing `@algo:hex` is the digest; then
//! the text after the *last* `:` is the tag when the directory before it is not empty and the
//! text is not empty and holds no `/` — and then it must be a valid tag, or the reference is
//! refused; otherwise everything is the directory (which may be relative).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use machineos_diagnostics::{Classify, Retry};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::digest::{Digest, DigestError};

/// The registry used when a reference names none.
pub const DEFAULT_REGISTRY: &str = "docker.io";

/// The tag used when a reference has neither tag nor digest.
pub const DEFAULT_TAG: &str = "latest";

const MAX_NAME_LEN: usize = 255;
const MAX_TAG_LEN: usize = 128;

/// Transports containers/image knows that machineos does not support.
const OTHER_TRANSPORTS: &[&str] = &[
    "containers-storage",
    "dir",
    "docker-archive",
    "docker-daemon",
    "oci-archive",
    "ostree",
    "sif",
    "tarball",
];

/// Why a string is not an image reference. Every variant carries the whole input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    /// Nothing to parse (after any transport prefix).
    #[error("parsing image reference {input:?}: empty")]
    Empty {
        /// The whole input.
        input: String,
    },
    /// A containers/image transport machineos does not handle.
    #[error(
        "parsing image reference {input:?}: transport {transport:?} is not supported (use docker:// or oci:)"
    )]
    UnsupportedTransport {
        /// The whole input.
        input: String,
        /// The transport name.
        transport: String,
    },
    /// The digest part is not a valid digest.
    #[error("parsing image reference {input:?}: {error}")]
    Digest {
        /// The whole input.
        input: String,
        /// Why the digest is invalid.
        error: DigestError,
    },
    /// The tag does not match `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
    #[error(
        "parsing image reference {input:?}: invalid tag {tag:?} (expected [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})"
    )]
    InvalidTag {
        /// The whole input.
        input: String,
        /// The offending tag.
        tag: String,
    },
    /// The repository has uppercase letters.
    #[error("parsing image reference {input:?}: repository name must be lowercase")]
    Uppercase {
        /// The whole input.
        input: String,
    },
    /// A repository path component does not match the grammar.
    #[error(
        "parsing image reference {input:?}: invalid repository path component {component:?} (expected [a-z0-9]+ joined by '.', '_', '__' or '-')"
    )]
    InvalidRepository {
        /// The whole input.
        input: String,
        /// The offending component.
        component: String,
    },
    /// The registry host or port is invalid.
    #[error("parsing image reference {input:?}: invalid registry {registry:?}")]
    InvalidRegistry {
        /// The whole input.
        input: String,
        /// The offending registry part.
        registry: String,
    },
    /// The name is longer than 255 characters.
    #[error("parsing image reference {input:?}: repository name longer than 255 characters")]
    TooLong {
        /// The whole input.
        input: String,
    },
    /// `oci:` with no directory.
    #[error("parsing image reference {input:?}: oci: needs a directory (oci:DIR[:tag][@digest])")]
    EmptyLayoutDir {
        /// The whole input.
        input: String,
    },
    /// An `oci:` reference where a registry reference is required.
    #[error("parsing image reference {input:?}: expected a registry reference, not an OCI layout")]
    NotRegistry {
        /// The whole input.
        input: String,
    },
}

impl Classify for RefError {
    /// Always `InvalidImageReference`: the reference must change.
    fn reason(&self) -> &'static str {
        "InvalidImageReference"
    }

    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// An image reference: in a registry or in a local OCI layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageRef {
    /// `docker://host/repo:tag` or a bare `host/repo:tag`.
    Registry(RegistryRef),
    /// `oci:DIR[:tag][@digest]`.
    Layout(LayoutRef),
}

impl ImageRef {
    /// Parse any supported form; see the module documentation.
    pub fn parse(input: &str) -> Result<ImageRef, RefError> {
        if input.is_empty() {
            return Err(RefError::Empty {
                input: String::new(),
            });
        }
        if let Some(rest) = input.strip_prefix("oci:") {
            return LayoutRef::parse_rest(input, rest).map(ImageRef::Layout);
        }
        if let Some(rest) = input.strip_prefix("docker://") {
            return RegistryRef::parse_bare(input, rest).map(ImageRef::Registry);
        }
        if let Some((prefix, rest)) = input.split_once(':')
            && OTHER_TRANSPORTS.contains(&prefix)
            && !looks_like_port_then_path(rest)
        {
            return Err(RefError::UnsupportedTransport {
                input: input.to_owned(),
                transport: prefix.to_owned(),
            });
        }
        RegistryRef::parse_bare(input, input).map(ImageRef::Registry)
    }
}

/// `5000/…`: the colon after a host was a port separator, not a transport.
fn looks_like_port_then_path(rest: &str) -> bool {
    match rest.split_once('/') {
        Some((port, _)) => !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

impl FromStr for ImageRef {
    type Err = RefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ImageRef::parse(s)
    }
}

impl fmt::Display for ImageRef {
    /// A registry reference prints without transport; a layout reference with `oci:`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRef::Registry(r) => r.fmt(f),
            ImageRef::Layout(l) => l.fmt(f),
        }
    }
}

/// A normalised registry reference, `registry/repository[:tag][@digest]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

fn is_tag(s: &str) -> bool {
    let mut bytes = s.bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    match bytes.next() {
        Some(b) if word(b) => {}
        _ => return false,
    }
    s.len() <= MAX_TAG_LEN && bytes.all(|b| word(b) || b == b'.' || b == b'-')
}

/// `[a-z0-9]+ (separator [a-z0-9]+)*` with separator `.`, `_`, `__` or `-`+.
fn is_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &s[start..i];
        let ok = sep == "."
            || sep == "_"
            || sep == "__"
            || (!sep.is_empty() && sep.bytes().all(|c| c == b'-'));
        if !ok {
            return false;
        }
    }
    true
}

/// `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?`
fn is_domain_component(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// Split `host[:port]` into host and optional port (host keeps IPv6 brackets).
/// `host[:port]` (or `[v6]:port`) split into the host (brackets kept) and the port; `None`
/// for a malformed bracketed host.
pub fn split_host_port(registry: &str) -> Option<(&str, Option<&str>)> {
    if registry.starts_with('[') {
        let end = registry.find(']')?;
        let (host, rest) = registry.split_at(end + 1);
        match rest {
            "" => Some((host, None)),
            _ => rest.strip_prefix(':').map(|p| (host, Some(p))),
        }
    } else {
        match registry.split_once(':') {
            Some((h, p)) => Some((h, Some(p))),
            None => Some((registry, None)),
        }
    }
}

fn is_registry(registry: &str) -> bool {
    let Some((host, port)) = split_host_port(registry) else {
        return false;
    };
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().is_ok();
    }
    host.split('.').all(is_domain_component)
}

impl RegistryRef {
    /// Parse a registry reference, with or without `docker://`; `oci:` is an error.
    pub fn parse(input: &str) -> Result<RegistryRef, RefError> {
        match ImageRef::parse(input)? {
            ImageRef::Registry(r) => Ok(r),
            ImageRef::Layout(_) => Err(RefError::NotRegistry {
                input: input.to_owned(),
            }),
        }
    }

    fn parse_bare(input: &str, s: &str) -> Result<RegistryRef, RefError> {
        if s.is_empty() {
            return Err(RefError::Empty {
                input: input.to_owned(),
            });
        }
        let (name_tag, digest) = match s.split_once('@') {
            Some((n, d)) => {
                let digest = Digest::parse(d).map_err(|error| RefError::Digest {
                    input: input.to_owned(),
                    error,
                })?;
                (n, Some(digest))
            }
            None => (s, None),
        };
        let (name, tag) = match name_tag.rsplit_once(':') {
            Some((n, t)) if !t.contains('/') => {
                if !is_tag(t) {
                    return Err(RefError::InvalidTag {
                        input: input.to_owned(),
                        tag: t.to_owned(),
                    });
                }
                (n, Some(t.to_owned()))
            }
            _ => (name_tag, None),
        };
        if name.len() > MAX_NAME_LEN {
            return Err(RefError::TooLong {
                input: input.to_owned(),
            });
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                if !is_registry(first) {
                    return Err(RefError::InvalidRegistry {
                        input: input.to_owned(),
                        registry: first.to_owned(),
                    });
                }
                (first, rest)
            }
            _ => (DEFAULT_REGISTRY, name),
        };
        if path.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(RefError::Uppercase {
                input: input.to_owned(),
            });
        }
        if let Some(bad) = path.split('/').find(|c| !is_path_component(c)) {
            return Err(RefError::InvalidRepository {
                input: input.to_owned(),
                component: bad.to_owned(),
            });
        }
        let registry = if registry == "index.docker.io" {
            DEFAULT_REGISTRY
        } else {
            registry
        };
        let repository = if registry == DEFAULT_REGISTRY && !path.contains('/') {
            format!("library/{path}")
        } else {
            path.to_owned()
        };
        let tag = match (&tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            _ => tag,
        };
        Ok(RegistryRef {
            registry: registry.to_owned(),
            repository,
            tag,
            digest,
        })
    }

    /// The registry, `host[:port]` (`docker.io` for Docker Hub).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path within the registry (`library/fedora` on Docker Hub).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// `registry/repository`, without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The tag, if any (`latest` when the input had neither tag nor digest).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The tag, or `latest` when there is none.
    pub fn tag_or_latest(&self) -> &str {
        self.tag.as_deref().unwrap_or(DEFAULT_TAG)
    }

    /// The digest, if any.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// The same reference pinned to `digest` (the tag, if any, is kept).
    pub fn with_digest(&self, digest: Digest) -> RegistryRef {
        RegistryRef {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// The same repository with tag `tag` and no digest (a push or tag target).
    pub fn with_tag(&self, tag: &str) -> Result<RegistryRef, RefError> {
        if !is_tag(tag) {
            return Err(RefError::InvalidTag {
                input: format!("{}:{tag}", self.name()),
                tag: tag.to_owned(),
            });
        }
        Ok(RegistryRef {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.clone()
        })
    }

    /// `registry/repository@digest`.
    pub fn by_digest(&self, digest: &Digest) -> String {
        format!("{}@{digest}", self.name())
    }

    /// Whether the registry is on the loopback interface: `localhost`, `127.0.0.0/8` or
    /// `[::1]`, with or without a port.
    pub fn is_loopback(&self) -> bool {
        is_loopback_registry(&self.registry)
    }
}

/// Whether a registry host (`name[:port]`, `[v6]:port`) is `localhost` or a loopback
/// address.
pub fn is_loopback_registry(registry: &str) -> bool {
    let Some((host, _)) = split_host_port(registry) else {
        return false;
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().is_ok_and(|a| a.is_loopback());
    }
    host.parse::<Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl FromStr for RegistryRef {
    type Err = RefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RegistryRef::parse(s)
    }
}

impl Serialize for RegistryRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RegistryRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        RegistryRef::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A reference into a local OCI layout, `oci:DIR[:tag][@digest]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LayoutRef {
    /// The layout directory, as written (may be relative).
    pub dir: String,
    /// The tag (`org.opencontainers.image.ref.name`), if any.
    pub tag: Option<String>,
    /// The manifest digest, if any.
    pub digest: Option<Digest>,
}

impl LayoutRef {
    fn parse_rest(input: &str, rest: &str) -> Result<LayoutRef, RefError> {
        let (rest, digest) = match rest.rsplit_once('@') {
            Some((before, d)) if d.contains(':') => {
                let digest = Digest::parse(d).map_err(|error| RefError::Digest {
                    input: input.to_owned(),
                    error,
                })?;
                (before, Some(digest))
            }
            _ => (rest, None),
        };
        // Text after the last `:` that holds no `/` is meant as a tag: it must be one, not
        // silently become part of the directory's name.
        let (dir, tag) = match rest.rsplit_once(':') {
            Some((dir, t)) if !dir.is_empty() && !t.is_empty() && !t.contains('/') => {
                if !is_tag(t) {
                    return Err(RefError::InvalidTag {
                        input: input.to_owned(),
                        tag: t.to_owned(),
                    });
                }
                (dir, Some(t.to_owned()))
            }
            _ => (rest, None),
        };
        if dir.is_empty() {
            return Err(RefError::EmptyLayoutDir {
                input: input.to_owned(),
            });
        }
        Ok(LayoutRef {
            dir: dir.to_owned(),
            tag,
            digest,
        })
    }
}

impl fmt::Display for LayoutRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci:{}", self.dir)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    /// Expected (registry, repository, tag, has a digest), or a substring of the error.
    type Want = Result<(&'static str, &'static str, Option<&'static str>, bool), &'static str>;

    #[test]
    fn registry_table() {
        let cases: Vec<(String, Want)> = vec![
            (
                "fedora".into(),
                Ok(("docker.io", "library/fedora", Some("latest"), false)),
            ),
            (
                "fedora:40".into(),
                Ok(("docker.io", "library/fedora", Some("40"), false)),
            ),
            (
                "docker://fedora".into(),
                Ok(("docker.io", "library/fedora", Some("latest"), false)),
            ),
            (
                "user/app".into(),
                Ok(("docker.io", "user/app", Some("latest"), false)),
            ),
            (
                "docker.io/fedora".into(),
                Ok(("docker.io", "library/fedora", Some("latest"), false)),
            ),
            (
                "index.docker.io/library/fedora:x".into(),
                Ok(("docker.io", "library/fedora", Some("x"), false)),
            ),
            (
                "localhost/foo".into(),
                Ok(("localhost", "foo", Some("latest"), false)),
            ),
            (
                "localhost:5000/foo".into(),
                Ok(("localhost:5000", "foo", Some("latest"), false)),
            ),
            (
                "localhost:5000/foo:v1".into(),
                Ok(("localhost:5000", "foo", Some("v1"), false)),
            ),
            (
                "[::1]:5000/foo:tag".into(),
                Ok(("[::1]:5000", "foo", Some("tag"), false)),
            ),
            (
                "127.0.0.1:5000/a/b/c".into(),
                Ok(("127.0.0.1:5000", "a/b/c", Some("latest"), false)),
            ),
            (
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev".into(),
                Ok((
                    "quay.io",
                    "openshift-release-dev/ocp-v4.0-art-dev",
                    Some("latest"),
                    false,
                )),
            ),
            (
                format!("docker://quay.io/a/b@sha256:{HEX}"),
                Ok(("quay.io", "a/b", None, true)),
            ),
            (
                format!("quay.io/a/b:v1@sha256:{HEX}"),
                Ok(("quay.io", "a/b", Some("v1"), true)),
            ),
            (
                "quay.io/a__b/c-d/e--f/g.h_i:T_1.0-x".into(),
                Ok(("quay.io", "a__b/c-d/e--f/g.h_i", Some("T_1.0-x"), false)),
            ),
            (
                "Quay.IO/a/b".into(),
                Ok(("Quay.IO", "a/b", Some("latest"), false)),
            ),
            ("Foo/bar".into(), Err("must be lowercase")),
            ("quay.io/Foo/bar".into(), Err("must be lowercase")),
            ("foo@sha256:short".into(), Err("64 hex digits")),
            ("foo:-bad".into(), Err("invalid tag \"-bad\"")),
            (format!("foo:{}", "a".repeat(129)), Err("invalid tag")),
            ("foo:".into(), Err("invalid tag \"\"")),
            (
                "quay.io/a___b".into(),
                Err("invalid repository path component \"a___b\""),
            ),
            (
                "quay.io/a/".into(),
                Err("invalid repository path component \"\""),
            ),
            ("quay.io/-a".into(), Err("\"-a\"")),
            ("quay.io/a..b".into(), Err("\"a..b\"")),
            ("-bad.io/a".into(), Err("invalid registry \"-bad.io\"")),
            ("host:port/a".into(), Err("invalid registry")),
            ("[zz]:5000/a".into(), Err("invalid registry")),
            ("".into(), Err("empty")),
            ("docker://".into(), Err("empty")),
            (
                format!("quay.io/{}", "a".repeat(250)),
                Err("longer than 255"),
            ),
            (
                "containers-storage:foo".into(),
                Err("transport \"containers-storage\""),
            ),
            (
                "dir:5000/foo".into(),
                Ok(("dir:5000", "foo", Some("latest"), false)),
            ),
        ];
        let digest = Digest::parse(&format!("sha256:{HEX}")).unwrap();
        for (input, want) in cases {
            let got = ImageRef::parse(&input);
            match (got, want) {
                (Ok(ImageRef::Registry(r)), Ok((reg, repo, tag, has_digest))) => {
                    assert_eq!(r.registry(), reg, "{input}");
                    assert_eq!(r.repository(), repo, "{input}");
                    assert_eq!(r.tag(), tag, "{input}");
                    assert_eq!(r.digest(), has_digest.then_some(&digest), "{input}");
                    // Display re-parses to the same value.
                    assert_eq!(RegistryRef::parse(&r.to_string()).unwrap(), r, "{input}");
                }
                (Err(e), Err(needle)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(needle), "{input}: {msg}");
                    assert!(msg.contains(&format!("{input:?}")), "{input}: {msg}");
                }
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn layout_table() {
        let d = format!("sha256:{HEX}");
        type LayoutWant = Result<(&'static str, Option<&'static str>, bool), &'static str>;
        let cases: Vec<(String, LayoutWant)> = vec![
            ("oci:./out".into(), Ok(("./out", None, false))),
            ("oci:out".into(), Ok(("out", None, false))),
            ("oci:/tmp/x:v1".into(), Ok(("/tmp/x", Some("v1"), false))),
            (
                "oci:/tmp/x:y:v1".into(),
                Ok(("/tmp/x:y", Some("v1"), false)),
            ),
            ("oci:/tmp/x:".into(), Ok(("/tmp/x:", None, false))),
            ("oci:/tmp/x:a/b".into(), Ok(("/tmp/x:a/b", None, false))),
            ("oci::v1".into(), Ok((":v1", None, false))),
            (format!("oci:/tmp/x@{d}"), Ok(("/tmp/x", None, true))),
            (
                format!("oci:/tmp/x:v1@{d}"),
                Ok(("/tmp/x", Some("v1"), true)),
            ),
            ("oci:/tmp/a@b".into(), Ok(("/tmp/a@b", None, false))),
            ("oci:/tmp/x@sha256:abc".into(), Err("64 hex digits")),
            ("oci:out:a b".into(), Err("invalid tag \"a b\"")),
            ("oci:out:-x".into(), Err("invalid tag \"-x\"")),
            (format!("oci:out:{}", "t".repeat(129)), Err("invalid tag")),
            ("oci:".into(), Err("needs a directory")),
            (format!("oci:@{d}"), Err("needs a directory")),
        ];
        let digest = Digest::parse(&d).unwrap();
        for (input, want) in cases {
            match (ImageRef::parse(&input), want) {
                (Ok(ImageRef::Layout(l)), Ok((dir, tag, has_digest))) => {
                    assert_eq!(l.dir, dir, "{input}");
                    assert_eq!(l.tag.as_deref(), tag, "{input}");
                    assert_eq!(l.digest.as_ref(), has_digest.then_some(&digest), "{input}");
                    if !dir.ends_with(':') && dir != ":v1" {
                        assert_eq!(l.to_string(), input);
                    }
                }
                (Err(e), Err(needle)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(needle) && msg.contains(&input), "{msg}");
                }
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
        assert!(matches!(
            RegistryRef::parse("oci:x"),
            Err(RefError::NotRegistry { .. })
        ));
    }

    #[test]
    fn methods() {
        let digest = Digest::parse(&format!("sha256:{HEX}")).unwrap();
        let r = RegistryRef::parse("quay.io/a/b:v1").unwrap();
        assert_eq!(r.tag_or_latest(), "v1");
        assert_eq!(r.name(), "quay.io/a/b");
        let pinned = r.with_digest(digest.clone());
        assert_eq!(pinned.to_string(), format!("quay.io/a/b:v1@sha256:{HEX}"));
        assert_eq!(r.by_digest(&digest), format!("quay.io/a/b@sha256:{HEX}"));
        let retagged = pinned.with_tag("v2").unwrap();
        assert_eq!(retagged.to_string(), "quay.io/a/b:v2");
        assert_eq!(
            r.with_tag("bad tag"),
            Err(RefError::InvalidTag {
                input: "quay.io/a/b:bad tag".to_owned(),
                tag: "bad tag".to_owned(),
            })
        );
        let by_digest = RegistryRef::parse(&format!("quay.io/a/b@sha256:{HEX}")).unwrap();
        assert_eq!(by_digest.tag(), None);
        assert_eq!(by_digest.tag_or_latest(), "latest");
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(s, "\"quay.io/a/b:v1\"");
        assert_eq!(serde_json::from_str::<RegistryRef>(&s).unwrap(), r);
    }

    #[test]
    fn loopback_table() {
        let cases = [
            ("localhost/a", true),
            ("localhost:5000/a", true),
            ("LOCALHOST:5000/a", true),
            ("LOCALHOST/a", false), // no '.'/':' and not `localhost`: a path, so rejected
            ("127.0.0.1/a", true),
            ("127.1.2.3:5000/a", true),
            ("[::1]:5000/a", true),
            ("[::1]/a", true),
            ("[::2]:5000/a", false),
            ("10.0.0.1:5000/a", false),
            ("quay.io/a", false),
            ("a", false),
        ];
        for (input, want) in cases {
            match RegistryRef::parse(input) {
                Ok(r) => assert_eq!(r.is_loopback(), want, "{input}"),
                Err(e) => assert!(!want, "{input}: {e}"),
            }
        }
    }

    #[test]
    fn grammar_helpers() {
        for (s, ok) in [
            ("a", true),
            ("a.b", true),
            ("a_b", true),
            ("a__b", true),
            ("a---b", true),
            ("a___b", false),
            ("a._b", false),
            ("a-", false),
            ("_a", false),
            ("", false),
        ] {
            assert_eq!(is_path_component(s), ok, "{s}");
        }
        for (s, ok) in [
            ("_", true),
            ("v1.0-rc", true),
            (".x", false),
            ("a b", false),
        ] {
            assert_eq!(is_tag(s), ok, "{s}");
        }
    }
}
