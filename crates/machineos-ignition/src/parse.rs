//! Parsing: bytes → [`Config`], with the spec version checked, older versions translated
//! to the 3.6.0 model, and unknown keys reported as warnings (as Ignition does).
//!
//! Two entry points, which differ only in the file and directory modes they return:
//!
//! * [`parse`] translates as Ignition does: setuid/setgid/sticky bits are honoured from spec
//!   3.6.0 on, so [`mask_special_bits`] clears them out of the modes of an older config.
//!   This is the config a node applies.
//! * [`parse_unmasked`] keeps every mode exactly as written, whatever the version: for a
//!   renderer that must copy modes into its output as they are, leaving the masking to
//!   whoever applies the result. Call [`mask_special_bits`] with [`Parsed::version`] to get
//!   what [`parse`] returns.
//!
//! Both report the same warnings, the special-bits one included: Ignition's validator of
//! specs 3.0.0–3.5.0 warns about such a mode in the config as written, whether or not it is
//! masked later.
//!
//! Spec 3.6.0 (stable since Ignition 2.26.0) has the same JSON schema as 3.5.0: no key is new,
//! so none is gated at 3.6.0. It differs in semantics only: special mode bits are honoured,
//! and a custom Clevis pin may have any name (which this crate never checked).

use serde_json::Value;

use crate::model::Config;

/// A spec version we accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpecVersion {
    /// 3.0.0
    V3_0,
    /// 3.1.0
    V3_1,
    /// 3.2.0
    V3_2,
    /// 3.3.0
    V3_3,
    /// 3.4.0
    V3_4,
    /// 3.5.0
    V3_5,
    /// 3.6.0: honours setuid/setgid/sticky bits in modes.
    V3_6,
}

impl SpecVersion {
    /// Every accepted version, oldest first.
    pub const ALL: [SpecVersion; 7] = [
        Self::V3_0,
        Self::V3_1,
        Self::V3_2,
        Self::V3_3,
        Self::V3_4,
        Self::V3_5,
        Self::V3_6,
    ];

    /// The newest accepted version, whose model [`Config`] is.
    pub const LATEST: SpecVersion = Self::V3_6;

    /// Whether setuid/setgid/sticky bits in a mode take effect (3.6.0 and later).
    pub fn honours_special_bits(self) -> bool {
        self >= Self::V3_6
    }

    /// The version string, such as `3.6.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V3_0 => "3.0.0",
            Self::V3_1 => "3.1.0",
            Self::V3_2 => "3.2.0",
            Self::V3_3 => "3.3.0",
            Self::V3_4 => "3.4.0",
            Self::V3_5 => "3.5.0",
            Self::V3_6 => "3.6.0",
        }
    }
}

impl std::fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A non-fatal finding, reported and otherwise ignored (as Ignition does); its path is
/// a JSON path such as `$.storage.files.0.contnets`.
pub use machineos_diagnostics::Warning;

/// A parsed config.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The config, translated to the 3.6.0 model (from [`parse_unmasked`]: with modes as
    /// written).
    pub config: Config,
    /// The version it declared.
    pub version: SpecVersion,
    /// Unknown keys and other warnings.
    pub warnings: Vec<Warning>,
}

/// Why a config could not be parsed. Messages follow Ignition's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Empty input: zero bytes. Ignition's `ErrEmpty`, with its text; the caller adds which
    /// file it was. As for Ignition, input of whitespace only is not empty but invalid JSON.
    #[error("not a config (empty)")]
    Empty,
    /// Not JSON.
    #[error("config is not valid JSON: {message} at line {line} column {column}")]
    Json {
        /// serde_json's message.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// `ignition.version` missing or not a semantic version.
    #[error("error at $.ignition.version: invalid config version (couldn't parse)")]
    InvalidVersion,
    /// A version we do not accept (2.x, 3.7.0+, experimental).
    #[error(
        "error at $.ignition.version: unsupported config version {0:?} (supported: 3.0.0 to 3.6.0)"
    )]
    UnknownVersion(String),
    /// A value of the wrong JSON type.
    #[error("error at {path}: {message}")]
    Type {
        /// JSON path.
        path: String,
        /// What was wrong.
        message: String,
    },
}

impl machineos_diagnostics::Classify for ParseError {
    /// `EmptyConfig` for empty input, `UnsupportedSpecVersion` for a version outside
    /// 3.0.0–3.6.0, else `InvalidConfig`.
    fn reason(&self) -> &'static str {
        match self {
            ParseError::Empty => "EmptyConfig",
            ParseError::UnknownVersion(_) => "UnsupportedSpecVersion",
            ParseError::Json { .. } | ParseError::InvalidVersion | ParseError::Type { .. } => {
                "InvalidConfig"
            }
        }
    }

    /// Always permanent: the bytes must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// Keys that only exist from a given spec version on; in an older config they are
/// unknown keys (warned and dropped), as they are to Ignition's per-version parsers.
/// 3.6.0 has none: its schema is 3.5.0's (`config/v3_6/schema/ignition.json`).
const GATED_KEYS: &[(SpecVersion, &[&str])] = &[
    (SpecVersion::V3_1, &["ignition", "proxy"]),
    (SpecVersion::V3_2, &["storage", "luks"]),
    (SpecVersion::V3_2, &["passwd", "users", "*", "shouldExist"]),
    (SpecVersion::V3_2, &["passwd", "groups", "*", "shouldExist"]),
    (
        SpecVersion::V3_2,
        &["storage", "disks", "*", "partitions", "*", "resize"],
    ),
    (SpecVersion::V3_3, &["kernelArguments"]),
    (SpecVersion::V3_4, &["storage", "luks", "*", "discard"]),
    (SpecVersion::V3_4, &["storage", "luks", "*", "openOptions"]),
    (
        SpecVersion::V3_4,
        &[
            "storage",
            "luks",
            "*",
            "clevis",
            "tang",
            "*",
            "advertisement",
        ],
    ),
    (SpecVersion::V3_5, &["storage", "luks", "*", "cex"]),
];

/// Parse an Ignition config of spec 3.0.0–3.6.0 into the 3.6.0 model, as Ignition does:
/// [`parse_unmasked`], then [`mask_special_bits`] for the declared version.
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    let mut parsed = parse_as_written(bytes)?;
    let masked = mask_special_bits(&mut parsed.config, parsed.version);
    parsed.warnings.extend(masked);
    Ok(parsed)
}

/// Parse an Ignition config of spec 3.0.0–3.6.0 into the 3.6.0 model, keeping every file
/// and directory mode exactly as written: setuid/setgid/sticky bits are not masked out of
/// a config older than 3.6.0. The warnings are [`parse`]'s, the special-bits one included.
///
/// For a renderer that copies modes into its output; what a node applies is
/// [`mask_special_bits`] of this (which is what [`parse`] returns).
pub fn parse_unmasked(bytes: &[u8]) -> Result<Parsed, ParseError> {
    let mut parsed = parse_as_written(bytes)?;
    let found = special_bits(&mut parsed.config, parsed.version, false);
    parsed.warnings.extend(found);
    Ok(parsed)
}

/// Clear setuid/setgid/sticky bits out of every file and directory mode of a config of spec
/// `version` older than 3.6.0, as Ignition's translation to 3.6.0 does (ignition#2024);
/// returns a warning for each mode changed, at its JSON path (Ignition's message: "setuid/
/// setgid/sticky bits are not supported or functional in spec versions older than 3.6.0").
/// From 3.6.0 on the bits are honoured and nothing changes.
///
/// Idempotent: a masked config has nothing more to mask, so calling it on what [`parse`]
/// returned changes nothing and warns of nothing.
pub fn mask_special_bits(config: &mut Config, version: SpecVersion) -> Vec<Warning> {
    special_bits(config, version, true)
}

/// Ignition's `ErrModeSpecialBits`.
const SPECIAL_BITS_WARNING: &str =
    "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0";

/// The modes with special bits in a config older than 3.6.0, each warned of and, when
/// `mask`, cleared of them.
fn special_bits(config: &mut Config, version: SpecVersion, mask: bool) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if version.honours_special_bits() {
        return warnings;
    }
    let mut check = |mode: &mut Option<i64>, path: String| {
        if let Some(m) = mode
            && *m & 0o7000 != 0
        {
            if mask {
                *m &= !0o7000;
            }
            warnings.push(Warning {
                path,
                message: SPECIAL_BITS_WARNING.into(),
            });
        }
    };
    for (i, f) in config.storage.files.iter_mut().enumerate() {
        check(&mut f.mode, format!("$.storage.files.{i}.mode"));
    }
    for (i, d) in config.storage.directories.iter_mut().enumerate() {
        check(&mut d.mode, format!("$.storage.directories.{i}.mode"));
    }
    warnings
}

/// Everything but the masking: version, gated keys, types, unknown keys.
fn parse_as_written(bytes: &[u8]) -> Result<Parsed, ParseError> {
    // Ignition's parsers return `ErrEmpty` for zero bytes only (`len(raw) == 0`); whitespace
    // goes to the JSON decoder, which refuses it.
    if bytes.is_empty() {
        return Err(ParseError::Empty);
    }
    let mut value: Value = serde_json::from_slice(bytes).map_err(|e| ParseError::Json {
        message: strip_position(&e.to_string()),
        line: e.line(),
        column: e.column(),
    })?;
    let version = version_of(&value)?;
    let mut warnings = Vec::new();
    for (since, key) in GATED_KEYS {
        if version < *since {
            remove_gated(&mut value, key, &mut String::from("$"), &mut warnings);
        }
    }
    // One pass for the types (errors with their JSON path) and the unknown keys: a config
    // can hold hundreds of megabytes of data: URLs, and every pass copies them.
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let typed = serde_path_to_error::Deserializer::new(&value, &mut track);
    let config: Result<Config, _> = serde_ignored::deserialize(typed, |p| {
        // serde_ignored marks Option layers with `?` segments; they are not JSON keys.
        let keys: Vec<String> = p
            .to_string()
            .split('.')
            .filter(|s| *s != "?")
            .map(str::to_string)
            .collect();
        unknown.push(keys.join("."));
    });
    let config = config.map_err(|e| ParseError::Type {
        path: format_path(&track.path()),
        message: e.to_string(),
    })?;
    drop(value);
    warnings.extend(unknown.into_iter().map(|p| {
        let key = p.rsplit('.').next().unwrap_or(&p).to_string();
        Warning {
            path: format!("$.{p}"),
            message: format!("Unused key {key}"),
        }
    }));
    // Older specs need no other translation: their JSON is a subset of 3.6.0's with the same
    // meaning (Ignition's translators only re-type fields and set the version, which is kept
    // as declared here). Special mode bits are the one exception: `mask_special_bits`.
    Ok(Parsed {
        config,
        version,
        warnings,
    })
}

fn version_of(value: &Value) -> Result<SpecVersion, ParseError> {
    let Some(v) = value.pointer("/ignition/version").and_then(Value::as_str) else {
        return Err(ParseError::InvalidVersion);
    };
    if !is_semver(v) {
        return Err(ParseError::InvalidVersion);
    }
    SpecVersion::ALL
        .into_iter()
        .find(|s| s.as_str() == v)
        .ok_or_else(|| ParseError::UnknownVersion(v.to_string()))
}

/// `MAJOR.MINOR.PATCH[-pre][+build]` with numeric parts, as go-semver requires.
fn is_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn remove_gated(value: &mut Value, key: &[&str], at: &mut String, warnings: &mut Vec<Warning>) {
    let Some((first, rest)) = key.split_first() else {
        return;
    };
    match (*first, value) {
        ("*", Value::Array(items)) => {
            for (i, item) in items.iter_mut().enumerate() {
                let mut p = format!("{at}.{i}");
                remove_gated(item, rest, &mut p, warnings);
            }
        }
        (name, Value::Object(map)) if rest.is_empty() && map.contains_key(name) => {
            map.shift_remove(name);
            {
                warnings.push(Warning {
                    path: format!("{at}.{name}"),
                    message: format!("Unused key {name}"),
                });
            }
        }
        (name, Value::Object(map)) => {
            if let Some(child) = map.get_mut(name) {
                let mut p = format!("{at}.{name}");
                remove_gated(child, rest, &mut p, warnings);
            }
        }
        _ => {}
    }
}

fn strip_position(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn format_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::from("$");
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!(".{index}")),
            Segment::Map { key } => out.push_str(&format!(".{key}")),
            Segment::Enum { variant } => out.push_str(&format!(".{variant}")),
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for v in SpecVersion::ALL {
            let cfg = format!(r#"{{"ignition":{{"version":"{v}"}}}}"#);
            assert_eq!(parse(cfg.as_bytes()).unwrap().version, v);
        }
        let cases: &[(&str, &str)] = &[
            ("", "not a config (empty)"),
            // Ignition's ErrEmpty is for zero bytes only; whitespace is bad JSON to it too.
            (
                "  \n",
                "config is not valid JSON: EOF while parsing a value at line 2 column 0",
            ),
            (
                "{",
                "config is not valid JSON: EOF while parsing an object at line 1 column 1",
            ),
            (
                "{}",
                "error at $.ignition.version: invalid config version (couldn't parse)",
            ),
            (
                r#"{"ignition":{"version":"3"}}"#,
                "error at $.ignition.version: invalid config version (couldn't parse)",
            ),
            (
                r#"{"ignition":{"version":"2.2.0"}}"#,
                "error at $.ignition.version: unsupported config version \"2.2.0\" (supported: 3.0.0 to 3.6.0)",
            ),
            (
                r#"{"ignition":{"version":"3.9.0"}}"#,
                "error at $.ignition.version: unsupported config version \"3.9.0\" (supported: 3.0.0 to 3.6.0)",
            ),
            (
                r#"{"ignition":{"version":"3.4.0-experimental"}}"#,
                "error at $.ignition.version: unsupported config version \"3.4.0-experimental\" (supported: 3.0.0 to 3.6.0)",
            ),
            // Ignition 2.26.0 no longer accepts 3.6.0-experimental; 3.7.0 is experimental.
            (
                r#"{"ignition":{"version":"3.6.0-experimental"}}"#,
                "error at $.ignition.version: unsupported config version \"3.6.0-experimental\" (supported: 3.0.0 to 3.6.0)",
            ),
            (
                r#"{"ignition":{"version":"3.7.0-experimental"}}"#,
                "error at $.ignition.version: unsupported config version \"3.7.0-experimental\" (supported: 3.0.0 to 3.6.0)",
            ),
            (
                r#"{"ignition":{"version":"3.7.0"}}"#,
                "error at $.ignition.version: unsupported config version \"3.7.0\" (supported: 3.0.0 to 3.6.0)",
            ),
            (
                r#"{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/a","mode":"0644"}]}}"#,
                "error at $.storage.files.0.mode: invalid type: string \"0644\", expected i64",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse(input.as_bytes()).unwrap_err().to_string(),
                *want,
                "{input}"
            );
        }
    }

    #[test]
    fn unknown_and_gated_keys_warn_and_are_dropped() {
        let cfg = r#"{"ignition":{"version":"3.2.0"},"kernelArguments":{"shouldExist":["a"]},
            "storage":{"files":[{"path":"/a","contnets":{"source":"data:,x"}}]}}"#;
        let p = parse(cfg.as_bytes()).unwrap();
        assert!(p.config.kernel_arguments.should_exist.is_empty());
        assert!(p.config.storage.files[0].contents.source.is_none());
        let w: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            w,
            [
                "warning at $.kernelArguments: Unused key kernelArguments",
                "warning at $.storage.files.0.contnets: Unused key contnets"
            ]
        );
    }

    const SPECIAL: &str = "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0";

    /// A file with mode 06755 (3565) and a directory with mode 01777 (1023), at `version`.
    fn special_config(version: SpecVersion) -> String {
        format!(
            r#"{{"ignition":{{"version":"{version}"}},"storage":{{"files":[{{"path":"/a","mode":3565}},{{"path":"/b","mode":420}}],
            "directories":[{{"path":"/d","mode":1023}}]}}}}"#
        )
    }

    fn modes(c: &Config) -> (Vec<Option<i64>>, Vec<Option<i64>>) {
        (
            c.storage.files.iter().map(|f| f.mode).collect(),
            c.storage.directories.iter().map(|d| d.mode).collect(),
        )
    }

    #[test]
    fn special_bits_are_masked_before_3_6() {
        let p = parse(special_config(SpecVersion::V3_5).as_bytes()).unwrap();
        assert_eq!(p.config.storage.files[0].mode, Some(0o755));
        assert_eq!(p.config.storage.directories[0].mode, Some(0o777));
        assert_eq!(
            p.warnings,
            [
                Warning::new("$.storage.files.0.mode", SPECIAL),
                Warning::new("$.storage.directories.0.mode", SPECIAL)
            ]
        );
    }

    #[test]
    fn special_bits_by_version() {
        let written = (vec![Some(0o6755), Some(0o644)], vec![Some(0o1777)]);
        let masked = (vec![Some(0o755), Some(0o644)], vec![Some(0o777)]);
        let warned = vec![
            Warning::new("$.storage.files.0.mode", SPECIAL),
            Warning::new("$.storage.directories.0.mode", SPECIAL),
        ];
        for v in SpecVersion::ALL {
            let honoured = v >= SpecVersion::V3_6;
            assert_eq!(v.honours_special_bits(), honoured, "{v}");
            let cfg = special_config(v);
            // parse: masked with a warning below 3.6.0, kept silently from 3.6.0 on.
            let p = parse(cfg.as_bytes()).unwrap();
            let (want_modes, want_warnings) = if honoured {
                (&written, vec![])
            } else {
                (&masked, warned.clone())
            };
            assert_eq!(modes(&p.config), *want_modes, "{v}");
            assert_eq!(p.warnings, want_warnings, "{v}");
            // parse_unmasked: as written, with the same warnings.
            let mut u = parse_unmasked(cfg.as_bytes()).unwrap();
            assert_eq!(u.version, v);
            assert_eq!(modes(&u.config), written, "{v}");
            assert_eq!(u.warnings, want_warnings, "{v}");
            // mask_special_bits turns the one into the other, and only once.
            assert_eq!(mask_special_bits(&mut u.config, v), want_warnings, "{v}");
            assert_eq!(u.config, p.config, "{v}");
            assert_eq!(mask_special_bits(&mut u.config, v), vec![], "{v}");
            assert_eq!(u.config, p.config, "{v}");
        }
    }

    #[test]
    fn mask_special_bits_by_version() {
        // A config built or merged in memory is masked for whatever version it is meant as.
        let mut c = parse_unmasked(special_config(SpecVersion::V3_6).as_bytes())
            .unwrap()
            .config;
        assert_eq!(mask_special_bits(&mut c, SpecVersion::V3_6), vec![]);
        assert_eq!(c.storage.files[0].mode, Some(0o6755));
        assert_eq!(mask_special_bits(&mut c, SpecVersion::V3_0).len(), 2);
        assert_eq!(
            modes(&c),
            (vec![Some(0o755), Some(0o644)], vec![Some(0o777)])
        );
    }

    #[test]
    fn every_key_of_3_5_is_known_to_3_6() {
        // 3.6.0's schema is 3.5.0's: every gated key is accepted, none is new.
        let cfg = r#"{"ignition":{"version":"3.6.0","proxy":{"httpProxy":"http://p"}},
            "kernelArguments":{"shouldExist":["a"]},
            "passwd":{"users":[{"name":"u","shouldExist":true}],"groups":[{"name":"g","shouldExist":true}]},
            "storage":{"disks":[{"device":"/dev/vda","partitions":[{"number":1,"resize":true}]}],
                "luks":[{"name":"l","device":"/dev/vdb","discard":true,"openOptions":["--x"],"cex":{"enabled":true},
                    "clevis":{"tang":[{"url":"http://t","advertisement":"{}"}]}}]}}"#;
        let p = parse(cfg.as_bytes()).unwrap();
        assert_eq!(p.version, SpecVersion::LATEST);
        assert_eq!(p.warnings, vec![]);
        assert_eq!(p.config.storage.luks[0].cex.enabled, Some(true));
        assert!(
            GATED_KEYS
                .iter()
                .all(|(since, _)| *since < SpecVersion::V3_6)
        );
        // The same keys at 3.0.0 are unknown there, and so warned of and dropped.
        let old = cfg.replacen("3.6.0", "3.0.0", 1);
        let p = parse(old.as_bytes()).unwrap();
        assert_eq!(p.warnings.len(), 6, "{:?}", p.warnings);
        assert!(p.config.storage.luks.is_empty());
    }

    #[test]
    fn null_is_absent() {
        let cfg = r#"{"ignition":{"version":"3.0.0","config":null},"storage":{"files":null},"systemd":{"units":[{"name":"a.service","dropins":null,"enabled":null}]}}"#;
        let p = parse(cfg.as_bytes()).unwrap();
        assert!(p.config.storage.files.is_empty());
        assert_eq!(p.config.systemd.units[0].enabled, None);
    }
}
