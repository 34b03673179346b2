//! ostree's object formats, as libostree computes and stores them: the GVariant bytes of a
//! directory's metadata (`dirmeta`, `(uuua(ayay))`), a directory's listing (`dirtree`,
//! `(a(say)a(sayay))`), a commit (`(a{sv}aya(say)sstayay)`), and the checksum of a content
//! object (sha256 over the file header `(uuuusa(ayay))` framed by its big-endian size and
//! four zero bytes, then the file's bytes). Integers inside these variants are big-endian
//! (ostree swaps them before building the variant); the framing offsets are GVariant's own
//! little-endian ones. The GVariant encoding is the `gvariant` crate's (the one ostree-ext
//! itself parses these objects with); what is written here is only which values go where.
//!
//! Every object here carries no extended attributes: the synthetic trees have no SELinux
//! labels, and the empty `a(ayay)` serializes to zero bytes.

use gvariant::{Marker, VariantWrap, gv};
use sha2::{Digest as _, Sha256};

/// A 32-byte ostree checksum (sha256).
pub(crate) type Csum = [u8; 32];

/// No extended attributes: an empty `a(ayay)`.
const NO_XATTRS: &[(&[u8], &[u8])] = &[];

/// The `dirmeta` object of a directory owned by `uid:gid` with permission bits `mode`
/// (the `S_IFDIR` type bit is added here).
pub(crate) fn dirmeta(uid: u32, gid: u32, mode: u32) -> Vec<u8> {
    gv!("(uuua(ayay))").serialize_to_vec(&(
        &uid.to_be(),
        &gid.to_be(),
        &(S_IFDIR | mode).to_be(),
        NO_XATTRS,
    ))
}

/// The `dirtree` object of a directory: its non-directory entries by name with their
/// content checksums, and its subdirectories by name with their `dirtree` and `dirmeta`
/// checksums. Both lists must be sorted by name (byte order), as libostree writes them.
pub(crate) fn dirtree(files: &[(&str, Csum)], dirs: &[(&str, Csum, Csum)]) -> Vec<u8> {
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, c)| (*n, c.as_slice())).collect();
    let dirs: Vec<(&str, &[u8], &[u8])> = dirs
        .iter()
        .map(|(n, t, m)| (*n, t.as_slice(), m.as_slice()))
        .collect();
    gv!("(a(say)a(sayay))").serialize_to_vec(&(&files, &dirs))
}

/// The commit metadata values this generator sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommitMeta<'a> {
    /// `version`.
    pub(crate) version: &'a str,
    /// `ostree.linux`: the kernel version.
    pub(crate) linux: &'a str,
}

/// The `commit` object: no parent, no related objects, the given subject, an empty body,
/// `timestamp` (seconds since the epoch), the root directory's `dirtree` and `dirmeta`
/// checksums, and metadata `ostree.linux` and `version`, in that (sorted) order.
pub(crate) fn commit(
    meta: &CommitMeta<'_>,
    subject: &str,
    timestamp: u64,
    root_tree: &Csum,
    root_meta: &Csum,
) -> Vec<u8> {
    let s = gv!("s");
    let metadata = [
        ("ostree.linux", VariantWrap(s, meta.linux)),
        ("version", VariantWrap(s, meta.version)),
    ];
    let no_related: &[(&str, &[u8])] = &[];
    gv!("(a{sv}aya(say)sstayay)").serialize_to_vec(&(
        &metadata[..],
        &[] as &[u8],
        no_related,
        subject,
        "",
        &timestamp.to_be(),
        root_tree.as_slice(),
        root_meta.as_slice(),
    ))
}

/// `S_IFDIR`, `S_IFREG`, `S_IFLNK`.
const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;

/// A content object being checksummed: the header is hashed first, then the file's bytes
/// are fed with [`ContentHasher::update`].
pub(crate) struct ContentHasher(Sha256);

impl ContentHasher {
    /// A regular file owned by `uid:gid` with permission bits `mode`.
    pub(crate) fn regular(uid: u32, gid: u32, mode: u32) -> ContentHasher {
        ContentHasher::with_header(uid, gid, S_IFREG | mode, "")
    }

    fn with_header(uid: u32, gid: u32, mode: u32, target: &str) -> ContentHasher {
        let header = gv!("(uuuusa(ayay))").serialize_to_vec(&(
            &uid.to_be(),
            &gid.to_be(),
            &mode.to_be(),
            &0u32,
            target,
            NO_XATTRS,
        ));
        let mut h = Sha256::new();
        h.update((header.len() as u32).to_be_bytes());
        h.update([0u8; 4]);
        h.update(&header);
        ContentHasher(h)
    }

    /// More of the file's bytes.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The checksum.
    pub(crate) fn finish(self) -> Csum {
        self.0.finalize().into()
    }
}

/// The checksum of a symlink owned by `uid:gid` pointing at `target`.
pub(crate) fn symlink_checksum(uid: u32, gid: u32, target: &str) -> Csum {
    ContentHasher::with_header(uid, gid, S_IFLNK | 0o777, target).finish()
}

/// The checksum of a metadata object's bytes.
pub(crate) fn checksum(bytes: &[u8]) -> Csum {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    //! Vectors from libostree's own test suite (`tests/test-basic-c.c`, `tests/test-sizes.js`)
    //! and its empty-tree constant.
    use super::*;

    fn hex(c: Csum) -> String {
        ::hex::encode(c)
    }

    const DIRMETA_0755: &str = "446a0ef11b7cc167f3b603e585c7eeeeb675faa412d5ec73f62988eb0b6c5488";
    const EMPTY_TREE: &str = "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d";

    #[test]
    fn dirmeta_of_a_root_owned_0755_directory() {
        let d = dirmeta(0, 0, 0o755);
        assert_eq!(::hex::encode(&d), "0000000000000000000041ed");
        assert_eq!(hex(checksum(&d)), DIRMETA_0755);
    }

    #[test]
    fn empty_dirtree_is_libostrees_empty_tree() {
        assert_eq!(hex(checksum(&dirtree(&[], &[]))), EMPTY_TREE);
    }

    #[test]
    fn regular_file_and_symlink_checksums() {
        let mut h = ContentHasher::regular(0, 0, 0o644);
        h.update(b"hi");
        let hi = h.finish();
        assert_eq!(
            hex(hi),
            "2301b5923720c3edc1f0467addb5c287fd5559e3e0cd1396e7f1edb6b01be9f0"
        );
        assert_eq!(
            hex(symlink_checksum(0, 0, "bash")),
            "d98430476b1fbdc3086073c4427ac225f021515f46f049d356c67fb38b37cc77"
        );
        let mut tree = [0u8; 32];
        let mut meta = [0u8; 32];
        tree.copy_from_slice(&::hex::decode(EMPTY_TREE).unwrap_or_default());
        meta.copy_from_slice(&::hex::decode(DIRMETA_0755).unwrap_or_default());
        let t = dirtree(&[("hi", hi)], &[("sub", tree, meta)]);
        assert_eq!(t.len(), 109);
        assert_eq!(
            hex(checksum(&t)),
            "198812d36b2eb0605966cdaca26996de074bffd787ffdba592de0bfae1839e0c"
        );
    }

    #[test]
    fn commit_layout() {
        let mut tree = [0u8; 32];
        tree.copy_from_slice(&::hex::decode(EMPTY_TREE).unwrap_or_default());
        let meta = checksum(&dirmeta(0, 0, 0o755));
        let c = commit(
            &CommitMeta {
                version: "1.0",
                linux: "6.1",
            },
            "",
            1_700_000_000,
            &tree,
            &meta,
        );
        // The timestamp big-endian, then the two root checksums, then six framing offsets.
        let ts = c
            .windows(8)
            .position(|w| w == 1_700_000_000u64.to_be_bytes())
            .unwrap_or(usize::MAX);
        assert_eq!(&c[ts + 8..ts + 40], &tree);
        assert_eq!(&c[ts + 40..ts + 72], &meta);
        assert_eq!(c.len(), ts + 72 + 6);
    }
}
