//! CoreOS stream metadata — the JSON Fedora CoreOS publishes per stream
//! (`streams/<stream>.json`) and RHEL CoreOS ships in the installer (`coreos/*.json`, the
//! `coreos-bootimages` ConfigMap's `data.stream`) — and its release metadata (`release.json`,
//! the same `stream` + `architectures` frame), read for the host OS container image per
//! architecture.
//!
//! **Which keys.** Per architecture (`architectures.<x86_64|aarch64|ppc64le|s390x>`):
//! - `oci-image` `{release, image, digest-ref}`: the base OS container image (FCOS release
//!   metadata carries it since 2024; `digest-ref`, the image by digest, is used when set,
//!   else `image`);
//! - `oci-extensions-image`, same shape: the extensions container image. **machineos' own
//!   key**: no published CoreOS metadata names an extensions container (OpenShift takes
//!   `rhel-coreos-extensions` from the release payload), so a stream file written for
//!   machineos may add it per architecture.
//!
//! Keys that look related and are **not** the host OS, so never used: `images.kubevirt`
//! (a KubeVirt containerDisk, a VM disk in a container), and RHCOS's
//! `rhel-coreos-extensions` (its Azure disk, AWS Windows-LI and marketplace images — boot
//! images, not the extensions container). An architecture with neither `oci-image` key is
//! kept, so asking for it says which key was missing and what was found instead.
//! `artifacts` (disk images) and the rest are ignored.
//!
//! Own serde types, not the `coreos-stream-metadata` crate: its last release (0.1.0) builds
//! with this workspace, but models neither `oci-image` nor `rhel-coreos-extensions` nor
//! `metadata`, makes `artifacts` (which this reading does not need) required, and brings
//! strum 0.24 and syn 1 for stream-name enums machineos does not use; of what it models,
//! only the three-string `ContainerImage` shape would be used.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::error::{StreamError, typed};
use crate::{Arch, ArchEntry, ArchImages, Format, Stream, StreamImages, Streams};

const FORMAT: &str = "CoreOS stream metadata";

#[derive(Deserialize)]
struct Doc {
    stream: String,
    architectures: BTreeMap<String, ArchDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ArchDoc {
    #[serde(default)]
    oci_image: Option<ContainerImage>,
    #[serde(default)]
    oci_extensions_image: Option<ContainerImage>,
    #[serde(default)]
    images: Option<CloudImages>,
    #[serde(default)]
    rhel_coreos_extensions: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct CloudImages {
    #[serde(default)]
    kubevirt: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ContainerImage {
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    digest_ref: Option<String>,
}

impl ContainerImage {
    /// `digest-ref` when set, else `image`.
    fn pullspec(&self) -> Option<&str> {
        [&self.digest_ref, &self.image]
            .into_iter()
            .flatten()
            .map(|s| s.trim())
            .find(|s| !s.is_empty())
    }
}

/// Read stream metadata from `value`; `prefix` is the JSON path of `value` in its document.
pub(crate) fn read(source_name: &str, prefix: &str, value: &Value) -> Result<Streams, StreamError> {
    let doc: Doc = typed(source_name, FORMAT, prefix, value)?;
    let malformed = |path: String, message: String| StreamError::Malformed {
        source_name: source_name.to_owned(),
        format: FORMAT,
        path,
        message,
    };
    if doc.stream.trim().is_empty() {
        return Err(malformed(format!("{prefix}.stream"), "empty".to_owned()));
    }
    if doc.architectures.is_empty() {
        return Err(malformed(
            format!("{prefix}.architectures"),
            "no architectures".to_owned(),
        ));
    }
    let mut per_arch = BTreeMap::new();
    for (key, a) in &doc.architectures {
        let at = format!("{prefix}.architectures.{key}");
        let arch = Arch::new(key);
        let image = |field: &str, c: &Option<ContainerImage>| match c {
            None => Ok(None),
            Some(c) => c.pullspec().map(|p| Some(p.to_owned())).ok_or_else(|| {
                malformed(
                    format!("{at}.{field}"),
                    "neither digest-ref nor image is set".to_owned(),
                )
            }),
        };
        let os = image("oci-image", &a.oci_image)?;
        let extensions = image("oci-extensions-image", &a.oci_extensions_image)?;
        let entry = match os {
            Some(os_image) => ArchEntry::Images(ArchImages {
                os_image,
                extensions_image: extensions,
            }),
            None => {
                let mut looked_for = format!(
                    "looked for architectures.{key}.oci-image (digest-ref or image), which is absent"
                );
                if a.images.as_ref().is_some_and(|i| i.kubevirt.is_some()) {
                    looked_for.push_str(&format!(
                        "; architectures.{key}.images.kubevirt is a KubeVirt disk image, not the host OS"
                    ));
                }
                if a.rhel_coreos_extensions.is_some() {
                    looked_for.push_str(&format!(
                        "; architectures.{key}.rhel-coreos-extensions holds RHCOS cloud boot images, not the extensions container"
                    ));
                }
                ArchEntry::Missing { looked_for }
            }
        };
        if per_arch.insert(arch.clone(), entry).is_some() {
            return Err(malformed(
                at,
                format!("architecture {} is listed twice", arch.describe()),
            ));
        }
    }
    Ok(Streams {
        source_name: source_name.to_owned(),
        format: Format::CoreOsStreamMetadata,
        default_stream: Some(doc.stream.clone()),
        streams: vec![Stream {
            name: doc.stream,
            images: StreamImages::PerArch(per_arch),
        }],
    })
}
