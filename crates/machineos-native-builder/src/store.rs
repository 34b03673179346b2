//! The base image, wherever it lives: resolve a reference (a registry tag or digest, or an
//! OCI layout) to one platform's manifest and config, and open its layer blobs.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
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
        /// The client.
        client: Arc<Registry>,
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
                let (store, blob, handle) = (
                    self.clone(),
                    blob.clone(),
                    tokio::runtime::Handle::current(),
                );
                let (image, dir, path) = (
                    reference.to_string(),
                    layout.dir().to_path_buf(),
                    layout.blob_path(&blob.digest),
                );
                tokio::task::spawn_blocking(move || {
                    let mut data = Vec::new();
                    store
                        .blob_reader(&handle, &blob)?
                        .read_to_end(&mut data)
                        .map_err(|source| BuildError::Layout {
                            image,
                            source: machineos_image::layout::LayoutError::Io {
                                path,
                                dir,
                                op: "reading blob",
                                source,
                            },
                        })?;
                    Ok(data)
                })
                .await
                .map_err(|e| BuildError::Internal(format!("reading a blob: {e}")))?
            }
        }
    }

    /// A blob as a stream — the caller bridges it to a reader where it blocks. The stream
    /// fails at its end when the bytes are not `blob`'s digest and size (whatever the
    /// digest's algorithm), so a consumer that reads it to the end has them verified.
    pub async fn blob_stream(
        &self,
        blob: &Descriptor,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, BuildError> {
        match self {
            Store::Registry { client, reference } => Ok(client
                .blob_stream(reference, &blob.digest, Some(blob.size))
                .await?),
            Store::Layout { layout, reference } => {
                let file = tokio::fs::File::from_std(open_blob(layout, reference, &blob.digest)?);
                Ok(verified(
                    Box::pin(tokio_util::io::ReaderStream::new(file)),
                    blob.digest.clone(),
                    Some(blob.size),
                ))
            }
        }
    }

    /// A blob as a blocking reader, for use on a blocking thread; verified as
    /// [`Store::blob_stream`] is.
    pub fn blob_reader(
        &self,
        handle: &tokio::runtime::Handle,
        blob: &Descriptor,
    ) -> Result<Box<dyn Read + Send>, BuildError> {
        match self {
            Store::Registry { .. } => {
                let stream = handle.block_on(self.blob_stream(blob))?;
                let reader = tokio_util::io::StreamReader::new(stream);
                let bridge = tokio_util::io::SyncIoBridge::new_with_handle(reader, handle.clone());
                Ok(Box::new(bridge))
            }
            Store::Layout { layout, reference } => Ok(Box::new(VerifyingReader::new(
                std::io::BufReader::with_capacity(
                    256 * 1024,
                    open_blob(layout, reference, &blob.digest)?,
                ),
                blob.digest.clone(),
                Some(blob.size),
            ))),
        }
    }
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
            source,
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

/// Opens the store behind a reference: a registry through `client`, a layout from disk.
pub fn open_store(
    reference: &ImageRef,
    client: Option<&Arc<Registry>>,
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
            let dir = std::path::Path::new(&l.dir);
            let layout = if create {
                Layout::create(dir)
            } else {
                Layout::open(dir)
            }
            .map_err(|source| BuildError::Layout {
                image: l.to_string(),
                source,
            })?;
            Ok(Store::Layout {
                layout: Arc::new(layout),
                reference: l.clone(),
            })
        }
    }
}

/// Resolves the base to the manifest for `platform` and reads its config.
pub async fn resolve(store: Store, platform: &Platform) -> Result<ResolvedBase, BuildError> {
    let name = store.name();
    let (bytes, digest) = match &store {
        Store::Registry { client, reference } => client.manifest(reference).await?,
        Store::Layout { layout, reference } => {
            let digest = match &reference.digest {
                Some(d) => d.clone(),
                None => {
                    layout
                        .resolve(reference.tag.as_deref())
                        .map_err(|source| BuildError::Layout {
                            image: name.clone(),
                            source,
                        })?
                        .digest
                }
            };
            let bytes = layout
                .read_blob(&digest)
                .map_err(|source| BuildError::Layout {
                    image: name.clone(),
                    source,
                })?;
            (bytes, digest)
        }
    };
    let manifest_err = |source| BuildError::Manifest {
        image: name.clone(),
        source,
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
                    Store::Layout { layout, .. } => {
                        let b = layout.read_blob(&entry.digest).map_err(|source| {
                            BuildError::Layout {
                                image: name.clone(),
                                source,
                            }
                        })?;
                        (b, entry.digest.clone())
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
    let config = store.blob(&manifest.config).await?;
    let view =
        machineos_image::config::parse_config(&config).map_err(|source| BuildError::Config {
            image: name.clone(),
            source,
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
