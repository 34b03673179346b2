//! The base's filesystem index: loaded from the cache by manifest digest, or built by
//! streaming each base layer once (on a blocking thread, never holding a layer in memory) and
//! then cached, so the next build against that base reads no base layer at all; and
//! planning over it.
//!
//! The planner is pure and synchronous, and never waits on the network: [`plan`] runs it on
//! a blocking thread over the index plus the contents fetched so far. The few files whose
//! contents the index does not keep (see `machineos_baseindex::keep_content`) are not read
//! by the planner; it asks for them, [`plan`] fetches them asynchronously (one layer stream
//! each, decompressed on a blocking thread) and plans again. Most plans need none; a plan
//! that needs `n` such files runs at most `n + 1` times.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::collections::BTreeMap;
use std::sync::Mutex;

use machineos_baseindex::{BaseIndex, Cache, IndexBuilder, IndexMemory, Located};
use machineos_diagnostics::Warning;
use machineos_ignition::Config;
use machineos_image::{Descriptor, LayerCompression};
use machineos_layer::plan::PlanOptions;
use machineos_layer::{BaseError, BaseView, Node, Plan};

use crate::BuildError;
use crate::progress::{Event, Progress};
use crate::store::{ResolvedBase, blocking};

/// How the index was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CacheUse {
    /// Held in the process's memory (see [`crate::Environment::memory`]): no file was read.
    Memory,
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
            CacheUse::Memory => "in memory",
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
    pub(crate) fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
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

pub(crate) fn compression_of(
    base: &ResolvedBase,
) -> Result<Vec<(Descriptor, LayerCompression)>, BuildError> {
    base.manifest
        .layers
        .iter()
        .map(|l| {
            let c = LayerCompression::from_media_type(&l.media_type).map_err(|source| {
                BuildError::Manifest {
                    image: base.store.name(),
                    error: source,
                }
            })?;
            Ok((l.clone(), c))
        })
        .collect()
}

/// The base's index, from `cache` when it has it, else by streaming every layer (counted in
/// `reads`). A cache that cannot be read or written costs only time: the problem is added
/// to `warnings` and the base is indexed from its layers. Contents the index does not keep
/// are not read from it (it has no layer source): [`plan`] fetches what the planner needs.
///
/// With `memory`, an index held there is used as it is (no file is read), and the index
/// used otherwise is kept there for the next build.
pub async fn base_index(
    base: &ResolvedBase,
    memory: Option<&IndexMemory>,
    cache: Option<&Cache>,
    progress: &Arc<dyn Progress>,
    reads: &Arc<LayerReads>,
    warnings: &mut Vec<Warning>,
) -> Result<(BaseIndex, CacheUse), BuildError> {
    if let Some(index) = memory.and_then(|m| m.get(&base.manifest_digest)) {
        return Ok((index, CacheUse::Memory));
    }
    let (index, used) = load_or_index(base, cache, progress, reads, warnings).await?;
    if let Some(m) = memory {
        m.insert(base.manifest_digest.clone(), index.clone());
    }
    Ok((index, used))
}

async fn load_or_index(
    base: &ResolvedBase,
    cache: Option<&Cache>,
    progress: &Arc<dyn Progress>,
    reads: &Arc<LayerReads>,
    warnings: &mut Vec<Warning>,
) -> Result<(BaseIndex, CacheUse), BuildError> {
    // A manifest whose layers cannot be read fails here, cached index or not.
    compression_of(base)?;
    let mut cache_ok = true;
    let cached = match cache {
        Some(cache) => {
            let (c, key) = (cache.clone(), base.manifest_digest.clone());
            match tokio::task::spawn_blocking(move || c.load(&key))
                .await
                .map_err(|e| BuildError::Internal(format!("cache task: {e}")))?
            {
                Ok(found) => found,
                Err(e) => {
                    warnings.push(Warning::new(
                        cache.path_for(&base.manifest_digest).display().to_string(),
                        format!("{e}; indexing the base instead"),
                    ));
                    cache_ok = false;
                    None
                }
            }
        }
        None => None,
    };
    let (index, used) = match cached {
        Some(index) => (index, CacheUse::Hit),
        None => {
            progress.event(Event::Stage("indexing base"));
            let index = index_layers(base, IndexBuilder::new(), progress, reads).await?;
            match cache {
                Some(cache) => {
                    let (c, key) = (cache.clone(), base.manifest_digest.clone());
                    let (index, stored) =
                        tokio::task::spawn_blocking(move || (c.store(&key, &index), index))
                            .await
                            .map(|(stored, index)| (index, stored))
                            .map_err(|e| BuildError::Internal(format!("cache task: {e}")))?;
                    match stored {
                        Ok(()) if cache_ok => (index, CacheUse::Miss),
                        Ok(()) => (index, CacheUse::Unusable),
                        Err(e) => {
                            warnings.push(Warning::new(
                                cache.path_for(&base.manifest_digest).display().to_string(),
                                format!(
                                    "the base index is not cached, the next build indexes the base again: {e}"
                                ),
                            ));
                            (index, CacheUse::Unusable)
                        }
                    }
                }
                None => (index, CacheUse::Disabled),
            }
        }
    };
    Ok((index, used))
}

/// `builder` with `base`'s layers applied from the first it has not applied yet (all of
/// them for a new builder; those above a known base's for one continued from its index,
/// see [`IndexBuilder::from_index`]), each streamed once (counted in `reads`), checked
/// against its digest and diff_id; the index.
pub(crate) async fn index_layers(
    base: &ResolvedBase,
    mut builder: IndexBuilder,
    progress: &Arc<dyn Progress>,
    reads: &LayerReads,
) -> Result<BaseIndex, BuildError> {
    let layers = compression_of(base)?;
    let name = base.store.name();
    let start = builder.layers_applied() as usize;
    for (i, ((blob, compression), diff_id)) in layers.iter().zip(&base.diff_ids).enumerate() {
        if i < start {
            continue;
        }
        progress.event(Event::IndexLayer {
            index: i,
            count: layers.len(),
            size: blob.size,
        });
        reads.bump();
        // The store checks the blob's digest and size as it is read to its end, the
        // builder the uncompressed contents against the config's diff_id. The blob is
        // opened here and read on a blocking thread.
        let raw = base.store.open_reader(blob).await?;
        let (compression, diff_id) = (*compression, diff_id.clone());
        let image = format!("{name} layer {}", blob.digest);
        builder = blocking("indexing a layer", move || {
            builder
                .apply_layer_checked(i as u32, compression, raw, Some(&diff_id))
                .map_err(|source| BuildError::Index {
                    image,
                    error: source,
                })?;
            Ok(builder)
        })
        .await?;
    }
    blocking("indexing", move || {
        builder.finish().map_err(|source| BuildError::Index {
            image: name,
            error: source,
        })
    })
    .await
}

/// The base as the planner sees it: the index, and the contents fetched for it. A read of
/// contents that neither holds fails, and is recorded to be fetched before the next attempt.
struct Prefetched<'a> {
    index: &'a BaseIndex,
    fetched: &'a BTreeMap<String, Vec<u8>>,
    wanted: Mutex<Vec<Located>>,
}

impl BaseView for Prefetched<'_> {
    fn lstat(&self, path: &str) -> Result<Option<Node>, BaseError> {
        self.index.lstat(path)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, BaseError> {
        let Some(at) = self.index.location(path) else {
            return self.index.read(path);
        };
        if let Some(bytes) = self.fetched.get(&at.path) {
            return Ok(bytes.clone());
        }
        self.wanted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(at);
        Err(BaseError::Io {
            path: path.to_string(),
            source: std::io::Error::other("its contents are fetched before planning again"),
        })
    }

    fn children(&self, path: &str) -> Result<Vec<String>, BaseError> {
        self.index.children(path)
    }

    fn hard_link_group(&self, link_id: u64) -> Result<Vec<String>, BaseError> {
        self.index.hard_link_group(link_id)
    }
}

/// Plans `config` over the base's `index` (see the module's contract): on a blocking
/// thread, fetching the contents the index does not keep when the planner asks for them
/// (each fetch counted in `reads`).
pub async fn plan(
    base: &ResolvedBase,
    index: Arc<BaseIndex>,
    config: Arc<Config>,
    options: Arc<PlanOptions>,
    source_name: &str,
    reads: &LayerReads,
) -> Result<Plan, BuildError> {
    let layers = compression_of(base)?;
    let mut fetched = Arc::new(BTreeMap::new());
    loop {
        let (index2, config2, options2, fetched2) = (
            index.clone(),
            config.clone(),
            options.clone(),
            fetched.clone(),
        );
        let (result, wanted) = blocking("planning", move || {
            let view = Prefetched {
                index: &index2,
                fetched: &fetched2,
                wanted: Mutex::new(Vec::new()),
            };
            let result = machineos_layer::plan::plan_with(&config2, &view, &options2);
            let wanted = view
                .wanted
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Ok((result, wanted))
        })
        .await?;
        if wanted.is_empty() {
            return result.map_err(|error| {
                BuildError::Plan(machineos_layer::LayerError::Plan {
                    source_name: source_name.to_string(),
                    error,
                })
            });
        }
        let mut more = (*fetched).clone();
        for at in wanted {
            if more.contains_key(&at.path) {
                continue;
            }
            let path = at.path.clone();
            let bytes = fetch(base, &layers, at, reads).await?;
            more.insert(path, bytes);
        }
        fetched = Arc::new(more);
    }
}

/// The largest os-release file read (real ones are about 1 KiB).
const MAX_OS_RELEASE: u64 = 64 << 10;

/// What the base is ([`machineos_variant::detect`]): from its config labels and its
/// `/usr/lib/os-release` (else `/etc/os-release`, when that is a regular file) as the
/// index has it. The index keeps os-release's contents (`machineos_baseindex::keep_content`),
/// so this reads no layer; an index that locates it instead (cached by an older machineos,
/// or over the kept-bytes budget) costs one layer read, counted in `reads`. A symlink, a
/// file larger than 64 KiB or a missing file is no os-release.
pub async fn variant(
    base: &ResolvedBase,
    index: &BaseIndex,
    reads: &LayerReads,
) -> Result<machineos_variant::Variant, BuildError> {
    let view = machineos_image::config::parse_config(&base.config).map_err(|error| {
        BuildError::Config {
            image: base.store.name(),
            error,
        }
    })?;
    let mut text = None;
    for path in ["/usr/lib/os-release", "/etc/os-release"] {
        let Ok(Some(node)) = index.lstat(path) else {
            continue;
        };
        let machineos_layer::NodeKind::File { size } = node.kind else {
            continue;
        };
        if size > MAX_OS_RELEASE {
            break;
        }
        let bytes = match index.location(path) {
            None => index.read(path).map_err(|e| BuildError::InvalidImage {
                image: base.store.name(),
                problem: format!("reading {path} from the base index: {e}"),
            })?,
            Some(at) => fetch(base, &compression_of(base)?, at, reads).await?,
        };
        text = Some(String::from_utf8_lossy(&bytes).into_owned());
        break;
    }
    Ok(machineos_variant::detect(text.as_deref(), &view.labels))
}

/// The contents of one located file, read from its layer (one counted read).
pub(crate) async fn fetch(
    base: &ResolvedBase,
    layers: &[(Descriptor, LayerCompression)],
    at: Located,
    reads: &LayerReads,
) -> Result<Vec<u8>, BuildError> {
    let Some((blob, compression)) = layers.get(at.layer as usize).cloned() else {
        return Err(BuildError::Internal(format!(
            "the base index places {} in layer {}, which the base does not have",
            at.path, at.layer
        )));
    };
    reads.bump();
    let raw = base.store.open_reader(&blob).await?;
    let image = format!("{} layer {}", base.store.name(), blob.digest);
    blocking("reading base contents", move || {
        let err = |source| BuildError::LayerRead {
            image,
            digest: blob.digest.clone(),
            error: source,
        };
        match decompress(compression, raw) {
            Ok(layer) => at
                .read_from(layer)
                .map_err(|e| err(std::io::Error::other(e))),
            Err(e) => Err(err(e)),
        }
    })
    .await
}
