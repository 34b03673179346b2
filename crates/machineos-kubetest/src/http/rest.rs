//! Routing and the REST verbs: discovery paths, then
//! `/api/v1[/namespaces/{ns}]/{resource}[/{name}[/status]]` and
//! `/apis/{group}/{version}[/namespaces/{ns}]/{resource}[/{name}[/status]]`.
//!
//! Contract:
//! * GET of a collection lists (`labelSelector`, `fieldSelector`, `limit`, `continue`,
//!   `resourceVersion`, `resourceVersionMatch`), or watches with `watch=true|1`
//!   ([`super::watch`]); a namespaced resource without a namespace lists all namespaces.
//! * POST creates (201), PUT updates, PATCH takes merge, JSON and strategic merge
//!   patches and server-side apply (`fieldManager`, `force`; 201 when it creates) by
//!   `Content-Type` (415 otherwise); writes record their field manager in
//!   `managedFields` ([`crate::store_apply`]), DELETE takes a `DeleteOptions` body or
//!   `propagationPolicy`/`dryRun` query parameters and answers 200 with a `Status` of
//!   success when the object is gone, 202 with the object while finalizers hold it.
//! * `/status` takes GET, PUT and PATCH; `dryRun=All` on every write.
//! * Unknown paths and resources are 404 `NotFound` Status objects; other verbs 405.
//! * Simplification: objects are served in their stored version whatever the URL's
//!   version is (no conversion between the versions of a multi-version CRD).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::Shared;
use super::body::{
    RespBody, error_response, json_response, parse_json, parse_query, read_body, status_response,
};
use super::discovery;
use crate::error::ApiError;
use crate::list::{ListOptions, WatchOptions};
use crate::patch::PatchType;
use crate::resource::{GroupResource, Propagation};
use crate::store::{DeleteOptions, Deleted, Subresource, WriteOptions};
use crate::store_apply::{FieldManager, parse_apply_body};

/// A resource request, parsed from the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// The group and resource.
    pub gr: GroupResource,
    /// The version in the URL.
    pub version: String,
    /// The namespace segment, if any.
    pub namespace: Option<String>,
    /// The object name, if any.
    pub name: Option<String>,
    /// The subresource (`status`), if any.
    pub subresource: Option<String>,
}

/// Parses a resource path, or `None` if the path names no resource.
pub fn parse_path(path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, r, rest @ ..] if *r != "status" && *r != "finalize" => (
            Some(ns.to_string()),
            std::iter::once(r).chain(rest).copied().collect::<Vec<_>>(),
        ),
        _ => (None, rest.to_vec()),
    };
    let (resource, name, sub) = match rest.as_slice() {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(n.to_string()), None),
        [r, n, s] => (*r, Some(n.to_string()), Some(s.to_string())),
        _ => return None,
    };
    if resource.is_empty() || name.as_deref() == Some("") {
        return None;
    }
    Some(ResourcePath {
        gr: GroupResource::new(group, resource),
        version: version.to_string(),
        namespace,
        name,
        subresource: sub,
    })
}

fn not_found() -> Response<RespBody> {
    status_response(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// Answers one request.
pub async fn handle(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<RespBody> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if method == Method::GET {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let doc = match segs.as_slice() {
            ["version"] => Some(discovery::version()),
            ["api"] => Some(discovery::api_versions(&shared.addr().to_string())),
            ["apis"] => Some(discovery::api_group_list(shared.lock().registry())),
            ["api", v] => {
                discovery::resource_list(shared.lock().registry(), "", v).or(Some(Value::Null))
            }
            ["apis", g] => discovery::group(shared.lock().registry(), g).or(Some(Value::Null)),
            ["apis", g, v] => {
                discovery::resource_list(shared.lock().registry(), g, v).or(Some(Value::Null))
            }
            ["healthz" | "readyz" | "livez"] => {
                let mut r = json_response(200, &Value::Null);
                *r.body_mut() = http_body_util::BodyExt::boxed(http_body_util::Full::new(
                    bytes::Bytes::from_static(b"ok"),
                ));
                return r;
            }
            _ => None,
        };
        match doc {
            Some(Value::Null) => return not_found(),
            Some(d) => return json_response(200, &d),
            None => {}
        }
    }
    let Some(rp) = parse_path(&path) else {
        return not_found();
    };
    let query = parse_query(req.uri().query());
    match resource(shared, rp, &query, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

fn param<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter()
        .rev()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.as_str())
}

fn owned(q: &[(String, String)], k: &str) -> Option<String> {
    param(q, k).map(str::to_string)
}

fn dry_run(q: &[(String, String)]) -> Result<bool, ApiError> {
    match q
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .next()
    {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(v) => Err(ApiError::bad_request(format!(
            "Invalid dryRun value: {v:?}; supported values: [\"All\"]"
        ))),
    }
}

fn check_resource(shared: &Shared, rp: &ResourcePath) -> Result<(), ApiError> {
    let store = shared.lock();
    let info = store.registry().require(&rp.gr)?;
    if !info.versions.contains(&rp.version) {
        return Err(ApiError::UnknownResource { gr: rp.gr.clone() });
    }
    if !info.namespaced && rp.namespace.is_some() {
        return Err(ApiError::UnknownResource { gr: rp.gr.clone() });
    }
    match rp.subresource.as_deref() {
        None => Ok(()),
        Some("status") if info.status_subresource => Ok(()),
        Some(_) => Err(ApiError::UnknownResource { gr: rp.gr.clone() }),
    }
}

fn method_not_allowed(rp: &ResourcePath, verb: &str) -> ApiError {
    ApiError::MethodNotAllowed {
        gr: rp.gr.clone(),
        verb: verb.to_string(),
    }
}

async fn resource(
    shared: &Arc<Shared>,
    rp: ResourcePath,
    q: &[(String, String)],
    req: Request<Incoming>,
) -> Result<Response<RespBody>, ApiError> {
    check_resource(shared, &rp)?;
    let ns = rp.namespace.as_deref();
    let gr = &rp.gr;
    let opts = WriteOptions {
        dry_run: dry_run(q)?,
    };
    let sub = if rp.subresource.is_some() {
        Subresource::Status
    } else {
        Subresource::Main
    };
    let method = req.method().clone();
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    // Field manager of writes (managedFields, server-side apply): see store_apply.rs.
    let fm = FieldManager::from_request(
        q,
        req.headers()
            .get(hyper::header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
    );
    match (&method, rp.name.as_deref()) {
        (&Method::GET, None) => {
            if matches!(param(q, "watch"), Some("true" | "1")) {
                let timeout = match param(q, "timeoutSeconds") {
                    Some(t) => Some(t.parse::<u64>().map_err(|_| {
                        ApiError::bad_request(format!("invalid timeoutSeconds: {t:?}"))
                    })?),
                    None => None,
                };
                let wo = WatchOptions {
                    label_selector: owned(q, "labelSelector"),
                    field_selector: owned(q, "fieldSelector"),
                    resource_version: owned(q, "resourceVersion"),
                    resource_version_match: owned(q, "resourceVersionMatch"),
                    send_initial_events: param(q, "sendInitialEvents").map(|v| v == "true"),
                    allow_watch_bookmarks: param(q, "allowWatchBookmarks") == Some("true"),
                };
                return super::watch::start(shared, gr, ns, &wo, timeout);
            }
            let limit = match param(q, "limit") {
                Some(l) => Some(
                    l.parse::<u64>()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit: {l:?}")))?,
                ),
                None => None,
            };
            let lo = ListOptions {
                label_selector: owned(q, "labelSelector"),
                field_selector: owned(q, "fieldSelector"),
                limit,
                continue_token: owned(q, "continue"),
                resource_version: owned(q, "resourceVersion"),
                resource_version_match: owned(q, "resourceVersionMatch"),
            };
            let list = shared.lock().list(gr, ns, &lo)?;
            Ok(json_response(200, &list.to_json()))
        }
        (&Method::GET, Some(name)) => {
            let o = shared.lock().get(gr, ns, name)?;
            Ok(json_response(200, &o))
        }
        (&Method::POST, None) => {
            let body = decode_body(&content_type, &read(req).await?)?;
            let o = {
                let mut s = shared.lock();
                let o = s.as_manager(&fm, |s| s.create(gr, ns, &body, opts))?;
                shared.notify(s.resource_version());
                o
            };
            Ok(json_response(201, &o))
        }
        (&Method::PUT, Some(name)) => {
            let body = decode_body(&content_type, &read(req).await?)?;
            let o = {
                let mut s = shared.lock();
                let o = s.as_manager(&fm, |s| match sub {
                    Subresource::Main => s.update(gr, ns, name, &body, opts),
                    Subresource::Status => s.update_status(gr, ns, name, &body, opts),
                })?;
                shared.notify(s.resource_version());
                o
            };
            Ok(json_response(200, &o))
        }
        (&Method::PATCH, Some(name)) => {
            let kind = PatchType::from_content_type(&content_type)?;
            fm.check(kind)?;
            let bytes = read(req).await?;
            let body = match kind {
                PatchType::Apply => parse_apply_body(&bytes)?,
                _ => parse_json(&bytes)?,
            };
            let (code, o) = {
                let mut s = shared.lock();
                let o = s.patch_as(&fm, gr, ns, name, kind, &body, sub, opts)?;
                shared.notify(s.resource_version());
                o
            };
            Ok(json_response(code, &o))
        }
        (&Method::DELETE, Some(name)) if sub == Subresource::Main => {
            let bytes = read(req).await?;
            let mut d = DeleteOptions {
                dry_run: opts.dry_run,
                ..DeleteOptions::default()
            };
            if !bytes.iter().all(u8::is_ascii_whitespace) {
                let body = parse_json(&bytes)?;
                if let Some(p) = body.get("propagationPolicy").and_then(Value::as_str) {
                    d.propagation = Some(Propagation::parse(p)?);
                }
                if body.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
                    d.propagation = Some(Propagation::Orphan);
                }
                d.uid = body
                    .pointer("/preconditions/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                d.resource_version = body
                    .pointer("/preconditions/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(dr) = body.get("dryRun").and_then(Value::as_array) {
                    d.dry_run |= dr.iter().any(|v| v == "All");
                }
            }
            if let Some(p) = param(q, "propagationPolicy") {
                d.propagation = Some(Propagation::parse(p)?);
            }
            let out = {
                let mut s = shared.lock();
                let out = s.delete(gr, ns, name, &d)?;
                shared.notify(s.resource_version());
                out
            };
            Ok(match out {
                Deleted::Gone(o) => {
                    let uid = o.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
                    let mut details = json!({"name": name, "kind": gr.resource, "uid": uid});
                    if !gr.group.is_empty()
                        && let Some(m) = details.as_object_mut()
                    {
                        m.insert("group".into(), json!(gr.group));
                    }
                    json_response(
                        200,
                        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success", "details": details}),
                    )
                }
                Deleted::Pending(o) => json_response(202, &o),
            })
        }
        (m, _) => Err(method_not_allowed(&rp, &verb_of(m, rp.name.is_some()))),
    }
}

fn verb_of(m: &Method, named: bool) -> String {
    match (m.as_str(), named) {
        ("DELETE", false) => "deletecollection".into(),
        ("POST", true) => "create".into(),
        ("PUT" | "PATCH", false) => "update".into(),
        (m, _) => m.to_lowercase(),
    }
}

/// A create/update body: JSON, or protobuf for the kinds [`super::protobuf`] decodes.
fn decode_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    if content_type.starts_with(super::protobuf::MEDIA_TYPE) {
        super::protobuf::decode(bytes)
    } else {
        parse_json(bytes)
    }
}

async fn read(req: Request<Incoming>) -> Result<bytes::Bytes, ApiError> {
    read_body(req.into_body())
        .await
        .map_err(|_| ApiError::TooLarge {
            limit: super::body::MAX_BODY_BYTES,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let p = parse_path("/api/v1/namespaces/default/configmaps/x").unwrap();
        assert_eq!(p.gr, GroupResource::new("", "configmaps"));
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert_eq!(p.name.as_deref(), Some("x"));
        let p = parse_path("/api/v1/namespaces/default").unwrap();
        assert_eq!(p.gr, GroupResource::new("", "namespaces"));
        assert_eq!(p.name.as_deref(), Some("default"));
        let p = parse_path("/api/v1/namespaces/a/status").unwrap();
        assert_eq!(p.subresource.as_deref(), Some("status"));
        let p = parse_path("/apis/batch/v1/namespaces/n/jobs/j/status").unwrap();
        assert_eq!(p.gr, GroupResource::new("batch", "jobs"));
        assert_eq!(p.subresource.as_deref(), Some("status"));
        let p = parse_path("/apis/batch/v1/jobs").unwrap();
        assert_eq!(p.namespace, None);
        assert!(parse_path("/foo").is_none());
    }
}
