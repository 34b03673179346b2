//! The state of a build Job, from the Job's status and its pods' (pure; table-tested).
//!
//! Contract of [`job_state`]:
//!
//! * The Job's conditions decide the terminal states. `Failed` (or `FailureTarget`, which
//!   precedes it) = True, or `status.failed` above `spec.backoffLimit` → [`JobState::Failed`]
//!   whose message names the Job's reason (`BackoffLimitExceeded`, `DeadlineExceeded`,
//!   `PodFailurePolicy`, …) and its last failed attempt: an evicted pod with the eviction
//!   message, or the `build` container's exit code, reason and the last
//!   [`TAIL_LINES`] lines of its termination message (with the Job's
//!   `FallbackToLogsOnError`, the last lines of its log).
//! * `Complete` (or `SuccessCriteriaMet`) = True, or `status.succeeded` ≥ 1 →
//!   [`JobState::Succeeded`] with the digest from the newest Succeeded pod's `build`
//!   container termination message, which must be exactly `sha256:<64 lowercase hex>`
//!   (surrounding whitespace ignored); anything else, or no Succeeded pod among those given,
//!   is [`JobState::Failed`] saying so. Callers should pass the pods as listed from the API
//!   server when the Job completes (a lagging cache may not show the Succeeded pod yet).
//! * Otherwise the newest pod (by `creationTimestamp`, then name) decides: Running →
//!   [`JobState::Running`] since the container (else the pod) started; Pending →
//!   [`JobState::Pending`] with the waiting reason (`ImagePullBackOff`, `ErrImagePull`,
//!   `CreateContainerConfigError`, …) or the unschedulable message; Failed (an evicted pod,
//!   a failed attempt) while the Job has not failed → Pending: the Job retries; Succeeded
//!   before the Job is Complete → Running (the Job completes next). No pod yet → Pending.
//!   A suspended Job is Pending.
//! * Pods whose owner references name another Job uid are ignored.

use serde_json::Value;

use super::job::BUILD_CONTAINER;

/// How many of the termination message's last lines a failure message keeps.
pub const TAIL_LINES: usize = 20;

/// What a build Job is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Not running yet (or between attempts), with why when known.
    Pending {
        /// Why: a waiting reason, an unschedulable pod, a failed attempt being retried.
        detail: Option<String>,
    },
    /// Building.
    Running {
        /// When the current attempt started (RFC 3339, as the API server wrote it).
        since: Option<String>,
    },
    /// Built and pushed.
    Succeeded {
        /// The pushed image's digest, `sha256:<64 hex>`.
        digest: String,
    },
    /// Failed for good (the Job will not retry).
    Failed {
        /// What failed, with the container's exit code, reason and last log lines.
        message: String,
    },
}

/// The state of `job` (a `batch/v1` Job as JSON) given its pods (see the module
/// documentation).
pub fn job_state(job: &Value, pods: &[Value]) -> JobState {
    let name = job["metadata"]["name"].as_str().unwrap_or("<unnamed>");
    let status = &job["status"];
    let mut pods: Vec<&Value> = pods.iter().filter(|p| owned_by(p, job)).collect();
    pods.sort_by_key(|p| {
        (
            p["metadata"]["creationTimestamp"].as_str().unwrap_or(""),
            p["metadata"]["name"].as_str().unwrap_or(""),
        )
    });
    let newest_in = |phase: &str| pods.iter().rev().find(|p| p["status"]["phase"] == phase);

    let failed = true_condition(job, "Failed").or_else(|| true_condition(job, "FailureTarget"));
    let failures = status["failed"].as_i64().unwrap_or(0);
    // Kubernetes' default backoffLimit is 6.
    let backoff_limit = job["spec"]["backoffLimit"].as_i64().unwrap_or(6);
    if failed.is_some() || failures > backoff_limit {
        let (reason, message) = match failed {
            Some(c) => (
                c["reason"].as_str().unwrap_or("Failed").to_owned(),
                c["message"].as_str().unwrap_or("").to_owned(),
            ),
            None => (
                "BackoffLimitExceeded".to_owned(),
                format!("{failures} failed attempts, backoffLimit {backoff_limit}"),
            ),
        };
        let mut text = format!("Job {name} failed: {reason}");
        if !message.is_empty() {
            text.push_str(&format!(": {message}"));
        }
        if let Some(pod) = newest_in("Failed").or(pods.last()) {
            text.push_str(&format!("; last attempt: {}", pod_failure(pod)));
        }
        return JobState::Failed { message: text };
    }

    let complete = true_condition(job, "Complete")
        .or_else(|| true_condition(job, "SuccessCriteriaMet"))
        .is_some();
    if complete || status["succeeded"].as_i64().unwrap_or(0) >= 1 {
        let Some(pod) = newest_in("Succeeded") else {
            return JobState::Failed {
                message: format!(
                    "Job {name} succeeded but none of its pods is Succeeded, so the image \
                     digest (the pod's termination message) cannot be read"
                ),
            };
        };
        let pod_name = pod["metadata"]["name"].as_str().unwrap_or("<unnamed>");
        let message = container_status(pod)
            .and_then(|c| c["state"]["terminated"]["message"].as_str())
            .unwrap_or("");
        let digest = message.trim();
        return if is_digest(digest) {
            JobState::Succeeded {
                digest: digest.to_owned(),
            }
        } else {
            JobState::Failed {
                message: format!(
                    "Job {name} succeeded but the termination message of pod {pod_name} \
                     container {BUILD_CONTAINER} is not an image digest (sha256:<64 hex>): {}",
                    excerpt(message)
                ),
            }
        };
    }

    if job["spec"]["suspend"].as_bool() == Some(true) {
        return JobState::Pending {
            detail: Some(format!("Job {name} is suspended")),
        };
    }
    let Some(pod) = pods.last() else {
        return JobState::Pending { detail: None };
    };
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or("<unnamed>");
    match pod["status"]["phase"].as_str().unwrap_or("Pending") {
        "Running" | "Succeeded" => JobState::Running {
            since: container_status(pod)
                .and_then(|c| c["state"]["running"]["startedAt"].as_str())
                .or_else(|| pod["status"]["startTime"].as_str())
                .map(str::to_owned),
        },
        "Failed" => JobState::Pending {
            detail: Some(format!(
                "{}; the Job retries ({failures} of {} attempts failed)",
                pod_failure(pod),
                backoff_limit + 1
            )),
        },
        "Pending" => JobState::Pending {
            detail: pending_detail(pod),
        },
        other => JobState::Pending {
            detail: Some(format!(
                "pod {pod_name} is in phase {other}{}",
                reason_suffix(&pod["status"])
            )),
        },
    }
}

/// Whether `text` is `sha256:` followed by 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn owned_by(pod: &Value, job: &Value) -> bool {
    let (Some(uid), Some(owners)) = (
        job["metadata"]["uid"].as_str(),
        pod["metadata"]["ownerReferences"].as_array(),
    ) else {
        return true;
    };
    owners.is_empty() || owners.iter().any(|o| o["uid"] == uid)
}

fn true_condition<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
}

/// The `build` container's status, else the first container's.
fn container_status(pod: &Value) -> Option<&Value> {
    let statuses = pod["status"]["containerStatuses"].as_array()?;
    statuses
        .iter()
        .find(|c| c["name"] == BUILD_CONTAINER)
        .or_else(|| statuses.first())
}

/// Why a pod failed, in one message.
fn pod_failure(pod: &Value) -> String {
    let name = pod["metadata"]["name"].as_str().unwrap_or("<unnamed>");
    let status = &pod["status"];
    if status["reason"] == "Evicted" {
        let message = status["message"].as_str().unwrap_or("").trim();
        return if message.is_empty() {
            format!("pod {name} was evicted")
        } else {
            format!("pod {name} was evicted: {message}")
        };
    }
    let terminated = container_status(pod).and_then(|c| {
        let state = &c["state"]["terminated"];
        if state.is_object() {
            Some((c, state))
        } else {
            let last = &c["lastState"]["terminated"];
            last.is_object().then_some((c, last))
        }
    });
    match terminated {
        Some((container, state)) => {
            let container = container["name"].as_str().unwrap_or(BUILD_CONTAINER);
            let mut text = format!("pod {name} container {container} ");
            match state["exitCode"].as_i64() {
                Some(code) => text.push_str(&format!("exited with code {code}")),
                None => text.push_str("terminated"),
            }
            if let Some(signal) = state["signal"].as_i64() {
                text.push_str(&format!(" (signal {signal})"));
            }
            if let Some(reason) = state["reason"].as_str() {
                text.push_str(&format!(" ({reason})"));
            }
            let tail = tail(state["message"].as_str().unwrap_or(""));
            if !tail.is_empty() {
                text.push_str(&format!("; last lines:\n{tail}"));
            }
            text
        }
        None => format!("pod {name} failed{}", reason_suffix(status)),
    }
}

/// Why a Pending pod is not running, when the status says.
fn pending_detail(pod: &Value) -> Option<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("<unnamed>");
    let status = &pod["status"];
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| status[*k].as_array())
        .flatten();
    for container in statuses {
        let waiting = &container["state"]["waiting"];
        if let Some(reason) = waiting["reason"].as_str() {
            let mut text = format!(
                "pod {name} container {} waiting: {reason}",
                container["name"].as_str().unwrap_or("?")
            );
            if let Some(message) = waiting["message"].as_str() {
                text.push_str(&format!(": {message}"));
            }
            return Some(text);
        }
    }
    let unscheduled = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")?;
    Some(format!(
        "pod {name} is not scheduled: {}: {}",
        unscheduled["reason"].as_str().unwrap_or("Unschedulable"),
        unscheduled["message"].as_str().unwrap_or("")
    ))
}

fn reason_suffix(status: &Value) -> String {
    match (status["reason"].as_str(), status["message"].as_str()) {
        (Some(r), Some(m)) => format!(": {r}: {m}"),
        (Some(r), None) => format!(": {r}"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) => String::new(),
    }
}

/// The last [`TAIL_LINES`] non-empty-trailing lines of `text`.
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// `text` quoted, cut to 200 characters.
pub(super) fn excerpt(text: &str) -> String {
    if text.trim().is_empty() {
        return "(empty)".to_owned();
    }
    let cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}
