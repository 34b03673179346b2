//! Helpers the integration tests share: tar layers built in memory, a layer source over
//! them, and a one-line description of a path as an index answers for it.
#![allow(dead_code)]

use std::io::{Cursor, Read};
use std::sync::Arc;

use machineos_baseindex::{BaseIndex, IndexBuilder, LayerCompression, LayerSource};
use machineos_layer::{BaseView, NodeKind};

/// One tar member.
#[derive(Debug, Clone)]
pub enum M {
    /// A directory with this mode, root-owned.
    Dir(&'static str, u32),
    /// A 0644 root-owned file.
    File(&'static str, &'static [u8]),
    /// A file with mode, uid, gid.
    FileWith(&'static str, Vec<u8>, u32, u64, u64),
    /// A symlink to a target.
    Sym(&'static str, &'static str),
    /// A hard link to a target.
    Link(&'static str, &'static str),
    /// A fifo.
    Fifo(&'static str),
    /// A member whose name is written into the header as is (no validation).
    Raw(&'static str, tar::EntryType, &'static [u8]),
}

fn header(ty: tar::EntryType, mode: u32, uid: u64, gid: u64, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(ty);
    h.set_mode(mode);
    h.set_uid(uid);
    h.set_gid(gid);
    h.set_size(size);
    h.set_mtime(0);
    h
}

/// A tar of `members`, in order.
pub fn tar(members: &[M]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        match m {
            M::Dir(p, mode) => {
                let mut h = header(tar::EntryType::Directory, *mode, 0, 0, 0);
                b.append_data(&mut h, p, std::io::empty()).unwrap();
            }
            M::File(p, data) => {
                let mut h = header(tar::EntryType::Regular, 0o644, 0, 0, data.len() as u64);
                b.append_data(&mut h, p, *data).unwrap();
            }
            M::FileWith(p, data, mode, uid, gid) => {
                let mut h = header(
                    tar::EntryType::Regular,
                    *mode,
                    *uid,
                    *gid,
                    data.len() as u64,
                );
                b.append_data(&mut h, p, data.as_slice()).unwrap();
            }
            M::Sym(p, t) => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0, 0, 0);
                b.append_link(&mut h, p, t).unwrap();
            }
            M::Link(p, t) => {
                let mut h = header(tar::EntryType::Link, 0o644, 0, 0, 0);
                b.append_link(&mut h, p, t).unwrap();
            }
            M::Fifo(p) => {
                let mut h = header(tar::EntryType::Fifo, 0o600, 0, 0, 0);
                b.append_data(&mut h, p, std::io::empty()).unwrap();
            }
            M::Raw(name, ty, data) => {
                let mut h = header(*ty, 0o644, 0, 0, data.len() as u64);
                h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

/// The uncompressed layers, in memory.
pub struct Mem(pub Vec<Vec<u8>>);

impl LayerSource for Mem {
    fn open_layer(&self, layer: u32) -> std::io::Result<Box<dyn Read + Send>> {
        let b = self
            .0
            .get(layer as usize)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        Ok(Box::new(Cursor::new(b)))
    }
}

/// The index of uncompressed `layers`, without a layer source.
pub fn index_plain(layers: &[Vec<u8>]) -> BaseIndex {
    let mut b = IndexBuilder::new();
    for (i, l) in layers.iter().enumerate() {
        b.apply_layer(i as u32, LayerCompression::None, l.as_slice())
            .unwrap();
    }
    b.finish().unwrap()
}

/// The index of the tars of `layers`, with a layer source over them.
pub fn index(layers: &[Vec<M>]) -> BaseIndex {
    let tars: Vec<Vec<u8>> = layers.iter().map(|l| tar(l)).collect();
    let mut idx = index_plain(&tars);
    idx.set_layer_source(Arc::new(Mem(tars)));
    idx
}

/// `path` as one line: `dir 755`, `file 644 <contents>`, `sym <target>`, `other 600`,
/// with ` uid:gid` appended when not root-owned; `None` when absent.
pub fn desc(v: &dyn BaseView, path: &str) -> Option<String> {
    let n = v.lstat(path).unwrap()?;
    let mut s = match &n.kind {
        NodeKind::Dir => format!("dir {:o}", n.mode),
        NodeKind::File { size } => {
            let data = v.read(path).unwrap();
            assert_eq!(data.len() as u64, *size, "{path}");
            format!("file {:o} {}", n.mode, String::from_utf8_lossy(&data))
        }
        NodeKind::Symlink { target } => format!("sym {target}"),
        NodeKind::Other => format!("other {:o}", n.mode),
    };
    if (n.uid, n.gid) != (0, 0) {
        s.push_str(&format!(" {}:{}", n.uid, n.gid));
    }
    Some(s)
}
