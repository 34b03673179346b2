//! Why a stream source could not be read or could not answer: every variant names the source
//! (a file, `ConfigMap ns/name`, `OSImageStream cluster`) and, where it is about a value, its
//! JSON path. All are permanent: the source or the request must change.

use machineos_diagnostics::{Classify, Retry};

/// Why a stream source could not be read, or a stream or architecture not chosen from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// Not JSON/YAML, or not of the shape its kind requires.
    #[error("{source_name}: {format}: at {path}: {message}")]
    Malformed {
        /// The file or object.
        source_name: String,
        /// What it was read as (`CoreOS stream metadata`, `OSImageStream`, `ConfigMap`, or
        /// `JSON`/`YAML` for a syntax error).
        format: &'static str,
        /// JSON path of the problem (`$` for the whole document).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// The document is none of the kinds this crate reads.
    #[error(
        "{source_name}: not a stream source: expected CoreOS stream metadata (`architectures`), an OSImageStream (`kind: OSImageStream`, `status.availableStreams`) or the machine-config-osimageurl ConfigMap (`data.baseOSContainerImage`); found {found}"
    )]
    UnknownFormat {
        /// The file or object.
        source_name: String,
        /// What was found instead (`kind Secret`, `keys [a, b]`, `a JSON array`).
        found: String,
    },
    /// The source holds no stream yet (an OSImageStream the MCO has not reconciled).
    #[error("{source_name}: no stream: {message}")]
    Empty {
        /// The file or object.
        source_name: String,
        /// Why (which field is empty).
        message: String,
    },
    /// No stream of the requested name.
    #[error("{source_name}: no stream {wanted:?}; available: {}", available.join(", "))]
    UnknownStream {
        /// The file or object.
        source_name: String,
        /// The requested name.
        wanted: String,
        /// The names the source has.
        available: Vec<String>,
    },
    /// No stream was named and the source has several without a default.
    #[error("{source_name}: several streams and no default stream: name one of {}", available.join(", "))]
    NoDefaultStream {
        /// The file or object.
        source_name: String,
        /// The names the source has.
        available: Vec<String>,
    },
    /// The stream has no entry for the architecture.
    #[error("{source_name}: stream {stream:?} has no architecture {arch}; it offers {}", offered.join(", "))]
    MissingArchitecture {
        /// The file or object.
        source_name: String,
        /// The stream.
        stream: String,
        /// The architecture asked for, both spellings.
        arch: String,
        /// The architectures the stream has, both spellings.
        offered: Vec<String>,
    },
    /// The stream has the architecture but names no OS container image for it.
    #[error(
        "{source_name}: stream {stream:?}, architecture {arch}: no OS container image: {looked_for}"
    )]
    NoOsImage {
        /// The file or object.
        source_name: String,
        /// The stream.
        stream: String,
        /// The architecture, both spellings.
        arch: String,
        /// Which keys were looked for, and what was found instead.
        looked_for: String,
    },
}

impl Classify for StreamError {
    fn reason(&self) -> &'static str {
        match self {
            StreamError::Malformed { .. } => "InvalidOSStream",
            StreamError::UnknownFormat { .. } => "UnknownOSStreamFormat",
            StreamError::Empty { .. } => "EmptyOSStream",
            StreamError::UnknownStream { .. } => "OSStreamNotFound",
            StreamError::NoDefaultStream { .. } => "NoDefaultOSStream",
            StreamError::MissingArchitecture { .. } => "ArchitectureNotInOSStream",
            StreamError::NoOsImage { .. } => "NoOSImageInStream",
        }
    }

    /// Always permanent: the source (or the stream or architecture asked for) must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// `serde_path_to_error`'s path as `$`, `$.a.b[0]`, after `prefix` (`$` or an outer path).
pub(crate) fn json_path(prefix: &str, path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." {
        prefix.to_owned()
    } else {
        format!("{prefix}.{p}")
    }
}

/// Deserialize `T` from `value`, a failure as [`StreamError::Malformed`] with its JSON path.
pub(crate) fn typed<'de, T: serde::Deserialize<'de>>(
    source_name: &str,
    format: &'static str,
    prefix: &str,
    value: &'de serde_json::Value,
) -> Result<T, StreamError> {
    serde_path_to_error::deserialize(value).map_err(|e| StreamError::Malformed {
        source_name: source_name.to_owned(),
        format,
        path: json_path(prefix, e.path()),
        message: e.into_inner().to_string(),
    })
}
