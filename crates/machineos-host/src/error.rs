//! Errors of host operations: which tool, which arguments, what it said, and whether a
//! retry may help.

use machineos_diagnostics::{Classify, Retry};

/// A host operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A host tool exited non-zero.
    #[error("{tool} {args} failed ({status}): {stderr}")]
    Tool {
        /// The program.
        tool: String,
        /// Its arguments, space-joined.
        args: String,
        /// Its exit status.
        status: String,
        /// The last lines of its stderr.
        stderr: String,
        /// Whether the failure looks transient (registry or DNS unavailable).
        transient: bool,
    },
    /// A host tool's output could not be read.
    #[error("{tool}: unexpected output at {path}: {message}")]
    Output {
        /// The program.
        tool: String,
        /// The JSON path.
        path: String,
        /// What was wrong.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// No supported tool on this host.
    #[error("neither bootc nor rpm-ostree is available on this host")]
    NoTool,
    /// The host's tool cannot do what was asked, or not in the host's current state.
    #[error("{tool}: cannot {operation}: {reason}")]
    Unsupported {
        /// The program.
        tool: String,
        /// What was asked (`change kernel arguments`, `pull …`).
        operation: String,
        /// Why not.
        reason: String,
    },
}

impl Classify for HostError {
    fn reason(&self) -> &'static str {
        match self {
            HostError::Tool { .. } => "HostToolFailed",
            HostError::Output { .. } => "HostToolOutput",
            HostError::Io { .. } => "HostIO",
            HostError::NoTool => "NoHostTool",
            HostError::Unsupported { .. } => "HostOperationUnsupported",
        }
    }

    fn retry(&self) -> Retry {
        match self {
            HostError::Tool {
                transient: true, ..
            } => Retry::Transient,
            HostError::Io { source, .. } => machineos_diagnostics::io_retry(source),
            _ => Retry::Permanent,
        }
    }
}
