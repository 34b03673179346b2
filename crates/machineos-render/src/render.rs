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
//!   and `""` is turned back into absent after each merge — so an explicit `""` survives only
//!   when no merge happens; then every file whose `overwrite` is unset gets
//!   `overwrite: true`; modes stay as written; the version is `3.5.0` (`3.6.0` when an input
//!   declares it: the MCO refuses 3.6.0, machineos renders it so its special bits survive);
//!   the config is stored as Go's Ignition types encode it ([`crate::go_json`]);
//! * `fips` is the OR of all; `kernelType` is the last `realtime`/`64k-pages` in merge order,
//!   else `default` (a later explicit `default` does not reset it); `kernelArguments` and
//!   `extensions` are concatenated in merge order, duplicates kept; `kernel-devel` with a
//!   non-default kernel is an error;
//! * `osImageURL` and `baseOSExtensionsContainerImage` start from the defaults given, and the
//!   last MachineConfig in merge order with a non-empty value whose
//!   `generated-by-controller-version` annotation is absent or empty overrides each;
//! * the name is the MCO's: `rendered-<pool>-<hash>`, the hash an MD5 over a fixed salt and
//!   the YAML Go writes for the spec ([`crate::go_json::rendered_hash`]) — same spec, same
//!   name, and the name the MCO gives it; a spec Go cannot write as YAML (control
//!   characters) is refused as the MCO refuses it;
//! * an overridden `osImageURL` on a pool with `spec.osImageStream.name` is refused, and a
//!   rendered MachineConfig larger than the MCO's limit (1 572 864 bytes of JSON) too, with
//!   the MCO's messages.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use machineos_api::v1::{MachineConfig, MachineConfigSpec};
use machineos_api::{
    GENERATED_BY_CONTROLLER_VERSION_ANNOTATION, GROUP, OS_IMAGE_URL_OVERRIDDEN_ANNOTATION,
    WORKER_ROLE,
};
use machineos_diagnostics::{Classify, Retry};
use machineos_ignition::{Config, SpecVersion, Warning};
use serde_json::Value;

use crate::validate::{
    Extension, KernelType, ValidMachineConfig, ValidateError, validate_machine_config,
};

/// The Ignition spec version of a rendered config (the MCO's `ign3types.MaxVersion`).
pub const RENDERED_IGNITION_VERSION: &str = "3.5.0";

/// The MCO's limit on a rendered MachineConfig's JSON (`MaxMachineConfigSize`), in bytes.
pub const MAX_RENDERED_SIZE: usize = 1_572_864;

/// What a pool renders on when no MachineConfig overrides it (the MCO takes these from the
/// ControllerConfig or the pool's OSImageStream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderDefaults {
    /// The base OS image (`osImageURL`).
    pub os_image_url: String,
    /// The extensions container image (`baseOSExtensionsContainerImage`); may be empty.
    pub base_os_extensions_container_image: String,
    /// The pool's `spec.osImageStream.name`; when set, no MachineConfig may override
    /// `osImageURL`. Empty when unset.
    pub os_image_stream: String,
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
    /// The input MachineConfigs in merge order, as the MCO writes a pool's
    /// `spec.configuration.source` (`worker` ones by name, then the others by name).
    pub source: Vec<ObjectReference>,
    /// Warnings about the inputs.
    pub warnings: Vec<RenderWarning>,
}

/// Why a pool cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The merged Ignition config does not fit the model again (only a bug makes this).
    #[error("merging the MachineConfigs' Ignition configs: {detail}")]
    MergedConfig {
        /// What serde said.
        detail: String,
    },
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
    #[error("cannot find label in MachineConfig {name}")]
    MissingLabels {
        /// The MachineConfig.
        name: String,
    },
    /// One MachineConfig is invalid.
    #[error(transparent)]
    Invalid(#[from] ValidateError),
    /// The rendered spec has no YAML form in the Go library the MCO names it with.
    #[error("pool {pool:?}: cannot name the rendered MachineConfig: {error}{}", from.as_ref().map(|m| format!(" (from MachineConfig {m:?})")).unwrap_or_default())]
    Name {
        /// The pool.
        pool: String,
        /// Why, with the JSON path in the rendered spec.
        error: machineos_goyaml::GoYamlError,
        /// The input MachineConfig the offending text comes from, when one holds it.
        from: Option<String>,
    },
    /// `osImageURL` overridden on a pool that follows an OS image stream (the MCO's wording).
    #[error(
        "pool {pool:?}: cannot override MachineConfig osImageURL and set MachineConfigPool spec.osImageStream.name simultaneously (osImageURL {os_image_url:?} from MachineConfig {from:?}, osImageStream {stream:?})"
    )]
    OsImageStream {
        /// The pool.
        pool: String,
        /// The overriding image.
        os_image_url: String,
        /// The MachineConfig overriding it.
        from: String,
        /// The pool's stream.
        stream: String,
    },
    /// The rendered MachineConfig exceeds the MCO's size limit (its wording).
    #[error(
        "rendered MachineConfig {name} is too large ({size} bytes, max {MAX_RENDERED_SIZE} bytes). This will exceed etcd's size limit. Consider reducing the number or size of MachineConfigs, particularly large registry mirror configurations (ImageDigestMirrorSet/ImageContentSourcePolicy)"
    )]
    TooLarge {
        /// The rendered MachineConfig.
        name: String,
        /// Its size as Go's JSON.
        size: usize,
    },
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
    /// labels), `DuplicateMachineConfig`, the [`ValidateError`]'s reason,
    /// `IncompatibleExtension` (kernel-devel with a non-default kernel), the naming error's
    /// (`ControlCharacters`, …), `OSImageURLWithStream`, `RenderedConfigTooLarge` or
    /// `InternalError` (a merge that leaves the model: a bug).
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
            RenderError::Name { error, .. } => error.reason(),
            RenderError::OsImageStream { .. } => "OSImageURLWithStream",
            RenderError::TooLarge { .. } => "RenderedConfigTooLarge",
            RenderError::MergedConfig { .. } => "InternalError",
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
    let order = merge_order(mcs)?;
    // The MCO builds the pool's source list after MergeMachineConfigs reordered its slice in
    // place: in merge order.
    let source = order
        .iter()
        .map(|mc| ObjectReference {
            api_version: Some(format!("{GROUP}/v1")),
            kind: Some("MachineConfig".to_owned()),
            name: Some(mc.name().to_owned()),
            ..Default::default()
        })
        .collect();

    let ordered: Vec<&ValidMachineConfig<'_>> = order.iter().map(|mc| &valid[mc.name()]).collect();

    let ignition = merge_ignition(&ordered)?;
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

    // The last user MachineConfig (annotation absent or empty) with a value overrides.
    let overriding = |field: fn(&MachineConfigSpec) -> &String| -> Option<&MachineConfig> {
        ordered
            .iter()
            .map(|v| v.source)
            .rfind(|mc| !mc.is_generated_by_controller() && !field(&mc.spec).is_empty())
    };
    let os_image_from = overriding(|s| &s.os_image_url);
    let extensions_image_from = overriding(|s| &s.base_os_extensions_container_image);
    let config = match serde_json::to_value(&ignition) {
        Ok(Value::Object(map)) => crate::go_json::shape_config(&map),
        // The typed model is a struct of plain data: it always encodes as an object.
        other => unreachable!("an Ignition config encodes as a JSON object, got {other:?}"),
    };
    let spec = MachineConfigSpec {
        os_image_url: os_image_from
            .map_or(&defaults.os_image_url, |mc| &mc.spec.os_image_url)
            .clone(),
        base_os_extensions_container_image: extensions_image_from
            .map_or(&defaults.base_os_extensions_container_image, |mc| {
                &mc.spec.base_os_extensions_container_image
            })
            .clone(),
        config: Some(config),
        kernel_arguments: ordered
            .iter()
            .flat_map(|v| v.source.spec.kernel_arguments.iter().cloned())
            .collect(),
        // As given, in merge order: unsupported ones only come from MachineConfigs without
        // config, where the MCO does not check them either.
        extensions: ordered
            .iter()
            .flat_map(|v| v.source.spec.extensions.iter().cloned())
            .collect(),
        fips: ordered.iter().any(|v| v.source.spec.fips),
        kernel_type: kernel_type.as_str().to_owned(),
    };
    let name = match crate::go_json::rendered_hash(&spec) {
        Ok(hash) => format!("rendered-{pool}-{hash}"),
        Err(error) => {
            let from = offending_machine_config(&ordered, &error);
            return Err(RenderError::Name {
                pool: pool.to_owned(),
                error,
                from,
            });
        }
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
        if !defaults.os_image_stream.is_empty() {
            return Err(RenderError::OsImageStream {
                pool: pool.to_owned(),
                os_image_url: spec.os_image_url.clone(),
                from: os_image_from
                    .map(|mc| mc.name().to_owned())
                    .unwrap_or_default(),
                stream: defaults.os_image_stream.clone(),
            });
        }
    }
    let mut warnings: Vec<RenderWarning> = ordered
        .iter()
        .flat_map(|v| {
            v.warnings.iter().map(|w| RenderWarning {
                machine_config: v.source.name().to_owned(),
                warning: w.clone(),
            })
        })
        .collect();
    for v in &ordered {
        for e in &v.unchecked_extensions {
            warnings.push(RenderWarning {
                machine_config: v.source.name().to_owned(),
                warning: Warning {
                    path: "$.spec.extensions".to_owned(),
                    message: format!(
                        "extension {e:?} is not supported: rendered as the MCO does (it checks extensions only in MachineConfigs with a config), it fails when the config is applied"
                    ),
                },
            });
        }
    }
    let machine_config = MachineConfig {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec,
    };
    let size = rendered_size(&machine_config);
    if size > MAX_RENDERED_SIZE {
        return Err(RenderError::TooLarge {
            name: machine_config.name().to_owned(),
            size,
        });
    }
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

/// The objects of `storage.files` in a config's JSON form.
fn files_mut(config: &mut Value) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    config
        .pointer_mut("/storage/files")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn merge_ignition(ordered: &[&ValidMachineConfig<'_>]) -> Result<Config, RenderError> {
    let first = match ordered.first().and_then(|v| v.ignition.clone()) {
        Some(config) => config,
        None => {
            let mut empty = Config::default();
            empty.ignition.version = Some(RENDERED_IGNITION_VERSION.to_owned());
            empty
        }
    };
    // The fold runs on the JSON form, merged in place: each config is converted once, not
    // the growing result at every step.
    let bad = |e: serde_json::Error| RenderError::MergedConfig {
        detail: e.to_string(),
    };
    let json = |c: &Config| serde_json::to_value(c).map_err(bad);
    let mut out = json(&first)?;
    let mut merged_any = false;
    for v in ordered.iter().skip(1) {
        let Some(child) = &v.ignition else { continue };
        let mut child = json(child)?;
        // A child's file without `compression` sets it to "" over its parent's.
        for file in files_mut(&mut child) {
            let contents = file
                .entry("contents")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(contents) = contents.as_object_mut()
                && contents.get("compression").is_none_or(Value::is_null)
            {
                contents.insert("compression".into(), Value::String(String::new()));
            }
        }
        machineos_ignition::merge::merge_values_into(&mut out, &child);
        merged_any = true;
        // After each merge, never before the first: a lone config keeps an explicit "".
        for file in files_mut(&mut out) {
            if let Some(contents) = file.get_mut("contents").and_then(Value::as_object_mut)
                && contents.get("compression").and_then(Value::as_str) == Some("")
            {
                contents.remove("compression");
            }
        }
    }
    let mut out: Config = if merged_any {
        serde_json::from_value(out).map_err(bad)?
    } else {
        first
    };
    for file in &mut out.storage.files {
        if file.overwrite.is_none() {
            file.overwrite = Some(true);
        }
    }
    let spec_3_6 = ordered.iter().any(|v| {
        v.spec_version
            .is_some_and(SpecVersion::honours_special_bits)
    });
    out.ignition.version = Some(
        if spec_3_6 {
            SpecVersion::V3_6.as_str()
        } else {
            RENDERED_IGNITION_VERSION
        }
        .to_owned(),
    );
    Ok(out)
}

/// `rendered-<pool>-<hash>` for a rendered spec, as the MCO names it
/// ([`crate::go_json::rendered_hash`]); `None` when Go could not write the spec as YAML.
pub fn rendered_name(pool: &str, spec: &MachineConfigSpec) -> Option<String> {
    crate::go_json::rendered_hash(spec)
        .ok()
        .map(|hash| format!("rendered-{pool}-{hash}"))
}

/// The size the MCO's limit counts: Go's JSON of the rendered MachineConfig (clarketm/json,
/// as `ValidateMachineConfigSize` marshals it: no `creationTimestamp`, an empty struct), with
/// the metadata machineos sets. The MCO's object also carries the pool's ownerReference and
/// its own version annotations, a few hundred bytes that only count where machineos's
/// controller sets them.
fn rendered_size(mc: &MachineConfig) -> usize {
    let object = serde_json::json!({
        "metadata": serde_json::to_value(&mc.metadata).unwrap_or_default(),
        "spec": crate::go_json::spec_json(&mc.spec),
    });
    crate::go_json::go_json_len(&object)
}

/// The first MachineConfig (in merge order) whose spec holds the character a naming error
/// is about.
fn offending_machine_config(
    ordered: &[&ValidMachineConfig<'_>],
    error: &machineos_goyaml::GoYamlError,
) -> Option<String> {
    let needle = match error {
        machineos_goyaml::GoYamlError::ControlCharacters { character, .. } => *character,
        machineos_goyaml::GoYamlError::KeyLineBreak { .. }
        | machineos_goyaml::GoYamlError::DocumentIndicator { .. } => '\u{85}',
    };
    ordered
        .iter()
        .find(|v| {
            serde_json::to_string(&v.source.spec).is_ok_and(|s| {
                s.contains(needle) || s.contains(&format!("\\u{:04x}", u32::from(needle)))
            })
        })
        .map(|v| v.source.name().to_owned())
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
