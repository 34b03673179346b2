//! Base indexes kept in memory across builds of one process (the controller's), bounded by
//! bytes, least recently used first out — so a warm build in a long-running process reads
//! no file at all — and the bases' configs beside them, so it fetches none either.
//!
//! Written by hand: a process builds against a handful of bases (one per pool and
//! architecture), so the LRU is a short vector scanned on each lookup, and the bound is in
//! bytes of the indexes' encoded form, which entry-counting LRU crates do not offer.

use std::sync::{Arc, Mutex, PoisonError};

use machineos_image::Digest;

use crate::BaseIndex;

/// How many small blobs (base configs) an [`IndexMemory`] keeps.
pub const MAX_BLOBS: usize = 64;

/// Indexes by base manifest digest, at most [`IndexMemory::limit`] bytes of them. Cloning
/// shares the store.
#[derive(Debug, Clone)]
pub struct IndexMemory {
    inner: Arc<Mutex<Inner>>,
    limit: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// Most recently used first.
    entries: Vec<(Digest, BaseIndex)>,
    /// Small blobs (the bases' configs), most recently used first, at most [`MAX_BLOBS`].
    blobs: Vec<(Digest, Arc<Vec<u8>>)>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

/// What an [`IndexMemory`] holds and has answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Indexes held.
    pub entries: usize,
    /// Their bytes.
    pub bytes: usize,
    /// Lookups answered.
    pub hits: u64,
    /// Lookups not answered.
    pub misses: u64,
}

impl IndexMemory {
    /// A store of at most `limit` bytes of indexes (an index larger than that is not kept).
    pub fn new(limit: usize) -> IndexMemory {
        IndexMemory {
            inner: Arc::new(Mutex::new(Inner::default())),
            limit,
        }
    }

    /// The bound, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every update leaves the store consistent, so a panic elsewhere cannot corrupt it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The index of the base with manifest digest `key`, now the most recently used.
    pub fn get(&self, key: &Digest) -> Option<BaseIndex> {
        let mut inner = self.lock();
        match inner.entries.iter().position(|(k, _)| k == key) {
            Some(i) => {
                inner.hits += 1;
                let entry = inner.entries.remove(i);
                let index = entry.1.clone();
                inner.entries.insert(0, entry);
                Some(index)
            }
            None => {
                inner.misses += 1;
                None
            }
        }
    }

    /// Keeps `index` as the index of `key` (replacing an earlier one), evicting the least
    /// recently used until the store is within its bound.
    pub fn insert(&self, key: Digest, index: BaseIndex) {
        let size = index.size_in_memory();
        let mut inner = self.lock();
        if let Some(i) = inner.entries.iter().position(|(k, _)| *k == key) {
            let (_, old) = inner.entries.remove(i);
            inner.bytes -= old.size_in_memory();
        }
        if size > self.limit {
            return;
        }
        // Drop the layer source: the kept index must not hold a build's streams alive.
        inner.entries.insert(0, (key, index.without_layer_source()));
        inner.bytes += size;
        while inner.bytes > self.limit {
            match inner.entries.pop() {
                Some((_, old)) => inner.bytes -= old.size_in_memory(),
                None => break,
            }
        }
    }

    /// The kept copy of the small blob with digest `key` (a base's config).
    pub fn get_blob(&self, key: &Digest) -> Option<Arc<Vec<u8>>> {
        let mut inner = self.lock();
        let i = inner.blobs.iter().position(|(k, _)| k == key)?;
        let entry = inner.blobs.remove(i);
        let bytes = entry.1.clone();
        inner.blobs.insert(0, entry);
        Some(bytes)
    }

    /// Keeps a small blob (its digest checked by the caller), the least recently used out
    /// beyond [`MAX_BLOBS`]. Blobs are not counted in [`IndexMemory::limit`]: a base's
    /// config is a few kilobytes, bounded by the registry client's config limit.
    pub fn insert_blob(&self, key: Digest, bytes: Arc<Vec<u8>>) {
        let mut inner = self.lock();
        inner.blobs.retain(|(k, _)| *k != key);
        inner.blobs.insert(0, (key, bytes));
        inner.blobs.truncate(MAX_BLOBS);
    }

    /// What it holds and has answered.
    pub fn stats(&self) -> MemoryStats {
        let inner = self.lock();
        MemoryStats {
            entries: inner.entries.len(),
            bytes: inner.bytes,
            hits: inner.hits,
            misses: inner.misses,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IndexBuilder;

    fn index(files: usize) -> BaseIndex {
        let mut b = tar::Builder::new(Vec::new());
        for i in 0..files {
            let mut h = tar::Header::new_gnu();
            h.set_size(1);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            let _ = b.append_data(&mut h, format!("f{i}"), &b"x"[..]);
        }
        let tar = b.into_inner().unwrap_or_default();
        let mut ib = IndexBuilder::new();
        let _ = ib.apply_layer(0, crate::LayerCompression::None, &tar[..]);
        ib.finish().unwrap_or_else(|e| panic!("{e}"))
    }

    fn key(c: char) -> Digest {
        Digest::parse(&format!("sha256:{}", c.to_string().repeat(64)))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn least_recently_used_goes_first_and_the_bound_holds() {
        let (a, b, c) = (index(10), index(20), index(30));
        let limit = a.size_in_memory() + b.size_in_memory() + c.size_in_memory() - 1;
        let m = IndexMemory::new(limit);
        m.insert(key('a'), a.clone());
        m.insert(key('b'), b.clone());
        assert_eq!(m.get(&key('a')), Some(a.clone()));
        // `b` is now the least recently used: `c` pushes it out.
        m.insert(key('c'), c.clone());
        assert_eq!(m.get(&key('b')), None);
        assert_eq!(m.get(&key('a')), Some(a.clone()));
        assert_eq!(m.get(&key('c')), Some(c.clone()));
        let s = m.stats();
        assert_eq!((s.entries, s.hits, s.misses), (2, 3, 1));
        assert_eq!(s.bytes, a.size_in_memory() + c.size_in_memory());
        assert!(s.bytes <= m.limit());
        // Replacing an entry does not count it twice.
        m.insert(key('a'), a.clone());
        assert_eq!(m.stats().bytes, a.size_in_memory() + c.size_in_memory());
        // An index larger than the bound is not kept (and does not evict the others).
        let small = IndexMemory::new(a.size_in_memory() - 1);
        small.insert(key('a'), a);
        assert_eq!(small.stats().entries, 0);
    }

    #[test]
    fn blobs_are_kept_most_recent_first_up_to_the_bound() {
        let m = IndexMemory::new(0);
        for i in 0..MAX_BLOBS + 2 {
            let b = format!("config {i}").into_bytes();
            m.insert_blob(Digest::sha256(&b), Arc::new(b));
        }
        let first = Digest::sha256(b"config 0");
        let last = format!("config {}", MAX_BLOBS + 1).into_bytes();
        assert!(m.get_blob(&first).is_none());
        assert_eq!(m.get_blob(&Digest::sha256(&last)).as_deref(), Some(&last));
    }

    #[test]
    fn clones_share_the_store() {
        let m = IndexMemory::new(1 << 30);
        let other = m.clone();
        m.insert(key('a'), index(1));
        assert!(other.get(&key('a')).is_some());
    }
}
