//! The filesystem index of a base image, built by streaming its layers once and cached by
//! manifest digest, so that a build against a multi-GB base reads only a compact index.
//!
//! [`IndexBuilder`] applies the layers' tar streams in order (OCI whiteouts, opaque
//! directories, hard links) into a [`BaseIndex`], which answers the planner's
//! [`machineos_layer::BaseView`] questions. Contents of the files the planner reads
//! ([`keep_content`]) are kept in the index; for the others, [`BaseIndex::location`] says
//! where they are, so a caller that must not block fetches them beforehand and
//! [`Located::read_from`] reads them from their layer's stream (a synchronous caller can
//! instead set a [`LayerSource`]). [`BaseIndex::encode`] / [`BaseIndex::decode`] give the
//! compact binary form (see [`mod@format`]) that [`Cache`] stores per manifest digest, and
//! that is used where it lies: loading one is reading a file. A long-running process keeps
//! the indexes it uses in an [`IndexMemory`] (least recently used out, bounded by bytes).

mod apply;
pub mod cache;
pub mod diff;
pub mod format;
mod index;
pub mod memory;
mod path;
mod record;

pub use apply::{
    ApplyError, IndexBuilder, KEEP_LIMIT, KEEP_TOTAL, LayerStats, Limits, MAX_NAME_LEN,
    MAX_PATH_BYTES, MAX_PATH_LEN, MAX_PATHS, keep_content,
};
pub use cache::{Cache, CacheError};
pub use format::DecodeError;
pub use index::{BaseIndex, IndexStats, LayerSource, Located};
pub use machineos_image::{Digest, LayerCompression};
pub use memory::{IndexMemory, MemoryStats};

/// The path a tar member name stands for, as the index keys it: absolute and clean
/// (`./etc/x`, `etc//x/` and `/etc/x` are all `/etc/x`); `None` when `..` climbs above the
/// root. The one normaliser of member names in machineos.
pub fn member_path(name: &[u8]) -> Option<String> {
    path::normalize(name).ok()
}

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

use machineos_diagnostics::{Classify, Retry, io_retry};

impl Classify for IndexError {
    fn reason(&self) -> &'static str {
        match self {
            IndexError::Apply(e) => e.reason(),
            IndexError::Decode(e) => e.reason(),
            IndexError::Cache(e) => e.reason(),
        }
    }

    fn retry(&self) -> Retry {
        match self {
            IndexError::Apply(e) => e.retry(),
            IndexError::Decode(e) => e.retry(),
            IndexError::Cache(e) => e.retry(),
        }
    }
}

impl Classify for ApplyError {
    fn reason(&self) -> &'static str {
        match self {
            ApplyError::DiffId { .. } => "DigestMismatch",
            ApplyError::Stream { .. } | ApplyError::Member { .. } => "BaseLayerUnreadable",
            ApplyError::Limit { .. } => "BaseTooLarge",
            ApplyError::Inconsistent { .. }
            | ApplyError::OutOfOrder { .. }
            | ApplyError::Escape { .. }
            | ApplyError::LinkTarget { .. }
            | ApplyError::Unsupported { .. } => "InvalidBaseLayer",
        }
    }

    /// A stream that broke off (a reset, a timeout) can be read again; what the layer
    /// says does not change.
    fn retry(&self) -> Retry {
        match self {
            ApplyError::Stream { error, .. } | ApplyError::Member { error, .. } => io_retry(error),
            _ => Retry::Permanent,
        }
    }
}

impl Classify for DecodeError {
    fn reason(&self) -> &'static str {
        "InvalidBaseIndex"
    }

    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

impl Classify for CacheError {
    fn reason(&self) -> &'static str {
        "BaseIndexCacheUnusable"
    }

    fn retry(&self) -> Retry {
        match self {
            CacheError::Read { error, .. } | CacheError::Write { error, .. } => io_retry(error),
            CacheError::Unusable { .. } => Retry::Permanent,
        }
    }
}

#[cfg(test)]
mod classify_tests {
    use super::*;
    use machineos_diagnostics::{check_chain, is_valid_reason};
    use std::io::ErrorKind;

    #[test]
    fn errors_say_how_to_act_and_print_their_cause_once() {
        let io = |k: ErrorKind| std::io::Error::new(k, "boom");
        let cases: Vec<(IndexError, &str, Retry)> = vec![
            (
                ApplyError::Stream {
                    layer: 1,
                    error: io(ErrorKind::ConnectionReset),
                }
                .into(),
                "BaseLayerUnreadable",
                Retry::Transient,
            ),
            (
                ApplyError::Member {
                    layer: 1,
                    entry: "etc/x".into(),
                    error: io(ErrorKind::InvalidData),
                }
                .into(),
                "BaseLayerUnreadable",
                Retry::Permanent,
            ),
            (
                ApplyError::DiffId {
                    layer: 0,
                    expected: Digest::sha256(b"a"),
                    actual: Digest::sha256(b"b"),
                }
                .into(),
                "DigestMismatch",
                Retry::Permanent,
            ),
            (
                ApplyError::Limit {
                    layer: 0,
                    entry: "x".into(),
                    what: "too many".into(),
                }
                .into(),
                "BaseTooLarge",
                Retry::Permanent,
            ),
            (
                ApplyError::Escape {
                    layer: 0,
                    entry: "../x".into(),
                }
                .into(),
                "InvalidBaseLayer",
                Retry::Permanent,
            ),
            (
                DecodeError::Checksum.into(),
                "InvalidBaseIndex",
                Retry::Permanent,
            ),
            (
                CacheError::Write {
                    path: "/c/x".into(),
                    error: io(ErrorKind::StorageFull),
                }
                .into(),
                "BaseIndexCacheUnusable",
                Retry::Transient,
            ),
            (
                CacheError::Unusable {
                    path: "/c/x".into(),
                    what: "a directory".into(),
                }
                .into(),
                "BaseIndexCacheUnusable",
                Retry::Permanent,
            ),
        ];
        for (e, reason, retry) in cases {
            assert_eq!((e.reason(), e.retry()), (reason, retry), "{e}");
            assert!(is_valid_reason(e.reason()));
            assert_eq!(check_chain(&e), Ok(()), "{e}");
        }
    }
}
