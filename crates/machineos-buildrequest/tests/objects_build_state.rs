//! `build_state`, table-driven: every `BuildPhase` and every `StatusReason` of openshift/api
//! `build/v1`, and what the build sees. Every Build given is first checked against the
//! `build/v1` field list (`tests/buildv1`), so the fixtures use the API's real field names.

mod buildv1;

use machineos_buildrequest::objects::build_state::{STATUS_REASONS, status_reason_text};
use machineos_buildrequest::objects::state::TAIL_LINES;
use machineos_buildrequest::objects::{JobState, build_state};
use serde_json::{Value, json};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn build(status: Option<Value>) -> Value {
    let mut b = json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": { "name": "build-w" },
    });
    if let Some(s) = status {
        b["status"] = s;
    }
    let problems = buildv1::check_build(&b);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    b
}

fn log_of(lines: usize) -> String {
    (1..=lines).map(|i| format!("line {i}\n")).collect()
}

enum Want {
    Pending(Option<&'static [&'static str]>),
    Running(Option<&'static str>),
    Succeeded(&'static str),
    Failed(&'static [&'static str]),
}

#[test]
fn build_states_table() {
    let long_log = log_of(30);
    let cases: Vec<(&str, Value, Want)> = vec![
        ("no status yet", build(None), Want::Pending(None)),
        (
            "status with an empty phase (Go writes the field always)",
            build(Some(json!({ "phase": "", "message": "x" }))),
            Want::Pending(None),
        ),
        (
            "New",
            build(Some(json!({ "phase": "New" }))),
            Want::Pending(None),
        ),
        (
            "New, waiting for the push Secret",
            build(Some(json!({ "phase": "New", "reason": "MissingPushSecret",
                "message": "Missing push secret." }))),
            Want::Pending(Some(&[
                "Build build-w is New: MissingPushSecret: Missing push secret.",
            ])),
        ),
        (
            "New, a reason without a message: its meaning",
            build(Some(
                json!({ "phase": "New", "reason": "MissingPushSecret" }),
            )),
            Want::Pending(Some(&["MissingPushSecret: the push Secret does not exist"])),
        ),
        (
            "Pending",
            build(Some(json!({ "phase": "Pending" }))),
            Want::Pending(None),
        ),
        (
            "Pending with a message only",
            build(Some(
                json!({ "phase": "Pending", "message": "pod scheduling" }),
            )),
            Want::Pending(Some(&["Build build-w is Pending: pod scheduling"])),
        ),
        (
            "Running since the start",
            build(Some(
                json!({ "phase": "Running", "startTimestamp": "2025-01-01T00:00:09Z" }),
            )),
            Want::Running(Some("2025-01-01T00:00:09Z")),
        ),
        (
            "Running, no start time yet",
            build(Some(json!({ "phase": "Running" }))),
            Want::Running(None),
        ),
        (
            "Complete with the digest",
            build(Some(json!({ "phase": "Complete",
                "output": { "to": { "imageDigest": DIGEST } } }))),
            Want::Succeeded(DIGEST),
        ),
        (
            "Complete, digest with surrounding blanks",
            build(Some(json!({ "phase": "Complete",
                "output": { "to": { "imageDigest": format!(" {DIGEST}\n") } } }))),
            Want::Succeeded(DIGEST),
        ),
        (
            "Complete without a digest (the registry returned none)",
            build(Some(json!({ "phase": "Complete", "output": {} }))),
            Want::Failed(&[
                "Build build-w completed but status.output.to.imageDigest is not an image digest",
                "(empty)",
            ]),
        ),
        (
            "Complete with a digest of another algorithm",
            build(Some(json!({ "phase": "Complete",
                "output": { "to": { "imageDigest": "sha512:abc" } } }))),
            Want::Failed(&["not an image digest", "\"sha512:abc\""]),
        ),
        (
            "Failed: reason, message and the log tail",
            build(Some(
                json!({ "phase": "Failed", "reason": "DockerBuildFailed",
                "message": "Docker build strategy has failed.", "logSnippet": long_log }),
            )),
            Want::Failed(&[
                "Build build-w failed: DockerBuildFailed: Docker build strategy has failed.; last lines:\nline 11\n",
                "line 30",
            ]),
        ),
        (
            "Failed without reason or message",
            build(Some(json!({ "phase": "Failed" }))),
            Want::Failed(&["Build build-w failed"]),
        ),
        (
            "Error: could not run",
            build(Some(
                json!({ "phase": "Error", "reason": "CannotCreateBuildPod",
                "message": "Failed creating build pod." }),
            )),
            Want::Failed(&[
                "Build build-w could not run (phase Error): CannotCreateBuildPod: Failed creating build pod.",
            ]),
        ),
        (
            "Cancelled by someone else",
            build(Some(json!({ "phase": "Cancelled", "cancelled": true,
                "reason": "CancelledBuild", "message": "The build was cancelled by the user." }))),
            Want::Failed(&[
                "Build build-w was cancelled",
                "another client cancelled it",
                "CancelledBuild: The build was cancelled by the user.",
            ]),
        ),
        (
            "cancellation requested while running: still Running",
            build(Some(json!({ "phase": "Running", "cancelled": true,
                "startTimestamp": "2025-01-01T00:00:09Z" }))),
            Want::Running(Some("2025-01-01T00:00:09Z")),
        ),
    ];
    let mut failures = Vec::new();
    let count = cases.len();
    for (name, b, want) in cases {
        let got = build_state(&b);
        if !matches(&want, &got) {
            failures.push(format!("{name}: got {got:?}"));
        }
    }
    // Outside the field list (which refuses them, as it should): a status without a
    // phase, an unknown phase.
    let no_phase = json!({ "metadata": { "name": "build-w" }, "status": { "message": "x" } });
    let got = build_state(&no_phase);
    if !matches(&Want::Pending(None), &got) {
        failures.push(format!("status without a phase: got {got:?}"));
    }
    let unknown = json!({ "metadata": { "name": "build-w" },
        "status": { "phase": "Paused", "reason": "Why" } });
    let got = build_state(&unknown);
    if !matches(
        &Want::Pending(Some(&["Build build-w is in phase \"Paused\"", "Why"])),
        &got,
    ) {
        failures.push(format!("unknown phase: got {got:?}"));
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        count + 2,
        failures.join("\n")
    );
}

fn matches(want: &Want, got: &JobState) -> bool {
    match (want, got) {
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
    }
}

/// Every `StatusReason` constant of openshift/api `build/v1/consts.go`.
const CONSTS_GO_REASONS: [&str; 26] = [
    "Error",
    "CannotCreateBuildPodSpec",
    "CannotCreateBuildPod",
    "InvalidOutputReference",
    "InvalidImageReference",
    "CancelBuildFailed",
    "BuildPodDeleted",
    "ExceededRetryTimeout",
    "MissingPushSecret",
    "PostCommitHookFailed",
    "PushImageToRegistryFailed",
    "PullBuilderImageFailed",
    "FetchSourceFailed",
    "FetchImageContentFailed",
    "ManageDockerfileFailed",
    "InvalidContextDirectory",
    "CancelledBuild",
    "DockerBuildFailed",
    "BuildPodExists",
    "NoBuildContainerStatus",
    "FailedContainer",
    "UnresolvableEnvironmentVariable",
    "GenericBuildFailed",
    "OutOfMemoryKilled",
    "CannotRetrieveServiceAccount",
    "BuildPodEvicted",
];

#[test]
fn every_failure_reason_gives_a_message_with_the_reason() {
    let mut listed: Vec<&str> = STATUS_REASONS.iter().map(|(r, _)| *r).collect();
    let mut consts = CONSTS_GO_REASONS.to_vec();
    listed.sort_unstable();
    consts.sort_unstable();
    assert_eq!(listed, consts, "STATUS_REASONS is consts.go's list");

    for reason in CONSTS_GO_REASONS {
        let text = status_reason_text(reason).unwrap();
        for phase in ["Failed", "Error"] {
            // With the controller's message: reason and message.
            let b = build(Some(json!({ "phase": phase, "reason": reason,
                "message": "the controller's words", "logSnippet": "step 1\nboom\n" })));
            let JobState::Failed { message } = build_state(&b) else {
                panic!("{phase} {reason}: not Failed")
            };
            assert!(
                message.contains(&format!(
                    ": {reason}: the controller's words; last lines:\nstep 1\nboom"
                )),
                "{message}"
            );
            // Without one: the reason's meaning.
            let b = build(Some(json!({ "phase": phase, "reason": reason })));
            let JobState::Failed { message } = build_state(&b) else {
                panic!("{phase} {reason}: not Failed")
            };
            assert!(
                message.ends_with(&format!(": {reason}: {text}")),
                "{message}"
            );
        }
    }
    // A reason openshift/api does not define is kept as it is.
    let b = build(Some(json!({ "phase": "Failed", "reason": "SomethingNew" })));
    assert_eq!(
        build_state(&b),
        JobState::Failed {
            message: "Build build-w failed: SomethingNew".into()
        }
    );
}

#[test]
fn the_failure_message_keeps_only_the_last_lines() {
    let b = build(Some(
        json!({ "phase": "Failed", "reason": "GenericBuildFailed",
        "message": "Generic Build failure - check logs for details.", "logSnippet": log_of(TAIL_LINES + 10) }),
    ));
    let JobState::Failed { message } = build_state(&b) else {
        panic!()
    };
    let tail = message.split_once("; last lines:\n").unwrap().1;
    assert_eq!(tail.lines().count(), TAIL_LINES);
    assert!(
        tail.starts_with("line 11\n") && tail.ends_with("line 30"),
        "{tail}"
    );
}
