//! The build engine: plan the filesystem layer that `ignition-apply` would produce over a
//! base image, as data, and write it as a deterministic tar.
//!
//! [`plan`] is pure (config + a [`BaseView`] → entries), working on an [`overlay`] of
//! the base; [`mod@write`] serialises a plan; `base` holds the views of a base filesystem (a
//! directory tree here, the base index of image layers elsewhere); [`contents`] is a file's
//! contents as a recipe; `passwd` looks owner names up in the image.
//!
//! Warnings are [`machineos_diagnostics::Warning`]s, at the JSON path of the config entry
//! they are about (or a path in the image). Every public error implements
//! [`machineos_diagnostics::Classify`] — a stable reason (`InvalidConfig`,
//! `ConflictWithBase`, `BaseUnreadable`, `LayerWriteFailed`, …) and whether retrying can
//! help (only I/O on the base or the layer, by its kind) — and prints its cause without
//! also exposing it through `source()`.

mod base;
pub mod contents;
pub mod overlay;
mod passwd;
pub mod path;
pub mod plan;
pub mod write;

pub use base::{BaseError, BaseView, DirView, Node, NodeKind};
pub use contents::Contents;
pub use plan::{Entry, EntryKind, Plan};
pub use write::{LayerDigests, LayerOptions};

use machineos_diagnostics::{Classify, Retry, Warning};
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

impl Classify for LayerError {
    /// The cause's: Ignition's for a config that does not parse, validate or resolve
    /// (`InvalidConfig`, `UnsupportedSpecVersion`, `InvalidDataUrl`, …), the planner's for
    /// one that does not apply (`ConflictWithBase`, `BaseUnreadable`, …).
    fn reason(&self) -> &'static str {
        match self {
            LayerError::Parse { error, .. } => error.reason(),
            LayerError::Invalid { error, .. } => error.reason(),
            LayerError::Child { error, .. } => error.reason(),
            LayerError::Plan { error, .. } => error.reason(),
        }
    }

    /// The cause's: permanent but for a base that could not be read for a passing reason.
    fn retry(&self) -> Retry {
        match self {
            LayerError::Parse { error, .. } => error.retry(),
            LayerError::Invalid { error, .. } => error.retry(),
            LayerError::Child { error, .. } => error.retry(),
            LayerError::Plan { error, .. } => error.retry(),
        }
    }
}

/// A config ready to plan, with every warning met on the way.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The config with child configs merged in.
    pub config: Config,
    /// Unknown keys, validation warnings and the child configs' warnings, each at its JSON
    /// path.
    pub warnings: Vec<Warning>,
}

/// Parse, validate and resolve child configs of an Ignition config (`source_name` is used
/// in errors).
pub fn prepare(bytes: &[u8], source_name: &str) -> Result<Prepared, LayerError> {
    let parsed = parse(bytes).map_err(|error| LayerError::Parse {
        source_name: source_name.into(),
        error,
    })?;
    let mut warnings = parsed.warnings;
    let w = validate(&parsed.config).map_err(|error| LayerError::Invalid {
        source_name: source_name.into(),
        error,
    })?;
    warnings.extend(w);
    let (config, w) = machineos_ignition::children::resolve(parsed.config).map_err(|error| {
        LayerError::Child {
            source_name: source_name.into(),
            error,
        }
    })?;
    warnings.extend(w);
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
