//! Base images by digest: each opted-in pool's base image reference (its MachineOSConfig,
//! else the rendered MachineConfig's `osImageURL`, else the `machine-config-osimageurl`
//! ConfigMap) resolved in the registry, kept until the reference changes; a refusal kept
//! for a while (or until the credentials change) and reported on the pool as a
//! [`BaseImageError`] naming where the reference comes from; transient errors only requeue.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use machineos_build_lifecycle::{BaseImageError, Observed};
use machineos_diagnostics::Retry;

use super::{BuildController, REGISTRY_TTL};
use crate::observe::{self, Snapshot};
use crate::pass::{Cx, Requeue};
use crate::registry_ops;

impl BuildController {
    /// Resolve base image tags to digests for the opted-in pools; a pool whose base image
    /// cannot be had (none named, or the registry says no) gets a [`BaseImageError`] naming
    /// where the reference comes from. Transient registry errors only requeue.
    pub(crate) async fn resolve_bases(
        &mut self,
        cx: &Cx<'_>,
        s: &Snapshot,
        o: &Observed,
        requeue: &mut Requeue,
    ) {
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
                &cx.opts.namespace,
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
            let result = match cx.opts.registry.client(&creds) {
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
                    requeue.after(Duration::from_secs(5));
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
                    requeue.after(REGISTRY_TTL);
                }
            }
        }
    }
}

/// The credentials the base image is pulled with: the pull Secret first, then the push
/// Secret (the MCO falls back on the cluster's global pull secret; here the push Secret,
/// which often covers the same registry, is that fallback).
pub(crate) fn pull_credentials(
    s: &Snapshot,
    eff: &machineos_build_lifecycle::config::Effective,
) -> Vec<(String, Vec<u8>)> {
    eff.base_image_pull_secret
        .iter()
        .chain([&eff.push_secret])
        .filter_map(|n| s.dockerconfigjson(n))
        .collect()
}
