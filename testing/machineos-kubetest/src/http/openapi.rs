//! OpenAPI v3 documents built from the [`Registry`]: `/openapi/v3` (the index of
//! group/version documents) and `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
//!
//! What kubectl v1.32 does with them (found by running it with `-v=8` against this
//! server, and in `k8s.io/kubectl/pkg/cmd/apply/patcher.go` and
//! `k8s.io/client-go/openapi3`, `k8s.io/kubectl/pkg/util/openapi`):
//! * **field validation**: before `create`/`apply`/`replace` kubectl fetches `/openapi/v3`,
//!   then the object's group/version document, and looks for a PATCH operation carrying
//!   the kind's `x-kubernetes-group-version-kind` with a `fieldValidation` query
//!   parameter (`QueryParamVerifierV3`). When it finds one it sends
//!   `fieldValidation=Strict` (or `Warn`/`Ignore` per `--validate`) and leaves validation
//!   to the server; otherwise it downloads `/openapi/v2` for client-side validation and
//!   fails with `failed to download openapi` when that is missing. So every PATCH
//!   operation here lists `fieldValidation`, and the REST layer honours it.
//! * **client-side apply**: kubectl computes a strategic merge patch from the v3 schema
//!   only when the kind's PATCH operation accepts `application/strategic-merge-patch+json`;
//!   otherwise it tries `/openapi/v2` and then falls back to the patch metadata compiled
//!   into kubectl for the kinds its scheme knows (every built-in kind served here), and to
//!   a JSON merge patch for kinds it does not know (custom resources, `Build`). This server
//!   deliberately does not list the strategic content type in the documents (the REST
//!   layer still accepts it), so kubectl uses its compiled-in merge keys and strategies,
//!   which are exactly the real ones, instead of a hand-written approximation. A real
//!   server lists it for built-in kinds; the patches kubectl sends are the same.
//! * `/openapi/v2` is not served (404): kubectl asks for it (protobuf first,
//!   `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) only when v3 is
//!   missing or gives no answer, and falls back as above.
//!
//! Schemas: custom resources carry their CRD version's `openAPIV3Schema` as-is (with
//! `x-kubernetes-group-version-kind`), built-in kinds a minimal object schema (apiVersion,
//! kind, metadata, preserved unknown fields), enough for `kubectl explain KIND` to name
//! the kind. Each document URL carries a `hash` of its content, as a real server's does.

use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::resource::{Registry, ResourceInfo};

/// `api/v1` or `apis/{group}/{version}`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Every served group/version, in registry order.
fn group_versions(reg: &Registry) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for r in reg.all() {
        for v in &r.versions {
            let gv = (r.group.clone(), v.clone());
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
    }
    out
}

fn hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, v) in group_versions(reg) {
        if let Some(doc) = document(reg, &g, &v) {
            let p = gv_path(&g, &v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc))}),
            );
        }
    }
    json!({ "paths": paths })
}

/// The schema name of a kind (`io.k8s.api.core.v1.ConfigMap`, reversed group for custom
/// resources: `io.openshift.machineconfiguration.v1.MachineConfig`).
fn schema_name(r: &ResourceInfo, version: &str) -> String {
    if r.is_custom() || r.group.contains('.') && !r.group.ends_with(".k8s.io") {
        let rev: Vec<&str> = r.group.split('.').rev().collect();
        return format!("{}.{version}.{}", rev.join("."), r.kind);
    }
    let g = match r.group.as_str() {
        "" => "core",
        "apiextensions.k8s.io" => {
            return format!(
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{version}.{}",
                r.kind
            );
        }
        g => g.split('.').next().unwrap_or(g),
    };
    format!("io.k8s.api.{g}.{version}.{}", r.kind)
}

fn param(name: &str, desc: &str) -> Value {
    json!({"name": name, "in": "query", "description": desc, "schema": {"type": "string", "uniqueItems": true}})
}

fn write_params() -> Vec<Value> {
    vec![
        param(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ),
        param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        param(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
        ),
    ]
}

fn op(action: &str, gvk: &Value, id: &str, params: Vec<Value>, body: Option<Value>) -> Value {
    let mut o = json!({
        "operationId": id,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
    });
    if let Some(b) = body {
        o["requestBody"] = b;
    }
    o
}

fn json_body(schema_ref: &str) -> Value {
    json!({"content": {"application/json": {"schema": {"$ref": schema_ref}}}, "required": true})
}

fn patch_body() -> Value {
    let s = json!({"schema": {"type": "object"}});
    json!({"content": {
        "application/json-patch+json": s,
        "application/merge-patch+json": s,
        "application/apply-patch+yaml": s,
    }, "required": true})
}

/// The document of one group/version, or `None` when nothing is served there.
pub fn document(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in reg
        .all()
        .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
    {
        let gvk = json!({"group": group, "kind": r.kind, "version": version});
        let name = schema_name(r, version);
        let sref = format!("#/components/schemas/{name}");
        let mut schema = if r.is_custom() {
            r.validators
                .get(version)
                .and_then(|_| r.schemas.get(version).cloned())
                .unwrap_or_else(|| json!({"type": "object"}))
        } else {
            json!({
                "type": "object",
                "description": format!("{} ({}).", r.kind, r.api_version(version)),
                "properties": {
                    "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
                    "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
                    "metadata": {"type": "object", "description": "Standard object's metadata."},
                },
                "x-kubernetes-preserve-unknown-fields": true,
            })
        };
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(name, schema);
        let base = format!("/{}", gv_path(group, version));
        let coll = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{base}/{}", r.plural)
        };
        let id = |verb: &str| format!("{verb}{}", r.kind);
        paths.insert(
            coll.clone(),
            json!({
                "get": op("list", &gvk, &id("list"), vec![], None),
                "post": op("post", &gvk, &id("create"), write_params(), Some(json_body(&sref))),
                "delete": op("deletecollection", &gvk, &id("deleteCollection"), vec![], None),
            }),
        );
        if r.namespaced {
            paths.insert(
                format!("{base}/{}", r.plural),
                json!({"get": op("list", &gvk, &id("listAllNamespaces"), vec![], None)}),
            );
        }
        let item = format!("{coll}/{{name}}");
        paths.insert(
            item.clone(),
            json!({
                "get": op("get", &gvk, &id("read"), vec![], None),
                "put": op("put", &gvk, &id("replace"), write_params(), Some(json_body(&sref))),
                "patch": op("patch", &gvk, &id("patch"), write_params(), Some(patch_body())),
                "delete": op("delete", &gvk, &id("delete"), vec![], None),
            }),
        );
        if r.status_subresource {
            paths.insert(
                format!("{item}/status"),
                json!({
                    "get": op("get", &gvk, &id("readStatus"), vec![], None),
                    "put": op("put", &gvk, &id("replaceStatus"), write_params(), Some(json_body(&sref))),
                    "patch": op("patch", &gvk, &id("patchStatus"), write_params(), Some(patch_body())),
                }),
            );
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-kubetest"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{GroupResource, ResourceInfo};

    #[test]
    fn every_patch_operation_names_its_kind_and_takes_field_validation() {
        let mut reg = Registry::builtin();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}]}
        });
        reg.insert(ResourceInfo::from_crd(&crd).unwrap());
        let idx = index(&reg);
        assert!(
            idx["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        assert!(idx["paths"]["apis/example.com/v1"].is_object());
        for (g, v, kind) in [("", "v1", "ConfigMap"), ("example.com", "v1", "Widget")] {
            let doc = document(&reg, g, v).unwrap();
            let patches: Vec<&Value> = doc["paths"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|p| p.get("patch"))
                .filter(|p| p["x-kubernetes-group-version-kind"]["kind"] == kind)
                .collect();
            assert!(!patches.is_empty(), "{kind}");
            for p in patches {
                assert!(
                    p["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|x| x["name"] == "fieldValidation" && x["in"] == "query")
                );
                assert!(
                    p["requestBody"]["content"]
                        .get("application/strategic-merge-patch+json")
                        .is_none()
                );
            }
        }
        let doc = document(&reg, "example.com", "v1").unwrap();
        let s = &doc["components"]["schemas"]["com.example.v1.Widget"];
        assert_eq!(s["properties"]["spec"]["type"], "object");
        assert_eq!(s["x-kubernetes-group-version-kind"][0]["kind"], "Widget");
        assert!(document(&reg, "nope", "v1").is_none());
        let cm = reg.get(&GroupResource::new("", "configmaps")).unwrap();
        assert_eq!(schema_name(cm, "v1"), "io.k8s.api.core.v1.ConfigMap");
    }
}
