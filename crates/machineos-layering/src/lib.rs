//! The MCO's on-cluster layering rules, as data: a rendered MachineConfig and its pool →
//! a [`Recipe`], what any builder (the native one, a buildah Job) must produce.
//!
//! The rules, each in one place:
//! - the rendered MachineConfig, as JSON, is written to [`CURRENT_CONFIG`] before
//!   ignition-apply runs (the MCO's Containerfile copies it there; the node's daemon reads it
//!   to know which config the image carries);
//! - ignition-apply then applies the rendered config's Ignition (`spec.config`), with its
//!   `data:` child configs resolved;
//! - the commit clean-up of `ostree container commit` empties `/tmp`, `/var/tmp`, `/run` and
//!   `/var/cache`;
//! - the image carries the labels [`labels::MACHINE_CONFIG`] (the rendered config's name),
//!   [`labels::MACHINE_CONFIG_POOL`] and [`labels::BASE_OS_CONTAINER_IMAGE`] (the base by
//!   digest, known only once the base is resolved: see [`Recipe::image_labels`]);
//! - the base is the rendered config's `spec.osImageURL` unless the caller names one.
//!
//! A plain Ignition config ([`ignition_recipe`]) gets exactly what ignition-apply would write:
//! no `currentconfig`, no clean-up, no MachineConfig labels.
//!
//! Pure: no I/O. The CLI and the controller both call it.

use std::collections::BTreeMap;

use machineos_api::v1::MachineConfig;
use machineos_diagnostics::{Classify, Retry, Warning};
use machineos_ignition::Config;
use machineos_layer::plan::{ExtraFile, PlanOptions};

/// Where the MCO's build writes the rendered MachineConfig (absolute, in the image).
pub const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";

/// The labels a layered image carries, by the MCO's names.
pub mod labels {
    /// The rendered MachineConfig's name.
    pub const MACHINE_CONFIG: &str = "machineconfig";
    /// The pool it was rendered for.
    pub const MACHINE_CONFIG_POOL: &str = "machineconfigpool";
    /// The base image by digest.
    pub const BASE_OS_CONTAINER_IMAGE: &str = "baseOSContainerImage";
}

/// What to build: the Ignition config to apply, what the build adds around it, and what
/// the image records.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// What the input is called in errors and in the image's history
    /// (`MachineConfig rendered-worker-…`, or the Ignition file's path).
    pub source_name: String,
    /// The Ignition config to apply, child configs resolved.
    pub config: Config,
    /// Files written before Ignition runs, and the commit clean-up.
    pub plan_options: PlanOptions,
    /// Labels the image carries besides [`labels::BASE_OS_CONTAINER_IMAGE`].
    pub labels: BTreeMap<String, String>,
    /// The base image the input asks for (`spec.osImageURL`), if any.
    pub base_image: Option<String>,
    /// What the input asks for that applying Ignition does not do: RPM-installing
    /// `extensions`, a non-default `kernelType`, `kernelArguments` (a builder that cannot
    /// do them must refuse or say so).
    pub os_changes: OsChanges,
    /// Findings on the way (child configs, unknown keys), with their JSON paths.
    pub warnings: Vec<Warning>,
}

/// The parts of a rendered MachineConfig that are not Ignition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsChanges {
    /// `spec.extensions`, in order.
    pub extensions: Vec<String>,
    /// `spec.kernelType` when it is not the default.
    pub kernel_type: Option<String>,
    /// `spec.kernelArguments`.
    pub kernel_arguments: Vec<String>,
}

impl OsChanges {
    /// Whether there is nothing besides Ignition.
    pub fn is_empty(&self) -> bool {
        self.extensions.is_empty() && self.kernel_type.is_none() && self.kernel_arguments.is_empty()
    }
}

impl Recipe {
    /// The image's labels once the base is resolved: the recipe's, and the base by digest
    /// under [`labels::BASE_OS_CONTAINER_IMAGE`] unless the recipe already sets it.
    pub fn image_labels(&self, base_by_digest: &str) -> BTreeMap<String, String> {
        let mut out = self.labels.clone();
        out.entry(labels::BASE_OS_CONTAINER_IMAGE.to_string())
            .or_insert_with(|| base_by_digest.to_string());
        out
    }
}

/// Why a recipe cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    /// The MachineConfig has no name.
    #[error("a rendered MachineConfig has no metadata.name")]
    Unnamed,
    /// Its `spec.config` is not an Ignition config this engine applies.
    #[error("MachineConfig {name}: spec.config: {error}")]
    Ignition {
        /// The MachineConfig.
        name: String,
        /// The parse error.
        error: machineos_ignition::ParseError,
    },
    /// A child config in `spec.config` could not be used.
    #[error("MachineConfig {name}: spec.config: {error}")]
    Child {
        /// The MachineConfig.
        name: String,
        /// The error.
        error: machineos_ignition::children::ChildError,
    },
    /// The MachineConfig cannot be written to `currentconfig`.
    #[error("MachineConfig {name}: encoding it for {CURRENT_CONFIG}: {error}")]
    Encode {
        /// The MachineConfig.
        name: String,
        /// The error.
        error: serde_json::Error,
    },
}

impl Classify for RecipeError {
    fn reason(&self) -> &'static str {
        match self {
            RecipeError::Unnamed | RecipeError::Encode { .. } => "InvalidMachineConfig",
            RecipeError::Ignition { .. } | RecipeError::Child { .. } => "InvalidConfig",
        }
    }

    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// The recipe of a pool's rendered MachineConfig: parses its `spec.config`.
pub fn recipe(rendered: &MachineConfig, pool: &str) -> Result<Recipe, RecipeError> {
    let name = rendered.metadata.name.clone().ok_or(RecipeError::Unnamed)?;
    let bytes = serde_json::to_vec(&rendered.spec.config).map_err(|error| RecipeError::Encode {
        name: name.clone(),
        error,
    })?;
    let parsed = machineos_ignition::parse(&bytes).map_err(|error| RecipeError::Ignition {
        name: name.clone(),
        error,
    })?;
    let mut r = recipe_of(rendered, parsed.config, pool)?;
    let mut warnings = parsed.warnings;
    warnings.append(&mut r.warnings);
    r.warnings = warnings;
    Ok(r)
}

/// [`recipe`] for a rendered MachineConfig whose `spec.config` the caller has already
/// parsed into `ignition` (the render does).
pub fn recipe_of(
    rendered: &MachineConfig,
    ignition: Config,
    pool: &str,
) -> Result<Recipe, RecipeError> {
    let name = rendered.metadata.name.clone().ok_or(RecipeError::Unnamed)?;
    let (config, warnings) =
        machineos_ignition::children::resolve(ignition).map_err(|error| RecipeError::Child {
            name: name.clone(),
            error,
        })?;
    let currentconfig = serde_json::to_vec(rendered).map_err(|error| RecipeError::Encode {
        name: name.clone(),
        error,
    })?;
    let spec = &rendered.spec;
    let kernel_type = spec.kernel_type.as_str();
    Ok(Recipe {
        source_name: format!("MachineConfig {name}"),
        config,
        plan_options: PlanOptions {
            extra_files: vec![ExtraFile {
                path: CURRENT_CONFIG.into(),
                contents: currentconfig,
            }],
            commit_cleanup: true,
        },
        labels: BTreeMap::from([
            (labels::MACHINE_CONFIG.to_string(), name),
            (labels::MACHINE_CONFIG_POOL.to_string(), pool.to_string()),
        ]),
        base_image: (!spec.os_image_url.is_empty()).then(|| spec.os_image_url.clone()),
        os_changes: OsChanges {
            extensions: spec.extensions.clone(),
            kernel_type: (!kernel_type.is_empty() && kernel_type != "default")
                .then(|| kernel_type.to_string()),
            kernel_arguments: spec.kernel_arguments.clone(),
        },
        warnings: warnings
            .into_iter()
            .map(|w| {
                let at = w.path.strip_prefix('$').unwrap_or(&w.path);
                Warning::new(format!("$.spec.config{at}"), w.message)
            })
            .collect(),
    })
}

/// The recipe of a plain Ignition config (`source_name` is its file): exactly what
/// ignition-apply would write, and the base's label only.
pub fn ignition_recipe(
    bytes: &[u8],
    source_name: &str,
) -> Result<Recipe, machineos_layer::LayerError> {
    let prepared = machineos_layer::prepare(bytes, source_name)?;
    Ok(Recipe {
        source_name: source_name.to_string(),
        config: prepared.config,
        plan_options: PlanOptions::default(),
        labels: BTreeMap::new(),
        base_image: None,
        os_changes: OsChanges::default(),
        warnings: prepared
            .warnings
            .into_iter()
            .map(|w| Warning::new("", w))
            .collect(),
    })
}
