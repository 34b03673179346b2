//! What an image says about itself: its platform, labels and layers, which OS it is
//! ([`machineos_variant::detect`] over its labels and `/usr/lib/os-release`, read from the
//! newest layer that has it), and — for an image machineos built — the rendered
//! MachineConfig it embeds in its top layer.
//!
//! os-release is found by streaming layers newest first until one has `usr/lib/os-release`
//! (a regular file, or a hard link to a file of the same layer, as ostree-encapsulated
//! images have it), or removes it (a whiteout, or an opaque `usr/lib`). Only
//! `/usr/lib/os-release` is read, not `/etc/os-release`.

use std::io::Read;

use machineos_image::{Descriptor, Digest, ImageRef, Platform};
use machineos_registry::Registry;

use crate::BuildError;
use crate::store::{self, Store};

use machineos_layering::CURRENT_CONFIG;

/// An image's description.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// The image by digest.
    pub image: String,
    /// Its manifest digest.
    pub digest: Digest,
    /// The manifest's media type.
    pub media_type: String,
    /// Its platform.
    pub platform: String,
    /// The platforms of the index it was selected from, if any.
    pub index_platforms: Vec<String>,
    /// Config labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Layers, bottom first.
    pub layers: Vec<Descriptor>,
    /// What the image is: Fedora, CentOS Stream or RHEL CoreOS, another bootable image, or
    /// a plain container.
    pub variant: machineos_variant::Variant,
    /// The rendered MachineConfig embedded in the top layer, if there is one.
    pub machine_config: Option<serde_json::Value>,
}

/// Describes `reference` for `platform`.
pub async fn inspect(
    reference: &ImageRef,
    platform: &Platform,
    registry: Option<&Registry>,
) -> Result<Inspection, BuildError> {
    let client = match reference {
        ImageRef::Registry(_) => Some(registry.map(Registry::for_operation).ok_or_else(|| {
            BuildError::Internal("a registry image without a registry client".into())
        })?),
        ImageRef::Layout(_) => None,
    };
    let store = store::open_store(reference, client.as_ref(), false).await?;
    let resolved = store::resolve(store.clone(), platform).await?;
    let view = machineos_image::config::parse_config(&resolved.config).map_err(|source| {
        BuildError::Config {
            image: store.name(),
            error: source,
        }
    })?;
    let machine_config = match resolved.manifest.layers.last() {
        Some(top) => top_layer_file(&store, top, CURRENT_CONFIG).await?,
        None => None,
    };
    let machine_config = match machine_config {
        Some(bytes) => {
            Some(
                serde_json::from_slice(&bytes).map_err(|e| BuildError::InvalidImage {
                    image: store.name(),
                    problem: format!("{CURRENT_CONFIG} is not JSON: {e}"),
                })?,
            )
        }
        None => None,
    };
    let mut os_release = None;
    for layer in resolved.manifest.layers.iter().rev() {
        match os_release_in_layer(&store, layer).await? {
            InLayer::Found(bytes) => {
                os_release = Some(String::from_utf8_lossy(&bytes).into_owned());
                break;
            }
            InLayer::Removed => break,
            InLayer::Absent => {}
        }
    }
    let variant = machineos_variant::detect(os_release.as_deref(), &view.labels);
    Ok(Inspection {
        image: resolved.pullspec(),
        digest: resolved.manifest_digest.clone(),
        media_type: resolved.manifest_media_type(),
        platform: resolved.platform.to_string(),
        index_platforms: resolved
            .index_platforms
            .iter()
            .map(|p| p.to_string())
            .collect(),
        labels: view.labels,
        layers: resolved.manifest.layers.clone(),
        variant,
        machine_config,
    })
}

/// The largest embedded file `inspect` reads (a rendered MachineConfig is an API object,
/// and those are at most about 1.5 MiB).
pub const MAX_EMBEDDED_FILE: u64 = 16 << 20;

/// The contents of `path` (absolute, clean) in one layer, if it is a regular file
/// there.
async fn top_layer_file(
    store: &Store,
    layer: &Descriptor,
    path: &str,
) -> Result<Option<Vec<u8>>, BuildError> {
    let compression = machineos_image::LayerCompression::from_media_type(&layer.media_type)
        .map_err(|source| BuildError::Manifest {
            image: store.name(),
            error: source,
        })?;
    let store = store.clone();
    let layer = layer.clone();
    let digest = layer.digest.clone();
    let path = path.to_string();
    let raw = store.open_reader(&layer).await?;
    tokio::task::spawn_blocking(move || {
        let io = |source: std::io::Error| BuildError::LayerRead {
            image: store.name(),
            digest: digest.clone(),
            error: source,
        };
        let reader = crate::base_index::decompress(compression, raw).map_err(io)?;
        let mut archive = tar::Archive::new(reader);
        let mut found = None;
        for entry in archive.entries().map_err(io)? {
            let mut entry = entry.map_err(io)?;
            if machineos_baseindex::member_path(&entry.path_bytes()).as_deref() == Some(&path)
                && entry.header().entry_type().is_file()
            {
                if entry.size() > MAX_EMBEDDED_FILE {
                    return Err(BuildError::InvalidImage {
                        image: store.name(),
                        problem: format!(
                            "{path} in layer {digest} is {} bytes, more than the {MAX_EMBEDDED_FILE} read",
                            entry.size()
                        ),
                    });
                }
                let mut out = Vec::new();
                entry.read_to_end(&mut out).map_err(io)?;
                found = Some(out);
                break;
            }
        }
        // Read the blob to its end, so a registry stream checks its digest over what we used.
        std::io::copy(&mut archive.into_inner(), &mut std::io::sink()).map_err(io)?;
        Ok(found)
    })
    .await
    .map_err(|e| BuildError::Internal(format!("inspect task: {e}")))?
}

/// The os-release path as the index keys it.
const OS_RELEASE: &str = "/usr/lib/os-release";
/// The largest os-release file read (real ones are about 1 KiB).
const MAX_OS_RELEASE: u64 = 64 << 10;

/// What one layer says about `/usr/lib/os-release`.
enum InLayer {
    /// Its contents.
    Found(Vec<u8>),
    /// A whiteout removes it (or an opaque directory everything below it).
    Removed,
    /// The layer does not touch it.
    Absent,
}

/// Streams `layer` for `/usr/lib/os-release` (see the module documentation). A hard link
/// to a file met earlier in the layer is resolved when that file was the last regular file
/// (ostree-ext writes an object then its links), else by reading the layer once more.
async fn os_release_in_layer(store: &Store, layer: &Descriptor) -> Result<InLayer, BuildError> {
    let first = scan_layer(store, layer, None).await?;
    match first {
        Scan::Found(found) => Ok(found),
        Scan::LinkTo(target) => match scan_layer(store, layer, Some(target)).await? {
            Scan::Found(found) => Ok(found),
            Scan::LinkTo(_) => Ok(InLayer::Absent),
        },
    }
}

enum Scan {
    Found(InLayer),
    /// os-release is a hard link to this path, whose contents were not kept.
    LinkTo(String),
}

/// One pass over `layer`: looking for os-release, or (`target`) for the contents of the
/// file os-release is a hard link to.
async fn scan_layer(
    store: &Store,
    layer: &Descriptor,
    target: Option<String>,
) -> Result<Scan, BuildError> {
    let compression = machineos_image::LayerCompression::from_media_type(&layer.media_type)
        .map_err(|source| BuildError::Manifest {
            image: store.name(),
            error: source,
        })?;
    let store = store.clone();
    let digest = layer.digest.clone();
    let raw = store.open_reader(layer).await?;
    tokio::task::spawn_blocking(move || {
        let io = |source: std::io::Error| BuildError::LayerRead {
            image: store.name(),
            digest: digest.clone(),
            error: source,
        };
        let reader = crate::base_index::decompress(compression, raw).map_err(io)?;
        let mut archive = tar::Archive::new(reader);
        let mut result = Scan::Found(InLayer::Absent);
        let mut last_file: Option<(String, Vec<u8>)> = None;
        for entry in archive.entries().map_err(io)? {
            let mut entry = entry.map_err(io)?;
            let Some(path) = machineos_baseindex::member_path(&entry.path_bytes()) else {
                continue;
            };
            let etype = entry.header().entry_type();
            if let Some(t) = &target {
                if &path == t && etype.is_file() && entry.size() <= MAX_OS_RELEASE {
                    let mut out = Vec::new();
                    entry.read_to_end(&mut out).map_err(io)?;
                    result = Scan::Found(InLayer::Found(out));
                    break;
                }
                continue;
            }
            if path == "/usr/lib/.wh.os-release" || path == "/usr/lib/.wh..wh..opq" {
                if matches!(result, Scan::Found(InLayer::Absent)) {
                    result = Scan::Found(InLayer::Removed);
                }
                continue;
            }
            if path == OS_RELEASE {
                if etype.is_file() && entry.size() <= MAX_OS_RELEASE {
                    let mut out = Vec::new();
                    entry.read_to_end(&mut out).map_err(io)?;
                    result = Scan::Found(InLayer::Found(out));
                } else if etype.is_hard_link() {
                    let to = entry
                        .link_name_bytes()
                        .and_then(|t| machineos_baseindex::member_path(&t));
                    result = match (to, &last_file) {
                        (Some(to), Some((p, bytes))) if *p == to => {
                            Scan::Found(InLayer::Found(bytes.clone()))
                        }
                        (Some(to), _) => Scan::LinkTo(to),
                        (None, _) => Scan::Found(InLayer::Absent),
                    };
                } else {
                    // A symlink or anything else: not an os-release to read.
                    result = Scan::Found(InLayer::Removed);
                }
                break;
            }
            if etype.is_file() {
                last_file = if entry.size() <= MAX_OS_RELEASE {
                    let mut out = Vec::new();
                    entry.read_to_end(&mut out).map_err(io)?;
                    Some((path, out))
                } else {
                    None
                };
            }
        }
        // Read the blob to its end, so a registry stream checks its digest over what we used.
        std::io::copy(&mut archive.into_inner(), &mut std::io::sink()).map_err(io)?;
        Ok(result)
    })
    .await
    .map_err(|e| BuildError::Internal(format!("inspect task: {e}")))?
}
