//! Parsing: bytes → [`Config`], with the spec version checked, older versions translated
//! to the 3.5.0 model, and unknown keys reported as warnings (as Ignition does).

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
}

impl SpecVersion {
    /// Every accepted version, oldest first.
    pub const ALL: [SpecVersion; 6] = [
        Self::V3_0,
        Self::V3_1,
        Self::V3_2,
        Self::V3_3,
        Self::V3_4,
        Self::V3_5,
    ];

    /// The version string, such as `3.5.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V3_0 => "3.0.0",
            Self::V3_1 => "3.1.0",
            Self::V3_2 => "3.2.0",
            Self::V3_3 => "3.3.0",
            Self::V3_4 => "3.4.0",
            Self::V3_5 => "3.5.0",
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
    /// The config, translated to the 3.5.0 model.
    pub config: Config,
    /// The version it declared.
    pub version: SpecVersion,
    /// Unknown keys and other warnings.
    pub warnings: Vec<Warning>,
}

/// Why a config could not be parsed. Messages follow Ignition's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Empty input.
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
    /// A version we do not accept (2.x, 3.6.0+, experimental).
    #[error(
        "error at $.ignition.version: unsupported config version {0:?} (supported: 3.0.0 to 3.5.0)"
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
    /// `UnsupportedSpecVersion` for a version outside 3.0.0–3.5.0, else `InvalidConfig`.
    fn reason(&self) -> &'static str {
        match self {
            ParseError::UnknownVersion(_) => "UnsupportedSpecVersion",
            ParseError::Empty
            | ParseError::Json { .. }
            | ParseError::InvalidVersion
            | ParseError::Type { .. } => "InvalidConfig",
        }
    }

    /// Always permanent: the bytes must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// Keys that only exist from a given spec version on; in an older config they are
/// unknown keys (warned and dropped), as they are to Ignition's per-version parsers.
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

/// Parse an Ignition config of spec 3.0.0–3.5.0 into the 3.5.0 model.
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
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
    let config = translate(config, &mut warnings);
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

/// The semantic changes between older specs and 3.5.0 that Ignition's translators make.
fn translate(mut config: Config, warnings: &mut Vec<Warning>) -> Config {
    // Setuid/setgid/sticky are only honoured from spec 3.6.0 on: current Ignition masks
    // them when translating any older config (ignition#2024). Ignition 2.14 kept some of
    // them for 3.4.0-experimental, which we do not accept.
    let mut mask = |mode: &mut Option<i64>, path: String| {
        if let Some(m) = mode
            && *m & 0o7000 != 0
        {
            *m &= !0o7000;
            warnings.push(Warning {
                path,
                message: "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0"
                    .into(),
            });
        }
    };
    for (i, f) in config.storage.files.iter_mut().enumerate() {
        mask(&mut f.mode, format!("$.storage.files.{i}.mode"));
    }
    for (i, d) in config.storage.directories.iter_mut().enumerate() {
        mask(&mut d.mode, format!("$.storage.directories.{i}.mode"));
    }
    config
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
            ("  \n", "not a config (empty)"),
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
                "error at $.ignition.version: unsupported config version \"2.2.0\" (supported: 3.0.0 to 3.5.0)",
            ),
            (
                r#"{"ignition":{"version":"3.9.0"}}"#,
                "error at $.ignition.version: unsupported config version \"3.9.0\" (supported: 3.0.0 to 3.5.0)",
            ),
            (
                r#"{"ignition":{"version":"3.4.0-experimental"}}"#,
                "error at $.ignition.version: unsupported config version \"3.4.0-experimental\" (supported: 3.0.0 to 3.5.0)",
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

    #[test]
    fn special_bits_are_masked_before_3_6() {
        let cfg = r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","mode":3565}],
            "directories":[{"path":"/d","mode":1023}]}}"#;
        let p = parse(cfg.as_bytes()).unwrap();
        assert_eq!(p.config.storage.files[0].mode, Some(0o755));
        assert_eq!(p.config.storage.directories[0].mode, Some(0o777));
        let message = "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0";
        assert_eq!(
            p.warnings,
            [
                Warning::new("$.storage.files.0.mode", message),
                Warning::new("$.storage.directories.0.mode", message)
            ]
        );
    }

    #[test]
    fn null_is_absent() {
        let cfg = r#"{"ignition":{"version":"3.0.0","config":null},"storage":{"files":null},"systemd":{"units":[{"name":"a.service","dropins":null,"enabled":null}]}}"#;
        let p = parse(cfg.as_bytes()).unwrap();
        assert!(p.config.storage.files.is_empty());
        assert_eq!(p.config.systemd.units[0].enabled, None);
    }
}
