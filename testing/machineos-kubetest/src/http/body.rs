//! Response bodies (whole JSON, `Status` errors, streams), query-string decoding and the
//! request-body limit.
//!
//! Contract: every response carries `Content-Type: application/json`; an [`ApiError`]
//! becomes its `Status` with the error's HTTP code; a request body over
//! [`MAX_BODY_BYTES`] is a 413 `RequestEntityTooLarge`, as kube-apiserver's 3 MiB limit.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::error::ApiError;

/// The largest request body accepted (kube-apiserver's 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The body of every response.
pub type RespBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A JSON response with `code`.
pub fn json_response(code: u16, v: &Value) -> Response<RespBody> {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The `Status` response of `e`.
pub fn error_response(e: &ApiError) -> Response<RespBody> {
    json_response(e.code(), &e.to_status())
}

/// A `Status` failure with any code and reason (those [`ApiError`] has no variant for).
pub fn status_response(code: u16, reason: &str, message: &str) -> Response<RespBody> {
    json_response(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}),
    )
}

/// Reads a request body up to [`MAX_BODY_BYTES`].
pub async fn read_body(body: Incoming) -> Result<Bytes, Response<RespBody>> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(status_response(
                413,
                "RequestEntityTooLarge",
                "the request body is too large",
            ))
        }
        Err(e) => Err(status_response(400, "BadRequest", &e.to_string())),
    }
}

/// Parses a JSON request body as kube-apiserver's decoder reports failures (400).
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the body of the request is empty"));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

/// Parses a YAML request body (`application/yaml`) into JSON, as kube-apiserver's YAML
/// serializer does (`yaml.YAMLToJSON`), failures a 400 in its words.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the body of the request is empty"));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "error converting YAML to JSON: yaml: invalid UTF-8: {e}"
        ))
    })?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: yaml: {e}")))
}

/// Decodes a query string into its (key, value) pairs (`+` is a space, `%XX` a byte).
pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A streaming body fed by a channel: each message is one chunk; the body ends when the
/// sender is dropped.
#[derive(Debug)]
pub struct ChannelBody(pub tokio::sync::mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        assert_eq!(
            parse_query(Some("labelSelector=app%3Dweb%2Cx+in+(a)&watch=1&x")),
            vec![
                ("labelSelector".into(), "app=web,x in (a)".into()),
                ("watch".into(), "1".into()),
                ("x".into(), String::new())
            ]
        );
        assert_eq!(decode("%"), "%");
        assert_eq!(decode("a%2"), "a%2");
        assert_eq!(decode("%zz"), "%zz");
    }

    #[test]
    fn yaml_bodies() {
        assert_eq!(
            parse_yaml(b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: \"1\"\n").unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}})
        );
        let e = parse_yaml(b"a: b: c\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("error converting YAML to JSON: yaml: "),
            "{e}"
        );
        assert_eq!(e.code(), 400);
        assert!(parse_yaml(b"  ").is_err());
    }
}
