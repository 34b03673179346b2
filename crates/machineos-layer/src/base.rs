//! What the plan may ask of a base image's filesystem, and a view over a directory tree.
//!
//! Paths are absolute, clean, relative to the image root (`/etc/passwd`), and are never
//! resolved through symlinks by the view: resolution is the planner's job.

use std::path::{Path, PathBuf};

use machineos_diagnostics::{Classify, Retry, io_retry};

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
///
/// `Display` carries the cause; `source()` is `None` (the workspace's convention for
/// causes). Written by hand rather than with thiserror because the field of
/// [`BaseError::Io`] is named `source`, which thiserror would expose, and other crates build
/// the variant by that name.
#[derive(Debug)]
pub enum BaseError {
    /// An I/O error on the base.
    Io {
        /// The path in the image.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A path that is not a regular file was read.
    NotAFile {
        /// The path in the image.
        path: String,
    },
}

impl std::fmt::Display for BaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaseError::Io { path, source } => write!(f, "reading base {path}: {source}"),
            BaseError::NotAFile { path } => write!(f, "reading base {path}: not a regular file"),
        }
    }
}

impl std::error::Error for BaseError {}

impl Classify for BaseError {
    /// `BaseUnreadable`.
    fn reason(&self) -> &'static str {
        "BaseUnreadable"
    }

    /// An I/O error's by its kind ([`io_retry`]: a timeout or a full disk passes); a
    /// non-file read is permanent (the view disagrees with itself).
    fn retry(&self) -> Retry {
        match self {
            BaseError::Io { source, .. } => io_retry(source),
            BaseError::NotAFile { .. } => Retry::Permanent,
        }
    }
}

/// Read access to a base image's filesystem.
pub trait BaseView {
    /// Metadata of `path` without following a final symlink; `None` if absent.
    fn lstat(&self, path: &str) -> Result<Option<Node>, BaseError>;
    /// Contents of the regular file at `path`.
    fn read(&self, path: &str) -> Result<Vec<u8>, BaseError>;
    /// Names of the entries in the directory at `path`, sorted.
    fn children(&self, path: &str) -> Result<Vec<String>, BaseError>;
    /// Every path whose node has hard-link identity `link_id` (see [`Node::link_id`]),
    /// sorted.
    fn hard_link_group(&self, link_id: u64) -> Result<Vec<String>, BaseError>;
}

/// A base filesystem that is a directory tree on disk (an unpacked rootfs).
#[derive(Debug, Clone)]
pub struct DirView {
    root: PathBuf,
    links: std::sync::OnceLock<std::collections::BTreeMap<u64, Vec<String>>>,
}

impl DirView {
    /// A view of the tree under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            links: std::sync::OnceLock::new(),
        }
    }

    /// The directory this view reads.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl DirView {
    fn host(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

fn io(path: &str) -> impl FnOnce(std::io::Error) -> BaseError + '_ {
    move |source| BaseError::Io {
        path: path.to_string(),
        source,
    }
}

impl BaseView for DirView {
    fn lstat(&self, path: &str) -> Result<Option<Node>, BaseError> {
        use std::os::unix::fs::MetadataExt;
        let host = self.host(path);
        let md = match std::fs::symlink_metadata(&host) {
            Ok(md) => md,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(20) => return Ok(None), // ENOTDIR
            Err(e) => return Err(io(path)(e)),
        };
        let ft = md.file_type();
        let kind = if ft.is_symlink() {
            let target = std::fs::read_link(&host).map_err(io(path))?;
            NodeKind::Symlink {
                target: target.to_string_lossy().into_owned(),
            }
        } else if ft.is_dir() {
            NodeKind::Dir
        } else if ft.is_file() {
            NodeKind::File { size: md.len() }
        } else {
            NodeKind::Other
        };
        let link_id = (ft.is_file() && md.nlink() > 1).then(|| md.ino());
        Ok(Some(Node {
            kind,
            mode: md.mode() & 0o7777,
            uid: md.uid(),
            gid: md.gid(),
            link_id,
        }))
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, BaseError> {
        let host = self.host(path);
        let md = std::fs::symlink_metadata(&host).map_err(io(path))?;
        if !md.file_type().is_file() {
            return Err(BaseError::NotAFile {
                path: path.to_string(),
            });
        }
        std::fs::read(host).map_err(io(path))
    }

    fn children(&self, path: &str) -> Result<Vec<String>, BaseError> {
        let host = self.host(path);
        let mut names = Vec::new();
        for e in std::fs::read_dir(&host).map_err(io(path))? {
            names.push(
                e.map_err(io(path))?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        names.sort();
        Ok(names)
    }

    fn hard_link_group(&self, link_id: u64) -> Result<Vec<String>, BaseError> {
        if self.links.get().is_none() {
            let mut map = std::collections::BTreeMap::new();
            self.walk_links("/", &mut map)?;
            let _ = self.links.set(map);
        }
        Ok(self
            .links
            .get()
            .and_then(|m| m.get(&link_id))
            .cloned()
            .unwrap_or_default())
    }
}

impl DirView {
    /// Collect multiply-linked regular files by inode (a whole-tree walk, done once).
    fn walk_links(
        &self,
        dir: &str,
        map: &mut std::collections::BTreeMap<u64, Vec<String>>,
    ) -> Result<(), BaseError> {
        for name in self.children(dir)? {
            let p = crate::path::join(dir, &name);
            match self.lstat(&p)? {
                Some(Node {
                    kind: NodeKind::Dir,
                    ..
                }) => self.walk_links(&p, map)?,
                Some(Node {
                    link_id: Some(id), ..
                }) => map.entry(id).or_default().push(p),
                _ => {}
            }
        }
        Ok(())
    }
}
