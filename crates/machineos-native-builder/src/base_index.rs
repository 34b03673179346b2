//! The base's filesystem index: loaded from the cache by manifest digest, or built by
//! streaming each base layer once (on a blocking thread, never holding a layer in memory) and
//! then cached, so the next build against that base reads no base layer at all.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use machineos_baseindex::{BaseIndex, Cache, IndexBuilder, LayerSource};
use machineos_image::{Descriptor, LayerCompression};

use crate::BuildError;
use crate::progress::{Event, Progress};
use crate::store::{ResolvedBase, Store};

/// How the index was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CacheUse {
    /// Loaded from the cache: no base layer was read.
    Hit,
    /// Built from the layers and stored in the cache.
    Miss,
    /// Built from the layers; no cache in use.
    Disabled,
    /// Built from the layers; the cache could not be read or written (see the warnings).
    Unusable,
}

impl std::fmt::Display for CacheUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheUse::Hit => "cache hit",
            CacheUse::Miss => "indexed, cached",
            CacheUse::Disabled => "indexed, no cache",
            CacheUse::Unusable => "indexed, cache unusable",
        })
    }
}

/// Counts base layer reads: whole-layer streams for indexing, and on-demand reads of a file
/// whose contents the index does not keep.
#[derive(Debug, Default)]
pub struct LayerReads(AtomicU64);

impl LayerReads {
    /// Reads so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Reopens base layers for the few file contents the index does not keep.
struct BaseLayers {
    handle: tokio::runtime::Handle,
    store: Store,
    layers: Vec<(Descriptor, LayerCompression)>,
    reads: Arc<LayerReads>,
}

impl LayerSource for BaseLayers {
    fn open_layer(&self, layer: u32) -> std::io::Result<Box<dyn Read + Send>> {
        let (blob, compression) = self.layers.get(layer as usize).ok_or_else(|| {
            std::io::Error::other(format!("{} has no layer {layer}", self.store.name()))
        })?;
        self.reads.bump();
        let raw = self
            .store
            .blob_reader(&self.handle, blob)
            .map_err(std::io::Error::other)?;
        decompress(*compression, raw)
    }
}

/// An uncompressed view of a layer blob.
pub fn decompress(
    compression: LayerCompression,
    raw: Box<dyn Read + Send>,
) -> std::io::Result<Box<dyn Read + Send>> {
    Ok(match compression {
        LayerCompression::None => raw,
        LayerCompression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        LayerCompression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw)?),
    })
}

fn compression_of(base: &ResolvedBase) -> Result<Vec<(Descriptor, LayerCompression)>, BuildError> {
    base.manifest
        .layers
        .iter()
        .map(|l| {
            let c = LayerCompression::from_media_type(&l.media_type).map_err(|source| {
                BuildError::Manifest {
                    image: base.store.name(),
                    source,
                }
            })?;
            Ok((l.clone(), c))
        })
        .collect()
}

/// The base's index, from `cache` when it has it, else by streaming every layer. The index
/// can read the contents it does not keep from the base layers on demand (counted in
/// `reads`). A cache that cannot be read or written costs only time: the problem is added
/// to `warnings` and the base is indexed from its layers.
pub async fn base_index(
    base: &ResolvedBase,
    cache: Option<&Cache>,
    progress: &Arc<dyn Progress>,
    reads: &Arc<LayerReads>,
    warnings: &mut Vec<String>,
) -> Result<(BaseIndex, CacheUse), BuildError> {
    let layers = compression_of(base)?;
    let handle = tokio::runtime::Handle::current();
    let mut cache_ok = true;
    let cached = match cache {
        Some(c) => {
            let (c, key) = (c.clone(), base.manifest_digest.clone());
            match tokio::task::spawn_blocking(move || c.load(&key))
                .await
                .map_err(|e| BuildError::Internal(format!("cache task: {e}")))?
            {
                Ok(found) => found,
                Err(e) => {
                    warnings.push(format!("{e}; indexing the base instead"));
                    cache_ok = false;
                    None
                }
            }
        }
        None => None,
    };
    let (mut index, used) = match cached {
        Some(index) => (index, CacheUse::Hit),
        None => {
            progress.event(Event::Stage("indexing base"));
            let store = base.store.clone();
            let layers = layers.clone();
            let diff_ids = base.diff_ids.clone();
            let progress = progress.clone();
            let reads = reads.clone();
            let handle = handle.clone();
            let name = base.store.name();
            let index = tokio::task::spawn_blocking(move || {
                let mut builder = IndexBuilder::new();
                for (i, ((blob, compression), diff_id)) in layers.iter().zip(&diff_ids).enumerate()
                {
                    progress.event(Event::IndexLayer {
                        index: i,
                        count: layers.len(),
                        size: blob.size,
                    });
                    reads.bump();
                    // The store checks the blob's digest and size as it is read to its end,
                    // the builder the uncompressed contents against the config's diff_id.
                    let raw = store.blob_reader(&handle, blob)?;
                    builder
                        .apply_layer_checked(i as u32, *compression, raw, Some(diff_id))
                        .map_err(|source| BuildError::Index {
                            image: format!("{name} layer {}", blob.digest),
                            source,
                        })?;
                }
                builder.finish().map_err(|source| BuildError::Index {
                    image: name.clone(),
                    source,
                })
            })
            .await
            .map_err(|e| BuildError::Internal(format!("indexing task: {e}")))??;
            match cache {
                Some(c) => {
                    let (c, key) = (c.clone(), base.manifest_digest.clone());
                    let (index, stored) =
                        tokio::task::spawn_blocking(move || (c.store(&key, &index), index))
                            .await
                            .map(|(stored, index)| (index, stored))
                            .map_err(|e| BuildError::Internal(format!("cache task: {e}")))?;
                    match stored {
                        Ok(()) if cache_ok => (index, CacheUse::Miss),
                        Ok(()) => (index, CacheUse::Unusable),
                        Err(e) => {
                            warnings.push(format!(
                                "the base index is not cached, the next build indexes the base again: {e}"
                            ));
                            (index, CacheUse::Unusable)
                        }
                    }
                }
                None => (index, CacheUse::Disabled),
            }
        }
    };
    index.set_layer_source(Arc::new(BaseLayers {
        handle,
        store: base.store.clone(),
        layers,
        reads: reads.clone(),
    }));
    Ok((index, used))
}
