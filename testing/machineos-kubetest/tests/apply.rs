//! Server-side apply over HTTP, judged by real clients: kube-rs's wire format (PATCH with
//! `application/apply-patch+yaml`, a JSON body, `?fieldManager=x&force=true`) sent with
//! reqwest, and the installed `kubectl apply --server-side` (skipped with a message when
//! absent) on a ConfigMap and on a machineos custom resource: create, a conflicting
//! apply by another field manager, `--force-conflicts`, and removal of a field dropped
//! from the manifest.

use std::time::Duration;

use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::kubectl::{self, Kubectl};
use serde_json::{Value, json};

mod common;
use common::send;

const APPLY: &str = "application/apply-patch+yaml";

async fn server() -> Server {
    Server::start(new_store(), 0).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_rs_wire_format() {
    let s = server().await;
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let url = format!("{}/api/v1/namespaces/default/configmaps/cfg", s.url());
    let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data});
    let apply = |q: &str, body: Value| {
        c.patch(format!("{url}?{q}"))
            .header("content-type", APPLY)
            .body(body.to_string())
    };
    // Create on apply: 201 with the applier's entry.
    let (code, v) = send(apply("fieldManager=ctrl&force=true", cm(json!({"a": "1"})))).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["metadata"]["managedFields"][0]["manager"], "ctrl");
    assert_eq!(v["metadata"]["managedFields"][0]["operation"], "Apply");
    assert_eq!(
        v["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    // Another manager changing the field without force: 409 with the server's causes.
    let (code, v) = send(apply("fieldManager=other", cm(json!({"a": "2"})))).await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["reason"], "Conflict");
    assert_eq!(
        v["message"],
        r#"Apply failed with 1 conflict: conflict with "ctrl": .data.a"#
    );
    assert_eq!(
        v["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"ctrl\"", "field": ".data.a"}])
    );
    // force=true takes it; the first manager keeps nothing and its entry goes.
    let (code, v) = send(apply(
        "fieldManager=other&force=true",
        cm(json!({"a": "2"})),
    ))
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["data"]["a"], "2");
    let managers: Vec<&str> = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["other"]);
    // A YAML body works too, and a field the manager no longer applies is removed.
    let (code, v) = send(
        c.patch(format!("{url}?fieldManager=other"))
            .header("content-type", APPLY)
            .body("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  b: '3'\n"),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["data"], json!({"b": "3"}));
    // A non-apply patch is tracked as an Update by the User-Agent's program name.
    let (code, v) = send(
        c.patch(&url)
            .header("content-type", "application/merge-patch+json")
            .header("user-agent", "my-controller/1.0 (linux)")
            .body(r#"{"data":{"c":"4"}}"#),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let update = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["operation"] == "Update")
        .unwrap();
    assert_eq!(update["manager"], "my-controller");
    assert_eq!(update["fieldsV1"], json!({"f:data": {"f:c": {}}}));
    // PatchOptions as the real server validates them.
    let (code, v) = send(apply("", cm(json!({})))).await;
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    let (code, v) = send(
        c.patch(format!("{url}?force=true"))
            .header("content-type", "application/merge-patch+json")
            .body("{}"),
    )
    .await;
    assert_eq!(code, 422, "{v}");
    // dryRun=All answers the merged object and stores nothing.
    let (code, v) = send(apply(
        "fieldManager=other&dryRun=All",
        cm(json!({"z": "9"})),
    ))
    .await;
    assert_eq!((code, v["data"]["z"].as_str()), (200, Some("9")));
    let (_, v) = send(c.get(&url)).await;
    assert_eq!(v["data"].get("z"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_server_side() {
    if !kubectl::judge_or_skip("kubectl_apply_server_side") {
        return;
    }
    let s = server().await;
    let home = std::env::temp_dir().join(format!("kubetest-apply-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let k = Kubectl::with_server(s.url(), &home).request_timeout(Duration::from_secs(10));
    tokio::task::spawn_blocking(move || {
        let file = |name: &str, text: &str| {
            let p = k.home().join(name);
            std::fs::write(&p, text).unwrap();
            p.to_string_lossy().into_owned()
        };
        let run = |args: &[&str]| k.ok(args).unwrap_or_else(|e| panic!("{e}"));
        let ssa = ["apply", "--server-side"];
        let with = |extra: &[&str]| -> Vec<String> {
            ssa.iter().chain(extra).map(|s| s.to_string()).collect()
        };
        fn args(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }

        // A ConfigMap: create, re-apply, conflict, force, removal.
        let cm1 = file(
            "cm1.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: \"1\"\n  b: \"2\"\n",
        );
        let out = run(&args(&with(&["-f", &cm1])));
        assert!(out.contains("configmap/web serverside-applied"), "{out}");
        let y = run(&["get", "cm", "web", "-o", "json", "--show-managed-fields"]);
        let v: Value = serde_json::from_str(&y).unwrap();
        assert_eq!(v["metadata"]["managedFields"][0]["manager"], "kubectl");
        assert_eq!(v["metadata"]["managedFields"][0]["operation"], "Apply");
        let cm2 = file(
            "cm2.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: \"changed\"\n",
        );
        let out = k
            .run(&args(&with(&["-f", &cm2, "--field-manager=ops"])))
            .unwrap();
        assert!(!out.success, "a conflicting apply must fail:\n{}", out.stdout);
        let err = out.stderr;
        assert!(
            err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
            "{err}"
        );
        run(&args(&with(&["-f", &cm2, "--field-manager=ops", "--force-conflicts"])));
        let v: Value =
            serde_json::from_str(&run(&["get", "cm", "web", "-o", "json"])).unwrap();
        assert_eq!(v["data"], json!({"a": "changed", "b": "2"}));
        // kubectl drops b from its manifest (a now belongs to ops): b is removed.
        let cm3 = file(
            "cm3.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: \"changed\"\n",
        );
        run(&args(&with(&["-f", &cm3])));
        let v: Value =
            serde_json::from_str(&run(&["get", "cm", "web", "-o", "json"])).unwrap();
        assert_eq!(v["data"], json!({"a": "changed"}));

        // machineos's CRDs, then a MachineConfigPool applied by two managers.
        let crds = file("crds.yaml", &machineos_api::crds_yaml());
        run(&args(&with(&["-f", &crds])));
        let pool = |spec: &str| {
            format!(
                "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n{spec}"
            )
        };
        let p1 = file(
            "p1.yaml",
            &pool("  paused: true\n  maxUnavailable: 1\n  nodeSelector:\n    matchLabels:\n      role: worker\n"),
        );
        let out = run(&args(&with(&["-f", &p1])));
        assert!(out.contains("serverside-applied"), "{out}");
        let p2 = file("p2.yaml", &pool("  maxUnavailable: 2\n"));
        let out = k
            .run(&args(&with(&["-f", &p2, "--field-manager=ops"])))
            .unwrap();
        assert!(!out.success);
        let err = out.stderr;
        assert!(
            err.contains(r#"conflict with "kubectl": .spec.maxUnavailable"#),
            "{err}"
        );
        run(&args(&with(&["-f", &p2, "--field-manager=ops", "--force-conflicts"])));
        // The first manager drops nodeSelector: it goes; maxUnavailable (ops's now) stays.
        let p3 = file("p3.yaml", &pool("  paused: true\n"));
        run(&args(&with(&["-f", &p3])));
        let v: Value =
            serde_json::from_str(&run(&["get", "mcp", "worker", "-o", "json"])).unwrap();
        assert_eq!(v["spec"]["maxUnavailable"], 2, "{v}");
        assert_eq!(v["spec"]["paused"], true);
        assert!(v["spec"].get("nodeSelector").is_none(), "{v}");
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&home);
}
