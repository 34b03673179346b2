//! The agent's errors: which object or host operation failed, and whether retrying helps
//! ([`Classify`]). The executor logs them and retries with backoff; none ends the agent.

use machineos_diagnostics::{Classify, Retry};
use machineos_host::HostError;
use machineos_kube::KubeError;

/// Why one of the agent's operations failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The API server refused or failed (the object is `Kind/name` or
    /// `Kind/namespace/name`).
    #[error("{0}")]
    Api(KubeError),
    /// A host operation failed.
    #[error("host {op}: {error}")]
    Host {
        /// Which operation (`pull IMAGE`, `deploy IMAGE`, …).
        op: String,
        /// The error.
        error: HostError,
    },
    /// A blocking host task did not finish (it panicked or was cancelled).
    #[error("host {op}: the blocking task failed: {message}")]
    Task {
        /// Which operation.
        op: String,
        /// The join error.
        message: String,
    },
    /// An object the agent needs is missing or unusable (the node, a pull Secret).
    #[error("{object}: {message}")]
    Missing {
        /// The object.
        object: String,
        /// What is wrong.
        message: String,
    },
}

impl AgentError {
    /// The HTTP status of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            AgentError::Api(e) => e.code(),
            _ => None,
        }
    }
}

impl From<KubeError> for AgentError {
    fn from(e: KubeError) -> AgentError {
        AgentError::Api(e)
    }
}

impl Classify for AgentError {
    fn reason(&self) -> &'static str {
        match self {
            AgentError::Api(e) => e.reason(),
            AgentError::Host { error, .. } => error.reason(),
            AgentError::Task { .. } => "HostTaskFailed",
            AgentError::Missing { .. } => "MissingInput",
        }
    }

    fn retry(&self) -> Retry {
        match self {
            AgentError::Api(e) => e.retry(),
            AgentError::Host { error, .. } => error.retry(),
            AgentError::Task { .. } => Retry::Transient,
            // A Secret or node may appear (the controller creates them).
            AgentError::Missing { .. } => Retry::Transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_diagnostics::check_classified;

    fn api(code: u16) -> AgentError {
        AgentError::Api(machineos_kube::api_err("patch", "Node/n1".into())(
            kube::Error::Api(
                kube::core::Status::failure("boom", "Reason")
                    .with_code(code)
                    .boxed(),
            ),
        ))
    }

    #[test]
    fn errors_are_classified() {
        let cases: Vec<(AgentError, &str, Retry)> = vec![
            (api(409), "Conflict", Retry::Transient),
            (api(404), "NotFound", Retry::Transient),
            (api(422), "Invalid", Retry::Permanent),
            (api(403), "Forbidden", Retry::Permanent),
            (api(503), "ApiServerError", Retry::Transient),
            (
                AgentError::Host {
                    op: "pull r@sha256:aa".into(),
                    error: HostError::Tool {
                        tool: "bootc".into(),
                        args: "switch".into(),
                        status: "exit status: 1".into(),
                        stderr: "dns".into(),
                        transient: true,
                    },
                },
                "HostToolFailed",
                Retry::Transient,
            ),
            (
                AgentError::Host {
                    op: "status".into(),
                    error: HostError::NoTool,
                },
                "NoHostTool",
                Retry::Permanent,
            ),
            (
                AgentError::Task {
                    op: "deploy".into(),
                    message: "panicked".into(),
                },
                "HostTaskFailed",
                Retry::Transient,
            ),
            (
                AgentError::Missing {
                    object: "Secret/machineos/pull".into(),
                    message: "not found".into(),
                },
                "MissingInput",
                Retry::Transient,
            ),
        ];
        for (e, reason, retry) in &cases {
            check_classified(e, reason, *retry).unwrap();
        }
    }
}
