//! Snapshots of a directory tree (walked without following symlinks) and a readable
//! entry-by-entry comparison of two snapshots: type, mode with special bits, owner, size,
//! symlink target, content hash and hard-link structure.

use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The path of the preset file whose line order 2.14 randomises.
pub const PRESET: &str = "/etc/systemd/system-preset/20-ignition.preset";

/// What a node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink(String),
    Other(&'static str),
}

/// One node of a snapshot.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: Kind,
    /// `st_mode & 0o7777`.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Content of regular files (the trees are small).
    pub content: Vec<u8>,
    /// The other paths of this snapshot that share this node's inode, sorted.
    pub links: Vec<String>,
}

impl Entry {
    /// `file 0644 0:0 12 bytes` and the like.
    pub fn describe(&self) -> String {
        let what = match &self.kind {
            Kind::File => format!(
                "file {} bytes sha256:{}",
                self.content.len(),
                sha(&self.content)
            ),
            Kind::Dir => "dir".to_string(),
            Kind::Symlink(t) => format!("symlink -> {t}"),
            Kind::Other(o) => (*o).to_string(),
        };
        let mut s = format!("{what} {:04o} {}:{}", self.mode, self.uid, self.gid);
        if !self.links.is_empty() {
            let _ = write!(s, " hardlinked with {}", self.links.join(", "));
        }
        s
    }
}

/// A snapshot: absolute image path (`/`, `/etc`, `/etc/passwd`) → entry.
pub type Tree = BTreeMap<String, Entry>;

/// Short hex sha256 of some bytes.
pub fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))[..16].to_string()
}

/// Walk `root` without following symlinks.
pub fn snapshot(root: &Path) -> io::Result<Tree> {
    let mut tree = Tree::new();
    let mut inodes: HashMap<(u64, u64), Vec<String>> = HashMap::new();
    walk(root, "/", &mut tree, &mut inodes)?;
    for paths in inodes.values() {
        if paths.len() > 1 {
            for p in paths {
                let mut others: Vec<String> = paths.iter().filter(|o| *o != p).cloned().collect();
                others.sort();
                tree.get_mut(p).expect("walked").links = others;
            }
        }
    }
    Ok(tree)
}

fn walk(
    fs_path: &Path,
    image_path: &str,
    tree: &mut Tree,
    inodes: &mut HashMap<(u64, u64), Vec<String>>,
) -> io::Result<()> {
    let md = fs::symlink_metadata(fs_path)?;
    let ft = md.file_type();
    let kind = if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else if ft.is_symlink() {
        Kind::Symlink(fs::read_link(fs_path)?.to_string_lossy().into_owned())
    } else if ft.is_fifo() {
        Kind::Other("fifo")
    } else if ft.is_socket() {
        Kind::Other("socket")
    } else if ft.is_char_device() {
        Kind::Other("char device")
    } else {
        Kind::Other("block device")
    };
    let content = if kind == Kind::File {
        fs::read(fs_path)?
    } else {
        Vec::new()
    };
    if kind != Kind::Dir {
        inodes
            .entry((md.dev(), md.ino()))
            .or_default()
            .push(image_path.to_string());
    }
    tree.insert(
        image_path.to_string(),
        Entry {
            kind: kind.clone(),
            mode: md.mode() & 0o7777,
            uid: md.uid(),
            gid: md.gid(),
            content,
            links: Vec::new(),
        },
    );
    if kind == Kind::Dir {
        let mut names: Vec<_> = fs::read_dir(fs_path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            let name = name.to_string_lossy().into_owned();
            let child = if image_path == "/" {
                format!("/{name}")
            } else {
                format!("{image_path}/{name}")
            };
            walk(&fs_path.join(&name), &child, tree, inodes)?;
        }
    }
    Ok(())
}

/// How to compare two snapshots.
#[derive(Default)]
pub struct CompareOptions {
    /// Compare the preset file's lines as a sorted multiset.
    pub preset_sorted: bool,
    /// Paths left out of the comparison, with everything below them.
    pub ignore: BTreeSet<String>,
}

impl CompareOptions {
    fn ignored(&self, path: &str) -> bool {
        self.ignore.iter().any(|i| {
            path == i || (path.starts_with(i.as_str()) && path[i.len()..].starts_with('/'))
        })
    }
}

/// Lines of `content`, sorted.
pub fn sorted_lines(content: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(content)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// A short printable preview of some content.
pub fn preview(content: &[u8]) -> String {
    let s = String::from_utf8_lossy(content);
    let mut p: String = s.chars().take(120).collect();
    if s.chars().count() > 120 {
        p.push('…');
    }
    format!("{p:?}")
}

/// Every difference between `left` and `right`, as readable lines.
pub fn diff(
    left_name: &str,
    left: &Tree,
    right_name: &str,
    right: &Tree,
    opts: &CompareOptions,
) -> Vec<String> {
    let mut out = Vec::new();
    let paths: BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    for path in paths {
        if opts.ignored(path) {
            continue;
        }
        match (left.get(path), right.get(path)) {
            (Some(l), None) => out.push(format!("{path}: only in {left_name} ({})", l.describe())),
            (None, Some(r)) => out.push(format!("{path}: only in {right_name} ({})", r.describe())),
            (Some(l), Some(r)) => {
                let mut what = Vec::new();
                if l.kind != r.kind {
                    what.push("type/target");
                } else if l.kind == Kind::File {
                    let same = if opts.preset_sorted && path == PRESET {
                        sorted_lines(&l.content) == sorted_lines(&r.content)
                    } else {
                        l.content == r.content
                    };
                    if !same {
                        what.push("content");
                    }
                }
                // A symlink's own mode is always 0777 on Linux; compare it anyway.
                if l.mode != r.mode {
                    what.push("mode");
                }
                if (l.uid, l.gid) != (r.uid, r.gid) {
                    what.push("owner");
                }
                if l.links != r.links {
                    what.push("hard links");
                }
                if !what.is_empty() {
                    let mut s = format!(
                        "{path}: {} differ\n      {left_name}: {}\n      {right_name}: {}",
                        what.join(", "),
                        l.describe(),
                        r.describe()
                    );
                    if what.contains(&"content") {
                        let _ = write!(
                            s,
                            "\n      {left_name} content: {}\n      {right_name} content: {}",
                            preview(&l.content),
                            preview(&r.content)
                        );
                    }
                    out.push(s);
                }
            }
            (None, None) => unreachable!(),
        }
    }
    out
}
