//! The native builder backend: builds run in the controller process with the existing
//! engine (`machineos-native-builder`), concurrently up to a bound, each cancellable.
//!
//! Contract:
//! * [`NativeBackend::start`] is idempotent: a build already known (pending, running or
//!   finished) is adopted, never started twice in this process. A build the process does not
//!   know — it restarted — is started again; the engine is deterministic, so the same inputs
//!   push the same digest (the restart-safety argument: a second push of a *different*
//!   digest cannot happen).
//! * What each build is doing is data, [`BackendStatus`], read by the executor into the
//!   lifecycle's observation ([`NativeBackend::statuses`]); a change wakes the controller
//!   through the [`tokio::sync::Notify`] it was given.
//! * [`NativeBackend::cancel`] stops a build at its next await point (the engine's work is
//!   `Send` futures and blocking-thread tasks; a blocking step already running finishes but
//!   its result is dropped) — nothing is pushed after a cancel is observed, except a
//!   manifest PUT already in flight, which the lifecycle tolerates (the build is Interrupted
//!   whatever the registry holds).
//! * Credentials come from the referenced Secrets' `.dockerconfigjson`, handed over as bytes
//!   per build; nothing is written to disk. The base-index cache directory is shared by all
//!   builds (the cache's writes are atomic).
//! * The extra tag of a push spec (`repo:latest`) is moved only after the build's own tag
//!   and digest are pushed, by re-putting the same manifest bytes under it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use machineos_baseindex::IndexMemory;
use machineos_build_lifecycle::{Backend, BackendStatus, Phase, PushTarget, RegistryImage};
use machineos_diagnostics::Classified;
use machineos_image::{ImageRef, Platform};
use machineos_native_builder::{BuildSpec, Environment, MultiSpec, PlatformBase, Quiet};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::api::now;
use crate::builder::{BuildRequest, Builder};
use crate::metrics::Metrics;
use crate::observe::Snapshot;
use crate::registry_ops::RegistrySettings;

/// What one native build needs.
#[derive(Debug, Clone)]
pub struct NativeJob {
    /// The MachineOSBuild's name.
    pub build: String,
    /// Its pool.
    pub pool: String,
    /// The rendered MachineConfig, as stored.
    pub rendered: machineos_api::v1::MachineConfig,
    /// The base image, by digest.
    pub base: String,
    /// Where to push.
    pub push: PushTarget,
    /// Registry credentials: (source name for messages, `.dockerconfigjson` bytes), push
    /// Secret first.
    pub credentials: Vec<(String, Vec<u8>)>,
    /// The architectures to build (`kubernetes.io/arch` names); empty: the settings'
    /// platform. Several give one image per architecture and an OCI index over them.
    pub architectures: Vec<String>,
    /// Whether the image gets the boot guard.
    pub boot_guard: bool,
}

/// Settings of the backend.
#[derive(Debug, Clone)]
pub struct NativeSettings {
    /// Builds running at once.
    pub max_concurrent: usize,
    /// The base-index cache directory, if any.
    pub cache_dir: Option<PathBuf>,
    /// Bytes of base indexes kept in memory between builds (0: none).
    pub index_memory: usize,
    /// The platform built when a build names no architectures.
    pub platform: Platform,
    /// Registry access.
    pub registry: RegistrySettings,
}

struct Entry {
    status: BackendStatus,
    cancel: CancellationToken,
    /// How long the build ran, once it finished (for the duration metric: the status's
    /// buildStart/buildEnd are whole seconds).
    took: Option<Duration>,
}

struct Inner {
    builds: Mutex<HashMap<String, Entry>>,
    /// Parent of every build's token: cancelled when the owner's guard drops.
    root: CancellationToken,
    permits: Semaphore,
    settings: NativeSettings,
    /// The indexes builds keep between them (`None` when `index_memory` is 0).
    memory: Option<IndexMemory>,
    wake: Arc<Notify>,
    metrics: Metrics,
}

/// The in-process builder.
#[derive(Clone)]
pub struct NativeBackend {
    inner: Arc<Inner>,
}

impl NativeBackend {
    /// A backend that wakes `wake` whenever a build changes state.
    pub fn new(settings: NativeSettings, wake: Arc<Notify>, metrics: Metrics) -> Self {
        NativeBackend {
            inner: Arc::new(Inner {
                builds: Mutex::new(HashMap::new()),
                root: CancellationToken::new(),
                permits: Semaphore::new(settings.max_concurrent.max(1)),
                memory: (settings.index_memory > 0)
                    .then(|| IndexMemory::new(settings.index_memory)),
                settings,
                wake,
                metrics,
            }),
        }
    }

    /// A guard that cancels every build of this backend when dropped: the controller loop
    /// holds it, so a loop that ends in any way (returned, aborted, panicked) leaves no build
    /// running — what a killed process does to its builds.
    pub fn drop_guard(&self) -> tokio_util::sync::DropGuard {
        self.inner.root.clone().drop_guard()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.inner
            .builds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every known build's status.
    pub fn statuses(&self) -> HashMap<String, BackendStatus> {
        self.lock()
            .iter()
            .map(|(k, e)| (k.clone(), e.status.clone()))
            .collect()
    }

    /// Builds running or waiting for a slot.
    pub fn active(&self) -> usize {
        self.lock()
            .values()
            .filter(|e| {
                matches!(
                    e.status,
                    BackendStatus::Pending { .. } | BackendStatus::Running { .. }
                )
            })
            .count()
    }

    /// Forget builds for which `keep` is false (terminal and recorded, or deleted).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|k, e| {
            let alive = keep(k);
            if !alive {
                e.cancel.cancel();
            }
            alive
        });
    }

    /// Cancel a build (it was interrupted); forgets it.
    pub fn cancel(&self, build: &str) {
        if let Some(e) = self.lock().remove(build) {
            e.cancel.cancel();
            tracing::info!(build, "native build cancelled");
        }
    }

    /// Cancel every build (shutdown).
    pub fn cancel_all(&self) {
        for (_, e) in self.lock().drain() {
            e.cancel.cancel();
        }
    }

    /// How long a finished build ran, if this process ran it.
    pub fn took(&self, build: &str) -> Option<Duration> {
        self.lock().get(build).and_then(|e| e.took)
    }

    fn set(&self, build: &str, status: BackendStatus, took: Option<Duration>) {
        if let Some(e) = self.lock().get_mut(build) {
            e.status = status;
            e.took = took;
        }
        self.inner.wake.notify_one();
    }

    /// Record `build` as failed before it started (unless this process knows it already).
    fn fail(&self, build: &str, error: Classified) {
        let mut builds = self.lock();
        if builds.contains_key(build) {
            return;
        }
        tracing::warn!(build, %error, "native build refused");
        builds.insert(
            build.to_owned(),
            Entry {
                status: BackendStatus::Failed { error, at: now() },
                cancel: self.inner.root.child_token(),
                took: None,
            },
        );
        drop(builds);
        self.inner.wake.notify_one();
    }

    /// Start `job`, or adopt it if this process already knows the build.
    pub fn start(&self, job: NativeJob) {
        let cancel = self.inner.root.child_token();
        {
            let mut builds = self.lock();
            if builds.contains_key(&job.build) {
                return;
            }
            builds.insert(
                job.build.clone(),
                Entry {
                    status: BackendStatus::Pending { detail: None },
                    cancel: cancel.clone(),
                    took: None,
                },
            );
        }
        let this = self.clone();
        let queued = Instant::now();
        tokio::spawn(async move {
            let build = job.build.clone();
            let pool = job.pool.clone();
            let run = async {
                let _permit = this.inner.permits.acquire().await.ok();
                this.inner
                    .metrics
                    .queue_time(queued.elapsed().as_secs_f64());
                this.set(&build, BackendStatus::Running { since: now() }, None);
                tracing::info!(pool = %pool, build = %build, base = %job.base, "native build started");
                let started = Instant::now();
                let result = this.run(&job).await;
                (result, started.elapsed())
            };
            tokio::select! {
                () = cancel.cancelled() => {
                    tracing::info!(pool = %pool, build = %build, "native build stopped: cancelled");
                }
                (result, took) = run => {
                    let status = match result {
                        Ok(image) => {
                            tracing::info!(pool = %pool, build = %build, image = %image.image, ms = took.as_millis() as u64, "native build succeeded");
                            BackendStatus::Succeeded { image, at: now() }
                        }
                        Err(error) => {
                            tracing::warn!(pool = %pool, build = %build, %error, reason = error.reason, retry = ?error.retry, "native build failed");
                            BackendStatus::Failed { error, at: now() }
                        }
                    };
                    this.set(&build, status, Some(took));
                }
            }
        });
    }

    async fn run(&self, job: &NativeJob) -> Result<RegistryImage, Classified> {
        let s = &self.inner.settings;
        let mut recipe =
            machineos_layering::recipe(&job.rendered, &job.pool).map_err(|e| Classified::of(&e))?;
        if job.boot_guard {
            recipe = recipe.with_boot_guard();
        }
        let base =
            ImageRef::parse(&job.base).map_err(|e| Classified::of(&e).context("base image"))?;
        let output = ImageRef::parse(&job.push.pullspec())
            .map_err(|e| Classified::of(&e).context("push spec"))?;
        let registry = s.registry.client(&job.credentials)?;
        let layer = machineos_layer::write::LayerOptions::default();
        let env = Environment {
            registry: Some(registry.for_operation()),
            cache: s.cache_dir.clone().map(machineos_baseindex::Cache::new),
            memory: self.inner.memory.clone(),
            progress: Arc::new(Quiet),
        };
        let created_by = format!("machineos controller {}", env!("CARGO_PKG_VERSION"));
        let repository = job.push.repository.clone();
        let platforms: Vec<Platform> = job
            .architectures
            .iter()
            .map(|a| Platform::new("linux", a, None))
            .collect();
        // The built image (the index for several platforms), per-architecture digests, the
        // variant of the base, and the seconds spent publishing (the engine times that).
        let (digest, architectures, variant, publish_ms) = if platforms.len() > 1 {
            let spec = MultiSpec {
                bases: platforms
                    .into_iter()
                    .map(|platform| PlatformBase {
                        platform,
                        base: base.clone(),
                    })
                    .collect(),
                output: output.clone(),
                recipe,
                created_by,
                layer,
            };
            let outcome = machineos_native_builder::build_platforms(spec, env)
                .await
                .map_err(|e| Classified::of(&e))?;
            let arches = outcome
                .images
                .iter()
                .map(|i| {
                    let arch = i.platform.architecture.clone();
                    (arch, i.manifest_digest.to_string())
                })
                .collect();
            (
                outcome.index_digest,
                arches,
                // Every platform's base is the same OS; the first platform's is recorded.
                outcome.images.first().map(|i| image_variant(&i.variant)),
                outcome
                    .images
                    .iter()
                    .map(|i| i.timings.publish_ms)
                    .sum::<f64>(),
            )
        } else {
            let platform = platforms
                .into_iter()
                .next()
                .unwrap_or_else(|| s.platform.clone());
            let spec = BuildSpec {
                base,
                output: output.clone(),
                platform,
                recipe,
                created_by,
                layer,
                layer_out: None,
            };
            let outcome = machineos_native_builder::build(spec, env)
                .await
                .map_err(|e| Classified::of(&e))?;
            let arch = outcome.platform.architecture.clone();
            (
                outcome.manifest_digest.clone(),
                vec![(arch, outcome.manifest_digest.to_string())],
                Some(image_variant(&outcome.variant)),
                outcome.timings.publish_ms,
            )
        };
        if let Some(tag) = &job.push.extra_tag {
            crate::registry_ops::retag(&registry, &output, tag)
                .await
                .map_err(|e| {
                    Classified::of(&e).context(format_args!("tagging {repository}:{tag}"))
                })?;
        }
        self.inner
            .metrics
            .push(&job.pool, true, publish_ms / 1000.0);
        Ok(RegistryImage {
            image: format!("{repository}@{digest}"),
            architectures,
            variant,
        })
    }
}

impl Builder for NativeBackend {
    fn kind(&self) -> Backend {
        Backend::Native
    }

    /// A configuration that needs RUN steps (extensions, a kernel swap, a Containerfile)
    /// fails at once, naming what needs them: the native engine cannot run them, and an
    /// image without them would not be what was asked for.
    fn start(&self, request: BuildRequest) {
        if let Some(message) = needs_run_steps(&request, &self.inner.settings.platform) {
            self.fail(&request.build, message);
            return;
        }
        let credentials = request.credentials();
        NativeBackend::start(
            self,
            NativeJob {
                build: request.build,
                pool: request.pool,
                rendered: request.rendered,
                base: request.inputs.base_image,
                push: request.push,
                credentials,
                architectures: request.architectures,
                boot_guard: request.boot_guard,
            },
        );
    }

    fn observe(&self, _: &Snapshot) -> HashMap<String, BackendStatus> {
        self.statuses()
    }

    fn cancel(&self, build: &str) {
        NativeBackend::cancel(self, build);
    }

    /// Nothing to clean: a native build has no ephemeral objects.
    fn clean_up(&self, _: &Snapshot, _: &str, _: Phase) {}

    fn leftovers(&self, _: &Snapshot) -> Vec<String> {
        Vec::new()
    }

    fn retain(&self, keep: &dyn Fn(&str) -> bool) {
        NativeBackend::retain(self, keep);
    }

    fn cancel_all(&self) {
        NativeBackend::cancel_all(self);
    }

    fn active(&self) -> usize {
        NativeBackend::active(self)
    }
}

/// The MachineOSImage's record of a detected variant.
fn image_variant(v: &machineos_variant::Variant) -> machineos_build_lifecycle::ImageVariant {
    machineos_build_lifecycle::ImageVariant {
        kind: v.kind.short_name().to_owned(),
        id: v.id.clone().unwrap_or_default(),
        version_id: v.version_id.clone().unwrap_or_default(),
        variant_id: v.variant_id.clone().unwrap_or_default(),
    }
}

/// Why `request` cannot be built natively: what of its configuration needs RUN steps.
fn needs_run_steps(request: &BuildRequest, platform: &Platform) -> Option<Classified> {
    let name = request.rendered.name();
    let steps = match request.run_steps(&platform.architecture) {
        Ok(s) => s,
        Err(e) => return Some(Classified::of(&e)),
    };
    if steps.is_empty() {
        return None;
    }
    let mut what = Vec::new();
    if !steps.extensions().is_empty() {
        let list: Vec<&str> = steps.extensions().iter().map(|e| e.as_str()).collect();
        what.push(format!(
            "MachineConfig {name}: spec.extensions [{}]",
            list.join(", ")
        ));
    }
    if let Some(k) = steps.kernel_swap() {
        what.push(format!(
            "MachineConfig {name}: spec.kernelType {}",
            k.as_str()
        ));
    }
    if steps.user_containerfile().is_some() {
        what.push(format!(
            "MachineOSConfig {}: spec.containerFile",
            request.machine_os_config
        ));
    }
    Some(Classified::permanent(
        machineos_build_lifecycle::vocab::REASON_BUILDER_NOT_SUPPORTED,
        format!(
            "{} need RUN steps, which the Native builder cannot run: set the MachineOSConfig's \
             spec.imageBuilder.imageBuilderType to Job or OpenShiftBuild",
            what.join("; ")
        ),
    ))
}
