//! The on-disk form of a [`BaseIndex`], so a base is indexed once per manifest digest and
//! every later build only decodes a file.
//!
//! Why a hand-written binary format: a CoreOS base has 50 000+ paths, and a warm build
//! should take well under 100 ms in total. Decoding this format is one linear pass of
//! varints and memcpys into three arenas (a few milliseconds for such a base); JSON or
//! another self-describing text format parses 5–10× slower, allocates per field, and
//! repeats every path in full. Nothing here needs to be read by other programs.
//!
//! Layout (integers are LEB128 varints unless stated):
//!
//! ```text
//! magic    8 bytes  "MOSBIDX\0"
//! version  u32 LE   1
//! body:
//!   layers, entry count, hard-link group count, kept-content bytes
//!   per entry, in path order (component by component):
//!     shared   bytes shared with the previous path
//!     suffix   length, then the bytes after the shared prefix
//!     tag      u8: bits 0-1 kind (0 dir, 1 file, 2 symlink, 3 other),
//!                  bit 2 hard-linked,
//!                  bits 3-4 file contents (0 kept, 1 in a layer, 2 in a layer as a
//!                  GNU sparse member, 3 same as the group's first member)
//!     mode, uid, gid
//!     [group]                        if hard-linked
//!     file:    size, then the bytes (kept) or layer, offset (in a layer)
//!     symlink: target length, target bytes
//! checksum 32 bytes SHA-256 of the body
//! ```
//!
//! Decoding checks everything it relies on — the checksum, then that paths are clean,
//! sorted and form a tree, that groups and layers exist, that names are within the index's
//! limits ([`crate::MAX_PATH_LEN`], [`crate::MAX_NAME_LEN`]) — and never panics on bad input.
//! Encoding refuses what decoding would refuse, so a stored index always loads again.

use sha2::{Digest as _, Sha256};

use crate::IndexError;
use crate::apply::name_problem;
use crate::index::{Assembler, BaseIndex, Data, Kind, Meta, NewData, NewKind};

/// The first bytes of an encoded index.
pub const MAGIC: [u8; 8] = *b"MOSBIDX\0";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;

const CHECKSUM_LEN: usize = 32;
const HEADER_LEN: usize = MAGIC.len() + 4;

const KIND_DIR: u8 = 0;
const KIND_FILE: u8 = 1;
const KIND_SYMLINK: u8 = 2;
const KIND_OTHER: u8 = 3;
const LINKED: u8 = 1 << 2;
const DATA_SHIFT: u8 = 3;
const DATA_KEPT: u8 = 0;
const DATA_LAYER: u8 = 1;
const DATA_SPARSE: u8 = 2;
const DATA_GROUP: u8 = 3;

/// Why bytes are not an index this crate can read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The magic bytes are wrong.
    #[error("decoding base index: not a base index (bad magic)")]
    Magic,
    /// Written by another version of this format.
    #[error("decoding base index: format version {found}, this build reads {VERSION}")]
    Version {
        /// The version in the header.
        found: u32,
    },
    /// The checksum does not match the body.
    #[error("decoding base index: checksum mismatch (the file is corrupt)")]
    Checksum,
    /// The data ends early.
    #[error("decoding base index: truncated while reading {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A header field is wrong.
    #[error("decoding base index: {what}")]
    Header {
        /// What is wrong.
        what: &'static str,
    },
    /// An index holds a name decoding would refuse (only a bug can make one).
    #[error("encoding base index: {path:?}: {what}")]
    Unencodable {
        /// The path (shortened).
        path: String,
        /// What is wrong.
        what: String,
    },
    /// An entry is malformed.
    #[error("decoding base index: entry {index} ({path:?}): {what}")]
    Entry {
        /// Position of the entry.
        index: u64,
        /// Its path, as far as it was read.
        path: String,
        /// What is wrong.
        what: &'static str,
    },
}

impl BaseIndex {
    /// The index in this crate's binary format (see [`mod@crate::format`]); deterministic.
    /// Refuses a name [`BaseIndex::decode`] would refuse.
    pub fn encode(&self) -> Result<Vec<u8>, IndexError> {
        for e in &self.entries {
            let target = match e.kind {
                Kind::Symlink(t) => self.span(t),
                _ => "",
            };
            for name in [self.span(e.path), target] {
                if let Some(what) = name_problem(name) {
                    let path: String = self.span(e.path).chars().take(64).collect();
                    return Err(DecodeError::Unencodable { path, what }.into());
                }
            }
        }
        Ok(self.encode_unchecked())
    }

    fn encode_unchecked(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            HEADER_LEN + self.text.len() + self.blob.len() + self.entries.len() * 12 + 64,
        );
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        put(&mut out, u64::from(self.layers));
        put(&mut out, self.entries.len() as u64);
        put(&mut out, self.groups.len() as u64);
        put(&mut out, self.blob.len() as u64);
        let mut prev = "";
        let mut seen_group = vec![false; self.groups.len()];
        for e in &self.entries {
            let p = self.span(e.path);
            let shared = common_prefix(prev, p);
            put(&mut out, shared as u64);
            let suffix = p.as_bytes().get(shared..).unwrap_or_default();
            put(&mut out, suffix.len() as u64);
            out.extend_from_slice(suffix);
            prev = p;

            let first_in_group = match e.link.and_then(|g| seen_group.get_mut(g as usize)) {
                Some(seen) => !std::mem::replace(seen, true),
                None => true,
            };
            let mut tag = match e.kind {
                Kind::Dir => KIND_DIR,
                Kind::File { data, .. } => {
                    let d = match data {
                        _ if !first_in_group => DATA_GROUP,
                        Data::Kept(_) => DATA_KEPT,
                        Data::Located { sparse: false, .. } => DATA_LAYER,
                        Data::Located { sparse: true, .. } => DATA_SPARSE,
                    };
                    KIND_FILE | (d << DATA_SHIFT)
                }
                Kind::Symlink(_) => KIND_SYMLINK,
                Kind::Other => KIND_OTHER,
            };
            if e.link.is_some() {
                tag |= LINKED;
            }
            out.push(tag);
            put(&mut out, u64::from(e.meta.mode));
            put(&mut out, u64::from(e.meta.uid));
            put(&mut out, u64::from(e.meta.gid));
            if let Some(g) = e.link {
                put(&mut out, u64::from(g));
            }
            match e.kind {
                Kind::File { size, data } => {
                    put(&mut out, size);
                    match data {
                        _ if !first_in_group => {}
                        Data::Kept(start) => {
                            let bytes = usize::try_from(size)
                                .ok()
                                .and_then(|n| self.blob.get(start..start.checked_add(n)?))
                                .unwrap_or_default();
                            out.extend_from_slice(bytes);
                        }
                        Data::Located { layer, offset, .. } => {
                            put(&mut out, u64::from(layer));
                            put(&mut out, offset);
                        }
                    }
                }
                Kind::Symlink(t) => {
                    let t = self.span(t);
                    put(&mut out, t.len() as u64);
                    out.extend_from_slice(t.as_bytes());
                }
                Kind::Dir | Kind::Other => {}
            }
        }
        let sum = Sha256::digest(out.get(HEADER_LEN..).unwrap_or_default());
        out.extend_from_slice(&sum);
        out
    }

    /// Read an index written by [`BaseIndex::encode`]. Any corruption is an error; the
    /// result has no layer source set.
    pub fn decode(bytes: &[u8]) -> Result<BaseIndex, IndexError> {
        Ok(decode(bytes)?)
    }
}

fn decode(bytes: &[u8]) -> Result<BaseIndex, DecodeError> {
    let header = bytes
        .get(..HEADER_LEN)
        .ok_or(DecodeError::Truncated { what: "header" })?;
    if header.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(DecodeError::Magic);
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(header.get(MAGIC.len()..).unwrap_or(&[0; 4]));
    let found = u32::from_le_bytes(v);
    if found != VERSION {
        return Err(DecodeError::Version { found });
    }
    let rest = bytes.get(HEADER_LEN..).unwrap_or_default();
    let body_len = rest
        .len()
        .checked_sub(CHECKSUM_LEN)
        .ok_or(DecodeError::Truncated { what: "checksum" })?;
    let (body, sum) = rest.split_at(body_len);
    if Sha256::digest(body).as_slice() != sum {
        return Err(DecodeError::Checksum);
    }
    decode_body(body)
}

/// The body, checksum already verified — still checked in full, since a checksum only
/// guards against accidents.
fn decode_body(body: &[u8]) -> Result<BaseIndex, DecodeError> {
    let mut r = Reader { buf: body, pos: 0 };
    let header = |what| DecodeError::Header { what };
    let layers = u32::try_from(r.varint("layer count")?).map_err(|_| header("layer count"))?;
    let count = r.varint("entry count")?;
    let groups = r.varint("group count")?;
    let kept = r.varint("kept bytes")?;
    // Every entry takes at least 6 bytes; a count beyond that is a lie.
    if count > (body.len() / 6) as u64 || kept > body.len() as u64 || groups > count {
        return Err(header("counts larger than the data"));
    }
    let count_usize = count as usize;
    let mut asm = Assembler::new(layers, count_usize, body.len(), kept as usize);
    let mut path = String::new();
    for index in 0..count {
        let bad = |path: &str, what| DecodeError::Entry {
            index,
            path: path.to_string(),
            what,
        };
        let shared = r.varint("path prefix")?;
        let shared = usize::try_from(shared)
            .ok()
            .filter(|&s| s <= path.len() && path.is_char_boundary(s))
            .ok_or_else(|| bad(&path, "shared prefix longer than the previous path"))?;
        path.truncate(shared);
        let suffix_len = r.len("path")?;
        let suffix = std::str::from_utf8(r.bytes(suffix_len, "path")?)
            .map_err(|_| bad(&path, "path is not UTF-8"))?;
        path.push_str(suffix);
        if path.len() > crate::MAX_PATH_LEN {
            return Err(bad("", "path longer than machineos indexes"));
        }
        if name_problem(&path).is_some() {
            return Err(bad(&path, "a path component longer than machineos indexes"));
        }

        let tag = r.byte("entry tag")?;
        let meta = Meta {
            mode: r.u32("mode")?,
            uid: r.u32("uid")?,
            gid: r.u32("gid")?,
        };
        if meta.mode > 0o7777 {
            return Err(bad(&path, "mode has bits beyond 0o7777"));
        }
        let link = if tag & LINKED != 0 {
            Some(r.u32("hard-link group")?)
        } else {
            None
        };
        let data_tag = tag >> DATA_SHIFT;
        let kind = match tag & 3 {
            KIND_DIR | KIND_OTHER if data_tag != 0 => {
                return Err(bad(&path, "unknown tag bits"));
            }
            KIND_DIR => NewKind::Dir,
            KIND_OTHER => NewKind::Other,
            KIND_SYMLINK => {
                if data_tag != 0 {
                    return Err(bad(&path, "unknown tag bits"));
                }
                let n = r.len("symlink target")?;
                let t = std::str::from_utf8(r.bytes(n, "symlink target")?)
                    .map_err(|_| bad(&path, "symlink target is not UTF-8"))?;
                if name_problem(t).is_some() {
                    return Err(bad(&path, "symlink target longer than machineos indexes"));
                }
                NewKind::Symlink(t)
            }
            _ => {
                let size = r.varint("file size")?;
                let data = match data_tag {
                    DATA_KEPT => {
                        let n = usize::try_from(size)
                            .map_err(|_| bad(&path, "kept contents too large"))?;
                        NewData::Kept(r.bytes(n, "file contents")?)
                    }
                    DATA_LAYER | DATA_SPARSE => NewData::Located {
                        layer: r.u32("layer number")?,
                        offset: r.varint("layer offset")?,
                        sparse: data_tag == DATA_SPARSE,
                    },
                    DATA_GROUP => NewData::SameAsGroup,
                    _ => return Err(bad(&path, "unknown tag bits")),
                };
                NewKind::File { size, data }
            }
        };
        asm.push(&path, kind, meta, link)
            .map_err(|what| bad(&path, what))?;
        debug_assert_eq!(asm.last_path(), path);
    }
    if r.pos != body.len() {
        return Err(header("bytes after the last entry"));
    }
    let (idx, check) = asm.finish();
    check.map_err(|what| DecodeError::Header { what })?;
    if idx.groups.len() as u64 != groups {
        return Err(header("hard-link group count does not match the entries"));
    }
    if idx.blob.len() as u64 != kept {
        return Err(header("kept-content size does not match the entries"));
    }
    Ok(idx)
}

fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !b.is_char_boundary(n) {
        n -= 1;
    }
    n
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over the body.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or(DecodeError::Truncated { what })?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte(what)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Header {
                    what: "varint overflows 64 bits",
                });
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                // Only the shortest form is accepted, so one index has one encoding.
                if b == 0 && shift > 0 {
                    return Err(DecodeError::Header {
                        what: "varint not in its shortest form",
                    });
                }
                return Ok(v);
            }
        }
        Err(DecodeError::Header {
            what: "varint longer than 10 bytes",
        })
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.varint(what)?).map_err(|_| DecodeError::Header {
            what: "a 32-bit field is out of range",
        })
    }

    fn len(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let n = self.varint(what)?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.buf.len() - self.pos)
            .ok_or(DecodeError::Truncated { what })
    }

    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(DecodeError::Truncated { what })?;
        let b = self
            .buf
            .get(self.pos..end)
            .ok_or(DecodeError::Truncated { what })?;
        self.pos = end;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            let mut r = Reader { buf: &out, pos: 0 };
            assert_eq!(r.varint("v").ok(), Some(v));
            assert_eq!(r.pos, out.len());
        }
        let mut r = Reader {
            buf: &[0xff; 11],
            pos: 0,
        };
        assert!(matches!(r.varint("v"), Err(DecodeError::Header { .. })));
        // 103 with a redundant continuation byte.
        let mut r = Reader {
            buf: &[0xe7, 0x00],
            pos: 0,
        };
        assert!(matches!(r.varint("v"), Err(DecodeError::Header { .. })));
    }

    #[test]
    fn common_prefix_stays_on_char_boundaries() {
        assert_eq!(common_prefix("/a/é", "/a/è"), 3);
        assert_eq!(common_prefix("/usr/lib", "/usr/lib64"), 8);
    }
}
