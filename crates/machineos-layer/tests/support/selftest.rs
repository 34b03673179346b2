//! Harness self-test (`MACHINEOS_DIFF_SELFTEST=1`): instead of our engine, the layer is the
//! naive difference between the base and the reference tree, written with whiteouts and hard
//! links. Every `ok` case must then pass, which checks the extractor and the comparison
//! independently of the engine.

use super::tree::{Entry, Kind, Tree};
use std::collections::BTreeSet;

fn same(a: &Entry, b: &Entry) -> bool {
    a.kind == b.kind
        && a.mode == b.mode
        && (a.uid, a.gid) == (b.uid, b.gid)
        && a.content == b.content
        && a.links == b.links
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

fn header(e: &Entry, kind: tar::EntryType, size: u64) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_mode(e.mode);
    h.set_uid(u64::from(e.uid));
    h.set_gid(u64::from(e.gid));
    h.set_size(size);
    h.set_mtime(0);
    h
}

/// The layer that turns `base` into `target`.
pub fn diff_layer(base: &Tree, target: &Tree) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    // Removed paths whose parent survives as a directory get a whiteout.
    for path in base.keys() {
        if target.contains_key(path) {
            continue;
        }
        let par = parent(path);
        let parent_kept = par == "/"
            || (target.get(par).is_some_and(|e| e.kind == Kind::Dir)
                && base.get(par).is_some_and(|e| e.kind == Kind::Dir));
        if parent_kept {
            let name = path[par.len()..].trim_start_matches('/');
            let wh = format!("{}/.wh.{name}", par.trim_start_matches('/'));
            let wh = wh.trim_start_matches('/').to_string();
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_size(0);
            b.append_data(&mut h, wh, &[][..]).expect("whiteout");
        }
    }
    // Changed or new paths, with every member of a touched hard-link group.
    let mut emit: BTreeSet<&String> = BTreeSet::new();
    for (path, e) in target {
        if base.get(path).is_none_or(|old| !same(old, e)) {
            emit.insert(path);
            emit.extend(e.links.iter());
        }
    }
    let mut written: BTreeSet<&String> = BTreeSet::new();
    for path in emit {
        let e = &target[path];
        let rel = if path == "/" {
            "./".to_string()
        } else {
            path[1..].to_string()
        };
        if let Some(first) = e.links.iter().find(|l| written.contains(l)) {
            let mut h = header(e, tar::EntryType::Link, 0);
            b.append_link(&mut h, &rel, &first[1..]).expect("link");
        } else {
            match &e.kind {
                Kind::Dir => {
                    let mut h = header(e, tar::EntryType::Directory, 0);
                    b.append_data(&mut h, &rel, &[][..]).expect("dir");
                }
                Kind::File => {
                    let mut h = header(e, tar::EntryType::Regular, e.content.len() as u64);
                    b.append_data(&mut h, &rel, &e.content[..]).expect("file");
                }
                Kind::Symlink(t) => {
                    let mut h = header(e, tar::EntryType::Symlink, 0);
                    b.append_link(&mut h, &rel, t).expect("symlink");
                }
                Kind::Other(o) => panic!("selftest: cannot write a {o}"),
            }
        }
        written.insert(path);
    }
    b.into_inner().expect("tar")
}
