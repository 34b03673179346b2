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
use crate::index::BaseIndex;
use crate::record::{Kind, layout};

pub use crate::record::{DecodeError, MAGIC, VERSION};

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
