//! The finished index of a base image's filesystem: what the planner asks of the base
//! ([`BaseView`]) answered from a compact in-memory table instead of an unpacked rootfs,
//! with the contents of the few files the planner reads kept inline and the rest fetched
//! from their layer on demand.

use std::io::Read;
use std::sync::Arc;

use machineos_layer::{BaseError, BaseView, Node, NodeKind};

use crate::path;
use crate::record::{self, Data, Entry, Kind, Layout, Meta, Span};

/// Where the uncompressed tar stream of a base layer can be read again, for the contents
/// of files the index does not keep.
///
/// Each read of a file whose contents are not kept opens its layer once, through
/// [`LayerSource::open_layer_at`], and reads the stream to its end, so a source whose stream
/// fails at its end when the layer's digest does not match (as registry streams do) has the
/// bytes it gave verified.
pub trait LayerSource: Send + Sync {
    /// The UNCOMPRESSED tar stream of layer `layer` (the number given to
    /// [`crate::IndexBuilder::apply_layer`]), from its first byte.
    fn open_layer(&self, layer: u32) -> std::io::Result<Box<dyn Read + Send>>;

    /// The same stream from byte `offset` on. The default reads and discards the first
    /// `offset` bytes of [`LayerSource::open_layer`]; a source that can seek (an
    /// uncompressed copy on disk) should override it.
    fn open_layer_at(&self, layer: u32, offset: u64) -> std::io::Result<Box<dyn Read + Send>> {
        let mut r = self.open_layer(layer)?;
        let skipped = std::io::copy(&mut (&mut r).take(offset), &mut std::io::sink())?;
        if skipped < offset {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the layer ends at byte {skipped}, before offset {offset}"),
            ));
        }
        Ok(r)
    }
}

/// Counts of what an index holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Regular files (every name of a hard-linked file counts).
    pub files: u64,
    /// Directories, the root included.
    pub dirs: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Devices, fifos and sockets.
    pub others: u64,
    /// Bytes of file contents kept in the index (hard-linked contents once).
    pub kept_bytes: u64,
}

/// The filesystem of a base image: every path of the merged layers with its metadata, in
/// path order (component by component, as `std::path::Path` orders), and the contents of
/// the files the planner may read (see [`crate::keep_content`]).
///
/// It is its encoded form (see [`mod@crate::format`]), shared: cloning is cheap, and a
/// lookup decodes only the records it compares.
#[derive(Clone)]
pub struct BaseIndex {
    /// The encoded index.
    bytes: Arc<Vec<u8>>,
    layout: Layout,
    source: Option<Arc<dyn LayerSource>>,
}

impl std::fmt::Debug for BaseIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseIndex")
            .field("entries", &self.layout.entries)
            .field("layers", &self.layout.layers)
            .field("kept_bytes", &self.layout.blob.len)
            .field("bytes", &self.bytes.len())
            .field("layer_source", &self.source.is_some())
            .finish()
    }
}

/// Equal when the trees are equal (paths, metadata, link groups, contents and their
/// locations); the layer source is not compared. The encoding is canonical — one tree, one
/// encoding — so that is equality of the encoded bytes.
impl PartialEq for BaseIndex {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for BaseIndex {}

impl BaseIndex {
    pub(crate) fn with_layout(bytes: Vec<u8>, layout: Layout) -> BaseIndex {
        BaseIndex {
            bytes: Arc::new(bytes),
            layout,
            source: None,
        }
    }

    /// The encoded index (what [`crate::Cache`] stores).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes of memory the index takes (its encoded form), for caches bounded by size.
    pub fn size_in_memory(&self) -> usize {
        self.bytes.capacity()
    }

    fn section(&self, s: Span) -> &[u8] {
        s.start
            .checked_add(s.len)
            .and_then(|end| self.bytes.get(s.start..end))
            .unwrap_or_default()
    }

    /// Entry `i`; `None` past the end or for a damaged record.
    pub(crate) fn entry_at(&self, i: usize) -> Option<Entry> {
        if i >= self.layout.entries {
            return None;
        }
        let at = self
            .layout
            .records
            .checked_add(i.checked_mul(record::RECORD_LEN)?)?;
        record::entry(self.bytes.get(at..at.checked_add(record::RECORD_LEN)?)?)
    }

    /// Every entry, in order (damaged records skipped).
    pub(crate) fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        (0..self.layout.entries).filter_map(|i| self.entry_at(i))
    }

    /// The entry numbers of hard-link group `g`.
    fn group(&self, g: usize) -> impl Iterator<Item = u32> + '_ {
        let starts = self.layout.group_starts;
        let bound = |k: usize| -> Option<usize> {
            let at = starts.checked_add(k.checked_mul(4)?)?;
            let b = self.bytes.get(at..at.checked_add(4)?)?;
            Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
        };
        let range = if g < self.layout.groups {
            bound(g).zip(g.checked_add(1).and_then(bound))
        } else {
            None
        };
        let members = self.section(Span {
            start: self.layout.members.start,
            len: self.layout.members.len.saturating_mul(4),
        });
        let (from, to) = range.unwrap_or((0, 0));
        members
            .get(from.saturating_mul(4)..to.saturating_mul(4))
            .unwrap_or_default()
            .chunks_exact(4)
            .filter_map(|c| c.try_into().ok().map(u32::from_le_bytes))
    }

    /// How many paths the index holds (the root included).
    pub fn len(&self) -> usize {
        self.layout.entries
    }

    /// Whether the index holds no path at all (never the case for a built or decoded
    /// index, which always holds the root).
    pub fn is_empty(&self) -> bool {
        self.layout.entries == 0
    }

    /// How many layers were applied to build it.
    pub fn layer_count(&self) -> u32 {
        self.layout.layers
    }

    /// Counts of what it holds.
    pub fn stats(&self) -> IndexStats {
        let mut s = IndexStats {
            kept_bytes: self.layout.blob.len as u64,
            ..IndexStats::default()
        };
        for e in self.entries() {
            match e.kind {
                Kind::Dir => s.dirs += 1,
                Kind::File { .. } => s.files += 1,
                Kind::Symlink(_) => s.symlinks += 1,
                Kind::Other => s.others += 1,
            }
        }
        s
    }

    /// Every path with its node, in path order (component by component, so a directory
    /// comes immediately before its contents and names in a directory sort bytewise).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Node)> + '_ {
        self.entries().map(|e| (self.span(e.path), self.node(&e)))
    }

    /// Where contents not kept in the index are read from: the layers' uncompressed tar
    /// streams.
    pub fn set_layer_source(&mut self, source: Arc<dyn LayerSource>) {
        self.source = Some(source);
    }

    /// The same index without its layer source (see [`BaseIndex::set_layer_source`]).
    pub fn without_layer_source(&self) -> BaseIndex {
        BaseIndex {
            source: None,
            ..self.clone()
        }
    }

    pub(crate) fn span(&self, s: Span) -> &str {
        let text = self.section(self.layout.text);
        s.start
            .checked_add(s.len)
            .and_then(|end| text.get(s.start..end))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    pub(crate) fn kept(&self, start: usize, size: u64) -> Option<&[u8]> {
        let len = usize::try_from(size).ok()?;
        self.section(self.layout.blob)
            .get(start..start.checked_add(len)?)
    }

    pub(crate) fn node(&self, e: &Entry) -> Node {
        Node {
            kind: match e.kind {
                Kind::Dir => NodeKind::Dir,
                Kind::File { size, .. } => NodeKind::File { size },
                Kind::Symlink(t) => NodeKind::Symlink {
                    target: self.span(t).to_string(),
                },
                Kind::Other => NodeKind::Other,
            },
            mode: e.meta.mode,
            uid: e.meta.uid,
            gid: e.meta.gid,
            link_id: e.link.map(u64::from),
        }
    }

    /// The entry index of `p` (any spelling; `None` when absent or not a path).
    fn find(&self, p: &str) -> Option<usize> {
        let clean;
        let p = if path::is_clean(p) {
            p
        } else {
            clean = path::normalize(p.as_bytes()).ok()?;
            &clean
        };
        let (mut lo, mut hi) = (0, self.layout.entries);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let here = self.entry_at(mid).map_or("", |e| self.span(e.path));
            match path::cmp(here, p) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    fn entry(&self, p: &str) -> Result<Entry, BaseError> {
        self.find(p)
            .and_then(|i| self.entry_at(i))
            .ok_or_else(|| BaseError::Io {
                path: p.to_string(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })
    }

    /// Where the contents of the regular file at `p` are when the index does not keep them:
    /// `None` when it does (or `p` is not a regular file). A caller that must not block in
    /// the planner fetches these beforehand ([`Located::read_from`]) and answers the
    /// planner's reads itself.
    pub fn location(&self, p: &str) -> Option<Located> {
        let e = self.entry_at(self.find(p)?)?;
        match e.kind {
            Kind::File {
                size,
                data:
                    Data::Located {
                        layer,
                        offset,
                        sparse,
                    },
            } => Some(Located {
                path: self.span(e.path).to_string(),
                size,
                layer,
                offset,
                sparse,
            }),
            _ => None,
        }
    }

    fn read_located(&self, at: Located) -> Result<Vec<u8>, BaseError> {
        let Some(source) = &self.source else {
            return Err(BaseError::Io {
                path: at.path.clone(),
                source: std::io::Error::other(format!(
                    "the contents are not in the base index (they are in layer {}) and no \
                     layer source is set",
                    at.layer
                )),
            });
        };
        let r = source
            .open_layer_at(at.layer, at.offset)
            .map_err(|e| BaseError::Io {
                path: at.path.clone(),
                source: std::io::Error::new(
                    e.kind(),
                    format!("opening layer {} at offset {}: {e}", at.layer, at.offset),
                ),
            })?;
        at.read_at(r)
    }
}

/// The contents of a file the index does not keep: which layer's uncompressed tar stream
/// holds them, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file's path in the index's spelling (absolute, clean).
    pub path: String,
    /// Its size.
    pub size: u64,
    /// The layer number (as given to [`crate::IndexBuilder::apply_layer`]).
    pub layer: u32,
    /// Offset in the uncompressed stream of the data (of the member header when sparse).
    pub offset: u64,
    /// A GNU sparse member: the member is parsed again to expand its holes.
    pub sparse: bool,
}

impl Located {
    /// The contents, from the layer's whole UNCOMPRESSED tar stream read from its first byte.
    /// The stream is read to its end, so a stream that checks its digest at its end vouches
    /// for the bytes returned.
    pub fn read_from(&self, mut layer: impl Read) -> Result<Vec<u8>, BaseError> {
        let skipped = std::io::copy(&mut (&mut layer).take(self.offset), &mut std::io::sink())
            .map_err(|e| self.err(layer_io(self.layer, e)))?;
        if skipped < self.offset {
            return Err(self.err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "layer {} ends at byte {skipped}, before offset {}",
                    self.layer, self.offset
                ),
            )));
        }
        self.read_at(layer)
    }

    fn err(&self, source: std::io::Error) -> BaseError {
        BaseError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The contents from a stream positioned at [`Located::offset`], read to its end.
    fn read_at(&self, mut r: impl Read) -> Result<Vec<u8>, BaseError> {
        let (layer, offset, size) = (self.layer, self.offset, self.size);
        let err = |e| self.err(layer_io(layer, e));
        let mut buf = Vec::with_capacity(usize::try_from(size.min(1 << 26)).unwrap_or(0));
        if self.sparse {
            let mut ar = tar::Archive::new(&mut r);
            let mut entries = ar.entries().map_err(err)?;
            let mut entry = match entries.next() {
                Some(entry) => entry.map_err(err)?,
                None => {
                    return Err(self.err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("layer {layer} has no tar member at offset {offset}"),
                    )));
                }
            };
            entry.read_to_end(&mut buf).map_err(err)?;
        } else {
            (&mut r).take(size).read_to_end(&mut buf).map_err(err)?;
        }
        // Read the stream to its end: a source that checks the layer's digest when its
        // stream ends (registry blobs, verified layout blobs) then vouches for these bytes.
        std::io::copy(&mut r, &mut std::io::sink()).map_err(err)?;
        if buf.len() as u64 != size {
            return Err(self.err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "layer {layer} gave {} bytes at offset {offset}, the index says {size}",
                    buf.len()
                ),
            )));
        }
        Ok(buf)
    }
}

fn layer_io(layer: u32, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("reading layer {layer}: {e}"))
}

impl BaseView for BaseIndex {
    fn lstat(&self, p: &str) -> Result<Option<Node>, BaseError> {
        Ok(self
            .find(p)
            .and_then(|i| self.entry_at(i))
            .map(|e| self.node(&e)))
    }

    fn read(&self, p: &str) -> Result<Vec<u8>, BaseError> {
        let e = self.entry(p)?;
        let Kind::File { size, data } = e.kind else {
            return Err(BaseError::NotAFile {
                path: p.to_string(),
            });
        };
        match data {
            Data::Kept(start) => {
                self.kept(start, size)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| BaseError::Io {
                        path: p.to_string(),
                        source: std::io::Error::other("the index's kept contents are inconsistent"),
                    })
            }
            Data::Located {
                layer,
                offset,
                sparse,
            } => self.read_located(Located {
                path: self.span(e.path).to_string(),
                size,
                layer,
                offset,
                sparse,
            }),
        }
    }

    fn children(&self, p: &str) -> Result<Vec<String>, BaseError> {
        let i = self.find(p).ok_or_else(|| BaseError::Io {
            path: p.to_string(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
        let Some(dir) = self.entry_at(i) else {
            return Ok(Vec::new());
        };
        if dir.kind != Kind::Dir {
            return Err(BaseError::Io {
                path: p.to_string(),
                source: std::io::Error::from(std::io::ErrorKind::NotADirectory),
            });
        }
        let mut names = Vec::new();
        let mut j = i + 1;
        while j < dir.end as usize {
            let Some(child) = self.entry_at(j) else {
                break;
            };
            names.push(path::file_name(self.span(child.path)).to_string());
            j = (child.end as usize).max(j + 1);
        }
        Ok(names)
    }

    fn hard_link_group(&self, link_id: u64) -> Result<Vec<String>, BaseError> {
        let g = usize::try_from(link_id).unwrap_or(usize::MAX);
        Ok(self
            .group(g)
            .filter_map(|i| self.entry_at(i as usize))
            .map(|e| self.span(e.path).to_string())
            .collect())
    }
}

/// The contents of a file being added to an [`Assembler`].
pub(crate) enum NewData<'a> {
    /// These bytes, kept in the index.
    Kept(&'a [u8]),
    /// In a layer.
    Located {
        layer: u32,
        offset: u64,
        sparse: bool,
    },
    /// The contents of the first member of its hard-link group.
    SameAsGroup,
}

/// What is being added to an [`Assembler`].
pub(crate) enum NewKind<'a> {
    Dir,
    File { size: u64, data: NewData<'a> },
    Symlink(&'a str),
    Other,
}

/// Builds a [`BaseIndex`] from entries given in path order, computing subtree ranges and
/// hard-link groups, and checking that the entries form a tree (an [`crate::IndexBuilder`]
/// gives it one by construction; the checks are what the encoded form's checksum vouches
/// for later).
pub(crate) struct Assembler {
    idx: Building,
    /// Entry indexes of the directories enclosing the last entry.
    stack: Vec<u32>,
}

/// The parts of an index being built.
struct Building {
    /// Paths and symlink targets.
    text: String,
    /// Kept file contents.
    blob: Vec<u8>,
    entries: Vec<Entry>,
    /// Members of each hard-link group, by entry index.
    groups: Vec<Vec<u32>>,
    layers: u32,
}

impl Building {
    fn span(&self, s: Span) -> &str {
        self.text.get(s.start..s.start + s.len).unwrap_or_default()
    }
}

impl Assembler {
    pub(crate) fn new(layers: u32, entries: usize, text: usize, blob: usize) -> Self {
        Self {
            idx: Building {
                text: String::with_capacity(text),
                blob: Vec::with_capacity(blob),
                entries: Vec::with_capacity(entries),
                groups: Vec::new(),
                layers,
            },
            stack: Vec::new(),
        }
    }

    /// Append an entry. `link` must name an existing group or the next new one. Returns
    /// why the entry does not fit, if it does not (it is appended either way).
    pub(crate) fn push(
        &mut self,
        p: &str,
        kind: NewKind<'_>,
        meta: Meta,
        link: Option<u32>,
    ) -> Result<(), &'static str> {
        let mut issue = None;
        let index = u32::try_from(self.idx.entries.len()).map_err(|_| "too many entries")?;
        if !path::is_clean(p) {
            issue = Some("path is not clean and absolute");
        }
        match self.idx.entries.last() {
            None if p != "/" || !matches!(kind, NewKind::Dir) => {
                issue = issue.or(Some("the first entry is not the root directory"));
            }
            Some(last) if path::cmp(self.idx.span(last.path), p).is_ge() => {
                issue = issue.or(Some("paths are not sorted"));
            }
            _ => {}
        }
        // Close the directories this entry is not inside of.
        while let Some(&top) = self.stack.last() {
            let top_path = self
                .idx
                .entries
                .get(top as usize)
                .map_or("", |e| self.idx.span(e.path));
            if path::is_ancestor_or_self(top_path, p) && top_path != p {
                break;
            }
            if let Some(e) = self.idx.entries.get_mut(top as usize) {
                e.end = index;
            }
            self.stack.pop();
        }
        if p != "/" {
            let parent_ok = self.stack.last().is_some_and(|&top| {
                self.idx
                    .entries
                    .get(top as usize)
                    .is_some_and(|e| self.idx.span(e.path) == path::parent(p))
            });
            if !parent_ok {
                issue = issue.or(Some("the parent directory is not in the index"));
            }
        }
        let start = self.idx.text.len();
        self.idx.text.push_str(p);
        let path_span = Span {
            start,
            len: p.len(),
        };
        let kind = match kind {
            NewKind::Dir => Kind::Dir,
            NewKind::Other => Kind::Other,
            NewKind::Symlink(t) => {
                let start = self.idx.text.len();
                self.idx.text.push_str(t);
                Kind::Symlink(Span {
                    start,
                    len: t.len(),
                })
            }
            NewKind::File { size, data } => {
                let data = match data {
                    NewData::Kept(bytes) => {
                        if bytes.len() as u64 != size {
                            issue = issue.or(Some("kept contents do not match the size"));
                        }
                        let start = self.idx.blob.len();
                        self.idx.blob.extend_from_slice(bytes);
                        Data::Kept(start)
                    }
                    NewData::Located {
                        layer,
                        offset,
                        sparse,
                    } => {
                        if layer >= self.idx.layers {
                            issue = issue.or(Some("contents are in a layer that was not applied"));
                        }
                        Data::Located {
                            layer,
                            offset,
                            sparse,
                        }
                    }
                    NewData::SameAsGroup => {
                        let first = link
                            .and_then(|g| self.idx.groups.get(g as usize))
                            .and_then(|g| g.first())
                            .and_then(|&i| self.idx.entries.get(i as usize));
                        match first.map(|e| e.kind) {
                            Some(Kind::File { size: s, data }) if s == size => data,
                            _ => {
                                issue = issue.or(Some("contents refer to no earlier hard link"));
                                Data::Kept(0)
                            }
                        }
                    }
                };
                Kind::File { size, data }
            }
        };
        if let Some(g) = link {
            if !matches!(kind, Kind::File { .. }) {
                issue = issue.or(Some("a hard-link group on a non-file"));
            }
            match (g as usize).cmp(&self.idx.groups.len()) {
                std::cmp::Ordering::Less => {
                    if let Some(members) = self.idx.groups.get_mut(g as usize) {
                        members.push(index);
                    }
                }
                std::cmp::Ordering::Equal => self.idx.groups.push(vec![index]),
                std::cmp::Ordering::Greater => {
                    issue = issue.or(Some("hard-link group numbers are not in order"));
                }
            }
        }
        self.idx.entries.push(Entry {
            path: path_span,
            kind,
            meta,
            link,
            end: index + 1,
        });
        if kind == Kind::Dir {
            self.stack.push(index);
        }
        match issue {
            Some(i) => Err(i),
            None => Ok(()),
        }
    }

    /// The index, or why it is not a valid one (no root, a hard-link group of one) or does
    /// not fit the encoded form.
    pub(crate) fn finish(mut self) -> Result<BaseIndex, String> {
        let n = u32::try_from(self.idx.entries.len()).unwrap_or(u32::MAX);
        for top in self.stack.drain(..) {
            if let Some(e) = self.idx.entries.get_mut(top as usize) {
                e.end = n;
            }
        }
        if self.idx.entries.is_empty() {
            return Err("no root directory".into());
        }
        if self.idx.groups.iter().any(|g| g.len() < 2) {
            return Err("a hard-link group with one member".into());
        }
        let b = &self.idx;
        let bytes = record::encode(&record::Parts {
            layers: b.layers,
            text: &b.text,
            blob: &b.blob,
            entries: &b.entries,
            groups: &b.groups,
        })
        .map_err(|e| e.to_string())?;
        let layout = record::layout(&bytes).map_err(|e| e.to_string())?;
        Ok(BaseIndex::with_layout(bytes, layout))
    }
}
