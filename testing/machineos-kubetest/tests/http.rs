//! The HTTP layer driven over real sockets: reqwest for the REST verbs, `Status` errors
//! and watch streams, and the installed `kubectl` (skipped with a message when absent).
//! kubectl runs with its default validation (the server does it, see `http::openapi`).

use std::time::{Duration, Instant};

use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::kubectl::{self, Kubectl};
use serde_json::{Value, json};

mod common;
use common::send;

async fn server() -> Server {
    Server::start(new_store(), 0).await.unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn json_body(rb: reqwest::RequestBuilder, ct: &str, v: &Value) -> reqwest::RequestBuilder {
    rb.header("content-type", ct).body(v.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_documents() {
    let s = server().await;
    let c = client();
    let (code, v) = send(c.get(format!("{}/version", s.url()))).await;
    assert_eq!(code, 200);
    assert_eq!(v["major"], "1");
    let (_, v) = send(c.get(format!("{}/api", s.url()))).await;
    assert_eq!(v["versions"], json!(["v1"]));
    let (_, v) = send(c.get(format!("{}/api/v1", s.url()))).await;
    let names: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"configmaps") && names.contains(&"pods/status"));
    let (_, v) = send(c.get(format!("{}/apis", s.url()))).await;
    assert!(
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "batch")
    );
    let (_, v) = send(c.get(format!("{}/apis/batch/v1", s.url()))).await;
    assert_eq!(v["groupVersion"], "batch/v1");
    let (code, v) = send(c.get(format!("{}/apis/nope/v1", s.url()))).await;
    assert_eq!((code, v["reason"].clone()), (404, json!("NotFound")));
}

#[tokio::test(flavor = "multi_thread")]
async fn configmap_crud_and_errors() {
    let s = server().await;
    let c = client();
    let base = format!("{}/api/v1/namespaces/default/configmaps", s.url());
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"app": "web"}}, "data": {"a": "b"}});
    let (code, v) = send(json_body(c.post(&base), "application/json", &cm)).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["metadata"]["namespace"], "default");
    let (code, v) = send(json_body(c.post(&base), "application/json", &cm)).await;
    assert_eq!((code, v["reason"].as_str()), (409, Some("AlreadyExists")));
    // dryRun creates nothing.
    let dry = json!({"metadata": {"name": "dry"}});
    let (code, _) = send(json_body(
        c.post(format!("{base}?dryRun=All")),
        "application/json",
        &dry,
    ))
    .await;
    assert_eq!(code, 201);
    let (code, _) = send(c.get(format!("{base}/dry"))).await;
    assert_eq!(code, 404);
    let (code, v) = send(c.get(format!("{base}/x"))).await;
    assert_eq!((code, v["data"]["a"].as_str()), (200, Some("b")));
    let (_, v) = send(c.get(format!(
        "{}/api/v1/configmaps?labelSelector=app%3Dweb",
        s.url()
    )))
    .await;
    assert_eq!(v["kind"], "ConfigMapList");
    assert_eq!(v["items"].as_array().unwrap().len(), 1);
    let (_, v) = send(c.get(format!("{base}?labelSelector=app%3Ddb"))).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 0);
    for (ct, p) in [
        ("application/merge-patch+json", json!({"data": {"c": "d"}})),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/e", "value": "f"}]),
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"data": {"g": "h"}}),
        ),
    ] {
        let (code, v) = send(json_body(c.patch(format!("{base}/x")), ct, &p)).await;
        assert_eq!(code, 200, "{ct}: {v}");
    }
    let (_, v) = send(c.get(format!("{base}/x"))).await;
    assert_eq!(v["data"], json!({"a": "b", "c": "d", "e": "f", "g": "h"}));
    // A stale resourceVersion is a 409 Conflict.
    let mut stale = v.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, v2) = send(json_body(
        c.put(format!("{base}/x")),
        "application/json",
        &stale,
    ))
    .await;
    assert_eq!((code, v2["reason"].as_str()), (409, Some("Conflict")));
    let (code, _) = send(json_body(
        c.put(format!("{base}/x")),
        "application/json",
        &v,
    ))
    .await;
    assert_eq!(code, 200);
    // An invalid name is a 422 with causes.
    let bad = json!({"metadata": {"name": "Bad_Name"}});
    let (code, v) = send(json_body(c.post(&base), "application/json", &bad)).await;
    assert_eq!((code, v["reason"].as_str()), (422, Some("Invalid")));
    assert!(v["details"]["causes"].is_array());
    // Malformed JSON is a 400; an unknown resource a 404; an unsupported patch a 415.
    let (code, _) = send(
        c.post(&base)
            .header("content-type", "application/json")
            .body("{"),
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = send(c.get(format!("{}/api/v1/nopes", s.url()))).await;
    assert_eq!(code, 404);
    let (code, _) = send(json_body(
        c.patch(format!("{base}/x")),
        "text/plain",
        &json!({}),
    ))
    .await;
    assert_eq!(code, 415);
    let (code, v) = send(c.delete(format!("{base}/x"))).await;
    assert_eq!((code, v["status"].as_str()), (200, Some("Success")));
    let (code, v) = send(c.get(format!("{base}/x"))).await;
    assert_eq!((code, v["reason"].as_str()), (404, Some("NotFound")));
    let (code, _) = send(c.delete(format!("{base}/x"))).await;
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn status_subresource_and_finalizers() {
    let s = server().await;
    let c = client();
    let base = format!("{}/apis/batch/v1/namespaces/default/jobs", s.url());
    let job = json!({"metadata": {"name": "j", "finalizers": ["x/y"]}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}, "status": {"active": 1}});
    let (code, v) = send(json_body(c.post(&base), "application/json", &job)).await;
    assert_eq!(code, 201, "{v}");
    let (code, v) = send(json_body(
        c.patch(format!("{base}/j/status")),
        "application/merge-patch+json",
        &json!({"status": {"succeeded": 1}}),
    ))
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"]["succeeded"], 1);
    let (code, v) = send(c.get(format!("{base}/j/status"))).await;
    assert_eq!((code, v["status"]["succeeded"].as_i64()), (200, Some(1)));
    // Finalizers hold the object: 202 with the marked object.
    let (code, v) = send(
        c.delete(format!("{base}/j"))
            .body(json!({"propagationPolicy": "Background"}).to_string()),
    )
    .await;
    assert_eq!(code, 202, "{v}");
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = send(json_body(
        c.patch(format!("{base}/j")),
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    ))
    .await;
    assert_eq!(code, 200);
    let (code, _) = send(c.get(format!("{base}/j"))).await;
    assert_eq!(code, 404);
    // A cluster-scoped resource under a namespace is a 404.
    let (code, _) = send(c.get(format!("{}/api/v1/namespaces/default/nodes", s.url()))).await;
    assert_eq!(code, 404);
}

/// Over HTTP, as kube-rs and kubectl see it: a PUT of a custom resource (or of its
/// `/status`) without `metadata.resourceVersion` is kube-apiserver's 422 from
/// `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` (`Update`, with
/// `customResourceStrategy.AllowUnconditionalUpdate() == false`); a ConfigMap PUT without
/// one is taken; a Secret's `stringData` comes back as `data`
/// (`pkg/apis/core/v1/conversion.go`).
#[tokio::test(flavor = "multi_thread")]
async fn unconditional_put_of_a_custom_resource_is_invalid() {
    let s = server().await;
    let c = client();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let crds = format!(
        "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        s.url()
    );
    let (code, v) = send(json_body(c.post(&crds), "application/json", &crd)).await;
    assert_eq!(code, 201, "{v}");
    let base = format!("{}/apis/example.com/v1/namespaces/default/widgets", s.url());
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}});
    let (code, created) = send(json_body(c.post(&base), "application/json", &w)).await;
    assert_eq!(code, 201, "{created}");
    for url in [format!("{base}/w"), format!("{base}/w/status")] {
        let (code, v) = send(json_body(c.put(&url), "application/json", &w)).await;
        assert_eq!(code, 422, "{url}: {v}");
        assert_eq!(
            v["message"],
            r#"widgets.example.com "w" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
        );
        assert_eq!(v["details"]["kind"], "widgets");
        assert_eq!(
            v["details"]["causes"][0]["field"],
            "metadata.resourceVersion"
        );
    }
    let mut with_rv = created.clone();
    with_rv["spec"]["a"] = json!(2);
    let (code, v) = send(json_body(
        c.put(format!("{base}/w")),
        "application/json",
        &with_rv,
    ))
    .await;
    assert_eq!((code, v["spec"]["a"].as_i64()), (200, Some(2)), "{v}");
    // Built-in kinds allow it; stringData is returned as data.
    let secrets = format!("{}/api/v1/namespaces/default/secrets", s.url());
    let sec = json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}});
    let (code, v) = send(json_body(c.post(&secrets), "application/json", &sec)).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["data"], json!({"k": "dg=="}));
    assert!(v.get("stringData").is_none(), "{v}");
    let sec = json!({"metadata": {"name": "s"}, "stringData": {"k": "w"}});
    let (code, v) = send(json_body(
        c.put(format!("{secrets}/s")),
        "application/json",
        &sec,
    ))
    .await;
    assert_eq!(
        (code, v["data"].clone()),
        (200, json!({"k": "dw=="})),
        "{v}"
    );
}

fn frames(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_streams_changes_and_times_out() {
    let s = server().await;
    let c = client();
    let base = format!("{}/api/v1/namespaces/default/configmaps", s.url());
    let (_, list) = send(c.get(&base)).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let started = Instant::now();
    let w = {
        let c = c.clone();
        let url = format!("{base}?watch=true&resourceVersion={rv}&timeoutSeconds=2");
        tokio::spawn(async move { c.get(url).send().await.unwrap().text().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, _) = send(json_body(
        c.post(&base),
        "application/json",
        &json!({"metadata": {"name": "w"}}),
    ))
    .await;
    assert_eq!(code, 201);
    let (code, _) = send(c.delete(format!("{base}/w"))).await;
    assert_eq!(code, 200);
    let text = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(2));
    let types: Vec<Value> = frames(&text).iter().map(|f| f["type"].clone()).collect();
    assert_eq!(types, vec![json!("ADDED"), json!("DELETED")]);
    // Without a resourceVersion the watch starts with the current state.
    let text = c
        .get(format!(
            "{}/api/v1/namespaces?watch=1&timeoutSeconds=1",
            s.url()
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(frames(&text).len(), 4);
    // A compacted start is an ERROR frame carrying 410.
    {
        let st = s.store();
        let mut st = st.lock().unwrap();
        let now = st.resource_version();
        st.compact(now);
    }
    let text = c
        .get(format!(
            "{base}?watch=true&resourceVersion=1&timeoutSeconds=5"
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let f = frames(&text);
    assert_eq!(f.len(), 1, "{text}");
    assert_eq!(f[0]["type"], "ERROR");
    assert_eq!(f[0]["object"]["code"], 410);
}

#[tokio::test(flavor = "multi_thread")]
async fn real_kubectl() {
    if !kubectl::judge_or_skip("real_kubectl") {
        return;
    }
    let s = server().await;
    let home = std::env::temp_dir().join(format!("kubetest-http-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let k = Kubectl::with_server(s.url(), &home).request_timeout(Duration::from_secs(10));
    tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| k.ok(args).unwrap_or_else(|e| panic!("{e}"));
        run(&["get", "configmaps", "-A"]);
        run(&["create", "configmap", "x", "--from-literal=a=b"]);
        let y = run(&["get", "cm", "x", "-o", "yaml"]);
        assert!(y.contains("a: b") && y.contains("name: x"), "{y}");
        let t = run(&["get", "cm"]);
        assert!(t.contains('x'), "{t}");
        run(&["label", "cm", "x", "app=web"]);
        let t = run(&["get", "cm", "-l", "app=web", "-o", "name"]);
        assert_eq!(t.trim(), "configmap/x");
        run(&[
            "patch",
            "cm",
            "x",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"c":"d"}}"#,
        ]);
        run(&["delete", "cm", "x"]);
        let out = k.run(&["get", "cm", "x"]).unwrap();
        let (ok, err) = (out.success, out.stderr);
        assert!(
            !ok && err.contains("NotFound") || err.contains("not found"),
            "{err}"
        );
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&home);
}
