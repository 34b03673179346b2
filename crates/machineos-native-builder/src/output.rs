//! Files a user names for a build's side outputs (`--layer-out`, `--blob-out`): checked
//! before anything is built or published, and written so that a failure leaves what was at the
//! path as it was.
//!
//! - A regular file, or nothing, at the path (after following symlinks, dangling ones too):
//!   written to a temporary file in the same directory and renamed over it by
//!   [`OutputFile::commit`] — never half-written, and an existing file keeps its mode.
//! - A device, FIFO or socket (`/dev/stdout`, `/dev/null`, a pipe from `>(…)`): written
//!   through, never replaced by a regular file.
//! - A directory, or a missing or unwritable parent directory: refused by
//!   [`OutputFile::prepare`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why an output file cannot be written; names the path as the user gave it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct OutputError {
    /// The path as given.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

/// An output being written; see the module documentation.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    target: Target,
}

#[derive(Debug)]
enum Target {
    /// A temporary file to rename over `dest` on commit.
    Replace {
        dest: PathBuf,
        tmp: tempfile::NamedTempFile,
    },
    /// A non-regular file, written through.
    Stream(File),
}

/// How many symlinks are followed before giving up, as Linux does.
const MAX_SYMLINKS: usize = 40;

impl OutputFile {
    /// Checks `path` and opens what will be written: a temporary file beside a regular file
    /// (or where one will be created), or the device/FIFO itself.
    pub fn prepare(path: &Path) -> Result<OutputFile, OutputError> {
        let err = |source| OutputError {
            path: path.to_path_buf(),
            source,
        };
        let target = match fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                return Err(err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "is a directory",
                )));
            }
            Ok(m) if !m.is_file() => {
                Target::Stream(OpenOptions::new().write(true).open(path).map_err(err)?)
            }
            Ok(m) => {
                let dest = fs::canonicalize(path).map_err(err)?;
                Target::Replace {
                    tmp: temp_beside(&dest, m.permissions().mode() & 0o7777).map_err(err)?,
                    dest,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dest = final_path(path).map_err(err)?;
                Target::Replace {
                    tmp: temp_beside(&dest, 0o644).map_err(err)?,
                    dest,
                }
            }
            Err(e) => return Err(err(e)),
        };
        Ok(OutputFile {
            path: path.to_path_buf(),
            target,
        })
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where to write.
    pub fn file(&mut self) -> &mut File {
        match &mut self.target {
            Target::Replace { tmp, .. } => tmp.as_file_mut(),
            Target::Stream(f) => f,
        }
    }

    /// Makes what was written the file's contents: flushed, synced and renamed into place
    /// (a regular file), or flushed (a stream).
    pub fn commit(self) -> Result<(), OutputError> {
        let err = |source| OutputError {
            path: self.path.clone(),
            source,
        };
        match self.target {
            Target::Replace { dest, tmp } => {
                machineos_image::atomic::commit(
                    tmp,
                    &dest,
                    machineos_image::atomic::Existing::Replace,
                )
                .map_err(err)?;
                Ok(())
            }
            Target::Stream(mut f) => f.flush().map_err(err),
        }
    }
}

/// A temporary file with `mode` in the directory of `dest` (which must exist).
fn temp_beside(dest: &Path, mode: u32) -> io::Result<tempfile::NamedTempFile> {
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the directory {} does not exist", dir.display()),
            ));
        }
        Err(e) => return Err(e),
    }
    tempfile::Builder::new()
        .prefix(".machineos-")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
}

/// Where a file at `path`, which does not exist, would be created: `path` itself, or the end
/// of the chain of (dangling) symlinks it starts.
fn final_path(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        "too many levels of symbolic links",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, symlink};

    fn write(path: &Path, body: &[u8]) -> Result<(), OutputError> {
        let mut out = OutputFile::prepare(path)?;
        out.file().write_all(body).map_err(|source| OutputError {
            path: path.to_path_buf(),
            source,
        })?;
        out.commit()
    }

    #[test]
    fn regular_files_are_replaced_whole_and_keep_their_mode() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("layer.tar");
        write(&p, b"one").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        // Prepared but not committed: the old contents stay, no temporary file is left.
        let mut out = OutputFile::prepare(&p).unwrap();
        out.file().write_all(b"half").unwrap();
        drop(out);
        assert_eq!(fs::read(&p).unwrap(), b"one");
        write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
    }

    #[test]
    fn symlinks_are_written_through() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real.tar");
        fs::write(&real, b"old").unwrap();
        let link = t.path().join("link.tar");
        symlink("real.tar", &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"new");
        // A dangling link: the file is created where it points.
        let dangling = t.path().join("dangling.tar");
        symlink("sub/made.tar", &dangling).unwrap();
        fs::create_dir(t.path().join("sub")).unwrap();
        write(&dangling, b"made").unwrap();
        assert_eq!(fs::read(t.path().join("sub/made.tar")).unwrap(), b"made");
        assert!(
            fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    /// A character device node like /dev/null (minor 3) or /dev/full (minor 7), made in a
    /// scratch directory so a regression cannot replace the machine's own; `None` when this
    /// user may not make device nodes.
    fn mem_device(dir: &Path, name: &str, minor: u32) -> Option<PathBuf> {
        let p = dir.join(name);
        let made = std::process::Command::new("mknod")
            .arg(&p)
            .args(["c", "1", &minor.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            let root = fs::metadata("/proc/self")
                .is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
            assert!(!root, "mknod failed as root");
            return None;
        }
        Some(p)
    }

    #[test]
    fn devices_and_fifos_are_written_through_never_replaced() {
        let t = tempfile::tempdir().unwrap();
        if let Some(null) = mem_device(t.path(), "null", 3) {
            write(&null, b"gone").unwrap();
            assert!(fs::metadata(&null).unwrap().file_type().is_char_device());
        }
        if let Some(full) = mem_device(t.path(), "full", 7) {
            let e = write(&full, &[0; 1 << 16]).unwrap_err();
            assert_eq!(e.source.raw_os_error(), Some(28), "{e}");
            assert!(fs::metadata(&full).unwrap().file_type().is_char_device());
        }
        // A FIFO with a reader.
        let fifo = t.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                File::open(fifo).unwrap().read_to_string(&mut s).unwrap();
                s
            })
        };
        write(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn what_cannot_be_written_is_refused_before_writing() {
        let t = tempfile::tempdir().unwrap();
        let cases = [
            (t.path().to_path_buf(), "is a directory"),
            (t.path().join("no/such/dir/x.tar"), "does not exist"),
        ];
        for (p, needle) in cases {
            let e = OutputFile::prepare(&p).unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains(&p.display().to_string()),
                "{e}"
            );
        }
        let file = t.path().join("file");
        fs::write(&file, b"x").unwrap();
        let e = OutputFile::prepare(&file.join("below"))
            .unwrap_err()
            .to_string();
        assert!(e.to_lowercase().contains("not a directory"), "{e}");
    }
}
