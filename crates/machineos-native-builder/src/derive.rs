//! The derived image as data: from the base's manifest and config and a plan, the new layer
//! blob, the patched config and the new manifest — pure, so the same inputs give the same
//! bytes and digests, and nothing here touches a registry or a disk.

use std::collections::BTreeMap;

use machineos_image::config::{ConfigPatch, patch_config, rfc3339_from_unix};
use machineos_image::manifest::{derive_manifest, layer_media_type_for};
use machineos_image::{Descriptor, Digest, LayerCompression};
use machineos_layer::Plan;
use machineos_layer::write::{self, LayerDigests, LayerOptions};

use crate::BuildError;
use crate::spool::{SpoolWriter, Spooled};
use crate::store::ResolvedBase;

/// Everything that is new in the derived image.
#[derive(Debug, Clone)]
pub struct Derived {
    /// The new layer, compressed (in memory, or in a temporary file when large).
    pub layer_blob: Spooled,
    /// Its descriptor in the manifest.
    pub layer: Descriptor,
    /// Its digests and sizes.
    pub layer_digests: LayerDigests,
    /// The patched config.
    pub config: bytes::Bytes,
    /// Its descriptor.
    pub config_descriptor: Descriptor,
    /// The manifest.
    pub manifest: Vec<u8>,
    /// Its digest.
    pub manifest_digest: Digest,
    /// Its media type.
    pub manifest_media_type: String,
}

/// What the build adds to the image's metadata.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// Labels merged into the config (ours win over the base's on the same key).
    pub labels: BTreeMap<String, String>,
    /// The history entry's `created_by`.
    pub created_by: String,
    /// The history entry's `comment`.
    pub comment: Option<String>,
}

/// Derives the image: `plan` as one gzip layer on top of `base`.
pub fn derive(
    base: &ResolvedBase,
    plan: &Plan,
    opts: &LayerOptions,
    meta: &Metadata,
) -> Result<Derived, BuildError> {
    let name = base.store.name();
    let (layer_digests, layer_blob) =
        write::write_blob(plan, opts, std::io::BufWriter::new(SpoolWriter::default()))?;
    let layer_blob = layer_blob
        .into_inner()
        .map_err(|e| write::WriteError::Io(e.into_error()))?
        .finish();
    let diff_id = layer_digests.diff_id.clone();
    let manifest_media_type = base.manifest_media_type();
    let layer = Descriptor::new(
        layer_media_type_for(&manifest_media_type, LayerCompression::Gzip).map_err(|source| {
            BuildError::Manifest {
                image: name.clone(),
                error: source,
            }
        })?,
        layer_digests.digest.clone(),
        layer_digests.size,
    );
    // `write_blob` checked the mtime against write::MAX_MTIME, which fits.
    let created = rfc3339_from_unix(i64::try_from(opts.mtime).unwrap_or(i64::MAX));
    let config = patch_config(
        &base.config,
        &ConfigPatch {
            diff_id,
            labels: meta.labels.clone(),
            created: Some(created),
            history_created_by: meta.created_by.clone(),
            history_comment: meta.comment.clone(),
        },
    )
    .map_err(|source| BuildError::Config {
        image: name.clone(),
        error: source,
    })?;
    let config_descriptor = Descriptor::new(
        &base.manifest.config.media_type,
        Digest::sha256(&config),
        config.len() as u64,
    );
    let manifest =
        derive_manifest(&base.manifest_bytes, &config_descriptor, &layer).map_err(|source| {
            BuildError::Manifest {
                image: name.clone(),
                error: source,
            }
        })?;
    Ok(Derived {
        manifest_digest: Digest::sha256(&manifest),
        layer_blob,
        layer,
        layer_digests,
        config: config.into(),
        config_descriptor,
        manifest,
        manifest_media_type,
    })
}
