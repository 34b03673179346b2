//! The image root as the plan sees it while it works: the base view with this layer's
//! changes on top, and the primitive operations Ignition performs (mkdir -p, rm -rf,
//! create), each recorded as data. Paths here are absolute and already resolved.

use std::collections::BTreeMap;

use machineos_diagnostics::{Classify, Retry};

use crate::base::{BaseError, BaseView, Node, NodeKind};
use crate::contents::{Contents, ContentsError, MAX_READ};

/// What a node of the layer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayerKind {
    /// A regular file with its contents.
    File(Contents),
    /// A directory; `opaque` when it replaced a base directory (its base contents are gone).
    Dir {
        /// Hides the base directory's contents.
        opaque: bool,
    },
    /// A symbolic link, target verbatim.
    Symlink(String),
    /// A hard link to another path of this layer (absolute).
    HardLink(String),
}

/// A node the layer adds or replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerNode {
    /// Type and payload.
    pub kind: LayerKind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// A change at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Present in the layer.
    Node(LayerNode),
    /// Removed (a whiteout if the base has it).
    Removed,
}

/// The type of what is at a path, merged over base and layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symlink with its target.
    Symlink(String),
    /// Device, fifo, socket.
    Other,
}

/// `lstat` of the merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Type.
    pub kind: Kind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Inode identity, for hard-link comparisons.
    pub inode: Inode,
}

/// Inode identity across base and layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inode {
    /// A base node, by its hard-link group or its own path.
    Base(String),
    /// A layer node, by the path that owns its data.
    Layer(String),
}

/// Why an overlay operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// Reading the base failed.
    #[error(transparent)]
    Base(#[from] BaseError),
    /// A path component that must be a directory is not.
    #[error("{0}: not a directory")]
    NotADirectory(String),
    /// Too many symlinks.
    #[error("{0}: too many levels of symbolic links")]
    Loop(String),
    /// A file of the layer could not be read (too large to look into, say).
    #[error("{0}: {1}")]
    Contents(String, ContentsError),
    /// A hard link of the layer points at a path the layer does not hold (a bug of ours).
    #[error("{0}: a hard link of the layer points here, but the layer has no file here")]
    DanglingLink(String),
}

impl Classify for OverlayError {
    /// The base's (`BaseUnreadable`) or the contents' reason (`ContentsTooLarge`, …);
    /// `ConflictWithBase` for a component that is not a directory or a symlink loop (the
    /// config's paths and the base's nodes do not fit); `InternalError` for a dangling link.
    fn reason(&self) -> &'static str {
        match self {
            OverlayError::Base(e) => e.reason(),
            OverlayError::Contents(_, e) => e.reason(),
            OverlayError::NotADirectory(_) | OverlayError::Loop(_) => "ConflictWithBase",
            OverlayError::DanglingLink(_) => "InternalError",
        }
    }

    /// The cause's for the base and the contents; permanent otherwise.
    fn retry(&self) -> Retry {
        match self {
            OverlayError::Base(e) => e.retry(),
            OverlayError::Contents(_, e) => e.retry(),
            OverlayError::NotADirectory(_)
            | OverlayError::Loop(_)
            | OverlayError::DanglingLink(_) => Retry::Permanent,
        }
    }
}

/// Base + changes.
pub struct Overlay<'a> {
    base: &'a dyn BaseView,
    changes: BTreeMap<String, Change>,
}

pub use crate::path::{join, parent};

impl<'a> Overlay<'a> {
    /// An overlay with no changes yet.
    pub fn new(base: &'a dyn BaseView) -> Self {
        Self {
            base,
            changes: BTreeMap::new(),
        }
    }

    /// The recorded changes, by path.
    pub fn changes(&self) -> &BTreeMap<String, Change> {
        &self.changes
    }

    /// The base view.
    pub fn base(&self) -> &dyn BaseView {
        self.base
    }

    /// Whether the base's node at `path` is still visible (no ancestor replaced or removed).
    pub fn base_visible(&self, path: &str) -> Result<Option<Node>, OverlayError> {
        let mut a = path;
        while a != "/" {
            a = parent(a);
            if a == "/" {
                break;
            }
            match self.changes.get(a) {
                None => {}
                Some(Change::Removed) => return Ok(None),
                Some(Change::Node(n)) => match n.kind {
                    LayerKind::Dir { opaque: false } => {}
                    _ => return Ok(None),
                },
            }
        }
        Ok(self.base.lstat(path)?)
    }

    /// `lstat` of the merged view.
    pub fn lstat(&self, path: &str) -> Result<Option<Stat>, OverlayError> {
        if path == "/" {
            return Ok(Some(Stat {
                kind: Kind::Dir,
                mode: 0o755,
                uid: 0,
                gid: 0,
                inode: Inode::Base("/".into()),
            }));
        }
        match self.changes.get(path) {
            Some(Change::Removed) => Ok(None),
            Some(Change::Node(n)) => {
                let (owner, node) = match &n.kind {
                    LayerKind::HardLink(t) => match self.changes.get(t) {
                        Some(Change::Node(tn)) => (t.clone(), tn),
                        _ => (path.to_string(), n),
                    },
                    _ => (path.to_string(), n),
                };
                let kind = match &node.kind {
                    LayerKind::File(_) | LayerKind::HardLink(_) => Kind::File,
                    LayerKind::Dir { .. } => Kind::Dir,
                    LayerKind::Symlink(t) => Kind::Symlink(t.clone()),
                };
                Ok(Some(Stat {
                    kind,
                    mode: node.mode,
                    uid: node.uid,
                    gid: node.gid,
                    inode: Inode::Layer(owner),
                }))
            }
            None => Ok(self.base_visible(path)?.map(|n| Stat {
                kind: match n.kind {
                    NodeKind::File { .. } => Kind::File,
                    NodeKind::Dir => Kind::Dir,
                    NodeKind::Symlink { target } => Kind::Symlink(target),
                    NodeKind::Other => Kind::Other,
                },
                mode: n.mode,
                uid: n.uid,
                gid: n.gid,
                inode: Inode::Base(
                    n.link_id
                        .map_or_else(|| path.to_string(), |id| format!("#{id}")),
                ),
            })),
        }
    }

    /// The bytes of the regular file at `path` (layer or base), to look into: at most
    /// [`MAX_READ`] bytes of a file of this layer.
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>, OverlayError> {
        match self.changes.get(path) {
            Some(Change::Removed) => Ok(None),
            Some(Change::Node(n)) => match &n.kind {
                LayerKind::File(c) => c
                    .to_vec(MAX_READ)
                    .map(Some)
                    .map_err(|e| OverlayError::Contents(path.to_string(), e)),
                LayerKind::HardLink(t) => self.read(t),
                _ => Ok(None),
            },
            None => match self.base_visible(path)? {
                Some(Node {
                    kind: NodeKind::File { .. },
                    ..
                }) => Ok(Some(self.base.read(path)?)),
                _ => Ok(None),
            },
        }
    }

    /// The contents of the regular file at `path` (layer or base), to extend: a layer file's
    /// recipe as it is (nothing decoded), a base file's bytes.
    pub fn contents(&self, path: &str) -> Result<Option<Contents>, OverlayError> {
        match self.changes.get(path) {
            Some(Change::Removed) => Ok(None),
            Some(Change::Node(n)) => match &n.kind {
                LayerKind::File(c) => Ok(Some(c.clone())),
                LayerKind::HardLink(t) => self.contents(t),
                _ => Ok(None),
            },
            None => match self.base_visible(path)? {
                Some(Node {
                    kind: NodeKind::File { .. },
                    ..
                }) => Ok(Some(Contents::bytes(self.base.read(path)?))),
                _ => Ok(None),
            },
        }
    }

    /// Names in the directory at `path`, merged.
    pub fn children(&self, path: &str) -> Result<Vec<String>, OverlayError> {
        let mut names = std::collections::BTreeSet::new();
        if let Some(Stat {
            kind: Kind::Dir, ..
        }) = self.lstat(path)?
        {
            if matches!(
                self.base_visible(path)?,
                Some(Node {
                    kind: NodeKind::Dir,
                    ..
                })
            ) && !matches!(
                self.changes.get(path),
                Some(Change::Node(LayerNode {
                    kind: LayerKind::Dir { opaque: true },
                    ..
                }))
            ) {
                names.extend(self.base.children(path)?);
            }
            let prefix = if path == "/" {
                "/".to_string()
            } else {
                format!("{path}/")
            };
            for (p, _) in self.changes.range(prefix.clone()..) {
                let Some(rest) = p.strip_prefix(&prefix) else {
                    break;
                };
                if !rest.is_empty() && !rest.contains('/') {
                    names.insert(rest.to_string());
                }
            }
        }
        let mut out = Vec::new();
        for n in names {
            if self.lstat(&join(path, &n))?.is_some() {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Resolve every symlink in the components of `path` except the last, inside the
    /// root: absolute targets are rooted at the image, `..` never climbs above `/`.
    pub fn resolve_parent(&self, path: &str) -> Result<String, OverlayError> {
        self.resolve(path, false)
    }

    /// Resolve every component including the last (what `stat` follows).
    pub fn resolve_all(&self, path: &str) -> Result<String, OverlayError> {
        self.resolve(path, true)
    }

    fn resolve(&self, path: &str, follow_last: bool) -> Result<String, OverlayError> {
        let mut pending: Vec<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(str::to_string)
            .collect();
        let mut cur = String::from("/");
        let mut hops = 0;
        while let Some(comp) = pending.pop() {
            if comp == "." {
                continue;
            }
            if comp == ".." {
                cur = parent(&cur).to_string();
                continue;
            }
            let next = join(&cur, &comp);
            let is_last = pending.is_empty();
            if is_last && !follow_last {
                return Ok(next);
            }
            match self.lstat(&next)? {
                Some(Stat {
                    kind: Kind::Symlink(target),
                    ..
                }) => {
                    hops += 1;
                    if hops > 40 {
                        return Err(OverlayError::Loop(path.to_string()));
                    }
                    if target.starts_with('/') {
                        cur = "/".into();
                    }
                    pending.extend(
                        target
                            .split('/')
                            .filter(|c| !c.is_empty())
                            .rev()
                            .map(str::to_string),
                    );
                }
                _ => cur = next,
            }
        }
        Ok(cur)
    }

    /// `mkdir -p` of the directory `dir` (resolved): missing components become 0755 root.
    pub fn mkdir_all(&mut self, dir: &str) -> Result<(), OverlayError> {
        let mut cur = String::from("/");
        for comp in dir.split('/').filter(|c| !c.is_empty()) {
            cur = join(&cur, comp);
            match self.lstat(&cur)? {
                None => self.put(&cur, LayerKind::Dir { opaque: false }, 0o755, 0, 0)?,
                Some(Stat {
                    kind: Kind::Dir, ..
                }) => {}
                Some(_) => return Err(OverlayError::NotADirectory(cur)),
            }
        }
        Ok(())
    }

    /// `rm -rf path`.
    pub fn remove_all(&mut self, path: &str) -> Result<(), OverlayError> {
        if self.lstat(path)?.is_none() {
            return Ok(());
        }
        let prefix = format!("{path}/");
        let below: Vec<String> = self
            .changes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for p in below.iter().chain(std::iter::once(&path.to_string())) {
            self.detach_links(p);
        }
        for p in below {
            self.changes.remove(&p);
        }
        // A base node hidden only by our own change at `path` needs a whiteout.
        self.changes.remove(path);
        if self.base_visible(path)?.is_some() {
            self.changes.insert(path.to_string(), Change::Removed);
        }
        Ok(())
    }

    /// Before the node at `path` goes away, its other hard-link names keep the inode: the
    /// first becomes the owner of the data, the rest point at it.
    fn detach_links(&mut self, path: &str) {
        let names: Vec<String> = self
            .changes
            .iter()
            .filter(|(p, c)| *p != path && matches!(c, Change::Node(LayerNode { kind: LayerKind::HardLink(t), .. }) if t == path))
            .map(|(p, _)| p.clone())
            .collect();
        let Some((first, rest)) = names.split_first() else {
            return;
        };
        if let Some(Change::Node(n)) = self.changes.get(path).cloned() {
            self.changes.insert(first.clone(), Change::Node(n));
        }
        for r in rest {
            if let Some(Change::Node(n)) = self.changes.get_mut(r) {
                n.kind = LayerKind::HardLink(first.clone());
            }
        }
    }

    /// Create or replace the node at `path` (its parent must exist).
    pub fn put(
        &mut self,
        path: &str,
        kind: LayerKind,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), OverlayError> {
        let kind = match kind {
            LayerKind::Dir { .. } => {
                // Replacing a removed base directory hides its old contents.
                let opaque = matches!(self.changes.get(path), Some(Change::Removed))
                    && matches!(
                        self.base_visible(path)?,
                        Some(Node {
                            kind: NodeKind::Dir,
                            ..
                        })
                    );
                let was_opaque = matches!(
                    self.changes.get(path),
                    Some(Change::Node(LayerNode {
                        kind: LayerKind::Dir { opaque: true },
                        ..
                    }))
                );
                LayerKind::Dir {
                    opaque: opaque || was_opaque,
                }
            }
            k => k,
        };
        self.changes.insert(
            path.to_string(),
            Change::Node(LayerNode {
                kind,
                mode,
                uid,
                gid,
            }),
        );
        Ok(())
    }

    /// Copy the visible node at `path` into the layer unchanged (so metadata can change,
    /// or a hard link can point at it). No-op if already in the layer.
    ///
    /// A base file's other hard-link names follow it (they become links to the copy), so a
    /// write to the inode shows through all of them, as Ignition's would — except when the
    /// group is an ostree object store's deduplication ([`is_ostree_dedup`]): then the
    /// names only share an inode because their contents are equal, a node never links
    /// them (its `/etc` is a copy, its `/usr` read-only objects), and the copy stands
    /// alone.
    pub fn copy_up(&mut self, path: &str) -> Result<(), OverlayError> {
        if self.changes.contains_key(path) {
            return Ok(());
        }
        let Some(st) = self.lstat(path)? else {
            return Ok(());
        };
        // A base file with other names keeps them: they become hard links to the copy.
        if let (Kind::File, Inode::Base(id)) = (&st.kind, &st.inode)
            && let Some(id) = id.strip_prefix('#').and_then(|i| i.parse::<u64>().ok())
        {
            let group = self.base.hard_link_group(id)?;
            let others = if is_ostree_dedup(&group) {
                Vec::new()
            } else {
                group
            };
            for other in others {
                if other != path
                    && !self.changes.contains_key(&other)
                    && self.base_visible(&other)?.is_some()
                {
                    self.changes.insert(
                        other,
                        Change::Node(LayerNode {
                            kind: LayerKind::HardLink(path.to_string()),
                            mode: st.mode,
                            uid: st.uid,
                            gid: st.gid,
                        }),
                    );
                }
            }
        }
        let kind = match st.kind {
            Kind::File => LayerKind::File(Contents::bytes(self.base.read(path)?)),
            Kind::Dir => LayerKind::Dir { opaque: false },
            Kind::Symlink(t) => LayerKind::Symlink(t),
            Kind::Other => return Ok(()),
        };
        self.changes.insert(
            path.to_string(),
            Change::Node(LayerNode {
                kind,
                mode: st.mode,
                uid: st.uid,
                gid: st.gid,
            }),
        );
        Ok(())
    }

    /// The layer path holding the inode of `path`: its hard-link target, or itself.
    fn data_owner(&self, path: &str) -> String {
        match self.changes.get(path) {
            Some(Change::Node(LayerNode {
                kind: LayerKind::HardLink(t),
                ..
            })) => t.clone(),
            _ => path.to_string(),
        }
    }

    /// Replace the contents and metadata of the existing regular file at `path` in place:
    /// every hard-link name of it sees the change, as with a write to the inode.
    pub fn rewrite(
        &mut self,
        path: &str,
        data: Contents,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), OverlayError> {
        self.copy_up(path)?;
        let owner = self.data_owner(path);
        self.changes.insert(
            owner,
            Change::Node(LayerNode {
                kind: LayerKind::File(data),
                mode,
                uid,
                gid,
            }),
        );
        Ok(())
    }

    /// Change the mode/owner of a node in the layer (copying it up first).
    pub fn set_meta(
        &mut self,
        path: &str,
        mode: Option<u32>,
        uid: u32,
        gid: u32,
    ) -> Result<(), OverlayError> {
        if let Some(st) = self.lstat(path)?
            && mode.is_none_or(|m| m == st.mode)
            && (uid, gid) == (st.uid, st.gid)
        {
            return Ok(());
        }
        self.copy_up(path)?;
        let owner = self.data_owner(path);
        if let Some(Change::Node(n)) = self.changes.get_mut(&owner) {
            if let Some(m) = mode {
                n.mode = m;
            }
            n.uid = uid;
            n.gid = gid;
        }
        Ok(())
    }
}

/// Where an ostree-encapsulated image keeps its content objects (absolute, with the
/// trailing `/`).
pub const OSTREE_OBJECTS: &str = "/sysroot/ostree/repo/objects/";

/// Whether a base hard-link group exists only through ostree's object store: one of its
/// names is a content object under [`OSTREE_OBJECTS`]. ostree-ext writes every non-empty
/// file of an encapsulated image as a hard link to its object, so unrelated files with
/// equal contents, mode and owner share an inode once unpacked; hard links a user makes
/// in a derived layer have no object name.
pub fn is_ostree_dedup(group: &[String]) -> bool {
    group.iter().any(|p| p.starts_with(OSTREE_OBJECTS))
}
