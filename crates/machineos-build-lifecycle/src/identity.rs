//! A build's identity: the inputs that change the image, and the name `<pool>-<hash>` derived
//! from exactly those.
//!
//! **Hash encoding (stable; changing it renames every build).** The hash is SHA-256 over the
//! JSON serialization of this object, with keys in this order and no whitespace:
//!
//! ```text
//! {"v":1,"renderedConfig":"sha256:…","baseImage":"repo@sha256:…","extensionsImage":null|"…",
//!  "containerfiles":{"<ARCH>":"<content>",…},"builder":"Native","pushRepository":"host/ns/name"}
//! ```
//!
//! `containerfiles` is keyed by `containerfileArch` (`NoArch` when empty) and sorted by key,
//! so the order the user wrote them in does not matter. The name is the pool's name, `-`, and
//! the first 32 hex digits (128 bits) of the hash — the length of the MCO's name, which is
//! `<mosc>-<md5 hex>` (MCO `getHashedName`, `docs/mco-behaviour.md` §1.2).
//!
//! Differences from the MCO, on purpose: the MCO hashes the MachineOSConfig's whole spec, so
//! renaming the push *Secret* gives a new build; here secret names are left out (they do not
//! change the image). The push repository is in (a build record names one repository, and
//! nodes pull from it). The rendered config enters by content digest rather than by name, so
//! two rendered configs with identical content share one image.

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::observed::Backend;

/// Everything that changes the image a build produces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildInputs {
    /// sha256 of the rendered MachineConfig's content.
    pub rendered_config: String,
    /// The base image, by digest.
    pub base_image: String,
    /// The extensions image, if any.
    pub extensions_image: Option<String>,
    /// Containerfile content by architecture (`NoArch`, `AMD64`, …), sorted.
    pub containerfiles: BTreeMap<String, String>,
    /// The backend.
    pub builder: Option<Backend>,
    /// Where the image goes (`host[:port]/path/name`, no tag).
    pub push_repository: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Canonical<'a> {
    v: u32,
    rendered_config: &'a str,
    base_image: &'a str,
    extensions_image: Option<&'a str>,
    containerfiles: &'a BTreeMap<String, String>,
    builder: &'static str,
    push_repository: &'a str,
}

impl BuildInputs {
    /// The canonical JSON the hash is taken of.
    pub fn canonical_json(&self) -> String {
        let c = Canonical {
            v: 1,
            rendered_config: &self.rendered_config,
            base_image: &self.base_image,
            extensions_image: self.extensions_image.as_deref(),
            containerfiles: &self.containerfiles,
            builder: self.builder.map_or("", Backend::as_str),
            push_repository: &self.push_repository,
        };
        // Serializing strings, an optional string and a string map cannot fail.
        serde_json::to_string(&c).unwrap_or_default()
    }

    /// The first 32 hex digits of SHA-256 over [`BuildInputs::canonical_json`].
    pub fn hash(&self) -> String {
        let d = Sha256::digest(self.canonical_json().as_bytes());
        hex::encode(&d[..16])
    }
}

/// `<pool>-<hash>`.
pub fn build_name(pool: &str, inputs: &BuildInputs) -> String {
    format!("{pool}-{}", inputs.hash())
}

/// Where a build pushes: `repository:<build name>`, plus the tag the push spec gave, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushTarget {
    /// `host[:port]/path/name`.
    pub repository: String,
    /// The identity tag: the build's name (what the registry is checked for).
    pub tag: String,
    /// The tag the push spec gave, also pushed (a moving tag such as `latest`).
    pub extra_tag: Option<String>,
}

impl PushTarget {
    /// `repository:tag`.
    pub fn pullspec(&self) -> String {
        format!("{}:{}", self.repository, self.tag)
    }
}

/// The longest pullspec the MCO's API accepts.
pub const MAX_PULLSPEC_LEN: usize = 447;

/// Split a push spec `host[:port]/path/name[:tag]` into repository and tag, or say what is
/// wrong with it.
pub fn parse_push_spec(spec: &str) -> Result<(String, Option<String>), String> {
    if spec.is_empty() {
        return Err("is empty".into());
    }
    if spec.len() > MAX_PULLSPEC_LEN {
        return Err(format!(
            "is {} characters long, more than {MAX_PULLSPEC_LEN}",
            spec.len()
        ));
    }
    if spec.contains('@') {
        return Err(format!(
            "{spec:?} has a digest; give a repository and optionally a :tag"
        ));
    }
    if spec.chars().any(|c| c.is_whitespace() || c.is_uppercase()) {
        return Err(format!("{spec:?} has whitespace or upper case in it"));
    }
    let slash = spec.rfind('/');
    let Some(slash) = slash else {
        return Err(format!(
            "{spec:?} has no registry host (host[:port]/name[:tag])"
        ));
    };
    let (repo, tag) = match spec[slash..].rfind(':') {
        Some(i) => (&spec[..slash + i], Some(&spec[slash + i + 1..])),
        None => (spec, None),
    };
    if repo.ends_with('/') || repo.starts_with('/') || repo.contains("//") {
        return Err(format!("{spec:?} has an empty path component"));
    }
    if let Some(tag) = tag
        && !valid_tag(tag)
    {
        return Err(format!("{spec:?} has an invalid tag {tag:?}"));
    }
    Ok((repo.to_owned(), tag.map(str::to_owned)))
}

/// A registry tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}` (distribution's reference grammar).
pub fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && tag.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> BuildInputs {
        BuildInputs {
            rendered_config: "sha256:aa".into(),
            base_image: "quay.io/fedora/fedora-coreos@sha256:bb".into(),
            extensions_image: None,
            containerfiles: BTreeMap::from([("NoArch".into(), "FROM configs AS final\n".into())]),
            builder: Some(Backend::Native),
            push_repository: "registry.local/os/worker".into(),
        }
    }

    #[test]
    fn canonical_json_is_the_documented_one() {
        assert_eq!(
            inputs().canonical_json(),
            r#"{"v":1,"renderedConfig":"sha256:aa","baseImage":"quay.io/fedora/fedora-coreos@sha256:bb","extensionsImage":null,"containerfiles":{"NoArch":"FROM configs AS final\n"},"builder":"Native","pushRepository":"registry.local/os/worker"}"#
        );
        let name = build_name("worker", &inputs());
        assert_eq!(name.len(), "worker-".len() + 32);
        // Golden value: a change here renames every build in every cluster.
        assert_eq!(
            name,
            format!(
                "worker-{}",
                &hex::encode(Sha256::digest(inputs().canonical_json()))[..32]
            )
        );
    }

    #[test]
    fn every_input_changes_the_name() {
        let base = build_name("worker", &inputs());
        let edits: [fn(&mut BuildInputs); 6] = [
            |i| i.rendered_config.push('0'),
            |i| i.base_image.push('0'),
            |i| i.extensions_image = Some("x@sha256:cc".into()),
            |i| {
                i.containerfiles
                    .insert("AMD64".into(), "FROM configs AS final\n".into());
            },
            |i| i.builder = Some(Backend::Job),
            |i| i.push_repository.push('2'),
        ];
        for (n, edit) in edits.iter().enumerate() {
            let mut i = inputs();
            edit(&mut i);
            assert_ne!(build_name("worker", &i), base, "edit {n}");
        }
    }

    #[test]
    fn push_specs() {
        let ok = [
            ("quay.io/org/os:latest", "quay.io/org/os", Some("latest")),
            (
                "registry.local:5000/os/worker",
                "registry.local:5000/os/worker",
                None,
            ),
            (
                "registry.local:5000/os/worker:v1.2",
                "registry.local:5000/os/worker",
                Some("v1.2"),
            ),
            (
                "svc.ns.svc:5000/repo/name:tag",
                "svc.ns.svc:5000/repo/name",
                Some("tag"),
            ),
        ];
        for (spec, repo, tag) in ok {
            assert_eq!(
                parse_push_spec(spec),
                Ok((repo.to_owned(), tag.map(str::to_owned))),
                "{spec}"
            );
        }
        for bad in [
            "",
            "os",
            "quay.io/org/os@sha256:00",
            "quay.io/org/os:",
            "quay.io//os",
            "quay.io/org/os:-x",
            "quay.io/Org/os",
        ] {
            assert!(parse_push_spec(bad).is_err(), "{bad:?}");
        }
    }
}
