//! Writing one planned layer into the layout as a gzip blob in a single streaming pass —
//! tar → sha256 (the diff_id) → gzip → the layout's hashing blob writer — so that no layer,
//! however large, is ever held in memory.
//!
//! Determinism: entries in the plan's (sorted) order, GNU tar headers with numeric owners
//! only (no user or group names), mtime 0 (as ostree commits have), no device numbers or
//! extended attributes; the gzip header carries mtime 0 and no file name.

use std::io::{self, Write};

use machineos_diagnostics::{Classify, Retry, io_retry};
use machineos_image::{Digest, Layout, LayoutError, Sha256Writer};

use crate::content::{BLOCK, Content};
use crate::tree::{Body, Kind, Node};

/// Modification time of every entry.
const MTIME: u64 = 0;

/// Why a layer could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The layout refused a new blob or could not store it.
    #[error("writing synthetic layer {index}: {error}")]
    Layout {
        /// 1-based layer number.
        index: usize,
        /// The layout's error (part of the message, not [`std::error::Error::source`]).
        error: LayoutError,
    },
    /// Writing the tar or gzip stream failed.
    #[error("writing synthetic layer {index}: {error}")]
    Io {
        /// 1-based layer number.
        index: usize,
        /// The I/O error (part of the message, not [`std::error::Error::source`]).
        error: io::Error,
    },
}

impl Classify for LayerError {
    /// The layout's reason for a layout error, `LayerIOError` for a failed write of the
    /// tar or gzip stream.
    fn reason(&self) -> &'static str {
        match self {
            LayerError::Layout { error, .. } => error.reason(),
            LayerError::Io { .. } => "LayerIOError",
        }
    }

    /// As the cause says: [`io_retry`] for I/O errors (a full disk is transient), the
    /// layout's classification for layout errors.
    fn retry(&self) -> Retry {
        match self {
            LayerError::Layout { error, .. } => error.retry(),
            LayerError::Io { error, .. } => io_retry(error),
        }
    }
}

/// A stored layer blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LayerBlob {
    /// Digest of the gzip blob.
    pub(crate) digest: Digest,
    /// Size of the gzip blob.
    pub(crate) size: u64,
    /// Digest of the uncompressed tar.
    pub(crate) diff_id: Digest,
    /// Size of the uncompressed tar.
    pub(crate) tar_size: u64,
}

/// Write `nodes` as layer number `index` (0-based) into `layout`.
pub(crate) fn write_layer(
    layout: &Layout,
    index: usize,
    nodes: &[Node<'_>],
    gzip_level: u32,
) -> Result<LayerBlob, LayerError> {
    let number = index + 1;
    let blob = layout.blob_writer().map_err(|error| LayerError::Layout {
        index: number,
        error,
    })?;
    let io_err = |error| LayerError::Io {
        index: number,
        error,
    };
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(blob, flate2::Compression::new(gzip_level));
    let tar = write_tar(nodes, Sha256Writer::new(gz)).map_err(io_err)?;
    let (gz, diff_id, tar_size) = tar.finish();
    let mut blob = gz.finish().map_err(io_err)?;
    blob.flush().map_err(io_err)?;
    let (digest, size) = blob.commit().map_err(|error| LayerError::Layout {
        index: number,
        error,
    })?;
    Ok(LayerBlob {
        digest,
        size,
        diff_id,
        tar_size,
    })
}

/// Write the uncompressed tar of `nodes` to `out`.
pub(crate) fn write_tar<W: Write>(nodes: &[Node<'_>], out: W) -> io::Result<W> {
    let mut b = tar::Builder::new(out);
    let mut block = Box::new([0u8; BLOCK]);
    for n in nodes {
        append(&mut b, n, &mut block)?;
    }
    b.into_inner()
}

fn append<W: Write>(
    b: &mut tar::Builder<W>,
    n: &Node<'_>,
    block: &mut [u8; BLOCK],
) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_mtime(MTIME);
    h.set_uid(u64::from(n.meta.uid));
    h.set_gid(u64::from(n.meta.gid));
    h.set_mode(n.meta.mode);
    h.set_size(0);
    match &n.kind {
        Kind::Dir => {
            h.set_entry_type(tar::EntryType::Directory);
            b.append_data(&mut h, format!("{}/", n.path), io::empty())
        }
        Kind::File(body) => {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(body.len());
            match body {
                Body::Inline(data) => b.append_data(&mut h, &n.path, data.as_slice()),
                Body::Extra(data) => b.append_data(&mut h, &n.path, *data),
                Body::Synth(s) => {
                    let content = Content::new(s.seed, s.size, s.style, s.prefix, block);
                    b.append_data(&mut h, &n.path, content)
                }
            }
        }
        Kind::Symlink(target) => {
            h.set_entry_type(tar::EntryType::Symlink);
            b.append_link(&mut h, &n.path, target)
        }
        Kind::HardLink(target) => {
            h.set_entry_type(tar::EntryType::Link);
            b.append_link(&mut h, &n.path, target)
        }
        Kind::Whiteout => {
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, &n.path, io::empty())
        }
    }
}
