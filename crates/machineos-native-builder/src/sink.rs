//! Publishing a derived image: make every base blob present at the destination (already
//! there, mounted from the base's repository, or copied), upload the new layer and config,
//! and only then put the manifest and its tag — the one step that makes the image visible.
//!
//! The images of one multi-platform build share a [`BlobOnce`]: a blob two platforms need
//! (an identical added layer, a shared base layer) is uploaded or mounted once, the other
//! publish waiting for it. Besides saving the transfer, this avoids a race in the
//! distribution registry, whose blob link files are not written atomically: a manifest
//! checked while the same blob is committed twice can be refused with `DIGEST_INVALID`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use machineos_image::{Descriptor, Digest};
use tokio::sync::OnceCell;

use crate::BuildError;
use crate::derive::Derived;
use crate::progress::{Event, Progress};
use crate::store::{ResolvedBase, Store, blocking};

/// How the base blobs reached the destination.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobCounts {
    /// Already present.
    pub present: u64,
    /// Mounted from the base's repository (same registry).
    pub mounted: u64,
    /// Copied (read from the base and written to the destination).
    pub copied: u64,
    /// Hard-linked between OCI layouts on one filesystem.
    pub linked: u64,
}

/// Blobs made present at one destination by the publishes that share it: each blob's
/// upload or mount runs once; the others wait for it (and, if it failed, try themselves).
#[derive(Debug, Default)]
pub struct BlobOnce(Mutex<HashMap<Digest, Arc<OnceCell<()>>>>);

impl BlobOnce {
    /// Runs `f` for `digest` unless another publish did it successfully; `Fate::Present`
    /// when it was done by another.
    async fn run<F, Fut>(&self, digest: &Digest, f: F) -> Result<Fate, BuildError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Fate, BuildError>>,
    {
        let cell = {
            let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(digest.clone()).or_default().clone()
        };
        let mut fate = Fate::Present;
        cell.get_or_try_init(|| async {
            fate = f().await?;
            Ok::<(), BuildError>(())
        })
        .await?;
        Ok(fate)
    }
}

/// Publishes `derived` on top of `base` to `dest`, tagging it with `tag` when given. Untagged,
/// a registry gets the manifest by digest and a layout only its blob (an index will reference
/// it, so it is not listed in `index.json` on its own). Returns the manifest digest, as
/// checked against what the destination stored.
pub async fn publish(
    base: &ResolvedBase,
    derived: &Derived,
    dest: &Store,
    tag: Option<&str>,
    progress: &Arc<dyn Progress>,
    once: &BlobOnce,
) -> Result<(Digest, BlobCounts), BuildError> {
    match dest {
        Store::Registry { client, reference } => {
            // The new layer and config go up while the base's blobs are taken care of.
            let uploads = async {
                // The existence check and the upload session go out together (see
                // `push_blob_if_absent`): a new layer costs only its upload's round trips.
                let layer = once.run(&derived.layer.digest, || async {
                    let uploaded = client
                        .push_blob_if_absent(
                            reference,
                            &derived.layer.digest,
                            derived.layer_blob.len(),
                            || std::future::ready(Ok(derived.layer_blob.stream())),
                        )
                        .await?;
                    Ok(if uploaded {
                        Fate::Copied
                    } else {
                        Fate::Present
                    })
                });
                let config = once.run(&derived.config_descriptor.digest, || async {
                    client
                        .push_blob(
                            reference,
                            derived.config.clone(),
                            &derived.config_descriptor.digest,
                        )
                        .await?;
                    Ok(Fate::Copied)
                });
                let (layer, config) = futures_util::join!(layer, config);
                layer.and(config)
            };
            let (ensured, uploaded) =
                futures_util::join!(ensure_base_in_registry(base, dest, progress, once), uploads);
            let (counts, pin) = ensured?;
            uploaded?;
            // Everything is uploaded: now the manifests, the base's pin first.
            if pin {
                client
                    .push_manifest(
                        reference,
                        &base.manifest_bytes,
                        &base.manifest_media_type(),
                        None,
                    )
                    .await?;
            }
            let digest = client
                .push_manifest(
                    reference,
                    &derived.manifest,
                    &derived.manifest_media_type,
                    tag,
                )
                .await?;
            Ok((digest, counts))
        }
        Store::Layout { layout, reference } => {
            let counts = ensure_blobs(base, &base.manifest.layers, dest, progress, once).await?;
            // Layer, config, manifest, then the tag: file writes with fsync and a lock, on a
            // blocking thread.
            let (layout, reference) = (layout.clone(), reference.clone());
            let (layer, layer_digest) = (derived.layer_blob.clone(), derived.layer.digest.clone());
            let (config, manifest) = (derived.config.clone(), derived.manifest.clone());
            let (want, media_type) = (
                derived.manifest_digest.clone(),
                derived.manifest_media_type.clone(),
            );
            let platform = base.platform.clone();
            let tag = tag.map(str::to_string);
            let digest = blocking("writing the image", move || {
                let err = |source| BuildError::Layout {
                    image: reference.to_string(),
                    error: source,
                };
                layout
                    .copy_blob(layer.reader(), &layer_digest, layer.len())
                    .map_err(err)?;
                layout.write_blob(&config).map_err(err)?;
                let (digest, size) = layout.write_blob(&manifest).map_err(err)?;
                if digest != want {
                    return Err(BuildError::BlobDigest {
                        image: reference.to_string(),
                        want,
                        got: digest,
                    });
                }
                let desc = Descriptor {
                    platform: Some(platform),
                    ..Descriptor::new(&media_type, digest.clone(), size)
                };
                if let Some(t) = tag {
                    layout.set_tag(&t, &desc).map_err(err)?;
                }
                Ok(digest)
            })
            .await?;
            Ok((digest, counts))
        }
    }
}

/// Makes every blob of `blobs` present at `dest`, [`BLOB_CONCURRENCY`] at a time.
async fn ensure_blobs(
    base: &ResolvedBase,
    blobs: &[Descriptor],
    dest: &Store,
    progress: &Arc<dyn Progress>,
    once: &BlobOnce,
) -> Result<BlobCounts, BuildError> {
    let mut counts = BlobCounts::default();
    // Owned descriptors: a closure over borrowed ones makes the future not provably `Send`
    // for every lifetime, and a build must be spawnable on a shared runtime.
    let fates: Vec<Result<Fate, BuildError>> = futures_util::stream::iter(blobs.to_vec())
        .map(|blob| async move {
            once.run(&blob.digest, || ensure_blob(base, &blob, dest, progress))
                .await
        })
        .buffer_unordered(BLOB_CONCURRENCY)
        .collect()
        .await;
    for fate in fates {
        match fate? {
            Fate::Present => counts.present += 1,
            Fate::Mounted => counts.mounted += 1,
            Fate::Copied => counts.copied += 1,
            Fate::Linked => counts.linked += 1,
        }
    }
    Ok(counts)
}

/// Makes the base's layers (and config) present in a destination repository; returns
/// whether the base manifest should then be pinned there.
///
/// The pin is the base manifest pushed into the destination repository by digest,
/// untagged: a registry keeps every blob a manifest in the repository references, so the
/// next build into that repository learns with one request that all base layers are
/// there, instead of one request per layer. If the pin is gone (garbage-collected), the
/// layers are ensured one by one again and the pin is pushed again.
async fn ensure_base_in_registry(
    base: &ResolvedBase,
    dest: &Store,
    progress: &Arc<dyn Progress>,
    once: &BlobOnce,
) -> Result<(BlobCounts, bool), BuildError> {
    let Store::Registry { client, reference } = dest else {
        return Ok((
            ensure_blobs(base, &base.manifest.layers, dest, progress, once).await?,
            false,
        ));
    };
    let layers = base.manifest.layers.len() as u64;
    let same_repo = matches!(&base.store, Store::Registry { reference: source, .. }
        if source.registry() == reference.registry()
            && source.repository() == reference.repository());
    if same_repo
        || client
            .has_manifest(reference, &base.manifest_digest)
            .await?
    {
        let counts = BlobCounts {
            present: layers,
            ..BlobCounts::default()
        };
        return Ok((counts, false));
    }
    let (counts, config) = futures_util::join!(
        ensure_blobs(base, &base.manifest.layers, dest, progress, once),
        once.run(&base.manifest.config.digest, || {
            ensure_blob(base, &base.manifest.config, dest, progress)
        })
    );
    let counts = counts?;
    config?;
    Ok((counts, true))
}

/// How many base blobs are checked, mounted or copied at once.
const BLOB_CONCURRENCY: usize = 8;

/// How one base blob reached the destination.
enum Fate {
    Present,
    Mounted,
    Copied,
    Linked,
}

async fn ensure_blob(
    base: &ResolvedBase,
    blob: &Descriptor,
    dest: &Store,
    progress: &Arc<dyn Progress>,
) -> Result<Fate, BuildError> {
    match dest {
        Store::Registry { client, reference } => {
            let source = match &base.store {
                Store::Registry {
                    reference: source, ..
                } => Some(source),
                Store::Layout { .. } => None,
            };
            // Same registry: a mount answers 201 whether the blob was already there or is
            // linked now, in one request. (A base in the destination repository itself never
            // gets here: see `ensure_base_in_registry`.)
            if let Some(source) = source
                && client.mount(reference, source, &blob.digest).await?
            {
                return Ok(Fate::Mounted);
            }
            if client.has_blob(reference, &blob.digest).await? {
                return Ok(Fate::Present);
            }
            progress.event(Event::CopyBlob {
                digest: blob.digest.to_string(),
                size: blob.size,
            });
            let store = base.store.clone();
            client
                .push_blob_stream(reference, &blob.digest, blob.size, || {
                    let store = store.clone();
                    let blob = blob.clone();
                    async move {
                        store.blob_stream(&blob).await.map_err(|e| {
                            std::io::Error::other(format!("reading base blob {}: {e}", blob.digest))
                        })
                    }
                })
                .await?;
            Ok(Fate::Copied)
        }
        Store::Layout { layout, reference } => {
            let (to, digest) = (layout.clone(), blob.digest.clone());
            if blocking("checking a blob", move || Ok(to.has_blob(&digest))).await? {
                return Ok(Fate::Present);
            }
            progress.event(Event::CopyBlob {
                digest: blob.digest.to_string(),
                size: blob.size,
            });
            // Blobs are immutable and named by digest, so layouts on one filesystem can share
            // them — once the source's bytes are checked against their name; when linking is
            // not possible (another filesystem), the blob is copied.
            if let Store::Layout {
                layout: from,
                reference: from_ref,
            } = &base.store
            {
                let (from, from_ref, to, blob) =
                    (from.clone(), from_ref.clone(), layout.clone(), blob.clone());
                let linked =
                    blocking("linking a blob", move || {
                        from.verify_blob(&blob.digest, blob.size)
                            .map_err(|source| BuildError::Layout {
                                image: from_ref.to_string(),
                                error: source,
                            })?;
                        Ok(std::fs::hard_link(
                            from.blob_path(&blob.digest),
                            to.blob_path(&blob.digest),
                        )
                        .is_ok())
                    })
                    .await?;
                if linked {
                    return Ok(Fate::Linked);
                }
            }
            let reader = base.store.open_reader(blob).await?;
            let (layout, blob) = (layout.clone(), blob.clone());
            let image = reference.to_string();
            blocking("copying a blob", move || {
                layout
                    .copy_blob(reader, &blob.digest, blob.size)
                    .map_err(|source| BuildError::Layout {
                        image,
                        error: source,
                    })?;
                Ok(Fate::Copied)
            })
            .await
        }
    }
}
