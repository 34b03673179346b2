//! An OCI image layout directory (image-spec `image-layout.md`): the on-disk store machineos
//! builds into and pushes from. Blobs are streamed to a temporary file next to their final place,
//! hashed while written, synced and renamed, so a crash never leaves a blob under a wrong name;
//! `index.json` is replaced atomically the same way.
//!
//! Several writers may share a layout: `oci-layout` and the first `index.json` are created
//! with no-clobber links (the first writer's wins, whole), and every change of `index.json` is
//! a read-modify-write under an exclusive lock on `.index.json.lock`. A writer holds a lock on
//! each of its temporary files while it lives, so [`Layout::create`] removes the temporary
//! files of killed writers (unlocked and older than [`STALE_TEMP_AGE`]) and never a live one's.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use machineos_diagnostics::{Classify, Retry, io_retry};
use serde::{Deserialize, Serialize};
use tempfile::NamedTempFile;

use crate::atomic::{self, Existing};

use crate::descriptor::Descriptor;
use crate::digest::{Algorithm, Digest, DigestReader, DigestWriter};
use crate::manifest::{ImageIndex, json_path};

/// The annotation an `index.json` entry uses for its tag.
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// The `imageLayoutVersion` this module writes.
pub const IMAGE_LAYOUT_VERSION: &str = "1.0.0";

/// How old an unlocked temporary file must be before [`Layout::create`] removes it (the
/// instant between creating a temporary file and locking it must never look stale).
pub const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Names of temporary files: `.tmp-blob-*` in `blobs/`, `.tmp-*` in the layout directory.
const TEMP_PREFIX: &str = ".tmp-";

const OCI_LAYOUT_FILE: &str = "oci-layout";
const INDEX_FILE: &str = "index.json";
const BLOBS_DIR: &str = "blobs";

/// Why an OCI layout operation failed. Every variant names the layout directory.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// A filesystem operation failed.
    #[error("OCI layout {}: {op} {}: {error}", dir.display(), path.display())]
    Io {
        /// The layout directory.
        dir: PathBuf,
        /// What was being done (`creating directory`, `writing blob`, ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        error: io::Error,
    },
    /// The directory does not exist (for [`Layout::open`]).
    #[error("opening OCI layout {}: directory does not exist", dir.display())]
    Missing {
        /// The layout directory.
        dir: PathBuf,
    },
    /// The `oci-layout` file is missing.
    #[error("opening OCI layout {}: no oci-layout file; not an OCI image layout", dir.display())]
    NotALayout {
        /// The layout directory.
        dir: PathBuf,
    },
    /// The `oci-layout` file is not `{"imageLayoutVersion":"1.x.y"}`.
    #[error("opening OCI layout {}: oci-layout: {problem}", dir.display())]
    BadOciLayout {
        /// The layout directory.
        dir: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// `index.json` is not a valid image index.
    #[error("reading OCI layout {}: index.json at {path}: {error}", dir.display())]
    BadIndex {
        /// The layout directory.
        dir: PathBuf,
        /// JSON path of the problem.
        path: String,
        /// The underlying error.
        error: serde_json::Error,
    },
    /// A blob is not in the layout.
    #[error("OCI layout {}: blob {digest} not found", dir.display())]
    BlobNotFound {
        /// The layout directory.
        dir: PathBuf,
        /// The missing blob.
        digest: Digest,
    },
    /// A blob's content does not hash to its name (or the expected digest).
    #[error("OCI layout {}: blob {expected}: content has digest {actual}", dir.display())]
    DigestMismatch {
        /// The layout directory.
        dir: PathBuf,
        /// The digest the content should have.
        expected: Digest,
        /// The digest the content has.
        actual: Digest,
    },
    /// A blob's size is not what its descriptor says.
    #[error("OCI layout {}: blob {digest}: {actual} bytes where its descriptor says {expected}", dir.display())]
    SizeMismatch {
        /// The layout directory.
        dir: PathBuf,
        /// The blob.
        digest: Digest,
        /// The size the descriptor says.
        expected: u64,
        /// The size found (or copied, stopping one past the expected size).
        actual: u64,
    },
    /// No `index.json` entry carries the tag.
    #[error("OCI layout {}: no manifest tagged {tag:?} (tags: {available})", dir.display())]
    TagNotFound {
        /// The layout directory.
        dir: PathBuf,
        /// The wanted tag.
        tag: String,
        /// The tags present, comma separated (`none` when empty).
        available: String,
    },
    /// No tag was given and the index does not have exactly one entry.
    #[error("OCI layout {}: no tag given and index.json has {count} manifests (need exactly one)", dir.display())]
    Ambiguous {
        /// The layout directory.
        dir: PathBuf,
        /// How many entries the index has.
        count: usize,
    },
    /// An empty tag was given.
    #[error("OCI layout {}: tag must not be empty", dir.display())]
    EmptyTag {
        /// The layout directory.
        dir: PathBuf,
    },
}

impl Classify for LayoutError {
    /// What is wrong: the layout or its content (`LayoutNotFound`, `InvalidLayout`,
    /// `BlobNotFound`, `DigestMismatch`, `SizeMismatch`), the reference into it
    /// (`ImageNotFound`, `AmbiguousImageReference`, `InvalidImageReference`), or the
    /// filesystem (`LayoutIOError`).
    fn reason(&self) -> &'static str {
        match self {
            LayoutError::Io { .. } => "LayoutIOError",
            LayoutError::Missing { .. } => "LayoutNotFound",
            LayoutError::NotALayout { .. }
            | LayoutError::BadOciLayout { .. }
            | LayoutError::BadIndex { .. } => "InvalidLayout",
            LayoutError::BlobNotFound { .. } => "BlobNotFound",
            LayoutError::DigestMismatch { .. } => "DigestMismatch",
            LayoutError::SizeMismatch { .. } => "SizeMismatch",
            LayoutError::TagNotFound { .. } | LayoutError::Ambiguous { count: 0, .. } => {
                "ImageNotFound"
            }
            LayoutError::Ambiguous { .. } => "AmbiguousImageReference",
            LayoutError::EmptyTag { .. } => "InvalidImageReference",
        }
    }

    /// A filesystem error is retried as its kind says ([`machineos_diagnostics::io_retry`]:
    /// a full disk yes, a permission denied no); everything else must change first.
    fn retry(&self) -> Retry {
        match self {
            LayoutError::Io { error, .. } => io_retry(error),
            _ => Retry::Permanent,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OciLayoutFile {
    image_layout_version: String,
}

/// Check the contents of an `oci-layout` file; the error text says what is wrong.
fn parse_oci_layout(bytes: &[u8]) -> Result<(), String> {
    let f: OciLayoutFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("not {{\"imageLayoutVersion\": \"1.0.0\"}}: {e}"))?;
    if f.image_layout_version.split('.').next() != Some("1") {
        return Err(format!(
            "unsupported imageLayoutVersion {:?} (expected 1.x)",
            f.image_layout_version
        ));
    }
    Ok(())
}

/// Parse the contents of `index.json`.
fn parse_index(bytes: &[u8]) -> Result<ImageIndex, (String, serde_json::Error)> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| (json_path(e.path()), e.into_inner()))
}

/// An OCI image layout directory.
#[derive(Debug, Clone)]
pub struct Layout {
    dir: PathBuf,
}

impl Layout {
    /// Open the layout at `dir`, creating the directory, `oci-layout`, `index.json` and
    /// `blobs/sha256` as needed. An existing `oci-layout` is validated.
    pub fn create(dir: &Path) -> Result<Layout, LayoutError> {
        let layout = Layout {
            dir: dir.to_path_buf(),
        };
        fs::create_dir_all(dir).map_err(|e| layout.io("creating directory", dir, e))?;
        let marker = dir.join(OCI_LAYOUT_FILE);
        match fs::read(&marker) {
            Ok(bytes) => layout.check_oci_layout(&bytes)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let body = serde_json::to_vec(&OciLayoutFile {
                    image_layout_version: IMAGE_LAYOUT_VERSION.to_owned(),
                })
                .map_err(|e| layout.io("encoding", &marker, io::Error::other(e)))?;
                // Another writer may create it at the same time; either copy is the same.
                layout.create_new(&marker, &body)?;
            }
            Err(e) => return Err(layout.io("reading", &marker, e)),
        }
        let sha_dir = dir.join(BLOBS_DIR).join("sha256");
        fs::create_dir_all(&sha_dir).map_err(|e| layout.io("creating directory", &sha_dir, e))?;
        let index = dir.join(INDEX_FILE);
        match fs::symlink_metadata(&index) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let body = serde_json::to_vec(&ImageIndex::empty())
                    .map_err(|e| layout.io("encoding", &index, io::Error::other(e)))?;
                // Never over an index another writer created (and maybe tagged) meanwhile.
                layout.create_new(&index, &body)?
            }
            Err(e) => return Err(layout.io("inspecting", &index, e)),
        }
        layout.remove_stale_temp_files();
        Ok(layout)
    }

    /// Open an existing layout at `dir`; its `oci-layout` file must exist and be valid.
    pub fn open(dir: &Path) -> Result<Layout, LayoutError> {
        let layout = Layout {
            dir: dir.to_path_buf(),
        };
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(layout.io(
                    "opening",
                    dir,
                    io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(LayoutError::Missing {
                    dir: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(layout.io("opening", dir, e)),
        }
        let marker = dir.join(OCI_LAYOUT_FILE);
        match fs::read(&marker) {
            Ok(bytes) => layout.check_oci_layout(&bytes)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(LayoutError::NotALayout {
                    dir: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(layout.io("reading", &marker, e)),
        }
        Ok(layout)
    }

    /// The layout directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob with `digest` lives: `blobs/<algorithm>/<hex>`.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir
            .join(BLOBS_DIR)
            .join(digest.algorithm().as_str())
            .join(digest.hex())
    }

    /// Whether the blob is present (its content is not verified).
    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blob_path(digest).is_file()
    }

    /// Store `data` as a blob; returns its SHA-256 digest and size.
    pub fn write_blob(&self, data: &[u8]) -> Result<(Digest, u64), LayoutError> {
        self.write_blob_from(data)
    }

    /// Stream `reader` into a blob without holding it in memory; returns its SHA-256 digest
    /// and size. (To store a blob that must have a given digest, in any algorithm, use
    /// [`Layout::copy_blob`].)
    pub fn write_blob_from(&self, mut reader: impl Read) -> Result<(Digest, u64), LayoutError> {
        let mut w = self.blob_writer()?;
        let tmp = w.temp_path();
        io::copy(&mut reader, &mut w).map_err(|e| self.io("copying data into blob", &tmp, e))?;
        w.commit()
    }

    /// A writer for a new blob, hashed SHA-256; call [`BlobWriter::commit`] to store it.
    /// Dropping it uncommitted removes the temporary file.
    pub fn blob_writer(&self) -> Result<BlobWriter, LayoutError> {
        self.blob_writer_with(Algorithm::Sha256)
    }

    /// [`Layout::blob_writer`] hashing with `algorithm` (the blob is stored under
    /// `blobs/<algorithm>/`).
    pub fn blob_writer_with(&self, algorithm: Algorithm) -> Result<BlobWriter, LayoutError> {
        let alg_dir = self.dir.join(BLOBS_DIR).join(algorithm.as_str());
        fs::create_dir_all(&alg_dir).map_err(|e| self.io("creating directory", &alg_dir, e))?;
        let blobs = self.dir.join(BLOBS_DIR);
        let tmp = self.locked_temp_file(&blobs, ".tmp-blob-")?;
        Ok(BlobWriter {
            layout: self.clone(),
            inner: DigestWriter::with_algorithm(BufWriter::new(tmp), algorithm),
        })
    }

    /// Stores the blob `reader` yields, which must be `size` bytes with digest `expected`
    /// (in that digest's algorithm); anything else is refused and nothing is stored.
    pub fn copy_blob(
        &self,
        mut reader: impl Read,
        expected: &Digest,
        size: u64,
    ) -> Result<(), LayoutError> {
        let mut w = self.blob_writer_with(expected.algorithm())?;
        let tmp = w.temp_path();
        let copied = io::copy(&mut (&mut reader).take(size + 1), &mut w)
            .map_err(|e| self.io("copying data into blob", &tmp, e))?;
        if copied != size {
            return Err(LayoutError::SizeMismatch {
                dir: self.dir.clone(),
                digest: expected.clone(),
                expected: size,
                actual: copied,
            });
        }
        w.commit_expecting(expected).map(drop)
    }

    /// Checks that the stored blob is `size` bytes with digest `digest`, reading it whole.
    pub fn verify_blob(&self, digest: &Digest, size: u64) -> Result<(), LayoutError> {
        let file = self.open_blob(digest)?;
        let path = self.blob_path(digest);
        let len = file
            .metadata()
            .map_err(|e| self.io("inspecting blob", &path, e))?
            .len();
        if len != size {
            return Err(LayoutError::SizeMismatch {
                dir: self.dir.clone(),
                digest: digest.clone(),
                expected: size,
                actual: len,
            });
        }
        let mut r = DigestReader::with_algorithm(io::BufReader::new(file), digest.algorithm());
        io::copy(&mut r, &mut io::sink()).map_err(|e| self.io("reading blob", &path, e))?;
        let actual = r.finish().0;
        if &actual != digest {
            return Err(LayoutError::DigestMismatch {
                dir: self.dir.clone(),
                expected: digest.clone(),
                actual,
            });
        }
        Ok(())
    }

    /// Open a blob for reading (its content is not verified).
    pub fn open_blob(&self, digest: &Digest) -> Result<File, LayoutError> {
        let path = self.blob_path(digest);
        File::open(&path).map_err(|e| self.blob_err(digest, &path, e))
    }

    /// Read a whole blob, verifying that its content matches `digest`.
    pub fn read_blob(&self, digest: &Digest) -> Result<Vec<u8>, LayoutError> {
        let path = self.blob_path(digest);
        let data = fs::read(&path).map_err(|e| self.blob_err(digest, &path, e))?;
        let actual = digest.same_algorithm_of(&data);
        if &actual != digest {
            return Err(LayoutError::DigestMismatch {
                dir: self.dir.clone(),
                expected: digest.clone(),
                actual,
            });
        }
        Ok(data)
    }

    /// Read and parse `index.json`.
    pub fn index(&self) -> Result<ImageIndex, LayoutError> {
        let path = self.dir.join(INDEX_FILE);
        let bytes = fs::read(&path).map_err(|e| self.io("reading", &path, e))?;
        parse_index(&bytes).map_err(|(path, error)| LayoutError::BadIndex {
            dir: self.dir.clone(),
            path,
            error,
        })
    }

    /// The `index.json` entry tagged `tag` (by its `org.opencontainers.image.ref.name`
    /// annotation); with no tag, the index's only entry.
    pub fn resolve(&self, tag: Option<&str>) -> Result<Descriptor, LayoutError> {
        let index = self.index()?;
        match tag {
            Some(tag) => index
                .manifests
                .iter()
                .find(|d| ref_name(d) == Some(tag))
                .cloned()
                .ok_or_else(|| {
                    let tags: Vec<&str> = index.manifests.iter().filter_map(ref_name).collect();
                    LayoutError::TagNotFound {
                        dir: self.dir.clone(),
                        tag: tag.to_owned(),
                        available: if tags.is_empty() {
                            "none".to_owned()
                        } else {
                            tags.join(", ")
                        },
                    }
                }),
            None => match index.manifests.as_slice() {
                [only] => Ok(only.clone()),
                many => Err(LayoutError::Ambiguous {
                    dir: self.dir.clone(),
                    count: many.len(),
                }),
            },
        }
    }

    /// Tag `desc` as `tag` in `index.json`, replacing any entry with the same tag and keeping
    /// all others (with every field, known to us or not). `index.json` is replaced atomically.
    pub fn set_tag(&self, tag: &str, desc: &Descriptor) -> Result<(), LayoutError> {
        if tag.is_empty() {
            return Err(LayoutError::EmptyTag {
                dir: self.dir.clone(),
            });
        }
        let mut entry = desc.clone();
        entry
            .annotations
            .insert(ANNOTATION_REF_NAME.to_owned(), tag.to_owned());
        let entry = self.entry_value(&entry)?;
        self.update_index(|manifests| {
            manifests.retain(|m| value_ref_name(m) != Some(tag));
            manifests.push(entry);
            true
        })
    }

    /// Add `desc` to `index.json` as an untagged entry (any ref-name annotation is dropped);
    /// nothing changes if an identical untagged entry is already there.
    pub fn add_manifest(&self, desc: &Descriptor) -> Result<(), LayoutError> {
        let mut entry = desc.clone();
        entry.annotations.remove(ANNOTATION_REF_NAME);
        let entry = self.entry_value(&entry)?;
        self.update_index(|manifests| {
            if manifests.contains(&entry) {
                return false;
            }
            manifests.push(entry);
            true
        })
    }

    fn entry_value(&self, desc: &Descriptor) -> Result<serde_json::Value, LayoutError> {
        serde_json::to_value(desc).map_err(|e| {
            self.io(
                "encoding an entry of",
                &self.dir.join(INDEX_FILE),
                io::Error::other(e),
            )
        })
    }

    /// Changes `index.json`'s `manifests` under an exclusive lock (so two writers into one
    /// layout do not lose each other's tags), patching the JSON as a value so fields we do
    /// not model (`subject`, `artifactType`, annotations) survive. `change` returns whether
    /// it changed anything.
    fn update_index(
        &self,
        change: impl FnOnce(&mut Vec<serde_json::Value>) -> bool,
    ) -> Result<(), LayoutError> {
        let path = self.dir.join(INDEX_FILE);
        let lock_path = self.dir.join(".index.json.lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.io("opening", &lock_path, e))?;
        lock.lock().map_err(|e| self.io("locking", &lock_path, e))?;
        let bytes = fs::read(&path).map_err(|e| self.io("reading", &path, e))?;
        // Validate as an index first, for the same errors as [`Layout::index`].
        parse_index(&bytes).map_err(|(path, error)| LayoutError::BadIndex {
            dir: self.dir.clone(),
            path,
            error,
        })?;
        let mut root: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| self.io("reading", &path, io::Error::other(e)))?;
        let Some(obj) = root.as_object_mut() else {
            return Err(self.io("reading", &path, io::Error::other("not a JSON object")));
        };
        let manifests = obj
            .entry("manifests")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if manifests.is_null() {
            *manifests = serde_json::Value::Array(Vec::new());
        }
        let Some(list) = manifests.as_array_mut() else {
            return Err(self.io(
                "reading",
                &path,
                io::Error::other("$.manifests is not an array"),
            ));
        };
        if !change(list) {
            return Ok(());
        }
        let body = serde_json::to_vec(&root)
            .map_err(|e| self.io("encoding", &path, io::Error::other(e)))?;
        self.write_atomically(&path, &body)
        // The lock is released when `lock` is dropped.
    }

    /// Write `body` to a temporary file in the layout directory and put it at `path` (see
    /// [`crate::atomic`]).
    fn write_atomically(&self, path: &Path, body: &[u8]) -> Result<(), LayoutError> {
        let tmp = self.synced_temp_file(body)?;
        atomic::commit(tmp, path, Existing::Replace)
            .map(|_| ())
            .map_err(|e| self.io("replacing", path, e))
    }

    /// Create `path` with `body` unless it exists: the file appears whole or not at all, and
    /// an existing one (another writer's) is kept.
    fn create_new(&self, path: &Path, body: &[u8]) -> Result<(), LayoutError> {
        let tmp = self.synced_temp_file(body)?;
        atomic::commit(tmp, path, Existing::Keep)
            .map(|_| ())
            .map_err(|e| self.io("creating", path, e))
    }

    /// A locked temporary file in the layout directory holding `body`, synced.
    fn synced_temp_file(&self, body: &[u8]) -> Result<NamedTempFile, LayoutError> {
        let mut tmp = self.locked_temp_file(&self.dir, TEMP_PREFIX)?;
        tmp.write_all(body)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| self.io("writing", tmp.path(), e))?;
        Ok(tmp)
    }

    /// A temporary file in `dir`, exclusively locked for as long as it is open, so that
    /// [`Layout::remove_stale_temp_files`] can tell a live writer's file from a dead one's.
    fn locked_temp_file(&self, dir: &Path, prefix: &str) -> Result<NamedTempFile, LayoutError> {
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempfile_in(dir)
            .map_err(|e| self.io("creating temporary file in", dir, e))?;
        tmp.as_file()
            .lock()
            .map_err(|e| self.io("locking", tmp.path(), e))?;
        Ok(tmp)
    }

    /// Removes the temporary files writers that were killed left behind: those nobody holds
    /// a lock on that are older than [`STALE_TEMP_AGE`]. Best effort: what cannot be
    /// inspected or removed stays, and is logged.
    pub fn remove_stale_temp_files(&self) -> usize {
        let mut removed = 0;
        for dir in [self.dir.clone(), self.dir.join(BLOBS_DIR)] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !name.to_string_lossy().starts_with(TEMP_PREFIX) {
                    continue;
                }
                let path = entry.path();
                match remove_if_stale(&path) {
                    Ok(true) => removed += 1,
                    Ok(false) => {}
                    Err(e) => tracing::debug!(
                        "OCI layout {}: leaving {}: {e}",
                        self.dir.display(),
                        path.display()
                    ),
                }
            }
        }
        removed
    }

    fn check_oci_layout(&self, bytes: &[u8]) -> Result<(), LayoutError> {
        parse_oci_layout(bytes).map_err(|problem| LayoutError::BadOciLayout {
            dir: self.dir.clone(),
            problem,
        })
    }

    fn io(&self, op: &'static str, path: &Path, error: io::Error) -> LayoutError {
        LayoutError::Io {
            dir: self.dir.clone(),
            op,
            path: path.to_path_buf(),
            error,
        }
    }

    fn blob_err(&self, digest: &Digest, path: &Path, e: io::Error) -> LayoutError {
        if e.kind() == io::ErrorKind::NotFound {
            LayoutError::BlobNotFound {
                dir: self.dir.clone(),
                digest: digest.clone(),
            }
        } else {
            self.io("reading blob", path, e)
        }
    }
}

fn value_ref_name(v: &serde_json::Value) -> Option<&str> {
    v.get("annotations")?.get(ANNOTATION_REF_NAME)?.as_str()
}

fn ref_name(d: &Descriptor) -> Option<&str> {
    d.annotations.get(ANNOTATION_REF_NAME).map(String::as_str)
}

/// Removes `path` if it is a regular file older than [`STALE_TEMP_AGE`] that no one holds a
/// lock on; whether it was removed.
fn remove_if_stale(path: &Path) -> io::Result<bool> {
    let meta = fs::symlink_metadata(path)?;
    let age = meta
        .modified()?
        .elapsed()
        .unwrap_or(std::time::Duration::ZERO);
    if !meta.is_file() || age < STALE_TEMP_AGE {
        return Ok(false);
    }
    let file = File::open(path)?;
    match file.try_lock() {
        Ok(()) => {
            fs::remove_file(path)?;
            Ok(true)
        }
        Err(fs::TryLockError::WouldBlock) => Ok(false),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

/// A blob being written into a [`Layout`]: hashed as written, stored under its digest on
/// [`BlobWriter::commit`], and discarded (temporary file removed) if dropped uncommitted.
#[derive(Debug)]
pub struct BlobWriter {
    layout: Layout,
    inner: DigestWriter<BufWriter<NamedTempFile>>,
}

impl BlobWriter {
    fn temp_path(&self) -> PathBuf {
        self.inner.get_ref().get_ref().path().to_path_buf()
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.inner.size()
    }

    /// Flush, sync and move the blob into place; returns its digest (in the writer's
    /// algorithm) and size. If the blob already exists the new copy is discarded.
    pub fn commit(self) -> Result<(Digest, u64), LayoutError> {
        let (layout, file, digest, size) = self.finish()?;
        layout.place(file, &digest)?;
        Ok((digest, size))
    }

    /// Like [`BlobWriter::commit`], but fail (discarding the content) if it does not hash to
    /// `expected`; returns the size.
    pub fn commit_expecting(self, expected: &Digest) -> Result<u64, LayoutError> {
        let (layout, file, digest, size) = self.finish()?;
        if &digest != expected {
            // Dropping `file` removes the temporary file.
            drop(file);
            return Err(LayoutError::DigestMismatch {
                dir: layout.dir,
                expected: expected.clone(),
                actual: digest,
            });
        }
        layout.place(file, &digest)?;
        Ok(size)
    }

    fn finish(self) -> Result<(Layout, NamedTempFile, Digest, u64), LayoutError> {
        let (buf, digest, size) = self.inner.finish();
        let layout = self.layout;
        let file = buf.into_inner().map_err(|e| {
            let (error, buf) = e.into_parts();
            layout.io("writing blob", buf.get_ref().path(), error)
        })?;
        file.as_file()
            .sync_all()
            .map_err(|e| layout.io("syncing blob", file.path(), e))?;
        Ok((layout, file, digest, size))
    }
}

impl Layout {
    fn place(&self, file: NamedTempFile, digest: &Digest) -> Result<(), LayoutError> {
        // Content-addressed: an existing blob is the same bytes, and is kept.
        let dest = self.blob_path(digest);
        atomic::commit(file, &dest, Existing::Keep)
            .map(|_| ())
            .map_err(|e| self.io("storing blob", &dest, e))
    }
}

impl Write for BlobWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::media_type;

    #[test]
    fn tagging_keeps_fields_we_do_not_model() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let other = serde_json::json!({
            "mediaType": media_type::OCI_MANIFEST,
            "digest": Digest::from_sha256_bytes([9; 32]).to_string(),
            "size": 3,
            "artifactType": "application/vnd.example.sbom",
            "annotations": {"org.opencontainers.image.ref.name": "sbom"}
        });
        let index = serde_json::json!({
            "schemaVersion": 2,
            "subject": {"mediaType": media_type::OCI_MANIFEST,
                        "digest": Digest::from_sha256_bytes([8; 32]).to_string(), "size": 1},
            "manifests": [other]
        });
        std::fs::write(dir.path().join(INDEX_FILE), index.to_string()).unwrap();
        layout.set_tag("v1", &desc(1)).unwrap();
        let got: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(INDEX_FILE)).unwrap()).unwrap();
        assert_eq!(got["subject"], index["subject"]);
        assert_eq!(got["manifests"][0], other);
        assert_eq!(
            got["manifests"][1]["annotations"][ANNOTATION_REF_NAME],
            "v1"
        );
    }

    fn desc(n: u8) -> Descriptor {
        Descriptor::new(
            media_type::OCI_MANIFEST,
            Digest::from_sha256_bytes([n; 32]),
            1,
        )
    }

    fn tmp_names(layout: &Layout) -> Vec<String> {
        fs::read_dir(layout.dir().join(BLOBS_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tmp"))
            .collect()
    }

    /// Writers racing into one fresh layout: every tag survives (the first `index.json` is
    /// never created over one another writer already tagged into).
    #[test]
    fn concurrent_writers_into_a_fresh_layout_keep_every_tag() {
        for round in 0..40 {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("out");
            let writers = 6;
            std::thread::scope(|s| {
                for w in 0..writers {
                    let dir = dir.clone();
                    s.spawn(move || {
                        let l = Layout::create(&dir).unwrap();
                        l.set_tag(&format!("w{w}"), &desc(w as u8)).unwrap();
                    });
                }
            });
            let l = Layout::open(&dir).unwrap();
            for w in 0..writers {
                match l.resolve(Some(&format!("w{w}"))) {
                    Ok(d) => assert_eq!(d.digest, desc(w as u8).digest, "round {round}"),
                    Err(e) => panic!(
                        "round {round}: tag w{w} lost ({e}): {:?}",
                        l.index().unwrap().manifests
                    ),
                }
            }
            assert!(tmp_names(&l).is_empty());
        }
    }

    #[test]
    fn stale_temporary_files_go_live_ones_stay() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        let old = std::time::SystemTime::now() - STALE_TEMP_AGE * 2;
        // A killed writer's blob and index temporaries: unlocked and old.
        for p in [
            t.path().join("blobs/.tmp-blob-dead"),
            t.path().join(".tmp-dead"),
        ] {
            let f = File::create(&p).unwrap();
            f.set_modified(old).unwrap();
        }
        // A live writer: locked (old, as a slow upload's file can be).
        let mut live = l.blob_writer().unwrap();
        live.write_all(b"in progress").unwrap();
        live.inner
            .get_ref()
            .get_ref()
            .as_file()
            .set_modified(old)
            .unwrap();
        // A fresh unlocked one (a writer between creating and locking it).
        File::create(t.path().join("blobs/.tmp-blob-fresh")).unwrap();
        // Someone else's file.
        File::create(t.path().join("blobs/notes"))
            .unwrap()
            .set_modified(old)
            .unwrap();

        let l = Layout::create(t.path()).unwrap();
        let mut left = tmp_names(&l);
        left.sort();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.contains(&".tmp-blob-fresh".to_string()), "{left:?}");
        assert!(!t.path().join(".tmp-dead").exists());
        assert!(t.path().join("blobs/notes").exists());
        assert_eq!(live.commit().unwrap().0, Digest::sha256(b"in progress"));
    }

    #[test]
    fn create_then_open() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b");
        let l = Layout::create(&dir).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("oci-layout")).unwrap(),
            r#"{"imageLayoutVersion":"1.0.0"}"#
        );
        assert!(dir.join("blobs/sha256").is_dir());
        assert!(l.index().unwrap().manifests.is_empty());
        // Re-creating keeps the index.
        l.set_tag("v1", &desc(1)).unwrap();
        let l = Layout::create(&dir).unwrap();
        assert_eq!(l.index().unwrap().manifests.len(), 1);
        Layout::open(&dir).unwrap();
    }

    #[test]
    fn open_errors_table() {
        let t = tempfile::tempdir().unwrap();
        let none = t.path().join("none");
        let empty = t.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let bad = t.path().join("bad");
        fs::create_dir(&bad).unwrap();
        fs::write(bad.join("oci-layout"), "{}").unwrap();
        let v2 = t.path().join("v2");
        fs::create_dir(&v2).unwrap();
        fs::write(v2.join("oci-layout"), r#"{"imageLayoutVersion":"2.0.0"}"#).unwrap();
        let cases = [
            (&none, "does not exist"),
            (&empty, "no oci-layout file"),
            (&bad, "oci-layout: not"),
            (&v2, "unsupported imageLayoutVersion \"2.0.0\""),
        ];
        for (dir, needle) in cases {
            let msg = Layout::open(dir).unwrap_err().to_string();
            assert!(msg.contains(needle), "{msg}");
            assert!(msg.contains(&dir.display().to_string()), "{msg}");
        }
        assert!(
            matches!(
                Layout::create(&bad),
                Err(LayoutError::BadOciLayout { ref dir, .. }) if dir == &bad
            ),
            "{bad:?}"
        );
    }

    #[test]
    fn blobs_round_trip() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        let (d, n) = l.write_blob(b"hello").unwrap();
        assert_eq!(d, Digest::sha256(b"hello"));
        assert_eq!(n, 5);
        assert!(l.has_blob(&d));
        assert_eq!(l.blob_path(&d), t.path().join("blobs/sha256").join(d.hex()));
        assert_eq!(l.read_blob(&d).unwrap(), b"hello");
        // Writing again is fine.
        assert_eq!(l.write_blob(b"hello").unwrap(), (d.clone(), 5));
        let mut s = String::new();
        l.open_blob(&d).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");

        let big = vec![7u8; 1 << 20];
        let (d2, n2) = l.write_blob_from(&big[..]).unwrap();
        assert_eq!((d2, n2), (Digest::sha256(&big), 1 << 20));
        assert!(tmp_names(&l).is_empty());
    }

    #[test]
    fn blob_writer_commit_and_drop() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        let mut w = l.blob_writer().unwrap();
        w.write_all(b"abc").unwrap();
        assert_eq!(tmp_names(&l).len(), 1);
        drop(w);
        assert!(tmp_names(&l).is_empty());
        assert!(!l.has_blob(&Digest::sha256(b"abc")));

        let mut w = l.blob_writer().unwrap();
        w.write_all(b"abc").unwrap();
        assert_eq!(w.commit().unwrap(), (Digest::sha256(b"abc"), 3));
        assert!(l.has_blob(&Digest::sha256(b"abc")));

        let mut w = l.blob_writer().unwrap();
        w.write_all(b"xyz").unwrap();
        let msg = w
            .commit_expecting(&Digest::sha256(b"abc"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains(Digest::sha256(b"xyz").as_str()), "{msg}");
        assert!(!l.has_blob(&Digest::sha256(b"xyz")));
        assert!(tmp_names(&l).is_empty());
    }

    #[test]
    fn blobs_of_either_algorithm_are_copied_only_when_they_match() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        let data = b"a layer, hashed sha512";
        let d = Digest::parse(&format!("sha512:{}", "0".repeat(128)))
            .unwrap()
            .same_algorithm_of(data);
        l.copy_blob(&data[..], &d, data.len() as u64).unwrap();
        assert_eq!(l.blob_path(&d), t.path().join("blobs/sha512").join(d.hex()));
        assert_eq!(l.read_blob(&d).unwrap(), data);
        l.verify_blob(&d, data.len() as u64).unwrap();
        let e = l.verify_blob(&d, 3).unwrap_err().to_string();
        assert!(e.contains("bytes where its descriptor says 3"), "{e}");

        let t2 = tempfile::tempdir().unwrap();
        let l2 = Layout::create(t2.path()).unwrap();
        let e = l2
            .copy_blob(&b"tampered layer, hashed sha512"[..], &d, 29)
            .unwrap_err()
            .to_string();
        assert!(e.contains("content has digest sha512:"), "{e}");
        let e = l2.copy_blob(&data[..], &d, 5).unwrap_err().to_string();
        assert!(e.contains("bytes where its descriptor says 5"), "{e}");
        assert!(!l2.has_blob(&d));
        assert!(tmp_names(&l2).is_empty());
        // A tampered stored blob fails verification.
        std::fs::write(l.blob_path(&d), b"tampered layer, hashed").unwrap();
        let e = l
            .verify_blob(&d, data.len() as u64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("content has digest"), "{e}");
    }

    #[test]
    fn read_blob_errors() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        let d = Digest::sha256(b"x");
        let msg = l.read_blob(&d).unwrap_err().to_string();
        assert!(
            msg.contains("not found") && msg.contains(d.as_str()),
            "{msg}"
        );
        assert!(matches!(
            l.open_blob(&d),
            Err(LayoutError::BlobNotFound { .. })
        ));
        fs::write(l.blob_path(&d), b"y").unwrap();
        let msg = l.read_blob(&d).unwrap_err().to_string();
        assert!(msg.contains(Digest::sha256(b"y").as_str()), "{msg}");
    }

    #[test]
    fn tags_and_resolve() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        assert!(matches!(
            l.resolve(None),
            Err(LayoutError::Ambiguous { count: 0, .. })
        ));
        l.set_tag("v1", &desc(1)).unwrap();
        assert_eq!(l.resolve(None).unwrap().digest, desc(1).digest);
        l.set_tag("v2", &desc(2)).unwrap();
        l.set_tag("v1", &desc(3)).unwrap();
        l.add_manifest(&desc(4)).unwrap();
        l.add_manifest(&desc(4)).unwrap();
        let idx = l.index().unwrap();
        assert_eq!(idx.manifests.len(), 3);

        let cases = [
            (Some("v1"), Ok(desc(3).digest)),
            (Some("v2"), Ok(desc(2).digest)),
            (Some("v3"), Err("no manifest tagged \"v3\" (tags: v2, v1)")),
            (None, Err("has 3 manifests")),
        ];
        for (tag, want) in cases {
            match (l.resolve(tag), want) {
                (Ok(got), Ok(d)) => {
                    assert_eq!(got.digest, d);
                    assert_eq!(ref_name(&got), tag);
                }
                (Err(e), Err(needle)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(needle), "{msg}");
                    assert!(msg.contains(&t.path().display().to_string()), "{msg}");
                }
                (got, want) => panic!("{tag:?}: {got:?} vs {want:?}"),
            }
        }
        assert!(
            matches!(l.set_tag("", &desc(1)), Err(LayoutError::EmptyTag { .. })),
            "an empty tag is refused"
        );
    }

    #[test]
    fn bad_index_names_path() {
        let t = tempfile::tempdir().unwrap();
        let l = Layout::create(t.path()).unwrap();
        fs::write(
            t.path().join("index.json"),
            r#"{"schemaVersion":2,"manifests":[{"mediaType":"x","digest":"sha256:1","size":1}]}"#,
        )
        .unwrap();
        let msg = l.index().unwrap_err().to_string();
        assert!(msg.contains("$.manifests[0].digest"), "{msg}");
    }
}
