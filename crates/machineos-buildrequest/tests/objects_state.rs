//! `job_state`, table-driven: every Job condition and pod phase/container state the build
//! Job can show, and what the build sees.

use machineos_buildrequest::objects::state::is_digest;
use machineos_buildrequest::objects::{JobState, job_state};
use serde_json::{Value, json};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn job(status: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": { "name": "build-w", "uid": "job-uid" },
        "spec": { "backoffLimit": 3, "completions": 1 },
        "status": status,
    })
}

fn condition(kind: &str, reason: &str, message: &str) -> Value {
    json!({ "type": kind, "status": "True", "reason": reason, "message": message })
}

fn pod(name: &str, created: &str, status: Value) -> Value {
    json!({
        "metadata": {
            "name": name, "creationTimestamp": created,
            "ownerReferences": [{ "kind": "Job", "name": "build-w", "uid": "job-uid" }],
        },
        "status": status,
    })
}

fn terminated(code: i64, reason: &str, message: &str) -> Value {
    json!({ "containerStatuses": [{ "name": "build", "state": { "terminated": {
        "exitCode": code, "reason": reason, "message": message,
    }}}]})
}

fn with_phase(mut status: Value, phase: &str) -> Value {
    status["phase"] = json!(phase);
    status
}

fn succeeded_pod(name: &str, message: &str) -> Value {
    pod(
        name,
        "2025-01-01T00:05:00Z",
        with_phase(terminated(0, "Completed", message), "Succeeded"),
    )
}

fn failed_pod(name: &str, created: &str, code: i64, log: &str) -> Value {
    pod(
        name,
        created,
        with_phase(terminated(code, "Error", log), "Failed"),
    )
}

fn evicted_pod(name: &str, created: &str) -> Value {
    pod(
        name,
        created,
        json!({
            "phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: ephemeral-storage.",
        }),
    )
}

fn waiting_pod(reason: &str, message: &str) -> Value {
    pod(
        "build-w-aaaaa",
        "2025-01-01T00:00:00Z",
        json!({ "phase": "Pending", "containerStatuses": [{ "name": "build", "state": {
            "waiting": { "reason": reason, "message": message },
        }}]}),
    )
}

enum Want {
    Pending(Option<&'static [&'static str]>),
    Running(Option<&'static str>),
    Succeeded(&'static str),
    Failed(&'static [&'static str]),
}

fn log_of(lines: usize) -> String {
    (1..=lines).map(|i| format!("line {i}\n")).collect()
}

#[test]
fn job_states_table() {
    let long_log = log_of(30);
    let cases: Vec<(&str, Value, Vec<Value>, Want)> = vec![
        (
            "new Job, no pod yet",
            job(json!({})),
            vec![],
            Want::Pending(None),
        ),
        (
            "active, pod not observed yet",
            job(json!({ "active": 1 })),
            vec![],
            Want::Pending(None),
        ),
        (
            "pod pending without a reason",
            job(json!({ "active": 1 })),
            vec![pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                json!({ "phase": "Pending" }),
            )],
            Want::Pending(None),
        ),
        (
            "ImagePullBackOff",
            job(json!({ "active": 1 })),
            vec![waiting_pod(
                "ImagePullBackOff",
                "Back-off pulling image \"quay.io/x\"",
            )],
            Want::Pending(Some(&[
                "container build waiting: ImagePullBackOff",
                "quay.io/x",
            ])),
        ),
        (
            "ErrImagePull",
            job(json!({ "active": 1 })),
            vec![waiting_pod("ErrImagePull", "manifest unknown")],
            Want::Pending(Some(&["ErrImagePull: manifest unknown"])),
        ),
        (
            "missing ConfigMap",
            job(json!({ "active": 1 })),
            vec![waiting_pod(
                "CreateContainerConfigError",
                "configmap \"mc-w\" not found",
            )],
            Want::Pending(Some(&["CreateContainerConfigError", "mc-w"])),
        ),
        (
            "unschedulable (no arm64 node)",
            job(json!({ "active": 1 })),
            vec![pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                json!({
                    "phase": "Pending",
                    "conditions": [{ "type": "PodScheduled", "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector." }],
                }),
            )],
            Want::Pending(Some(&[
                "not scheduled: Unschedulable",
                "node affinity/selector",
            ])),
        ),
        (
            "running: since the container started",
            job(json!({ "active": 1, "startTime": "2025-01-01T00:00:00Z" })),
            vec![pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                json!({
                    "phase": "Running", "startTime": "2025-01-01T00:00:01Z",
                    "containerStatuses": [{ "name": "build", "state": {
                        "running": { "startedAt": "2025-01-01T00:00:09Z" } } }],
                }),
            )],
            Want::Running(Some("2025-01-01T00:00:09Z")),
        ),
        (
            "running, no container status yet: since the pod started",
            job(json!({ "active": 1 })),
            vec![pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                json!({
                "phase": "Running", "startTime": "2025-01-01T00:00:01Z" }),
            )],
            Want::Running(Some("2025-01-01T00:00:01Z")),
        ),
        (
            "complete with the digest",
            job(json!({ "succeeded": 1, "conditions": [condition("Complete", "", "")] })),
            vec![succeeded_pod("build-w-aaaaa", DIGEST)],
            Want::Succeeded(DIGEST),
        ),
        (
            "complete, digest with a trailing newline, after a failed attempt",
            job(json!({ "succeeded": 1, "failed": 1,
                "conditions": [condition("SuccessCriteriaMet", "CompletionsReached", ""),
                               condition("Complete", "CompletionsReached", "")] })),
            vec![
                failed_pod("build-w-aaaaa", "2025-01-01T00:00:00Z", 1, "boom"),
                succeeded_pod("build-w-bbbbb", &format!("{DIGEST}\n")),
            ],
            Want::Succeeded(DIGEST),
        ),
        (
            "pod succeeded, Job not Complete yet: still running",
            job(json!({ "active": 0 })),
            vec![succeeded_pod("build-w-aaaaa", DIGEST)],
            Want::Running(None),
        ),
        (
            "complete but the termination message is a log, not a digest",
            job(json!({ "succeeded": 1, "conditions": [condition("Complete", "", "")] })),
            vec![succeeded_pod(
                "build-w-aaaaa",
                "Writing manifest to image destination\n",
            )],
            Want::Failed(&["not an image digest (sha256:<64 hex>)", "Writing manifest"]),
        ),
        (
            "complete but an empty termination message",
            job(json!({ "succeeded": 1, "conditions": [condition("Complete", "", "")] })),
            vec![succeeded_pod("build-w-aaaaa", "")],
            Want::Failed(&["not an image digest", "(empty)"]),
        ),
        (
            "complete but an uppercase digest",
            job(json!({ "succeeded": 1, "conditions": [condition("Complete", "", "")] })),
            vec![succeeded_pod(
                "build-w-aaaaa",
                &DIGEST.to_uppercase().replace("SHA256", "sha256"),
            )],
            Want::Failed(&["not an image digest"]),
        ),
        (
            "complete but no pod left",
            job(json!({ "succeeded": 1, "conditions": [condition("Complete", "", "")] })),
            vec![],
            Want::Failed(&["none of its pods is Succeeded"]),
        ),
        (
            "a failed attempt with retries left: the Job retries",
            job(json!({ "failed": 1, "active": 1 })),
            vec![failed_pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                1,
                "error: RUN failed\n",
            )],
            Want::Pending(Some(&[
                "exited with code 1 (Error)",
                "the Job retries (1 of 4 attempts failed)",
            ])),
        ),
        (
            "evicted with retries left: the Job retries",
            job(json!({ "failed": 1, "active": 1 })),
            vec![evicted_pod("build-w-aaaaa", "2025-01-01T00:00:00Z")],
            Want::Pending(Some(&[
                "was evicted: The node was low on resource",
                "the Job retries",
            ])),
        ),
        (
            "evicted, then the retry is running",
            job(json!({ "failed": 1, "active": 1 })),
            vec![
                evicted_pod("build-w-aaaaa", "2025-01-01T00:00:00Z"),
                pod(
                    "build-w-bbbbb",
                    "2025-01-01T00:01:00Z",
                    json!({
                    "phase": "Running", "startTime": "2025-01-01T00:01:02Z" }),
                ),
            ],
            Want::Running(Some("2025-01-01T00:01:02Z")),
        ),
        (
            "backoff limit exceeded: the last attempt's exit code and log tail",
            job(json!({ "failed": 4, "conditions": [condition(
                "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")] })),
            vec![
                failed_pod("build-w-aaaaa", "2025-01-01T00:00:00Z", 1, "old attempt\n"),
                failed_pod("build-w-ddddd", "2025-01-01T00:03:00Z", 125, &long_log),
                failed_pod("build-w-bbbbb", "2025-01-01T00:01:00Z", 1, "old attempt\n"),
            ],
            Want::Failed(&[
                "Job build-w failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
                "pod build-w-ddddd container build exited with code 125 (Error)",
                "last lines:\nline 11\n",
                "line 30",
            ]),
        ),
        (
            "backoff exhausted by an eviction",
            job(json!({ "failed": 4, "conditions": [condition(
                "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")] })),
            vec![evicted_pod("build-w-ddddd", "2025-01-01T00:03:00Z")],
            Want::Failed(&[
                "BackoffLimitExceeded",
                "pod build-w-ddddd was evicted: The node",
            ]),
        ),
        (
            "deadline exceeded while running",
            job(json!({ "failed": 1, "conditions": [condition(
                "Failed", "DeadlineExceeded", "Job was active longer than specified deadline")] })),
            vec![pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                json!({
                "phase": "Failed", "reason": "DeadlineExceeded",
                "message": "Pod was active on the node longer than the specified deadline" }),
            )],
            Want::Failed(&[
                "DeadlineExceeded: Job was active longer",
                "pod build-w-aaaaa failed: DeadlineExceeded",
            ]),
        ),
        (
            "pod failure policy",
            job(json!({ "failed": 1, "conditions": [
                condition("FailureTarget", "PodFailurePolicy", "Container build for pod ns/build-w-aaaaa failed with exit code 42 matching FailJob rule at index 0"),
            ] })),
            vec![failed_pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                42,
                "bad Containerfile\n",
            )],
            Want::Failed(&[
                "PodFailurePolicy",
                "exited with code 42 (Error)",
                "bad Containerfile",
            ]),
        ),
        (
            "OOM-killed last attempt, failed count past the limit without a condition yet",
            job(json!({ "failed": 4 })),
            vec![pod(
                "build-w-ddddd",
                "2025-01-01T00:03:00Z",
                with_phase(
                    json!({
                "containerStatuses": [{ "name": "build", "state": { "terminated": {
                    "exitCode": 137, "reason": "OOMKilled" } } }] }),
                    "Failed",
                ),
            )],
            Want::Failed(&[
                "BackoffLimitExceeded: 4 failed attempts, backoffLimit 3",
                "exited with code 137 (OOMKilled)",
            ]),
        ),
        (
            "suspended",
            {
                let mut j = job(json!({}));
                j["spec"]["suspend"] = json!(true);
                j
            },
            vec![],
            Want::Pending(Some(&["suspended"])),
        ),
        (
            "pods of another Job (same name, older uid) are ignored",
            job(json!({ "active": 1 })),
            vec![{
                let mut p = succeeded_pod("build-w-zzzzz", DIGEST);
                p["metadata"]["ownerReferences"][0]["uid"] = json!("old-uid");
                p
            }],
            Want::Pending(None),
        ),
        (
            "pod phase Unknown (node lost)",
            job(json!({ "active": 1 })),
            vec![pod(
                "build-w-aaaaa",
                "2025-01-01T00:00:00Z",
                json!({
                "phase": "Unknown", "reason": "NodeLost" }),
            )],
            Want::Pending(Some(&["phase Unknown: NodeLost"])),
        ),
    ];

    let mut failures = Vec::new();
    let count = cases.len();
    for (name, job, pods, want) in cases {
        let got = job_state(&job, &pods);
        let ok = match (&want, &got) {
            (Want::Pending(None), JobState::Pending { detail: None }) => true,
            (Want::Pending(Some(parts)), JobState::Pending { detail: Some(d) }) => {
                parts.iter().all(|p| d.contains(p))
            }
            (Want::Running(since), JobState::Running { since: got }) => {
                since.map(str::to_owned) == *got
            }
            (Want::Succeeded(d), JobState::Succeeded { digest }) => digest == d,
            (Want::Failed(parts), JobState::Failed { message }) => {
                parts.iter().all(|p| message.contains(p))
            }
            _ => false,
        };
        if !ok {
            failures.push(format!("{name}: got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_failure_message_keeps_only_the_last_lines() {
    let log = log_of(30);
    let j = job(
        json!({ "failed": 4, "conditions": [condition("Failed", "BackoffLimitExceeded", "")] }),
    );
    let JobState::Failed { message } = job_state(&j, &[failed_pod("p", "t", 1, &log)]) else {
        panic!()
    };
    assert!(!message.contains("line 10\n"), "{message}");
    assert!(message.ends_with("line 11\nline 12\nline 13\nline 14\nline 15\nline 16\nline 17\nline 18\nline 19\nline 20\nline 21\nline 22\nline 23\nline 24\nline 25\nline 26\nline 27\nline 28\nline 29\nline 30"), "{message}");
}

#[test]
fn digests() {
    assert!(is_digest(DIGEST));
    assert!(!is_digest(&DIGEST[..70]));
    assert!(!is_digest(&format!("{DIGEST}0")));
    assert!(!is_digest(&DIGEST.replace("sha256", "sha512")));
    assert!(!is_digest(&DIGEST.replace('a', "A")));
    assert!(!is_digest(&DIGEST.replace('a', "g")));
    assert!(!is_digest(""));
}
