//! The base image, wherever it lives: resolve a reference (a registry tag or digest, or an
//! OCI layout) to one platform's manifest and config, and open its layer blobs. The config
//! of a base built on before comes from the process's memory or the cache directory
//! ([`Known`]), checked against its digest.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use machineos_baseindex::{Cache, IndexMemory};
use machineos_image::manifest::{ImageManifest, Manifest, parse_manifest};
use machineos_image::{
    Descriptor, Digest, ImageRef, Layout, LayoutRef, Platform, RegistryRef, VerifyingReader,
};
use machineos_registry::Registry;
use machineos_registry::stream::verified;

use crate::BuildError;

/// Where an image's blobs can be read.
#[derive(Debug, Clone)]
pub enum Store {
    /// A repository in a registry.
    Registry {
        /// The client (a cheap handle).
        client: Registry,
        /// The image (its repository is what matters for blobs).
        reference: RegistryRef,
    },
    /// An OCI image layout directory.
    Layout {
        /// The opened layout.
        layout: Arc<Layout>,
        /// The reference it was named by.
        reference: LayoutRef,
    },
}

impl Store {
    /// The image as the user named it.
    pub fn name(&self) -> String {
        match self {
            Store::Registry { reference, .. } => reference.to_string(),
            Store::Layout { reference, .. } => reference.to_string(),
        }
    }

    /// `digest` as a pullspec of this store (`host/repo@sha256:…` or `oci:DIR@sha256:…`).
    pub fn pullspec(&self, digest: &Digest) -> String {
        match self {
            Store::Registry { reference, .. } => reference.by_digest(digest),
            Store::Layout { reference, .. } => format!("oci:{}@{digest}", reference.dir),
        }
    }

    /// A whole small blob (an image config), checked against its digest and size, which
    /// the caller has bounded.
    pub async fn blob(&self, blob: &Descriptor) -> Result<Vec<u8>, BuildError> {
        match self {
            Store::Registry { client, reference } => {
                Ok(client.blob(reference, &blob.digest, blob.size).await?)
            }
            Store::Layout { layout, reference } => {
                let (layout, reference, blob) = (layout.clone(), reference.clone(), blob.clone());
                blocking("reading a blob", move || {
                    let mut data = Vec::new();
                    VerifyingReader::new(
                        open_blob(&layout, &reference, &blob.digest)?,
                        blob.digest.clone(),
                        Some(blob.size),
                    )
                    .read_to_end(&mut data)
                    .map_err(|error| BuildError::Layout {
                        image: reference.to_string(),
                        error: machineos_image::layout::LayoutError::Io {
                            path: layout.blob_path(&blob.digest),
                            dir: layout.dir().to_path_buf(),
                            op: "reading blob",
                            error,
                        },
                    })?;
                    Ok(data)
                })
                .await
            }
        }
    }

    /// A blob as a stream. The stream fails at its end when the bytes are not `blob`'s
    /// digest and size (whatever the digest's algorithm), so a consumer that reads it to the
    /// end has them verified.
    pub async fn blob_stream(
        &self,
        blob: &Descriptor,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, BuildError> {
        match self {
            Store::Registry { client, reference } => Ok(client
                .blob_stream(reference, &blob.digest, Some(blob.size))
                .await?),
            Store::Layout { layout, reference } => {
                let (layout, reference, digest) =
                    (layout.clone(), reference.clone(), blob.digest.clone());
                let file = blocking("opening a blob", move || {
                    open_blob(&layout, &reference, &digest)
                })
                .await?;
                Ok(verified(
                    Box::pin(tokio_util::io::ReaderStream::new(
                        tokio::fs::File::from_std(file),
                    )),
                    blob.digest.clone(),
                    Some(blob.size),
                ))
            }
        }
    }

    /// A blob as a blocking reader, opened here (asynchronously) and to be read **on a
    /// blocking thread** (`spawn_blocking`): a registry blob is a bridge to its stream on
    /// this runtime, which panics when read on a runtime thread. Verified as
    /// [`Store::blob_stream`] is.
    pub async fn open_reader(&self, blob: &Descriptor) -> Result<Box<dyn Read + Send>, BuildError> {
        match self {
            Store::Registry { .. } => {
                let stream = self.blob_stream(blob).await?;
                let reader = tokio_util::io::StreamReader::new(stream);
                Ok(Box::new(tokio_util::io::SyncIoBridge::new(reader)))
            }
            Store::Layout { layout, reference } => {
                let (layout, reference, blob) = (layout.clone(), reference.clone(), blob.clone());
                blocking("opening a blob", move || {
                    let file = open_blob(&layout, &reference, &blob.digest)?;
                    Ok(Box::new(VerifyingReader::new(
                        std::io::BufReader::with_capacity(256 * 1024, file),
                        blob.digest.clone(),
                        Some(blob.size),
                    )) as Box<dyn Read + Send>)
                })
                .await
            }
        }
    }
}

/// Runs blocking file work (`what`, for errors) on a blocking thread.
pub(crate) async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, BuildError> + Send + 'static,
) -> Result<T, BuildError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BuildError::Internal(format!("{what}: {e}")))?
}

/// A layout's blob file, for reading.
fn open_blob(
    layout: &Layout,
    reference: &LayoutRef,
    digest: &Digest,
) -> Result<std::fs::File, BuildError> {
    layout
        .open_blob(digest)
        .map_err(|source| BuildError::Layout {
            image: reference.to_string(),
            error: source,
        })
}

/// The largest image config read (containers/image accepts 4 MiB; OS images' configs are a
/// few KiB, with long histories a few hundred).
pub const MAX_CONFIG_SIZE: u64 = 4 << 20;

/// A base image resolved to one platform.
#[derive(Debug, Clone)]
pub struct ResolvedBase {
    /// Where its blobs are.
    pub store: Store,
    /// The platform manifest's bytes, verbatim.
    pub manifest_bytes: Vec<u8>,
    /// Their digest: the key of the base index cache.
    pub manifest_digest: Digest,
    /// The manifest, parsed.
    pub manifest: ImageManifest,
    /// The config blob, verbatim.
    pub config: Vec<u8>,
    /// The platform that was selected (from the index, else from the config).
    pub platform: Platform,
    /// The platforms of the index it was selected from (empty for a single manifest).
    pub index_platforms: Vec<Platform>,
    /// The config's `rootfs.diff_ids`, one per layer: what each layer's uncompressed
    /// contents must hash to.
    pub diff_ids: Vec<Digest>,
}

impl ResolvedBase {
    /// The platform manifest's media type (OCI when the manifest does not say).
    pub fn manifest_media_type(&self) -> String {
        self.manifest
            .media_type
            .clone()
            .unwrap_or_else(|| machineos_image::media_type::OCI_MANIFEST.to_string())
    }

    /// The base by digest, as recorded in the `baseOSContainerImage` label.
    pub fn pullspec(&self) -> String {
        self.store.pullspec(&self.manifest_digest)
    }
}

/// Opens the store behind a reference: a registry through `client`, a layout from disk
/// (created when `create`, on a blocking thread).
pub async fn open_store(
    reference: &ImageRef,
    client: Option<&Registry>,
    create: bool,
) -> Result<Store, BuildError> {
    match reference {
        ImageRef::Registry(r) => Ok(Store::Registry {
            client: client
                .cloned()
                .ok_or_else(|| BuildError::Internal("no registry client".into()))?,
            reference: r.clone(),
        }),
        ImageRef::Layout(l) => {
            let l = l.clone();
            blocking("opening a layout", move || {
                let dir = std::path::Path::new(&l.dir);
                let layout = if create {
                    Layout::create(dir)
                } else {
                    Layout::open(dir)
                }
                .map_err(|source| BuildError::Layout {
                    image: l.to_string(),
                    error: source,
                })?;
                Ok(Store::Layout {
                    layout: Arc::new(layout),
                    reference: l,
                })
            })
            .await
        }
    }
}

/// A manifest (or index) of a layout, by tag or digest: its bytes and digest (read on a
/// blocking thread).
async fn layout_manifest(
    layout: &Arc<Layout>,
    reference: &LayoutRef,
    digest: Option<Digest>,
) -> Result<(Vec<u8>, Digest), BuildError> {
    let (layout, reference) = (layout.clone(), reference.clone());
    blocking("reading a manifest", move || {
        let err = |source| BuildError::Layout {
            image: reference.to_string(),
            error: source,
        };
        let digest = match digest.or_else(|| reference.digest.clone()) {
            Some(d) => d,
            None => {
                layout
                    .resolve(reference.tag.as_deref())
                    .map_err(err)?
                    .digest
            }
        };
        let bytes = layout.read_blob(&digest).map_err(err)?;
        Ok((bytes, digest))
    })
    .await
}

/// The manifest or index a store's reference names: its bytes and digest.
pub async fn top_manifest(store: &Store) -> Result<(Vec<u8>, Digest), BuildError> {
    match store {
        Store::Registry { client, reference } => Ok(client.manifest(reference).await?),
        Store::Layout { layout, reference } => layout_manifest(layout, reference, None).await,
    }
}

/// Resolves the base to the manifest for `platform` and reads its config.
pub async fn resolve(store: Store, platform: &Platform) -> Result<ResolvedBase, BuildError> {
    resolve_with(store, platform, Known::default()).await
}

/// Where a base's config may be kept already: it is content-addressed, so a kept copy
/// (checked against its digest) saves fetching it — one round trip of a warm build.
#[derive(Clone, Copy, Default)]
pub struct Known<'a> {
    /// The process's memory.
    pub memory: Option<&'a IndexMemory>,
    /// The base index cache directory.
    pub cache: Option<&'a Cache>,
}

impl Known<'_> {
    async fn config(&self, store: &Store, desc: &Descriptor) -> Result<Vec<u8>, BuildError> {
        if let Some(b) = self.memory.and_then(|m| m.get_blob(&desc.digest)) {
            return Ok(b.as_ref().clone());
        }
        let kept = match self.cache {
            Some(cache) => {
                let (c, d, max) = (cache.clone(), desc.digest.clone(), desc.size);
                tokio::task::spawn_blocking(move || c.load_blob(&d, max))
                    .await
                    .ok()
                    .flatten()
            }
            None => None,
        };
        let bytes = match kept {
            Some(b) => b,
            None => {
                let b = store.blob(desc).await?;
                if let Some(cache) = self.cache {
                    let (c, d, copy) = (cache.clone(), desc.digest.clone(), b.clone());
                    // Only a later build gains from it: a copy that cannot be kept costs that
                    // build one fetch, and is not worth a warning.
                    let _ = tokio::task::spawn_blocking(move || c.store_blob(&d, &copy)).await;
                }
                b
            }
        };
        if let Some(m) = self.memory {
            m.insert_blob(desc.digest.clone(), Arc::new(bytes.clone()));
        }
        Ok(bytes)
    }
}

/// [`resolve`], with the config taken from `known` when kept there.
pub async fn resolve_with(
    store: Store,
    platform: &Platform,
    known: Known<'_>,
) -> Result<ResolvedBase, BuildError> {
    let name = store.name();
    let (bytes, digest) = top_manifest(&store).await?;
    let manifest_err = |source| BuildError::Manifest {
        image: name.clone(),
        error: source,
    };
    let (manifest_bytes, manifest_digest, index_platforms, selected) =
        match parse_manifest(&bytes, None).map_err(manifest_err)? {
            Manifest::Image(_) => (bytes, digest, Vec::new(), None),
            Manifest::Index(index) => {
                let platforms = index
                    .manifests
                    .iter()
                    .filter_map(|m| m.platform.clone())
                    .collect();
                let entry: Descriptor = index.select(platform).map_err(manifest_err)?.clone();
                let (b, d) = match &store {
                    Store::Registry { client, reference } => {
                        client
                            .manifest(&reference.with_digest(entry.digest.clone()))
                            .await?
                    }
                    Store::Layout { layout, reference } => {
                        layout_manifest(layout, reference, Some(entry.digest.clone())).await?
                    }
                };
                (b, d, platforms, entry.platform.clone())
            }
        };
    let manifest = match parse_manifest(&manifest_bytes, None).map_err(manifest_err)? {
        Manifest::Image(m) => m,
        Manifest::Index(_) => {
            return Err(BuildError::InvalidImage {
                image: name,
                problem: "an index entry points at another index".into(),
            });
        }
    };
    if manifest.config.size > MAX_CONFIG_SIZE {
        return Err(BuildError::InvalidImage {
            image: name,
            problem: format!(
                "its config is {} bytes, more than the {MAX_CONFIG_SIZE} accepted",
                manifest.config.size
            ),
        });
    }
    let config = known.config(&store, &manifest.config).await?;
    let view =
        machineos_image::config::parse_config(&config).map_err(|source| BuildError::Config {
            image: name.clone(),
            error: source,
        })?;
    let actual = selected
        .unwrap_or_else(|| Platform::new(&view.os, &view.architecture, view.variant.as_deref()));
    if index_platforms.is_empty() && !actual.matches(platform) {
        return Err(BuildError::PlatformMismatch {
            image: name,
            wanted: platform.to_string(),
            found: actual.to_string(),
        });
    }
    if view.diff_ids.len() != manifest.layers.len() {
        return Err(BuildError::InvalidImage {
            image: name,
            problem: format!(
                "the config lists {} diff_ids for {} layers",
                view.diff_ids.len(),
                manifest.layers.len()
            ),
        });
    }
    Ok(ResolvedBase {
        store,
        manifest_bytes,
        manifest_digest,
        manifest,
        config,
        platform: actual,
        index_platforms,
        diff_ids: view.diff_ids,
    })
}
