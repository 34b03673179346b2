//! The build engine: plan the filesystem layer that `ignition-apply` would produce over a
//! base image, as data, and write it as a deterministic tar.
//!
//! `plan` is pure (config + a [`base::BaseView`] → entries); `layer` serialises a plan;
//! `base` holds the views of a base filesystem (a directory tree today, image layers later).

pub mod base;

pub use base::{BaseError, BaseView, DirView, Node, NodeKind};

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Placeholder until implemented.
    #[error("not implemented")]
    Todo,
}

/// Apply an Ignition config (JSON bytes, named `source` in errors) over `base` and return
/// the uncompressed, deterministic layer tar (OCI whiteouts for removals).
pub fn ignition_layer_tar(
    _config: &[u8],
    _source: &str,
    _base: &dyn BaseView,
) -> Result<Vec<u8>, BuildError> {
    Err(BuildError::Todo)
}
