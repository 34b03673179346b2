//! The on-disk cache: store and load by manifest digest, misses, and corrupt entries.

mod common;

use common::{M, index};
use machineos_baseindex::{Cache, Digest};

fn key(c: char) -> Digest {
    Digest::parse(&format!("sha256:{}", c.to_string().repeat(64))).unwrap()
}

#[test]
fn store_then_load() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().join("cache"));
    let idx = index(&[vec![
        M::File("etc/hostname", b"node\n"),
        M::File("usr/bin/x", b"x"),
    ]]);
    assert!(cache.load(&key('a')).unwrap().is_none());
    cache.store(&key('a'), &idx).unwrap();
    let file = dir
        .path()
        .join("cache/index/sha256")
        .join(format!("{}.idx", "a".repeat(64)));
    assert_eq!(cache.path_for(&key('a')), file);
    assert!(file.is_file());
    assert_eq!(cache.load(&key('a')).unwrap(), Some(idx.clone()));
    assert!(cache.load(&key('b')).unwrap().is_none());
    // Storing again replaces; no temporary files are left behind.
    cache.store(&key('a'), &idx).unwrap();
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn corrupt_entries_are_misses() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().to_path_buf());
    let idx = index(&[vec![M::File("etc/a", b"a")]]);
    cache.store(&key('c'), &idx).unwrap();
    let file = cache.path_for(&key('c'));
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    assert!(cache.load(&key('c')).unwrap().is_none());
    std::fs::write(&file, b"").unwrap();
    assert!(cache.load(&key('c')).unwrap().is_none());
    // A rebuild overwrites it.
    cache.store(&key('c'), &idx).unwrap();
    assert_eq!(cache.load(&key('c')).unwrap(), Some(idx));
}

#[test]
fn unreadable_entries_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().to_path_buf());
    // A directory where the file should be.
    std::fs::create_dir_all(cache.path_for(&key('d'))).unwrap();
    let err = cache.load(&key('d')).unwrap_err();
    assert!(err.to_string().contains(&"d".repeat(64)), "{err}");
    let idx = index(&[vec![]]);
    assert!(cache.store(&key('d'), &idx).is_err());
}

#[test]
fn default_dir_is_absolute() {
    if let Some(d) = Cache::default_dir() {
        assert!(d.is_absolute());
        assert!(d.ends_with("machineos"));
    }
}
