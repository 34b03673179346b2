//! The merge of a pool's MachineConfigs into one rendered MachineConfig — the MCO's
//! `MergeMachineConfigs` and `generateRenderedMachineConfig`, rule for rule:
//!
//! * every MachineConfig is validated first ([`crate::validate`]), in name order;
//! * merge order: MachineConfigs labelled `role=worker` sorted by name, then all the others
//!   sorted by name (so a custom pool's own MachineConfigs override the worker ones); a
//!   MachineConfig without labels is an error;
//! * Ignition: the first config (or an empty 3.5.0 one) is the parent, each later one merged
//!   over it with Ignition's rules; a child file's absent `contents.compression` is set to
//!   `""` for the merge so a parent's `gzip` cannot survive under plain contents (butane#332),
//!   and `""` is turned back into absent afterwards; then every file whose `overwrite` is unset
//!   gets `overwrite: true`; the version is `3.5.0`;
//! * `fips` is the OR of all; `kernelType` is the last `realtime`/`64k-pages` in merge order,
//!   else `default` (a later explicit `default` does not reset it); `kernelArguments` and
//!   `extensions` are concatenated in merge order, duplicates kept; `kernel-devel` with a
//!   non-default kernel is an error;
//! * `osImageURL` and `baseOSExtensionsContainerImage` start from the defaults given, and the
//!   last MachineConfig in merge order with a non-empty value that does not carry the
//!   `generated-by-controller-version` annotation overrides each;
//! * the name is `rendered-<pool>-<hash>`, the hash a SHA-256 of the canonical JSON of the
//!   rendered spec (sorted keys, no whitespace), hex, first 32 digits — same spec, same name.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use machineos_api::v1::{MachineConfig, MachineConfigSpec};
use machineos_api::{
    GENERATED_BY_CONTROLLER_VERSION_ANNOTATION, GROUP, OS_IMAGE_URL_OVERRIDDEN_ANNOTATION,
    WORKER_ROLE,
};
use machineos_diagnostics::{Classify, Retry};
use machineos_ignition::{Config, Warning};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::validate::{
    Extension, KernelType, ValidMachineConfig, ValidateError, validate_machine_config,
};

/// The Ignition spec version of every rendered config.
pub const RENDERED_IGNITION_VERSION: &str = "3.5.0";

/// What a pool renders on when no MachineConfig overrides it (the MCO takes these from the
/// ControllerConfig or the pool's OSImageStream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderDefaults {
    /// The base OS image (`osImageURL`).
    pub os_image_url: String,
    /// The extensions container image (`baseOSExtensionsContainerImage`); may be empty.
    pub base_os_extensions_container_image: String,
}

/// A warning about one input MachineConfig (from Ignition's parser or validator).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RenderWarning {
    /// The MachineConfig it is about.
    pub machine_config: String,
    /// The warning; its path is from the MachineConfig's root.
    pub warning: Warning,
}

impl std::fmt::Display for RenderWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MachineConfig {:?}: {}",
            self.machine_config, self.warning
        )
    }
}

/// The result of rendering a pool.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The rendered MachineConfig, named `rendered-<pool>-<hash>`.
    pub machine_config: MachineConfig,
    /// Its Ignition config, typed (the same content as `machine_config.spec.config`).
    pub ignition: Config,
    /// Its kernel type.
    pub kernel_type: KernelType,
    /// Its extensions, in order.
    pub extensions: Vec<Extension>,
    /// The input MachineConfigs sorted by name, as a pool's `spec.configuration.source`.
    pub source: Vec<ObjectReference>,
    /// Warnings about the inputs.
    pub warnings: Vec<RenderWarning>,
}

/// Why a pool cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The pool name cannot be part of an object name.
    #[error("pool name {pool:?} is not a lowercase RFC 1123 subdomain")]
    InvalidPoolName {
        /// The pool.
        pool: String,
    },
    /// Nothing to render (the MCO's wording).
    #[error("couldn't find any MachineConfigs for pool: {pool}")]
    NoMachineConfigs {
        /// The pool.
        pool: String,
    },
    /// A MachineConfig without `metadata.name`.
    #[error("MachineConfig number {index} (0-based) of pool {pool:?} has no metadata.name")]
    MissingName {
        /// The pool.
        pool: String,
        /// Its position in the input.
        index: usize,
    },
    /// Two MachineConfigs with one name; their order would be undefined.
    #[error("MachineConfig {name:?} is given more than once")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A MachineConfig without labels (the MCO's wording).
    #[error("Cannot find label in MachineConfig {name}")]
    MissingLabels {
        /// The MachineConfig.
        name: String,
    },
    /// One MachineConfig is invalid.
    #[error(transparent)]
    Invalid(#[from] ValidateError),
    /// `kernel-devel` with a realtime or 64k-pages kernel.
    #[error(
        "installing kernel-devel extension is not supported with kernelType: {} (kernel-devel from MachineConfig {extension_from:?}, kernelType from MachineConfig {kernel_type_from:?})",
        kernel_type.as_str()
    )]
    KernelDevel {
        /// The rendered kernel type.
        kernel_type: KernelType,
        /// The MachineConfig asking for kernel-devel.
        extension_from: String,
        /// The MachineConfig setting the kernel type.
        kernel_type_from: String,
    },
}

impl Classify for RenderError {
    /// `InvalidPoolName`, `NoMachineConfigSelected`, `InvalidMachineConfig` (no name, no
    /// labels), `DuplicateMachineConfig`, the [`ValidateError`]'s reason, or
    /// `IncompatibleExtension` (kernel-devel with a non-default kernel).
    fn reason(&self) -> &'static str {
        match self {
            RenderError::InvalidPoolName { .. } => "InvalidPoolName",
            RenderError::NoMachineConfigs { .. } => "NoMachineConfigSelected",
            RenderError::MissingName { .. } | RenderError::MissingLabels { .. } => {
                "InvalidMachineConfig"
            }
            RenderError::DuplicateName { .. } => "DuplicateMachineConfig",
            RenderError::Invalid(e) => e.reason(),
            RenderError::KernelDevel { .. } => "IncompatibleExtension",
        }
    }

    /// Always permanent: the pool or its MachineConfigs must change.
    fn retry(&self) -> Retry {
        match self {
            RenderError::Invalid(e) => e.retry(),
            _ => Retry::Permanent,
        }
    }
}

/// Render pool `pool`'s MachineConfigs (already selected, in any order) into one.
pub fn render(
    pool: &str,
    mcs: &[&MachineConfig],
    defaults: &RenderDefaults,
) -> Result<Rendered, RenderError> {
    if !is_dns_subdomain(pool) {
        return Err(RenderError::InvalidPoolName {
            pool: pool.to_owned(),
        });
    }
    if mcs.is_empty() {
        return Err(RenderError::NoMachineConfigs {
            pool: pool.to_owned(),
        });
    }
    let mut seen = BTreeSet::new();
    for (index, mc) in mcs.iter().enumerate() {
        if mc.name().is_empty() {
            return Err(RenderError::MissingName {
                pool: pool.to_owned(),
                index,
            });
        }
        if !seen.insert(mc.name()) {
            return Err(RenderError::DuplicateName {
                name: mc.name().to_owned(),
            });
        }
    }

    // The render controller validates in name order, before merging.
    let mut by_name: Vec<&MachineConfig> = mcs.to_vec();
    by_name.sort_by(|a, b| a.name().cmp(b.name()));
    let mut valid: BTreeMap<&str, ValidMachineConfig<'_>> = BTreeMap::new();
    for mc in &by_name {
        valid.insert(mc.name(), validate_machine_config(mc)?);
    }
    let source = by_name
        .iter()
        .map(|mc| ObjectReference {
            api_version: Some(format!("{GROUP}/v1")),
            kind: Some("MachineConfig".to_owned()),
            name: Some(mc.name().to_owned()),
            ..Default::default()
        })
        .collect();

    let order = merge_order(mcs)?;
    let ordered: Vec<&ValidMachineConfig<'_>> = order.iter().map(|mc| &valid[mc.name()]).collect();

    let ignition = merge_ignition(&ordered);
    let (kernel_type, kernel_type_from) = ordered
        .iter()
        .filter(|v| v.kernel_type != KernelType::Default)
        .map(|v| (v.kernel_type, v.source.name()))
        .next_back()
        .unwrap_or((KernelType::Default, ""));
    let extensions: Vec<Extension> = ordered
        .iter()
        .flat_map(|v| v.extensions.iter().copied())
        .collect();
    if kernel_type != KernelType::Default
        && let Some(from) = ordered
            .iter()
            .find(|v| v.extensions.contains(&Extension::KernelDevel))
    {
        return Err(RenderError::KernelDevel {
            kernel_type,
            extension_from: from.source.name().to_owned(),
            kernel_type_from: kernel_type_from.to_owned(),
        });
    }

    let overriding = |field: fn(&MachineConfigSpec) -> &String, default: &String| -> String {
        ordered
            .iter()
            .map(|v| v.source)
            .filter(|mc| !mc.is_generated_by_controller() && !field(&mc.spec).is_empty())
            .map(|mc| field(&mc.spec).clone())
            .next_back()
            .unwrap_or_else(|| default.clone())
    };
    let config = match serde_json::to_value(&ignition) {
        Ok(Value::Object(map)) => map,
        // The typed model is a struct of plain data: it always encodes as an object.
        other => unreachable!("an Ignition config encodes as a JSON object, got {other:?}"),
    };
    let spec = MachineConfigSpec {
        os_image_url: overriding(|s| &s.os_image_url, &defaults.os_image_url),
        base_os_extensions_container_image: overriding(
            |s| &s.base_os_extensions_container_image,
            &defaults.base_os_extensions_container_image,
        ),
        config: Some(config),
        kernel_arguments: ordered
            .iter()
            .flat_map(|v| v.source.spec.kernel_arguments.iter().cloned())
            .collect(),
        extensions: extensions.iter().map(|e| e.as_str().to_owned()).collect(),
        fips: ordered.iter().any(|v| v.source.spec.fips),
        kernel_type: kernel_type.as_str().to_owned(),
    };

    let mut annotations = BTreeMap::from([(
        GENERATED_BY_CONTROLLER_VERSION_ANNOTATION.to_owned(),
        format!("machineos-render/{}", env!("CARGO_PKG_VERSION")),
    )]);
    if spec.os_image_url != defaults.os_image_url {
        annotations.insert(
            OS_IMAGE_URL_OVERRIDDEN_ANNOTATION.to_owned(),
            "true".to_owned(),
        );
    }
    let warnings = ordered
        .iter()
        .flat_map(|v| {
            v.warnings.iter().map(|w| RenderWarning {
                machine_config: v.source.name().to_owned(),
                warning: w.clone(),
            })
        })
        .collect();
    let machine_config = MachineConfig {
        metadata: ObjectMeta {
            name: Some(rendered_name(pool, &spec)),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec,
    };
    Ok(Rendered {
        machine_config,
        ignition,
        kernel_type,
        extensions,
        source,
        warnings,
    })
}

/// The MCO's merge order: `role=worker` MachineConfigs by name, then the others by name.
pub fn merge_order<'a>(mcs: &[&'a MachineConfig]) -> Result<Vec<&'a MachineConfig>, RenderError> {
    let mut workers = Vec::new();
    let mut others = Vec::new();
    for mc in mcs {
        if mc.labels().is_none() {
            return Err(RenderError::MissingLabels {
                name: mc.name().to_owned(),
            });
        }
        if mc.role() == Some(WORKER_ROLE) {
            workers.push(*mc);
        } else {
            others.push(*mc);
        }
    }
    workers.sort_by(|a, b| a.name().cmp(b.name()));
    others.sort_by(|a, b| a.name().cmp(b.name()));
    workers.extend(others);
    Ok(workers)
}

fn merge_ignition(ordered: &[&ValidMachineConfig<'_>]) -> Config {
    let mut out = match ordered.first().and_then(|v| v.ignition.clone()) {
        Some(config) => config,
        None => {
            let mut empty = Config::default();
            empty.ignition.version = Some(RENDERED_IGNITION_VERSION.to_owned());
            empty
        }
    };
    for v in ordered.iter().skip(1) {
        let Some(child) = &v.ignition else { continue };
        let mut child = child.clone();
        for file in &mut child.storage.files {
            if file.contents.compression.is_none() {
                file.contents.compression = Some(String::new());
            }
        }
        out = machineos_ignition::merge::merge(&out, &child);
    }
    for file in &mut out.storage.files {
        if file.contents.compression.as_deref() == Some("") {
            file.contents.compression = None;
        }
        if file.overwrite.is_none() {
            file.overwrite = Some(true);
        }
    }
    out.ignition.version = Some(RENDERED_IGNITION_VERSION.to_owned());
    out
}

/// `rendered-<pool>-<content hash of spec>`.
pub fn rendered_name(pool: &str, spec: &MachineConfigSpec) -> String {
    format!("rendered-{pool}-{}", content_hash(spec))
}

/// SHA-256 over the canonical JSON of a spec (object keys sorted at every level, no
/// whitespace), as hex, first 32 digits.
pub fn content_hash(spec: &MachineConfigSpec) -> String {
    // A spec is strings, bools, lists and a JSON object: it always encodes.
    let value = serde_json::to_value(spec).expect("a MachineConfigSpec encodes as JSON");
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    let mut hex = hex::encode(digest);
    hex.truncate(32);
    hex
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            out.push('{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A lowercase RFC 1123 subdomain short enough to leave room for `rendered-` and the hash.
fn is_dns_subdomain(s: &str) -> bool {
    let fits = !s.is_empty() && s.len() <= 253 - "rendered--".len() - 32;
    fits && s.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    })
}
