//! The on-disk cache: store and load by manifest digest, misses, and corrupt entries.

mod common;

use common::{M, index};
use machineos_baseindex::{Cache, CacheError, Digest, IndexError};

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
fn corrupt_entries_are_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().to_path_buf());
    let idx = index(&[vec![M::File("etc/a", b"a")]]);
    cache.store(&key('c'), &idx).unwrap();
    let file = cache.path_for(&key('c'));
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let e = cache.load(&key('c')).unwrap_err().to_string();
    assert!(e.contains("unusable") && e.contains("checksum"), "{e}");
    std::fs::write(&file, b"").unwrap();
    let e = cache.load(&key('c')).unwrap_err().to_string();
    assert!(e.contains("unusable") && e.contains("truncated"), "{e}");
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
    assert!(matches!(
        cache.store(&key('d'), &idx),
        Err(IndexError::Cache(CacheError::Write { .. }))
    ));
}

/// What is at the cache path is never read if it is not a regular file: a FIFO (which would
/// block forever), a symlink (to /dev/zero, which never ends), a device.
#[test]
fn only_regular_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().to_path_buf());
    let file = cache.path_for(&key('e'));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let idx = index(&[vec![M::File("etc/a", b"a")]]);

    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    let e = cache.load(&key('e')).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");

    // A symlink to a good index is refused too: the cache writes only regular files.
    let good = dir.path().join("good.idx");
    std::fs::write(&good, idx.encode().unwrap()).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&good, &file).unwrap();
    let e = cache.load(&key('e')).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");

    std::fs::remove_file(&file).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .unwrap();
    assert!(st.success());
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let cache = cache.clone();
        std::thread::spawn(move || tx.send(cache.load(&key('e')).map(|i| i.is_some())));
    }
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("loading a FIFO must not block");
    let e = got.unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");

    // A store replaces whatever was there with a regular file, which then loads.
    cache.store(&key('e'), &idx).unwrap();
    assert_eq!(cache.load(&key('e')).unwrap(), Some(idx));
}

#[test]
fn oversized_entries_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().to_path_buf());
    let file = cache.path_for(&key('f'));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // Sparse: no disk used.
    let f = std::fs::File::create(&file).unwrap();
    f.set_len(machineos_baseindex::cache::MAX_CACHE_FILE + 1)
        .unwrap();
    let e = cache.load(&key('f')).unwrap_err().to_string();
    assert!(e.contains("more than"), "{e}");
}

#[test]
fn default_dir_is_absolute() {
    if let Some(d) = Cache::default_dir() {
        assert!(d.is_absolute());
        assert!(d.ends_with("machineos"));
    }
}
