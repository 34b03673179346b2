//! Per-MachineConfig validation with the MCO's rules and messages (`ValidateMachineConfig`,
//! `validateExtensions`), turning the string fields the API carries into typed values: a
//! [`ValidMachineConfig`] can be merged without further checks.
//!
//! Checks, in the MCO's order: `kernelType` is one of its values; the Ignition config parses
//! and validates (spec 3.0.0–3.6.0, or spec 2.x, which the MCO still takes, converted to 3.5.0
//! as it converts it); no file mode exceeds 0777; and, for a MachineConfig that carries a config,
//! every extension is supported — the MCO checks extensions only then
//! (`ValidateMachineConfig`), so an unknown extension in a MachineConfig without config
//! renders, and fails when applied ([`ValidMachineConfig::unchecked_extensions`]). Each error
//! names the MachineConfig and the JSON path from the object's root
//! (`$.spec.config.storage.files.3.path`).
//!
//! The config is kept with its modes as written (setuid, setgid and sticky bits included):
//! masking them below spec 3.6.0 is a matter of applying the config, not of rendering it.

use machineos_api::v1::MachineConfig;
use machineos_diagnostics::{Classify, Retry, go_octal};
use machineos_ignition::{Config, SpecVersion, Warning};

/// Why one MachineConfig is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidateError {
    /// `spec.kernelType` is not one of the allowed values.
    #[error("MachineConfig {name:?}: error at $.spec.kernelType: kernelType={value} is invalid")]
    KernelType {
        /// The MachineConfig.
        name: String,
        /// The value given.
        value: String,
    },
    /// `spec.config` does not parse or validate as an Ignition config.
    #[error("MachineConfig {name:?}: error at {path}: {message}")]
    Ignition {
        /// The MachineConfig.
        name: String,
        /// JSON path from the MachineConfig's root, such as `$.spec.config.storage.files.0.path`.
        path: String,
        /// Ignition's message.
        message: String,
        /// The Ignition error's [`Classify::reason`]: `UnsupportedSpecVersion` for a spec
        /// version machineos does not accept (such as 2.2.0, which the MCO still does),
        /// else `InvalidConfig`.
        reason: &'static str,
    },
    /// A file mode with setuid, setgid or sticky bits, which the MCO refuses.
    #[error(
        "MachineConfig {name:?}: error at $.spec.config.storage.files.{index}.mode: invalid mode {} for {path}, cannot exceed 0777",
        go_octal(*.mode)
    )]
    FileMode {
        /// The MachineConfig.
        name: String,
        /// Index of the file in `storage.files`.
        index: usize,
        /// The file's path.
        path: String,
        /// The mode given.
        mode: i64,
    },
    /// Extensions outside the allowlist.
    #[error(
        "MachineConfig {name:?}: error at $.spec.extensions: invalid extensions found: [{}]",
        invalid.join(" ")
    )]
    Extensions {
        /// The MachineConfig.
        name: String,
        /// The unsupported values, in order.
        invalid: Vec<String>,
    },
}

impl Classify for ValidateError {
    /// `InvalidKernelType`; the Ignition error's reason (`InvalidConfig`,
    /// `UnsupportedSpecVersion`); `InvalidFileMode`; or `UnsupportedExtension`.
    fn reason(&self) -> &'static str {
        match self {
            ValidateError::KernelType { .. } => "InvalidKernelType",
            ValidateError::Ignition { reason, .. } => reason,
            ValidateError::FileMode { .. } => "InvalidFileMode",
            ValidateError::Extensions { .. } => "UnsupportedExtension",
        }
    }

    /// Always permanent: the MachineConfig must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// The kernel a MachineConfig asks for (`spec.kernelType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelType {
    /// `""` or `default`: the traditional kernel.
    Default,
    /// `realtime`: the RT kernel.
    Realtime,
    /// `64k-pages`: the 64k-page kernel (aarch64 only).
    SixtyFourKPages,
}

impl KernelType {
    /// Parse `spec.kernelType`; `""` is the default kernel.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "default" => Some(KernelType::Default),
            "realtime" => Some(KernelType::Realtime),
            "64k-pages" => Some(KernelType::SixtyFourKPages),
            _ => None,
        }
    }

    /// The value a rendered MachineConfig carries: `default`, `realtime` or `64k-pages`.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelType::Default => "default",
            KernelType::Realtime => "realtime",
            KernelType::SixtyFourKPages => "64k-pages",
        }
    }

    /// The RPMs of this kernel (`GetPackagesForSupportedKernelType`): RHCOS's row of the
    /// variant table ([`machineos_variant::traits()`]), which this crate assumes.
    pub fn packages(self) -> &'static [&'static str] {
        match self {
            KernelType::Default => machineos_variant::KERNEL_DEFAULT,
            KernelType::Realtime => machineos_variant::KERNEL_REALTIME,
            KernelType::SixtyFourKPages => machineos_variant::KERNEL_64K_PAGES,
        }
    }

    /// The variant table's name for this kernel type.
    pub fn kernel(self) -> machineos_variant::Kernel {
        match self {
            KernelType::Default => machineos_variant::Kernel::Default,
            KernelType::Realtime => machineos_variant::Kernel::Realtime,
            KernelType::SixtyFourKPages => machineos_variant::Kernel::SixtyFourKPages,
        }
    }
}

/// A supported RHCOS extension (`SupportedExtensions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Extension {
    /// `two-node-ha`.
    TwoNodeHa,
    /// `ipsec`.
    Ipsec,
    /// `usbguard`.
    Usbguard,
    /// `kerberos`.
    Kerberos,
    /// `kernel-devel`.
    KernelDevel,
    /// `sandboxed-containers`.
    SandboxedContainers,
    /// `sysstat`.
    Sysstat,
}

impl Extension {
    /// Every supported extension.
    pub const ALL: [Extension; 7] = [
        Extension::TwoNodeHa,
        Extension::Ipsec,
        Extension::Usbguard,
        Extension::Kerberos,
        Extension::KernelDevel,
        Extension::SandboxedContainers,
        Extension::Sysstat,
    ];

    /// Parse an entry of `spec.extensions`.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == value)
    }

    /// The name as written in `spec.extensions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Extension::TwoNodeHa => "two-node-ha",
            Extension::Ipsec => "ipsec",
            Extension::Usbguard => "usbguard",
            Extension::Kerberos => "kerberos",
            Extension::KernelDevel => "kernel-devel",
            Extension::SandboxedContainers => "sandboxed-containers",
            Extension::Sysstat => "sysstat",
        }
    }

    /// The RPMs the extension installs: RHCOS's row of the variant table
    /// ([`machineos_variant::EL_EXTENSIONS`]), which this crate assumes. Every
    /// [`Extension`] has an entry there (a test checks it).
    pub fn packages(self) -> &'static [&'static str] {
        machineos_variant::el_extension_packages(self.as_str()).unwrap_or_default()
    }
}

/// A MachineConfig that passed validation, with its fields parsed.
#[derive(Debug, Clone)]
pub struct ValidMachineConfig<'a> {
    /// The object validated.
    pub source: &'a MachineConfig,
    /// `spec.config` as an Ignition config, modes as written; `None` when absent.
    pub ignition: Option<Config>,
    /// The spec version `spec.config` declared; `None` when absent.
    pub spec_version: Option<SpecVersion>,
    /// `spec.kernelType`.
    pub kernel_type: KernelType,
    /// `spec.extensions` the MCO supports, in order, duplicates kept.
    pub extensions: Vec<Extension>,
    /// `spec.extensions` that are not supported, in a MachineConfig without config (where
    /// the MCO does not check them); empty when the MachineConfig has a config.
    pub unchecked_extensions: Vec<String>,
    /// Ignition's warnings (unknown keys and the like), paths from the object's root.
    pub warnings: Vec<Warning>,
}

/// Validate one MachineConfig with the MCO's rules.
pub fn validate_machine_config(
    mc: &MachineConfig,
) -> Result<ValidMachineConfig<'_>, ValidateError> {
    let name = mc.name();
    let kernel_type =
        KernelType::parse(&mc.spec.kernel_type).ok_or_else(|| ValidateError::KernelType {
            name: name.to_owned(),
            value: mc.spec.kernel_type.clone(),
        })?;

    let mut warnings = Vec::new();
    let (ignition, spec_version) = match &mc.spec.config {
        None => (None, None),
        Some(raw) => {
            let (config, version) = parse_ignition(name, raw, &mut warnings)?;
            check_file_modes(name, raw)?;
            (Some(config), Some(version))
        }
    };

    let mut extensions = Vec::with_capacity(mc.spec.extensions.len());
    let mut invalid = Vec::new();
    for e in &mc.spec.extensions {
        match Extension::parse(e) {
            Some(ext) => extensions.push(ext),
            None => invalid.push(e.clone()),
        }
    }
    if !invalid.is_empty() && ignition.is_some() {
        return Err(ValidateError::Extensions {
            name: name.to_owned(),
            invalid,
        });
    }

    Ok(ValidMachineConfig {
        source: mc,
        ignition,
        spec_version,
        kernel_type,
        extensions,
        unchecked_extensions: invalid,
        warnings,
    })
}

/// `$.storage…` (relative to the Ignition config) → `$.spec.config.storage…`.
fn rebase(path: &str) -> String {
    match path.strip_prefix('$') {
        Some(rest) => format!("$.spec.config{rest}"),
        None => format!("$.spec.config.{path}"),
    }
}

/// Split a message in the project's `error at <path>: <message>` form.
fn split_located(message: &str) -> (String, String) {
    if let Some(rest) = message.strip_prefix("error at ")
        && let Some((path, msg)) = rest.split_once(": ")
        && path.starts_with('$')
    {
        return (rebase(path), msg.to_owned());
    }
    ("$.spec.config".to_owned(), message.to_owned())
}

fn parse_ignition(
    name: &str,
    raw: &serde_json::Map<String, serde_json::Value>,
    warnings: &mut Vec<Warning>,
) -> Result<(Config, SpecVersion), ValidateError> {
    let ignition_error =
        |(path, message): (String, String), reason: &'static str| ValidateError::Ignition {
            name: name.to_owned(),
            path,
            message,
            reason,
        };
    let value = serde_json::Value::Object(raw.clone());
    if machineos_ignition_spec2::is_spec2(&value) {
        return parse_spec2(name, &value, warnings);
    }
    // A JSON object always serializes; the bytes are what Ignition's parser takes.
    let bytes = serde_json::to_vec(raw)
        .map_err(|e| ignition_error(("$.spec.config".into(), e.to_string()), "InvalidConfig"))?;
    let parsed = machineos_ignition::parse::parse_unmasked(&bytes)
        .map_err(|e| ignition_error(split_located(&e.to_string()), e.reason()))?;
    let rebased = |w: Warning| Warning {
        path: rebase(&w.path),
        message: w.message,
    };
    warnings.extend(parsed.warnings.into_iter().map(rebased));
    let found = machineos_ignition::validate(&parsed.config).map_err(|e| {
        let reason = e.reason();
        ignition_error((rebase(&e.path), e.message), reason)
    })?;
    warnings.extend(found.into_iter().map(rebased));
    Ok((parsed.config, parsed.version))
}

/// A spec 2 config, as the MCO takes it: `ValidateMachineConfig`'s checks (parse, file
/// modes), then the conversion to 3.5.0 `MergeMachineConfigs` does
/// ([`machineos_ignition_spec2`]); the result renders as any 3.5.0 config.
fn parse_spec2(
    name: &str,
    value: &serde_json::Value,
    warnings: &mut Vec<Warning>,
) -> Result<(Config, SpecVersion), ValidateError> {
    let located =
        |path: Option<&str>, message: String, reason: &'static str| ValidateError::Ignition {
            name: name.to_owned(),
            path: path.map_or_else(|| "$.spec.config".to_owned(), rebase),
            message,
            reason,
        };
    machineos_ignition_spec2::validate_value(value)
        .map_err(|e| located(e.path(), e.to_string(), e.reason()))?;
    let converted = machineos_ignition_spec2::convert_value(value)
        .map_err(|e| located(e.path(), e.to_string(), e.reason()))?;
    warnings.extend(converted.warnings.into_iter().map(|w| Warning {
        path: rebase(&w.path),
        message: w.message,
    }));
    // The converter writes JSON machineos's parser reads (checked by its tests); a failure
    // here would be a converter bug, reported at the config.
    let bytes = serde_json::to_vec(&converted.config).unwrap_or_default();
    let parsed = machineos_ignition::parse::parse_unmasked(&bytes).map_err(|e| {
        located(
            None,
            format!("the config converted from spec {}: {e}", converted.version),
            e.reason(),
        )
    })?;
    Ok((parsed.config, parsed.version))
}

/// The MCO refuses special bits on files (bugzilla 2038240); directories are not checked.
///
/// Checked on the config as written (the MCO parses into 3.5.0 types, where special bits
/// survive, and rejects them). Runs after a successful parse, so every mode is an integer.
fn check_file_modes(
    name: &str,
    raw: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), ValidateError> {
    let files = raw
        .get("storage")
        .and_then(|s| s.get("files"))
        .and_then(serde_json::Value::as_array);
    for (index, file) in files.into_iter().flatten().enumerate() {
        if let Some(mode) = file.get("mode").and_then(serde_json::Value::as_i64)
            && !(0..=0o777).contains(&mode)
        {
            return Err(ValidateError::FileMode {
                name: name.to_owned(),
                index,
                path: file
                    .get("path")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                mode,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_types_round_trip() {
        for (input, want) in [
            ("", Some(KernelType::Default)),
            ("default", Some(KernelType::Default)),
            ("realtime", Some(KernelType::Realtime)),
            ("64k-pages", Some(KernelType::SixtyFourKPages)),
            ("rt", None),
            ("Realtime", None),
        ] {
            assert_eq!(KernelType::parse(input), want, "{input:?}");
        }
        for k in [
            KernelType::Default,
            KernelType::Realtime,
            KernelType::SixtyFourKPages,
        ] {
            assert_eq!(KernelType::parse(k.as_str()), Some(k));
        }
    }

    #[test]
    fn extensions_round_trip() {
        for e in Extension::ALL {
            assert_eq!(Extension::parse(e.as_str()), Some(e));
            assert!(!e.packages().is_empty());
        }
        // The enum and RHCOS's row of the variant table name the same extensions, in order.
        let names: Vec<&str> = Extension::ALL.iter().map(|e| e.as_str()).collect();
        let table: Vec<&str> = machineos_variant::EL_EXTENSIONS
            .iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, table);
        let rhcos = machineos_variant::traits_of(machineos_variant::VariantKind::RHELCoreOS);
        for k in [
            KernelType::Default,
            KernelType::Realtime,
            KernelType::SixtyFourKPages,
        ] {
            assert_eq!(rhcos.kernel(k.kernel()).supported(), Some(&k.packages()));
        }
        assert_eq!(
            Extension::parse("wasm"),
            None,
            "dropped from the MCO's allowlist"
        );
    }

    #[test]
    fn located_messages_are_rebased() {
        for (input, path, msg) in [
            (
                "error at $.ignition.version: unsupported config version \"2.2.0\"",
                "$.spec.config.ignition.version",
                "unsupported config version \"2.2.0\"",
            ),
            ("error at $: invalid type", "$.spec.config", "invalid type"),
            (
                "not a config (empty)",
                "$.spec.config",
                "not a config (empty)",
            ),
        ] {
            assert_eq!(
                split_located(input),
                (path.to_owned(), msg.to_owned()),
                "{input}"
            );
        }
    }
}
