//! The render sub-controller — the MCO's render controller: each pool's MachineConfigs →
//! its `rendered-<pool>-<hash>` MachineConfig, and the pool pointed at it.
//!
//! * **observe** — which pools' inputs changed since their last successful render (a
//!   fingerprint of the pool, its MachineConfigs, the render defaults and its nodes);
//! * **decide** — [`plan::plan`] (pure) per changed pool, on a blocking thread (rendering
//!   parses and merges every MachineConfig: CPU work);
//! * **execute** — [`execute::render`], pools concurrently; a failed write asks the loop to
//!   come back in a second.

pub(crate) mod execute;
pub(crate) mod plan;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::Client;
use kube::ResourceExt;
use kube::api::DynamicObject;
use machineos_build_lifecycle::ObjectRef;
use machineos_diagnostics::Classify;
use machineos_render::RenderDefaults;

use crate::api::Events;
use crate::metrics::{Metrics, ReconcileResult};
use crate::observe::{self, Snapshot};
use crate::pass::{Cx, Requeue};

/// Pools rendered at once.
const POOLS_AT_ONCE: usize = 8;

/// The render sub-controller's state between passes.
#[derive(Default)]
pub(crate) struct RenderController {
    /// Per pool: the fingerprint of the inputs last rendered with nothing left to write.
    fingerprints: HashMap<String, u64>,
}

impl RenderController {
    /// One pass: the plans of the pools whose inputs changed, carried out.
    pub(crate) async fn pass(&mut self, cx: &Cx<'_>, s: &Snapshot) -> Requeue {
        let mut requeue = Requeue::default();
        let defaults = defaults(s);
        let version = format!("machineos {}", env!("CARGO_PKG_VERSION"));
        // Which pools' inputs changed (cheap), then their plans on a blocking thread
        // (rendering parses and merges every MachineConfig: CPU work).
        let changed: Vec<(Arc<DynamicObject>, u64)> = s
            .pools
            .iter()
            .filter_map(|pool| {
                let fp = plan::fingerprint(pool, &s.machine_configs, &defaults, &s.nodes);
                (self.fingerprints.get(&pool.name_any()) != Some(&fp)).then(|| (pool.clone(), fp))
            })
            .collect();
        if changed.is_empty() {
            return requeue;
        }
        let (mcs, nodes) = (s.machine_configs.clone(), s.nodes.clone());
        let t = Instant::now();
        let n_changed = changed.len();
        let planned = tokio::task::spawn_blocking(move || {
            changed
                .into_iter()
                .map(|(pool, fp)| {
                    let plan = plan::plan(&pool, &mcs, &defaults, &nodes, &version);
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
                self.fingerprints.insert(plan.pool.clone(), fp);
            } else {
                writes.push(plan);
            }
        }
        let (client, events, metrics) = (cx.client, cx.events, cx.metrics);
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
            requeue.after(Duration::from_secs(1));
        }
        requeue
    }
}

/// The render defaults: `osImageURL` and `baseOSExtensionsContainerImage` from the
/// `machine-config-osimageurl` ConfigMap.
fn defaults(s: &Snapshot) -> RenderDefaults {
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

/// Carry out one pool's render plan; `true` when a write failed.
async fn write_render(
    client: &Client,
    events: &Events,
    metrics: &Metrics,
    plan: &plan::RenderPlan,
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
