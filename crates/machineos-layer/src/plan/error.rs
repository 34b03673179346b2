//! Why a plan fails: [`PlanError`], naming the JSON path of the config entry it is about,
//! and how a caller acts on it ([`Classify`]): a conflict with what the base holds, a
//! resource of the config that does not decode, or a base that cannot be read.

use machineos_diagnostics::{Classify, Retry};
use machineos_ignition::resource::FetchError;

use crate::overlay::OverlayError;

/// Why the plan could not be made; `path` is the JSON path of the config entry (`$` when
/// no single entry is to blame). Every variant prints `error at PATH: …`, its cause
/// included; none exposes the cause as [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The entry cannot be applied over what the image holds at that point (Ignition's
    /// words where it has them): a node exists and `overwrite` is false, a hard link's
    /// target is missing, a directory is in the way, an owner name the image's `passwd` or
    /// `group` does not know, two entries resolving to one path through the base's symlinks.
    #[error("error at {path}: {message}")]
    Conflict {
        /// JSON path such as `$.storage.files.2`.
        path: String,
        /// What failed.
        message: String,
    },
    /// A resource of the entry (`contents`, `append[]`) does not decode or verify.
    #[error("error at {path}: {what}: {error}")]
    Resource {
        /// JSON path such as `$.storage.files.2.contents`.
        path: String,
        /// What was being done.
        what: String,
        /// The cause (boxed: it is large, and errors travel by value).
        error: Box<FetchError>,
    },
    /// The image root could not be read or changed as the entry needs (a base that cannot
    /// be read, a path component that is not a directory, a symlink loop).
    #[error("error at {path}: {what}: {error}")]
    Overlay {
        /// JSON path such as `$.storage.links.0`.
        path: String,
        /// What was being done.
        what: String,
        /// The cause (boxed: it is large, and errors travel by value).
        error: Box<OverlayError>,
    },
    /// The finished overlay could not be turned into tar entries.
    #[error("error at $: {0}")]
    Emit(Box<OverlayError>),
}

impl PlanError {
    /// The JSON path of the config entry the error is about (`$`: the whole config).
    pub fn path(&self) -> &str {
        match self {
            PlanError::Conflict { path, .. }
            | PlanError::Resource { path, .. }
            | PlanError::Overlay { path, .. } => path,
            PlanError::Emit(_) => "$",
        }
    }
}

impl Classify for PlanError {
    /// `ConflictWithBase` for a conflict; a resource's reason (`InvalidDataUrl`,
    /// `HashMismatch`, …); the overlay's (`BaseUnreadable`, `ConflictWithBase`, …).
    fn reason(&self) -> &'static str {
        match self {
            PlanError::Conflict { .. } => "ConflictWithBase",
            PlanError::Resource { error, .. } => error.reason(),
            PlanError::Overlay { error, .. } | PlanError::Emit(error) => error.reason(),
        }
    }

    /// A conflict is permanent (the config or the base must change); otherwise the cause's.
    fn retry(&self) -> Retry {
        match self {
            PlanError::Conflict { .. } => Retry::Permanent,
            PlanError::Resource { error, .. } => error.retry(),
            PlanError::Overlay { error, .. } | PlanError::Emit(error) => error.retry(),
        }
    }
}

/// A [`PlanError::Conflict`] at the config entry `path`.
pub(super) fn perr(path: &str, message: impl Into<String>) -> PlanError {
    PlanError::Conflict {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Puts a step's error at a config entry: `.at(jp, "what was being done")`.
pub(super) trait At<T> {
    /// The error as a [`PlanError`] at the JSON path `path`.
    fn at(self, path: &str, what: &str) -> Result<T, PlanError>;
}

impl<T> At<T> for Result<T, OverlayError> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError> {
        self.map_err(|error| PlanError::Overlay {
            path: path.to_string(),
            what: what.to_string(),
            error: Box::new(error),
        })
    }
}

impl<T> At<T> for Result<T, FetchError> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError> {
        self.map_err(|error| PlanError::Resource {
            path: path.to_string(),
            what: what.to_string(),
            error: Box::new(error),
        })
    }
}
