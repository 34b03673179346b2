//! Files that appear whole or not at all — the one way machineos replaces a file on disk
//! (layout `index.json` and blobs, the base index cache, `--layer-out`): the contents go to
//! a temporary file in the destination's directory, which is synced, renamed over the
//! destination (or linked to it only where nothing is there yet), and the directory is
//! synced so the rename itself survives a crash. A reader sees the old file or the new one,
//! never a part; a failure leaves the old one and no temporary file.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tempfile::NamedTempFile;

/// Whether [`commit`] may replace an existing destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Replace it.
    Replace,
    /// Keep it: another writer got there first (content-addressed or first-wins files).
    Keep,
}

/// Syncs a directory, making renames and links in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A temporary file in `dir` named `prefix…`, with permissions `mode` when given.
pub fn temp_file_in(dir: &Path, prefix: &str, mode: Option<u32>) -> io::Result<NamedTempFile> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    if let Some(mode) = mode {
        b.permissions(std::fs::Permissions::from_mode(mode));
    }
    b.tempfile_in(dir)
}

/// Puts the written temporary file `tmp` at `dest` (in the same directory), durably: flushed
/// and synced, renamed (or, with [`Existing::Keep`], linked only where `dest` does not
/// exist), and the directory synced. Returns whether `dest` now holds `tmp`'s contents
/// (`false`: an existing file was kept, and `tmp` removed).
pub fn commit(mut tmp: NamedTempFile, dest: &Path, existing: Existing) -> io::Result<bool> {
    tmp.as_file_mut().flush()?;
    tmp.as_file().sync_all()?;
    let placed = match existing {
        Existing::Replace => tmp.persist(dest).map(|_| true).map_err(|e| e.error)?,
        Existing::Keep => match tmp.persist_noclobber(dest) {
            Ok(_) => true,
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e.error),
        },
    };
    if placed {
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(dir)?;
    }
    Ok(placed)
}

/// `body` written to `dest` atomically (see the module), with permissions `mode`.
pub fn write(dest: &Path, body: &[u8], mode: u32) -> io::Result<()> {
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = temp_file_in(dir, &format!(".{name}."), Some(mode))?;
    tmp.write_all(body)?;
    commit(tmp, dest, Existing::Replace).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_replaces_whole_with_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dest = dir.path().join("f");
        std::fs::write(&dest, b"old").expect("write");
        write(&dest, b"new contents", 0o600).expect("atomic write");
        assert_eq!(std::fs::read(&dest).expect("read"), b"new contents");
        let mode = std::fs::metadata(&dest).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f")]);
    }

    #[test]
    fn keep_never_replaces_and_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dest = dir.path().join("f");
        let mut a = temp_file_in(dir.path(), ".t", None).expect("temp");
        a.write_all(b"first").expect("write");
        assert!(commit(a, &dest, Existing::Keep).expect("commit"));
        let mut b = temp_file_in(dir.path(), ".t", None).expect("temp");
        b.write_all(b"second").expect("write");
        assert!(!commit(b, &dest, Existing::Keep).expect("commit"));
        assert_eq!(std::fs::read(&dest).expect("read"), b"first");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dest = dir.path().join("sub");
        std::fs::create_dir(&dest).expect("mkdir");
        std::fs::write(dest.join("x"), b"x").expect("write");
        // A file cannot be renamed over a directory.
        let e = write(&dest, b"new", 0o644).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory, "{e}");
        assert!(dest.join("x").exists());
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
    }
}
