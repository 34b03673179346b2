//! `ignition.config.merge` / `replace`: fetch `data:` child configs and combine them as
//! Ignition's config fetcher does, before anything is applied.

use machineos_diagnostics::{Classify, Retry};

use crate::merge::merge;
use crate::model::{Config, Resource};
use crate::parse::{ParseError, Warning, parse};
use crate::resource::{FetchError, fetch};
use crate::validate::{ValidationError, validate};

/// Why a child config could not be used; names the JSON path of the reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildError {
    /// The child could not be fetched.
    #[error("error at {path}: fetching child config: {error}")]
    Fetch {
        /// The reference's JSON path.
        path: String,
        /// The cause (part of the message, not the `source()`).
        error: FetchError,
    },
    /// The child is not a config.
    #[error("error at {path}: parsing child config: {error}")]
    Parse {
        /// The reference's JSON path.
        path: String,
        /// The cause (part of the message, not the `source()`).
        error: ParseError,
    },
    /// The child is invalid.
    #[error("error at {path}: child config is not valid: {error}")]
    Invalid {
        /// The reference's JSON path.
        path: String,
        /// The cause (part of the message, not the `source()`).
        error: ValidationError,
    },
    /// Children nest deeper than we follow.
    #[error("error at {0}: child configs nest more than 10 levels deep")]
    TooDeep(String),
}

impl Classify for ChildError {
    /// The cause's reason (`UnsupportedSource`, `InvalidDataUrl`, `InvalidConfig`,
    /// `UnsupportedSpecVersion`, …), or `ChildConfigsTooDeep`.
    fn reason(&self) -> &'static str {
        match self {
            ChildError::Fetch { error, .. } => error.reason(),
            ChildError::Parse { error, .. } => error.reason(),
            ChildError::Invalid { error, .. } => error.reason(),
            ChildError::TooDeep(_) => "ChildConfigsTooDeep",
        }
    }

    /// The cause's (always permanent: children are `data:` URLs).
    fn retry(&self) -> Retry {
        match self {
            ChildError::Fetch { error, .. } => error.retry(),
            ChildError::Parse { error, .. } => error.retry(),
            ChildError::Invalid { error, .. } => error.retry(),
            ChildError::TooDeep(_) => Retry::Permanent,
        }
    }
}

/// The largest child config read (decompressed): a config is JSON held in memory whole.
pub const MAX_CHILD_CONFIG: u64 = 64 << 20;

/// Replace or merge the child configs a config references, recursively.
pub fn resolve(config: Config) -> Result<(Config, Vec<Warning>), ChildError> {
    let mut warnings = Vec::new();
    let out = resolve_at(config, "$", 0, &mut warnings)?;
    Ok((out, warnings))
}

fn resolve_at(
    config: Config,
    at: &str,
    depth: usize,
    warnings: &mut Vec<Warning>,
) -> Result<Config, ChildError> {
    if depth > 10 {
        return Err(ChildError::TooDeep(at.to_string()));
    }
    let replace = &config.ignition.config.replace;
    if replace.source.is_some() {
        let path = format!("{at}.ignition.config.replace");
        let child = load(replace, &path, warnings)?;
        return resolve_at(child, &path, depth + 1, warnings);
    }
    let mut out = config.clone();
    for (i, res) in config.ignition.config.merge.iter().enumerate() {
        let path = format!("{at}.ignition.config.merge.{i}");
        let child = load(res, &path, warnings)?;
        let child = resolve_at(child, &path, depth + 1, warnings)?;
        out = merge(&out, &child);
    }
    Ok(out)
}

fn load(res: &Resource, path: &str, warnings: &mut Vec<Warning>) -> Result<Config, ChildError> {
    let bytes = fetch(res, MAX_CHILD_CONFIG)
        .map_err(|error| ChildError::Fetch {
            path: path.to_string(),
            error,
        })?
        .unwrap_or_default();
    let parsed = parse(&bytes).map_err(|error| ChildError::Parse {
        path: path.to_string(),
        error,
    })?;
    let w = validate(&parsed.config).map_err(|error| ChildError::Invalid {
        path: path.to_string(),
        error,
    })?;
    let prefix = |mut w: Warning| {
        w.path = format!("{path}:{}", w.path);
        w
    };
    warnings.extend(parsed.warnings.into_iter().chain(w).map(prefix));
    Ok(parsed.config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(json: &str) -> String {
        use base64::Engine;
        format!(
            "data:;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(json)
        )
    }

    #[test]
    fn merge_and_replace() {
        let child = url(
            r#"{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/a","mode":384},{"path":"/c"}]}}"#,
        );
        let cfg = format!(
            r#"{{"ignition":{{"version":"3.3.0","config":{{"merge":[{{"source":"{child}"}}]}}}},"storage":{{"files":[{{"path":"/a"}},{{"path":"/b"}}]}}}}"#
        );
        let (out, _) = resolve(parse(cfg.as_bytes()).unwrap().config).unwrap();
        let paths: Vec<_> = out
            .storage
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.mode))
            .collect();
        assert_eq!(paths, [("/a", Some(384)), ("/b", None), ("/c", None)]);

        let cfg = format!(
            r#"{{"ignition":{{"version":"3.3.0","config":{{"replace":{{"source":"{child}"}}}}}},"storage":{{"files":[{{"path":"/b"}}]}}}}"#
        );
        let (out, _) = resolve(parse(cfg.as_bytes()).unwrap().config).unwrap();
        assert_eq!(out.storage.files.len(), 2);
        assert_eq!(out.storage.files[0].path, "/a");

        let cfg =
            r#"{"ignition":{"version":"3.3.0","config":{"merge":[{"source":"data:,notjson"}]}}}"#;
        let e = resolve(parse(cfg.as_bytes()).unwrap().config).unwrap_err();
        assert!(
            matches!(&e, ChildError::Parse { path, error: ParseError::Json { .. } }
                if path == "$.ignition.config.merge.0"),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(
            e.starts_with(
                "error at $.ignition.config.merge.0: parsing child config: config is not valid JSON"
            ),
            "{e}"
        );
        let cfg = r#"{"ignition":{"version":"3.3.0","config":{"merge":[{"source":"https://example.com/c.ign"}]}}}"#;
        assert_eq!(
            resolve(parse(cfg.as_bytes()).unwrap().config),
            Err(ChildError::Fetch {
                path: "$.ignition.config.merge.0".into(),
                error: FetchError::Remote("https:… (only data: URLs can be used)".into())
            })
        );
    }
}
