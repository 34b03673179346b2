//! What differs between two indexed filesystems: [`compare`] walks two indexes side by side
//! (both are in path order) and lists every path added, removed or modified, without reading
//! a layer. Pure.
//!
//! Contents are compared as far as the indexes can tell: two regular files of the same size
//! whose bytes sit at the same offset of the same layer (`same_layer` says which layer
//! numbers of the two images are one blob, by its digest) are equal; two files whose
//! contents both indexes keep are compared byte for byte; any other pair of equal-sized
//! files is [`Content::Unknown`] — the caller reads both (see
//! [`crate::Located::read_from`]) and drops the pair when the bytes and the metadata agree.
//! Files of different sizes differ without reading.
//!
//! What counts: the node's kind, permission bits (`mode & 0o7777`), owner, size, symlink
//! target and contents. Hard-link identities are index-local numbers and are not compared;
//! nor are modification times, which the index does not keep.

use std::cmp::Ordering;
use std::path::Path;

use machineos_layer::{BaseView, Node, NodeKind};

use crate::BaseIndex;
use crate::record::{Data, Kind};

/// How a path differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Only in the second filesystem.
    Added,
    /// Only in the first.
    Removed,
    /// In both, different.
    Modified,
}

/// What the indexes say of two regular files' contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Not two regular files (or one side missing).
    NotFiles,
    /// Equal (same layer bytes, or equal kept bytes).
    Same,
    /// Different (different sizes, or different kept bytes).
    Differs,
    /// Equal sizes, bytes not at hand: read both to tell.
    Unknown,
}

/// One path that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The path (absolute, clean).
    pub path: String,
    /// Added, removed or modified.
    pub change: Change,
    /// The node in the first filesystem.
    pub before: Option<Node>,
    /// The node in the second.
    pub after: Option<Node>,
    /// For two regular files: their contents as far as the indexes tell.
    pub content: Content,
}

impl Difference {
    /// Whether the metadata (kind, target, mode, owner, size) differs.
    pub fn metadata_differs(&self) -> bool {
        match (&self.before, &self.after) {
            (Some(a), Some(b)) => !same_metadata(a, b),
            _ => true,
        }
    }
}

fn same_metadata(a: &Node, b: &Node) -> bool {
    a.kind == b.kind && a.mode == b.mode && a.uid == b.uid && a.gid == b.gid
}

/// Every path that differs between `a` and `b`, in path order; `same_layer(i, j)`: whether
/// layer `i` of `a` and layer `j` of `b` are the same blob (see the module documentation).
pub fn compare(
    a: &BaseIndex,
    b: &BaseIndex,
    same_layer: &dyn Fn(u32, u32) -> bool,
) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut left = a.entries().peekable();
    let mut right = b.entries().peekable();
    loop {
        let order = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => Path::new(a.span(x.path)).cmp(Path::new(b.span(y.path))),
        };
        match order {
            Ordering::Less => {
                let Some(x) = left.next() else { break };
                out.push(Difference {
                    path: a.span(x.path).to_owned(),
                    change: Change::Removed,
                    before: Some(a.node(&x)),
                    after: None,
                    content: Content::NotFiles,
                });
            }
            Ordering::Greater => {
                let Some(y) = right.next() else { break };
                out.push(Difference {
                    path: b.span(y.path).to_owned(),
                    change: Change::Added,
                    before: None,
                    after: Some(b.node(&y)),
                    content: Content::NotFiles,
                });
            }
            Ordering::Equal => {
                let (Some(x), Some(y)) = (left.next(), right.next()) else {
                    break;
                };
                let path = a.span(x.path);
                let (na, nb) = (a.node(&x), b.node(&y));
                let content = match (x.kind, y.kind) {
                    (Kind::File { size: sa, data: da }, Kind::File { size: sb, data: db }) => {
                        if sa != sb {
                            Content::Differs
                        } else {
                            match (da, db) {
                                (
                                    Data::Located {
                                        layer: la,
                                        offset: oa,
                                        sparse: pa,
                                    },
                                    Data::Located {
                                        layer: lb,
                                        offset: ob,
                                        sparse: pb,
                                    },
                                ) if oa == ob && pa == pb && same_layer(la, lb) => Content::Same,
                                (Data::Kept(_), Data::Kept(_)) => {
                                    match (a.read(path), b.read(path)) {
                                        (Ok(ca), Ok(cb)) if ca == cb => Content::Same,
                                        (Ok(_), Ok(_)) => Content::Differs,
                                        _ => Content::Unknown,
                                    }
                                }
                                _ => Content::Unknown,
                            }
                        }
                    }
                    _ => Content::NotFiles,
                };
                let same =
                    same_metadata(&na, &nb) && matches!(content, Content::NotFiles | Content::Same);
                if !same {
                    out.push(Difference {
                        path: path.to_owned(),
                        change: Change::Modified,
                        before: Some(na),
                        after: Some(nb),
                        content,
                    });
                }
            }
        }
    }
    out
}

impl Change {
    /// `added`, `removed` or `modified`.
    pub fn name(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Modified => "modified",
        }
    }
}

/// The node kind's name: `file`, `dir`, `symlink` or `other`.
pub fn kind_name(node: &Node) -> &'static str {
    match node.kind {
        NodeKind::File { .. } => "file",
        NodeKind::Dir => "dir",
        NodeKind::Symlink { .. } => "symlink",
        NodeKind::Other => "other",
    }
}
