//! Apply an uncompressed OCI layer tar over a directory tree the way a container runtime
//! does: all whiteouts of the layer first (`.wh.<name>` removes the lower entry,
//! `.wh..wh..opq` empties the lower directory), then the entries in order, with exact
//! modes (special bits included), numeric owners and verbatim symlink targets.
//!
//! It is deliberately strict, so that it reports layer bugs instead of papering over them:
//! paths must be relative and clean, every parent must already be a real directory (never a
//! symlink, which would write through it), a path may appear once, hard links must point at
//! an earlier entry of the same layer.

use super::tar_path::clean_tar_path;
use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, lchown, symlink};
use std::path::{Path, PathBuf};

/// The whiteout prefix.
const WH: &str = ".wh.";
/// The opaque-directory marker.
const OPQ: &str = ".wh..wh..opq";

enum Body {
    Dir,
    File(Vec<u8>),
    Symlink(String),
    HardLink(String),
}

struct Item {
    /// Clean relative path; "" is the root.
    path: String,
    body: Body,
    mode: u32,
    uid: u32,
    gid: u32,
}

fn read_items(tar_bytes: &[u8]) -> Result<Vec<Item>, String> {
    let mut archive = tar::Archive::new(tar_bytes);
    let mut items = Vec::new();
    let entries = archive.entries().map_err(|e| format!("reading tar: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("reading tar entry: {e}"))?;
        let raw = entry
            .path()
            .map_err(|e| format!("tar entry path: {e}"))?
            .to_string_lossy()
            .into_owned();
        let path = clean_tar_path(&raw)?;
        let header = entry.header();
        let mode = header.mode().map_err(|e| format!("{raw}: mode: {e}"))? & 0o7777;
        let uid = header.uid().map_err(|e| format!("{raw}: uid: {e}"))?;
        let gid = header.gid().map_err(|e| format!("{raw}: gid: {e}"))?;
        let uid = u32::try_from(uid).map_err(|_| format!("{raw}: uid {uid} too large"))?;
        let gid = u32::try_from(gid).map_err(|_| format!("{raw}: gid {gid} too large"))?;
        let link = || -> Result<String, String> {
            Ok(entry
                .link_name()
                .map_err(|e| format!("{raw}: link name: {e}"))?
                .ok_or_else(|| format!("{raw}: link entry without a link name"))?
                .to_string_lossy()
                .into_owned())
        };
        let body = match header.entry_type() {
            tar::EntryType::Directory => Body::Dir,
            tar::EntryType::Symlink => Body::Symlink(link()?),
            tar::EntryType::Link => Body::HardLink(link()?),
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut data = Vec::new();
                entry
                    .read_to_end(&mut data)
                    .map_err(|e| format!("{raw}: reading content: {e}"))?;
                Body::File(data)
            }
            other => return Err(format!("{raw}: unsupported tar entry type {other:?}")),
        };
        items.push(Item {
            path,
            body,
            mode,
            uid,
            gid,
        });
    }
    Ok(items)
}

/// Split `a/b/c` into (`a/b`, `c`); the parent of a top-level name is "".
fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

/// Join a clean relative path onto `root`, insisting that every ancestor below the root is
/// a real directory. `Ok(None)` when an ancestor is missing and `missing_ok`.
fn checked_join(root: &Path, rel: &str, missing_ok: bool) -> Result<Option<PathBuf>, String> {
    let mut p = root.to_path_buf();
    if rel.is_empty() {
        return Ok(Some(p));
    }
    let comps: Vec<&str> = rel.split('/').collect();
    for (i, c) in comps.iter().enumerate() {
        if i + 1 < comps.len() {
            p.push(c);
            match fs::symlink_metadata(&p) {
                Ok(md) if md.is_dir() => {}
                Ok(md) if md.file_type().is_symlink() => {
                    return Err(format!(
                        "{rel}: parent /{} is a symlink in the tree, the entry would be written through it",
                        comps[..=i].join("/")
                    ));
                }
                Ok(_) => {
                    return Err(format!(
                        "{rel}: parent /{} is not a directory",
                        comps[..=i].join("/")
                    ));
                }
                Err(_) if missing_ok => return Ok(None),
                Err(_) => {
                    return Err(format!(
                        "{rel}: parent /{} does not exist (not in the base nor earlier in the layer)",
                        comps[..=i].join("/")
                    ));
                }
            }
        } else {
            p.push(c);
        }
    }
    Ok(Some(p))
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

fn remove_any(p: &Path) -> Result<(), String> {
    match fs::symlink_metadata(p) {
        Ok(md) if md.is_dir() => {
            fs::remove_dir_all(p).map_err(|e| format!("removing {}: {e}", p.display()))
        }
        Ok(_) => fs::remove_file(p).map_err(|e| format!("removing {}: {e}", p.display())),
        Err(_) => Ok(()),
    }
}

fn set_meta(p: &Path, item: &Item) -> Result<(), String> {
    lchown(p, Some(item.uid), Some(item.gid)).map_err(|e| format!("chown {}: {e}", p.display()))?;
    if !matches!(item.body, Body::Symlink(_)) {
        fs::set_permissions(p, fs::Permissions::from_mode(item.mode))
            .map_err(|e| format!("chmod {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Apply the layer `tar_bytes` over the tree at `root`.
pub fn apply_layer(tar_bytes: &[u8], root: &Path) -> Result<(), String> {
    let items = read_items(tar_bytes)?;

    // Every path once (whiteouts included: two whiteouts for one path are a bug too).
    let mut seen = BTreeSet::new();
    for item in &items {
        if !seen.insert(item.path.as_str()) {
            return Err(format!(
                "/{}: appears more than once in the layer",
                item.path
            ));
        }
    }

    // Pass 1: whiteouts, against the lower tree.
    for item in &items {
        let (parent, name) = split(&item.path);
        if !name.starts_with(WH) {
            continue;
        }
        if !matches!(item.body, Body::File(_)) {
            return Err(format!("/{}: a whiteout must be a regular file", item.path));
        }
        let Some(dir) = checked_join(root, parent, true)? else {
            continue;
        };
        if name == OPQ {
            if let Ok(md) = fs::symlink_metadata(&dir)
                && md.is_dir()
            {
                for child in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                    let child = child.map_err(|e| format!("{}: {e}", dir.display()))?;
                    remove_any(&child.path())?;
                }
            }
        } else {
            let victim = &name[WH.len()..];
            if victim.is_empty() || victim == "." || victim == ".." {
                return Err(format!("/{}: malformed whiteout", item.path));
            }
            if parent.is_empty() || fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                remove_any(&dir.join(victim))?;
            }
        }
    }

    // Pass 2: the entries. Hard links may only point at entries of this layer (a tar hard
    // link cannot reach into a lower layer).
    let mut written: BTreeSet<&str> = BTreeSet::new();
    for item in &items {
        let (_, name) = split(&item.path);
        if name.starts_with(WH) {
            continue;
        }
        let p = checked_join(root, &item.path, false)?.expect("not missing_ok");
        match &item.body {
            Body::Dir => {
                let is_dir = fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
                if !is_dir {
                    if item.path.is_empty() {
                        return Err("the root entry must be a directory".to_string());
                    }
                    remove_any(&p)?;
                    fs::create_dir(&p).map_err(|e| format!("mkdir {}: {e}", p.display()))?;
                }
                set_meta(&p, item)?;
            }
            Body::File(data) => {
                if item.path.is_empty() {
                    return Err("the root entry must be a directory".to_string());
                }
                remove_any(&p)?;
                fs::write(&p, data).map_err(|e| format!("write {}: {e}", p.display()))?;
                set_meta(&p, item)?;
            }
            Body::Symlink(target) => {
                if item.path.is_empty() {
                    return Err("the root entry must be a directory".to_string());
                }
                remove_any(&p)?;
                symlink(target, &p).map_err(|e| format!("symlink {}: {e}", p.display()))?;
                set_meta(&p, item)?;
            }
            Body::HardLink(target) => {
                let rel = clean_tar_path(target)
                    .map_err(|e| format!("/{}: hard link target: {e}", item.path))?;
                let src = checked_join(root, &rel, false)?.expect("not missing_ok");
                if !exists(&src) {
                    return Err(format!(
                        "/{}: hard link target /{rel} does not exist",
                        item.path
                    ));
                }
                if rel == item.path {
                    return Err(format!("/{}: hard link to itself", item.path));
                }
                if !written.contains(rel.as_str()) {
                    return Err(format!(
                        "/{}: hard link to /{rel}, which is not an earlier entry of this layer",
                        item.path
                    ));
                }
                remove_any(&p)?;
                fs::hard_link(&src, &p).map_err(|e| format!("link {}: {e}", p.display()))?;
            }
        }
        written.insert(&item.path);
    }
    Ok(())
}
