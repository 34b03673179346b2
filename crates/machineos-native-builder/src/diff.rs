//! `machineos diff`'s engine: what differs between two images' filesystems (for one
//! platform), from their base indexes, without unpacking either.
//!
//! Both images are resolved and indexed as a build's base is (`base_index`:
//! from the index cache when it has them, else by streaming each layer once), and the
//! indexes compared ([`machineos_baseindex::diff::compare`]; a layer both manifests list by
//! the same digest holds the same bytes, so its files are equal without reading). Then the
//! contents that decide the rest are read: for every added or modified regular file its
//! new contents (their sha256 is the entry's `digest`), and for a pair of equal-sized files
//! the indexes cannot tell apart, both sides — a pair whose bytes and metadata agree is
//! dropped. Each layer that holds such contents is streamed once, decompressed on a blocking
//! thread, members read in offset order; contents the index keeps (small `/etc` files)
//! read no layer at all. Diffing an image against the base it was built on reads only the
//! layer machineos added.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use machineos_baseindex::diff::{Change, Content, compare, kind_name};
use machineos_baseindex::{BaseIndex, Cache, IndexBuilder, Located};
use machineos_diagnostics::Warning;
use machineos_image::{Descriptor, ImageRef, LayerCompression, Platform};
use machineos_layer::{BaseView, Node, NodeKind};
use machineos_registry::Registry;
use sha2::{Digest as _, Sha256};

use crate::BuildError;
use crate::base_index::{LayerReads, base_index, compression_of, decompress, fetch, index_layers};
use crate::progress::Progress;
use crate::store::{self, ResolvedBase, blocking};

/// One side of a diff.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffSide {
    /// The image as named.
    pub image: String,
    /// The platform manifest's digest.
    pub digest: String,
    /// The platform compared.
    pub platform: String,
    /// Layer digests, bottom first.
    pub layers: Vec<String>,
    /// The config's labels.
    pub labels: BTreeMap<String, String>,
    /// The rendered MachineConfig the image embeds (machineos and MCO builds write it to
    /// `/etc/machine-config-daemon/currentconfig`), if any; read from the index. Not
    /// serialized (a report names it and what in it matters).
    #[serde(skip)]
    pub machine_config: Option<serde_json::Value>,
}

/// A node as a diff reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: &'static str,
    /// Permission bits, octal text (`0644`).
    pub mode: String,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// A regular file's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A regular file's contents' `sha256:…`, when they were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl NodeInfo {
    fn of(node: &Node, digest: Option<String>) -> NodeInfo {
        NodeInfo {
            kind: kind_name(node),
            mode: format!("{:04o}", node.mode),
            uid: node.uid,
            gid: node.gid,
            size: match node.kind {
                NodeKind::File { size } => Some(size),
                _ => None,
            },
            target: match &node.kind {
                NodeKind::Symlink { target } => Some(target.clone()),
                _ => None,
            },
            digest,
        }
    }
}

/// One path that differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// The path.
    pub path: String,
    /// `added`, `removed` or `modified`.
    pub change: &'static str,
    /// The node in the first image (removed, modified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<NodeInfo>,
    /// The node in the second image (added, modified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<NodeInfo>,
}

/// What differs between two images.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageDiff {
    /// The first image.
    pub from: DiffSide,
    /// The second image.
    pub to: DiffSide,
    /// Every path that differs, in path order.
    pub files: Vec<FileChange>,
    /// Layers read for contents (whole-layer streams; indexing not counted).
    pub layer_reads: u64,
}

/// Where the two images come from.
pub struct DiffSpec {
    /// The first image.
    pub from: ImageRef,
    /// The second image.
    pub to: ImageRef,
    /// The platform compared (an index's entry for it).
    pub platform: Platform,
    /// Keep the indexes built here in the cache (a CLI's next diff of the same images reads
    /// nothing); off, the cache is only read (a long-running controller compares each image
    /// once, and its cache holds bases).
    pub cache_images: bool,
}

/// Compares `spec.from` with `spec.to` (see the module documentation). `registry` reaches
/// registry images; `cache` is the base index cache.
pub async fn diff(
    spec: &DiffSpec,
    registry: Option<&Registry>,
    cache: Option<&Cache>,
    progress: &Arc<dyn Progress>,
    warnings: &mut Vec<Warning>,
) -> Result<ImageDiff, BuildError> {
    let client = registry.map(Registry::for_operation);
    let reads = Arc::new(LayerReads::default());
    let from = resolve(&spec.from, client.as_ref(), &spec.platform).await?;
    let to = resolve(&spec.to, client.as_ref(), &spec.platform).await?;
    let (from_layers, to_layers) = (layer_digests(&from), layer_digests(&to));
    let (from_ref, to_ref) = (&spec.from, &spec.to);
    let from_index = index_side(
        &from,
        spec,
        client.as_ref(),
        cache,
        &[],
        progress,
        &reads,
        warnings,
    )
    .await?;
    // The second is continued from the first when it extends it.
    let known = [(from_layers.clone(), from_index.clone())];
    let to_index = index_side(
        &to,
        spec,
        client.as_ref(),
        cache,
        &known,
        progress,
        &reads,
        warnings,
    )
    .await?;
    let (fi, ti) = (from_index.clone(), to_index.clone());
    let (fl, tl) = (from_layers.clone(), to_layers.clone());
    let differences = blocking("comparing the indexes", move || {
        let same = |i: u32, j: u32| {
            matches!((fl.get(i as usize), tl.get(j as usize)), (Some(a), Some(b)) if a == b)
        };
        Ok(compare(&fi, &ti, &same))
    })
    .await?;

    // The contents to read: the new side of every added or modified file, and the old side
    // of a pair the indexes cannot tell apart.
    let mut wanted: Vec<Want> = Vec::new();
    for (i, d) in differences.iter().enumerate() {
        let file = |n: &Option<Node>| {
            matches!(
                n,
                Some(Node {
                    kind: NodeKind::File { .. },
                    ..
                })
            )
        };
        if d.change != Change::Removed && file(&d.after) {
            wanted.push(Want {
                diff: i,
                side: Side::To,
                path: d.path.clone(),
            });
        }
        if d.content == Content::Unknown {
            wanted.push(Want {
                diff: i,
                side: Side::From,
                path: d.path.clone(),
            });
        }
    }
    let digests = read_digests(&wanted, [(&from, &from_index), (&to, &to_index)], &reads).await?;

    let mut files = Vec::new();
    for (i, d) in differences.into_iter().enumerate() {
        let before_digest = digests.get(&(i, Side::From)).cloned();
        let after_digest = digests.get(&(i, Side::To)).cloned();
        if d.content == Content::Unknown
            && !d.metadata_differs()
            && before_digest.is_some()
            && before_digest == after_digest
        {
            continue;
        }
        files.push(FileChange {
            path: d.path,
            change: d.change.name(),
            before: d.before.as_ref().map(|n| NodeInfo::of(n, before_digest)),
            after: d.after.as_ref().map(|n| NodeInfo::of(n, after_digest)),
        });
    }
    let from_mc = embedded_config(&from, &from_index, &reads).await?;
    let to_mc = embedded_config(&to, &to_index, &reads).await?;
    let side = |r: &ImageRef, b: &ResolvedBase, layers: Vec<String>, mc| DiffSide {
        image: r.to_string(),
        digest: b.manifest_digest.to_string(),
        platform: b.platform.to_string(),
        layers,
        labels: machineos_image::config::parse_config(&b.config)
            .map(|c| c.labels)
            .unwrap_or_default(),
        machine_config: mc,
    };
    Ok(ImageDiff {
        from: side(from_ref, &from, from_layers, from_mc),
        to: side(to_ref, &to, to_layers, to_mc),
        files,
        layer_reads: reads.get(),
    })
}

/// The rendered MachineConfig `image` embeds, from its index (kept contents read no layer;
/// a large one is fetched from its layer, counted in `reads`); not JSON is an error.
async fn embedded_config(
    image: &ResolvedBase,
    index: &BaseIndex,
    reads: &LayerReads,
) -> Result<Option<serde_json::Value>, BuildError> {
    use machineos_layering::CURRENT_CONFIG;
    let bytes = match index.lstat(CURRENT_CONFIG) {
        Ok(Some(Node {
            kind: NodeKind::File { .. },
            ..
        })) => match index.location(CURRENT_CONFIG) {
            Some(at) => fetch(image, &compression_of(image)?, at, reads).await?,
            None => index.read(CURRENT_CONFIG).map_err(|e| {
                BuildError::Internal(format!("reading {CURRENT_CONFIG} from the index: {e}"))
            })?,
        },
        _ => return Ok(None),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| BuildError::InvalidImage {
            image: image.store.name(),
            problem: format!("{CURRENT_CONFIG} is not JSON: {e}"),
        })
}

/// `reference`'s manifest for `platform`, with its config.
async fn resolve(
    reference: &ImageRef,
    client: Option<&Registry>,
    platform: &Platform,
) -> Result<ResolvedBase, BuildError> {
    let store = store::open_store(reference, client, false).await?;
    store::resolve(store, platform).await
}

fn layer_digests(r: &ResolvedBase) -> Vec<String> {
    r.manifest
        .layers
        .iter()
        .map(|l| l.digest.to_string())
        .collect()
}

/// `image`'s index: from the cache by its manifest digest; else continued from the index of
/// an image its layers extend — one of `known` (the other side of the diff) or the base its
/// `baseOSContainerImage` label names when the cache has that base's index — reading only
/// the layers above it; else built from every layer. An index built here is cached when
/// `spec.cache_images`.
#[allow(clippy::too_many_arguments)]
async fn index_side(
    image: &ResolvedBase,
    spec: &DiffSpec,
    client: Option<&Registry>,
    cache: Option<&Cache>,
    known: &[(Vec<String>, Arc<BaseIndex>)],
    progress: &Arc<dyn Progress>,
    reads: &Arc<LayerReads>,
    warnings: &mut Vec<Warning>,
) -> Result<Arc<BaseIndex>, BuildError> {
    let load = |digest: machineos_image::Digest| async move {
        let c = cache?.clone();
        tokio::task::spawn_blocking(move || c.load(&digest).ok().flatten())
            .await
            .ok()
            .flatten()
    };
    if let Some(index) = load(image.manifest_digest.clone()).await {
        return Ok(Arc::new(index));
    }
    let layers = layer_digests(image);
    let mut candidates: Vec<(Vec<String>, Arc<BaseIndex>)> = known.to_vec();
    let labelled = machineos_image::config::parse_config(&image.config)
        .ok()
        .and_then(|c| {
            c.labels
                .get(machineos_layering::labels::BASE_OS_CONTAINER_IMAGE)
                .cloned()
        })
        .and_then(|l| ImageRef::parse(&l).ok());
    if let (Some(base_ref), Some(_)) = (labelled, cache) {
        // The base is only worth resolving when its index is cached; any trouble reaching
        // it costs the layers it would have saved, nothing else.
        if let Ok(base) = resolve(&base_ref, client, &spec.platform).await
            && let Some(index) = load(base.manifest_digest.clone()).await
        {
            candidates.push((layer_digests(&base), Arc::new(index)));
        }
    }
    let prefix = candidates
        .into_iter()
        .filter(|(l, _)| l.len() < layers.len() && layers.starts_with(l))
        .max_by_key(|(l, _)| l.len());
    let index = match prefix {
        Some((_, from)) => {
            let builder = blocking("continuing an index", move || {
                Ok(IndexBuilder::from_index(&from))
            })
            .await?;
            index_layers(image, builder, progress, reads).await?
        }
        None => {
            let keep = cache.filter(|_| spec.cache_images);
            let (index, _) = base_index(image, None, keep, progress, reads, warnings).await?;
            return Ok(Arc::new(index));
        }
    };
    if let Some(cache) = cache.filter(|_| spec.cache_images) {
        let (c, key, copy) = (cache.clone(), image.manifest_digest.clone(), index.clone());
        let stored = tokio::task::spawn_blocking(move || c.store(&key, &copy)).await;
        if let Ok(Err(e)) = stored {
            warnings.push(Warning::new(
                cache.path_for(&image.manifest_digest).display().to_string(),
                format!("the index is not cached: {e}"),
            ));
        }
    }
    Ok(Arc::new(index))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    From,
    To,
}

struct Want {
    diff: usize,
    side: Side,
    path: String,
}

/// The sha256 of each wanted file's contents, by (difference, side): kept contents from the
/// index, the rest by streaming each layer that holds some once.
async fn read_digests(
    wanted: &[Want],
    sides: [(&ResolvedBase, &Arc<BaseIndex>); 2],
    reads: &Arc<LayerReads>,
) -> Result<BTreeMap<(usize, Side), String>, BuildError> {
    // (side, layer) → the located members to read there; the kept contents hashed in
    // passing (CPU work over many entries: on a blocking thread).
    let indexes = [sides[0].1.clone(), sides[1].1.clone()];
    let wanted: Vec<(usize, Side, String)> = wanted
        .iter()
        .map(|w| (w.diff, w.side, w.path.clone()))
        .collect();
    type ByLayer = BTreeMap<(Side, u32), Vec<(Located, usize)>>;
    let (mut out, by_layer) = blocking("hashing kept contents", move || {
        let mut out = BTreeMap::new();
        let mut by_layer: ByLayer = BTreeMap::new();
        for (diff, side, path) in wanted {
            let index = &indexes[side as usize];
            match index.location(&path) {
                Some(at) => by_layer
                    .entry((side, at.layer))
                    .or_default()
                    .push((at, diff)),
                None => {
                    let bytes = index.read(&path).map_err(|e| {
                        BuildError::Internal(format!("reading {path} from the index: {e}"))
                    })?;
                    out.insert((diff, side), sha256(&bytes));
                }
            }
        }
        Ok((out, by_layer))
    })
    .await?;
    for ((side, layer), mut members) in by_layer {
        let (base, _) = sides[side as usize];
        let Some(blob) = base.manifest.layers.get(layer as usize).cloned() else {
            return Err(BuildError::Internal(format!(
                "the index places contents in layer {layer}, which {} does not have",
                base.store.name()
            )));
        };
        let compression = LayerCompression::from_media_type(&blob.media_type).map_err(|e| {
            BuildError::Manifest {
                image: base.store.name(),
                error: e,
            }
        })?;
        members.sort_by_key(|(at, _)| at.offset);
        let (plain, sparse): (Vec<_>, Vec<_>) = members.into_iter().partition(|(at, _)| !at.sparse);
        if !plain.is_empty() {
            for (d, digest) in hash_layer(base, &blob, compression, plain, reads).await? {
                out.insert((d, side), digest);
            }
        }
        if !sparse.is_empty() {
            // A sparse member is parsed again from a stream of its own.
            let layers = compression_of(base)?;
            for (at, d) in sparse {
                let bytes = fetch(base, &layers, at, reads).await?;
                out.insert((d, side), sha256(&bytes));
            }
        }
    }
    Ok(out)
}

/// One stream of `blob`, the contents of `members` (sorted by offset, not sparse) hashed in
/// passing.
async fn hash_layer(
    base: &ResolvedBase,
    blob: &Descriptor,
    compression: LayerCompression,
    members: Vec<(Located, usize)>,
    reads: &LayerReads,
) -> Result<Vec<(usize, String)>, BuildError> {
    reads.bump();
    let raw = base.store.open_reader(blob).await?;
    let (image, digest) = (base.store.name(), blob.digest.clone());
    blocking("reading layer contents", move || {
        let err = |error| BuildError::LayerRead {
            image: image.clone(),
            digest: digest.clone(),
            error,
        };
        let mut layer = decompress(compression, raw).map_err(err)?;
        let mut at = 0u64;
        let mut out: Vec<(usize, String)> = Vec::with_capacity(members.len());
        let mut last: Option<(u64, String)> = None;
        for (m, d) in members {
            // Hard links name one member: the same offset, the same contents.
            if let Some((offset, digest)) = &last
                && *offset == m.offset
            {
                out.push((d, digest.clone()));
                continue;
            }
            let skip = m.offset.checked_sub(at).ok_or_else(|| {
                err(std::io::Error::other(format!(
                    "{}: two files at overlapping offsets",
                    m.path
                )))
            })?;
            let skipped =
                std::io::copy(&mut (&mut layer).take(skip), &mut std::io::sink()).map_err(err)?;
            let mut hasher = Sha256::new();
            let read = std::io::copy(&mut (&mut layer).take(m.size), &mut HashWriter(&mut hasher))
                .map_err(err)?;
            if skipped < skip || read < m.size {
                return Err(err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the layer ends inside {}", m.path),
                )));
            }
            at = m.offset + m.size;
            let digest = format!("sha256:{:x}", hasher.finalize());
            last = Some((m.offset, digest.clone()));
            out.push((d, digest));
        }
        // To its end: the store checks the blob's digest there, so the contents hashed
        // above are the blob the manifest names (as `Located::read_from` does).
        std::io::copy(&mut layer, &mut std::io::sink()).map_err(err)?;
        Ok(out)
    })
    .await
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}
