//! [`KubeError`]: one failed API call — which operation on which object, and the API
//! server's (or the transport's) answer — classified for the retry policy of its caller.
//!
//! Classes: 409 `Conflict`, 404 `NotFound`, 429 `Throttled`, 5xx `ApiServerError` and
//! transport failures (`ApiError`) are transient; 400 and 422 `Invalid` and 403 `Forbidden`
//! are permanent (the request or the permissions must change first).

use machineos_diagnostics::{Classify, Retry};

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
}
