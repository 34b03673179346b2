//! TLS with a bearer token, the test controls (faults, delays, request counts, closing
//! watches, compacting history) and the kubelet/Job-controller hooks, driven over real
//! sockets with reqwest, the `kubetest` binary and the installed `kubectl`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use machineos_kubetest::control::{Fault, RequestMatch};
use machineos_kubetest::hooks::{self, JobController, JobOutcome, PodPhase};
use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::kubectl::{self, Kubectl};
use machineos_kubetest::{GroupResource, WriteOptions};
use serde_json::{Value, json};

mod common;
use common::send;

const W: WriteOptions = WriteOptions { dry_run: false };

fn tls_client(s: &Server) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(s.ca_pem().unwrap().as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([ca])
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// A JSON request body (reqwest's `json` feature is not enabled in this workspace).
trait JsonBody {
    fn js(self, v: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn js(self, v: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(serde_json::to_vec(v).unwrap())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_with_a_bearer_token_and_anonymous_auth_as_kube_apiserver_defaults() {
    let s = Server::start_tls(new_store(), 0).await.unwrap();
    assert!(s.url().starts_with("https://127.0.0.1:"));
    let c = tls_client(&s);
    let token = s.token().unwrap().to_string();
    let url = s.url();
    // With the token: everything.
    let (code, ns) = send(
        c.get(format!("{url}/api/v1/namespaces"))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(ns["kind"], "NamespaceList");
    // A wrong token is 401 whatever the path (an invalid bearer token is an
    // authentication error, not anonymous).
    for path in ["/version", "/api/v1/namespaces"] {
        let (code, st) = send(c.get(format!("{url}{path}")).bearer_auth("nope")).await;
        assert_eq!(code, 401, "{path}");
        assert_eq!(
            st,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    }
    // No credentials: system:anonymous, allowed /version and /healthz by the default
    // system:public-info-viewer role, forbidden the rest.
    let (code, v) = send(c.get(format!("{url}/version"))).await;
    assert_eq!(code, 200);
    assert!(v["gitVersion"].is_string());
    let r = c.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (code, st) = send(c.get(format!("{url}/api/v1/namespaces/default/configmaps"))).await;
    assert_eq!(code, 403);
    assert_eq!(st["reason"], "Forbidden");
    assert_eq!(
        st["message"],
        "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let (code, st) = send(c.get(format!("{url}/apis"))).await;
    assert_eq!(code, 403);
    assert_eq!(
        st["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/apis\""
    );
    // A client that does not trust the CA cannot connect.
    assert!(
        plain_client()
            .get(format!("{url}/version"))
            .send()
            .await
            .is_err()
    );
    // The kubeconfig carries both.
    let k = s.kubeconfig();
    assert!(k.contains(&format!("server: {url}\n")));
    assert!(k.contains("certificate-authority-data: "));
    assert!(k.contains(&format!("token: {token}\n")));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_anonymous_auth_every_request_needs_the_token() {
    let s = Server::start_with(
        new_store(),
        machineos_kubetest::http::ServerOptions {
            tls: true,
            anonymous_auth: false,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let c = tls_client(&s);
    let (code, st) = send(c.get(format!("{}/version", s.url()))).await;
    assert_eq!(code, 401);
    assert_eq!(st["reason"], "Unauthorized");
    let (code, _) = send(
        c.get(format!("{}/version", s.url()))
            .bearer_auth(s.token().unwrap()),
    )
    .await;
    assert_eq!(code, 200);
}

#[test]
fn the_binary_serves_tls_and_writes_a_kubeconfig_kubectl_uses() {
    let dir = std::env::temp_dir().join(format!("kubetest-tls-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let _ = std::fs::remove_file(&kc);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubetest"))
        .args(["serve", "--tls", "--kubeconfig-out"])
        .arg(&kc)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // The URL line comes once the server listens and the kubeconfig is written.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{url:?}");
    let text = std::fs::read_to_string(&kc).unwrap();
    assert!(text.contains(&format!("server: {url}\n")), "{text}");
    assert!(text.contains("certificate-authority-data: "), "{text}");
    assert!(text.contains("    token: "), "{text}");
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    if kubectl::judge_or_skip("the kubectl part of the kubetest binary test") {
        let k = Kubectl::with_kubeconfig(&kc, &dir).request_timeout(Duration::from_secs(10));
        let out = k
            .ok(&["get", "namespaces", "-o", "name"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.contains("namespace/default"), "{out}");
        // The same with a wrong token: kubectl reports the server's 401.
        let bad = dir.join("bad");
        let token_line = text
            .lines()
            .find(|l| l.trim_start().starts_with("token: "))
            .unwrap();
        std::fs::write(&bad, text.replace(token_line, "    token: wrong")).unwrap();
        let k = Kubectl::with_kubeconfig(&bad, &dir).request_timeout(Duration::from_secs(10));
        let out = k.run(&["get", "configmaps"]).unwrap();
        assert!(!out.success, "{}", out.stdout);
        let err = out.stderr;
        assert!(
            err.contains("Unauthorized") || err.contains("provide credentials"),
            "{err}"
        );
    }
    // Closing stdin stops the server.
    drop(child.stdin.take());
    if let Err(e) = kubectl::wait(&mut child, "kubetest", Duration::from_secs(30)) {
        panic!("kubetest did not stop: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn injected_faults_answer_n_requests_with_a_status() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = plain_client();
    let cms = format!("{}/api/v1/namespaces/default/configmaps", s.url());
    s.controls().fail_next(
        RequestMatch::path("/api/v1/namespaces/default/configmaps").method("GET"),
        2,
        Fault::too_many_requests(1),
    );
    s.controls().fail_next(
        RequestMatch::path("/api/v1/namespaces/default/configmaps").method("POST"),
        1,
        Fault::internal_error(),
    );
    s.controls().fail_next(
        RequestMatch::path("/version"),
        1,
        Fault::service_unavailable(),
    );
    for _ in 0..2 {
        let r = c.get(&cms).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 429);
        assert_eq!(r.headers()["retry-after"], "1");
        let st: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert_eq!(st["reason"], "TooManyRequests");
        assert_eq!(st["details"]["retryAfterSeconds"], 1);
    }
    let (code, list) = send(c.get(&cms)).await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
    let body = json!({"metadata": {"name": "a"}});
    let (code, st) = send(c.post(&cms).js(&body)).await;
    assert_eq!((code, st["reason"].as_str()), (500, Some("InternalError")));
    let (code, _) = send(c.post(&cms).js(&body)).await;
    assert_eq!(code, 201, "the fault answered one request only");
    let (code, st) = send(c.get(format!("{}/version", s.url()))).await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (503, Some("ServiceUnavailable"))
    );
    let (code, _) = send(c.get(format!("{}/version", s.url()))).await;
    assert_eq!(code, 200);
    // Counted, faulted or not, per audit verb and resource.
    let n = s.controls().counts();
    assert_eq!(n.get("list", "configmaps"), 3);
    assert_eq!(n.get("create", "configmaps"), 2);
    assert_eq!(n.get("get", "/version"), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn delays_hold_matching_requests_only() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = plain_client();
    let d = Duration::from_millis(300);
    s.controls()
        .delay(RequestMatch::path("/api/v1/nodes"), d, Some(1));
    let t = Instant::now();
    let (code, _) = send(c.get(format!("{}/api/v1/nodes", s.url()))).await;
    assert_eq!(code, 200);
    // A lower bound only: the held request cannot have been answered sooner.
    assert!(t.elapsed() >= d);
    // The rule was for one request; others were never held (nothing to assert on time).
    let (code, _) = send(c.get(format!("{}/api/v1/nodes", s.url()))).await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn request_counts_name_verbs_as_the_audit_log() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = plain_client();
    let base = format!("{}/api/v1/namespaces/default/configmaps", s.url());
    send(c.post(&base).js(&json!({"metadata": {"name": "a"}}))).await;
    send(c.get(format!("{base}/a"))).await;
    send(c.get(&base)).await;
    let (_, o) = send(c.get(format!("{base}/a"))).await;
    send(c.put(format!("{base}/a")).js(&o)).await;
    send(
        c.patch(format!("{base}/a"))
            .header("content-type", "application/merge-patch+json")
            .body(r#"{"data":{"k":"v"}}"#),
    )
    .await;
    send(c.delete(format!("{base}/a"))).await;
    send(c.delete(&base)).await;
    let r = c
        .get(format!("{base}?watch=true&timeoutSeconds=1"))
        .send()
        .await
        .unwrap();
    let _ = r.bytes().await;
    send(c.get(format!("{}/apis/batch/v1/namespaces/default/jobs", s.url()))).await;
    let n = s.controls().counts();
    for (verb, res, want) in [
        ("create", "configmaps", 1),
        ("get", "configmaps", 2),
        ("list", "configmaps", 1),
        ("update", "configmaps", 1),
        ("patch", "configmaps", 1),
        ("delete", "configmaps", 1),
        ("deletecollection", "configmaps", 1),
        ("watch", "configmaps", 1),
        ("list", "jobs.batch", 1),
    ] {
        assert_eq!(n.get(verb, res), want, "{verb} {res}: {n:?}");
    }
    s.controls().reset_counts();
    assert_eq!(s.controls().counts().verb("get"), 0);
}

/// Reads watch frames until `pred` matches one or the stream ends; the frames read.
async fn frames_until(
    r: &mut reqwest::Response,
    pred: impl Fn(&Value) -> bool,
) -> (Vec<Value>, bool) {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(20), r.chunk()).await {
            Ok(Ok(Some(b))) => {
                buf.extend_from_slice(&b);
                while let Some(i) = buf.iter().position(|c| *c == b'\n') {
                    let line: Vec<u8> = buf.drain(..=i).collect();
                    let v: Value = serde_json::from_slice(&line).unwrap();
                    let hit = pred(&v);
                    out.push(v);
                    if hit {
                        return (out, false);
                    }
                }
            }
            Ok(Ok(None)) => return (out, true),
            Ok(Err(e)) => panic!("watch stream failed: {e}"),
            Err(_) => panic!("no watch frame in 20s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn close_watches_ends_every_stream_and_compaction_makes_old_versions_gone() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = plain_client();
    let base = format!("{}/api/v1/namespaces/default/configmaps", s.url());
    let (_, cm) = send(c.post(&base).js(&json!({"metadata": {"name": "a"}}))).await;
    let rv = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut w1 = c
        .get(format!("{base}?watch=true&resourceVersion={rv}"))
        .send()
        .await
        .unwrap();
    let mut w2 = c
        .get(format!("{}/api/v1/pods?watch=true", s.url()))
        .send()
        .await
        .unwrap();
    send(c.post(&base).js(&json!({"metadata": {"name": "b"}}))).await;
    let (f, _) = frames_until(&mut w1, |f| f["object"]["metadata"]["name"] == "b").await;
    assert_eq!(f.last().unwrap()["type"], "ADDED");
    s.close_watches();
    // Written after the close: never sent on the closed stream.
    send(c.post(&base).js(&json!({"metadata": {"name": "c"}}))).await;
    let (f, ended) = frames_until(&mut w1, |_| true).await;
    assert!(ended && f.is_empty(), "{f:?}");
    let (f, ended) = frames_until(&mut w2, |_| true).await;
    assert!(ended && f.is_empty(), "{f:?}");
    // A new watch from the old version sees what it missed...
    let mut w3 = c
        .get(format!("{base}?watch=true&resourceVersion={rv}"))
        .send()
        .await
        .unwrap();
    let (f, _) = frames_until(&mut w3, |f| f["object"]["metadata"]["name"] == "c").await;
    assert_eq!(f.len(), 2);
    // ... until history is compacted: then it is 410 Gone inside the watch.
    let at = s.compact_history();
    assert!(at > rv.parse::<u64>().unwrap());
    let mut w4 = c
        .get(format!("{base}?watch=true&resourceVersion={rv}"))
        .send()
        .await
        .unwrap();
    let (f, _) = frames_until(&mut w4, |_| true).await;
    assert_eq!(f[0]["type"], "ERROR");
    assert_eq!(f[0]["object"]["code"], 410);
    assert_eq!(f[0]["object"]["reason"], "Expired");
    // From the compaction point on, watching works.
    let mut w5 = c
        .get(format!("{base}?watch=true&resourceVersion={at}"))
        .send()
        .await
        .unwrap();
    send(c.post(&base).js(&json!({"metadata": {"name": "d"}}))).await;
    let (f, _) = frames_until(&mut w5, |f| f["object"]["metadata"]["name"] == "d").await;
    assert_eq!(f.len(), 1);
}

fn job_body(name: &str, extra: Value) -> Value {
    let mut spec = json!({"template": {"metadata": {"labels": {"app": "build"}},
        "spec": {"restartPolicy": "Never",
            "containers": [{"name": "build", "image": "registry.example/builder:1"}]}}});
    if let (Some(m), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec})
}

fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

fn pods_of(s: &Server, job: &str) -> Vec<Value> {
    let st = s.store();
    let st = st.lock().unwrap();
    st.objects()
        .filter(|(k, v)| {
            k.gr.resource == "pods"
                && v["metadata"]["labels"]["batch.kubernetes.io/job-name"] == job
        })
        .map(|(_, v)| v.clone())
        .collect()
}

fn cond_types(job: &Value) -> Vec<String> {
    job["status"]["conditions"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| c["type"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_job_hooks_run_a_job_to_success_or_failure_and_watches_see_it() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = plain_client();
    let sh = s.shared();
    let created = s
        .store()
        .lock()
        .unwrap()
        .create(&jobs(), Some("default"), &job_body("ok", json!({})), W)
        .unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let mut watch = c
        .get(format!(
            "{}/apis/batch/v1/namespaces/default/jobs?watch=true&resourceVersion={}",
            s.url(),
            created["metadata"]["resourceVersion"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    // Step by step: the controller creates the pod, the kubelet runs it.
    let j = hooks::sync_job(sh, "default", "ok").unwrap();
    assert_eq!(j["status"]["active"], 1);
    assert!(j["status"]["startTime"].is_string());
    let pods = pods_of(&s, "ok");
    assert_eq!(pods.len(), 1);
    let p = &pods[0];
    let pn = p["metadata"]["name"].as_str().unwrap().to_string();
    assert!(pn.starts_with("ok-"));
    assert_eq!(
        p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"],
        uid.as_str()
    );
    assert_eq!(p["metadata"]["labels"]["app"], "build");
    let o = &p["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            o["uid"].as_str(),
            o["controller"].as_bool(),
            o["blockOwnerDeletion"].as_bool()
        ),
        (Some(uid.as_str()), Some(true), Some(true))
    );
    let pod = hooks::set_pod_phase(sh, "default", &pn, &PodPhase::Running).unwrap();
    assert_eq!(pod["status"]["phase"], "Running");
    let j = hooks::sync_job(sh, "default", "ok").unwrap();
    assert_eq!(j["status"]["ready"], 1);
    let pod = hooks::set_pod_phase(
        sh,
        "default",
        &pn,
        &PodPhase::Succeeded {
            message: "built sha256:abc".into(),
        },
    )
    .unwrap();
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"],
        "built sha256:abc"
    );
    let j = hooks::sync_job(sh, "default", "ok").unwrap();
    assert_eq!(cond_types(&j), ["SuccessCriteriaMet", "Complete"]);
    assert_eq!(
        (
            j["status"]["succeeded"].as_u64(),
            j["status"]["active"].as_u64()
        ),
        (Some(1), Some(0))
    );
    assert!(j["status"]["completionTime"].is_string());
    // The watch saw the interim condition before the terminal one.
    let (f, _) = frames_until(&mut watch, |f| {
        cond_types(&f["object"]).contains(&"Complete".to_string())
    })
    .await;
    let interim = f
        .iter()
        .position(|f| cond_types(&f["object"]) == ["SuccessCriteriaMet"]);
    assert!(interim.is_some(), "{f:#?}");

    // Failure in one call: backoffLimit + 1 pods fail, FailureTarget then Failed.
    s.store()
        .lock()
        .unwrap()
        .create(
            &jobs(),
            Some("default"),
            &job_body("bad", json!({"backoffLimit": 2})),
            W,
        )
        .unwrap();
    let j = hooks::run_job(
        sh,
        "default",
        "bad",
        &JobOutcome::Fail {
            exit_code: 2,
            message: "no space".into(),
        },
    )
    .unwrap();
    assert_eq!(cond_types(&j), ["FailureTarget", "Failed"]);
    assert_eq!(
        j["status"]["conditions"][1]["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(j["status"]["failed"], 3);
    assert!(j["status"].get("completionTime").is_none());
    let pods = pods_of(&s, "bad");
    assert_eq!(pods.len(), 3);
    for p in &pods {
        let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(
            (t["exitCode"].as_i64(), t["message"].as_str()),
            (Some(2), Some("no space"))
        );
    }
    // And kubectl's view: `wait --for=condition=complete` reads the same status.
    let (code, j) = send(c.get(format!(
        "{}/apis/batch/v1/namespaces/default/jobs/ok",
        s.url()
    )))
    .await;
    assert_eq!(code, 200);
    assert_eq!(cond_types(&j), ["SuccessCriteriaMet", "Complete"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_automatic_job_controller_finishes_every_new_job() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = plain_client();
    let _ctl = JobController::spawn(
        s.shared().clone(),
        JobOutcome::Succeed {
            message: "done".into(),
        },
    );
    let url = format!("{}/apis/batch/v1/namespaces/default/jobs", s.url());
    for name in ["a", "b"] {
        let (code, _) = send(
            c.post(&url)
                .js(&job_body(name, json!({"completions": 2, "parallelism": 2}))),
        )
        .await;
        assert_eq!(code, 201);
    }
    let done = hooks::wait_for(s.shared(), Duration::from_secs(30), |st| {
        let all: Vec<bool> = ["a", "b"]
            .iter()
            .map(|n| {
                st.get(&jobs(), Some("default"), n)
                    .map(|j| hooks::job_finished(&j))
                    .unwrap_or(false)
            })
            .collect();
        all.iter().all(|d| *d).then_some(())
    })
    .await;
    assert!(done.is_some(), "the jobs did not finish");
    let (_, j) = send(c.get(format!("{url}/a"))).await;
    assert_eq!(j["status"]["succeeded"], 2);
    assert_eq!(cond_types(&j), ["SuccessCriteriaMet", "Complete"]);
    assert_eq!(pods_of(&s, "a").len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn node_readiness_and_pod_phases_through_status() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let sh = s.shared();
    let n = hooks::ensure_node(sh, "worker-0").unwrap();
    let ready = |n: &Value| {
        n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(ready(&n), "True");
    let n = hooks::set_node_ready(sh, "worker-0", false).unwrap();
    assert_eq!(ready(&n), "False");
    let pods = GroupResource::new("", "pods");
    s.store()
        .lock()
        .unwrap()
        .create(
            &pods,
            Some("default"),
            &json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            W,
        )
        .unwrap();
    for (phase, want) in [
        (PodPhase::Pending, "Pending"),
        (PodPhase::Running, "Running"),
        (
            PodPhase::Failed {
                exit_code: 137,
                message: "OOMKilled".into(),
            },
            "Failed",
        ),
    ] {
        let p = hooks::set_pod_phase(sh, "default", "p", &phase).unwrap();
        assert_eq!(p["status"]["phase"], want);
        // Status writes never touch the spec.
        assert_eq!(p["spec"]["containers"][0]["image"], "i");
    }
    assert!(hooks::set_pod_phase(sh, "default", "missing", &PodPhase::Running).is_err());
}

/// kube-controller-manager's disruption controller keeps every budget's status current with
/// its pods (`pkg/controller/disruption/disruption.go`, `trySync` → `updatePdbStatus`), not
/// only when an eviction asks: a pod turning unready lowers `currentHealthy` and
/// `disruptionsAllowed` at once, and `kubectl get pdb` shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disruption_controller_keeps_budget_status_current() {
    let server = Server::start_tls(new_store(), 0).await.unwrap();
    let shared = server.shared().clone();
    let _controller = hooks::DisruptionController::spawn(shared.clone());
    let pods = GroupResource::new("", "pods");
    let pdbs = GroupResource::new("policy", "poddisruptionbudgets");
    {
        let mut s = shared.lock();
        for name in ["p1", "p2", "p3"] {
            let p = s
                .create(
                    &pods,
                    Some("default"),
                    &json!({"metadata": {"name": name, "labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
                    W,
                )
                .unwrap();
            let mut p = p;
            p["status"] = json!({"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]});
            s.update_status(&pods, Some("default"), name, &p, W)
                .unwrap();
        }
        s.create(
            &pdbs,
            Some("default"),
            &json!({"metadata": {"name": "web"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}),
            W,
        )
        .unwrap();
        shared.notify(s.resource_version());
    }
    let status_is = |healthy: i64, allowed: i64| {
        let shared = shared.clone();
        async move {
            hooks::wait_for(&shared, Duration::from_secs(20), |s| {
                let pdb = s.get(&pdbs_gr(), Some("default"), "web").ok()?;
                let st = &pdb["status"];
                (st["currentHealthy"] == healthy
                    && st["disruptionsAllowed"] == allowed
                    && st["expectedPods"] == 3
                    && st["desiredHealthy"] == 2)
                    .then_some(())
            })
            .await
            .unwrap_or_else(|| panic!("status never reached healthy {healthy}, allowed {allowed}"))
        }
    };
    status_is(3, 1).await;
    // p1 turns unready: no disruption is allowed any more.
    {
        let mut s = shared.lock();
        let mut p = s.get(&pods, Some("default"), "p1").unwrap();
        p["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
        s.update_status(&pods, Some("default"), "p1", &p, W)
            .unwrap();
        shared.notify(s.resource_version());
    }
    status_is(2, 0).await;
    let pdb = shared.lock().get(&pdbs, Some("default"), "web").unwrap();
    assert_eq!(
        pdb["status"]["conditions"][0]["reason"], "InsufficientPods",
        "{pdb}"
    );
    if kubectl::judge_or_skip("kubectl get pdb") {
        let dir = tempfile::tempdir().unwrap();
        let (k, _) = Kubectl::for_server(&server, dir.path()).unwrap();
        let table = k.ok(&["get", "pdb", "web", "--no-headers"]).unwrap();
        let cols: Vec<&str> = table.split_whitespace().collect();
        assert_eq!(cols[..4], ["web", "2", "N/A", "0"], "{table}");
    }
}

fn pdbs_gr() -> GroupResource {
    GroupResource::new("policy", "poddisruptionbudgets")
}
