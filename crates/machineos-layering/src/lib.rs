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
//! A recipe can also carry the boot guard ([`Recipe::with_boot_guard`]: the controller's
//! builds do unless a MachineOSConfig opts out, `machineos build --boot-guard` asks for it),
//! written, like `currentconfig`, before Ignition runs — so a MachineConfig can still mask
//! its unit.
//!
//! A plain Ignition config ([`ignition_recipe`]) gets exactly what ignition-apply would write:
//! no `currentconfig`, no clean-up, no MachineConfig labels.
//!
//! Pure: no I/O. The CLI and the controller both call it.

use std::collections::BTreeMap;

use machineos_api::v1::MachineConfig;
use machineos_diagnostics::{Classify, Retry, Warning};
use machineos_ignition::Config;
use machineos_layer::plan::{ExtraFile, ExtraNode, PlanOptions};

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
    /// The recipe with the boot guard's files ([`machineos_boot_guard::files`]) added.
    pub fn with_boot_guard(mut self) -> Recipe {
        use machineos_boot_guard::GuardFile;
        for f in machineos_boot_guard::files() {
            self.plan_options.extra_files.push(match f {
                GuardFile::File {
                    path,
                    mode,
                    contents,
                } => ExtraFile {
                    path: path.into(),
                    node: ExtraNode::File {
                        contents: contents.as_bytes().to_vec(),
                        mode,
                    },
                },
                GuardFile::Symlink { path, target } => ExtraFile {
                    path: path.into(),
                    node: ExtraNode::Symlink(target.into()),
                },
            });
        }
        self
    }

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
    /// The config with its child configs merged in is not valid (two valid configs can
    /// merge into an invalid one).
    #[error("MachineConfig {name}: spec.config with its child configs: {error}")]
    Invalid {
        /// The MachineConfig.
        name: String,
        /// The validation error.
        error: machineos_ignition::ValidationError,
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
            RecipeError::Ignition { error, .. } => error.reason(),
            RecipeError::Child { error, .. } => error.reason(),
            RecipeError::Invalid { error, .. } => error.reason(),
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
    let has_children = !ignition.ignition.config.merge.is_empty()
        || ignition.ignition.config.replace.source.is_some();
    let (config, warnings) =
        machineos_ignition::children::resolve(ignition).map_err(|error| RecipeError::Child {
            name: name.clone(),
            error,
        })?;
    // As for a plain Ignition config (`machineos_layer::prepare`): what the children make of
    // the config is validated again.
    if has_children {
        machineos_ignition::validate(&config).map_err(|error| RecipeError::Invalid {
            name: name.clone(),
            error,
        })?;
    }
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
            extra_files: vec![ExtraFile::file(CURRENT_CONFIG, currentconfig)],
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
        warnings: prepared.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(config: serde_json::Value, extra: serde_json::Value) -> MachineConfig {
        let mut spec = serde_json::json!({
            "osImageURL": "quay.io/fedora/fedora-coreos@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "config": config,
        });
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-worker-0123"},
            "spec": spec,
        }))
        .expect("a MachineConfig")
    }

    fn ignition() -> serde_json::Value {
        serde_json::json!({
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [{"path": "/etc/motd", "contents": {"source": "data:,hi"}}]}
        })
    }

    #[test]
    fn a_rendered_machine_config_is_built_as_the_mco_builds_it() {
        let mc = rendered(ignition(), serde_json::json!({}));
        let r = recipe(&mc, "worker").expect("recipe");
        assert_eq!(r.source_name, "MachineConfig rendered-worker-0123");
        assert_eq!(r.config.storage.files.len(), 1);
        assert!(r.plan_options.commit_cleanup);
        let [extra] = r.plan_options.extra_files.as_slice() else {
            panic!("one extra file: {:?}", r.plan_options.extra_files);
        };
        assert_eq!(extra.path, CURRENT_CONFIG);
        // currentconfig is the rendered MachineConfig itself, as JSON.
        let ExtraNode::File { contents, mode } = &extra.node else {
            panic!("{extra:?}")
        };
        assert_eq!(*mode, 0o644);
        let written: serde_json::Value = serde_json::from_slice(contents).expect("JSON");
        assert_eq!(written, serde_json::to_value(&mc).expect("JSON"));
        // The boot guard adds its three files after it, and changes nothing else.
        let guarded = r.clone().with_boot_guard();
        let paths: Vec<&str> = guarded
            .plan_options
            .extra_files
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                CURRENT_CONFIG,
                machineos_boot_guard::SCRIPT_PATH,
                machineos_boot_guard::UNIT_PATH,
                machineos_boot_guard::WANTS_PATH
            ]
        );
        assert_eq!(guarded.labels, r.labels);
        assert_eq!(
            r.labels,
            BTreeMap::from([
                ("machineconfig".into(), "rendered-worker-0123".into()),
                ("machineconfigpool".into(), "worker".into()),
            ])
        );
        assert_eq!(r.base_image.as_deref(), Some(mc.spec.os_image_url.as_str()));
        assert!(r.os_changes.is_empty());
        assert_eq!(r.warnings, Vec::new());
    }

    #[test]
    fn the_base_label_is_added_once_the_base_is_known_and_never_overrides() {
        let mut r = recipe(&rendered(ignition(), serde_json::json!({})), "infra").expect("recipe");
        let labels = r.image_labels("registry.example/os@sha256:aa");
        assert_eq!(
            labels
                .get(labels::BASE_OS_CONTAINER_IMAGE)
                .map(String::as_str),
            Some("registry.example/os@sha256:aa")
        );
        assert_eq!(
            labels.get("machineconfigpool").map(String::as_str),
            Some("infra")
        );
        r.labels
            .insert(labels::BASE_OS_CONTAINER_IMAGE.into(), "pinned".into());
        assert_eq!(
            r.image_labels("other")[labels::BASE_OS_CONTAINER_IMAGE],
            "pinned"
        );
    }

    #[test]
    fn what_ignition_does_not_do_is_reported_not_dropped() {
        let mc = rendered(
            ignition(),
            serde_json::json!({
                "extensions": ["usbguard"],
                "kernelType": "realtime",
                "kernelArguments": ["nosmt"],
            }),
        );
        let r = recipe(&mc, "worker").expect("recipe");
        assert_eq!(
            r.os_changes,
            OsChanges {
                extensions: vec!["usbguard".into()],
                kernel_type: Some("realtime".into()),
                kernel_arguments: vec!["nosmt".into()],
            }
        );
        let default = rendered(ignition(), serde_json::json!({"kernelType": "default"}));
        assert!(
            recipe(&default, "worker")
                .expect("recipe")
                .os_changes
                .is_empty()
        );
    }

    #[test]
    fn warnings_carry_their_json_path_from_the_machine_config() {
        let mut config = ignition();
        config["storage"]["files"][0]["contnets"] = serde_json::json!({});
        let r = recipe(&rendered(config, serde_json::json!({})), "worker").expect("recipe");
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(
            r.warnings[0].path.contains("storage.files.0.contnets"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn bad_input_is_a_permanent_error_naming_the_machine_config() {
        let e = recipe(
            &rendered(
                serde_json::json!({"ignition": {"version": "9.9.9"}}),
                serde_json::json!({}),
            ),
            "worker",
        )
        .expect_err("bad version");
        assert!(
            matches!(e, RecipeError::Ignition { ref name, .. } if name == "rendered-worker-0123")
        );
        assert_eq!(
            (e.reason(), e.retry()),
            ("UnsupportedSpecVersion", Retry::Permanent)
        );
        assert!(
            e.to_string()
                .starts_with("MachineConfig rendered-worker-0123: spec.config: ")
        );
        assert_eq!(machineos_diagnostics::check_chain(&e), Ok(()));

        let mut unnamed = rendered(ignition(), serde_json::json!({}));
        unnamed.metadata.name = None;
        let e = recipe(&unnamed, "worker").expect_err("no name");
        assert!(matches!(e, RecipeError::Unnamed));
        assert_eq!(e.reason(), "InvalidMachineConfig");
    }

    #[test]
    fn a_plain_ignition_config_gets_only_what_ignition_apply_writes() {
        let bytes = serde_json::to_vec(&ignition()).expect("JSON");
        let r = ignition_recipe(&bytes, "cfg.ign").expect("recipe");
        assert_eq!(r.source_name, "cfg.ign");
        assert_eq!(r.plan_options, PlanOptions::default());
        assert!(r.labels.is_empty());
        assert_eq!(r.base_image, None);
        assert_eq!(
            r.image_labels("b@sha256:1"),
            BTreeMap::from([("baseOSContainerImage".into(), "b@sha256:1".into())])
        );
    }
}
