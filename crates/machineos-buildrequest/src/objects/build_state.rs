//! The state of an OpenShift Build (`build.openshift.io/v1`), from its status (pure;
//! table-tested) — the Build backend's counterpart of [`super::state::job_state`], giving
//! the same [`JobState`].
//!
//! Contract of [`build_state`], by `status.phase` (`BuildPhase` in openshift/api
//! `build/v1/types.go`):
//!
//! * No `status`, or no or an empty `phase` → [`JobState::Pending`] without detail (the
//!   build controller has not seen the Build yet).
//! * `New`, `Pending` → [`JobState::Pending`], with `status.reason` and `status.message`
//!   as detail when either is set (a Build waits in `New` for a missing push Secret:
//!   `MissingPushSecret`).
//! * `Running` → [`JobState::Running`] since `status.startTimestamp`.
//! * `Complete` → [`JobState::Succeeded`] with `status.output.to.imageDigest`, which must be
//!   `sha256:<64 lowercase hex>` ([`super::state::is_digest`]; surrounding whitespace
//!   ignored). The API says the builder may leave it unset when the registry returns no
//!   digest; that, or anything else, is [`JobState::Failed`] saying so, since the image
//!   cannot be named by digest.
//! * `Failed`, `Error` → [`JobState::Failed`]: the phase, `status.reason`, `status.message`
//!   (when empty, the meaning of the reason, see [`status_reason_text`]) and the last
//!   [`TAIL_LINES`](super::state::TAIL_LINES) lines of `status.logSnippet`. A Build is never retried by OpenShift:
//!   these are terminal.
//! * `Cancelled` → [`JobState::Failed`] saying it was cancelled: machineos stops a build by
//!   deleting its Build, so a Cancelled one was cancelled by someone else, and it built
//!   nothing.
//! * Any other phase → [`JobState::Pending`] naming the unknown phase.
//!
//! `status.cancelled` alone (a cancellation on its way) changes nothing: the phase that
//! follows decides.

use serde_json::Value;

use super::state::{JobState, excerpt, is_digest, tail};

/// What each `StatusReason` of openshift/api `build/v1/consts.go` means, in a few words.
pub const STATUS_REASONS: [(&str, &str); 26] = [
    ("Error", "an error prevented the build from running"),
    (
        "CannotCreateBuildPodSpec",
        "the build strategy could not create the build pod's spec",
    ),
    ("CannotCreateBuildPod", "the build pod could not be created"),
    (
        "InvalidOutputReference",
        "the build's output image reference is invalid",
    ),
    (
        "InvalidImageReference",
        "the build references an invalid image",
    ),
    ("CancelBuildFailed", "cancelling the build failed"),
    (
        "BuildPodDeleted",
        "the build pod was deleted before the build completed",
    ),
    (
        "ExceededRetryTimeout",
        "the build did not complete before its retries timed out",
    ),
    ("MissingPushSecret", "the push Secret does not exist"),
    ("PostCommitHookFailed", "the post-commit hook failed"),
    (
        "PushImageToRegistryFailed",
        "pushing the image to the registry failed",
    ),
    ("PullBuilderImageFailed", "pulling the builder image failed"),
    ("FetchSourceFailed", "fetching the build's source failed"),
    (
        "FetchImageContentFailed",
        "fetching an image's content for the build failed",
    ),
    (
        "ManageDockerfileFailed",
        "setting up the build's Dockerfile failed",
    ),
    (
        "InvalidContextDirectory",
        "the build's context directory does not exist",
    ),
    ("CancelledBuild", "the build was cancelled"),
    ("DockerBuildFailed", "the container image build failed"),
    ("BuildPodExists", "a pod for the build already existed"),
    (
        "NoBuildContainerStatus",
        "the build pod has no container statuses",
    ),
    (
        "FailedContainer",
        "a container of the build pod exited with a non-zero status",
    ),
    (
        "UnresolvableEnvironmentVariable",
        "an environment variable of the build strategy could not be resolved",
    ),
    ("GenericBuildFailed", "the build failed"),
    (
        "OutOfMemoryKilled",
        "the build pod was killed for its memory consumption",
    ),
    (
        "CannotRetrieveServiceAccount",
        "the build's service account could not be looked up",
    ),
    ("BuildPodEvicted", "the build pod was evicted from its node"),
];

/// What a Build's `status.reason` means ([`STATUS_REASONS`]), if it is a known one.
pub fn status_reason_text(reason: &str) -> Option<&'static str> {
    STATUS_REASONS
        .iter()
        .find(|(r, _)| *r == reason)
        .map(|(_, text)| *text)
}

/// The state of `build` (a `build.openshift.io/v1` Build as JSON; see the module
/// documentation).
pub fn build_state(build: &Value) -> JobState {
    let name = build["metadata"]["name"].as_str().unwrap_or("<unnamed>");
    let status = &build["status"];
    let Some(phase) = status.get("phase").filter(|p| !p.is_null() && *p != "") else {
        return JobState::Pending { detail: None };
    };
    let why = reason_and_message(status);
    match phase.as_str() {
        Some(phase @ ("New" | "Pending")) => JobState::Pending {
            detail: why.map(|w| format!("Build {name} is {phase}: {w}")),
        },
        Some("Running") => JobState::Running {
            since: status["startTimestamp"].as_str().map(str::to_owned),
        },
        Some("Complete") => {
            let found = status["output"]["to"]["imageDigest"].as_str().unwrap_or("");
            let digest = found.trim();
            if is_digest(digest) {
                JobState::Succeeded {
                    digest: digest.to_owned(),
                }
            } else {
                JobState::Failed {
                    message: format!(
                        "Build {name} completed but status.output.to.imageDigest is not an \
                         image digest (sha256:<64 hex>), so the image cannot be named by \
                         digest: {}",
                        excerpt(found)
                    ),
                }
            }
        }
        Some(phase @ ("Failed" | "Error" | "Cancelled")) => {
            let mut text = match phase {
                "Failed" => format!("Build {name} failed"),
                "Error" => format!("Build {name} could not run (phase Error)"),
                _ => format!(
                    "Build {name} was cancelled (machineos stops a build by deleting it, so \
                     another client cancelled it)"
                ),
            };
            if let Some(w) = why {
                text.push_str(&format!(": {w}"));
            }
            let tail = tail(status["logSnippet"].as_str().unwrap_or(""));
            if !tail.is_empty() {
                text.push_str(&format!("; last lines:\n{tail}"));
            }
            JobState::Failed { message: text }
        }
        _ => JobState::Pending {
            detail: Some(format!(
                "Build {name} is in phase {phase}, which machineos does not know{}",
                why.map(|w| format!(": {w}")).unwrap_or_default()
            )),
        },
    }
}

/// `reason: message`, the message replaced by the reason's meaning when empty.
fn reason_and_message(status: &Value) -> Option<String> {
    let reason = status["reason"].as_str().filter(|r| !r.is_empty());
    let message = status["message"]
        .as_str()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    match (reason, message) {
        (Some(r), Some(m)) => Some(format!("{r}: {m}")),
        (Some(r), None) => Some(match status_reason_text(r) {
            Some(text) => format!("{r}: {text}"),
            None => r.to_owned(),
        }),
        (None, Some(m)) => Some(m.to_owned()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_once() {
        let mut names: Vec<&str> = STATUS_REASONS.iter().map(|(r, _)| *r).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), STATUS_REASONS.len());
    }
}
