//! The MCO's `IgnParseWrapper` (`pkg/controller/common/helpers.go`) for a config that is
//! not spec 3: the version is read as `ign3.ParseCompatibleVersion` reads it, then
//! `ign2.Parse` (`config/v2_2`) decodes and validates it — or, for an older or undecodable
//! config, falls back to `config/v2_1`, `config/v2_0` and `config/v1` in turn, each
//! translating its result up to 2.2.

use machineos_diagnostics::Warning;
use serde_json::Value;

use crate::ParseError;
use crate::decode::{Dec, Decode, TypeError, go_struct};
use crate::older;
use crate::v22;
use crate::validate2::{self, Entry, Kind, Spec};

/// A semantic version as go-semver parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Semver {
    pub major: i64,
    pub minor: i64,
    pub patch: i64,
    pub pre: String,
    pub meta: String,
}

impl Semver {
    /// go-semver's `NewVersion`.
    pub(crate) fn parse(s: &str) -> Option<Semver> {
        let (rest, meta) = s.split_once('+').unwrap_or((s, ""));
        let (core, pre) = rest.split_once('-').unwrap_or((rest, ""));
        let parts: Vec<&str> = core.splitn(3, '.').collect();
        if parts.len() != 3 || !valid_identifier(pre) || !valid_identifier(meta) {
            return None;
        }
        let num = |p: &str| -> Option<i64> {
            // strconv.ParseInt: an optional sign, then decimal digits.
            let digits = p.strip_prefix(['+', '-']).unwrap_or(p);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse::<i64>().ok()
        };
        Some(Semver {
            major: num(parts[0])?,
            minor: num(parts[1])?,
            patch: num(parts[2])?,
            pre: pre.to_string(),
            meta: meta.to_string(),
        })
    }

    /// `Version == {major, minor, 0}` as Go compares the structs.
    fn is(&self, major: i64, minor: i64) -> bool {
        (self.major, self.minor, self.patch) == (major, minor, 0)
            && self.pre.is_empty()
            && self.meta.is_empty()
    }

    /// `LessThan({major, minor, 0})`: a pre-release sorts before its release.
    fn less_than(&self, major: i64, minor: i64) -> bool {
        let own = (self.major, self.minor, self.patch);
        own < (major, minor, 0) || (own == (major, minor, 0) && !self.pre.is_empty())
    }
}

/// `^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$`, or empty.
fn valid_identifier(id: &str) -> bool {
    id.is_empty()
        || id
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

go_struct! {
    /// `util.GetConfigVersion`'s stub.
    VersionStub = "util.versionStub" { ignition: VersionStubIgnition = "ignition" }
}
go_struct! {
    VersionStubIgnition = "struct { Version string }" { version: String = "version" }
}

/// The declared version, as the MCO reads it before choosing a parser.
pub(crate) fn declared_version(v: &Value) -> Result<String, TypeError> {
    let mut d = Dec::new();
    let mut stub = VersionStub::default();
    VersionStub::decode(&mut d, v, "$", &mut stub);
    match d.finish() {
        Some(e) => Err(e),
        None => Ok(stub.ignition.version),
    }
}

/// A spec 2 config, parsed and translated to 2.2.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub config: v22::Config,
    /// The version it declared.
    pub version: String,
    pub warnings: Vec<Warning>,
}

/// `IgnParseWrapper` for anything but a spec 3.0–3.5 config.
pub(crate) fn parse(v: &Value) -> Result<Parsed, ParseError> {
    let version = declared_version(v).map_err(|e| ParseError::NotAConfig {
        path: e.path,
        message: e.message,
    })?;
    let Some(sv) = Semver::parse(&version) else {
        return Err(ParseError::InvalidVersion);
    };
    if (0..=5).any(|minor| sv.is(3, minor)) {
        return Err(ParseError::NotSpec2 { version });
    }
    let unknown = || ParseError::UnknownVersion {
        version: version.clone(),
    };

    // config/v2_2.Parse
    let (cfg, err22) = decode::<v22::Config>(v);
    if err22.is_none() && !sv.less_than(2, 2) {
        if !sv.is(2, 2) {
            return Err(unknown());
        }
        let report = validate2::validate(&cfg, Some(v), Spec::V22);
        return finish(cfg, version, report);
    }

    // config/v2_1.Parse
    let (cfg21, err21) = older::decode_v21(v);
    if err21.is_none() && !sv.less_than(2, 1) {
        if !sv.is(2, 1) {
            return Err(unknown());
        }
        let report = validate2::validate(&cfg21, Some(v), Spec::V21);
        return finish(cfg21, version, report);
    }

    // config/v2_0.Parse
    let err20 = match older::decode_v20(v) {
        Ok((cfg20, v20)) if !v20.less_than(2, 0) => {
            if !v20.is(2, 0) {
                return Err(unknown());
            }
            let (cfg, report) = older::validate_v20(&cfg20, v);
            return finish(cfg, version, report);
        }
        Ok(_) => None,
        Err(e) => Some(e),
    };

    // config/v1.Parse: a config it decodes declares no `ignitionVersion: 1`.
    match older::decode_v1(v) {
        None => Err(unknown()),
        Some(e1) => {
            // util.HandleParseErrors reports the first error decoding the latest types.
            let e = err22.or(err21).or(err20).unwrap_or(e1);
            Err(ParseError::Invalid {
                path: e.path.clone(),
                report: format!("error at {}: {}", e.path, e.message),
            })
        }
    }
}

fn decode<T: Decode>(v: &Value) -> (T, Option<TypeError>) {
    let mut d = Dec::new();
    let mut out = T::default();
    T::decode(&mut d, v, "$", &mut out);
    (out, d.finish())
}

/// A parse's outcome from its validation report.
fn finish(config: v22::Config, version: String, report: Vec<Entry>) -> Result<Parsed, ParseError> {
    if validate2::is_fatal(&report) {
        let path = report
            .iter()
            .find(|e| e.kind == Kind::Error)
            .map_or_else(|| "$".to_string(), |e| e.path.clone());
        let lines: Vec<String> = report
            .iter()
            .map(|e| format!("{} at {}: {}", e.kind.as_str(), e.path, e.message))
            .collect();
        return Err(ParseError::Invalid {
            path,
            report: lines.join("\n"),
        });
    }
    let warnings = report
        .into_iter()
        .map(|e| Warning::new(e.path, e.message))
        .collect();
    Ok(Parsed {
        config,
        version,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_as_go_semver() {
        let v = Semver::parse("2.2.0").unwrap_or_else(|| panic!("2.2.0"));
        assert!(v.is(2, 2) && !v.less_than(2, 2));
        assert!(Semver::parse("02.2.00").is_some_and(|v| v.is(2, 2)));
        assert!(Semver::parse("2.2.0-rc1").is_some_and(|v| v.less_than(2, 2) && !v.is(2, 2)));
        assert!(Semver::parse("2.2.0+x").is_some_and(|v| !v.less_than(2, 2) && !v.is(2, 2)));
        // An empty pre-release is no pre-release.
        assert!(Semver::parse("2.2.0-").is_some_and(|v| v.is(2, 2)));
        for bad in [
            "",
            "2.2",
            "2.2.x",
            "v2.2.0",
            "2.2.0-a..b",
            "2.2.0+a..b",
            "2.2. 0",
        ] {
            assert_eq!(Semver::parse(bad), None, "{bad:?}");
        }
    }
}
