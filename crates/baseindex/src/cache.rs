//! The on-disk cache of base indexes, keyed by the base image's (platform-specific)
//! manifest digest, so each base is streamed and indexed once per machine.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use machineos_image::Digest;

use crate::{BaseIndex, IndexError};

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Reading a cached index failed (other than it being absent).
    #[error("loading cached base index {path}: {source}")]
    Read {
        /// The cache file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Writing a cached index failed.
    #[error("storing base index at {path}: {source}")]
    Write {
        /// The file or directory being written.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A directory of encoded indexes: `<dir>/index/<algorithm>/<hex>.idx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    dir: PathBuf,
}

/// Distinguishes temporary files of concurrent stores within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Cache {
    /// A cache rooted at `dir` (created on first store).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// `$XDG_CACHE_HOME/machineos`, else `$HOME/.cache/machineos`; `None` when neither
    /// variable is set to an absolute path.
    pub fn default_dir() -> Option<PathBuf> {
        let var = |name| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        var("XDG_CACHE_HOME")
            .map(|d| d.join("machineos"))
            .or_else(|| var("HOME").map(|h| h.join(".cache").join("machineos")))
    }

    /// The directory this cache lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file the index of the base with manifest digest `key` is stored in.
    pub fn path_for(&self, key: &Digest) -> PathBuf {
        self.dir
            .join("index")
            .join(key.algorithm().as_str())
            .join(format!("{}.idx", key.hex()))
    }

    /// The cached index of the base with manifest digest `key`; `None` when there is none,
    /// or when the cached file is unreadable as an index (logged; it will be rebuilt).
    pub fn load(&self, key: &Digest) -> Result<Option<BaseIndex>, IndexError> {
        let path = self.path_for(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(CacheError::Read { path, source }.into()),
        };
        match BaseIndex::decode(&bytes) {
            Ok(idx) => Ok(Some(idx)),
            Err(e) => {
                // The one place an error is deliberately downgraded: a corrupt or
                // outdated cache entry only costs a rebuild, which overwrites it.
                tracing::warn!(file = %path.display(), error = %e, "ignoring unusable cached base index");
                Ok(None)
            }
        }
    }

    /// Store `index` as the index of the base with manifest digest `key`, atomically: a
    /// temporary file in the same directory is written, synced and renamed into place.
    pub fn store(&self, key: &Digest, index: &BaseIndex) -> Result<(), IndexError> {
        let path = self.path_for(key);
        let dir = path.parent().unwrap_or(&self.dir).to_path_buf();
        let werr = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CacheError::Write { path, source }
        };
        // The index keeps small files of the base's /etc, which may include /etc/shadow or
        // keys: the cache is readable by its owner only.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(werr(&dir))?;
        let tmp = dir.join(format!(
            ".{}.idx.{}.{}.tmp",
            key.hex(),
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&index.encode())?;
            f.sync_all()
        };
        if let Err(e) = write().and_then(|()| std::fs::rename(&tmp, &path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(werr(&path)(e).into());
        }
        // Make the rename itself durable.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(werr(&dir))?;
        Ok(())
    }
}
