//! Decoding of the protobuf request bodies kubectl's typed clients send
//! (`application/vnd.kubernetes.protobuf`, e.g. `kubectl create configmap|secret|namespace`)
//! into the JSON objects the store takes. Responses are always JSON (the clients accept it).
//!
//! Contract: the body is the `k8s\0` magic plus a `runtime.Unknown` envelope (`typeMeta`,
//! `raw`); `raw` is decoded for ConfigMap, Secret and Namespace with the ObjectMeta fields
//! `name`, `generateName`, `namespace`, `resourceVersion`, `labels`, `annotations`,
//! `finalizers`, and for policy/v1 and v1beta1 `Eviction` (what `kubectl drain` posts)
//! with its `deleteOptions` (`gracePeriodSeconds`, `preconditions`, `orphanDependents`,
//! `propagationPolicy`, `dryRun`). Any other kind is a 415 `UnsupportedMediaType` saying
//! so (simplification: a real server decodes protobuf for every built-in kind; client-go
//! 1.32 does not fall back to JSON on a 415, so e.g. `kubectl create job` fails against
//! this server — found with `-v=8`); a malformed body is a 400. String fields are decoded
//! as sent, `""` included (client-go's generated marshalling writes every string field);
//! the store drops an empty `generateName` and folds a Secret's `stringData`
//! ([`crate::builtin`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("unable to decode protobuf body: {what}"))
}

fn unsupported(kind: &str) -> ApiError {
    ApiError::UnsupportedMediaType {
        message: format!(
            "kubetest decodes protobuf bodies only for ConfigMap, Secret, Namespace and Eviction, not {kind:?}; send application/json"
        ),
    }
}

/// `metav1.DeleteOptions` (generated.proto: 1 gracePeriodSeconds, 2 preconditions
/// {1 uid, 2 resourceVersion}, 3 orphanDependents, 4 propagationPolicy, 5 dryRun).
fn delete_options(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    let mut dry = Vec::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => _ = m.insert("gracePeriodSeconds".into(), json!(v as i64)),
            (2, Field::Bytes(s)) => {
                let mut p = Map::new();
                for (n, f) in fields(s)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => _ = p.insert("uid".into(), json!(string(x)?)),
                        (2, Field::Bytes(x)) => {
                            _ = p.insert("resourceVersion".into(), json!(string(x)?))
                        }
                        _ => {}
                    }
                }
                m.insert("preconditions".into(), Value::Object(p));
            }
            (3, Field::Varint(v)) => _ = m.insert("orphanDependents".into(), json!(v != 0)),
            (4, Field::Bytes(s)) => _ = m.insert("propagationPolicy".into(), json!(string(s)?)),
            (5, Field::Bytes(s)) => dry.push(json!(string(s)?)),
            _ => {}
        }
    }
    if !dry.is_empty() {
        m.insert("dryRun".into(), Value::Array(dry));
    }
    Ok(Value::Object(m))
}

/// One field: number and value (varint or bytes).
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

fn varint(b: &[u8], i: &mut usize) -> Result<u64, ApiError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i).ok_or_else(|| bad("truncated varint"))?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(bad("varint too long"))
}

fn fields(b: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ApiError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let tag = varint(b, &mut i)?;
        let f = match tag & 7 {
            0 => Field::Varint(varint(b, &mut i)?),
            2 => {
                let n = usize::try_from(varint(b, &mut i)?).map_err(|_| bad("length"))?;
                let end = i.checked_add(n).filter(|e| *e <= b.len());
                let end = end.ok_or_else(|| bad("truncated field"))?;
                let s = &b[i..end];
                i = end;
                Field::Bytes(s)
            }
            1 => {
                i += 8;
                Field::Other
            }
            5 => {
                i += 4;
                Field::Other
            }
            _ => return Err(bad("unknown wire type")),
        };
        out.push((tag >> 3, f));
    }
    if i > b.len() {
        return Err(bad("truncated field"));
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("invalid UTF-8"))
}

/// A `map<string, V>` entry's key and value bytes.
fn entry(b: &[u8]) -> Result<(String, &[u8]), ApiError> {
    let mut k = String::new();
    let mut v: &[u8] = &[];
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(s)) => k = string(s)?,
            (2, Field::Bytes(s)) => v = s,
            _ => {}
        }
    }
    Ok((k, v))
}

fn insert_entry(m: &mut Value, b: &[u8], as_base64: bool) -> Result<(), ApiError> {
    let (k, v) = entry(b)?;
    let v = if as_base64 {
        json!(STANDARD.encode(v))
    } else {
        json!(string(v)?)
    };
    if !m.is_object() {
        *m = json!({});
    }
    if let Some(o) = m.as_object_mut() {
        o.insert(k, v);
    }
    Ok(())
}

fn object_meta(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Value::Null, Value::Null, Vec::new());
    for (n, f) in fields(b)? {
        let Field::Bytes(s) = f else { continue };
        match n {
            1 => _ = m.insert("name".into(), json!(string(s)?)),
            2 => _ = m.insert("generateName".into(), json!(string(s)?)),
            3 => _ = m.insert("namespace".into(), json!(string(s)?)),
            6 => _ = m.insert("resourceVersion".into(), json!(string(s)?)),
            11 => insert_entry(&mut labels, s, false)?,
            12 => insert_entry(&mut annotations, s, false)?,
            14 => finalizers.push(json!(string(s)?)),
            _ => {}
        }
    }
    if !labels.is_null() {
        m.insert("labels".into(), labels);
    }
    if !annotations.is_null() {
        m.insert("annotations".into(), annotations);
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(m))
}

/// Decodes a protobuf request body into JSON.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| bad("missing k8s magic"))?;
    let (mut api_version, mut kind, mut raw): (String, String, &[u8]) =
        (String::new(), String::new(), &[]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(s)) => api_version = string(s)?,
                        (2, Field::Bytes(s)) => kind = string(s)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(s)) => raw = s,
            _ => {}
        }
    }
    let mut obj = json!({"apiVersion": api_version, "kind": kind});
    let (mut data, mut binary, mut string_data) = (Value::Null, Value::Null, Value::Null);
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, f) {
            (_, 1, Field::Bytes(s)) => obj["metadata"] = object_meta(s)?,
            ("ConfigMap", 2, Field::Bytes(s)) => insert_entry(&mut data, s, false)?,
            ("ConfigMap", 3, Field::Bytes(s)) => insert_entry(&mut binary, s, true)?,
            ("ConfigMap", 4, Field::Varint(v)) => obj["immutable"] = json!(v != 0),
            ("Secret", 2, Field::Bytes(s)) => insert_entry(&mut data, s, true)?,
            ("Secret", 3, Field::Bytes(s)) => obj["type"] = json!(string(s)?),
            ("Secret", 4, Field::Bytes(s)) => insert_entry(&mut string_data, s, false)?,
            ("Secret", 5, Field::Varint(v)) => obj["immutable"] = json!(v != 0),
            ("Namespace", 2, Field::Bytes(s)) => {
                let mut fins = Vec::new();
                for (n, f) in fields(s)? {
                    if let (1, Field::Bytes(x)) = (n, f) {
                        fins.push(json!(string(x)?));
                    }
                }
                obj["spec"] = json!({"finalizers": fins});
            }
            ("Eviction", 2, Field::Bytes(s)) => obj["deleteOptions"] = delete_options(s)?,
            ("ConfigMap" | "Secret" | "Namespace" | "Eviction", _, _) => {}
            _ => return Err(unsupported(&kind)),
        }
    }
    if !matches!(
        kind.as_str(),
        "ConfigMap" | "Secret" | "Namespace" | "Eviction"
    ) {
        return Err(unsupported(&kind));
    }
    for (k, v) in [
        ("data", data),
        ("binaryData", binary),
        ("stringData", string_data),
    ] {
        if !v.is_null() {
            obj[k] = v;
        }
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(n: u8, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, u8::try_from(b.len()).unwrap()];
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_a_configmap() {
        let tm = [ld(1, b"v1"), ld(2, b"ConfigMap")].concat();
        let meta = [
            ld(1, b"x"),
            ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
        ]
        .concat();
        let raw = [ld(1, &meta), ld(2, &[ld(1, b"a"), ld(2, b"b")].concat())].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "labels": {"app": "web"}}, "data": {"a": "b"}})
        );
        assert!(decode(b"{}").is_err());
    }

    #[test]
    fn decodes_an_eviction_and_refuses_other_kinds() {
        let tm = [ld(1, b"policy/v1"), ld(2, b"Eviction")].concat();
        let meta = [ld(1, b"p"), ld(3, b"ns")].concat();
        let opts = [vec![0x08, 30], ld(4, b"Foreground"), ld(5, b"All")].concat();
        let raw = [ld(1, &meta), ld(2, &opts)].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p", "namespace": "ns"},
                "deleteOptions": {"gracePeriodSeconds": 30, "propagationPolicy": "Foreground", "dryRun": ["All"]}})
        );
        let tm = [ld(1, b"batch/v1"), ld(2, b"Job")].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &[])].concat();
        assert_eq!(decode(&body).unwrap_err().code(), 415);
    }
}
