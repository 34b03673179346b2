//! What the plan may ask of a base image's filesystem, and a view over a directory tree.
//!
//! Paths are absolute, clean, relative to the image root (`/etc/passwd`), and are never
//! resolved through symlinks by the view: resolution is the planner's job.

use std::path::{Path, PathBuf};

/// The type of a node in the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    /// A regular file of this size.
    File {
        /// Size in bytes.
        size: u64,
    },
    /// A directory.
    Dir,
    /// A symbolic link with its target, verbatim.
    Symlink {
        /// The link target.
        target: String,
    },
    /// A device, fifo or socket.
    Other,
}

/// Metadata of one node, as `lstat` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Type.
    pub kind: NodeKind,
    /// Permission bits including setuid/setgid/sticky (`mode & 0o7777`).
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Hard-link identity: nodes with the same `Some` value are one inode.
    pub link_id: Option<u64>,
}

/// Why the base could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// An I/O error on the base.
    #[error("reading base {path}: {source}")]
    Io {
        /// The path in the image.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A path that is not a regular file was read.
    #[error("reading base {path}: not a regular file")]
    NotAFile {
        /// The path in the image.
        path: String,
    },
}

/// Read access to a base image's filesystem.
pub trait BaseView {
    /// Metadata of `path` without following a final symlink; `None` if absent.
    fn lstat(&self, path: &str) -> Result<Option<Node>, BaseError>;
    /// Contents of the regular file at `path`.
    fn read(&self, path: &str) -> Result<Vec<u8>, BaseError>;
    /// Names of the entries in the directory at `path`, sorted.
    fn children(&self, path: &str) -> Result<Vec<String>, BaseError>;
}

/// A base filesystem that is a directory tree on disk (an unpacked rootfs).
#[derive(Debug, Clone)]
pub struct DirView {
    root: PathBuf,
}

impl DirView {
    /// A view of the tree under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory this view reads.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
