//! Helpers shared by the HTTP test files (`mod common;` in each).

use serde_json::Value;

/// Sends `rb`: the status code and the body as JSON (`null` when it is not JSON).
pub async fn send(rb: reqwest::RequestBuilder) -> (u16, Value) {
    let r = rb.send().await.unwrap();
    let code = r.status().as_u16();
    let b = r.bytes().await.unwrap();
    (code, serde_json::from_slice(&b).unwrap_or(Value::Null))
}
