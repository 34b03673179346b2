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
use crate::semver::Semver;
use crate::v22;
use crate::validate2::{self, Entry, Kind, Spec};

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
