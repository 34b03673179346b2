//! The three patch types kube-apiserver takes besides apply, as pure functions from the
//! stored object and the patch document to the patched object. The fourth,
//! [`PatchType::Apply`] (`application/apply-patch+yaml`, server-side apply), needs a field
//! manager and the object's managed fields: [`crate::store_apply`] and [`crate::apply`]
//! implement it, and [`apply()`] refuses it.
//!
//! * JSON merge patch (RFC 7386, `application/merge-patch+json`): [`merge_patch`]; maps
//!   merge, `null` deletes, lists are replaced whole.
//! * JSON patch (RFC 6902, `application/json-patch+json`): [`json_patch()`], through the
//!   `json-patch` crate (all six ops including `test`, atomic: a failing op leaves nothing
//!   applied). An unparsable patch is a 400; one that cannot be applied is kube-apiserver's
//!   422 `the server rejected our request due to an error in our request` with the reason
//!   as the cause.
//! * Strategic merge patch (`application/strategic-merge-patch+json`): [`strategic_merge`],
//!   for built-in kinds only (a custom resource answers 415, as on a real server). Like a
//!   merge patch, except for lists with a patch strategy:
//!   - lists merged by key — `containers`, `initContainers`, `ephemeralContainers`, `env`,
//!     `volumes`, `imagePullSecrets`, `resourceClaims` by `name`; `ports` by
//!     `containerPort`; `volumeMounts` by `mountPath`; `volumeDevices` by `devicePath`;
//!     `conditions` and `addresses` by `type`; `ownerReferences` by `uid`; `hostAliases`,
//!     `podIPs`, `hostIPs` by `ip`; `readinessGates` by `conditionType`;
//!     `topologySpreadConstraints` by `topologyKey`;
//!   - `finalizers` merged as a set of strings (union, order kept);
//!   - every other list replaced whole, as for a list without `patchStrategy`;
//!   - directives: `$patch: replace` (on a map: replace it; as a list item: replace the
//!     list), `$patch: delete` (on a map: delete it; as a list item with the merge key:
//!     delete that item), `$retainKeys` (keep only the listed keys, then merge),
//!     `$deleteFromPrimitiveList/<field>` (remove those values from a set list).
//!     `$setElementOrder/<field>` is accepted and ignored (merged items keep the stored
//!     order and new ones are appended, which is what it yields when the client does not
//!     reorder).
//!
//!   Simplifications: merge keys are looked up by field name alone, wherever the field
//!   is (a real server uses the Go type's struct tags, so e.g. a Service's `ports` merge
//!   by `port`, which no kind served here has); `topologySpreadConstraints` ignore their
//!   second key `whenUnsatisfiable`; `$patch: merge` is treated as no directive.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// A patch type (the request's `Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`: server-side apply (a YAML or JSON body).
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type`, or 415.
    pub fn from_content_type(ct: &str) -> Result<PatchType, ApiError> {
        match ct.split(';').next().map(str::trim) {
            Some("application/json-patch+json") => Ok(PatchType::Json),
            Some("application/merge-patch+json") => Ok(PatchType::Merge),
            Some("application/strategic-merge-patch+json") => Ok(PatchType::Strategic),
            Some("application/apply-patch+yaml") => Ok(PatchType::Apply),
            _ => Err(ApiError::UnsupportedPatch),
        }
    }
}

/// Applies `patch` of type `kind` to `original`.
pub fn apply(kind: PatchType, original: &Value, patch: &Value) -> Result<Value, ApiError> {
    match kind {
        PatchType::Json => json_patch(original, patch),
        PatchType::Merge => merge_patch(original, patch),
        PatchType::Strategic => strategic_merge(original, patch),
        PatchType::Apply => Err(ApiError::bad_request(
            "server-side apply needs a field manager: use Store::apply",
        )),
    }
}

/// RFC 7386 JSON merge patch. The patch must be a JSON object.
pub fn merge_patch(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: json: cannot unmarshal into Go value of type map[string]interface {}",
        ));
    }
    let mut out = original.clone();
    ::json_patch::merge(&mut out, patch);
    Ok(out)
}

/// RFC 6902 JSON patch.
pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops: ::json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut out = original.clone();
    ::json_patch::patch(&mut out, &ops).map_err(|e| ApiError::PatchFailed {
        cause: e.to_string(),
    })?;
    Ok(out)
}

/// How a list field merges.
enum ListStrategy {
    /// Items are maps merged by this key.
    Key(&'static str),
    /// Items are strings merged as a set.
    Set,
    /// Replaced whole.
    Replace,
}

fn list_strategy(field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => ListStrategy::Key("name"),
        "ports" => ListStrategy::Key("containerPort"),
        "volumeMounts" => ListStrategy::Key("mountPath"),
        "volumeDevices" => ListStrategy::Key("devicePath"),
        "conditions" | "addresses" => ListStrategy::Key("type"),
        "ownerReferences" => ListStrategy::Key("uid"),
        "hostAliases" | "podIPs" | "hostIPs" => ListStrategy::Key("ip"),
        "readinessGates" => ListStrategy::Key("conditionType"),
        "topologySpreadConstraints" => ListStrategy::Key("topologyKey"),
        "finalizers" => ListStrategy::Set,
        _ => ListStrategy::Replace,
    }
}

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

/// A patch value with its directives removed, as stored when there is nothing to merge
/// with.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .filter(|(_, v)| directive(v) != Some("delete"))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|i| directive(i).is_none())
                .map(strip)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Strategic merge patch (see the module documentation for what is supported).
pub fn strategic_merge(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    let Value::Object(p) = patch else {
        return Err(ApiError::bad_request(
            "error decoding patch: json: cannot unmarshal into Go value of type map[string]interface {}",
        ));
    };
    let mut out = original.as_object().cloned().unwrap_or_default();
    merge_map(&mut out, p)?;
    Ok(Value::Object(out))
}

fn merge_map(orig: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            if let Value::Object(m) = strip(&Value::Object(patch.clone())) {
                *orig = m;
            }
            return Ok(());
        }
        Some("delete") => {
            orig.clear();
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other:?} in map"
            )));
        }
    }
    if let Some(keep) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep
            .as_array()
            .ok_or_else(|| ApiError::bad_request("$retainKeys must be a list of strings"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(drop)) = (orig.get_mut(field), v) {
                list.retain(|i| !drop.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() || directive(v) == Some("delete") {
            orig.remove(k);
            continue;
        }
        match (orig.get_mut(k), v) {
            (Some(Value::Object(o)), Value::Object(pm)) => merge_map(o, pm)?,
            (Some(Value::Array(o)), Value::Array(pl)) => merge_list(k, o, pl)?,
            _ => {
                orig.insert(k.clone(), strip(v));
            }
        }
    }
    Ok(())
}

fn merge_list(field: &str, orig: &mut Vec<Value>, patch: &[Value]) -> Result<(), ApiError> {
    if patch.iter().any(|i| directive(i) == Some("replace")) {
        *orig = patch
            .iter()
            .filter(|i| directive(i).is_none())
            .map(strip)
            .collect();
        return Ok(());
    }
    match list_strategy(field) {
        ListStrategy::Replace => *orig = patch.iter().map(strip).collect(),
        ListStrategy::Set => {
            for item in patch {
                if !orig.contains(item) {
                    orig.push(item.clone());
                }
            }
        }
        ListStrategy::Key(key) => {
            for item in patch {
                let Some(pm) = item.as_object() else {
                    return Err(ApiError::bad_request(format!(
                        "unable to find api field in struct for the merge key {key:?} of {field:?}: the patch item is not a map"
                    )));
                };
                let Some(kv) = pm.get(key) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {} does not contain declared merge key: {key}",
                        Value::Object(pm.clone())
                    )));
                };
                let pos = orig.iter().position(|o| o.get(key) == Some(kv));
                match (pos, directive(item)) {
                    (Some(i), Some("delete")) => {
                        orig.remove(i);
                    }
                    (None, Some("delete")) => {}
                    (Some(i), _) => {
                        if let Some(Value::Object(o)) = orig.get_mut(i) {
                            merge_map(o, pm)?;
                        }
                    }
                    (None, _) => orig.push(strip(item)),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let o = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"});
        let cases = vec![
            (
                json!({"a": {"b": null}}),
                json!({"a": {"c": 2}, "l": [1, 2], "k": "v"}),
            ),
            (
                json!({"l": [3]}),
                json!({"a": {"b": 1, "c": 2}, "l": [3], "k": "v"}),
            ),
            (
                json!({"k": null, "n": {"x": 1}}),
                json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "n": {"x": 1}}),
            ),
        ];
        for (p, want) in cases {
            assert_eq!(merge_patch(&o, &p).unwrap(), want, "{p}");
        }
        assert_eq!(merge_patch(&o, &json!([1])).unwrap_err().code(), 400);
    }

    #[test]
    fn json_patch_follows_rfc_6902() {
        let o = json!({"spec": {"x": 1, "l": ["a"]}});
        let p = json!([
            {"op": "test", "path": "/spec/x", "value": 1},
            {"op": "replace", "path": "/spec/x", "value": 2},
            {"op": "add", "path": "/spec/l/-", "value": "b"},
            {"op": "copy", "from": "/spec/x", "path": "/spec/y"},
            {"op": "move", "from": "/spec/y", "path": "/spec/z"},
            {"op": "remove", "path": "/spec/l/0"}
        ]);
        assert_eq!(
            json_patch(&o, &p).unwrap(),
            json!({"spec": {"x": 2, "l": ["b"], "z": 2}})
        );
        let failed =
            json_patch(&o, &json!([{"op": "test", "path": "/spec/x", "value": 9}])).unwrap_err();
        let s = failed.to_status();
        assert_eq!(
            (s["code"].clone(), s["reason"].clone()),
            (json!(422), json!("Invalid"))
        );
        assert_eq!(
            s["message"],
            "the server rejected our request due to an error in our request"
        );
        assert!(
            s["details"]["causes"][0]["message"]
                .as_str()
                .unwrap()
                .contains("/spec/x")
        );
        let missing = json_patch(&o, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert_eq!(missing.code(), 422);
        let bad = json_patch(&o, &json!([{"op": "frobnicate", "path": "/x"}])).unwrap_err();
        assert_eq!(bad.code(), 400);
    }

    fn pod() -> Value {
        json!({
            "metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
            "spec": {
                "containers": [
                    {"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80, "name": "http"}]},
                    {"name": "c2", "image": "i2"}
                ],
                "tolerations": [{"key": "t1"}],
                "volumes": [{"name": "v1", "emptyDir": {}}]
            },
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        })
    }

    #[test]
    fn strategic_merge_uses_merge_keys_and_directives() {
        let cases: Vec<(&str, Value, Value)> = vec![
            (
                "container merged by name, env appended by name",
                json!({"spec": {"containers": [{"name": "c1", "image": "new", "env": [{"name": "B", "value": "2"}]}]}}),
                json!([
                    {"name": "c1", "image": "new", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80, "name": "http"}]},
                    {"name": "c2", "image": "i2"}
                ]),
            ),
            (
                "new container appended",
                json!({"spec": {"containers": [{"name": "c3", "image": "i3"}]}}),
                json!([
                    {"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80, "name": "http"}]},
                    {"name": "c2", "image": "i2"},
                    {"name": "c3", "image": "i3"}
                ]),
            ),
            (
                "$patch: delete removes the keyed item",
                json!({"spec": {"containers": [{"name": "c1", "$patch": "delete"}]}}),
                json!([{"name": "c2", "image": "i2"}]),
            ),
            (
                "$patch: replace as a list item replaces the list",
                json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c9", "image": "i9"}]}}),
                json!([{"name": "c9", "image": "i9"}]),
            ),
            (
                "ports merged by containerPort",
                json!({"spec": {"containers": [{"name": "c2", "ports": [{"containerPort": 81}]}]}}),
                json!([
                    {"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80, "name": "http"}]},
                    {"name": "c2", "image": "i2", "ports": [{"containerPort": 81}]}
                ]),
            ),
        ];
        for (what, p, want) in cases {
            let got = strategic_merge(&pod(), &p).unwrap();
            assert_eq!(got["spec"]["containers"], want, "{what}");
        }

        // Lists without a strategy are replaced; finalizers are a set; conditions by type.
        let got = strategic_merge(
            &pod(),
            &json!({
                "metadata": {"finalizers": ["b", "a"], "labels": {"x": null, "y": "2"}},
                "spec": {"tolerations": [{"key": "t2"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Init", "status": "True"}]}
            }),
        )
        .unwrap();
        assert_eq!(got["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(got["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(got["spec"]["tolerations"], json!([{"key": "t2"}]));
        assert_eq!(
            got["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Init", "status": "True"}])
        );

        let got = strategic_merge(
            &pod(),
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "$setElementOrder/finalizers": []}}),
        )
        .unwrap();
        assert_eq!(got["metadata"]["finalizers"], json!([]));

        // Map directives.
        let got = strategic_merge(
            &pod(),
            &json!({"metadata": {"labels": {"$patch": "replace", "z": "3"}}}),
        )
        .unwrap();
        assert_eq!(got["metadata"]["labels"], json!({"z": "3"}));
        let got = strategic_merge(&pod(), &json!({"status": {"$patch": "delete"}})).unwrap();
        assert!(got.get("status").is_none());
        let got = strategic_merge(
            &json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
            &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        )
        .unwrap();
        assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));

        let e = strategic_merge(&pod(), &json!({"spec": {"containers": [{"image": "x"}]}}))
            .unwrap_err();
        assert_eq!(e.code(), 400);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml").unwrap(),
            PatchType::Apply
        );
        assert_eq!(
            PatchType::from_content_type("application/yaml")
                .unwrap_err()
                .code(),
            415
        );
    }
}
