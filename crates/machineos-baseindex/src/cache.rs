//! The on-disk cache of base indexes, keyed by the base image's (platform-specific)
//! manifest digest, so each base is streamed and indexed once per machine.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use machineos_image::Digest;

use crate::{BaseIndex, IndexError};

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Reading a cached index failed (other than it being absent).
    #[error("loading cached base index {path}: {error}")]
    Read {
        /// The cache file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
    /// A cached index cannot be used (see [`Cache::load`]).
    #[error("cached base index {path}: unusable: {what}")]
    Unusable {
        /// The cache file.
        path: PathBuf,
        /// Why.
        what: String,
    },
    /// Writing a cached index failed.
    #[error("storing base index at {path}: {error}")]
    Write {
        /// The file or directory being written.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
}

/// The largest cache file [`Cache::load`] reads: twice what an index at the limits of
/// the index builder ([`crate::MAX_PATHS`], [`crate::MAX_PATH_BYTES`], [`crate::KEEP_TOTAL`])
/// encodes to.
pub const MAX_CACHE_FILE: u64 = 1 << 30;

/// A directory of encoded indexes: `<dir>/index/<algorithm>/<hex>.idx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    dir: PathBuf,
}

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

    /// The cached index of the base with manifest digest `key`; `None` when there is none.
    /// An entry that cannot be used — not a regular file (a FIFO, a symlink, a directory),
    /// larger than [`MAX_CACHE_FILE`], unreadable, corrupt or from another format version —
    /// is an error; a build should warn and index the base instead (which overwrites it).
    pub fn load(&self, key: &Digest) -> Result<Option<BaseIndex>, IndexError> {
        let path = self.path_for(key);
        let unusable = |what: String| CacheError::Unusable {
            path: path.clone(),
            what,
        };
        // Never follow a symlink (to /dev/zero, say) and never wait on a FIFO.
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(unusable("it is a symbolic link".into()).into());
            }
            Err(error) => return Err(CacheError::Read { path, error }.into()),
        };
        let meta = file.metadata().map_err(|error| CacheError::Read {
            path: path.clone(),
            error,
        })?;
        if !meta.is_file() {
            return Err(unusable("it is not a regular file".into()).into());
        }
        if meta.len() > MAX_CACHE_FILE {
            return Err(unusable(format!(
                "it is {} bytes, more than the {MAX_CACHE_FILE} a cached index can be",
                meta.len()
            ))
            .into());
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&file)
            .take(MAX_CACHE_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| CacheError::Read {
                path: path.clone(),
                error,
            })?;
        if bytes.len() as u64 > MAX_CACHE_FILE {
            return Err(unusable("it grew while it was read".into()).into());
        }
        BaseIndex::from_bytes(bytes)
            .map(Some)
            .map_err(|e| unusable(e.to_string()).into())
    }

    /// The file a small blob (a base's config) with digest `key` is kept in.
    pub fn blob_path(&self, key: &Digest) -> PathBuf {
        self.dir
            .join("blobs")
            .join(key.algorithm().as_str())
            .join(key.hex())
    }

    /// The kept copy of the blob with digest `key` (a base's config, which a warm build then
    /// does not fetch); `None` when there is none, or when it is unreadable, too large or
    /// does not hash to `key` — the caller fetches the blob instead.
    pub fn load_blob(&self, key: &Digest, max: u64) -> Option<Vec<u8>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.blob_path(key))
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        (&file).take(max + 1).read_to_end(&mut bytes).ok()?;
        (bytes.len() as u64 <= max && key.same_algorithm_of(&bytes) == *key).then_some(bytes)
    }

    /// Keeps `bytes`, whose digest is `key`, for [`Cache::load_blob`] (atomically, owner
    /// only, as indexes are).
    pub fn store_blob(&self, key: &Digest, bytes: &[u8]) -> Result<(), CacheError> {
        let path = self.blob_path(key);
        let dir = path.parent().unwrap_or(&self.dir).to_path_buf();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|error| CacheError::Write {
                path: dir.clone(),
                error,
            })?;
        machineos_image::atomic::write(&path, bytes, 0o600)
            .map_err(|error| CacheError::Write { path, error })
    }

    /// Store `index` as the index of the base with manifest digest `key`, atomically: a
    /// temporary file in the same directory is written, synced and renamed into place.
    pub fn store(&self, key: &Digest, index: &BaseIndex) -> Result<(), IndexError> {
        let path = self.path_for(key);
        let dir = path.parent().unwrap_or(&self.dir).to_path_buf();
        let werr = |path: &Path| {
            let path = path.to_path_buf();
            move |error| CacheError::Write { path, error }
        };
        // The index keeps small files of the base's /etc, which may include /etc/shadow or
        // keys: the cache is readable by its owner only.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(werr(&dir))?;
        index.check_names()?;
        machineos_image::atomic::write(&path, index.as_bytes(), 0o600).map_err(werr(&path))?;
        Ok(())
    }
}
