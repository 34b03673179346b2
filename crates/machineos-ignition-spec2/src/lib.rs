//! Ignition spec 2 configs (as a MachineConfig's `spec.config` may still hold) converted to
//! Ignition spec 3.5.0 **exactly as the Machine Config Operator does**, so that machineos
//! renders such MachineConfigs to the same result.
//!
//! The MCO (`pkg/controller/common/helpers.go`) does, for a config that is not spec 3:
//!
//! 1. `IgnParseWrapper`: read `ignition.version`; a version that is not a semantic version is
//!    refused ("invalid version"); spec 3.0.0–3.5.0 goes to Ignition's spec 3 parser (not this
//!    crate: [`ParseError::NotSpec2`]); anything else goes to `ign2.Parse`
//!    (`github.com/coreos/ignition/config/v2_2`, ignition v0.35.0), which decodes and
//!    validates spec **2.2.0**, and accepts **2.1.0** and **2.0.0** by falling back to their
//!    parsers and translating the result up to 2.2. Other versions (2.3.0, 2.2.1, 3.6.0, …)
//!    are "unknown". A fatal validation report is an error; warnings are not.
//! 2. `removeIgnDuplicateFilesUnitsUsers`: files deduplicated by path (last wins), units by
//!    name (last wins, earlier drop-ins merged in), users must all be `core` (their SSH keys
//!    merged and de-duplicated by `dedupePasswdUserSSHKeys`). Kept files and units come out
//!    in reverse order, as the MCO's loops produce them.
//! 3. The converter (`ignition_converter.go`): `ign23.Translate` (2.2 → 2.3), then
//!    ign-converter's `v23tov30.Translate` with the filesystem map `{"root": "/"}` — which
//!    refuses networkd units, other filesystems, deprecated fields (any disk partition),
//!    conflicting paths, paths under the config's own links, duplicate units or drop-ins, and
//!    an invalid 3.0 result — then `v31translate` … `v35translate`.
//!
//! [`convert`] does all three and returns the 3.5.0 config as JSON, key for key as the MCO
//! marshals it (`github.com/clarketm/json`), which `machineos_ignition::parse` accepts.
//! [`validate`] is the Ignition part of `ValidateMachineConfig` (what the render controller
//! checks on every MachineConfig first): `IgnParseWrapper`, then `validateIgn2FileModes`,
//! which refuses setuid, setgid and sticky bits.
//!
//! Errors read as the MCO's, verbatim, where the MCO's message does not depend on Go's
//! source positions; where it does (a validation report), each entry is placed at a JSON
//! path (`error at $.storage.files.0.mode: illegal file mode`) instead of a line and column.
//! Every error ([`Spec2Error`], [`ValidateError`], [`ParseError`]) is
//! [`Permanent`](machineos_diagnostics::Retry::Permanent): nothing here does
//! I/O, the config must change.
//!
//! Quirks of the MCO's code are kept on purpose: files and units come out newest first; a
//! spec 2 file without contents gets `contents.source: ""`; `passwd.users[].create` is
//! dropped; every `merge` source becomes the last `append` source (a loop-variable alias in
//! ign-converter), so two or more `append` entries are refused as duplicates; a config with
//! a value of the wrong type is mostly refused as an "unknown version" (Ignition's parser
//! falls back to older specs until one decodes it and then rejects its version).
//!
//! Known differences, all in error texts: a JSON syntax error is worded by serde_json, not
//! Go's scanner; report entries are at JSON paths, and unrecognized keys in document order
//! (Go prints map order); a float in a type error prints as Rust formats it. And in what is
//! accepted: a JSON object key given twice keeps its last value (Go merges two objects);
//! strings with invalid UTF-8 or lone surrogates are not JSON here (Go replaces them); a
//! spec 2.0 URL is printed back with only its scheme lower-cased (Go's `URL.String` may also
//! re-escape it); a config that also carries spec 1's `ignitionVersion: 1` is an unknown
//! version here, where Ignition would read it as spec 1.
//!
//! Pure: no I/O, deterministic.

mod convert;
mod decode;
mod dedupe;
mod gopath;
mod older;
mod parse;
mod semver;
mod unit;
mod url;
mod v22;
mod v3;
mod validate2;

use serde_json::Value;

pub use machineos_diagnostics::Warning;

/// The spec versions the MCO's converter knows, as its refusals list them
/// (`IgnitionConverterSingleton().GetSupportedMinorVersions()`).
pub const SUPPORTED_VERSIONS: &str = "2.2,3.0,3.1,3.2,3.3,3.4,3.5";

/// A spec 2 config converted to spec 3.5.0.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The Ignition 3.5.0 config, as JSON.
    pub config: Value,
    /// The spec version the config declared (`2.2.0`, `2.1.0` or `2.0.0`).
    pub version: String,
    /// What Ignition's spec 2 validation warned about (unrecognized keys, unset modes, units
    /// enabled without an `[Install]` section, …) and what the MCO's clean-up dropped or
    /// merged. The MCO logs or ignores these; none stops the conversion.
    pub warnings: Vec<Warning>,
}

/// Why the MCO's `IgnParseWrapper` refused a config. The messages are its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Empty input.
    #[error("parsing Ignition config spec v3 failed with error: not a config (empty)\nReport: ")]
    Empty,
    /// Not JSON.
    #[error(
        "parsing Ignition config spec v3 failed with error: config is not valid\nReport: error at line {line} col {column}: {message}\n"
    )]
    Json {
        /// The JSON parser's message.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// JSON that is not an object with a string `ignition.version`.
    #[error(
        "parsing Ignition config spec v3 failed with error: config is not valid\nReport: error at {path}: {message}\n"
    )]
    NotAConfig {
        /// Where, such as `$.ignition.version`.
        path: String,
        /// Go's decoding message.
        message: String,
    },
    /// `ignition.version` missing, empty, or not a semantic version.
    #[error(
        "parsing Ignition config failed: invalid version. Supported spec versions: {SUPPORTED_VERSIONS}"
    )]
    InvalidVersion,
    /// A version neither Ignition parser of the MCO accepts (2.3.0, 3.6.0, 2.2.0-rc1, …),
    /// or a config that none of the spec 2 decoders could read (the MCO's parser falls back
    /// to older and older specs and ends with an unknown version).
    #[error(
        "parsing Ignition config failed: unknown version. Supported spec versions: {SUPPORTED_VERSIONS}"
    )]
    UnknownVersion {
        /// The declared version.
        version: String,
    },
    /// A spec 3.0.0–3.5.0 config: not for this crate (machineos-ignition parses it).
    #[error("config version {version} is Ignition spec 3, not spec 2: parse it as spec 3")]
    NotSpec2 {
        /// The declared version.
        version: String,
    },
    /// Ignition's spec 2 parser refused the config: a value of the wrong type, or a fatal
    /// validation report (all of it, warnings included, one entry a line).
    #[error("parsing Ignition spec v2 failed with error: config is not valid\nReport: {report}")]
    Invalid {
        /// The JSON path of the first error.
        path: String,
        /// The report: `error at $.storage.files.0.mode: illegal file mode`, ….
        report: String,
    },
}

impl ParseError {
    /// The JSON path the error is about, when it is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ParseError::NotAConfig { path, .. } | ParseError::Invalid { path, .. } => Some(path),
            ParseError::InvalidVersion
            | ParseError::UnknownVersion { .. }
            | ParseError::NotSpec2 { .. } => Some("$.ignition.version"),
            ParseError::Empty | ParseError::Json { .. } => None,
        }
    }
}

impl machineos_diagnostics::Classify for ParseError {
    /// `UnsupportedSpecVersion` for a version this conversion does not take, else
    /// `InvalidConfig`.
    fn reason(&self) -> &'static str {
        match self {
            ParseError::InvalidVersion
            | ParseError::UnknownVersion { .. }
            | ParseError::NotSpec2 { .. } => "UnsupportedSpecVersion",
            ParseError::Empty
            | ParseError::Json { .. }
            | ParseError::NotAConfig { .. }
            | ParseError::Invalid { .. } => "InvalidConfig",
        }
    }

    /// Always permanent: the config must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// Why a config could not be converted (`ParseAndConvertConfig`). The messages are the
/// MCO's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Spec2Error {
    /// The config could not be parsed.
    #[error("failed to parse Ignition config: {0}")]
    Parse(ParseError),
    /// A user other than `core` (`removeIgnDuplicateFilesUnitsUsers`).
    #[error("unexpected user with name: {name}. Only core user is supported")]
    UnsupportedUser {
        /// The user's name.
        name: String,
        /// Where, such as `$.passwd.users.1`.
        path: String,
    },
    /// The converter refused the config: something spec 3 cannot express, or an invalid
    /// result. `reason` is ign-converter's (or the spec 3.0 validation report).
    #[error(
        "failed to convert Ignition config spec v2 to v3: unable to convert Ignition spec v2 config to v3: {reason}"
    )]
    Unconvertible {
        /// The JSON path it is about, in the config after the MCO's clean-up (files and
        /// units deduplicated and in reverse order).
        path: String,
        /// ign-converter's message.
        reason: String,
    },
}

impl Spec2Error {
    /// The JSON path the error is about, when it is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Spec2Error::Parse(e) => e.path(),
            Spec2Error::UnsupportedUser { path, .. } | Spec2Error::Unconvertible { path, .. } => {
                Some(path)
            }
        }
    }
}

impl machineos_diagnostics::Classify for Spec2Error {
    /// As [`ParseError`]'s for a parse failure, else `InvalidConfig`.
    fn reason(&self) -> &'static str {
        match self {
            Spec2Error::Parse(e) => e.reason(),
            Spec2Error::UnsupportedUser { .. } | Spec2Error::Unconvertible { .. } => {
                "InvalidConfig"
            }
        }
    }

    /// Always permanent: the config must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// Why [`validate`] refused a config (`ValidateMachineConfig`). The messages are the MCO's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidateError {
    /// The config could not be parsed (the MCO returns `IgnParseWrapper`'s error as is).
    #[error("{0}")]
    Parse(ParseError),
    /// A file mode with setuid, setgid or sticky bits (`validateIgn2FileModes`).
    #[error("invalid mode {} for {file}, cannot exceed 0777", go_octal(*.mode))]
    FileMode {
        /// The file's path.
        file: String,
        /// The mode.
        mode: i64,
        /// Where, such as `$.storage.files.0.mode`.
        path: String,
    },
}

impl ValidateError {
    /// The JSON path the error is about, when it is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ValidateError::Parse(e) => e.path(),
            ValidateError::FileMode { path, .. } => Some(path),
        }
    }
}

impl machineos_diagnostics::Classify for ValidateError {
    /// As [`ParseError`]'s for a parse failure, else `InvalidConfig`.
    fn reason(&self) -> &'static str {
        match self {
            ValidateError::Parse(e) => e.reason(),
            ValidateError::FileMode { .. } => "InvalidConfig",
        }
    }

    /// Always permanent: the config must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

use machineos_diagnostics::go_octal;

/// Whether a config declares a spec 2 version (`ignition.version` starting with `2.`), read
/// as the MCO reads it (keys match ignoring case, as Go's JSON decoder does). Such a config
/// goes to [`convert`]; the MCO also routes any other version that is not spec 3.0–3.5 to
/// its spec 2 parser, which refuses it as unknown.
pub fn is_spec2(config: &Value) -> bool {
    parse::declared_version(config).is_ok_and(|v| v.starts_with("2."))
}

fn from_bytes(raw: &[u8]) -> Result<Value, ParseError> {
    if raw.is_empty() {
        return Err(ParseError::Empty);
    }
    serde_json::from_slice(raw).map_err(|e| {
        let text = e.to_string();
        let message = match text.rfind(" at line ") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        ParseError::Json {
            message,
            line: e.line(),
            column: e.column(),
        }
    })
}

/// Converts a spec 2 config (bytes) to spec 3.5.0 as the MCO's `ParseAndConvertConfig`
/// does.
pub fn convert(raw: &[u8]) -> Result<Converted, Spec2Error> {
    let value = from_bytes(raw).map_err(Spec2Error::Parse)?;
    let parsed = parse::parse(&value).map_err(Spec2Error::Parse)?;
    drop(value);
    finish(parsed)
}

/// [`convert`] for a config already parsed as JSON.
pub fn convert_value(config: &Value) -> Result<Converted, Spec2Error> {
    finish(parse::parse(config).map_err(Spec2Error::Parse)?)
}

/// The MCO's clean-up and conversion of a parsed config.
fn finish(parsed: parse::Parsed) -> Result<Converted, Spec2Error> {
    let parse::Parsed {
        config,
        version,
        mut warnings,
    } = parsed;
    let config =
        dedupe::dedupe(config, &mut warnings).map_err(|e| Spec2Error::UnsupportedUser {
            path: format!("$.passwd.users.{}", e.index),
            name: e.name,
        })?;
    let v3 = convert::convert(config).map_err(|r| Spec2Error::Unconvertible {
        path: r.path(),
        reason: r.to_string(),
    })?;
    Ok(Converted {
        config: v3.to_json(),
        version,
        warnings,
    })
}

/// The Ignition part of the MCO's `ValidateMachineConfig` for a spec 2 config:
/// `IgnParseWrapper`, then `ValidateIgnition`'s `validateIgn2FileModes` (no setuid, setgid
/// or sticky bits). Returns the parser's warnings.
pub fn validate(raw: &[u8]) -> Result<Vec<Warning>, ValidateError> {
    validate_value(&from_bytes(raw).map_err(ValidateError::Parse)?)
}

/// [`validate`] for a config already parsed as JSON.
pub fn validate_value(config: &Value) -> Result<Vec<Warning>, ValidateError> {
    let parsed = parse::parse(config).map_err(ValidateError::Parse)?;
    for (i, f) in parsed.config.storage.files.iter().enumerate() {
        if let Some(mode) = f.mode
            && !(0..=0o777).contains(&mode)
        {
            return Err(ValidateError::FileMode {
                file: f.path.clone(),
                mode,
                path: format!("$.storage.files.{i}.mode"),
            });
        }
    }
    Ok(parsed.warnings)
}
