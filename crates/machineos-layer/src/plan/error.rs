//! Why a plan fails: [`PlanError`], naming the JSON path of the config entry it is about.

use machineos_ignition::resource::FetchError;

use crate::overlay::OverlayError;

/// Why the plan could not be made; `path` is the JSON path of the config entry.
#[derive(Debug, thiserror::Error)]
#[error("error at {path}: {message}")]
pub struct PlanError {
    /// JSON path such as `$.storage.files.2`.
    pub path: String,
    /// What failed, in Ignition's words where it has them.
    pub message: String,
}

pub(super) fn perr(path: &str, message: impl Into<String>) -> PlanError {
    PlanError {
        path: path.to_string(),
        message: message.into(),
    }
}

pub(super) trait At<T> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError>;
}

impl<T> At<T> for Result<T, OverlayError> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError> {
        self.map_err(|e| perr(path, format!("{what}: {e}")))
    }
}

impl<T> At<T> for Result<T, FetchError> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError> {
        self.map_err(|e| perr(path, format!("{what}: {e}")))
    }
}
