//! Snapshots of directory trees (kind, mode, owner, size, link target, content hash) so tests
//! can compare unpacked images entry by entry and print readable differences.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// What kind of filesystem object an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::CharDevice => "char device",
            EntryKind::BlockDevice => "block device",
            EntryKind::Fifo => "fifo",
            EntryKind::Socket => "socket",
        })
    }
}

/// One path of a snapshot. Only properties that survive packing and unpacking are kept
/// (no timestamps, inode numbers or directory sizes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TreeEntry {
    /// Kind of object.
    pub kind: EntryKind,
    /// Permission bits including setuid/setgid/sticky (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// Content length for regular files; 0 for everything else.
    pub size: u64,
    /// Target of a symlink, as stored.
    pub link_target: Option<String>,
    /// Lowercase hex SHA-256 of a regular file's content.
    pub sha256: Option<String>,
    /// Device number (`st_rdev`) of character and block devices.
    pub rdev: Option<u64>,
}

/// Snapshots every path below `dir` (not `dir` itself), keyed by its path relative to `dir`
/// with a leading `/` (e.g. `/etc/hostname`). Symlinks are recorded, not followed.
///
/// # Panics
///
/// On any I/O error (with the offending path); use [`try_snapshot`] to get the error.
pub fn snapshot(dir: &Path) -> BTreeMap<String, TreeEntry> {
    match try_snapshot(dir) {
        Ok(tree) => tree,
        Err(err) => panic!("snapshot of {} failed: {err:#}", dir.display()),
    }
}

/// Like [`snapshot`], but returns I/O errors instead of panicking.
pub fn try_snapshot(dir: &Path) -> Result<BTreeMap<String, TreeEntry>> {
    let mut tree = BTreeMap::new();
    walk(dir, "", &mut tree)?;
    Ok(tree)
}

fn walk(dir: &Path, prefix: &str, tree: &mut BTreeMap<String, TreeEntry>) -> Result<()> {
    let entries =
        fs::read_dir(dir).with_context(|| format!("listing directory {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing directory {}", dir.display()))?;
        let path = entry.path();
        let key = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        let meta =
            fs::symlink_metadata(&path).with_context(|| format!("lstat {}", path.display()))?;
        let file_type = meta.file_type();
        let kind = if file_type.is_file() {
            EntryKind::File
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_char_device() {
            EntryKind::CharDevice
        } else if file_type.is_block_device() {
            EntryKind::BlockDevice
        } else if file_type.is_fifo() {
            EntryKind::Fifo
        } else {
            EntryKind::Socket
        };
        let link_target = if kind == EntryKind::Symlink {
            let target =
                fs::read_link(&path).with_context(|| format!("readlink {}", path.display()))?;
            Some(target.to_string_lossy().into_owned())
        } else {
            None
        };
        let sha256 = if kind == EntryKind::File {
            Some(hash_file(&path)?)
        } else {
            None
        };
        let rdev =
            matches!(kind, EntryKind::CharDevice | EntryKind::BlockDevice).then(|| meta.rdev());
        tree.insert(
            key.clone(),
            TreeEntry {
                kind,
                mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
                size: if kind == EntryKind::File {
                    meta.len()
                } else {
                    0
                },
                link_target,
                sha256,
                rdev,
            },
        );
        if kind == EntryKind::Dir {
            walk(&path, &key, tree)?;
        }
    }
    Ok(())
}

fn hash_file(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Human-readable differences from `a` to `b`, one line per differing property, in path
/// order; empty when the snapshots are equal. Lines look like
/// `"/etc/x: only in a"`, `"/etc/y: mode 0644 != 0600"`.
pub fn diff(a: &BTreeMap<String, TreeEntry>, b: &BTreeMap<String, TreeEntry>) -> Vec<String> {
    let mut out = Vec::new();
    let mut paths: Vec<&String> = a.keys().chain(b.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        match (a.get(path), b.get(path)) {
            (Some(x), None) => out.push(format!("{path}: only in a ({})", x.kind)),
            (None, Some(y)) => out.push(format!("{path}: only in b ({})", y.kind)),
            (Some(x), Some(y)) => diff_entry(path, x, y, &mut out),
            (None, None) => {}
        }
    }
    out
}

fn diff_entry(path: &str, x: &TreeEntry, y: &TreeEntry, out: &mut Vec<String>) {
    if x.kind != y.kind {
        out.push(format!("{path}: kind {} != {}", x.kind, y.kind));
        return;
    }
    if x.mode != y.mode {
        out.push(format!("{path}: mode {:04o} != {:04o}", x.mode, y.mode));
    }
    if (x.uid, x.gid) != (y.uid, y.gid) {
        out.push(format!(
            "{path}: owner {}:{} != {}:{}",
            x.uid, x.gid, y.uid, y.gid
        ));
    }
    if x.size != y.size {
        out.push(format!("{path}: size {} != {}", x.size, y.size));
    }
    if x.sha256 != y.sha256 && x.size == y.size {
        out.push(format!("{path}: content differs (same size)"));
    }
    if x.link_target != y.link_target {
        out.push(format!(
            "{path}: link target {:?} != {:?}",
            x.link_target.as_deref().unwrap_or_default(),
            y.link_target.as_deref().unwrap_or_default()
        ));
    }
    if x.rdev != y.rdev {
        out.push(format!(
            "{path}: device {:#x} != {:#x}",
            x.rdev.unwrap_or_default(),
            y.rdev.unwrap_or_default()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn build(root: &Path, content: &str, mode: u32) {
        fs::create_dir_all(root.join("etc/sub")).unwrap();
        fs::write(root.join("etc/hostname"), content).unwrap();
        fs::set_permissions(root.join("etc/hostname"), fs::Permissions::from_mode(mode)).unwrap();
        symlink("../etc/hostname", root.join("etc/sub/link")).unwrap();
    }

    #[test]
    fn snapshot_records_entries() {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), "node\n", 0o644);
        let tree = snapshot(dir.path());
        let keys: Vec<&str> = tree.keys().map(String::as_str).collect();
        assert_eq!(keys, ["/etc", "/etc/hostname", "/etc/sub", "/etc/sub/link"]);
        let file = &tree["/etc/hostname"];
        assert_eq!(file.kind, EntryKind::File);
        assert_eq!(file.mode, 0o644);
        assert_eq!(file.size, 5);
        let expected = hex::encode(Sha256::digest(b"node\n"));
        assert_eq!(file.sha256.as_deref(), Some(expected.as_str()));
        let link = &tree["/etc/sub/link"];
        assert_eq!(link.kind, EntryKind::Symlink);
        assert_eq!(link.link_target.as_deref(), Some("../etc/hostname"));
    }

    #[test]
    fn diff_reports_each_difference() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        build(a.path(), "node\n", 0o644);
        build(b.path(), "nodf\n", 0o600);
        fs::write(b.path().join("extra"), "").unwrap();
        let (ta, tb) = (snapshot(a.path()), snapshot(b.path()));
        assert!(diff(&ta, &ta).is_empty());
        assert_eq!(
            diff(&ta, &tb),
            [
                "/etc/hostname: mode 0644 != 0600",
                "/etc/hostname: content differs (same size)",
                "/extra: only in b (file)",
            ]
        );
    }

    #[test]
    #[should_panic(expected = "snapshot of")]
    fn snapshot_panics_with_path() {
        snapshot(Path::new("/definitely/not/here"));
    }
}
