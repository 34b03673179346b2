//! The HTTP layer of the registry client: how long anything may take, and how much of a
//! response may be read into memory.
//!
//! Every request has a connect timeout and a request timeout (no response, or no progress
//! reading one, for that long), and every operation of a [`crate::Registry`] runs under one
//! total deadline; a registry that accepts connections but never answers fails in seconds,
//! not in retries of five-minute reads. Response bodies are read into memory only through
//! [`read_capped`], with a cap per kind of body ([`MAX_MANIFEST`], [`MAX_TOKEN_RESPONSE`],
//! [`MAX_ERROR_BODY`], a config blob's descriptor size): a hostile registry cannot make a
//! build allocate what it sends.
//!
//! How a caller acts on a [`TransportError`] ([`Classify`]) follows the retry loop: what
//! [`TransportError::is_transient`] retries is transient, and so is the total deadline
//! passing (the work may succeed when run again); everything else is permanent.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use machineos_diagnostics::{Classify, Retry};

/// The largest manifest or index read (what containers/image accepts).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// The largest token-service answer read.
pub const MAX_TOKEN_RESPONSE: u64 = 1 << 20;
/// The most of an error answer read (for its message); the rest is dropped unread.
pub const MAX_ERROR_BODY: u64 = 64 << 10;

/// How long registry work may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing a connection (TCP and TLS).
    pub connect: Duration,
    /// Waiting for a response, or for the next bytes of one.
    pub request: Duration,
    /// All registry operations of one [`crate::Registry`] together (`None`: no limit).
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            request: Duration::from_secs(60),
            total: Some(Duration::from_secs(30 * 60)),
        }
    }
}

/// Why a request failed, below the level of registry operations.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The registry answered with an error status.
    #[error("HTTP {status}{}", detail(code, message))]
    Status {
        /// The status code.
        status: u16,
        /// The first distribution error code of the body (`MANIFEST_UNKNOWN`, …), if any.
        code: Option<String>,
        /// Its message, or the start of a non-JSON body.
        message: String,
    },
    /// Connecting, sending or receiving failed.
    #[error("{}", chain(.0))]
    Http(reqwest::Error),
    /// A local stream (a blob being uploaded) failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// No answer, or no progress, within the request timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// All registry work together took longer than the total deadline.
    #[error("the deadline of {0:?} for all registry operations has passed")]
    Deadline(Duration),
    /// A body larger than what is read into memory for it.
    #[error("the {what} is larger than {limit} bytes, the most read")]
    TooLarge {
        /// What the body is.
        what: &'static str,
        /// The cap.
        limit: u64,
    },
    /// The registry broke the protocol (a missing `Location`, a token answer without a token).
    #[error("{0}")]
    Protocol(String),
}

fn detail(code: &Option<String>, message: &str) -> String {
    match (code, message.trim()) {
        (Some(c), "") => format!(" ({c})"),
        (Some(c), m) => format!(" ({c}: {m})"),
        (None, "") => String::new(),
        (None, m) => format!(": {m}"),
    }
}

/// An error with its causes, `: `-joined (reqwest's own text is "error sending request").
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

impl TransportError {
    /// Whether repeating the request may help: throttling (429), a server error (5xx), a
    /// connection that failed, timed out or was cut. Refusals, missing objects, oversized
    /// bodies and the total deadline are final.
    pub fn is_transient(&self) -> bool {
        match self {
            TransportError::Status { status, code, .. } => {
                *status == 429
                    || *status == 408
                    || *status >= 500
                    || code.as_deref() == Some("TOOMANYREQUESTS")
            }
            // A name the resolver says does not exist is final (retrying cannot help; a
            // resolver that could not answer — EAI_AGAIN — is transient).
            TransportError::Http(_) if self.is_unresolved_name() => false,
            TransportError::Http(e) => {
                e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() || e.is_decode()
            }
            TransportError::Io(_) | TransportError::Timeout(_) => true,
            TransportError::Deadline(_)
            | TransportError::TooLarge { .. }
            | TransportError::Protocol(_) => false,
        }
    }

    /// Whether the registry's host name does not resolve: the resolver answered that the
    /// name is unknown (getaddrinfo's `EAI_NONAME`, "Name or service not known"; musl's and
    /// macOS's wordings too), as opposed to not answering at all.
    pub fn is_unresolved_name(&self) -> bool {
        let TransportError::Http(e) = self else {
            return false;
        };
        if !e.is_connect() {
            return false;
        }
        let text = chain(e);
        text.contains("dns error")
            && [
                "Name or service not known",
                "No address associated with hostname",
                "nodename nor servname provided",
                "Name does not resolve",
            ]
            .iter()
            .any(|w| text.contains(w))
    }

    /// The HTTP status, when the registry answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            TransportError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The distribution error code, when the registry gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            TransportError::Status { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

impl Classify for TransportError {
    /// `RateLimited` (429, `TOOMANYREQUESTS`), `RegistryTimeout` (408, no answer in time),
    /// `RegistryNameUnresolved` (the host name does not exist in DNS: permanent),
    /// `RegistryUnavailable` (5xx, a connection refused, reset or cut), `DeadlineExceeded`,
    /// `AuthRequired` (401), `AuthDenied` (403), `NotFound` (404), `RegistryRejected` (any
    /// other refusal), `ResponseTooLarge`, `UploadSourceIOError` (the local blob being
    /// uploaded), `InvalidRegistryResponse` (a broken protocol, a redirect loop).
    fn reason(&self) -> &'static str {
        match self {
            TransportError::Status { status, code, .. } => {
                match (*status, code.as_deref()) {
                    // In the order `is_transient` decides.
                    (429, _) | (_, Some("TOOMANYREQUESTS")) => "RateLimited",
                    (408, _) => "RegistryTimeout",
                    (500.., _) => "RegistryUnavailable",
                    (401, _) | (_, Some("UNAUTHORIZED")) => "AuthRequired",
                    (403, _) | (_, Some("DENIED")) => "AuthDenied",
                    (404, _) => "NotFound",
                    (400..=499, _) => "RegistryRejected",
                    _ => "InvalidRegistryResponse",
                }
            }
            TransportError::Http(e) if e.is_timeout() => "RegistryTimeout",
            TransportError::Http(_) if self.is_unresolved_name() => "RegistryNameUnresolved",
            TransportError::Http(_) if self.is_transient() => "RegistryUnavailable",
            TransportError::Http(_) => "InvalidRegistryResponse",
            TransportError::Io(_) => "UploadSourceIOError",
            TransportError::Timeout(_) => "RegistryTimeout",
            TransportError::Deadline(_) => "DeadlineExceeded",
            TransportError::TooLarge { .. } => "ResponseTooLarge",
            TransportError::Protocol(_) => "InvalidRegistryResponse",
        }
    }

    /// Transient when [`TransportError::is_transient`] says so, or when the total deadline
    /// passed (nothing is wrong with the request; it ran out of time).
    fn retry(&self) -> Retry {
        if self.is_transient() || matches!(self, TransportError::Deadline(_)) {
            Retry::Transient
        } else {
            Retry::Permanent
        }
    }
}

/// Sends `request`, waiting at most `timeout` for the response head.
pub async fn send(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<reqwest::Response, TransportError> {
    match tokio::time::timeout(timeout, request.send()).await {
        Ok(r) => r.map_err(|e| from_reqwest(e, timeout)),
        Err(_) => Err(TransportError::Timeout(timeout)),
    }
}

/// A reqwest error, its own read timeout (the client's `read_timeout` is `timeout`) named
/// as ours.
pub fn from_reqwest(e: reqwest::Error, timeout: Duration) -> TransportError {
    if e.is_timeout() {
        TransportError::Timeout(timeout)
    } else {
        TransportError::Http(e)
    }
}

/// The body of `response`, at most `limit` bytes (`what` names it in the error), each read
/// waiting at most `timeout`. A `Content-Length` over the limit is refused before reading.
pub async fn read_capped(
    response: reqwest::Response,
    limit: u64,
    what: &'static str,
    timeout: Duration,
) -> Result<Bytes, TransportError> {
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(TransportError::TooLarge { what, limit });
    }
    let mut body = BytesMut::new();
    let mut stream = response.bytes_stream();
    loop {
        let next = tokio::time::timeout(timeout, stream.next())
            .await
            .map_err(|_| TransportError::Timeout(timeout))?;
        match next {
            None => return Ok(body.freeze()),
            Some(chunk) => {
                let chunk = chunk.map_err(|e| from_reqwest(e, timeout))?;
                if body.len() as u64 + chunk.len() as u64 > limit {
                    return Err(TransportError::TooLarge { what, limit });
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

/// The error a non-success `response` stands for: its status, with the distribution error
/// code and message of its body (at most [`MAX_ERROR_BODY`] read).
pub async fn status_error(response: reqwest::Response, timeout: Duration) -> TransportError {
    let status = response.status().as_u16();
    let body = read_capped(response, MAX_ERROR_BODY, "error body", timeout)
        .await
        .unwrap_or_default();
    let (code, message) = parse_error_body(&body);
    TransportError::Status {
        status,
        code,
        message,
    }
}

/// The first `{code, message}` of a distribution error envelope, or the start of the text.
pub fn parse_error_body(body: &[u8]) -> (Option<String>, String) {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: String,
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<Envelope>(body) {
        Ok(e) if !e.errors.is_empty() => {
            let first = &e.errors[0];
            (Some(first.code.clone()), first.message.clone())
        }
        _ => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(200).collect();
            (None, text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_table() {
        let cases: [(&[u8], Option<&str>, &str); 4] = [
            (
                br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#,
                Some("MANIFEST_UNKNOWN"),
                "manifest unknown",
            ),
            (br#"{"errors":[]}"#, None, r#"{"errors":[]}"#),
            (b"  upstream timed out\n", None, "upstream timed out"),
            (b"", None, ""),
        ];
        for (body, code, message) in cases {
            let (c, m) = parse_error_body(body);
            assert_eq!((c.as_deref(), m.as_str()), (code, message));
        }
        let long = vec![b'x'; 10_000];
        assert_eq!(parse_error_body(&long).1.len(), 200);
    }

    #[test]
    fn transient_table() {
        let status = |s: u16, code: Option<&str>| TransportError::Status {
            status: s,
            code: code.map(str::to_string),
            message: String::new(),
        };
        let cases = [
            (status(500, None), true),
            (status(503, None), true),
            (status(429, None), true),
            (status(400, Some("TOOMANYREQUESTS")), true),
            (status(404, None), false),
            (status(401, None), false),
            (status(403, Some("DENIED")), false),
            (TransportError::Io(std::io::Error::other("reset")), true),
            (TransportError::Timeout(Duration::from_secs(1)), true),
            (TransportError::Deadline(Duration::from_secs(1)), false),
            (
                TransportError::TooLarge {
                    what: "manifest",
                    limit: 1,
                },
                false,
            ),
            (TransportError::Protocol("no Location".into()), false),
        ];
        for (e, want) in cases {
            assert_eq!(e.is_transient(), want, "{e}");
        }
        assert_eq!(
            status(404, Some("BLOB_UNKNOWN")).to_string(),
            "HTTP 404 (BLOB_UNKNOWN)"
        );
    }
}
