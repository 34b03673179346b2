//! The bytes of an encoded index (see [`mod@crate::format`] for the layout and what is
//! checked when): the entry types, their fixed-size records, the section layout, the
//! encoder and the header check. Knows nothing of [`crate::BaseIndex`], which reads its
//! entries through here.

/// A byte range of one of the index's arenas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) len: usize,
}

/// Owner and permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Where the bytes of a regular file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Data {
    /// In the index's content arena, starting here (the length is the file size).
    Kept(usize),
    /// In a layer's uncompressed tar stream.
    Located {
        /// The layer number.
        layer: u32,
        /// Offset of the data (of the member header when `sparse`).
        offset: u64,
        /// A GNU sparse member: the member must be parsed again to expand its holes.
        sparse: bool,
    },
}

/// What an index entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File { size: u64, data: Data },
    Symlink(Span),
    Other,
}

/// One path of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The path, in the text arena.
    pub(crate) path: Span,
    pub(crate) kind: Kind,
    pub(crate) meta: Meta,
    /// Hard-link group (regular files with more than one name only).
    pub(crate) link: Option<u32>,
    /// Index one past the last entry of this entry's subtree.
    pub(crate) end: u32,
}

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
