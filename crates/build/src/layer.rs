//! The layer writer: a plan → a deterministic tar, streamed through sha256 (the diff_id),
//! gzip, and sha256 again (the blob digest and size), in one pass.
//!
//! Determinism: entries in plan order, ustar/GNU headers with numeric owners only (no
//! user or group names), mtime fixed (SOURCE_DATE_EPOCH, default 0), no device numbers,
//! no extended attributes.

use std::io::{self, Write};

use sha2::{Digest, Sha256};

use crate::plan::{Entry, EntryKind, Plan};

/// Layer compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// gzip (the default; every registry and runtime reads it).
    #[default]
    Gzip,
    /// No compression.
    None,
}

/// How to write a layer.
#[derive(Debug, Clone, Default)]
pub struct LayerOptions {
    /// mtime of every entry, seconds since the epoch.
    pub mtime: u64,
    /// Compression of the blob.
    pub compression: Compression,
}

impl LayerOptions {
    /// Options from the environment: `SOURCE_DATE_EPOCH` sets the mtime.
    pub fn from_env() -> Result<Self, LayerError> {
        let mtime = match std::env::var("SOURCE_DATE_EPOCH") {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| LayerError::SourceDateEpoch(v))?,
            Err(_) => 0,
        };
        Ok(Self {
            mtime,
            ..Self::default()
        })
    }
}

/// Why a layer could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// Writing failed.
    #[error("writing layer: {0}")]
    Io(#[from] io::Error),
    /// Bad SOURCE_DATE_EPOCH.
    #[error("SOURCE_DATE_EPOCH={0:?} is not a number of seconds")]
    SourceDateEpoch(String),
}

/// What identifies a written layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerDigests {
    /// `sha256:<hex>` of the uncompressed tar.
    pub diff_id: String,
    /// `sha256:<hex>` of the blob as stored.
    pub digest: String,
    /// Size of the blob in bytes.
    pub size: u64,
    /// Size of the uncompressed tar.
    pub uncompressed_size: u64,
}

struct HashWriter<W> {
    inner: W,
    hash: Sha256,
    count: u64,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Write the uncompressed tar of `plan` to `out`.
pub fn write_tar<W: Write>(plan: &Plan, opts: &LayerOptions, out: W) -> io::Result<W> {
    let mut b = tar::Builder::new(out);
    b.mode(tar::HeaderMode::Deterministic);
    for e in &plan.entries {
        append(&mut b, e, opts.mtime)?;
    }
    b.into_inner()
}

fn append<W: Write>(b: &mut tar::Builder<W>, e: &Entry, mtime: u64) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_mtime(mtime);
    h.set_uid(u64::from(e.uid));
    h.set_gid(u64::from(e.gid));
    h.set_mode(e.mode);
    h.set_size(0);
    let name = Plan::member_name(e);
    match &e.kind {
        EntryKind::Dir => {
            h.set_entry_type(tar::EntryType::Directory);
            b.append_data(&mut h, format!("{name}/"), io::empty())
        }
        EntryKind::File(data) => {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(data.len() as u64);
            b.append_data(&mut h, name, data.as_slice())
        }
        EntryKind::Symlink(target) => {
            h.set_entry_type(tar::EntryType::Symlink);
            b.append_link(&mut h, name, target)
        }
        EntryKind::HardLink(target) => {
            h.set_entry_type(tar::EntryType::Link);
            b.append_link(&mut h, name, target)
        }
        EntryKind::Whiteout | EntryKind::Opaque => {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0);
            b.append_data(&mut h, name, io::empty())
        }
    }
}

/// The uncompressed tar of `plan` as bytes.
pub fn tar_bytes(plan: &Plan, opts: &LayerOptions) -> Vec<u8> {
    write_tar(plan, opts, Vec::new()).expect("writing to a Vec cannot fail")
}

/// Write the layer blob to `out` (compressed per `opts`), computing diff_id, digest and
/// size in the same pass.
pub fn write_blob<W: Write>(
    plan: &Plan,
    opts: &LayerOptions,
    out: W,
) -> Result<(LayerDigests, W), LayerError> {
    let blob = HashWriter {
        inner: out,
        hash: Sha256::new(),
        count: 0,
    };
    let (tar_hash, tar_count, blob) = match opts.compression {
        Compression::Gzip => {
            let gz = flate2::GzBuilder::new()
                .mtime(0)
                .write(blob, flate2::Compression::default());
            let t = write_tar(
                plan,
                opts,
                HashWriter {
                    inner: gz,
                    hash: Sha256::new(),
                    count: 0,
                },
            )?;
            (t.hash, t.count, t.inner.finish()?)
        }
        Compression::None => {
            let t = write_tar(
                plan,
                opts,
                HashWriter {
                    inner: blob,
                    hash: Sha256::new(),
                    count: 0,
                },
            )?;
            let (h, c) = (t.hash.clone().finalize(), t.count);
            let inner = t.inner;
            return Ok((
                LayerDigests {
                    diff_id: format!("sha256:{}", hex::encode(h)),
                    digest: format!("sha256:{}", hex::encode(inner.hash.finalize())),
                    size: inner.count,
                    uncompressed_size: c,
                },
                inner.inner,
            ));
        }
    };
    Ok((
        LayerDigests {
            diff_id: format!("sha256:{}", hex::encode(tar_hash.finalize())),
            digest: format!("sha256:{}", hex::encode(blob.hash.finalize())),
            size: blob.count,
            uncompressed_size: tar_count,
        },
        blob.inner,
    ))
}
