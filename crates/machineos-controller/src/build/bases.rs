//! Base images by digest: each opted-in pool's base image reference (its MachineOSConfig,
//! else the rendered MachineConfig's `osImageURL`, else the `machine-config-osimageurl`
//! ConfigMap) resolved in the registry with the pool's pull credentials, kept until the
//! reference or the credentials change (a pull Secret replaced by a wrong one is asked
//! again and reported, not hidden behind the digest the old one fetched); a refusal kept
//! for a while (or until the credentials change) and reported on the pool as a
//! [`BaseImageError`] naming where the reference comes from; transient errors only requeue.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use machineos_build_lifecycle::{BaseImageError, Observed};
use machineos_diagnostics::Retry;

use super::BuildController;
use crate::observe::{self, Snapshot};
use crate::pass::{Cx, Requeue};
use crate::registry_ops;

/// At most this many (reference, credentials) digests kept; past it the cache starts over
/// (each pool's next pass asks the registry once).
const MAX_BASES: usize = 256;

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
            if p.opt_in.is_none() {
                self.base_errors.remove(&pool);
                self.pool_bases.remove(&pool);
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
            if observe::is_digested(&reference) {
                self.base_errors.remove(&pool);
                self.pool_bases.remove(&pool);
                continue;
            }
            let creds = pull_credentials(s, &eff);
            let creds_key = registry_ops::credentials_key(&creds);
            // Known with these credentials: nothing to ask.
            if let Some(d) = self.base_images.get(&(reference.clone(), creds_key)) {
                self.pool_bases.insert(pool.clone(), (reference, d.clone()));
                self.base_errors.remove(&pool);
                continue;
            }
            // Not known with these credentials (new, or the pool's Secret changed): the
            // pool waits for the answer; a digest other credentials fetched does not stand in.
            self.pool_bases.remove(&pool);
            // A refusal is retried after a while, or at once when the credentials change.
            if let Some((_, key, at)) = self.base_failures.get(&reference)
                && *key == creds_key
                && at.elapsed() < cx.opts.registry_answer_ttl
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
                    if self.base_images.len() >= MAX_BASES {
                        self.base_images.clear();
                    }
                    self.base_images
                        .insert((reference.clone(), creds_key), d.clone());
                    self.pool_bases.insert(pool.clone(), (reference.clone(), d));
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
                    requeue.after(cx.opts.registry_answer_ttl);
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
