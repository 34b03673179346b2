//! The built-in kinds' rules of [`crate::builtin`] through the store, one test per
//! kube-apiserver behaviour, each naming the source it mirrors.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::patch::PatchType;
use crate::resource::GroupResource;
use crate::store::{Store, StoreConfig, Subresource, WriteOptions};
use crate::store_apply::ApplyOptions;

const W: WriteOptions = WriteOptions { dry_run: false };

fn secrets() -> GroupResource {
    GroupResource::new("", "secrets")
}
fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}
fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}
fn crds() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}
fn widgets() -> GroupResource {
    GroupResource::new("example.com", "widgets")
}

fn store() -> Store {
    Store::new(StoreConfig::default())
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A namespaced CRD `widgets.example.com` with a status subresource.
fn with_widgets(s: &mut Store) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}
    });
    s.create(&crds(), None, &crd, W).unwrap();
}

/// The `(field, message)` of each cause of a 422.
fn causes(e: &ApiError) -> Vec<(String, String)> {
    let st = e.to_status();
    st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `pkg/apis/core/v1/conversion.go` `Convert_v1_Secret_To_core_Secret` ("StringData
/// overwrites Data"): `stringData` is base64-encoded into `data`, wins over `data` for the
/// same key, and is neither stored nor returned — on create, update and patch.
#[test]
fn secret_string_data_is_folded_into_data_as_conversion_go_does() {
    let mut s = store();
    let created = s
        .create(
            &secrets(),
            Some("default"),
            &json!({"metadata": {"name": "s"},
                "data": {"a": b64("from data"), "b": b64("kept")},
                "stringData": {"a": "from stringData", "c": "plain"}}),
            W,
        )
        .unwrap();
    assert_eq!(
        created["data"],
        json!({"a": b64("from stringData"), "b": b64("kept"), "c": b64("plain")})
    );
    assert!(created.get("stringData").is_none(), "{created}");
    let stored = s.get(&secrets(), Some("default"), "s").unwrap();
    assert_eq!(stored, created);

    // Update: stringData alone (no data) still lands in data.
    let mut next = stored.clone();
    next.as_object_mut().unwrap().remove("data");
    next["stringData"] = json!({"d": "new"});
    let updated = s
        .update(&secrets(), Some("default"), "s", &next, W)
        .unwrap();
    assert_eq!(updated["data"], json!({"d": b64("new")}));
    assert!(updated.get("stringData").is_none());

    // A merge patch of stringData is folded into the stored data.
    let patched = s
        .patch(
            &secrets(),
            Some("default"),
            "s",
            PatchType::Merge,
            &json!({"stringData": {"e": "patched"}}),
            Subresource::Main,
            W,
        )
        .unwrap();
    assert_eq!(
        patched["data"],
        json!({"d": b64("new"), "e": b64("patched")})
    );
    assert!(patched.get("stringData").is_none());
}

/// `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go`: `GenerateName` is
/// `omitempty`, so the `""` a protobuf body carries (gogo-protobuf writes every string
/// field; this is `kubectl create secret generic`'s body) is not kept.
#[test]
fn an_empty_generate_name_from_a_protobuf_body_is_not_stored() {
    fn ld(n: u8, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, u8::try_from(b.len()).unwrap()];
        v.extend_from_slice(b);
        v
    }
    let tm = [ld(1, b"v1"), ld(2, b"Secret")].concat();
    let meta = [ld(1, b"pb"), ld(2, b""), ld(3, b"default")].concat();
    let raw = [ld(1, &meta), ld(3, b"Opaque")].concat();
    let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &raw)].concat();
    let decoded = crate::http::protobuf::decode(&body).unwrap();
    assert_eq!(decoded["metadata"]["generateName"], "", "{decoded}");
    let mut s = store();
    let o = s.create(&secrets(), Some("default"), &decoded, W).unwrap();
    assert!(o["metadata"].get("generateName").is_none(), "{o}");
    // JSON `""` too, and on update.
    let o = s
        .create(
            &GroupResource::new("", "configmaps"),
            Some("default"),
            &json!({"metadata": {"name": "cm", "generateName": ""}}),
            W,
        )
        .unwrap();
    assert!(o["metadata"].get("generateName").is_none(), "{o}");
    let mut next = o.clone();
    next["metadata"]["generateName"] = json!("");
    next["data"] = json!({"k": "v"});
    let o = s
        .update(
            &GroupResource::new("", "configmaps"),
            Some("default"),
            "cm",
            &next,
            W,
        )
        .unwrap();
    assert!(o["metadata"].get("generateName").is_none(), "{o}");
}

/// `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` (`Update`) with
/// `customResourceStrategy.AllowUnconditionalUpdate() == false`
/// (`apiextensions-apiserver/pkg/registry/customresource/strategy.go`): a PUT of a custom
/// resource without a resourceVersion is a 422 naming the resource as its kind — through
/// `/status` too; with one it is conditional as before; a patch (which starts from the
/// stored object) and a server-side apply pass.
#[test]
fn an_unconditional_update_of_a_custom_resource_is_refused_as_store_go_does() {
    let mut s = store();
    with_widgets(&mut s);
    let w = s
        .create(
            &widgets(),
            Some("default"),
            &json!({"metadata": {"name": "w"}, "spec": {"size": 1}}),
            W,
        )
        .unwrap();
    let mut no_rv = w.clone();
    no_rv["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    no_rv["spec"]["size"] = json!(2);
    let e = s
        .update(&widgets(), Some("default"), "w", &no_rv, W)
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(
        e.to_string(),
        r#"widgets.example.com "w" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
    );
    let st = e.to_status();
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(
        st["details"],
        json!({"name": "w", "group": "example.com", "kind": "widgets", "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified for an update",
             "field": "metadata.resourceVersion"}]})
    );
    // An empty resourceVersion is none.
    no_rv["metadata"]["resourceVersion"] = json!("");
    assert_eq!(
        s.update(&widgets(), Some("default"), "w", &no_rv, W)
            .unwrap_err()
            .code(),
        422
    );
    // The status subresource's strategy refuses it too.
    let e = s
        .update_status(
            &widgets(),
            Some("default"),
            "w",
            &json!({"status": {"ready": true}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 422, "{e}");
    // A uid precondition failure is checked first (GuaranteedUpdate's preconditions).
    let e = s
        .update_status(
            &widgets(),
            Some("default"),
            "w",
            &json!({"metadata": {"uid": "other"}, "status": {"ready": true}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 409, "{e}");
    // With the resourceVersion: written.
    let mut with_rv = w.clone();
    with_rv["spec"]["size"] = json!(2);
    let w2 = s
        .update(&widgets(), Some("default"), "w", &with_rv, W)
        .unwrap();
    assert_eq!(w2["spec"]["size"], 2);
    let mut st = w2.clone();
    st["status"] = json!({"ready": true});
    s.update_status(&widgets(), Some("default"), "w", &st, W)
        .unwrap();
    // A merge patch and an apply carry the stored resourceVersion.
    let p = s
        .patch(
            &widgets(),
            Some("default"),
            "w",
            PatchType::Merge,
            &json!({"spec": {"size": 3}}),
            Subresource::Main,
            W,
        )
        .unwrap();
    assert_eq!(p["spec"]["size"], 3);
    let (a, created) = s
        .apply(
            &widgets(),
            Some("default"),
            "w",
            &json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"size": 4}}),
            Subresource::Main,
            &ApplyOptions {
                manager: "m".into(),
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
    assert!(!created);
    assert_eq!(a["spec"]["size"], 4);
    // CustomResourceDefinitions refuse it as well (customresourcedefinition/strategy.go).
    let crd = s.get(&crds(), None, "widgets.example.com").unwrap();
    let mut crd_no_rv = crd.clone();
    crd_no_rv["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let e = s
        .update(&crds(), None, "widgets.example.com", &crd_no_rv, W)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"customresourcedefinitions.apiextensions.k8s.io "widgets.example.com" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
    );
}

/// `AllowUnconditionalUpdate() == true` of the built-in strategies
/// (`pkg/registry/core/{configmap,secret,node,pod}/strategy.go`): a PUT without a
/// resourceVersion overwrites, main endpoint and `/status`.
#[test]
fn built_in_kinds_keep_unconditional_updates() {
    let mut s = store();
    let cm = GroupResource::new("", "configmaps");
    s.create(&cm, Some("default"), &json!({"metadata": {"name": "c"}}), W)
        .unwrap();
    let o = s
        .update(
            &cm,
            Some("default"),
            "c",
            &json!({"metadata": {"name": "c"}, "data": {"a": "b"}}),
            W,
        )
        .unwrap();
    assert_eq!(o["data"]["a"], "b");
    s.create(
        &secrets(),
        Some("default"),
        &json!({"metadata": {"name": "s"}}),
        W,
    )
    .unwrap();
    s.update(
        &secrets(),
        Some("default"),
        "s",
        &json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}),
        W,
    )
    .unwrap();
    let nodes = GroupResource::new("", "nodes");
    s.create(&nodes, None, &json!({"metadata": {"name": "n"}}), W)
        .unwrap();
    s.update(
        &nodes,
        None,
        "n",
        &json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}}),
        W,
    )
    .unwrap();
    s.update_status(
        &nodes,
        None,
        "n",
        &json!({"status": {"phase": "Running"}}),
        W,
    )
    .unwrap();
    s.create(
        &pods(),
        Some("default"),
        &json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        W,
    )
    .unwrap();
    let p = s
        .update_status(
            &pods(),
            Some("default"),
            "p",
            &json!({"status": {"phase": "Running"}}),
            W,
        )
        .unwrap();
    assert_eq!(p["status"]["phase"], "Running");
}

/// `pkg/apis/core/validation/validation.go` `validateContainers`: a Pod needs a container
/// (`spec.containers: Required value`), each with a name and an image.
#[test]
fn pods_need_containers_with_images_as_validate_containers_does() {
    let mut s = store();
    let e = s
        .create(
            &pods(),
            Some("default"),
            &json!({"metadata": {"name": "p"}, "spec": {}}),
            W,
        )
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(
        e.to_string(),
        r#"Pod "p" is invalid: spec.containers: Required value"#
    );
    let e = s
        .create(
            &pods(),
            Some("default"),
            &json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "image": "i"}, {"name": "b"}, {"image": ""}]}}),
            W,
        )
        .unwrap_err();
    assert_eq!(
        causes(&e),
        vec![
            (
                "spec.containers[1].image".into(),
                "Required value".to_string()
            ),
            ("spec.containers[2].name".into(), "Required value".into()),
            ("spec.containers[2].image".into(), "Required value".into()),
        ]
    );
    assert_eq!(
        e.to_status()["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
    // The name's errors come first, in the same 422.
    let e = s
        .create(
            &pods(),
            Some("default"),
            &json!({"metadata": {"name": "Bad"}, "spec": {"containers": [{"name": "a"}]}}),
            W,
        )
        .unwrap_err();
    let c = causes(&e);
    assert_eq!(c[0].0, "metadata.name");
    assert_eq!(c[1].0, "spec.containers[0].image");
    // An update is validated too.
    let p = s
        .create(
            &pods(),
            Some("default"),
            &json!({"metadata": {"name": "ok"}, "spec": {"containers": [{"name": "a", "image": "i"}]}}),
            W,
        )
        .unwrap();
    let mut bad = p.clone();
    bad["spec"]["containers"][0]["image"] = json!("");
    assert_eq!(
        s.update(&pods(), Some("default"), "ok", &bad, W)
            .unwrap_err()
            .code(),
        422
    );
}

/// `pkg/apis/batch/validation/validation.go` `validateJobSpec`: the template's containers
/// as a Pod's, then `restartPolicy` — absent or `Always` (SetDefaults_PodSpec's default) is
/// `Required value: valid values: "OnFailure", "Never"` (since kubernetes#95747, v1.20;
/// before it `Unsupported value: "Always"`), another value `Unsupported value`.
#[test]
fn jobs_need_a_restart_policy_and_images_as_validate_job_spec_does() {
    let mut s = store();
    let job =
        |spec: Value| json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": spec}}});
    let e = s
        .create(
            &jobs(),
            Some("default"),
            &job(json!({"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Always"})),
            W,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"Job.batch "j" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#
    );
    let e = s
        .create(
            &jobs(),
            Some("default"),
            &job(json!({"containers": [{"name": "c"}]})),
            W,
        )
        .unwrap_err();
    assert_eq!(
        causes(&e),
        vec![
            (
                "spec.template.spec.containers[0].image".into(),
                "Required value".to_string()
            ),
            (
                "spec.template.spec.restartPolicy".into(),
                r#"Required value: valid values: "OnFailure", "Never""#.into()
            ),
        ]
    );
    let e = s
        .create(
            &jobs(),
            Some("default"),
            &job(
                json!({"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Sometimes"}),
            ),
            W,
        )
        .unwrap_err();
    assert_eq!(
        causes(&e),
        vec![(
            "spec.template.spec.restartPolicy".into(),
            r#"Unsupported value: "Sometimes": supported values: "OnFailure", "Never""#.into()
        )]
    );
    assert_eq!(
        e.to_status()["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    for policy in ["Never", "OnFailure"] {
        let mut j =
            job(json!({"containers": [{"name": "c", "image": "i"}], "restartPolicy": policy}));
        j["metadata"]["name"] = json!(policy.to_lowercase());
        s.create(&jobs(), Some("default"), &j, W).unwrap();
    }
}

/// `pkg/apis/core/validation/validation.go` `ValidateSecret`: a
/// `kubernetes.io/dockerconfigjson` Secret needs `data[.dockerconfigjson]` — after
/// `stringData` is folded in (conversion runs before validation) — holding JSON.
#[test]
fn docker_config_secrets_need_their_key_as_validate_secret_does() {
    let mut s = store();
    let secret = |extra: Value| {
        let mut o = json!({"metadata": {"name": "pull"}, "type": "kubernetes.io/dockerconfigjson"});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    let e = s
        .create(&secrets(), Some("default"), &secret(json!({})), W)
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(
        e.to_string(),
        r#"Secret "pull" is invalid: data[.dockerconfigjson]: Required value"#
    );
    let e = s
        .create(
            &secrets(),
            Some("default"),
            &secret(json!({"data": {"config.json": b64("{}")}})),
            W,
        )
        .unwrap_err();
    assert_eq!(causes(&e)[0].0, "data[.dockerconfigjson]");
    let e = s
        .create(
            &secrets(),
            Some("default"),
            &secret(json!({"stringData": {".dockerconfigjson": "[1]"}})),
            W,
        )
        .unwrap_err();
    assert_eq!(
        causes(&e),
        vec![(
            "data[.dockerconfigjson]".into(),
            r#"Invalid value: "<secret contents redacted>": json: cannot unmarshal array into Go value of type map[string]interface {}"#.into()
        )]
    );
    // From stringData alone, and from data.
    let o = s
        .create(
            &secrets(),
            Some("default"),
            &secret(json!({"stringData": {".dockerconfigjson": "{\"auths\":{}}"}})),
            W,
        )
        .unwrap();
    assert_eq!(o["data"][".dockerconfigjson"], b64("{\"auths\":{}}"));
    let mut o2 = secret(json!({"data": {".dockerconfigjson": b64("{}")}}));
    o2["metadata"]["name"] = json!("pull2");
    s.create(&secrets(), Some("default"), &o2, W).unwrap();
    // An update that drops the key is refused.
    let mut next = o.clone();
    next["data"] = json!({});
    assert_eq!(
        s.update(&secrets(), Some("default"), "pull", &next, W)
            .unwrap_err()
            .to_string(),
        r#"Secret "pull" is invalid: data[.dockerconfigjson]: Required value"#
    );
}
