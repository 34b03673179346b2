//! Parsing: bytes → [`Config`], with the spec version checked and unknown keys reported.

use crate::model::Config;

/// A spec version we accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// A non-fatal finding, reported and otherwise ignored (as Ignition does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// JSON path such as `$.storage.files.0.contnets`.
    pub path: String,
    /// What Ignition would say.
    pub message: String,
}

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

/// Why a config could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Placeholder until implemented.
    #[error("not implemented")]
    Todo,
}

/// Parse an Ignition config.
pub fn parse(_bytes: &[u8]) -> Result<Parsed, ParseError> {
    Err(ParseError::Todo)
}
