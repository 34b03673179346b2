//! The build sub-controller: the MCO's BuildController, whose rules are
//! [`machineos_build_lifecycle::decide`]'s. Each pass, on the loop's one [`Snapshot`]:
//!
//! * **observe** — the caches and what this controller learnt outside the API server
//!   (backend status of each build, registry answers kept for `registry_answer_ttl`, 30 s, base images by digest:
//!   [`bases`]) → the lifecycle's `Observed` ([`crate::observe::observe`], pure);
//! * **decide** — per pool, pure;
//! * **execute** — per pool, concurrently (up to 8 at once; their objects are disjoint),
//!   [`execute`]: an action that fails stops that pool's remaining actions and is returned
//!   to the loop, which backs the pool off; the other pools go on.
//!
//! The builder backends ([`crate::builder`]: native, Job, OpenShift Build) live here, with
//! what they keep between passes. Restart-safe by construction: nothing but the API server
//! and the registry holds state that matters — a restarted controller sees a Building build
//! with no backend and starts it again (the native build is deterministic), a Succeeded
//! build not yet recorded is checked in the registry and recorded, and creates are
//! idempotent by name.

pub(crate) mod bases;
pub(crate) mod execute;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{BaseImageError, Observed, Phase, RegistryObservation};
use tokio::sync::Notify;
use tokio_util::sync::DropGuard;

use crate::api::{Events, ExecError};
use crate::builder::{Builder, Builders};
use crate::metrics::Metrics;
use crate::native::{NativeBackend, NativeSettings};
use crate::observe::{self, Learnt, Snapshot};
use crate::options::ControllerOptions;
use crate::pass::{Cx, Requeue};
use crate::runsteps::{RunStepBackend, RunStepSettings, Runner};

/// Pools decided and carried out at once.
const POOLS_AT_ONCE: usize = 8;

/// What a pool's work reads: the parts of the controller that do not change during it.
pub(crate) struct Ctx<'a> {
    pub client: &'a Client,
    pub opts: &'a ControllerOptions,
    pub native: &'a NativeBackend,
    pub builders: &'a Builders,
    pub events: &'a Events,
    pub metrics: &'a Metrics,
}

/// The build sub-controller's state between passes.
pub(crate) struct BuildController {
    /// Cancel every in-process build when the controller ends, however it ends.
    _guards: Vec<DropGuard>,
    native: NativeBackend,
    builders: Builders,
    /// Registry answers by build name, with when and the key of the push credentials that
    /// got them (an answer got with other credentials than the pool's now is forgotten:
    /// [`BuildController::forget_answers_for_old_credentials`]).
    registry: HashMap<String, (RegistryObservation, Instant, u64)>,
    /// Base image references resolved to digests, by the credentials that resolved them
    /// ([`crate::registry_ops::credentials_key`]): other credentials — a pool's pull Secret
    /// changed, or another pool's — are asked again, so a wrong one is reported, not hidden
    /// behind a digest another Secret fetched.
    base_images: HashMap<(String, u64), String>,
    /// Each pool's base as of its last resolution: reference, digest.
    pool_bases: HashMap<String, (String, String)>,
    /// Base image references the registry refused: the message, the credentials' key, when
    /// (retried after a while, or at once with other credentials).
    base_failures: HashMap<String, (String, u64, Instant)>,
    /// Pools whose base image is unavailable.
    base_errors: HashMap<String, BaseImageError>,
}

/// What a build pass gives the loop.
pub(crate) struct BuildPass {
    /// The lifecycle's view the pools were decided on (the rollout reads it too).
    pub observed: Observed,
    /// Each pool decided: `Ok`, or the write that stopped its actions.
    pub results: Vec<(String, Result<(), ExecError>)>,
    /// When to look again.
    pub requeue: Requeue,
}

impl BuildController {
    /// The backends: native always, the buildah Job always, the OpenShift Build when
    /// `openshift_build`. `wake` is notified on every in-process change of a build.
    pub(crate) fn new(
        client: &Client,
        opts: &ControllerOptions,
        openshift_build: bool,
        wake: &Arc<Notify>,
        metrics: &Metrics,
    ) -> BuildController {
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
            let b = RunStepBackend::new(runner, client.clone(), settings, wake.clone());
            guards.push(b.drop_guard());
            backends.push(Arc::new(b));
        }
        BuildController {
            _guards: guards,
            native,
            builders: Builders::new(backends),
            registry: HashMap::new(),
            base_images: HashMap::new(),
            pool_bases: HashMap::new(),
            base_failures: HashMap::new(),
            base_errors: HashMap::new(),
        }
    }

    /// Stop every build (shutdown, lost leadership): the next leader adopts them.
    pub(crate) fn cancel_all(&self) {
        self.builders.cancel_all();
    }

    /// Forget the registry answers a pool's builds got with other push credentials than the
    /// pool's now (its MachineOSConfig names another Secret, or the Secret changed): the
    /// check is asked again at once, so a condition never quotes the old Secret's answer.
    fn forget_answers_for_old_credentials(&mut self, s: &Snapshot, o: &Observed) {
        for p in &o.pools {
            let Ok(Some(eff)) = machineos_build_lifecycle::config::resolve(o, p) else {
                continue;
            };
            let creds: Vec<_> = s.dockerconfigjson(&eff.push_secret).into_iter().collect();
            let now = crate::registry_ops::credentials_key(&creds);
            self.registry
                .retain(|build, (_, _, key)| *key == now || !p.registry.contains_key(build));
        }
    }

    /// What this controller learnt outside the API server, as of now.
    fn learnt(&mut self, s: &Snapshot, ttl: Duration) -> Learnt {
        let fresh = Instant::now();
        self.registry
            .retain(|_, (_, at, _)| fresh.duration_since(*at) < ttl);
        Learnt {
            backend: self.builders.observe(s),
            supported_backends: self.builders.kinds(),
            registry: self
                .registry
                .iter()
                .map(|(k, (v, _, _))| (k.clone(), v.clone()))
                .collect(),
            base_images: self.pool_bases.clone(),
            base_image_errors: self.base_errors.clone(),
        }
    }

    /// One pass over the pools for which `runnable` is true (the loop holds back pools in
    /// backoff).
    pub(crate) async fn pass(
        &mut self,
        cx: &Cx<'_>,
        s: &Snapshot,
        runnable: &(dyn Fn(&str) -> bool + Sync),
    ) -> BuildPass {
        let mut requeue = Requeue::default();
        // Base images are resolved on a first observation; the pools are decided on a
        // second one, which has them.
        let learnt = self.learnt(s, cx.opts.registry_answer_ttl);
        let before = observe::observe(s, &learnt);
        self.resolve_bases(cx, s, &before, &mut requeue).await;
        self.forget_answers_for_old_credentials(s, &before);
        // Forget in-process builds the API no longer needs followed, and clean up terminal
        // builds' ephemeral objects (Jobs, Builds, their inputs).
        let active: HashMap<String, Phase> = s
            .builds
            .iter()
            .map(|b| (b.name_any(), observe::build_phase(b)))
            .collect();
        self.builders
            .retain(&|b| active.get(b).is_some_and(|p| !p.is_terminal()));
        self.builders.clean_up(s, &|b| active.get(b).copied());
        cx.metrics.set_active_builds(self.builders.active() as i64);

        let learnt = self.learnt(s, cx.opts.registry_answer_ttl);
        let observed = observe::observe(s, &learnt);
        let shared = Observed {
            pools: Vec::new(),
            ..observed.clone()
        };
        let ctx = Ctx {
            client: cx.client,
            opts: cx.opts,
            native: &self.native,
            builders: &self.builders,
            events: cx.events,
            metrics: cx.metrics,
        };
        let futures: Vec<_> = observed
            .pools
            .iter()
            .filter(|p| runnable(&p.pool.name))
            .cloned()
            .map(|p| execute::run_pool(&ctx, s, &shared, p))
            .collect();
        let done: Vec<(String, Result<execute::Executed, ExecError>)> =
            futures_util::stream::iter(futures)
                .buffer_unordered(POOLS_AT_ONCE)
                .collect()
                .await;
        if let Err(e) = execute::run_unbound(&ctx, &observed).await {
            tracing::warn!(error = %e, "a MachineOSConfig without its pool could not be told so");
            requeue.after(Duration::from_secs(5));
        }
        let mut results = Vec::with_capacity(done.len());
        for (pool, result) in done {
            match result {
                Ok(done) => {
                    for (build, answer, key) in done.answers {
                        self.registry.insert(build, (answer, Instant::now(), key));
                    }
                    for build in done.forget {
                        self.registry.remove(&build);
                    }
                    if let Some(d) = done.requeue {
                        requeue.after(d);
                    }
                    results.push((pool, Ok(())));
                }
                Err(e) => results.push((pool, Err(e))),
            }
        }
        BuildPass {
            observed,
            results,
            requeue,
        }
    }
}
