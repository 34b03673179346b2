//! Building the index: stream each layer of the base once, in order, and apply it over the
//! layers below it the way container runtimes unpack images (OCI whiteouts, opaque
//! directories, hard links), keeping only metadata and the few contents the planner reads.
//!
//! The rules, where runtimes leave room:
//! - A whiteout (`.wh.<name>`) or an opaque marker (`.wh..wh..opq`) hides what the *lower*
//!   layers have there, never what its own layer has, wherever the marker sits in the tar
//!   (the OCI image spec). A lower directory that still holds entries of this layer stays,
//!   as the plain directory the layer's extraction would have created for them.
//! - A missing parent directory is created as `0755 root:root`. A parent that exists as a
//!   non-directory (a symlink, say) is replaced by such a directory, as overlayfs shows an
//!   upper directory over a lower non-directory; a parent that is a directory is kept.
//! - A hard link (`Link` member) shares the inode of its target, which may be in this
//!   layer or a lower one; the link member's mode and owner apply to that inode, as
//!   runtimes chown/chmod the link path after creating it.
//! - Any other member replaces what was at its path (a new inode), except that a directory
//!   over a directory keeps the children and takes the new metadata.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::ops::Bound;

use machineos_image::{Algorithm, Digest, Hasher, LayerCompression};
use machineos_layer::overlay::OSTREE_OBJECTS;

use crate::IndexError;
use crate::index::{Assembler, BaseIndex, NewData, NewKind};
use crate::path;
use crate::record::Meta;

/// Files up to this size in the directories [`keep_content`] names are kept in the index.
pub const KEEP_LIMIT: u64 = 1 << 20;

/// At most this many bytes of contents are kept in the index at once; files met once it is
/// reached are located in their layer instead (read on demand), so a base full of large
/// `/etc` files costs a little speed, never memory.
pub const KEEP_TOTAL: u64 = 64 << 20;

/// The longest path (and symlink target) indexed, in bytes: Linux's `PATH_MAX` less the
/// terminating NUL. A layer with a longer name cannot be extracted by any runtime.
pub const MAX_PATH_LEN: usize = 4095;

/// The longest file name (one path component) indexed, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME_LEN: usize = 255;

/// The most paths a base may have (real OS images have 50 000–200 000).
pub const MAX_PATHS: usize = 2_000_000;

/// The most bytes of path names and symlink targets the index holds at once (a deep tree
/// stores every ancestor's full path, so this bounds the memory a hostile layer can claim).
pub const MAX_PATH_BYTES: usize = 256 << 20;

/// Whether the contents of the regular file at `path` (clean, absolute) of `size` bytes
/// are kept in the index rather than located in their layer (while fewer than
/// [`KEEP_TOTAL`] bytes are kept).
///
/// Kept are the files the planner may read on every build: anything under `/etc` up to
/// [`KEEP_LIMIT`] (it appends to and copies up files there, reads `/etc/passwd`,
/// `/etc/group` and the preset file), the image's own user databases `/usr/lib/passwd`
/// and `/usr/lib/group` up to the same limit, and unit files in `/usr/lib/systemd/system/`
/// up to [`KEEP_LIMIT`] (read to find a unit's `[Install]` section); and
/// `/usr/lib/os-release`, which every build reads to say which OS the base is. An index
/// cached before os-release was kept locates it instead: the format is the same, and a
/// reader fetches it from its layer. Empty files need no
/// bytes and count as kept whatever this says. Everything else is read from its layer
/// through a [`crate::LayerSource`] when it is needed at all.
pub fn keep_content(path: &str, size: u64) -> bool {
    size <= KEEP_LIMIT
        && (path == "/usr/lib/passwd"
            || path == "/usr/lib/group"
            || path == "/usr/lib/os-release"
            || path.starts_with("/etc/")
            || path.starts_with("/usr/lib/systemd/system/"))
}

/// Why `p` (clean, absolute) or a symlink target cannot be indexed, if it cannot.
pub(crate) fn name_problem(p: &str) -> Option<String> {
    if p.len() > MAX_PATH_LEN {
        return Some(format!(
            "name is {} bytes long, longer than Linux allows ({MAX_PATH_LEN})",
            p.len()
        ));
    }
    p.split('/').find(|c| c.len() > MAX_NAME_LEN).map(|c| {
        format!(
            "a component is {} bytes long, longer than Linux allows ({MAX_NAME_LEN})",
            c.len()
        )
    })
}

/// What applying one layer met.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerStats {
    /// Tar members applied (whiteouts included; extension headers not).
    pub entries: u64,
    /// Length of the uncompressed tar stream, trailing padding included.
    pub bytes_uncompressed: u64,
    /// Whiteout and opaque-directory markers.
    pub whiteouts: u64,
}

/// Why a layer could not be applied; every variant names the layer and, when there is
/// one, the tar member.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The layers, applied, do not form a tree.
    #[error("indexing the base: the layers do not form a tree: {what}")]
    Inconsistent {
        /// What is wrong.
        what: String,
    },
    /// The uncompressed layer is not what the image config's `rootfs.diff_ids` says.
    #[error(
        "applying layer {layer}: its uncompressed contents have digest {actual}, the image config's rootfs.diff_ids says {expected}"
    )]
    DiffId {
        /// The layer number.
        layer: u32,
        /// The config's diff_id.
        expected: Digest,
        /// What the contents hash to.
        actual: Digest,
    },
    /// Layers were not applied as 0, 1, 2, … in order.
    #[error("applying layer {layer}: layers must be applied in order; expected layer {expected}")]
    OutOfOrder {
        /// The layer given.
        layer: u32,
        /// The layer expected next.
        expected: u32,
    },
    /// The stream could not be read or decompressed, or is not a tar.
    #[error("applying layer {layer}: reading the layer stream: {error}")]
    Stream {
        /// The layer number.
        layer: u32,
        /// The cause.
        error: std::io::Error,
    },
    /// A member's header or data could not be read.
    #[error("applying layer {layer}: member {entry:?}: {error}")]
    Member {
        /// The layer number.
        layer: u32,
        /// The member name as in the tar.
        entry: String,
        /// The cause.
        error: std::io::Error,
    },
    /// A member name climbs out of the image root with `..`.
    #[error("applying layer {layer}: member {entry:?}: path escapes the image root")]
    Escape {
        /// The layer number.
        layer: u32,
        /// The member name as in the tar.
        entry: String,
    },
    /// A hard link whose target is absent, a directory, or outside the root.
    #[error("applying layer {layer}: member {entry:?}: hard link to {target:?}: {reason}")]
    LinkTarget {
        /// The layer number.
        layer: u32,
        /// The member name as in the tar.
        entry: String,
        /// The link target as in the tar.
        target: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The base exceeds a limit of the index (names longer than Linux allows, more paths
    /// than [`MAX_PATHS`], more names than [`MAX_PATH_BYTES`]).
    #[error("applying layer {layer}: member {entry:?}: {what}")]
    Limit {
        /// The layer number.
        layer: u32,
        /// The member name as in the tar (shortened when long).
        entry: String,
        /// What is exceeded.
        what: String,
    },
    /// A member type that has no place in an image (tape volume headers and the like), or
    /// a non-directory at the root.
    #[error("applying layer {layer}: member {entry:?}: {what}")]
    Unsupported {
        /// The layer number.
        layer: u32,
        /// The member name as in the tar.
        entry: String,
        /// What is unsupported.
        what: String,
    },
}

/// Owner and mode of directories nobody described.
const IMPLICIT_DIR: Meta = Meta {
    mode: 0o755,
    uid: 0,
    gid: 0,
};

/// A path while layers are applied.
#[derive(Debug, Clone, Copy)]
struct BNode {
    /// The layer that last wrote this path.
    layer: u32,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    Dir(Meta),
    /// A non-directory: its inode number.
    Inode(u64),
}

/// A non-directory, shared by its hard links.
#[derive(Debug)]
struct Inode {
    meta: Meta,
    kind: IKind,
    /// Paths naming it.
    links: u32,
}

#[derive(Debug)]
enum IKind {
    File { size: u64, data: Contents },
    Symlink(String),
    Other,
}

#[derive(Debug)]
enum Contents {
    Kept(Vec<u8>),
    Located {
        layer: u32,
        offset: u64,
        sparse: bool,
    },
}

/// Applies a base image's layers, lowest first, into a [`BaseIndex`].
///
/// After [`IndexBuilder::apply_layer`] fails the builder holds a partly applied layer and
/// must be dropped.
#[derive(Debug)]
pub struct IndexBuilder {
    /// Paths in byte order (a directory's descendants are the keys with its prefix).
    nodes: BTreeMap<String, BNode>,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    layers: u32,
    /// Bytes of the paths in `nodes` and of the symlink targets in `inodes`.
    path_bytes: usize,
    /// Bytes of contents kept in `inodes`.
    kept_bytes: u64,
    limits: Limits,
    /// The last small ostree content object read (its inode and bytes): ostree-ext writes
    /// each object just before the hard links to it at its real paths, and where one of
    /// those paths is one whose contents are kept ([`keep_content`], e.g. `/etc/hosts`),
    /// the object's bytes are kept — so a warm build of an encapsulated base still reads
    /// no layer.
    pending_object: Option<(u64, Vec<u8>)>,
}

/// All `size` bytes (at most [`KEEP_LIMIT`]) of a member's data; fewer than the header
/// says is an error.
fn read_data(entry: &mut impl Read, size: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(usize::try_from(size.min(KEEP_LIMIT)).unwrap_or(0));
    entry.read_to_end(&mut buf)?;
    if buf.len() as u64 != size {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{} bytes of data where the header says {size}", buf.len()),
        ));
    }
    Ok(buf)
}

/// The bounds an [`IndexBuilder`] holds a base to (see the constants for the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most paths ([`MAX_PATHS`]).
    pub paths: usize,
    /// Most bytes of path names and symlink targets ([`MAX_PATH_BYTES`]).
    pub path_bytes: usize,
    /// Most bytes of kept contents ([`KEEP_TOTAL`]).
    pub kept_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            paths: MAX_PATHS,
            path_bytes: MAX_PATH_BYTES,
            kept_bytes: KEEP_TOTAL,
        }
    }
}

impl Default for IndexBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// Counts the bytes read through it.
struct Counting<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

/// Passes a stream through, hashing what passes on another thread (when an algorithm is
/// given): the uncompressed stream is checked against its diff_id at no cost to the thread
/// that decompresses and parses it, on a machine with a second core.
struct ParallelHash<R> {
    inner: R,
    pending: Vec<u8>,
    to_hasher: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    hasher: Option<std::thread::JoinHandle<Digest>>,
}

/// Bytes handed to the hashing thread at once (a few of them in flight at most).
const HASH_CHUNK: usize = 256 << 10;

impl<R: Read> ParallelHash<R> {
    fn new(inner: R, algorithm: Option<Algorithm>) -> Self {
        let (to_hasher, hasher) = match algorithm {
            Some(algorithm) => {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
                let worker = std::thread::spawn(move || {
                    let mut h = Hasher::new(algorithm);
                    for chunk in rx {
                        h.update(&chunk);
                    }
                    h.finish()
                });
                (Some(tx), Some(worker))
            }
            None => (None, None),
        };
        ParallelHash {
            inner,
            pending: Vec::new(),
            to_hasher,
            hasher,
        }
    }

    /// The inner reader and the digest of everything read (when hashing).
    fn finish(mut self) -> std::io::Result<(R, Option<Digest>)> {
        if let Some(tx) = self.to_hasher.take() {
            if !self.pending.is_empty() {
                let _ = tx.send(std::mem::take(&mut self.pending));
            }
            drop(tx);
        }
        let digest = match self.hasher.take() {
            Some(worker) => Some(
                worker
                    .join()
                    .map_err(|_| std::io::Error::other("the hashing thread panicked"))?,
            ),
            None => None,
        };
        Ok((self.inner, digest))
    }
}

impl<R: Read> Read for ParallelHash<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(tx) = &self.to_hasher {
            self.pending.extend_from_slice(&buf[..n]);
            if self.pending.len() >= HASH_CHUNK {
                let chunk = std::mem::replace(&mut self.pending, Vec::with_capacity(HASH_CHUNK));
                // A hasher that is gone shows at `finish`.
                let _ = tx.send(chunk);
            }
        }
        Ok(n)
    }
}

/// Read `r` to its end, discarding.
fn drain(mut r: impl Read) -> std::io::Result<u64> {
    std::io::copy(&mut r, &mut std::io::sink())
}

impl IndexBuilder {
    /// An empty filesystem: the root directory, `0755 root:root`.
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    /// [`IndexBuilder::new`] with other bounds.
    pub fn with_limits(limits: Limits) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_string(),
            BNode {
                layer: 0,
                what: What::Dir(IMPLICIT_DIR),
            },
        );
        Self {
            nodes,
            inodes: HashMap::new(),
            next_inode: 0,
            layers: 0,
            path_bytes: 1,
            kept_bytes: 0,
            limits,
            pending_object: None,
        }
    }

    /// A builder holding `index`'s filesystem as if its layers had just been applied, to
    /// apply more layers on top (numbered from [`BaseIndex::layer_count`] on): the index of
    /// an image built on a base whose index is known, without reading the base's layers
    /// again. Hard-link groups stay groups; contents the index locates stay located in
    /// their layers. An inconsistent index (a damaged record) gives what it can read.
    /// Two things an index does not keep are not carried over: link groups of non-files (a
    /// hard-linked symlink or device becomes separate nodes: a later layer's hard link to
    /// one of them then changes that name only), and the ostree content object a base's
    /// last member left pending for a kept path in the next layer (its contents are then
    /// located, not kept). Neither changes what a diff or a plan reads.
    pub fn from_index(index: &BaseIndex) -> Self {
        use crate::record::{Data, Kind};
        let mut b = Self::new();
        let mut groups: HashMap<u32, u64> = HashMap::new();
        for e in index.entries() {
            let path = index.span(e.path).to_owned();
            let meta = Meta {
                mode: e.meta.mode,
                uid: e.meta.uid,
                gid: e.meta.gid,
            };
            let what = match e.kind {
                Kind::Dir => What::Dir(meta),
                kind => {
                    if let Some(id) = e.link.and_then(|g| groups.get(&g)).copied() {
                        if let Some(inode) = b.inodes.get_mut(&id) {
                            inode.links += 1;
                        }
                        What::Inode(id)
                    } else {
                        let ikind = match kind {
                            Kind::File { size, data } => IKind::File {
                                size,
                                data: match data {
                                    Data::Kept(start) => Contents::Kept(
                                        index.kept(start, size).unwrap_or_default().to_vec(),
                                    ),
                                    Data::Located {
                                        layer,
                                        offset,
                                        sparse,
                                    } => Contents::Located {
                                        layer,
                                        offset,
                                        sparse,
                                    },
                                },
                            },
                            Kind::Symlink(t) => IKind::Symlink(index.span(t).to_owned()),
                            _ => IKind::Other,
                        };
                        let id = b.next_inode;
                        b.next_inode += 1;
                        b.insert_inode(
                            id,
                            Inode {
                                meta,
                                kind: ikind,
                                links: 1,
                            },
                        );
                        if let Some(g) = e.link {
                            groups.insert(g, id);
                        }
                        What::Inode(id)
                    }
                }
            };
            b.insert_node(&path, BNode { layer: 0, what });
        }
        b.layers = index.layer_count();
        b
    }

    /// How many layers are applied (the number the next one must have).
    pub fn layers_applied(&self) -> u32 {
        self.layers
    }

    fn insert_node(&mut self, p: &str, n: BNode) {
        if self.nodes.insert(p.to_string(), n).is_none() {
            self.path_bytes += p.len();
        }
    }

    fn insert_inode(&mut self, id: u64, inode: Inode) {
        match &inode.kind {
            IKind::Symlink(t) => self.path_bytes += t.len(),
            IKind::File {
                data: Contents::Kept(b),
                ..
            } => self.kept_bytes += b.len() as u64,
            _ => {}
        }
        self.inodes.insert(id, inode);
    }

    fn drop_inode(&mut self, id: u64) {
        match self.inodes.remove(&id).map(|i| i.kind) {
            Some(IKind::Symlink(t)) => self.path_bytes -= t.len(),
            Some(IKind::File {
                data: Contents::Kept(b),
                ..
            }) => self.kept_bytes -= b.len() as u64,
            _ => {}
        }
    }

    /// The limits the index enforces after each member, naming it if one is exceeded.
    fn check_limits(&self, layer: u32, name: &str) -> Result<(), ApplyError> {
        let what = if self.nodes.len() > self.limits.paths {
            format!(
                "the base has more than {} paths, more than machineos indexes",
                self.limits.paths
            )
        } else if self.path_bytes > self.limits.path_bytes {
            format!(
                "the base's path names take more than {} bytes, more than machineos indexes",
                self.limits.path_bytes
            )
        } else {
            return Ok(());
        };
        Err(ApplyError::Limit {
            layer,
            entry: shorten(name),
            what,
        })
    }

    /// Apply layer number `layer` (0 for the lowest, then 1, 2, … in order), read as a
    /// `compression`-compressed tar stream from `reader`, streaming. The whole stream is
    /// consumed, past the end of the tar and of the compressed data, so a caller hashing
    /// what `reader` yields sees every byte of the blob.
    pub fn apply_layer(
        &mut self,
        layer: u32,
        compression: LayerCompression,
        reader: impl Read,
    ) -> Result<LayerStats, IndexError> {
        self.apply_layer_checked(layer, compression, reader, None)
    }

    /// [`IndexBuilder::apply_layer`], checking the uncompressed stream against `diff_id`
    /// (the layer's entry in the config's `rootfs.diff_ids`) when given: a layer whose
    /// contents are not what the config says is an error, and the builder must be dropped.
    pub fn apply_layer_checked(
        &mut self,
        layer: u32,
        compression: LayerCompression,
        reader: impl Read,
        diff_id: Option<&Digest>,
    ) -> Result<LayerStats, IndexError> {
        if layer != self.layers {
            return Err(ApplyError::OutOfOrder {
                layer,
                expected: self.layers,
            }
            .into());
        }
        let stream = |error| ApplyError::Stream { layer, error };
        let algorithm = diff_id.map(Digest::algorithm);
        let (stats, actual) = match compression {
            LayerCompression::None => {
                let mut r = ParallelHash::new(reader, algorithm);
                let stats = self.apply_tar(layer, &mut r)?;
                (stats, r.finish().map_err(stream)?.1)
            }
            LayerCompression::Gzip => {
                let dec = flate2::read::MultiGzDecoder::new(reader);
                let mut r = ParallelHash::new(dec, algorithm);
                let stats = self.apply_tar(layer, &mut r)?;
                let (dec, actual) = r.finish().map_err(stream)?;
                drain(dec.into_inner()).map_err(stream)?;
                (stats, actual)
            }
            LayerCompression::Zstd => {
                let dec = zstd::stream::read::Decoder::new(reader).map_err(stream)?;
                let mut r = ParallelHash::new(dec, algorithm);
                let stats = self.apply_tar(layer, &mut r)?;
                let (dec, actual) = r.finish().map_err(stream)?;
                drain(dec.finish()).map_err(stream)?;
                (stats, actual)
            }
        };
        if let (Some(expected), Some(actual)) = (diff_id, actual)
            && expected != &actual
        {
            return Err(ApplyError::DiffId {
                layer,
                expected: expected.clone(),
                actual,
            }
            .into());
        }
        self.layers += 1;
        Ok(stats)
    }

    /// The index of every layer applied; an error if the layers described a tree that is not
    /// one (which [`IndexBuilder::apply_layer`] is meant to have rejected already).
    pub fn finish(self) -> Result<BaseIndex, IndexError> {
        let mut items: Vec<(String, BNode)> = self.nodes.into_iter().collect();
        items.sort_by(|a, b| path::cmp(&a.0, &b.0));
        let text: usize = items.iter().map(|(p, _)| p.len()).sum();
        let mut asm = Assembler::new(self.layers, items.len(), text, 0);
        // Hard-link group of each multiply-linked file inode, numbered as first met.
        let mut groups: HashMap<u64, u32> = HashMap::new();
        for (p, n) in &items {
            let (kind, meta, link) = match n.what {
                What::Dir(meta) => (NewKind::Dir, meta, None),
                What::Inode(id) => {
                    let Some(inode) = self.inodes.get(&id) else {
                        debug_assert!(false, "{p}: inode {id} is gone");
                        continue;
                    };
                    match &inode.kind {
                        IKind::Symlink(t) => (NewKind::Symlink(t), inode.meta, None),
                        IKind::Other => (NewKind::Other, inode.meta, None),
                        IKind::File { size, data } => {
                            let mut first = true;
                            let link = (inode.links > 1).then(|| {
                                let next = groups.len() as u32;
                                let g = *groups.entry(id).or_insert(next);
                                first = g == next;
                                g
                            });
                            let data = match data {
                                _ if !first => NewData::SameAsGroup,
                                Contents::Kept(b) => NewData::Kept(b),
                                &Contents::Located {
                                    layer,
                                    offset,
                                    sparse,
                                } => NewData::Located {
                                    layer,
                                    offset,
                                    sparse,
                                },
                            };
                            (NewKind::File { size: *size, data }, inode.meta, link)
                        }
                    }
                }
            };
            asm.push(p, kind, meta, link)
                .map_err(|what| ApplyError::Inconsistent {
                    what: format!("{p}: {what}"),
                })?;
        }
        Ok(asm
            .finish()
            .map_err(|what| ApplyError::Inconsistent { what })?)
    }

    fn apply_tar<R: Read>(&mut self, layer: u32, r: &mut R) -> Result<LayerStats, ApplyError> {
        let stream = |error| ApplyError::Stream { layer, error };
        let mut stats = LayerStats::default();
        let mut archive = tar::Archive::new(Counting { inner: r, n: 0 });
        for entry in archive.entries().map_err(stream)? {
            let mut entry = entry.map_err(stream)?;
            self.apply_entry(layer, &mut entry, &mut stats)?;
        }
        let mut rest = archive.into_inner();
        drain(&mut rest).map_err(stream)?;
        stats.bytes_uncompressed = rest.n;
        Ok(stats)
    }

    fn apply_entry<R: Read>(
        &mut self,
        layer: u32,
        entry: &mut tar::Entry<'_, R>,
        stats: &mut LayerStats,
    ) -> Result<(), ApplyError> {
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let etype = match entry.header().entry_type() {
            // Pre-POSIX archives mark directories by a trailing slash alone.
            tar::EntryType::Regular if name.ends_with('/') => tar::EntryType::Directory,
            tar::EntryType::XGlobalHeader => return Ok(()),
            t => t,
        };
        let p = path::normalize(name.as_bytes()).map_err(|_| ApplyError::Escape {
            layer,
            entry: shorten(&name),
        })?;
        if let Some(what) = name_problem(&p) {
            return Err(ApplyError::Limit {
                layer,
                entry: shorten(&name),
                what,
            });
        }
        stats.entries += 1;
        self.apply_member(layer, &name, &p, etype, entry, stats)?;
        self.check_limits(layer, &name)
    }

    fn apply_member<R: Read>(
        &mut self,
        layer: u32,
        name: &str,
        p: &str,
        etype: tar::EntryType,
        entry: &mut tar::Entry<'_, R>,
        stats: &mut LayerStats,
    ) -> Result<(), ApplyError> {
        let name = name.to_string();
        let p = p.to_string();
        let member = |error| ApplyError::Member {
            layer,
            entry: shorten(&name),
            error,
        };
        let base = path::file_name(&p);
        if let Some(hidden) = base.strip_prefix(".wh.") {
            let dir = path::parent(&p).to_string();
            if hidden == ".wh..opq" {
                stats.whiteouts += 1;
                self.ensure_dir(&dir, layer);
                self.hide_lower(&dir, layer, false);
            } else if hidden.starts_with(".wh.") || hidden.is_empty() {
                // Other `.wh..wh.` names are aufs bookkeeping, not part of the tree.
            } else {
                stats.whiteouts += 1;
                self.ensure_dir(&dir, layer);
                self.hide_lower(&path::join(&dir, hidden), layer, true);
            }
            return Ok(());
        }

        let h = entry.header();
        let meta = Meta {
            mode: h.mode().map_err(member)? & 0o7777,
            uid: id32(h.uid().map_err(member)?).map_err(member)?,
            gid: id32(h.gid().map_err(member)?).map_err(member)?,
        };
        let kind = match etype {
            tar::EntryType::Directory => {
                self.put_dir(&p, meta, layer);
                return Ok(());
            }
            tar::EntryType::Link => {
                if p == "/" {
                    return Err(ApplyError::Unsupported {
                        layer,
                        entry: name,
                        what: "the image root must be a directory, not a hard link".into(),
                    });
                }
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                return self.link(layer, &name, &p, &target, meta);
            }
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                let size = entry.size();
                self.pending_object = None;
                let data = if size == 0 {
                    Contents::Kept(Vec::new())
                } else if keep_content(&p, size) && self.kept_bytes + size <= self.limits.kept_bytes
                {
                    Contents::Kept(read_data(entry, size).map_err(member)?)
                } else if etype == tar::EntryType::Regular
                    && size <= KEEP_LIMIT
                    && p.starts_with(OSTREE_OBJECTS)
                {
                    let offset = entry.raw_file_position();
                    let buf = read_data(entry, size).map_err(member)?;
                    self.pending_object = Some((self.next_inode, buf));
                    Contents::Located {
                        layer,
                        offset,
                        sparse: false,
                    }
                } else if etype == tar::EntryType::GNUSparse {
                    Contents::Located {
                        layer,
                        offset: entry.raw_header_position(),
                        sparse: true,
                    }
                } else {
                    Contents::Located {
                        layer,
                        offset: entry.raw_file_position(),
                        sparse: false,
                    }
                };
                IKind::File { size, data }
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                if let Some(what) = name_problem(&target) {
                    return Err(ApplyError::Limit {
                        layer,
                        entry: shorten(&name),
                        what: format!("symlink target: {what}"),
                    });
                }
                IKind::Symlink(target)
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => IKind::Other,
            other => {
                return Err(ApplyError::Unsupported {
                    layer,
                    entry: name,
                    what: format!("unsupported tar member type {:?}", other.as_byte() as char),
                });
            }
        };
        if p == "/" {
            return Err(ApplyError::Unsupported {
                layer,
                entry: name,
                what: "the image root must be a directory".into(),
            });
        }
        let id = self.next_inode;
        self.next_inode += 1;
        self.insert_inode(
            id,
            Inode {
                meta,
                kind,
                links: 1,
            },
        );
        self.replace(&p, What::Inode(id), layer);
        Ok(())
    }

    /// A `Link` member at `p` (named `name` in the tar) to `target`.
    fn link(
        &mut self,
        layer: u32,
        name: &str,
        p: &str,
        target: &str,
        meta: Meta,
    ) -> Result<(), ApplyError> {
        let bad = |reason| ApplyError::LinkTarget {
            layer,
            entry: name.to_string(),
            target: target.to_string(),
            reason,
        };
        let t = path::normalize(target.as_bytes()).map_err(|_| bad("escapes the image root"))?;
        let id = match self.nodes.get(&t) {
            None => return Err(bad("no such file in this or a lower layer")),
            Some(BNode {
                what: What::Dir(_), ..
            }) => return Err(bad("is a directory")),
            Some(&BNode {
                what: What::Inode(id),
                ..
            }) => id,
        };
        if t != p {
            // Counted before the old node at `p` goes, in case it holds the target.
            if let Some(inode) = self.inodes.get_mut(&id) {
                inode.links += 1;
            }
            self.replace(p, What::Inode(id), layer);
        } else if let Some(n) = self.nodes.get_mut(p) {
            n.layer = layer;
        }
        if let Some(inode) = self.inodes.get_mut(&id) {
            inode.meta = meta;
        }
        // A kept path hard-linked to the object just read: keep the object's bytes.
        if let Some((pid, buf)) = self.pending_object.take_if(|(pid, _)| *pid == id) {
            let budget = self.limits.kept_bytes.saturating_sub(self.kept_bytes);
            match self.inodes.get_mut(&pid) {
                Some(Inode {
                    kind: IKind::File { size, data },
                    ..
                }) if matches!(data, Contents::Located { .. })
                    && keep_content(p, *size)
                    && *size <= budget =>
                {
                    self.kept_bytes += buf.len() as u64;
                    *data = Contents::Kept(buf);
                }
                _ => self.pending_object = Some((pid, buf)),
            }
        }
        Ok(())
    }

    /// Put `what` at `p` (not the root), replacing whatever was there with its subtree.
    fn replace(&mut self, p: &str, what: What, layer: u32) {
        self.ensure_dir(path::parent(p), layer);
        self.remove_tree(p);
        self.insert_node(p, BNode { layer, what });
    }

    /// A directory member: a directory over a directory keeps its children.
    fn put_dir(&mut self, p: &str, meta: Meta, layer: u32) {
        if let Some(BNode {
            what: What::Dir(m),
            layer: l,
        }) = self.nodes.get_mut(p)
        {
            *m = meta;
            *l = layer;
            return;
        }
        self.replace(p, What::Dir(meta), layer);
    }

    /// Make `dir` and its ancestors directories, creating missing ones (and replacing
    /// non-directories) as implicit directories of `layer`.
    fn ensure_dir(&mut self, dir: &str, layer: u32) {
        if dir == "/" {
            return;
        }
        let mut end = 0;
        while end < dir.len() {
            end = dir[end + 1..].find('/').map_or(dir.len(), |i| end + 1 + i);
            let a = &dir[..end];
            match self.nodes.get(a) {
                Some(BNode {
                    what: What::Dir(_), ..
                }) => {}
                Some(_) => {
                    self.remove_tree(a);
                    self.insert_implicit(a, layer);
                }
                None => self.insert_implicit(a, layer),
            }
        }
    }

    fn insert_implicit(&mut self, p: &str, layer: u32) {
        self.insert_node(
            p,
            BNode {
                layer,
                what: What::Dir(IMPLICIT_DIR),
            },
        );
    }

    /// The strict descendants of `dir`, in byte order.
    fn descendants(&self, dir: &str) -> Vec<String> {
        let prefix = path::descendant_prefix(dir);
        self.nodes
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Remove `p` and everything under it.
    fn remove_tree(&mut self, p: &str) {
        for d in self.descendants(p) {
            self.remove_one(&d);
        }
        self.remove_one(p);
    }

    fn remove_one(&mut self, p: &str) {
        if p == "/" {
            return;
        }
        let Some(node) = self.nodes.remove(p) else {
            return;
        };
        self.path_bytes -= p.len();
        if let What::Inode(id) = node.what
            && let Some(inode) = self.inodes.get_mut(&id)
        {
            inode.links = inode.links.saturating_sub(1);
            if inode.links == 0 {
                self.drop_inode(id);
            }
        }
    }

    /// Hide what the layers below `layer` have under `p` (and at `p` itself when
    /// `include_self`): their nodes go, this layer's stay, and a lower directory that
    /// still holds nodes of this layer becomes an implicit directory of this layer.
    fn hide_lower(&mut self, p: &str, layer: u32, include_self: bool) {
        let mut paths = Vec::new();
        if include_self && self.nodes.contains_key(p) {
            paths.push(p.to_string());
        }
        paths.extend(self.descendants(p));
        // Byte order puts ancestors first; backwards, a directory's fate is known once
        // all of its descendants have been seen.
        let mut needed: HashSet<String> = HashSet::new();
        for q in paths.iter().rev() {
            let Some(&n) = self.nodes.get(q) else {
                continue;
            };
            let keep = n.layer == layer || needed.contains(q);
            if keep {
                if n.layer != layer {
                    if !matches!(n.what, What::Dir(_)) {
                        self.remove_one(q);
                    }
                    self.insert_implicit(q, layer);
                }
                needed.insert(path::parent(q).to_string());
            } else {
                self.remove_one(q);
            }
        }
    }
}

/// A member name for messages: at most 200 bytes (names can be 4 KiB, or hostile).
fn shorten(name: &str) -> String {
    if name.len() <= 200 {
        return name.to_string();
    }
    let mut end = 200;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &name[..end], name.len())
}

fn id32(id: u64) -> std::io::Result<u32> {
    u32::try_from(id).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("owner id {id} does not fit in 32 bits"),
        )
    })
}
