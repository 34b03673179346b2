//! Discovery documents built from the [`Registry`]: `/version`, `/api` (`APIVersions`),
//! `/apis` (`APIGroupList`), `/apis/{group}` (`APIGroup`) and `/api/v1`,
//! `/apis/{group}/{version}` (`APIResourceList`).
//!
//! Contract: only the legacy (unaggregated) documents are served, as `application/json`.
//! kubectl v1.32 asks `/api` and `/apis` with `Accept: application/json;g=apidiscovery.k8s.io;
//! v=v2;as=APIGroupDiscoveryList,…;v=v2beta1;…,application/json` (seen with `-v=8`); given
//! the plain `APIVersions`/`APIGroupList`, it falls back to fetching each group/version's
//! `APIResourceList`, as against a pre-1.26 server — so aggregated discovery is not needed
//! (it would only save requests). Every resource lists the verbs
//! `create delete deletecollection get list patch update watch` and, when it has one, its
//! `<plural>/status` subresource with `get patch update`; pods list `pods/eviction`
//! (`create`, group `policy` version `v1` kind `Eviction`), which `kubectl drain` looks
//! for before evicting (else it deletes pods outright).

use serde_json::{Value, json};

use crate::resource::Registry;

/// The Kubernetes version this server claims (kubectl v1.32's).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-kubetest",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

/// The versions of `group`, storage (preferred) version first.
fn group_versions(reg: &Registry, group: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in reg.all().filter(|r| r.group == group) {
        for v in &r.versions {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
    }
    out
}

fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let versions = group_versions(reg, group);
    let preferred = versions.first()?;
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": gv(preferred),
    }))
}

/// `/apis`.
pub fn api_group_list(reg: &Registry) -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for r in reg.all() {
        if !r.group.is_empty() && !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .filter_map(|g| api_group(reg, g))
        .map(|mut g| {
            if let Some(m) = g.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            g
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, or `None` for an unknown group.
pub fn group(reg: &Registry, group: &str) -> Option<Value> {
    api_group(reg, group)
}

/// `/api/v1` (`group` empty) or `/apis/{group}/{version}`, or `None` when nothing is
/// served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in reg
        .all()
        .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
    {
        let mut res = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        });
        if let Some(m) = res.as_object_mut() {
            if !r.short_names.is_empty() {
                m.insert("shortNames".into(), json!(r.short_names));
            }
            if !r.categories.is_empty() {
                m.insert("categories".into(), json!(r.categories));
            }
        }
        resources.push(res);
        if r.group.is_empty() && r.plural == "pods" {
            resources.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}
