//! What one planned tar entry is: a path, its kind (directory, file, symlink, hard link,
//! whiteout), its owner and mode, and for a regular file where its bytes come from — fixed
//! text, a caller's extra file, or a generated stream whose size is set once the whole tree
//! is planned. Also the magic numbers generated files start with.

use crate::content::Style;

/// Owner and permission bits of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    /// Permission bits including setuid/setgid/sticky.
    pub(crate) mode: u32,
    /// Numeric owner.
    pub(crate) uid: u32,
    /// Numeric group.
    pub(crate) gid: u32,
}

/// Owner and mode `mode`, `uid`, `gid`, usable in constants.
pub(crate) const fn meta(mode: u32, uid: u32, gid: u32) -> Meta {
    Meta { mode, uid, gid }
}

/// A directory owned by root: `0755 root:root`.
pub(crate) const DIR: Meta = meta(0o755, 0, 0);
/// A regular file owned by root: `0644 root:root`.
pub(crate) const REG: Meta = meta(0o644, 0, 0);
/// An executable owned by root: `0755 root:root`.
pub(super) const EXE: Meta = meta(0o755, 0, 0);
/// A symlink: `0777 root:root`.
pub(super) const LINK: Meta = meta(0o777, 0, 0);

/// A generated file's contents, sized after the whole tree is planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Synth {
    /// Seed of the content stream.
    pub(crate) seed: u64,
    /// Relative share of the byte budget.
    pub(crate) weight: u64,
    /// Final size in bytes.
    pub(crate) size: u64,
    /// Content style.
    pub(crate) style: Style,
    /// Magic number at the start of the file.
    pub(crate) prefix: &'static [u8],
}

/// Where a regular file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body<'s> {
    /// Small fixed text (passwd, units, presets, …).
    Inline(Vec<u8>),
    /// An extra file of the spec.
    Extra(&'s [u8]),
    /// Generated on the fly while writing.
    Synth(Synth),
}

impl Body<'_> {
    /// Size in bytes (for `Synth`, once sizes are assigned).
    pub(crate) fn len(&self) -> u64 {
        match self {
            Body::Inline(b) => b.len() as u64,
            Body::Extra(b) => b.len() as u64,
            Body::Synth(s) => s.size,
        }
    }
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind<'s> {
    /// A directory.
    Dir,
    /// A regular file.
    File(Body<'s>),
    /// A symlink to the target.
    Symlink(String),
    /// A hard link to an earlier entry of the same layer (path relative to the root).
    HardLink(String),
    /// An empty whiteout or opaque marker file (`.wh.<name>`, `.wh..wh..opq`); the path
    /// includes the prefix.
    Whiteout,
}

/// One tar entry: a path relative to the root (`usr/bin/bash`), its kind and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node<'s> {
    /// Path without leading `/`.
    pub(crate) path: String,
    /// Kind and contents.
    pub(crate) kind: Kind<'s>,
    /// Owner and mode.
    pub(crate) meta: Meta,
}

/// The start of a 64-bit little-endian ELF file (binaries, libraries).
pub(super) const ELF: &[u8] = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00";
/// The start of a gzip stream (man pages).
pub(super) const GZIP: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03";
/// The start of an xz stream (kernel modules, firmware).
pub(super) const XZ: &[u8] = b"\xfd7zXZ\x00";
