//! The one form of a [`BaseIndex`], in memory and on disk alike: a byte buffer whose
//! sections are used where they lie, so loading a cached index is reading a file and
//! checking its checksum — nothing is decoded until a lookup asks for it.
//!
//! Why a hand-written binary layout: a CoreOS base has 60 000 files and, ostree-encapsulated,
//! about 180 000 paths, and the warm build is the product's reaction time. Version 1 of this
//! format was a prefix-compressed varint stream decoded whole into arenas and checked path by
//! path: 140 ms for the benchmark's base, most of the warm build. Here a lookup is a binary
//! search over fixed-size records and touches only the ~18 records and paths it compares,
//! so the cost of a warm index is reading the file (a few milliseconds from the page cache)
//! however large the base. No serialisation crate gives fixed records over borrowed bytes
//! without `unsafe` (which this workspace forbids); the layout is small enough to own.
//!
//! Layout (integers little-endian; offsets of paths are in the text section, of kept
//! contents in the blob section):
//!
//! ```text
//! header  56 bytes: magic "MOSBIDX\0", version u32 (2), layers u32, entries u32,
//!                   groups u32, text bytes u64, blob bytes u64, group members u64,
//!                   reserved u64 (0)
//! text    paths and symlink targets, UTF-8
//! blob    kept file contents
//! records one per entry, in path order (component by component), 48 bytes each:
//!           0 path offset u32, 4 path length u16, 6 tag u8 (bits 0-1 kind: 0 dir, 1 file,
//!           2 symlink, 3 other; bit 2 hard-linked; bits 3-4 contents: 0 kept, 1 in a layer,
//!           2 in a layer as a GNU sparse member), 7 zero, 8 mode u32, 12 uid u32, 16 gid u32,
//!           20 hard-link group u32, 24 subtree end u32 (the index one past the entry's last
//!           descendant), 28 layer u32 | symlink target length, 32 size u64 | symlink target
//!           offset, 40 kept-contents offset | offset in the layer u64
//! groups  group count + 1 u32: where each group's members start
//! members entry numbers u32, group by group
//! crc32   u32 of everything before it
//! ```
//!
//! What is checked, and when: loading checks the magic, the version, that the section
//! sizes add up to the file's length, and the CRC-32 of the whole (which catches a torn or
//! damaged file; the cache is written atomically and is readable by its owner only, so
//! nothing else writes it). The tree itself — paths clean, sorted, each under its parent,
//! groups and layers that exist, names within [`crate::MAX_PATH_LEN`] and
//! [`crate::MAX_NAME_LEN`] — is checked when the index is built, by the same
//! `Assembler` whatever the source, and the checksum vouches that the file is what was
//! built. Every access is bounds-checked, so a file crafted to pass the checksum with a
//! bad tree gives wrong answers or errors, never a panic or a read outside the buffer.

use crate::IndexError;
use crate::apply::name_problem;
use crate::index::{BaseIndex, Data, Entry, Kind, Meta, Span};

/// The first bytes of an encoded index.
pub const MAGIC: [u8; 8] = *b"MOSBIDX\0";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 2;

/// Bytes of the header.
pub(crate) const HEADER_LEN: usize = 56;
/// Bytes of one entry record.
pub(crate) const RECORD_LEN: usize = 48;
const CHECKSUM_LEN: usize = 4;

const KIND_DIR: u8 = 0;
const KIND_FILE: u8 = 1;
const KIND_SYMLINK: u8 = 2;
const KIND_OTHER: u8 = 3;
const LINKED: u8 = 1 << 2;
const DATA_SHIFT: u8 = 3;
const DATA_KEPT: u8 = 0;
const DATA_LAYER: u8 = 1;
const DATA_SPARSE: u8 = 2;

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
    /// The checksum does not match the contents.
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
    /// An index holds a name decoding would refuse, or is too large for the format (only a
    /// bug or a base beyond the limits can make one).
    #[error("encoding base index: {path:?}: {what}")]
    Unencodable {
        /// The path (shortened).
        path: String,
        /// What is wrong.
        what: String,
    },
}

/// Where the sections of an encoded index are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) layers: u32,
    pub(crate) entries: usize,
    pub(crate) groups: usize,
    pub(crate) text: Span,
    pub(crate) blob: Span,
    pub(crate) records: usize,
    pub(crate) group_starts: usize,
    pub(crate) members: Span,
}

/// The parts of an index being written: what the `Assembler` collected.
pub(crate) struct Parts<'a> {
    pub(crate) layers: u32,
    pub(crate) text: &'a str,
    pub(crate) blob: &'a [u8],
    pub(crate) entries: &'a [Entry],
    pub(crate) groups: &'a [Vec<u32>],
}

fn too_large(what: &str) -> DecodeError {
    DecodeError::Unencodable {
        path: String::new(),
        what: format!("{what} does not fit the index format"),
    }
}

fn u32_of(v: usize, what: &str) -> Result<u32, DecodeError> {
    u32::try_from(v).map_err(|_| too_large(what))
}

/// The encoded form of `parts`; deterministic.
pub(crate) fn encode(p: &Parts<'_>) -> Result<Vec<u8>, DecodeError> {
    let members: usize = p.groups.iter().map(Vec::len).sum();
    let len = HEADER_LEN
        + p.text.len()
        + p.blob.len()
        + p.entries.len() * RECORD_LEN
        + (p.groups.len() + 1) * 4
        + members * 4
        + CHECKSUM_LEN;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&p.layers.to_le_bytes());
    out.extend_from_slice(&u32_of(p.entries.len(), "the entry count")?.to_le_bytes());
    out.extend_from_slice(&u32_of(p.groups.len(), "the group count")?.to_le_bytes());
    for n in [p.text.len(), p.blob.len(), members, 0] {
        out.extend_from_slice(&(n as u64).to_le_bytes());
    }
    out.extend_from_slice(p.text.as_bytes());
    out.extend_from_slice(p.blob);
    for e in p.entries {
        out.extend_from_slice(&record(e)?);
    }
    let mut at = 0usize;
    for g in p.groups {
        out.extend_from_slice(&u32_of(at, "the group members")?.to_le_bytes());
        at += g.len();
    }
    out.extend_from_slice(&u32_of(at, "the group members")?.to_le_bytes());
    for g in p.groups {
        for m in g {
            out.extend_from_slice(&m.to_le_bytes());
        }
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    debug_assert_eq!(out.len(), len);
    Ok(out)
}

fn record(e: &Entry) -> Result<[u8; RECORD_LEN], DecodeError> {
    let mut r = [0u8; RECORD_LEN];
    let put = |r: &mut [u8; RECORD_LEN], at: usize, b: &[u8]| {
        if let Some(s) = r.get_mut(at..at + b.len()) {
            s.copy_from_slice(b);
        }
    };
    put(
        &mut r,
        0,
        &u32_of(e.path.start, "the path text")?.to_le_bytes(),
    );
    let plen = u16::try_from(e.path.len).map_err(|_| too_large("a path"))?;
    put(&mut r, 4, &plen.to_le_bytes());
    let (mut tag, a, b, c) = match e.kind {
        Kind::Dir => (KIND_DIR, 0u32, 0u64, 0u64),
        Kind::Other => (KIND_OTHER, 0, 0, 0),
        Kind::Symlink(t) => (
            KIND_SYMLINK,
            u32_of(t.len, "a symlink target")?,
            t.start as u64,
            0,
        ),
        Kind::File { size, data } => match data {
            Data::Kept(start) => (KIND_FILE | (DATA_KEPT << DATA_SHIFT), 0, size, start as u64),
            Data::Located {
                layer,
                offset,
                sparse,
            } => {
                let d = if sparse { DATA_SPARSE } else { DATA_LAYER };
                (KIND_FILE | (d << DATA_SHIFT), layer, size, offset)
            }
        },
    };
    if e.link.is_some() {
        tag |= LINKED;
    }
    r[6] = tag;
    put(&mut r, 8, &e.meta.mode.to_le_bytes());
    put(&mut r, 12, &e.meta.uid.to_le_bytes());
    put(&mut r, 16, &e.meta.gid.to_le_bytes());
    put(&mut r, 20, &e.link.unwrap_or(0).to_le_bytes());
    put(&mut r, 24, &e.end.to_le_bytes());
    put(&mut r, 28, &a.to_le_bytes());
    put(&mut r, 32, &b.to_le_bytes());
    put(&mut r, 40, &c.to_le_bytes());
    Ok(r)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The entry a record describes; `None` for a record no encoder writes.
pub(crate) fn entry(r: &[u8]) -> Option<Entry> {
    let path = Span {
        start: u32_at(r, 0)? as usize,
        len: usize::from(u16::from_le_bytes(r.get(4..6)?.try_into().ok()?)),
    };
    let tag = *r.get(6)?;
    let meta = Meta {
        mode: u32_at(r, 8)?,
        uid: u32_at(r, 12)?,
        gid: u32_at(r, 16)?,
    };
    if meta.mode > 0o7777 || tag >> (DATA_SHIFT + 2) != 0 || *r.get(7)? != 0 {
        return None;
    }
    let (a, b, c) = (u32_at(r, 28)?, u64_at(r, 32)?, u64_at(r, 40)?);
    let data_tag = tag >> DATA_SHIFT;
    let kind = match tag & 3 {
        _ if tag & 3 != KIND_FILE && data_tag != 0 => return None,
        KIND_DIR => Kind::Dir,
        KIND_OTHER => Kind::Other,
        KIND_SYMLINK => Kind::Symlink(Span {
            start: usize::try_from(b).ok()?,
            len: a as usize,
        }),
        _ => Kind::File {
            size: b,
            data: match data_tag {
                DATA_KEPT => Data::Kept(usize::try_from(c).ok()?),
                DATA_LAYER | DATA_SPARSE => Data::Located {
                    layer: a,
                    offset: c,
                    sparse: data_tag == DATA_SPARSE,
                },
                _ => return None,
            },
        },
    };
    let link = (tag & LINKED != 0).then_some(u32_at(r, 20)?);
    Some(Entry {
        path,
        kind,
        meta,
        link,
        end: u32_at(r, 24)?,
    })
}

/// Where the sections of `bytes` are, after checking the header, the sizes and the
/// checksum (see the module documentation for what is checked later).
pub(crate) fn layout(bytes: &[u8]) -> Result<Layout, DecodeError> {
    let header = bytes
        .get(..HEADER_LEN)
        .ok_or(DecodeError::Truncated { what: "header" })?;
    if header.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(DecodeError::Magic);
    }
    let h32 = |at| u32_at(header, at).unwrap_or_default();
    let h64 = |at| u64_at(header, at).unwrap_or_default();
    let found = h32(8);
    if found != VERSION {
        return Err(DecodeError::Version { found });
    }
    let bad = |what| DecodeError::Header { what };
    let size = |v: u64| usize::try_from(v).map_err(|_| bad("a section larger than memory"));
    let (layers, entries, groups) = (h32(12), h32(16) as usize, h32(20) as usize);
    let (text, blob, members) = (size(h64(24))?, size(h64(32))?, size(h64(40))?);
    if h64(48) != 0 {
        return Err(bad("reserved header bytes are not zero"));
    }
    let mut at = HEADER_LEN;
    let mut section = |n: Option<usize>| -> Result<usize, DecodeError> {
        let start = at;
        at = n
            .and_then(|n| at.checked_add(n))
            .ok_or(bad("section sizes overflow"))?;
        Ok(start)
    };
    let l = Layout {
        layers,
        entries,
        groups,
        text: Span {
            start: section(Some(text))?,
            len: text,
        },
        blob: Span {
            start: section(Some(blob))?,
            len: blob,
        },
        records: section(entries.checked_mul(RECORD_LEN))?,
        group_starts: section(groups.checked_add(1).and_then(|g| g.checked_mul(4)))?,
        members: Span {
            start: section(members.checked_mul(4))?,
            len: members,
        },
    };
    let end = section(Some(CHECKSUM_LEN))?;
    match at.cmp(&bytes.len()) {
        std::cmp::Ordering::Greater => return Err(DecodeError::Truncated { what: "sections" }),
        std::cmp::Ordering::Less => return Err(bad("bytes after the checksum")),
        std::cmp::Ordering::Equal => {}
    }
    let body = bytes.get(..end).unwrap_or_default();
    let mut crc = crc32fast::Hasher::new();
    crc.update(body);
    if Some(crc.finalize()) != u32_at(bytes, end) {
        return Err(DecodeError::Checksum);
    }
    if entries == 0 {
        return Err(bad("no root directory"));
    }
    Ok(l)
}

impl BaseIndex {
    /// The index in this crate's binary format (see [`mod@crate::format`]); deterministic.
    /// Refuses a name [`BaseIndex::decode`] would refuse.
    pub fn encode(&self) -> Result<Vec<u8>, IndexError> {
        self.check_names()?;
        Ok(self.as_bytes().to_vec())
    }

    /// That every name is one [`crate::IndexBuilder`] accepts (a stored index loads again).
    pub(crate) fn check_names(&self) -> Result<(), IndexError> {
        for e in self.entries() {
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
        Ok(())
    }

    /// Read an index written by [`BaseIndex::encode`] (a copy of `bytes`; see
    /// [`BaseIndex::from_bytes`]). Damage is an error; the result has no layer source set.
    pub fn decode(bytes: &[u8]) -> Result<BaseIndex, IndexError> {
        BaseIndex::from_bytes(bytes.to_vec())
    }

    /// Use `bytes`, written by [`BaseIndex::encode`], as the index, where they lie: only the
    /// header, the section sizes and the checksum are read now.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<BaseIndex, IndexError> {
        let layout = layout(&bytes)?;
        Ok(BaseIndex::with_layout(bytes, layout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let cases = [
            Kind::Dir,
            Kind::Other,
            Kind::Symlink(Span { start: 7, len: 9 }),
            Kind::File {
                size: u64::MAX,
                data: Data::Kept(12),
            },
            Kind::File {
                size: 3,
                data: Data::Located {
                    layer: 4,
                    offset: 1 << 40,
                    sparse: true,
                },
            },
        ];
        for kind in cases {
            for link in [None, Some(0), Some(u32::MAX)] {
                let e = Entry {
                    path: Span {
                        start: 5,
                        len: 4095,
                    },
                    kind,
                    meta: Meta {
                        mode: 0o7777,
                        uid: u32::MAX,
                        gid: 7,
                    },
                    link,
                    end: 99,
                };
                let r = record(&e).ok();
                assert_eq!(r.as_ref().and_then(|r| entry(r)), Some(e));
            }
        }
    }

    #[test]
    fn records_no_encoder_writes_are_refused() {
        let e = Entry {
            path: Span { start: 0, len: 1 },
            kind: Kind::Dir,
            meta: Meta {
                mode: 0o755,
                uid: 0,
                gid: 0,
            },
            link: None,
            end: 1,
        };
        let good = record(&e).ok().unwrap_or([0; RECORD_LEN]);
        assert!(entry(&good).is_some());
        for (at, v) in [
            (6, 0x40),
            (6, KIND_DIR | (1 << DATA_SHIFT)),
            (7, 1),
            (9, 0x10),
        ] {
            let mut r = good;
            r[at] = v;
            assert_eq!(entry(&r), None, "byte {at} = {v:#x}");
        }
        assert_eq!(entry(&good[..RECORD_LEN - 1]), None);
    }
}
