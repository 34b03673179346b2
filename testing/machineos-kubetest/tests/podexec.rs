//! The pod executor running real processes for Jobs: a script writing a digest to its
//! termination log completes the Job with that message; a failing one is retried
//! `backoffLimit` times and fails it with the log tail; an injected eviction is retried; a
//! missing ConfigMap keeps the pod waiting until it exists; a bad command fails at start;
//! deleting a Job kills its pod's processes.

use std::time::Duration;

use machineos_kubetest::hooks;
use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::podexec::{ExecSettings, PodExecutor, RunOutcome};
use machineos_kubetest::{DeleteOptions, GroupResource, Propagation, Store, WriteOptions};
use serde_json::{Value, json};

const W: WriteOptions = WriteOptions { dry_run: false };
const NS: &str = "default";
/// A generous bound for "eventually".
const EVENTUALLY: Duration = Duration::from_secs(60);
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn create(s: &Server, gr: &GroupResource, obj: Value) {
    s.store()
        .lock()
        .unwrap()
        .create(gr, Some(NS), &obj, W)
        .unwrap();
    s.notify();
}

/// A Job running `script` with bash, the build Job's way: env, a ConfigMap volume, the
/// termination log, `FallbackToLogsOnError`.
fn job(name: &str, backoff_limit: u64, script: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": backoff_limit, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "build", "image": "quay.io/buildah/stable",
                "command": ["/bin/bash", "-c", script, "build.sh"],
                "env": [
                    {"name": "INPUT_DIR", "value": "/tmp/input"},
                    {"name": "TERMINATION_LOG", "value": "/dev/termination-log"},
                    {"name": "DIGEST", "value": DIGEST},
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "volumeMounts": [{"name": "input", "mountPath": "/tmp/input"}],
            }],
            "volumes": [{"name": "input", "configMap": {"name": "input"}}],
        }}},
    })
}

fn input_config_map(s: &Server) {
    create(
        s,
        &GroupResource::new("", "configmaps"),
        json!({"metadata": {"name": "input"}, "data": {"Containerfile": "FROM scratch\n"}}),
    );
}

async fn start(extra_env: &[(&str, &str)]) -> (Server, PodExecutor, tempfile::TempDir) {
    let s = Server::start(new_store(), 0).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut settings = ExecSettings::new(tmp.path().join("work"));
    for (k, v) in extra_env {
        settings = settings.env(*k, *v);
    }
    let ex = PodExecutor::spawn(s.shared().clone(), settings);
    (s, ex, tmp)
}

/// The Job once it has a terminal condition.
async fn finished(s: &Server, name: &str) -> Value {
    hooks::wait_for(s.shared(), EVENTUALLY, |st| {
        st.get(&jobs(), Some(NS), name)
            .ok()
            .filter(hooks::job_finished)
    })
    .await
    .unwrap_or_else(|| panic!("job {name} did not finish"))
}

fn conditions(job: &Value) -> Vec<String> {
    job["status"]["conditions"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| {
                    format!(
                        "{}/{}",
                        c["type"].as_str().unwrap(),
                        c["reason"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The Job's pods, oldest first (locks the store: never inside `hooks::wait_for`).
fn pods_of(s: &Server, job: &str) -> Vec<Value> {
    let st = s.store();
    let st = st.lock().unwrap();
    pods_in(&st, job)
}

/// The Job's pods in `st`, oldest first.
fn pods_in(st: &Store, job: &str) -> Vec<Value> {
    let mut v: Vec<Value> = st
        .objects()
        .filter(|(k, v)| k.gr == pods() && v["metadata"]["labels"]["job-name"] == job)
        .map(|(_, v)| v.clone())
        .collect();
    v.sort_by_key(|p| {
        p["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    v
}

fn terminated(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]["state"]["terminated"]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_pod_runs_and_its_termination_log_completes_the_job() {
    let (s, ex, tmp) = start(&[("FROM_TEST", "extra")]).await;
    input_config_map(&s);
    let script = r#"set -eu
echo "input: $(cat "$INPUT_DIR/Containerfile")"
echo "storage: $CONTAINERS_STORAGE_CONF"
grep -q 'driver = "vfs"' "$CONTAINERS_STORAGE_CONF"
echo "extra: $FROM_TEST home: $HOME"
printf '%s' "$DIGEST" > "$TERMINATION_LOG"
"#;
    create(&s, &jobs(), job("ok", 0, script));
    let j = finished(&s, "ok").await;
    assert_eq!(
        conditions(&j),
        [
            "SuccessCriteriaMet/CompletionsReached",
            "Complete/CompletionsReached"
        ]
    );
    assert_eq!(j["status"]["succeeded"], 1);
    let p = pods_of(&s, "ok");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0]["status"]["phase"], "Succeeded");
    let t = terminated(&p[0]);
    assert_eq!(
        (t["exitCode"].as_i64(), t["message"].as_str()),
        (Some(0), Some(DIGEST))
    );
    let name = p[0]["metadata"]["name"].as_str().unwrap();
    let log = ex.log(NS, name).unwrap();
    assert!(log.contains("input: FROM scratch"), "{log}");
    assert!(log.contains("extra: extra"), "{log}");
    let work = tmp.path().join("work");
    assert!(
        log.contains(&format!("storage: {}/pods/default/{name}-", work.display())),
        "{log}"
    );
    assert!(
        log.contains(&format!("home: {}/pods/default/{name}-", work.display())),
        "{log}"
    );
    let runs = ex.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].job.as_deref(), Some("ok"));
    assert_eq!(
        runs[0].outcome,
        RunOutcome::Succeeded {
            message: DIGEST.into()
        }
    );
    // The pod directory goes after the pod finished.
    let gone = hooks::wait_for(s.shared(), EVENTUALLY, |_| {
        let left = std::fs::read_dir(work.join("pods/default"))
            .map(|d| d.count())
            .unwrap_or(0);
        (left == 0).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the pod directory was not removed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_pod_is_retried_until_the_backoff_limit_and_fails_the_job_with_its_log_tail() {
    let (s, ex, _tmp) = start(&[]).await;
    input_config_map(&s);
    let script = "for i in $(seq 1 100); do echo \"line $i\"; done; exit 3";
    create(&s, &jobs(), job("bad", 2, script));
    let j = finished(&s, "bad").await;
    assert_eq!(
        conditions(&j),
        [
            "FailureTarget/BackoffLimitExceeded",
            "Failed/BackoffLimitExceeded"
        ]
    );
    assert_eq!(j["status"]["failed"], 3);
    let p = pods_of(&s, "bad");
    assert_eq!(p.len(), 3, "backoffLimit + 1 pods");
    for pod in &p {
        assert_eq!(pod["status"]["phase"], "Failed");
        let t = terminated(pod);
        assert_eq!(
            (t["exitCode"].as_i64(), t["reason"].as_str()),
            (Some(3), Some("Error"))
        );
        let m = t["message"].as_str().unwrap();
        assert!(
            m.starts_with("line 21\n") && m.ends_with("line 100\n"),
            "{m:?}"
        );
    }
    assert_eq!(ex.runs().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_evicted_pod_is_retried_and_the_next_one_succeeds() {
    let (s, ex, _tmp) = start(&[]).await;
    input_config_map(&s);
    ex.evict_next_of_job("ev", 1);
    let script =
        "echo started; sleep 2; echo finished; printf '%s' \"$DIGEST\" > \"$TERMINATION_LOG\"";
    create(&s, &jobs(), job("ev", 1, script));
    let j = finished(&s, "ev").await;
    assert_eq!(
        conditions(&j),
        [
            "SuccessCriteriaMet/CompletionsReached",
            "Complete/CompletionsReached"
        ]
    );
    assert_eq!(
        (
            j["status"]["failed"].as_u64(),
            j["status"]["succeeded"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let p = pods_of(&s, "ev");
    assert_eq!(p.len(), 2);
    let evicted = &p[0];
    assert_eq!(
        (
            evicted["status"]["phase"].as_str(),
            evicted["status"]["reason"].as_str()
        ),
        (Some("Failed"), Some("Evicted"))
    );
    assert!(
        evicted["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("The node was low on resource: ephemeral-storage."),
        "{}",
        evicted["status"]
    );
    assert_eq!(terminated(evicted)["exitCode"], 137);
    assert!(
        evicted["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "DisruptionTarget" && c["reason"] == "TerminationByKubelet")
    );
    let log = ex
        .log(NS, evicted["metadata"]["name"].as_str().unwrap())
        .unwrap();
    assert!(
        !log.contains("finished"),
        "the evicted pod's process was killed: {log}"
    );
    assert_eq!(p[1]["status"]["phase"], "Succeeded");
    assert_eq!(terminated(&p[1])["message"], DIGEST);
    let outcomes: Vec<RunOutcome> = ex.runs().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            RunOutcome::Evicted,
            RunOutcome::Succeeded {
                message: DIGEST.into()
            }
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_config_map_keeps_the_pod_waiting_until_it_exists() {
    let (s, _ex, _tmp) = start(&[]).await;
    create(
        &s,
        &jobs(),
        job("wait", 0, "printf '%s' \"$DIGEST\" > \"$TERMINATION_LOG\""),
    );
    let waiting = hooks::wait_for(s.shared(), EVENTUALLY, |st| {
        pods_in(st, "wait").into_iter().find_map(|p| {
            let w = p["status"]["containerStatuses"][0]["state"]["waiting"].clone();
            (w["reason"] == "CreateContainerConfigError").then_some(w)
        })
    })
    .await
    .expect("the pod waits in CreateContainerConfigError");
    assert_eq!(
        waiting["message"],
        "configmap \"input\" not found (referenced by spec.volumes[0].configMap.name)"
    );
    assert_eq!(pods_of(&s, "wait")[0]["status"]["phase"], "Pending");
    input_config_map(&s);
    let j = finished(&s, "wait").await;
    assert_eq!(j["status"]["succeeded"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_cannot_start_fails_the_pod_with_start_error() {
    let (s, ex, _tmp) = start(&[]).await;
    input_config_map(&s);
    let mut j = job("nostart", 0, "");
    j["spec"]["template"]["spec"]["containers"][0]["command"] = json!(["/nonexistent/program"]);
    create(&s, &jobs(), j);
    let j = finished(&s, "nostart").await;
    assert_eq!(conditions(&j)[1], "Failed/BackoffLimitExceeded");
    let p = pods_of(&s, "nostart");
    let t = terminated(&p[0]);
    assert_eq!(
        (t["exitCode"].as_i64(), t["reason"].as_str()),
        (Some(128), Some("StartError"))
    );
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/program"),
        "{t}"
    );
    assert!(matches!(
        ex.runs()[0].outcome,
        RunOutcome::StartError { .. }
    ));
}

/// Whether process `pid` is gone (or a zombie: killed, not yet reaped by its new parent).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_running_job_kills_its_pods_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("pid");
    let (s, ex, _work) = start(&[("PIDFILE", pidfile.to_str().unwrap())]).await;
    input_config_map(&s);
    // A background child: killing only bash would leave it running.
    let script = "sleep 600 & echo $! > \"$PIDFILE.tmp\"; mv \"$PIDFILE.tmp\" \"$PIDFILE\"; echo started; wait";
    create(&s, &jobs(), job("long", 0, script));
    let pid: u32 = hooks::wait_for(s.shared(), EVENTUALLY, |_| {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    })
    .await
    .expect("the pod started");
    let running = hooks::wait_for(s.shared(), EVENTUALLY, |st| {
        pods_in(st, "long")
            .first()
            .filter(|p| p["status"]["phase"] == "Running")
            .cloned()
    })
    .await
    .expect("the pod is running");
    assert!(!dead(pid));
    s.store()
        .lock()
        .unwrap()
        .delete(
            &jobs(),
            Some(NS),
            "long",
            // As kubectl and controllers delete Jobs (batch/v1's default orphans the pods,
            // which then keep running, as in a real cluster).
            &DeleteOptions {
                propagation: Some(Propagation::Background),
                ..DeleteOptions::default()
            },
        )
        .unwrap();
    s.notify();
    let killed = hooks::wait_for(s.shared(), EVENTUALLY, |_| {
        ex.runs()
            .iter()
            .any(|r| r.outcome == RunOutcome::Killed)
            .then_some(())
    })
    .await;
    assert!(killed.is_some(), "the pod was not killed: {:?}", ex.runs());
    assert_eq!(ex.running(), 0);
    let gone = hooks::wait_for(s.shared(), EVENTUALLY, |_| dead(pid).then_some(())).await;
    assert!(
        gone.is_some(),
        "the pod's background process {pid} survived"
    );
    assert!(pods_of(&s, "long").is_empty());
    let name = running["metadata"]["name"].as_str().unwrap();
    assert!(ex.log(NS, name).unwrap().contains("started"));
}
