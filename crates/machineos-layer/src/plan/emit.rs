//! From the overlay to the layer: which tar entries the recorded changes become (whiteouts,
//! opaque directories, hard links carrying their inode's metadata, every ancestor directory
//! with the base's metadata) and in which order (parents first, whiteouts first within a
//! directory, hard links last).

use std::collections::BTreeMap;

use super::{Entry, EntryKind};
use crate::overlay::{Change, LayerKind, Overlay, OverlayError, parent};

/// Turn the overlay's changes into ordered tar entries.
pub(super) fn emit(fs: &Overlay<'_>) -> Result<Vec<Entry>, OverlayError> {
    let mut nodes: BTreeMap<Vec<(bool, String)>, Entry> = BTreeMap::new();
    let mut links = Vec::new();
    let key = |path: &str, whiteout: bool| -> Vec<(bool, String)> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let n = comps.len();
        // Whiteouts sort first within their directory, so lower contents are hidden before
        // this layer's own children of that directory are laid down.
        comps
            .iter()
            .enumerate()
            .map(|(i, c)| (!(whiteout && i + 1 == n), c.to_string()))
            .collect()
    };
    let mut need_parents = Vec::new();
    for (path, change) in fs.changes() {
        let rel = path.trim_start_matches('/').to_string();
        match change {
            Change::Removed => {
                if fs.base_visible(path)?.is_some() {
                    nodes.insert(
                        key(path, true),
                        Entry {
                            path: rel,
                            kind: EntryKind::Whiteout,
                            mode: 0,
                            uid: 0,
                            gid: 0,
                        },
                    );
                    need_parents.push(path.clone());
                }
            }
            Change::Node(n) => {
                let kind = match &n.kind {
                    LayerKind::File(b) => EntryKind::File(b.clone()),
                    LayerKind::Dir { opaque } => {
                        if *opaque {
                            let opq = format!("{path}/.wh..wh..opq");
                            nodes.insert(
                                key(&opq, true),
                                Entry {
                                    path: rel.clone(),
                                    kind: EntryKind::Opaque,
                                    mode: 0,
                                    uid: 0,
                                    gid: 0,
                                },
                            );
                        }
                        EntryKind::Dir
                    }
                    LayerKind::Symlink(t) => EntryKind::Symlink(t.clone()),
                    LayerKind::HardLink(t) => {
                        // Runtimes that apply a link member's header to the inode
                        // (containers/storage, our own base indexer) must see the inode's
                        // metadata there, as GNU tar and Go's archive/tar write it.
                        let inode = match fs.changes().get(t) {
                            Some(Change::Node(owner)) => owner,
                            _ => return Err(OverlayError::DanglingLink(t.clone())),
                        };
                        links.push(Entry {
                            path: rel,
                            kind: EntryKind::HardLink(t.trim_start_matches('/').to_string()),
                            mode: inode.mode,
                            uid: inode.uid,
                            gid: inode.gid,
                        });
                        need_parents.push(path.clone());
                        continue;
                    }
                };
                nodes.insert(
                    key(path, false),
                    Entry {
                        path: rel,
                        kind,
                        mode: n.mode,
                        uid: n.uid,
                        gid: n.gid,
                    },
                );
                need_parents.push(path.clone());
            }
        }
    }
    // Every ancestor is in the layer: new ones are already; existing ones keep the base's
    // metadata.
    for path in need_parents {
        let mut a = parent(&path).to_string();
        while a != "/" {
            if let std::collections::btree_map::Entry::Vacant(slot) = nodes.entry(key(&a, false)) {
                let st = fs
                    .lstat(&a)?
                    .ok_or_else(|| OverlayError::NotADirectory(a.clone()))?;
                slot.insert(Entry {
                    path: a.trim_start_matches('/').to_string(),
                    kind: EntryKind::Dir,
                    mode: st.mode,
                    uid: st.uid,
                    gid: st.gid,
                });
            }
            a = parent(&a).to_string();
        }
    }
    links.sort_by_key(|e| key(&e.path, false));
    Ok(nodes.into_values().chain(links).collect())
}
