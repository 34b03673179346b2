//! A description of a directory tree that two trees can be compared by: per path (relative,
//! no leading `/`), its kind, mode, owner, the sha256 of a regular file's bytes, a
//! symlink's target, and which other paths share its inode.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a path is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file, by the sha256 of its bytes (hex).
    File(String),
    /// A symlink and its target.
    Symlink(String),
    /// Anything else (device, FIFO, socket).
    Other,
}

/// One path of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Kind and contents.
    pub kind: Kind,
    /// Permission bits (`0o7777` of `st_mode`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// The inode's identity within this snapshot (device and inode number), to tell which
    /// paths are hard links of each other.
    pub inode: (u64, u64),
}

/// A tree, by path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Every path below the root (the root itself is `""`).
    pub entries: BTreeMap<String, Entry>,
}

impl Snapshot {
    /// Describe the tree at `root` (symlinks are not followed).
    pub fn of(root: &Path) -> Result<Snapshot> {
        let mut s = Snapshot::default();
        walk(root, root, &mut s.entries)?;
        Ok(s)
    }

    /// The entry at `path` (relative, no leading `/`).
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.get(path.trim_start_matches('/'))
    }

    /// The other paths sharing the inode of `path`, sorted.
    pub fn links_of(&self, path: &str) -> Vec<&str> {
        let Some(e) = self.get(path) else {
            return Vec::new();
        };
        let me = path.trim_start_matches('/');
        self.entries
            .iter()
            .filter(|(p, o)| o.inode == e.inode && p.as_str() != me)
            .map(|(p, _)| p.as_str())
            .collect()
    }

    /// The paths below `prefix` (a directory, relative) with the prefix removed.
    pub fn subtree(&self, prefix: &str) -> Snapshot {
        let below = format!("{}/", prefix.trim_end_matches('/'));
        Snapshot {
            entries: self
                .entries
                .iter()
                .filter_map(|(p, e)| p.strip_prefix(&below).map(|r| (r.to_owned(), e.clone())))
                .collect(),
        }
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Entry>) -> Result<()> {
    let md = std::fs::symlink_metadata(dir).with_context(|| format!("lstat {}", dir.display()))?;
    let rel = dir
        .strip_prefix(root)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned();
    let ft = md.file_type();
    let kind = if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        let bytes = std::fs::read(dir).with_context(|| format!("reading {}", dir.display()))?;
        Kind::File(hex::encode(Sha256::digest(&bytes)))
    } else if ft.is_symlink() {
        let t = std::fs::read_link(dir).with_context(|| format!("readlink {}", dir.display()))?;
        Kind::Symlink(t.to_string_lossy().into_owned())
    } else {
        Kind::Other
    };
    out.insert(
        rel,
        Entry {
            kind: kind.clone(),
            mode: md.mode() & 0o7777,
            uid: md.uid(),
            gid: md.gid(),
            inode: (md.dev(), md.ino()),
        },
    );
    if kind == Kind::Dir {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .with_context(|| format!("listing {}", dir.display()))?;
        names.sort();
        for p in names {
            walk(root, &p, out)?;
        }
    }
    Ok(())
}
