//! The backends that build outside the controller process: a `batch/v1` Job
//! ([`Runner::Job`]) and an OpenShift `build.openshift.io/v1` Build
//! ([`Runner::OpenShiftBuild`]), behind [`Builder`].
//!
//! **A build, step by step** (`machineos_buildrequest` makes every object; this module only
//! creates, observes and deletes them):
//!
//! 1. *What needs RUN* ([`machineos_buildrequest::containerfile::RunSteps`]: extensions, a
//!    kernel swap, the MachineOSConfig's Containerfile for the target architecture). An
//!    invalid input (an unknown extension, a Containerfile with a syntax error, 64k-pages off
//!    arm64) fails the build at once, with the field or the line.
//! 2. *The Job builds everything in its pod*: the controller does no image work for it. The
//!    pod runs the machineos image's `machineos build` on the rendered MachineConfig (the
//!    ConfigMaps below) and the base by digest, for the architectures the request names
//!    (one index over several) — and when something needs RUN, for one architecture on a
//!    node of it, the native image pushed to `<repository>:<build>-native` and buildah on
//!    top (see `machineos_buildrequest::objects::job`). *The OpenShift Build backend* does
//!    no image work here either, in two Builds (why two:
//!    `machineos_buildrequest::objects::native_build`): the native Build `native-<build>`
//!    runs the machineos image's `machineos build --native-only` and pushes the native
//!    image — to `<repository>:<build>-native` when RUN steps follow, else to the result's
//!    own tag, every architecture the request names in one index; this process waits for
//!    it (a list by name every [`NATIVE_POLL`]), asks the registry what the tag names
//!    (with each architecture's manifest), and then creates the RUN-step Build `build-<build>`
//!    whose Containerfile starts `FROM` that image by digest — or, with nothing to RUN,
//!    records that image as the result. A separate `-native` tag, because the registry
//!    check the lifecycle does after a restart looks at `<repository>:<build>` and must not
//!    mistake the intermediate image for the result.
//! 3. *Prepare*: the inputs — for the Job the MachineOSConfig's Containerfile and the
//!    controller's registry CA bundle, for the native Build the CA bundle, for the RUN-step
//!    Build the rendered Containerfile validated and its heredocs lowered to the exec form
//!    ([`machineos_buildrequest::containerfile::heredoc`]) — then the ephemeral objects are
//!    created, the Job or Build last so that its inputs exist when it starts: the merged
//!    pull Secret `pull-<build>` (push credentials, base pull credentials),
//!    `containerfile-<build>`, `mc-<build>` (or its parts). Creates are idempotent for the
//!    same MachineOSBuild (AlreadyExists with its owner uid is success: names and contents
//!    are functions of the build) and never adopt the past: an object of that name owned by
//!    an earlier MachineOSBuild of the same name (a rebuild, an interrupted build restarted
//!    — the name is a function of the inputs, the uid is not), which the garbage collector
//!    has not removed yet (on a real cluster it runs after the owner's DELETE, not in it),
//!    is deleted with its uid as precondition and the create repeated once it is gone
//!    ([`STALE_WAIT`] at most, then a transient failure). A transient API error is retried
//!    with backoff until the build is cancelled; a permanent one (invalid object,
//!    forbidden) fails the build with the API server's message.
//! 4. *Confirm*: the digest a Job's termination message or a Build's status reports is
//!    recorded only once the registry serves that manifest (asked once with the push
//!    Secret's credentials, the build `Running` meanwhile; a transient error asks again
//!    after [`CONFIRM_RETRY`]); the registry's answer also gives each architecture's
//!    manifest digest of an index. A digest the registry does not have fails the build
//!    (`BuildImageMissing`).
//! 5. *Observe*: the Job (with its pods) or the RUN-step Build in the controller's caches
//!    (the native Build is followed by the task that created it) — only one
//!    owned by the MachineOSBuild's current uid; an earlier incarnation's Failed Job is not
//!    this build's failure — is mapped
//!    by [`machineos_buildrequest::objects::job_state`] / `build_state` to a
//!    [`BackendStatus`]; the digest comes from the pod's termination message or the
//!    Build's `status.output.to.imageDigest`. A Job that is Complete while the cache shows no
//!    Succeeded pod yet reports Running (the pod's watch event follows), never a failure; a
//!    Job that failed while the cache shows none of its failed pods waits for them up to
//!    30 s, so the failure message carries the last attempt's log lines.
//! 6. *Clean up* once the lifecycle recorded a terminal phase: after a success the extra tag
//!    of the push spec (`:latest`) is moved to the image, the intermediate native image is
//!    deleted from the registry by digest (the Job's and the native Build's looked up by
//!    their tag first), and the Job (its pods with it) or Builds, the ConfigMaps and the
//!    Secret are deleted; after an interruption, the same without the extra tag — as far as
//!    the objects are still there to say what to delete: an interruption whose Job or Builds
//!    were deleted by the cancel before the clean-up saw them leaves the intermediate tag in
//!    the registry (retention does not know it either); after a failure everything is kept
//!    for inspection (the owner references to the MachineOSBuild delete them with it).
//!
//! **Restarts.** What must survive lives in the API server: the Job or Builds, labelled and
//! annotated with their MachineOSBuild, carrying the intermediate image and the push
//! settings as annotations. A restarted controller observes a running Job or RUN-step
//! Build and follows it (and asks the registry again about a finished one); a build that
//! was half-prepared, or whose native Build runs or finished without its RUN-step Build
//! yet, reports nothing, so the lifecycle starts it again: the creates find what is
//! already there (the native Build too), the wait finds the native Build as it is, and the
//! build goes on from there.
//!
//! **Cancel** (an interrupted or deleted build): the in-process stage stops at its next
//! await, and the Job (background propagation: its pods go with it) or the Builds are
//! deleted, which stops the buildah run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions,
};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{Backend, BackendStatus, Phase, RegistryImage, Timestamp};
use machineos_buildrequest::containerfile::{self, ContainerfileInputs, RunSteps};
use machineos_buildrequest::objects::{self, BuildMeta, JobState, RegistrySecret};
use machineos_buildrequest::tag::native_tag;
use machineos_diagnostics::{Classified, Retry};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::api::{self, now};
use crate::builder::{BuildRequest, Builder};
use crate::kinds;
use crate::observe::{Snapshot, view_of};
use crate::registry_ops::{self, RegistrySettings};
use machineos_kube::mco::{PodView, RunnerView};

/// Annotation on the Job/Build: the intermediate native image, `repo@sha256:…` (the Build's)
/// or `repo:<build>-native` (the Job's, which its pod pushes).
pub const NATIVE_IMAGE_ANNOTATION: &str = "machineos.io/native-image";
/// Annotation on the Job/Build: the push spec's extra tag, moved after a success.
pub const EXTRA_TAG_ANNOTATION: &str = "machineos.io/extra-tag";
/// Annotation on the Job/Build: the push Secret's name (for the clean-up's registry work).
pub const PUSH_SECRET_ANNOTATION: &str = "machineos.io/push-secret";
/// How long (seconds) a failed Job waits for its failed pods to reach the cache.
const POD_CACHE_GRACE: Timestamp = 30;
/// How long a create waits for an earlier MachineOSBuild's object of the same name to go.
const STALE_WAIT: Duration = Duration::from_secs(60);
/// How often it looks again meanwhile.
const STALE_POLL: Duration = Duration::from_millis(500);
/// How long an unanswered registry confirmation waits before it is asked again.
const CONFIRM_RETRY: Duration = Duration::from_secs(2);
/// How often a running native Build is looked at.
const NATIVE_POLL: Duration = Duration::from_secs(1);

/// Which object runs the RUN steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// A `batch/v1` Job running buildah.
    Job,
    /// A `build.openshift.io/v1` Build (Docker strategy).
    OpenShiftBuild,
}

impl Runner {
    fn backend(self) -> Backend {
        match self {
            Runner::Job => Backend::Job,
            Runner::OpenShiftBuild => Backend::OpenShiftBuild,
        }
    }

    fn resource(self) -> ApiResource {
        match self {
            Runner::Job => kinds::job(),
            Runner::OpenShiftBuild => kinds::openshift_build(),
        }
    }

    /// The reason a failed Job or Build is booked under: it failed for good (the Job's
    /// `backoffLimit` is its own retry).
    fn failed_reason(self) -> &'static str {
        match self {
            Runner::Job => "BuildJobFailed",
            Runner::OpenShiftBuild => "OpenShiftBuildFailed",
        }
    }

    fn kind_name(self) -> &'static str {
        match self {
            Runner::Job => "Job",
            Runner::OpenShiftBuild => "Build",
        }
    }
}

/// Settings of a RUN-step backend.
#[derive(Debug, Clone)]
pub struct RunStepSettings {
    /// The namespace of the ephemeral objects (the controller's).
    pub namespace: String,
    /// The target architecture (`GOARCH` spelling: `amd64`, `arm64`, …).
    pub arch: String,
    /// The Job's builder image.
    pub builder_image: String,
    /// The Job's `backoffLimit`.
    pub backoff_limit: i32,
    /// The service account of the Job's pod or of the Build; `None`: the namespace's
    /// default (Job) / `builder` (Build).
    pub service_account: Option<String>,
    /// Registry access (clean-up: the extra tag, the intermediate image).
    pub registry: RegistrySettings,
}

impl RunStepSettings {
    /// Defaults for namespace `ns` and architecture `arch`.
    pub fn new(ns: &str, arch: &str, registry: RegistrySettings) -> Self {
        RunStepSettings {
            namespace: ns.to_owned(),
            arch: arch.to_owned(),
            builder_image: objects::job::DEFAULT_IMAGE.to_owned(),
            backoff_limit: objects::job::DEFAULT_BACKOFF_LIMIT,
            service_account: None,
            registry,
        }
    }
}

/// Where an in-process build is.
#[derive(Debug, Clone, PartialEq)]
enum Stage {
    /// The OpenShift Build backend's native Build runs, since the build started.
    Native { since: Timestamp },
    /// The native Build waits to run (phase `New` or `Pending`), with why when it says.
    NativePending { detail: Option<String> },
    /// The ephemeral objects are being created, since the build started.
    Preparing { since: Timestamp },
    /// The Job or Build was created; the API objects say the rest.
    Launched { since: Timestamp },
    /// Nothing needed RUN: the native Build's push is the result, as the registry serves it.
    Done { image: RegistryImage, at: Timestamp },
    /// Failed before the Job or the RUN-step Build existed.
    Failed { error: Classified, at: Timestamp },
}

struct Entry {
    stage: Stage,
    cancel: CancellationToken,
}

/// What the registry says of the digest a Job's termination message or a Build's status
/// reported (the build is recorded only once the registry shows that manifest).
#[derive(Debug, Clone)]
enum Confirmation {
    /// Being asked (`digest`).
    Asking { digest: String },
    /// The registry serves it: the image and its architectures.
    Present {
        digest: String,
        image: RegistryImage,
    },
    /// The registry has no such manifest, or refused the question for good.
    Absent { digest: String, message: String },
}

impl Confirmation {
    fn digest(&self) -> &str {
        match self {
            Confirmation::Asking { digest }
            | Confirmation::Present { digest, .. }
            | Confirmation::Absent { digest, .. } => digest,
        }
    }
}

struct Inner {
    runner: Runner,
    client: Client,
    settings: RunStepSettings,
    builds: Mutex<HashMap<String, Entry>>,
    /// Builds whose clean-up is under way (not started again until it ends).
    cleaning: Mutex<std::collections::HashSet<String>>,
    /// What the registry said of the digest each finished Job or Build reported.
    confirmed: Mutex<HashMap<String, Confirmation>>,
    root: CancellationToken,
    wake: Arc<Notify>,
}

/// A RUN-step backend (see the module documentation).
#[derive(Clone)]
pub struct RunStepBackend {
    inner: Arc<Inner>,
}

impl RunStepBackend {
    /// A backend running its builds with `runner`. `wake` is notified on every in-process
    /// change.
    pub fn new(
        runner: Runner,
        client: Client,
        settings: RunStepSettings,
        wake: Arc<Notify>,
    ) -> Self {
        RunStepBackend {
            inner: Arc::new(Inner {
                runner,
                client,
                settings,
                builds: Mutex::new(HashMap::new()),
                cleaning: Mutex::new(std::collections::HashSet::new()),
                confirmed: Mutex::new(HashMap::new()),
                root: CancellationToken::new(),
                wake,
            }),
        }
    }

    /// A guard that cancels every in-process stage when dropped (see
    /// [`crate::native::NativeBackend::drop_guard`]).
    pub fn drop_guard(&self) -> tokio_util::sync::DropGuard {
        self.inner.root.clone().drop_guard()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.inner
            .builds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn confirmed(&self) -> MutexGuard<'_, HashMap<String, Confirmation>> {
        self.inner
            .confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Succeeded status of `build` once the registry confirmed that `repository` holds
    /// `digest`; until then Running (a question is sent once, its answer wakes the loop);
    /// Failed when it does not. `credentials` read the repository (the push Secret's).
    fn confirm(
        &self,
        build: &str,
        repository: &str,
        digest: &str,
        credentials: Option<(String, Vec<u8>)>,
        (since, at): (Timestamp, Timestamp),
    ) -> BackendStatus {
        let known = self
            .confirmed()
            .get(build)
            .filter(|c| c.digest() == digest)
            .cloned();
        match known {
            Some(Confirmation::Present { image, .. }) => BackendStatus::Succeeded { image, at },
            Some(Confirmation::Absent { message, .. }) => BackendStatus::Failed {
                error: Classified::permanent("BuildImageMissing", message),
                at,
            },
            Some(Confirmation::Asking { .. }) => BackendStatus::Running { since },
            None => {
                self.confirmed().insert(
                    build.to_owned(),
                    Confirmation::Asking {
                        digest: digest.to_owned(),
                    },
                );
                let this = self.clone();
                let (build, image) = (build.to_owned(), format!("{repository}@{digest}"));
                let digest = digest.to_owned();
                let kind = self.inner.runner.kind_name();
                tokio::spawn(async move {
                    let answer = this.ask_registry(&image, &digest, credentials, kind).await;
                    match answer {
                        Some(c) => {
                            this.confirmed().insert(build, c);
                        }
                        None => {
                            // Not answered (a transient error): ask again a little later.
                            tokio::time::sleep(CONFIRM_RETRY).await;
                            this.confirmed().remove(&build);
                        }
                    }
                    this.inner.wake.notify_one();
                });
                BackendStatus::Running { since }
            }
        }
    }

    /// Whether the registry serves `image` (`repo@digest`): `None` when it did not answer.
    async fn ask_registry(
        &self,
        image: &str,
        digest: &str,
        credentials: Option<(String, Vec<u8>)>,
        kind: &str,
    ) -> Option<Confirmation> {
        let creds: Vec<(String, Vec<u8>)> = credentials.into_iter().collect();
        let absent = |message: String| Confirmation::Absent {
            digest: digest.to_owned(),
            message,
        };
        let client = match self.inner.settings.registry.client(&creds) {
            Ok(c) => c,
            Err(e) => return Some(absent(format!("checking {image}: {}", e.message))),
        };
        let reference = match machineos_image::ImageRef::parse(image) {
            Ok(machineos_image::ImageRef::Registry(r)) => r,
            _ => return Some(absent(format!("the {kind} reported {image}, not an image"))),
        };
        match client.for_operation().image_info(&reference).await {
            Ok(Some(info)) => Some(Confirmation::Present {
                digest: digest.to_owned(),
                image: registry_ops::registry_image(image.to_owned(), info),
            }),
            Ok(None) => Some(absent(format!(
                "the {kind} reported {image}, which the registry does not have"
            ))),
            Err(e) if machineos_diagnostics::Classify::retry(&e) == Retry::Transient => {
                tracing::warn!(%image, error = %e, "confirming the build's image (retrying)");
                None
            }
            Err(e) => Some(absent(format!("checking {image}: {e}"))),
        }
    }

    fn cleaning(&self) -> MutexGuard<'_, std::collections::HashSet<String>> {
        self.inner
            .cleaning
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`Self::set`], waking the loop only when the stage changes (a poll that finds the
    /// same state wakes nobody).
    fn set_quietly(&self, build: &str, stage: Stage) {
        let changed = self.lock().get_mut(build).is_some_and(|e| {
            let changed = e.stage != stage;
            e.stage = stage;
            changed
        });
        if changed {
            self.inner.wake.notify_one();
        }
    }

    fn set(&self, build: &str, stage: Stage) {
        if let Some(e) = self.lock().get_mut(build) {
            e.stage = stage;
        }
        self.inner.wake.notify_one();
    }

    fn api(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.inner.client.clone(),
            &self.inner.settings.namespace,
            ar,
        )
    }

    /// The Jobs or Builds of this backend in the snapshot, by build name.
    fn runner_objects<'a>(&self, s: &'a Snapshot) -> Vec<(String, &'a DynamicObject)> {
        let list = match self.inner.runner {
            Runner::Job => &s.jobs,
            Runner::OpenShiftBuild => &s.openshift_builds,
        };
        list.iter()
            .filter_map(|o| Some((build_of_object(o.as_ref())?, o.as_ref())))
            .collect()
    }

    /// [`Self::runner_objects`] that belong to the MachineOSBuild of their name as it is
    /// now: owned by its uid. One owned by an earlier MachineOSBuild of the same name (its
    /// garbage collection pending) is not; a build not in the snapshot yet (created this
    /// pass) keeps what the snapshot has.
    fn current_runner_objects<'a>(&self, s: &'a Snapshot) -> Vec<(String, &'a DynamicObject)> {
        self.runner_objects(s)
            .into_iter()
            .filter(
                |(build, obj)| match s.builds.iter().find(|b| &b.name_any() == build) {
                    Some(b) => b
                        .uid()
                        .is_some_and(|uid| obj.owner_references().iter().any(|o| o.uid == uid)),
                    None => true,
                },
            )
            .collect()
    }

    /// The build's state from its Job (and pods) or Build, `value` being `obj` as JSON.
    fn state_of(&self, s: &Snapshot, obj: &DynamicObject, value: &Value) -> JobState {
        match self.inner.runner {
            Runner::Job => {
                let uid = obj.uid();
                let pods: Vec<Value> = s
                    .pods
                    .iter()
                    .filter(|p| {
                        p.owner_references()
                            .iter()
                            .any(|o| Some(&o.uid) == uid.as_ref())
                    })
                    .map(|p| to_value(p.as_ref()))
                    .collect();
                let state = objects::job_state(value, &pods);
                let job: RunnerView = view_of("Job", obj);
                let complete = job.has_true(&["Complete", "SuccessCriteriaMet"]);
                let phase = |want: &str| {
                    pods.iter().any(|p| {
                        serde_json::from_value::<PodView>(p.clone())
                            .is_ok_and(|p| p.status.phase.as_deref() == Some(want))
                    })
                };
                let (pod_succeeded, pod_failed) = (phase("Succeeded"), phase("Failed"));
                // When the Job gave up: its Failed (or FailureTarget) condition's time.
                let gave_up = job
                    .status
                    .conditions
                    .iter()
                    .filter(|c| (c.type_ == "Failed" || c.type_ == "FailureTarget") && c.is_true())
                    .filter_map(|c| parse_time(c.last_transition_time.as_ref()?.as_str()))
                    .min();
                let waiting = JobState::Running {
                    since: job.status.start_time.clone(),
                };
                match state {
                    // The cache has the Job's completion before its pod's: wait for it.
                    JobState::Failed { .. } if complete && !pod_succeeded => waiting,
                    // The Job's failure before its failed pods, whose last lines the
                    // message carries: wait for them, a little (pods can be gone for good).
                    JobState::Failed { .. }
                        if !complete
                            && !pod_failed
                            && gave_up.is_some_and(|t| now() - t < POD_CACHE_GRACE) =>
                    {
                        waiting
                    }
                    other => other,
                }
            }
            Runner::OpenShiftBuild => objects::build_state(value),
        }
    }

    /// Run a build up to its Job or RUN-step Build (or, for an OpenShift Build with nothing
    /// to RUN, to its result); the stage is recorded as it goes.
    async fn run(&self, request: BuildRequest, steps: RunSteps) {
        let build = request.build.clone();
        let outcome = match self.inner.runner {
            Runner::Job => self.prepare(&request, &steps, None).await.map(|()| None),
            Runner::OpenShiftBuild => self.openshift(&request, &steps).await,
        };
        match outcome {
            Ok(None) => {
                tracing::info!(build = %build, runner = self.inner.runner.kind_name(), "RUN-step build launched");
                self.set(&build, Stage::Launched { since: now() });
            }
            Ok(Some(image)) => {
                tracing::info!(build = %build, image = %image.image, "the native Build's image is the result");
                self.set(&build, Stage::Done { image, at: now() });
            }
            Err(error) => {
                tracing::warn!(build = %build, %error, reason = error.reason, "RUN-step build failed before launch");
                self.set(&build, Stage::Failed { error, at: now() });
            }
        }
    }

    /// The owner's uid: a build created in the same pass is not in that pass's snapshot.
    async fn owner_uid(&self, request: &BuildRequest) -> Result<String, Classified> {
        if request.build_uid.is_empty() {
            self.build_uid(&request.build).await
        } else {
            Ok(request.build_uid.clone())
        }
    }

    /// The OpenShift Build backend: the native Build (its inputs first), waited for; what
    /// its tag names in the registry; then, with RUN steps, the RUN-step Build `FROM` that
    /// image by digest (`None`), else that image is the result (`Some`).
    async fn openshift(
        &self,
        request: &BuildRequest,
        steps: &RunSteps,
    ) -> Result<Option<RegistryImage>, Classified> {
        let build = &request.build;
        let since = now();
        let build_uid = self.owner_uid(request).await?;
        let tag = if steps.is_empty() {
            request.push.pullspec()
        } else {
            format!("{}:{}", request.push.repository, native_tag(build))
        };
        let (r, st, settings, owner, t) = (
            request.clone(),
            steps.clone(),
            self.inner.settings.clone(),
            build_uid.clone(),
            tag.clone(),
        );
        let (inputs, mc_parts) =
            tokio::task::spawn_blocking(move || plan_native_objects(&settings, &r, &st, &t, owner))
                .await
                .map_err(|e| {
                    Classified::permanent("Internal", format!("planning the build's objects: {e}"))
                })??;
        self.create_all(inputs, &build_uid).await?;
        self.set(build, Stage::Native { since });
        self.wait_native(build, &build_uid, since).await?;
        let image = self.pushed(&tag, request.push_secret.clone()).await?;
        tracing::info!(build = %build, image = %image.image, "native Build complete");
        if steps.is_empty() {
            return Ok(Some(image));
        }
        self.prepare(request, steps, Some((image.image, mc_parts)))
            .await?;
        Ok(None)
    }

    /// Until the native Build of `build` (owned by `owner`) is Complete; its failure as the
    /// build's; while it waits to run (`New`, `Pending`), the build is Pending with the
    /// Build's reason, as a RUN-step Build's would be. Polled (a list by name: the Role has
    /// no `get` on Builds), every [`NATIVE_POLL`].
    async fn wait_native(
        &self,
        build: &str,
        owner: &str,
        since: Timestamp,
    ) -> Result<(), Classified> {
        let api = self.api(&kinds::openshift_build());
        let name = objects::native_build_name(build);
        let what = format!("Build {}/{name}", self.inner.settings.namespace);
        let params = ListParams::default().fields(&format!("metadata.name={name}"));
        loop {
            let found = retry_transient(|| async {
                api.list(&params).await.map_err(|e| {
                    api::ExecError::Api(machineos_kube::api_err("listing", what.clone())(e))
                })
            })
            .await?;
            let ours = found
                .items
                .into_iter()
                .find(|b| b.owner_references().iter().any(|o| o.uid == owner));
            let Some(b) = ours else {
                return Err(Classified {
                    message: format!("{what} is gone (deleted by another client)"),
                    reason: "OpenShiftBuildFailed",
                    retry: Retry::Transient,
                });
            };
            let value = to_value(&b);
            match value["status"]["phase"].as_str() {
                Some("Complete") => return Ok(()),
                Some("Failed" | "Error" | "Cancelled") => {
                    let message = match objects::build_state(&value) {
                        JobState::Failed { message } => message,
                        other => format!("{what} ended: {other:?}"),
                    };
                    return Err(Classified::permanent("OpenShiftBuildFailed", message));
                }
                phase => {
                    let stage = match (phase, objects::build_state(&value)) {
                        (Some("" | "New" | "Pending") | None, JobState::Pending { detail }) => {
                            Stage::NativePending { detail }
                        }
                        _ => Stage::Native { since },
                    };
                    self.set_quietly(build, stage);
                    tokio::time::sleep(NATIVE_POLL).await;
                }
            }
        }
    }

    /// What `tag` names in the registry (read with `credentials`, the push Secret's), with
    /// each architecture's manifest digest; transient errors asked again with backoff.
    async fn pushed(
        &self,
        tag: &str,
        credentials: (String, Vec<u8>),
    ) -> Result<RegistryImage, Classified> {
        use machineos_diagnostics::{Backoff, Classify};
        let client = self.inner.settings.registry.client(&[credentials])?;
        let reference = match machineos_image::ImageRef::parse(tag) {
            Ok(machineos_image::ImageRef::Registry(r)) => r,
            _ => {
                return Err(Classified::permanent(
                    "Internal",
                    format!("{tag}: not a registry image"),
                ));
            }
        };
        let backoff = Backoff::doubling(Duration::from_millis(250), Duration::from_secs(30));
        let mut failures = 0;
        loop {
            match client.for_operation().image_info(&reference).await {
                Ok(Some(info)) => {
                    let image = format!("{}@{}", reference.name(), info.digest);
                    return Ok(registry_ops::registry_image(image, info));
                }
                Ok(None) => {
                    return Err(Classified::permanent(
                        "BuildImageMissing",
                        format!(
                            "the native Build completed, but the registry has no {tag}, which \
                             it pushes"
                        ),
                    ));
                }
                Err(e) if e.retry() == Retry::Transient => {
                    failures += 1;
                    let wait = backoff.delay(failures);
                    tracing::warn!(%tag, error = %e, ?wait, "reading the native Build's image (retrying)");
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    return Err(Classified::permanent(
                        "BuildImageMissing",
                        format!("checking {tag}: {e}"),
                    ));
                }
            }
        }
    }

    /// Create the Job or the RUN-step Build, and for the Job its inputs; `native`: the
    /// native image the RUN-step Build starts `FROM`, by digest, and how many MachineConfig
    /// ConfigMaps the native Build made.
    async fn prepare(
        &self,
        request: &BuildRequest,
        steps: &RunSteps,
        native: Option<(String, usize)>,
    ) -> Result<(), Classified> {
        let settings = &self.inner.settings;
        let runner = self.inner.runner;
        let build = &request.build;
        let since = now();
        self.set(build, Stage::Preparing { since });
        let build_uid = self.owner_uid(request).await?;
        // Rendering, gzip and base64 of the MachineConfig: CPU work, on a blocking thread.
        let (request, steps, settings) = (request.clone(), steps.clone(), settings.clone());
        let owner = build_uid.clone();
        let inputs = tokio::task::spawn_blocking(move || {
            plan_objects(
                runner,
                &settings,
                &request,
                &steps,
                native
                    .as_ref()
                    .map(|(image, parts)| (image.as_str(), *parts)),
                owner,
            )
        })
        .await
        .map_err(|e| {
            Classified::permanent("Internal", format!("planning the build's objects: {e}"))
        })??;
        self.create_all(inputs, &build_uid).await
    }

    /// Create `objects` in order, each owned by the MachineOSBuild `build_uid`.
    async fn create_all(
        &self,
        objects: Vec<(ApiResource, Value)>,
        build_uid: &str,
    ) -> Result<(), Classified> {
        let ns = self.inner.settings.namespace.as_str();
        for (ar, obj) in objects {
            let name = obj
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let what = format!("{} {ns}/{name}", ar.kind);
            let name = name.to_owned();
            self.create_owned(&ar, &name, obj, what, build_uid).await?;
        }
        Ok(())
    }

    /// The MachineOSBuild's uid, read from the API server (transient errors retried).
    async fn build_uid(&self, build: &str) -> Result<String, Classified> {
        let api = kinds::all(&self.inner.client, &kinds::build());
        let object = format!("MachineOSBuild {build}");
        let b = retry_transient(|| async {
            api.get(build).await.map_err(|e| {
                api::ExecError::Api(machineos_kube::api_err("reading", object.clone())(e))
            })
        })
        .await?;
        b.uid()
            .ok_or_else(|| Classified::permanent("Internal", format!("{object} has no uid")))
    }

    /// Create `obj` (named `name`), owned by the MachineOSBuild whose uid is `owner`: see
    /// the module's step 4 for what an existing object of that name means.
    async fn create_owned(
        &self,
        ar: &ApiResource,
        name: &str,
        obj: Value,
        what: String,
        owner: &str,
    ) -> Result<(), Classified> {
        let api = self.api(ar);
        let typed: DynamicObject = serde_json::from_value(obj)
            .map_err(|e| Classified::permanent("Internal", format!("{what}: encoding: {e}")))?;
        let started = tokio::time::Instant::now();
        loop {
            let created = retry_transient(|| async {
                match api.create(&PostParams::default(), &typed).await {
                    Ok(_) => Ok(true),
                    Err(e) if machineos_kube::error::code(&e) == Some(409) => Ok(false),
                    Err(e) => Err(api::ExecError::Api(machineos_kube::api_err(
                        "creating",
                        what.clone(),
                    )(e))),
                }
            })
            .await?;
            if created {
                return Ok(());
            }
            // Who holds the name? (The Role lists; it has no `get` on these kinds.)
            let params = ListParams::default().fields(&format!("metadata.name={name}"));
            let found = retry_transient(|| async {
                api.list(&params).await.map_err(|e| {
                    api::ExecError::Api(machineos_kube::api_err("listing", what.clone())(e))
                })
            })
            .await?;
            let Some(existing) = found.items.into_iter().next() else {
                continue; // gone in between: create again
            };
            if existing.owner_references().iter().any(|o| o.uid == owner) {
                return Ok(()); // ours: an earlier attempt of this build made it
            }
            if started.elapsed() >= STALE_WAIT {
                return Err(Classified {
                    message: format!(
                        "{what} still belongs to an earlier MachineOSBuild of the same name after \
                         {}s (its garbage collection is pending)",
                        STALE_WAIT.as_secs()
                    ),
                    reason: "StaleBuildObject",
                    retry: Retry::Transient,
                });
            }
            if existing.metadata.deletion_timestamp.is_none() {
                tracing::info!(object = %what, "deleting an earlier MachineOSBuild's object of the same name");
                let dp = DeleteParams {
                    preconditions: existing.uid().map(|uid| Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::background()
                };
                match api.delete(name, &dp).await {
                    Ok(_) => {}
                    // Gone, or replaced since the list: look again.
                    Err(e) if matches!(machineos_kube::error::code(&e), Some(404 | 409)) => {}
                    Err(e) => {
                        return Err(Classified::of(&api::ExecError::Api(
                            machineos_kube::api_err("deleting", what.clone())(e),
                        )));
                    }
                }
            }
            tokio::time::sleep(STALE_POLL).await;
        }
    }

    /// The registry work and deletes of [`Builder::clean_up`].
    async fn clean(&self, objects_of: Vec<(ApiResource, String)>, registry: Option<CleanUp>) {
        if let Some(r) = registry {
            let creds: Vec<(String, Vec<u8>)> = r.credentials.into_iter().collect();
            match self.inner.settings.registry.client(&creds) {
                Ok(client) => {
                    if let (Some(tag), Some(image)) = (&r.extra_tag, &r.image) {
                        match machineos_image::ImageRef::parse(image) {
                            Ok(image_ref) => {
                                if let Err(e) = registry_ops::retag(&client, &image_ref, tag).await
                                {
                                    tracing::warn!(%image, %tag, error = %e, "moving the extra tag failed");
                                }
                            }
                            Err(e) => tracing::warn!(%image, error = %e, "bad image reference"),
                        }
                    }
                    if let Some(native) = &r.native_image {
                        // The Job's is its tag (the pod pushed it): by digest first.
                        let by_digest = match registry_ops::resolve(&client, native).await {
                            Ok(d) => Some(d),
                            Err((e, _)) => {
                                tracing::info!(image = %native, error = %e, "no intermediate native image to delete");
                                None
                            }
                        };
                        if let Some(image) = by_digest
                            && let Err(e) = registry_ops::delete(&client, &image).await
                        {
                            tracing::warn!(%image, error = %e, "deleting the intermediate native image failed");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "registry credentials for the clean-up"),
            }
        }
        for (ar, name) in objects_of {
            let what = format!("{} {}/{name}", ar.kind, self.inner.settings.namespace);
            if let Err(e) = api::delete(&self.api(&ar), &name, what).await {
                tracing::warn!(error = %e, "clean-up delete failed (retried on the next pass)");
            }
        }
    }
}

/// The objects that launch a build, in creation order: for the Job, the merged pull Secret,
/// the inputs ConfigMap (the user's Containerfile and the registry CA bundle), the
/// MachineConfig ConfigMap(s), then the Job; for the OpenShift Build backend only the
/// RUN-step Build (its inputs came with the native Build, [`plan_native_objects`]), the
/// rendered Containerfile inline `FROM` the native image. The Job or Build is annotated
/// with the push Secret, the extra tag and the intermediate image (the native image by
/// digest, or for the Job its `<build>-native` tag when RUN steps run). Pure.
fn plan_objects(
    runner: Runner,
    settings: &RunStepSettings,
    request: &BuildRequest,
    steps: &RunSteps,
    native: Option<(&str, usize)>,
    build_uid: String,
) -> Result<Vec<(ApiResource, Value)>, Classified> {
    let rendered_name = request.rendered.name().to_owned();
    let ns = settings.namespace.as_str();
    let push_name = &request.push_secret.0;
    let meta = build_meta(request, build_uid);
    let mut inputs = Vec::new();
    let (mut runner_obj, intermediate) = match (runner, native) {
        (Runner::Job, _) => {
            let (secret, mcs) = shared_inputs(settings, request, &meta)?;
            let (job, cm, intermediate) = plan_job(settings, request, steps, meta, mcs.len())?;
            inputs.push((kinds::secret(), secret));
            inputs.push((kinds::config_map(), cm));
            inputs.extend(mcs.iter().map(|m| (kinds::config_map(), m.clone())));
            (job, intermediate)
        }
        (Runner::OpenShiftBuild, Some((native_image, mc_parts))) => {
            let text = containerfile::render(&ContainerfileInputs {
                run_steps: steps,
                from_image: native_image,
                extensions_image: request.inputs.extensions_image.as_deref(),
                machine_config: &rendered_name,
                pool: &request.pool,
                base_image: &request.inputs.base_image,
            })
            .map_err(|e| Classified::of(&e).context("Containerfile"))?
            .ok_or_else(|| {
                Classified::permanent(
                    "Internal",
                    "Containerfile: nothing to RUN after all (a machineos bug)",
                )
            })?;
            // Heredocs in the exec form: any buildah (Debian's 1.28 has none) and
            // OpenShift's builder build it. The inputs exist already (the native Build's).
            let (text, _) = containerfile::heredoc::lower(&text)
                .map_err(|e| Classified::of(&e).context("Containerfile"))?;
            let mut b = objects::BuildApiInputs::new(
                meta,
                ns,
                request.push.pullspec(),
                text,
                push_name.clone(),
            );
            b.mc_parts = mc_parts;
            b.arch = Some(settings.arch.clone());
            b.service_account = settings.service_account.clone();
            let build = objects::build_build(&b).map_err(|e| Classified::of(&e))?;
            (build, Some(native_image.to_owned()))
        }
        (Runner::OpenShiftBuild, None) => {
            return Err(Classified::permanent(
                "Internal",
                "an OpenShift Build without its native stage (a machineos bug)",
            ));
        }
    };
    let annotations = &mut runner_obj["metadata"]["annotations"];
    if let Some(image) = intermediate {
        annotations[NATIVE_IMAGE_ANNOTATION] = json!(image);
    }
    annotations[PUSH_SECRET_ANNOTATION] = json!(push_name);
    if let Some(tag) = &request.push.extra_tag {
        annotations[EXTRA_TAG_ANNOTATION] = json!(tag);
    }
    inputs.push((runner.resource(), runner_obj));
    Ok(inputs)
}

/// The OpenShift Build backend's first objects, in creation order: the merged pull Secret,
/// the inputs ConfigMap (when there is a registry CA bundle), the MachineConfig
/// ConfigMap(s), then the native Build pushing to `tag`, annotated with the push Secret and,
/// when its push is the result (nothing to RUN), the extra tag; and how many MachineConfig
/// ConfigMaps there are (the RUN-step Build mounts them too). Pure.
fn plan_native_objects(
    settings: &RunStepSettings,
    request: &BuildRequest,
    steps: &RunSteps,
    tag: &str,
    build_uid: String,
) -> Result<(Vec<(ApiResource, Value)>, usize), Classified> {
    let ns = settings.namespace.as_str();
    let push_name = &request.push_secret.0;
    let meta = build_meta(request, build_uid);
    let (secret, mcs) = shared_inputs(settings, request, &meta)?;
    let ca = ca_bundle(settings);
    let mut out = vec![(kinds::secret(), secret)];
    if let Some(ca) = &ca {
        out.push((
            kinds::config_map(),
            objects::build_inputs_config_map(&meta, ns, None, Some(ca)),
        ));
    }
    out.extend(mcs.iter().map(|m| (kinds::config_map(), m.clone())));
    // Nothing to RUN: every architecture the request names, in one index; else the one the
    // RUN-step Build runs on.
    let architectures: Vec<String> = match (steps.is_empty(), request.architectures.as_slice()) {
        (true, many) if !many.is_empty() => many.to_vec(),
        _ => vec![settings.arch.clone()],
    };
    let mut n = objects::NativeBuildInputs::new(
        meta,
        ns,
        settings.builder_image.clone(),
        tag,
        request.inputs.base_image.clone(),
    );
    n.extensions_image = request.inputs.extensions_image.clone();
    n.platforms = architectures.iter().map(|a| format!("linux/{a}")).collect();
    n.insecure_registries = settings.registry.insecure_hosts.clone();
    n.ca_bundle = ca.is_some();
    n.mc_parts = mcs.len();
    n.service_account = settings.service_account.clone();
    n.boot_guard = request.boot_guard;
    let mut build = objects::native_build(&n);
    let annotations = &mut build["metadata"]["annotations"];
    annotations[PUSH_SECRET_ANNOTATION] = json!(push_name);
    if steps.is_empty() {
        if let Some(extra) = &request.push.extra_tag {
            annotations[EXTRA_TAG_ANNOTATION] = json!(extra);
        }
    } else {
        // The intermediate image, by its tag: an interruption before the RUN-step Build
        // exists still finds it to delete.
        annotations[NATIVE_IMAGE_ANNOTATION] = json!(tag);
    }
    out.push((kinds::openshift_build(), build));
    Ok((out, mcs.len()))
}

/// The metadata of a build's objects, owned by the MachineOSBuild `build_uid`. Pure.
fn build_meta(request: &BuildRequest, build_uid: String) -> BuildMeta {
    BuildMeta {
        build: request.build.clone(),
        build_uid,
        machine_os_config: request.machine_os_config.clone(),
        pool: request.pool.clone(),
        rendered_machine_config: request.rendered.name().to_owned(),
    }
}

/// The inputs every backend's build reads: the merged pull Secret and the MachineConfig
/// ConfigMap(s) (its gzip and base64: CPU work). Pure.
fn shared_inputs(
    settings: &RunStepSettings,
    request: &BuildRequest,
    meta: &BuildMeta,
) -> Result<(Value, Vec<Value>), Classified> {
    let ns = settings.namespace.as_str();
    let (push_name, push_bytes) = &request.push_secret;
    let secret = objects::merged_pull_secret(
        meta,
        ns,
        RegistrySecret::dockerconfigjson(push_name, push_bytes),
        request
            .pull_secret
            .as_ref()
            .map(|(n, b)| RegistrySecret::dockerconfigjson(n, b)),
    )
    .map_err(|e| Classified::of(&e))?;
    let mcs = objects::machine_config_config_maps(meta, ns, &request.rendered_json)
        .map_err(|e| Classified::of(&e))?;
    Ok((secret, mcs))
}

/// The controller's registry CA bundle as one PEM text, if it has one.
fn ca_bundle(settings: &RunStepSettings) -> Option<String> {
    let ca: String = settings
        .registry
        .ca_pems
        .iter()
        .map(|pem| String::from_utf8_lossy(pem).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    (!ca.is_empty()).then_some(ca)
}

/// The build Job and its inputs ConfigMap, and the intermediate image it pushes (its
/// `<build>-native` tag, when RUN steps run). Which platforms: with RUN steps one — the
/// pool's single architecture, else the controller's — and the pod is scheduled there;
/// without, every architecture the request names (the controller's when none), built
/// from any node.
fn plan_job(
    settings: &RunStepSettings,
    request: &BuildRequest,
    steps: &RunSteps,
    meta: BuildMeta,
    mc_parts: usize,
) -> Result<(Value, Value, Option<String>), Classified> {
    let ns = settings.namespace.as_str();
    let needs_run = !steps.is_empty();
    let architectures: Vec<String> = match (needs_run, request.architectures.as_slice()) {
        (true, [one]) => vec![one.clone()],
        (true, _) | (false, []) => vec![settings.arch.clone()],
        (false, many) => many.to_vec(),
    };
    let ca = ca_bundle(settings).unwrap_or_default();
    // The user's Containerfile for the architecture, ending in one newline.
    let containerfile = steps
        .user_containerfile()
        .map(|(_, text)| format!("{text}\n"));
    let cm = objects::build_inputs_config_map(
        &meta,
        ns,
        containerfile.as_deref(),
        (!ca.is_empty()).then_some(ca.as_str()),
    );
    let mut job = objects::JobInputs::new(
        meta,
        ns,
        request.push.pullspec(),
        request.inputs.base_image.clone(),
    );
    job.extensions_image = request.inputs.extensions_image.clone();
    job.containerfile = steps.user_containerfile().is_some();
    job.ca_bundle = !ca.is_empty();
    job.insecure_registries = settings.registry.insecure_hosts.clone();
    job.platforms = architectures.iter().map(|a| format!("linux/{a}")).collect();
    job.mc_parts = mc_parts;
    job.image = settings.builder_image.clone();
    job.backoff_limit = settings.backoff_limit;
    job.arch = needs_run.then(|| architectures[0].clone());
    job.boot_guard = request.boot_guard;
    job.service_account = settings.service_account.clone();
    let intermediate =
        needs_run.then(|| format!("{}:{}", request.push.repository, native_tag(&request.build)));
    Ok((objects::build_job(&job), cm, intermediate))
}

/// `op` until it succeeds or fails for good: transient errors (API 5xx, 429, connection
/// errors) are retried with backoff, 250 ms doubling to 30 s, until the caller's task is
/// cancelled; a permanent one is the error's message.
async fn retry_transient<T, F, Fut>(mut op: F) -> Result<T, Classified>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, api::ExecError>>,
{
    use machineos_diagnostics::{Backoff, Classify};
    let backoff = Backoff::doubling(Duration::from_millis(250), Duration::from_secs(30));
    let mut failures = 0;
    loop {
        match op().await {
            Ok(t) => return Ok(t),
            Err(e) if e.retry() == Retry::Transient => {
                failures += 1;
                let wait = backoff.delay(failures);
                tracing::warn!(error = %e, ?wait, "API request failed (retrying)");
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(Classified::of(&e)),
        }
    }
}

/// Registry work of a clean-up.
struct CleanUp {
    credentials: Option<(String, Vec<u8>)>,
    /// The build's image, `repo@sha256:…` (for the extra tag).
    image: Option<String>,
    extra_tag: Option<String>,
    native_image: Option<String>,
}

/// The MachineOSBuild an ephemeral object belongs to (its annotation, full name).
fn build_of_object<K: ResourceExt>(o: &K) -> Option<String> {
    o.annotations()
        .get(objects::names::MACHINE_OS_BUILD_KEY)
        .cloned()
}

/// Whether `o` is an OpenShift Build backend's native Build.
fn is_native_build<K: ResourceExt>(o: &K) -> bool {
    o.annotations()
        .get(objects::native_build::BUILD_STAGE_ANNOTATION)
        .is_some_and(|v| v == objects::native_build::NATIVE_STAGE)
}

/// The build an ephemeral input (ConfigMap, Secret) belongs to: only objects with the
/// ephemeral-build-object label count.
fn ephemeral_input_of<K: ResourceExt>(o: &K) -> Option<String> {
    o.labels()
        .contains_key(objects::names::EPHEMERAL_BUILD_OBJECT_LABEL)
        .then(|| build_of_object(o))
        .flatten()
}

fn to_value<K: serde::Serialize>(o: &K) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// RFC 3339 → seconds.
fn parse_time(t: Option<&str>) -> Option<Timestamp> {
    t?.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// The repository of a tagged or digested reference (`host/path/name:tag` → `host/path/name`).
fn repository_of(reference: &str) -> String {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => no_digest[..i].to_owned(),
        _ => no_digest.to_owned(),
    }
}

impl Builder for RunStepBackend {
    fn kind(&self) -> Backend {
        self.inner.runner.backend()
    }

    fn start(&self, request: BuildRequest) {
        let build = request.build.clone();
        if self.lock().contains_key(&build) {
            return;
        }
        let cancel = self.inner.root.child_token();
        // RUN steps run on the pool's one architecture, else the controller's.
        let run_arch = match request.architectures.as_slice() {
            [one] if self.inner.runner == Runner::Job => one.clone(),
            _ => self.inner.settings.arch.clone(),
        };
        let steps = match request.run_steps(&run_arch) {
            Ok(s) => s,
            Err(e) => {
                self.lock().insert(
                    build,
                    Entry {
                        stage: Stage::Failed {
                            error: Classified::of(&e),
                            at: now(),
                        },
                        cancel,
                    },
                );
                self.inner.wake.notify_one();
                return;
            }
        };
        let stage = match self.inner.runner {
            Runner::Job => Stage::Preparing { since: now() },
            Runner::OpenShiftBuild => Stage::Native { since: now() },
        };
        self.lock().insert(
            build.clone(),
            Entry {
                stage,
                cancel: cancel.clone(),
            },
        );
        let this = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {
                    tracing::info!(build = %build, "RUN-step build stopped before launch: cancelled");
                }
                () = this.run(request, steps) => {}
            }
        });
    }

    fn observe(&self, s: &Snapshot) -> HashMap<String, BackendStatus> {
        let mut out = HashMap::new();
        // The native Build is followed by the task that created it (the memory below).
        for (build, obj) in self.current_runner_objects(s) {
            if is_native_build(obj) {
                continue;
            }
            let value = to_value(obj);
            let runner: RunnerView = view_of(self.inner.runner.kind_name(), obj);
            let target = match self.inner.runner {
                Runner::Job => runner.env("TAG"),
                Runner::OpenShiftBuild => runner.spec.output.to.get(),
            }
            .unwrap_or_default()
            .to_owned();
            let finished_at = parse_time(runner.finished());
            let started = parse_time(runner.status.start_time.as_deref())
                .or_else(|| obj.creation_timestamp().map(|t| t.0.as_second()))
                .unwrap_or_else(now);
            let status = match self.state_of(s, obj, &value) {
                JobState::Pending { detail } => BackendStatus::Pending { detail },
                JobState::Running { since } => BackendStatus::Running {
                    since: parse_time(since.as_deref())
                        .or_else(|| obj.creation_timestamp().map(|t| t.0.as_second()))
                        .unwrap_or_else(now),
                },
                // Recorded once the registry shows it.
                JobState::Succeeded { digest } => self.confirm(
                    &build,
                    &repository_of(&target),
                    &digest,
                    obj.annotations()
                        .get(PUSH_SECRET_ANNOTATION)
                        .and_then(|n| s.dockerconfigjson(n)),
                    (started, finished_at.unwrap_or_else(now)),
                ),
                // The message names the Job (or Build) and its last attempt.
                JobState::Failed { message } => BackendStatus::Failed {
                    error: Classified::permanent(self.inner.runner.failed_reason(), message),
                    at: finished_at.unwrap_or_else(now),
                },
            };
            out.insert(build, status);
        }
        for (build, e) in self.lock().iter() {
            if out.contains_key(build) {
                continue;
            }
            let status = match &e.stage {
                Stage::Native { since }
                | Stage::Preparing { since }
                | Stage::Launched { since } => BackendStatus::Running { since: *since },
                Stage::NativePending { detail } => BackendStatus::Pending {
                    detail: detail.clone(),
                },
                Stage::Done { image, at } => BackendStatus::Succeeded {
                    image: image.clone(),
                    at: *at,
                },
                Stage::Failed { error, at } => BackendStatus::Failed {
                    error: error.clone(),
                    at: *at,
                },
            };
            out.insert(build.clone(), status);
        }
        out
    }

    fn cancel(&self, build: &str) {
        self.confirmed().remove(build);
        if let Some(e) = self.lock().remove(build) {
            e.cancel.cancel();
        }
        // The Job or Builds may exist without this process knowing (a restart): delete them
        // by name whatever the memory says; NotFound is success.
        let this = self.clone();
        let ar = self.inner.runner.resource();
        let names = match self.inner.runner {
            Runner::Job => vec![(ar, objects::names::job_name(build))],
            Runner::OpenShiftBuild => vec![
                (ar.clone(), objects::names::build_name(build)),
                (ar, objects::native_build_name(build)),
            ],
        };
        tokio::spawn(async move {
            this.clean(names, None).await;
        });
    }

    fn clean_up(&self, s: &Snapshot, build: &str, phase: Phase) {
        self.confirmed().remove(build);
        if phase == Phase::Failed {
            // Kept for inspection; only the memory goes.
            self.lock().remove(build);
            return;
        }
        let mut objects_of: Vec<(ApiResource, String)> = Vec::new();
        let mut registry = None;
        for (b, obj) in self.runner_objects(s) {
            if b != build {
                continue;
            }
            let ann = obj.annotations();
            let image = s
                .builds
                .iter()
                .find(|m| m.name_any() == build)
                .and_then(|m| {
                    crate::observe::view_of::<machineos_kube::mco::MachineOSBuildView>(
                        "MachineOSBuild",
                        m,
                    )
                    .status
                    .digested_image_push_spec
                });
            objects_of.push((self.inner.runner.resource(), obj.name_any()));
            // The RUN-step Build's annotations over the native Build's.
            if registry.is_some() && is_native_build(obj) {
                continue;
            }
            let push_secret = ann
                .get(PUSH_SECRET_ANNOTATION)
                .and_then(|n| s.dockerconfigjson(n));
            registry = Some(CleanUp {
                credentials: push_secret,
                image: (phase == Phase::Succeeded).then_some(image).flatten(),
                extra_tag: (phase == Phase::Succeeded)
                    .then(|| ann.get(EXTRA_TAG_ANNOTATION).cloned())
                    .flatten(),
                native_image: ann.get(NATIVE_IMAGE_ANNOTATION).cloned(),
            });
        }
        // The inputs only after the Job or Build (they are read while it runs).
        objects_of.extend(
            s.config_maps
                .iter()
                .filter(|c| ephemeral_input_of(c.as_ref()).as_deref() == Some(build))
                .map(|c| (kinds::config_map(), c.name_any())),
        );
        objects_of.extend(
            s.secrets
                .iter()
                .filter(|c| ephemeral_input_of(c.as_ref()).as_deref() == Some(build))
                .map(|c| (kinds::secret(), c.name_any())),
        );
        self.lock().remove(build);
        if objects_of.is_empty() {
            return;
        }
        if !self.cleaning().insert(build.to_owned()) {
            return;
        }
        tracing::info!(
            build,
            ?phase,
            objects = objects_of.len(),
            "cleaning up the build's ephemeral objects"
        );
        let this = self.clone();
        let build = build.to_owned();
        tokio::spawn(async move {
            this.clean(objects_of, registry).await;
            this.cleaning().remove(&build);
        });
    }

    fn leftovers(&self, s: &Snapshot) -> Vec<String> {
        let mut out: Vec<String> = self.runner_objects(s).into_iter().map(|(b, _)| b).collect();
        // Inputs left by a build whose Job or Build is gone (Job backend only: both backends
        // share the input objects, and the Job backend's clean-up takes them).
        if self.inner.runner == Runner::Job {
            out.extend(
                s.config_maps
                    .iter()
                    .filter_map(|c| ephemeral_input_of(c.as_ref())),
            );
            out.extend(
                s.secrets
                    .iter()
                    .filter_map(|c| ephemeral_input_of(c.as_ref())),
            );
        }
        out.sort();
        out.dedup();
        out
    }

    fn retain(&self, keep: &dyn Fn(&str) -> bool) {
        self.confirmed().retain(|k, _| keep(k));
        self.lock().retain(|k, e| {
            let alive = keep(k);
            if !alive {
                e.cancel.cancel();
            }
            alive
        });
    }

    fn cancel_all(&self) {
        for (_, e) in self.lock().drain() {
            e.cancel.cancel();
        }
    }

    fn active(&self) -> usize {
        self.lock()
            .values()
            .filter(|e| {
                matches!(
                    e.stage,
                    Stage::Native { .. }
                        | Stage::NativePending { .. }
                        | Stage::Preparing { .. }
                        | Stage::Launched { .. }
                )
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_of_strips_the_tag_or_digest_only() {
        for (reference, want) in [
            ("reg:5000/a/b:tag", "reg:5000/a/b"),
            ("reg:5000/a/b", "reg:5000/a/b"),
            ("reg/a/b@sha256:00", "reg/a/b"),
            ("reg:5000/a/b:t@sha256:00", "reg:5000/a/b"),
            ("b:latest", "b"),
        ] {
            assert_eq!(repository_of(reference), want, "{reference}");
        }
    }
}
