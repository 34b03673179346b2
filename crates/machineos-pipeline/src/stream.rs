//! `machineos build --stream FILE [--stream-name NAME]`: the base image (and the extensions
//! image) for each platform built, taken from a stream source instead of `--base`.
//!
//! The file is CoreOS stream metadata (per architecture: `architectures.<arch>.oci-image`),
//! an `OSImageStream` or the `machine-config-osimageurl` ConfigMap (one multi-arch pair),
//! JSON or YAML as `kubectl get -o yaml` prints it; [`machineos_stream::parse`] tells them
//! apart. For each platform the stream named by `--stream-name` (else the file's default)
//! is asked for the platform's architecture ([`machineos_stream::Arch`] maps `amd64` to
//! the metadata's `x86_64`); its OS image must parse as an image reference (`oci:` layouts
//! too). Like `--base`, the stream's image wins over a rendered `spec.osImageURL`; its
//! extensions image fills the rendered `spec.baseOSExtensionsContainerImage` only when that
//! is empty (neither a MachineConfig nor `--extensions-image` set it) — see
//! [`with_extensions`].
//!
//! Errors name the file, the stream and the architecture, and say what the file offers.
//! Each choice is handed to the caller's `report` as it is made (the CLI prints it on
//! stderr).

use std::path::Path;

use anyhow::Context;
use machineos_image::{ImageRef, Platform};

/// The base chosen from a stream for one platform.
#[derive(Debug, Clone)]
pub struct StreamBase {
    /// The platform built.
    pub platform: Platform,
    /// The stream it was taken from.
    pub stream: String,
    /// The base OS image.
    pub base: ImageRef,
    /// The extensions image, when the stream names one (as given: RUN steps resolve it).
    pub extensions_image: Option<String>,
}

/// The base (and extensions image) for each of `platforms`, from the stream source at
/// `path`: stream `name`, else the file's default. Each choice is described to `report`
/// (`FILE: <format> stream "S" for linux/amd64: base IMAGE[, extensions IMAGE]`).
pub fn bases_from_stream(
    path: &Path,
    name: Option<&str>,
    platforms: &[Platform],
    report: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<StreamBase>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("--stream {shown}"))?;
    let streams = machineos_stream::parse(&bytes, &shown)?;
    let stream = streams.stream(name)?.name.clone();
    platforms
        .iter()
        .map(|platform| {
            let arch = machineos_stream::Arch::new(&platform.normalized().architecture);
            let images = streams.select(Some(&stream), &arch)?;
            let base = ImageRef::parse(&images.os_image).with_context(|| {
                format!(
                    "{shown}: stream {stream:?}, architecture {}: the OS image",
                    arch.describe()
                )
            })?;
            report(&format!(
                "{shown}: {} stream {stream:?} for {platform}: base {base}{}",
                streams.format.name(),
                images
                    .extensions_image
                    .as_deref()
                    .map(|e| format!(", extensions {e}"))
                    .unwrap_or_default()
            ));
            Ok(StreamBase {
                platform: platform.clone(),
                stream: stream.clone(),
                base,
                extensions_image: images.extensions_image,
            })
        })
        .collect()
}

/// The platforms a per-architecture stream offers (stream `name`, else the default), each
/// `linux/<arch>`; `None` for a stream of multi-arch references (the image's index decides).
pub fn stream_platforms(path: &Path, name: Option<&str>) -> anyhow::Result<Option<Vec<Platform>>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("--stream {shown}"))?;
    let streams = machineos_stream::parse(&bytes, &shown)?;
    Ok(match &streams.stream(name)?.images {
        machineos_stream::StreamImages::PerArch(arches) => Some(
            arches
                .iter()
                .filter(|(_, e)| matches!(e, machineos_stream::ArchEntry::Images(_)))
                .map(|(a, _)| Platform::new("linux", a.oci(), None))
                .collect(),
        ),
        machineos_stream::StreamImages::AnyArch(_) => None,
    })
}

/// The RUN-step plan with the stream's extensions image where the rendered config names
/// none (a MachineConfig's or `--extensions-image`'s value wins).
pub fn with_extensions(
    mut plan: Option<crate::runsteps::Plan>,
    from_stream: Option<&StreamBase>,
) -> Option<crate::runsteps::Plan> {
    if let (Some(p), Some(ext)) = (
        plan.as_mut(),
        from_stream.and_then(|s| s.extensions_image.as_ref()),
    ) && p.extensions_image.is_empty()
    {
        p.extensions_image = ext.clone();
    }
    plan
}

/// The choice, for the build's JSON summary (`stream`).
pub fn summary(s: &StreamBase) -> serde_json::Value {
    serde_json::json!({
        "name": s.stream,
        "platform": s.platform.to_string(),
        "base": s.base.to_string(),
        "extensionsImage": s.extensions_image,
    })
}
