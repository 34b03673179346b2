//! The controller's loop: caches (kube-runtime reflectors) of every kind it reads, and a
//! level-triggered pass — render, observe, decide, execute — whenever a cache changes, a
//! build changes state, or a requeue falls due.
//!
//! * **Level-triggered, one pass for all pools.** The lifecycle decides from the whole
//!   observed state, so the loop does not track which event concerned which object: any
//!   change wakes it (a [`Notify`] permit, so no wake-up is lost), bursts coalesce, and each
//!   pool is decided on the caches' current contents. Pools are decided and carried out
//!   concurrently (up to 8 at once; their objects are disjoint); an action that fails stops
//!   that pool's remaining actions (they are decided again) and requeues it with backoff,
//!   without holding up the other pools.
//! * **Only the leader acts.** A standby keeps its caches warm, serves `/metrics` and
//!   `/readyz`, and runs no pass (see [`crate::leader`]).
//! * **Registry answers and base image digests** are kept in memory (answers for 30 s, so a
//!   deleted image is noticed; base digests until the reference changes). A registry check
//!   the lifecycle asks for is done at once and the pool decided again in the same pass.
//! * **Restart-safe by construction**: nothing but the API server and the registry holds
//!   state that matters. A restarted controller sees a Building build with no backend and
//!   starts it again (the native build is deterministic), a Succeeded build not yet recorded
//!   is checked in the registry and recorded, and creates are idempotent by name.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{
    Action, BaseImageError, ObjectRef, Observed, Phase, PoolObserved, RegistryObservation, decide,
};
use machineos_diagnostics::{Classify, Retry};
use machineos_image::Platform;
use machineos_render::RenderDefaults;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::builder::{BuildRequest, Builder, Builders};
use crate::execute::{self, Events, ExecError};
use crate::health::Health;
use crate::kinds;
use crate::leader::Leadership;
use crate::metrics::{Metrics, ReconcileResult};
use crate::native::{NativeBackend, NativeSettings};
use crate::observe::{self, Learnt, Snapshot};
use crate::registry_ops;
use crate::registry_ops::RegistrySettings;
use crate::render;
use crate::runsteps::{RunStepBackend, RunStepSettings, Runner};

/// The default of [`ControllerOptions::index_memory`]: 256 MiB, the indexes of about eight
/// ostree-encapsulated CoreOS bases (one per pool and architecture).
pub const DEFAULT_INDEX_MEMORY: usize = 256 << 20;

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Namespace of its own objects (ConfigMaps, Secrets, Lease).
    pub namespace: String,
    /// Run the render controller (off where the MCO renders).
    pub render: bool,
    /// Native builds at once.
    pub max_concurrent_builds: usize,
    /// Base-index cache directory.
    pub cache_dir: Option<PathBuf>,
    /// Bytes of base indexes native builds keep in memory between builds (least recently
    /// used out; 0: none, every build loads its index from `cache_dir`).
    pub index_memory: usize,
    /// The platform native builds produce.
    pub platform: Platform,
    /// Registry access.
    pub registry: RegistrySettings,
    /// This replica's identity (leader election, Events).
    pub identity: String,
    /// Where `/metrics`, `/healthz`, `/readyz` listen (`None`: not served).
    pub listen: Option<SocketAddr>,
    /// Lease name.
    pub lease_name: String,
    /// Run leader election (off: act at once, e.g. a single replica in tests).
    pub leader_election: bool,
    /// Lease duration, renew deadline and retry period (client-go's 15 s / 10 s / 2 s).
    pub lease_timings: (Duration, Duration, Duration),
    /// The Job builder backend's image (buildah).
    pub builder_image: String,
    /// The build Job's `backoffLimit`.
    pub job_backoff_limit: i32,
    /// The service account of build pods and Builds (`None`: the namespace's default).
    pub build_service_account: Option<String>,
    /// Run the OpenShift Build backend: `None` asks the API server whether it serves
    /// `build.openshift.io/v1` at start-up.
    pub openshift_build: Option<bool>,
    /// Run the rollout (move layered pools' nodes onto their images).
    pub rollout: bool,
    /// The node this replica runs on (updated last).
    pub node_name: Option<String>,
    /// Default soak before an updated node's slot frees (pools override it with
    /// `machineos.io/min-ready-seconds`).
    pub min_ready_seconds: i64,
}

impl ControllerOptions {
    /// Defaults for namespace `ns`.
    pub fn new(ns: &str) -> Self {
        ControllerOptions {
            namespace: ns.to_owned(),
            render: true,
            max_concurrent_builds: 4,
            cache_dir: None,
            index_memory: DEFAULT_INDEX_MEMORY,
            platform: Platform::host(),
            registry: RegistrySettings::default(),
            identity: format!("machineos-controller-{}", std::process::id()),
            listen: None,
            lease_name: "machineos-controller".into(),
            leader_election: true,
            lease_timings: (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2),
            ),
            builder_image: machineos_buildrequest::objects::job::DEFAULT_IMAGE.to_owned(),
            job_backoff_limit: machineos_buildrequest::objects::job::DEFAULT_BACKOFF_LIMIT,
            build_service_account: None,
            openshift_build: None,
            rollout: true,
            node_name: None,
            min_ready_seconds: 0,
        }
    }
}

struct Caches {
    pools: Store<DynamicObject>,
    machine_configs: Store<DynamicObject>,
    machine_os_configs: Store<DynamicObject>,
    builds: Store<DynamicObject>,
    images: Store<DynamicObject>,
    machine_images: Store<DynamicObject>,
    config_maps: Store<ConfigMap>,
    secrets: Store<Secret>,
    nodes: Store<Node>,
    machine_config_nodes: Store<DynamicObject>,
    jobs: Store<DynamicObject>,
    pods: Store<DynamicObject>,
    openshift_builds: Option<Store<DynamicObject>>,
}

/// Run a reflector's stream on its own task, waking the loop on every change (errors are
/// logged; kube-runtime's backoff retries them).
fn drive<K, S>(stream: S, wake: &Arc<Notify>, tasks: &mut Vec<tokio::task::JoinHandle<()>>)
where
    S: futures_util::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
{
    let wake = wake.clone();
    tasks.push(tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Err(e) = item {
                tracing::warn!(error = %e, "watch error (retrying)");
            }
            wake.notify_one();
        }
    }));
}

/// A cluster-wide cache of the objects of `ar`.
fn watch_dynamic(
    client: &Client,
    ar: ApiResource,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    watch_api(api, ar, watcher::Config::default(), wake, tasks)
}

/// A cache of the ephemeral build objects of kind `ar` in namespace `ns`.
fn watch_ephemeral(
    client: &Client,
    ar: ApiResource,
    ns: &str,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let config = watcher::Config::default()
        .labels(machineos_buildrequest::objects::names::EPHEMERAL_BUILD_OBJECT_LABEL);
    watch_api(api, ar, config, wake, tasks)
}

/// A reflector over `api` (objects of `ar`) with `config`.
fn watch_api(
    api: Api<DynamicObject>,
    ar: ApiResource,
    config: watcher::Config,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let writer = reflector::store::Writer::new(ar);
    let reader = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .touched_objects();
    drive(stream, wake, tasks);
    reader
}

/// A typed cache; `Api<PartialObjectMeta<K>>` watches metadata only (Nodes).
fn watch_typed<K>(
    api: Api<K>,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    drive(stream, wake, tasks);
    reader
}

impl Caches {
    fn start(
        client: &Client,
        ns: &str,
        openshift_builds: bool,
        wake: &Arc<Notify>,
        tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    ) -> Caches {
        Caches {
            pools: watch_dynamic(client, kinds::pool(), wake, tasks),
            machine_configs: watch_dynamic(client, kinds::machine_config(), wake, tasks),
            machine_os_configs: watch_dynamic(client, kinds::machine_os_config(), wake, tasks),
            builds: watch_dynamic(client, kinds::build(), wake, tasks),
            images: watch_dynamic(client, kinds::image(), wake, tasks),
            machine_images: watch_dynamic(client, kinds::machine_image(), wake, tasks),
            config_maps: watch_typed(Api::namespaced(client.clone(), ns), wake, tasks),
            secrets: watch_typed(Api::namespaced(client.clone(), ns), wake, tasks),
            nodes: watch_typed(Api::<Node>::all(client.clone()), wake, tasks),
            machine_config_nodes: watch_dynamic(client, kinds::machine_config_node(), wake, tasks),
            jobs: watch_ephemeral(client, kinds::job(), ns, wake, tasks),
            pods: watch_ephemeral(client, kinds::pod(), ns, wake, tasks),
            openshift_builds: openshift_builds
                .then(|| watch_ephemeral(client, kinds::openshift_build(), ns, wake, tasks)),
        }
    }

    async fn wait_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.pools.wait_until_ready().await?;
        self.machine_configs.wait_until_ready().await?;
        self.machine_os_configs.wait_until_ready().await?;
        self.builds.wait_until_ready().await?;
        self.images.wait_until_ready().await?;
        self.machine_images.wait_until_ready().await?;
        self.config_maps.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        self.jobs.wait_until_ready().await?;
        self.machine_config_nodes.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        if let Some(b) = &self.openshift_builds {
            b.wait_until_ready().await?;
        }
        self.nodes.wait_until_ready().await
    }

    fn snapshot(&self, ns: &str) -> Snapshot {
        let mut s = Snapshot {
            namespace: ns.to_owned(),
            pools: self.pools.state(),
            machine_configs: self.machine_configs.state(),
            machine_os_configs: self.machine_os_configs.state(),
            builds: self.builds.state(),
            images: self.images.state(),
            machine_images: self.machine_images.state(),
            config_maps: self.config_maps.state(),
            secrets: self.secrets.state(),
            nodes: self.nodes.state(),
            machine_config_nodes: self.machine_config_nodes.state(),
            jobs: self.jobs.state(),
            pods: self.pods.state(),
            openshift_builds: self
                .openshift_builds
                .as_ref()
                .map(|b| b.state())
                .unwrap_or_default(),
        };
        // Deterministic order: the stores are hash maps.
        s.pools.sort_by_key(|o| o.name_any());
        s.machine_configs.sort_by_key(|o| o.name_any());
        s.builds.sort_by_key(|o| o.name_any());
        s.nodes.sort_by_key(|o| o.name_any());
        s.machine_images.sort_by_key(|o| o.name_any());
        s
    }
}

/// How long registry answers are trusted.
const REGISTRY_TTL: Duration = Duration::from_secs(30);

/// The controller's state between passes.
struct State {
    /// Cancel every in-process build when the loop ends, however it ends.
    _builds: Vec<tokio_util::sync::DropGuard>,
    client: Client,
    opts: ControllerOptions,
    caches: Caches,
    native: NativeBackend,
    builders: Builders,
    events: Events,
    metrics: Metrics,
    registry: HashMap<String, (RegistryObservation, Instant)>,
    base_images: HashMap<String, String>,
    /// Base image references the registry refused, with when (retried after a while).
    base_failures: HashMap<String, (String, u64, Instant)>,
    /// Pools whose base image is unavailable.
    base_errors: HashMap<String, BaseImageError>,
    render_fingerprints: HashMap<String, u64>,
    /// Per pool: consecutive failures and when to try again.
    backoff: HashMap<String, (u32, Instant)>,
    /// Nodes the rollout just patched: the annotations the cache must show before the next
    /// rollout decision, and when.
    rollout_expected: HashMap<String, (BTreeMap<&'static str, Option<String>>, Instant)>,
    /// MachineConfigNodes the rollout just created, until the cache shows them.
    mcn_expected: HashMap<String, Instant>,
    /// Soonest requeue.
    next: Option<Instant>,
}

/// Run the controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    opts: ControllerOptions,
    metrics: Metrics,
    health: Health,
    leadership: Leadership,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let wake = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    let openshift_build = match opts.openshift_build {
        Some(on) => on,
        None => {
            let served = client
                .list_api_group_resources(&kinds::openshift_build().api_version)
                .await
                .is_ok_and(|l| l.resources.iter().any(|r| r.name == "builds"));
            tracing::info!(served, "the OpenShift Build API (build.openshift.io/v1)");
            served
        }
    };
    let caches = Caches::start(&client, &opts.namespace, openshift_build, &wake, &mut tasks);
    let native = NativeBackend::new(
        NativeSettings {
            max_concurrent: opts.max_concurrent_builds,
            cache_dir: opts.cache_dir.clone(),
            index_memory: opts.index_memory,
            platform: opts.platform.clone(),
            registry: opts.registry.clone(),
        },
        wake.clone(),
        metrics.clone(),
    );
    let mut guards = vec![native.drop_guard()];
    let mut backends: Vec<Arc<dyn Builder>> = vec![Arc::new(native.clone())];
    let runners = [
        Some(Runner::Job),
        openshift_build.then_some(Runner::OpenShiftBuild),
    ];
    for runner in runners.into_iter().flatten() {
        let settings = RunStepSettings {
            builder_image: opts.builder_image.clone(),
            backoff_limit: opts.job_backoff_limit,
            service_account: opts.build_service_account.clone(),
            ..RunStepSettings::new(
                &opts.namespace,
                &opts.platform.architecture,
                opts.registry.clone(),
            )
        };
        let b = RunStepBackend::new(
            runner,
            client.clone(),
            native.clone(),
            settings,
            wake.clone(),
        );
        guards.push(b.drop_guard());
        backends.push(Arc::new(b));
    }
    let mut state = State {
        _builds: guards,
        builders: Builders::new(backends),
        events: Events::new(client.clone(), &opts.identity),
        client,
        opts,
        caches,
        native,
        metrics,
        registry: HashMap::new(),
        base_images: HashMap::new(),
        base_failures: HashMap::new(),
        base_errors: HashMap::new(),
        render_fingerprints: HashMap::new(),
        backoff: HashMap::new(),
        rollout_expected: HashMap::new(),
        mcn_expected: HashMap::new(),
        next: None,
    };
    tokio::select! {
        () = shutdown.cancelled() => {
            for t in &tasks { t.abort(); }
            return Ok(());
        }
        r = state.caches.wait_ready() => r.map_err(|e| format!("caches: {e}"))?,
    }
    tracing::info!(namespace = %state.opts.namespace, "caches synced");
    health.set_ready(true);
    let mut leader_rx = leadership.clone();
    loop {
        health.beat();
        let deadline = state
            .next
            .take()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(60));
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = wake.notified() => {}
            () = tokio::time::sleep_until(deadline.into()) => {}
            Some(_) = leader_rx.changed() => {}
        }
        if !leadership.is_leader() {
            // A standby (or a leader that lost its Lease) stops its builds: the new leader
            // adopts them.
            state.builders.cancel_all();
            continue;
        }
        // Coalesce a burst of watch events into one pass.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let started = Instant::now();
        state.pass().await;
        tracing::debug!(ms = started.elapsed().as_millis() as u64, "pass");
    }
    state.builders.cancel_all();
    for t in &tasks {
        t.abort();
    }
    Ok(())
}

impl State {
    fn requeue_in(&mut self, d: Duration) {
        let at = Instant::now() + d;
        self.next = Some(self.next.map_or(at, |n| n.min(at)));
    }

    fn render_defaults(&self, s: &Snapshot) -> RenderDefaults {
        RenderDefaults {
            os_image_url: observe::config_map_value(
                &s.config_maps,
                observe::OS_IMAGE_URL_CONFIG_MAP,
                "baseOSContainerImage",
            )
            .unwrap_or_default(),
            base_os_extensions_container_image: observe::config_map_value(
                &s.config_maps,
                observe::OS_IMAGE_URL_CONFIG_MAP,
                "baseOSExtensionsContainerImage",
            )
            .unwrap_or_default(),
            os_image_stream: String::new(),
        }
    }

    async fn render_pass(&mut self, s: &Snapshot) {
        let defaults = self.render_defaults(s);
        let version = format!("machineos {}", env!("CARGO_PKG_VERSION"));
        // Which pools' inputs changed (cheap), then their plans on a blocking thread
        // (rendering parses and merges every MachineConfig: CPU work).
        let changed: Vec<(Arc<DynamicObject>, u64)> = s
            .pools
            .iter()
            .filter_map(|pool| {
                let fp = render::fingerprint(pool, &s.machine_configs, &defaults, &s.nodes);
                (self.render_fingerprints.get(&pool.name_any()) != Some(&fp))
                    .then(|| (pool.clone(), fp))
            })
            .collect();
        if changed.is_empty() {
            return;
        }
        let (mcs, nodes) = (s.machine_configs.clone(), s.nodes.clone());
        let t = Instant::now();
        let n_changed = changed.len();
        let planned = tokio::task::spawn_blocking(move || {
            changed
                .into_iter()
                .map(|(pool, fp)| {
                    let plan = render::plan(&pool, &mcs, &defaults, &nodes, &version);
                    (fp, plan)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        tracing::debug!(
            pools = n_changed,
            ms = t.elapsed().as_millis() as u64,
            "render plans"
        );
        let mut writes = Vec::new();
        for (fp, plan) in planned {
            if plan.is_empty() {
                self.render_fingerprints.insert(plan.pool.clone(), fp);
            } else {
                writes.push(plan);
            }
        }
        let (client, events, metrics) = (&self.client, &self.events, &self.metrics);
        // Collected first: a lazy `map` inside the stream trips rustc's higher-ranked `Send`
        // check (rust-lang/rust#102211) when the controller's future is spawned.
        let futures: Vec<_> = writes
            .iter()
            .map(|plan| write_render(client, events, metrics, plan))
            .collect();
        let failed: Vec<bool> = futures_util::stream::iter(futures)
            .buffer_unordered(POOLS_AT_ONCE)
            .collect()
            .await;
        if failed.into_iter().any(|f| f) {
            self.requeue_in(Duration::from_secs(1));
        }
    }

    /// Resolve base image tags to digests for the opted-in pools; a pool whose base image
    /// cannot be had (none named, or the registry says no) gets a [`BaseImageError`] naming
    /// where the reference comes from. Transient registry errors only requeue.
    async fn resolve_bases(&mut self, s: &Snapshot, o: &Observed) {
        for p in &o.pools {
            let pool = p.pool.name.clone();
            if p.base_image.is_some() || p.opt_in.is_none() {
                self.base_errors.remove(&pool);
                continue;
            }
            let Some(rendered_name) = p.rendered.as_ref().map(|r| r.name.clone()) else {
                continue; // waiting for the render
            };
            // The Secrets the lifecycle resolved; a pool whose configuration does not resolve
            // is reported as such by the lifecycle, and nothing is resolved for it.
            let Ok(Some(eff)) = machineos_build_lifecycle::config::resolve(o, p) else {
                continue;
            };
            let rendered = s
                .machine_configs
                .iter()
                .find(|m| m.name_any() == rendered_name)
                .map(|m| m.as_ref());
            let source = observe::base_image_source(
                rendered,
                &rendered_name,
                &s.config_maps,
                &self.opts.namespace,
            );
            let (object, field) = (source.object, source.field);
            let Some(reference) = source.reference else {
                self.base_errors.insert(
                    pool,
                    BaseImageError {
                        object,
                        field: field.into(),
                        message: format!(
                            "no base image: not set here, and the rendered MachineConfig \
                             {rendered_name} sets no spec.osImageURL"
                        ),
                    },
                );
                continue;
            };
            if self.base_images.contains_key(&reference) {
                continue;
            }
            let creds = pull_credentials(s, &eff);
            // A refusal is retried after a while, or at once when the credentials change.
            let creds_key = registry_ops::credentials_key(&creds);
            if let Some((_, key, at)) = self.base_failures.get(&reference)
                && *key == creds_key
                && at.elapsed() < REGISTRY_TTL
            {
                continue;
            }
            let result = match self.opts.registry.client(&creds) {
                Ok(registry) => registry_ops::resolve(&registry, &reference).await,
                Err(e) => Err((e.message, e.retry)),
            };
            match result {
                Ok(d) => {
                    tracing::info!(pool = %pool, base = %reference, digest = %d, "base image resolved");
                    self.base_images.insert(reference.clone(), d);
                    self.base_failures.remove(&reference);
                    self.base_errors.remove(&pool);
                }
                Err((e, Retry::Transient)) => {
                    tracing::warn!(pool = %pool, base = %reference, error = %e, "resolving the base image failed (retrying)");
                    self.requeue_in(Duration::from_secs(5));
                }
                Err((e, _)) => {
                    tracing::warn!(pool = %pool, base = %reference, error = %e, "the base image is unavailable");
                    self.base_failures
                        .insert(reference.clone(), (e.clone(), creds_key, Instant::now()));
                    self.base_errors.insert(
                        pool,
                        BaseImageError {
                            object,
                            field: field.into(),
                            message: e,
                        },
                    );
                    self.requeue_in(REGISTRY_TTL);
                }
            }
        }
    }

    fn learnt(&mut self, s: &Snapshot) -> Learnt {
        let fresh = Instant::now();
        self.registry
            .retain(|_, (_, at)| fresh.duration_since(*at) < REGISTRY_TTL);
        Learnt {
            backend: self.builders.observe(s),
            supported_backends: self.builders.kinds(),
            registry: self
                .registry
                .iter()
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect(),
            base_images: self.base_images.clone(),
            base_image_errors: self.base_errors.clone(),
        }
    }

    async fn pass(&mut self) {
        let s = self.caches.snapshot(&self.opts.namespace);
        if self.opts.render {
            self.render_pass(&s).await;
        }
        // Base images are resolved on a first observation; the pools are decided on a
        // second one, which has them (and whatever the render just wrote).
        let learnt = self.learnt(&s);
        let before = observe::observe(&s, &learnt);
        self.resolve_bases(&s, &before).await;
        // Forget native builds the API no longer needs followed.
        let active: HashMap<String, Phase> = s
            .builds
            .iter()
            .map(|b| (b.name_any(), observe::build_phase(b)))
            .collect();
        self.builders
            .retain(&|b| active.get(b).is_some_and(|p| !p.is_terminal()));
        // Terminal builds' ephemeral objects (Jobs, Builds, their inputs).
        self.builders.clean_up(&s, &|b| active.get(b).copied());
        self.metrics
            .set_active_builds(self.builders.active() as i64);
        // Pools are decided and carried out concurrently
        // (bounded): each pool's actions are independent API objects, and a pool whose
        // decision needs a registry answer is decided again with it at once.
        let s = self.caches.snapshot(&self.opts.namespace);
        let learnt = self.learnt(&s);
        let o = observe::observe(&s, &learnt);
        let shared = Observed {
            pools: Vec::new(),
            ..o.clone()
        };
        let now_i = Instant::now();
        let mut runnable = Vec::new();
        for p in o.pools {
            match self.backoff.get(&p.pool.name) {
                Some((_, until)) if *until > now_i => {
                    let wait = until.saturating_duration_since(now_i);
                    self.requeue_in(wait);
                }
                _ => runnable.push(p),
            }
        }
        let ctx = Ctx {
            client: &self.client,
            opts: &self.opts,
            native: &self.native,
            builders: &self.builders,
            events: &self.events,
            metrics: &self.metrics,
        };
        let futures: Vec<_> = runnable
            .into_iter()
            .map(|p| run_pool(&ctx, &s, &shared, p))
            .collect();
        let results: Vec<(String, Result<Executed, ExecError>)> =
            futures_util::stream::iter(futures)
                .buffer_unordered(POOLS_AT_ONCE)
                .collect()
                .await;
        for (pool, result) in results {
            match result {
                Ok(done) => {
                    self.backoff.remove(&pool);
                    for (build, answer) in done.answers {
                        self.registry.insert(build, (answer, Instant::now()));
                    }
                    for build in done.forget {
                        self.registry.remove(&build);
                    }
                    if let Some(d) = done.requeue {
                        self.requeue_in(d);
                    }
                }
                Err(e) => {
                    let n = self.backoff.get(&pool).map_or(0, |(n, _)| *n) + 1;
                    let wait = POOL_BACKOFF.delay(n);
                    tracing::warn!(pool = %pool, error = %e, retry = ?e.retry(), "action failed; pool requeued");
                    self.metrics
                        .reconcile(ReconcileResult::Error, e.reason(), 0.0);
                    self.backoff
                        .insert(pool.clone(), (n, Instant::now() + wait));
                    self.requeue_in(wait);
                }
            }
        }
        if self.opts.rollout {
            self.rollout_pass().await;
        }
    }

    /// The rollout: observe (on the caches' current contents, which include what the
    /// lifecycle just recorded), decide, apply. Time-dependent (the soak), so it requeues
    /// itself for the moment the next soaking node's slot frees.
    async fn rollout_pass(&mut self) {
        let s = self.caches.snapshot(&self.opts.namespace);
        // Expectations: what this controller just wrote (node annotations, MachineConfigNodes)
        // must be in the cache before the next decision, or that decision would count a
        // targeted node available still (and could exceed maxUnavailable) and write again.
        // Stale ones (10 s) are dropped.
        if !self.rollout_expected.is_empty() || !self.mcn_expected.is_empty() {
            let nodes: HashMap<String, &Arc<Node>> =
                s.nodes.iter().map(|n| (n.name_any(), n)).collect();
            self.rollout_expected.retain(|node, (changes, at)| {
                let seen = nodes.get(node).is_some_and(|n| {
                    let a = n.annotations();
                    changes.iter().all(|(k, v)| a.get(*k) == v.as_ref())
                });
                !seen && at.elapsed() < Duration::from_secs(10)
            });
            let mcns: std::collections::HashSet<String> = s
                .machine_config_nodes
                .iter()
                .map(|m| m.name_any())
                .collect();
            self.mcn_expected
                .retain(|name, at| !mcns.contains(name) && at.elapsed() < Duration::from_secs(10));
        }
        if !self.rollout_expected.is_empty() || !self.mcn_expected.is_empty() {
            self.requeue_in(Duration::from_millis(100));
            return;
        }
        let learnt = self.learnt(&s);
        let lifecycle = observe::observe(&s, &learnt);
        let now = execute::now();
        let (controller_node, min_ready) =
            (self.opts.node_name.clone(), self.opts.min_ready_seconds);
        let decided = tokio::task::spawn_blocking(move || {
            let o = crate::rollout::observe(&s, &lifecycle, controller_node.as_deref(), min_ready);
            let d = machineos_rollout::decide(&o, now);
            (s, o, d)
        })
        .await;
        let Ok((s, o, d)) = decided else { return };
        let done = crate::rollout::execute(&self.client, &self.events, &s, &o, &d).await;
        let now_i = Instant::now();
        for (node, changes) in done.patched {
            self.rollout_expected.insert(node, (changes, now_i));
        }
        for name in done.created {
            self.mcn_expected.insert(name, now_i);
        }
        for r in &d.pools {
            self.metrics.rollout(
                &r.pool,
                r.halted,
                i64::from(r.counts.updated),
                i64::from(r.counts.unavailable),
                i64::from(r.counts.degraded),
            );
            self.metrics
                .rollout_targeted(&r.pool, r.targeted.len() as u64);
        }
        if !done.failures.is_empty() {
            for e in &done.failures {
                tracing::warn!(error = %e, "rollout write failed (retrying)");
            }
            self.requeue_in(Duration::from_secs(1));
        }
        // The next soaking node's slot frees at ready_since + minReadySeconds.
        let views = machineos_rollout::decide::views(&o);
        let soon = views
            .iter()
            .filter_map(|v| {
                let min = v.pool.map_or(0, |p| o.pools[p].min_ready_seconds);
                let since = v.node.ready_since?;
                let left = since.saturating_add(min).saturating_sub(now);
                (v.node.ready && left > 0).then_some(left)
            })
            .min();
        if let Some(secs) = soon {
            let secs = u64::try_from(secs).unwrap_or(0).min(86_400);
            self.requeue_in(Duration::from_millis(secs * 1000 + 200));
        }
    }
}

/// Carry out one pool's render plan; `true` when a write failed.
async fn write_render(
    client: &Client,
    events: &Events,
    metrics: &Metrics,
    plan: &render::RenderPlan,
) -> bool {
    let name = plan.pool.as_str();
    let ok = plan.error.is_none() && plan.condition.as_ref().is_none_or(|c| c.status != "True");
    match execute::render(client, plan).await {
        Ok(()) => {
            metrics.render(name, ok);
            if let Some(e) = &plan.error {
                tracing::warn!(pool = %name, error = %e, "render failed");
                events
                    .publish(
                        &ObjectRef::cluster("MachineConfigPool", name),
                        machineos_build_lifecycle::EventType::Warning,
                        "RenderFailed",
                        e,
                    )
                    .await;
            }
            if let Some(c) = &plan.spec_configuration {
                tracing::info!(pool = %name, rendered = %c["name"], "pool rendered");
            }
            // Not recorded: the writes change the pool, so the next pass sees a new
            // fingerprint and confirms there is nothing left to do.
            false
        }
        Err(e) => {
            tracing::warn!(pool = %name, error = %e, "writing the render failed");
            metrics.reconcile(ReconcileResult::Error, e.reason(), 0.0);
            true
        }
    }
}

/// Pools decided and carried out at once.
const POOLS_AT_ONCE: usize = 8;

/// A pool whose actions failed is requeued after 1 s, doubling, at most 32 s.
const POOL_BACKOFF: machineos_diagnostics::Backoff =
    machineos_diagnostics::Backoff::doubling(Duration::from_secs(1), Duration::from_secs(32));

/// What a pass's pool work reads: the parts of the state that do not change during it.
struct Ctx<'a> {
    client: &'a Client,
    opts: &'a ControllerOptions,
    native: &'a NativeBackend,
    builders: &'a Builders,
    events: &'a Events,
    metrics: &'a Metrics,
}

/// What carrying out a pool's actions taught the controller.
#[derive(Default)]
struct Executed {
    /// Registry answers by build name.
    answers: Vec<(String, RegistryObservation)>,
    /// Registry answers to forget (the build was deleted).
    forget: Vec<String>,
    /// The soonest requeue asked for.
    requeue: Option<Duration>,
}

impl Executed {
    fn requeue_in(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }
}

/// Decide one pool and carry its actions out; again with a registry answer, at most a few
/// times.
async fn run_pool(
    ctx: &Ctx<'_>,
    s: &Snapshot,
    shared: &Observed,
    mut p: PoolObserved,
) -> (String, Result<Executed, ExecError>) {
    let mut all = Executed::default();
    for _ in 0..4 {
        let one = Observed {
            pools: vec![p.clone()],
            ..shared.clone()
        };
        let actions = decide(&one, execute::now());
        match execute(ctx, s, &p, actions).await {
            Ok(done) => {
                let again = !done.answers.is_empty();
                for (build, answer) in &done.answers {
                    p.registry.insert(build.clone(), answer.clone());
                }
                all.answers.extend(done.answers);
                all.forget.extend(done.forget);
                if let Some(d) = done.requeue {
                    all.requeue_in(d);
                }
                if !again {
                    break;
                }
            }
            Err(e) => return (p.pool.name.clone(), Err(e)),
        }
    }
    (p.pool.name.clone(), Ok(all))
}

/// Carry out one pool's actions in order.
async fn execute(
    ctx: &Ctx<'_>,
    s: &Snapshot,
    p: &PoolObserved,
    actions: Vec<Action>,
) -> Result<Executed, ExecError> {
    let started = Instant::now();
    let mut done = Executed::default();
    let mut events = Vec::new();
    let mut conds = Vec::new();
    for a in actions {
        match a {
            Action::CheckRegistry {
                build,
                pullspec,
                push_secret,
            } => {
                let creds = s
                    .dockerconfigjson(&push_secret)
                    .into_iter()
                    .collect::<Vec<_>>();
                let obs = match ctx.opts.registry.client(&creds) {
                    // A build will push here when the tag is absent: the push preflight
                    // asks now whether the Secret may, not after the build.
                    Ok(r) => registry_ops::check(&r, &pullspec, &s.namespace, &push_secret).await,
                    Err(e) => RegistryObservation::Error {
                        transient: e.is_transient(),
                        message: e.message,
                    },
                };
                tracing::info!(pool = %p.pool.name, build = %build, answer = ?obs, "registry checked");
                done.answers.push((build, obs));
            }
            Action::CreateBuild {
                name,
                rendered_config,
                machine_os_config,
                rendered_image_push_spec,
                labels,
                annotations,
                owner,
            } => {
                let obj = execute::build_object(
                    &name,
                    &rendered_config,
                    &machine_os_config,
                    &rendered_image_push_spec,
                    &labels,
                    &annotations,
                    &owner,
                );
                execute::create(
                    &kinds::all(ctx.client, &kinds::build()),
                    obj,
                    format!("MachineOSBuild {name}"),
                )
                .await?;
                tracing::info!(pool = %p.pool.name, build = %name, "MachineOSBuild created");
                ctx.metrics.config_change(&p.pool.name);
            }
            Action::StartBuild {
                build,
                backend,
                inputs,
                push,
                push_secret,
                base_image_pull_secret,
            } => {
                let Some(builder) = ctx.builders.get(backend) else {
                    // The lifecycle only starts supported backends.
                    continue;
                };
                let rendered_name = p.pool.rendered_config.clone().unwrap_or_default();
                let rendered_obj = s
                    .machine_configs
                    .iter()
                    .find(|m| m.name_any() == rendered_name)
                    .ok_or_else(|| ExecError::Missing {
                        object: format!("MachineConfig {rendered_name}"),
                        message: "not in the cache".into(),
                    })?;
                let rendered_json =
                    serde_json::to_vec(rendered_obj.as_ref()).map_err(|e| ExecError::Missing {
                        object: format!("MachineConfig {rendered_name}"),
                        message: e.to_string(),
                    })?;
                let rendered: machineos_api::v1::MachineConfig =
                    serde_json::from_slice(&rendered_json).map_err(|e| ExecError::Missing {
                        object: format!("MachineConfig {rendered_name}"),
                        message: e.to_string(),
                    })?;
                let bytes = |name: &str| {
                    s.dockerconfigjson(name)
                        .map(|(_, b)| (name.to_owned(), b))
                        .ok_or_else(|| ExecError::Missing {
                            object: format!("Secret {}/{name}", s.namespace),
                            message: "not in the cache, or without .dockerconfigjson".into(),
                        })
                };
                let push_secret = bytes(&push_secret)?;
                let pull_secret = match &base_image_pull_secret {
                    Some(n) => Some(bytes(n)?),
                    None => None,
                };
                let build_obj = s.builds.iter().find(|b| b.name_any() == build);
                let machine_os_config = build_obj
                    .and_then(|b| observe::str_at(&b.data, "/spec/machineOSConfig/name"))
                    .unwrap_or(&p.pool.name)
                    .to_owned();
                let pool_obj = s.pools.iter().find(|o| o.name_any() == p.pool.name);
                let mosc_obj = s
                    .machine_os_configs
                    .iter()
                    .find(|o| o.name_any() == machine_os_config);
                let architectures = crate::arches::for_pool(
                    pool_obj.map(AsRef::as_ref),
                    mosc_obj.map(AsRef::as_ref),
                    &s.nodes,
                );
                ctx.metrics.build_started(&p.pool.name);
                builder.start(BuildRequest {
                    architectures,
                    namespace: s.namespace.clone(),
                    build_uid: build_obj.and_then(|b| b.uid()).unwrap_or_default(),
                    build,
                    machine_os_config,
                    pool: p.pool.name.clone(),
                    rendered,
                    rendered_json,
                    inputs,
                    push,
                    push_secret,
                    pull_secret,
                });
            }
            Action::CancelBuild { build } => ctx.builders.cancel(&build),
            Action::SetBuildStatus(u) => {
                if execute::set_build_status(ctx.client, &ctx.opts.namespace, &u).await? {
                    tracing::info!(pool = %p.pool.name, build = %u.build, from = ?u.from, to = ?u.to, "build status");
                    ctx.metrics.build_state(&p.pool.name, u.to);
                    if u.to.is_terminal() {
                        let secs = match (ctx.native.took(&u.build), u.build_start, u.build_end) {
                            (Some(t), _, _) => t.as_secs_f64(),
                            (None, Some(a), Some(b)) => (b - a).max(0) as f64,
                            _ => 0.0,
                        };
                        ctx.metrics.build_finished(&p.pool.name, u.to, secs);
                    }
                }
            }
            Action::DeleteBuild { build } => {
                ctx.builders.cancel(&build);
                execute::delete(
                    &kinds::all(ctx.client, &kinds::build()),
                    &build,
                    format!("MachineOSBuild {build}"),
                )
                .await?;
                done.forget.push(build);
            }
            Action::RemoveRebuildAnnotation { machine_os_config } => {
                execute::set_annotation(
                    &kinds::all(ctx.client, &kinds::machine_os_config()),
                    &machine_os_config,
                    machineos_build_lifecycle::vocab::REBUILD_ANNOTATION,
                    None,
                    format!("MachineOSConfig {machine_os_config}"),
                )
                .await?;
            }
            Action::UpdateMachineOSConfigStatus {
                machine_os_config,
                current_image_pull_spec,
                machine_os_build,
                observed_generation,
            } => {
                let api = kinds::all(ctx.client, &kinds::machine_os_config());
                let what = format!("MachineOSConfig {machine_os_config}");
                execute::set_annotation(
                    &api,
                    &machine_os_config,
                    machineos_build_lifecycle::vocab::CURRENT_MACHINE_OS_BUILD_ANNOTATION,
                    Some(&machine_os_build),
                    what.clone(),
                )
                .await?;
                execute::edit_status(&api, &machine_os_config, what, |_, st| {
                    st["currentImagePullSpec"] = serde_json::json!(current_image_pull_spec);
                    st["machineOSBuild"] = serde_json::json!({
                        "group": "machineconfiguration.openshift.io",
                        "resource": "machineosbuilds",
                        "name": machine_os_build,
                    });
                    st["observedGeneration"] = serde_json::json!(observed_generation);
                    true
                })
                .await?;
                tracing::info!(pool = %p.pool.name, build = %machine_os_build, image = %current_image_pull_spec, "MachineOSConfig points at the new image");
            }
            Action::CreateMachineOSImage {
                name,
                pool,
                rendered_config,
                build,
                image,
                base_image,
                extensions_image,
                owner,
            } => {
                let mut owner = owner;
                if owner.uid.is_none() {
                    owner.uid = execute::uid_of(&s.builds, &owner.name);
                }
                let obj = execute::image_object(
                    &name,
                    &pool,
                    &rendered_config,
                    &build,
                    &image,
                    &base_image,
                    extensions_image.as_deref(),
                    &owner,
                );
                execute::create(
                    &kinds::all(ctx.client, &kinds::image()),
                    obj,
                    format!("MachineOSImage {name}"),
                )
                .await?;
            }
            Action::DeleteMachineOSImage { name } => {
                execute::delete(
                    &kinds::all(ctx.client, &kinds::image()),
                    &name,
                    format!("MachineOSImage {name}"),
                )
                .await?;
            }
            Action::DeleteRegistryImage { image, push_secret } => {
                let creds: Vec<(String, Vec<u8>)> = push_secret
                    .as_deref()
                    .and_then(|n| s.dockerconfigjson(n))
                    .into_iter()
                    .collect();
                let registry =
                    ctx.opts
                        .registry
                        .client(&creds)
                        .map_err(|e| ExecError::Registry {
                            op: "deleting",
                            object: image.clone(),
                            message: e.message,
                            retry: e.retry,
                        })?;
                let outcome = registry_ops::delete(&registry, &image)
                    .await
                    .map_err(|message| ExecError::Registry {
                        op: "deleting",
                        object: image.clone(),
                        message,
                        retry: Retry::Transient,
                    })?;
                tracing::info!(pool = %p.pool.name, %image, ?outcome, "registry image deleted (retention)");
            }
            Action::SetPoolCondition { condition, .. } => conds.push(condition),
            Action::SetMachineOSConfigCondition {
                machine_os_config,
                condition,
            } => {
                execute::set_machine_os_config_condition(
                    ctx.client,
                    &machine_os_config,
                    &condition,
                )
                .await?;
            }
            Action::SetPoolAnnotation { pool, key, value } => {
                execute::set_annotation(
                    &kinds::all(ctx.client, &kinds::pool()),
                    &pool,
                    &key,
                    Some(&value),
                    format!("MachineConfigPool {pool}"),
                )
                .await?;
            }
            Action::Event {
                object,
                type_,
                reason,
                message,
            } => events.push((object, type_, reason, message)),
            Action::Requeue(r) => {
                ctx.metrics
                    .reconcile(ReconcileResult::Requeue, r.reason, 0.0);
                if let Some(after) = r.after_seconds {
                    // The lifecycle's requeues are safety nets; state changes wake the
                    // loop earlier.
                    done.requeue_in(Duration::from_secs(after));
                }
            }
        }
    }
    if !conds.is_empty() {
        execute::set_pool_conditions(ctx.client, &p.pool.name, &conds).await?;
    }
    for (object, type_, reason, message) in events {
        ctx.events.publish(&object, type_, &reason, &message).await;
    }
    ctx.metrics
        .reconcile(ReconcileResult::Ok, "", started.elapsed().as_secs_f64());
    Ok(done)
}

/// The credentials the base image is pulled with: the pull Secret first, then the push
/// Secret (the MCO falls back on the cluster's global pull secret; here the push Secret,
/// which often covers the same registry, is that fallback).
fn pull_credentials(
    s: &Snapshot,
    eff: &machineos_build_lifecycle::config::Effective,
) -> Vec<(String, Vec<u8>)> {
    eff.base_image_pull_secret
        .iter()
        .chain([&eff.push_secret])
        .filter_map(|n| s.dockerconfigjson(n))
        .collect()
}
