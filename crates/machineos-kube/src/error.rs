//! [`KubeError`]: one failed API call — which operation on which object, and the API
//! server's (or the transport's) answer — classified for the retry policy of its caller.
//!
//! Classes: 409 `Conflict`, 404 `NotFound`, 429 `Throttled`, 5xx `ApiServerError` and
//! transport failures (`ApiError`) are transient; 400 and 422 `Invalid` and 403 `Forbidden`
//! are permanent (the request or the permissions must change first).
//!
//! [`client_config`]: the client the controller and the agent talk through retries nothing
//! by itself. kube-rs's default (`Config::default_retry`: 429/503/504 retried 15 times,
//! backing off to 1 000 s, honouring any `Retry-After`) runs *inside* one request, so a
//! throttled write held a whole controller pass — every pool and MachineImage — for minutes.
//! Without it a throttled call fails at once as `Throttled` (transient), and its caller
//! requeues that one piece of work, waiting what the server asked ([`KubeError::retry_after`],
//! bounded by the caller).

use std::time::Duration;

use machineos_diagnostics::{Classify, Retry};

/// `config` as machineos's components use it: no automatic retry of 429/503/504 inside a
/// request (each caller requeues its own work; an eviction's 429 is a PodDisruptionBudget's
/// answer, which the agent's drain reports and retries itself).
pub fn client_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

/// An API call that failed.
#[derive(Debug, thiserror::Error)]
#[error("{op} {object}: {error}")]
pub struct KubeError {
    /// What was being done (`get`, `patch status`, …).
    pub op: &'static str,
    /// The object (`Kind/name`, `Kind name`, …).
    pub object: String,
    /// The client's error.
    pub error: Box<kube::Error>,
}

impl KubeError {
    /// The HTTP status the API server answered, if it answered.
    pub fn code(&self) -> Option<u16> {
        code(&self.error)
    }

    /// The wait the API server asked for before trying again: a 429's (or 503's)
    /// `details.retryAfterSeconds`, as kube-apiserver's `TooManyRequests` status carries it
    /// beside the `Retry-After` header. `None` when it asked for none.
    pub fn retry_after(&self) -> Option<Duration> {
        match &*self.error {
            kube::Error::Api(s) => s
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|&secs| secs > 0)
                .map(|secs| Duration::from_secs(u64::from(secs))),
            _ => None,
        }
    }
}

/// The HTTP status of a client error, if the API server answered.
pub fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// A `map_err` for a call doing `op` on `object`.
pub fn api_err(op: &'static str, object: String) -> impl FnOnce(kube::Error) -> KubeError {
    move |error| KubeError {
        op,
        object,
        error: Box::new(error),
    }
}

impl Classify for KubeError {
    fn reason(&self) -> &'static str {
        match self.code() {
            Some(409) => "Conflict",
            Some(404) => "NotFound",
            Some(400 | 422) => "Invalid",
            Some(403) => "Forbidden",
            Some(429) => "Throttled",
            Some(c) if c >= 500 => "ApiServerError",
            _ => "ApiError",
        }
    }

    fn retry(&self) -> Retry {
        match self.code() {
            Some(400 | 403 | 422) => Retry::Permanent,
            _ => Retry::Transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_diagnostics::check_classified;

    fn api(code: u16) -> KubeError {
        api_err("patch", "Node/n1".into())(kube::Error::Api(
            kube::core::Status::failure("boom", "Reason")
                .with_code(code)
                .boxed(),
        ))
    }

    #[test]
    fn api_errors_are_classified_by_status() {
        let cases = [
            (409, "Conflict", Retry::Transient),
            (404, "NotFound", Retry::Transient),
            (400, "Invalid", Retry::Permanent),
            (422, "Invalid", Retry::Permanent),
            (403, "Forbidden", Retry::Permanent),
            (429, "Throttled", Retry::Transient),
            (500, "ApiServerError", Retry::Transient),
            (503, "ApiServerError", Retry::Transient),
            (418, "ApiError", Retry::Transient),
        ];
        for (c, reason, retry) in cases {
            let e = api(c);
            assert_eq!(e.code(), Some(c));
            check_classified(&e, reason, retry).unwrap();
            assert!(e.to_string().starts_with("patch Node/n1: "), "{e}");
        }
    }

    #[test]
    fn a_throttled_answer_says_how_long_to_wait() {
        let mut status = kube::core::Status::failure("slow down", "TooManyRequests").with_code(429);
        assert_eq!(api(429).retry_after(), None);
        status.details = Some(kube::core::response::StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 7,
        });
        let e = api_err("patch", "Node/n1".into())(kube::Error::Api(status.boxed()));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
    }

    #[test]
    fn the_client_retries_nothing_by_itself() {
        let cfg = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        assert!(cfg.default_retry, "kube-rs's default, which this turns off");
        assert!(!client_config(cfg).default_retry);
    }
}
