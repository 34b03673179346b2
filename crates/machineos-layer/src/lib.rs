//! The build engine: plan the filesystem layer that `ignition-apply` would produce over a
//! base image, as data, and write it as a deterministic tar.
//!
//! `plan` is pure (config + a [`base::BaseView`] → entries); `layer` serialises a plan;
//! `base` holds the views of a base filesystem (a directory tree today, image layers later).

pub mod base;
pub mod contents;
pub mod overlay;
pub mod passwd;
pub mod plan;
pub mod write;

pub use base::{BaseError, BaseView, DirView, Node, NodeKind};
pub use contents::Contents;
pub use plan::{Entry, EntryKind, Plan};
pub use write::{LayerDigests, LayerOptions};

use machineos_ignition::{Config, children::ChildError, parse, validate};

/// Why a build failed; every variant names the input it came from.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The config did not parse.
    #[error("{source_name}: {error}")]
    Parse {
        /// The input's name (file path).
        source_name: String,
        /// The cause.
        error: machineos_ignition::ParseError,
    },
    /// The config is not valid.
    #[error("{source_name}: {error}")]
    Invalid {
        /// The input's name.
        source_name: String,
        /// The cause.
        error: machineos_ignition::ValidationError,
    },
    /// A child config could not be used.
    #[error("{source_name}: {error}")]
    Child {
        /// The input's name.
        source_name: String,
        /// The cause.
        error: ChildError,
    },
    /// Applying the config to the base failed.
    #[error("{source_name}: {error}")]
    Plan {
        /// The input's name.
        source_name: String,
        /// The cause.
        error: plan::PlanError,
    },
}

/// A config ready to plan, with every warning met on the way.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The config with child configs merged in.
    pub config: Config,
    /// Unknown keys and validation warnings, rendered.
    pub warnings: Vec<String>,
}

/// Parse, validate and resolve child configs of an Ignition config (`source_name` is used
/// in errors).
pub fn prepare(bytes: &[u8], source_name: &str) -> Result<Prepared, LayerError> {
    let parsed = parse(bytes).map_err(|error| LayerError::Parse {
        source_name: source_name.into(),
        error,
    })?;
    let mut warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    let w = validate(&parsed.config).map_err(|error| LayerError::Invalid {
        source_name: source_name.into(),
        error,
    })?;
    warnings.extend(w.iter().map(ToString::to_string));
    let (config, w) = machineos_ignition::children::resolve(parsed.config).map_err(|error| {
        LayerError::Child {
            source_name: source_name.into(),
            error,
        }
    })?;
    warnings.extend(w.iter().map(ToString::to_string));
    if !config.ignition.config.merge.is_empty() || config.ignition.config.replace.source.is_some() {
        validate(&config).map_err(|error| LayerError::Invalid {
            source_name: source_name.into(),
            error,
        })?;
    }
    Ok(Prepared { config, warnings })
}

/// Plan the layer of an Ignition config over `base`.
pub fn plan_ignition(
    bytes: &[u8],
    source_name: &str,
    base: &dyn BaseView,
) -> Result<Plan, LayerError> {
    let prepared = prepare(bytes, source_name)?;
    let mut p = plan::plan(&prepared.config, base).map_err(|error| LayerError::Plan {
        source_name: source_name.into(),
        error,
    })?;
    let mut warnings = prepared.warnings;
    warnings.append(&mut p.warnings);
    p.warnings = warnings;
    Ok(p)
}

/// Apply an Ignition config (JSON bytes, named `source` in errors) over `base` and return
/// the uncompressed, deterministic layer tar (OCI whiteouts for removals).
pub fn ignition_layer_tar(
    config: &[u8],
    source: &str,
    base: &dyn BaseView,
) -> Result<Vec<u8>, LayerError> {
    let plan = plan_ignition(config, source, base)?;
    Ok(write::tar_bytes(&plan, &LayerOptions::default()))
}
