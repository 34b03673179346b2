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
//! * `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` on a GET (list, object or
//!   watch) answers a `meta.k8s.io/v1` `Table` ([`super::table`]), `includeObject`
//!   honoured.
//! * DELETE on a collection is `deletecollection`: the objects the label/field selectors
//!   pick are deleted one by one with the request's `DeleteOptions`; the answer is the list
//!   of the objects as the deletes left them (gone or marked), as the generic registry's
//!   `DeleteCollection` returns.
//! * Create/update bodies are JSON, YAML (`application/yaml`, read by serde-saphyr into
//!   JSON, so YAML 1.2 scalars — yaml.v2's `yes`/`on` booleans are strings here) or the
//!   protobuf kinds of [`super::protobuf`]; a malformed body is a 400 in the decoder's
//!   words (`couldn't get version/kind; json parse error: …`, `error converting YAML to
//!   JSON: yaml: …`); a wrong apiVersion/kind is the store's 400.
//! * `fieldValidation=Ignore|Warn|Strict` (default `Warn`, as kube-apiserver 1.27+) on
//!   POST, PUT and merge/strategic PATCH: fields of a custom resource its schema prunes are
//!   reported as `unknown field "spec.x"` — a 400 `… cannot be handled as a …: strict
//!   decoding error: …` with `Strict`, a `Warning: 299 - "…"` header with `Warn`.
//!   Built-in kinds are not schema-checked, so they never have unknown fields here (a
//!   simplification: a real server decodes them strictly into typed structs).
//! * `POST pods/{name}/eviction` evicts ([`super::eviction`]).
//! * `/openapi/v3` and its group/version documents ([`super::openapi`]); `/openapi/v2` is
//!   a 404, which kubectl survives (see there).
//! * Unknown paths and resources are 404 `NotFound` Status objects; other verbs 405.
//! * Simplification: objects are served in their stored version whatever the URL's
//!   version is (no conversion between the versions of a multi-version CRD).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::Shared;
use super::body::{
    RespBody, error_response, json_response, parse_json, parse_query, parse_yaml, read_body,
    status_response,
};
use super::table::{IncludeObject, wants_table};
use super::{discovery, openapi, table};
use crate::error::ApiError;
use crate::list::{ListOptions, WatchOptions};
use crate::patch::PatchType;
use crate::resource::{GroupResource, Propagation, ResourceInfo};
use crate::store::{DeleteOptions, Deleted, Store, Subresource, WriteOptions};
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
            ["openapi", "v3"] => Some(openapi::index(shared.lock().registry())),
            ["openapi", "v3", "api", v] => {
                openapi::document(shared.lock().registry(), "", v).or(Some(Value::Null))
            }
            ["openapi", "v3", "apis", g, v] => {
                openapi::document(shared.lock().registry(), g, v).or(Some(Value::Null))
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
        Some("eviction") if rp.gr == GroupResource::new("", "pods") => Ok(()),
        Some(_) => Err(ApiError::UnknownResource { gr: rp.gr.clone() }),
    }
}

/// `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them with a `Warning` header each (the default).
    Warn,
    /// Refuse the request (400).
    Strict,
}

fn field_validation(q: &[(String, String)]) -> Result<FieldValidation, ApiError> {
    match param(q, "fieldValidation") {
        None | Some("" | "Warn") => Ok(FieldValidation::Warn),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some(v) => Err(ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: {v:?}: supported values: \"Ignore\", \"Warn\", \"Strict\""
        ))),
    }
}

/// The fields of `sent` that are missing from `stored` (what pruning dropped), as
/// `spec.a.b` / `spec.l[0].x` paths; `null`s are not reported (they are dropped, not
/// unknown). At the root `apiVersion`, `kind`, `metadata` (and `status` when
/// `skip_status`) are skipped.
pub fn unknown_fields(sent: &Value, stored: &Value, skip_status: bool) -> Vec<String> {
    fn walk(sent: &Value, stored: &Value, path: &str, out: &mut Vec<String>) {
        match (sent, stored) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    match b.get(k) {
                        None if !v.is_null() => out.push(p),
                        None => {}
                        Some(w) => walk(v, w, &p, out),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (i, (v, w)) in a.iter().zip(b).enumerate() {
                    walk(v, w, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let (Some(a), Some(b)) = (sent.as_object(), stored.as_object()) else {
        return out;
    };
    for (k, v) in a {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
            || (skip_status && k == "status")
        {
            continue;
        }
        match b.get(k) {
            None if !v.is_null() => out.push(k.clone()),
            None => {}
            Some(w) => walk(v, w, k, &mut out),
        }
    }
    out
}

/// Runs the write `op` with `fieldValidation` `fv` on the body `sent` (for custom
/// resources: a dry run first to find the fields the schema prunes). Returns the result
/// and the unknown fields to warn about.
fn checked_write(
    shared: &Shared,
    info: &ResourceInfo,
    sent: Option<&Value>,
    skip_status: bool,
    fv: FieldValidation,
    opts: WriteOptions,
    op: impl Fn(&mut Store, WriteOptions) -> Result<(u16, Value), ApiError>,
) -> Result<(u16, Value, Vec<String>), ApiError> {
    let mut s = shared.lock();
    let mut unknown = Vec::new();
    if let Some(sent) = sent.filter(|_| info.is_custom() && fv != FieldValidation::Ignore) {
        let (code, dry) = op(&mut s, WriteOptions::DRY_RUN)?;
        unknown = unknown_fields(sent, &dry, skip_status);
        if fv == FieldValidation::Strict && !unknown.is_empty() {
            let version = info.versions.first().map_or("v1", String::as_str);
            let list: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect();
            return Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                list.join(", "),
                kind = info.kind
            )));
        }
        if opts.dry_run {
            return Ok((code, dry, unknown));
        }
    }
    let (code, o) = op(&mut s, opts)?;
    shared.notify(s.resource_version());
    Ok((code, o, unknown))
}

/// `resp` with one `Warning: 299 - "unknown field \"x\""` header per unknown field.
fn with_warnings(mut resp: Response<RespBody>, unknown: &[String]) -> Response<RespBody> {
    for f in unknown {
        let text = format!("299 - {:?}", format!("unknown field {f:?}"));
        if let Ok(v) = hyper::header::HeaderValue::from_str(&text) {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

/// `DeleteOptions` from a request body (if any) and the query; `dry_run` from the
/// query's `dryRun`, or'ed with the body's.
fn delete_options(
    body: Option<&Value>,
    q: &[(String, String)],
    dry_run: bool,
) -> Result<DeleteOptions, ApiError> {
    let mut d = DeleteOptions {
        dry_run,
        ..DeleteOptions::default()
    };
    if let Some(body) = body {
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
    Ok(d)
}

/// [`delete_options`] of a DELETE request: its JSON body, absent when empty or blank.
async fn read_delete_options(
    req: Request<Incoming>,
    q: &[(String, String)],
    dry_run: bool,
) -> Result<DeleteOptions, ApiError> {
    let bytes = read(req).await?;
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(parse_json(&bytes)?)
    };
    delete_options(body.as_ref(), q, dry_run)
}

fn now() -> i64 {
    super::eviction::now_secs()
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
    let header = |h: hyper::header::HeaderName| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let content_type = header(hyper::header::CONTENT_TYPE);
    // Field manager of writes (managedFields, server-side apply): see store_apply.rs.
    let fm = FieldManager::from_request(q, Some(header(hyper::header::USER_AGENT).as_str()));
    let as_table = method == Method::GET && wants_table(&header(hyper::header::ACCEPT));
    let include = IncludeObject::parse(param(q, "includeObject"))?;
    let info = shared.lock().registry().require(gr)?.clone();
    let fv = field_validation(q)?;
    if rp.subresource.as_deref() == Some("eviction") {
        let (Some(name), Some(ns)) = (rp.name.as_deref(), ns) else {
            return Err(ApiError::UnknownResource { gr: gr.clone() });
        };
        if method != Method::POST {
            return Err(method_not_allowed(&rp, &verb_of(&method, false)));
        }
        let body = decode_body(&content_type, &read(req).await?)?;
        let d = delete_options(body.get("deleteOptions"), q, opts.dry_run)?;
        return super::eviction::evict(shared, ns, name, &body, &d);
    }
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
                let transform: Option<super::watch::Transform> = as_table.then(|| {
                    let info = info.clone();
                    Box::new(move |o: &Value, first: bool| {
                        table::table(
                            &info,
                            std::slice::from_ref(o),
                            include,
                            json!({}),
                            first,
                            now(),
                        )
                    }) as super::watch::Transform
                });
                return super::watch::start(shared, gr, ns, &wo, timeout, transform);
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
            let list = shared.lock().list(gr, ns, &lo)?.to_json();
            if as_table {
                let items = list["items"].as_array().cloned().unwrap_or_default();
                let t = table::table(
                    &info,
                    &items,
                    include,
                    list["metadata"].clone(),
                    true,
                    now(),
                );
                return Ok(json_response(200, &t));
            }
            Ok(json_response(200, &list))
        }
        (&Method::GET, Some(name)) => {
            let o = shared.lock().get(gr, ns, name)?;
            if as_table {
                let rv = o.pointer("/metadata/resourceVersion").cloned();
                let md = rv.map_or(json!({}), |rv| json!({"resourceVersion": rv}));
                let t = table::table(&info, std::slice::from_ref(&o), include, md, true, now());
                return Ok(json_response(200, &t));
            }
            Ok(json_response(200, &o))
        }
        (&Method::POST, None) => {
            let sa = req
                .extensions()
                .get::<super::rbac::ServiceAccount>()
                .cloned();
            let body = decode_body(&content_type, &read(req).await?)?;
            if let Some(sa) = &sa
                && let Some(detail) = super::owner_references_permitted(shared, sa, &body, ns)
            {
                return Err(ApiError::Forbidden {
                    gr: gr.clone(),
                    name: body["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    detail,
                });
            }
            let (_, o, unknown) = checked_write(
                shared,
                &info,
                Some(&body),
                info.status_subresource,
                fv,
                opts,
                |s, o| {
                    s.as_manager(&fm, |s| s.create(gr, ns, &body, o))
                        .map(|o| (201, o))
                },
            )?;
            Ok(with_warnings(json_response(201, &o), &unknown))
        }
        (&Method::PUT, Some(name)) => {
            let body = decode_body(&content_type, &read(req).await?)?;
            let skip_status = info.status_subresource && sub == Subresource::Main;
            let (_, o, unknown) =
                checked_write(shared, &info, Some(&body), skip_status, fv, opts, |s, o| {
                    s.as_manager(&fm, |s| match sub {
                        Subresource::Main => s.update(gr, ns, name, &body, o),
                        Subresource::Status => s.update_status(gr, ns, name, &body, o),
                    })
                    .map(|o| (200, o))
                })?;
            Ok(with_warnings(json_response(200, &o), &unknown))
        }
        (&Method::PATCH, Some(name)) => {
            let kind = PatchType::from_content_type(&content_type)?;
            fm.check(kind)?;
            let bytes = read(req).await?;
            let body = match kind {
                PatchType::Apply => parse_apply_body(&bytes)?,
                _ => parse_json(&bytes)?,
            };
            // fieldValidation: a merge, strategic or apply patch names object fields.
            let sent = matches!(
                kind,
                PatchType::Merge | PatchType::Strategic | PatchType::Apply
            )
            .then_some(&body);
            let skip_status = info.status_subresource && sub == Subresource::Main;
            let (code, o, unknown) =
                checked_write(shared, &info, sent, skip_status, fv, opts, |s, o| {
                    s.patch_as(&fm, gr, ns, name, kind, &body, sub, o)
                })?;
            Ok(with_warnings(json_response(code, &o), &unknown))
        }
        (&Method::DELETE, None) => {
            let d = read_delete_options(req, q, opts.dry_run).await?;
            let lo = ListOptions {
                label_selector: owned(q, "labelSelector"),
                field_selector: owned(q, "fieldSelector"),
                ..ListOptions::default()
            };
            let mut s = shared.lock();
            let list = s.list(gr, ns, &lo)?;
            let mut items = Vec::new();
            for o in &list.items {
                let name = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let ons = o.pointer("/metadata/namespace").and_then(Value::as_str);
                match s.delete(gr, ons, name, &d) {
                    Ok(out) => items.push(out.object().clone()),
                    // Gone meanwhile (a dependent collected with its owner): skip it.
                    Err(ApiError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            shared.notify(s.resource_version());
            let mut out = list.clone();
            out.items = items;
            out.continue_token = None;
            out.remaining_item_count = None;
            out.resource_version = s.resource_version();
            Ok(json_response(200, &out.to_json()))
        }
        (&Method::DELETE, Some(name)) if sub == Subresource::Main => {
            let d = read_delete_options(req, q, opts.dry_run).await?;
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

/// A create/update body: JSON, YAML, or protobuf for the kinds [`super::protobuf`]
/// decodes.
fn decode_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let mt = content_type.split(';').next().unwrap_or("").trim();
    if mt == super::protobuf::MEDIA_TYPE {
        super::protobuf::decode(bytes)
    } else if mt == "application/yaml" {
        parse_yaml(bytes)
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
