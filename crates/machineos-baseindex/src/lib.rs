//! The filesystem index of a base image, built by streaming its layers once and cached by
//! manifest digest, so that a build against a multi-GB base reads only a compact index.
//!
//! [`IndexBuilder`] applies the layers' tar streams in order (OCI whiteouts, opaque
//! directories, hard links) into a [`BaseIndex`], which answers the planner's
//! [`machineos_layer::BaseView`] questions. Contents of the files the planner reads
//! ([`keep_content`]) are kept in the index; others are read back from their layer through
//! a [`LayerSource`] when needed. [`BaseIndex::encode`] / [`BaseIndex::decode`] give the
//! compact binary form (see [`mod@format`]) that [`Cache`] stores per manifest digest.

pub mod apply;
pub mod cache;
pub mod format;
pub mod index;
mod path;

pub use apply::{
    ApplyError, IndexBuilder, KEEP_LIMIT, KEEP_TOTAL, LayerStats, Limits, MAX_NAME_LEN,
    MAX_PATH_BYTES, MAX_PATH_LEN, MAX_PATHS, keep_content,
};
pub use cache::{Cache, CacheError};
pub use format::DecodeError;
pub use index::{BaseIndex, IndexStats, LayerSource, Located};
pub use machineos_image::{Digest, LayerCompression};

/// Why indexing, decoding or caching a base failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Applying a layer.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Decoding an encoded index.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Reading or writing the cache.
    #[error(transparent)]
    Cache(#[from] CacheError),
}
