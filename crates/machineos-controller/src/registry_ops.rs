//! The registry operations the lifecycle asks for, carried out with the referenced Secret's
//! credentials: does `repo:<build>` exist ([`check`]), delete an image by digest
//! ([`delete`]), resolve a base image tag to its digest ([`resolve`]), and move an extra tag
//! ([`retag`]); and [`RegistrySettings`], which makes the clients for all of them (and for
//! native builds) from Secrets' `.dockerconfigjson`, one cached client per set of
//! credentials ([`credentials_key`]).
//!
//! Errors keep the registry's classification: [`check`] turns "not found" into
//! [`RegistryObservation::Absent`] and everything else (auth denied, 5xx after retries) into
//! [`RegistryObservation::Error`] with `transient` from
//! [`machineos_diagnostics::Classify::retry`] — the lifecycle never rebuilds because of an
//! error, only because of a definite absence (the MCO's rule). Deleting tolerates 404 and 405
//! (a registry with deletes disabled): retention then only drops the records.

use machineos_build_lifecycle::{RegistryImage, RegistryObservation};
use machineos_diagnostics::{Classified, Classify as _, Retry};
use machineos_image::ImageRef;
use machineos_image::reference::RegistryRef;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use machineos_image::auth::{AuthFile, Credentials};
use machineos_registry::{
    CredentialSource, DeleteOutcome, Registry, RegistryError, RegistryOptions,
};

/// Registry settings shared by every registry operation (builds, checks, base image
/// resolution, deletes), and the clients made from them.
#[derive(Debug, Clone, Default)]
pub struct RegistrySettings {
    /// Extra CA certificates (PEM).
    pub ca_pems: Vec<Vec<u8>>,
    /// Hosts that may be reached over plain HTTP besides loopback.
    pub insecure_hosts: Vec<String>,
    /// Clients by credentials: making one builds a TLS configuration (CA certificates
    /// parsed, roots loaded), and reusing one keeps its connections and tokens.
    clients: Arc<Mutex<HashMap<u64, Registry>>>,
}

/// At most this many cached clients (one per distinct set of credentials in use).
const MAX_CLIENTS: usize = 64;

impl RegistrySettings {
    /// Settings with these CAs and plain-HTTP hosts.
    pub fn new(ca_pems: Vec<Vec<u8>>, insecure_hosts: Vec<String>) -> Self {
        RegistrySettings {
            ca_pems,
            insecure_hosts,
            clients: Arc::default(),
        }
    }

    /// A registry client with these settings and the given `.dockerconfigjson` payloads
    /// (source name, bytes), from the cache when the same credentials were used before.
    pub fn client(&self, credentials: &[(String, Vec<u8>)]) -> Result<Registry, Classified> {
        let key = credentials_key(credentials);
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = clients.get(&key) {
            return Ok(r.clone());
        }
        let mut files = Vec::new();
        for (source, bytes) in credentials {
            let f = AuthFile::parse(bytes).map_err(|e| Classified::of(&e).context(source))?;
            files.push((PathBuf::from(source), f));
        }
        let registry = Registry::new(RegistryOptions {
            ca_pems: self.ca_pems.clone(),
            insecure_hosts: self.insecure_hosts.clone(),
            credentials: CredentialSource::Loaded(Credentials::from_files(files)),
            ..RegistryOptions::default()
        })
        .map_err(|e| Classified::of(&e))?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, registry.clone());
        Ok(registry)
    }
}

/// A fingerprint of credentials: which Secrets, with what content (the `(source, bytes)`
/// pairs a client is made from).
pub fn credentials_key(credentials: &[(String, Vec<u8>)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    credentials.hash(&mut h);
    h.finish()
}

fn registry_ref(pullspec: &str) -> Result<RegistryRef, String> {
    match ImageRef::parse(pullspec) {
        Ok(ImageRef::Registry(r)) => Ok(r),
        Ok(ImageRef::Layout(_)) => Err(format!("{pullspec}: not a registry image")),
        Err(e) => Err(format!("{pullspec}: {e}")),
    }
}

/// Whether `pullspec` (`repo:<build>`) exists, and its digest and architectures. When it
/// does not — a build will push there — the push preflight follows: whether Secret
/// `namespace/secret`'s credentials may push to its repository (a blob upload started and
/// then cancelled, see [`Registry::check_push`]); `Absent` only when they may.
pub async fn check(
    registry: &Registry,
    pullspec: &str,
    namespace: &str,
    secret: &str,
) -> RegistryObservation {
    let r = match registry_ref(pullspec) {
        Ok(r) => r,
        Err(message) => {
            return RegistryObservation::Error {
                message,
                transient: false,
            };
        }
    };
    let registry = registry.for_operation();
    let error = |e: RegistryError, message: String| RegistryObservation::Error {
        transient: e.retry() == Retry::Transient,
        message,
    };
    match registry.image_info(&r).await {
        Ok(None) => {}
        Ok(Some(info)) => {
            return RegistryObservation::Present(registry_image(
                format!("{}@{}", r.name(), info.digest),
                info,
            ));
        }
        Err(e) => {
            let message = e.to_string();
            return error(e, message);
        }
    }
    match registry.check_push(&r).await {
        Ok(check) => {
            if let Some(w) = check.cancel_warning {
                tracing::debug!(repository = %r.name(), warning = %w, "push preflight: cancelling the upload failed");
            }
            RegistryObservation::Absent
        }
        Err(e) => {
            let message = format!(
                "Secret {namespace}/{secret} may not push to {}: {e}",
                r.name()
            );
            error(e, message)
        }
    }
}

/// `reference` by digest (`repo@sha256:…`): unchanged when it already is, else the digest
/// the registry serves for its tag (the index's, for a multi-arch image).
pub async fn resolve(registry: &Registry, reference: &str) -> Result<String, (String, Retry)> {
    let r = registry_ref(reference).map_err(|m| (m, Retry::Permanent))?;
    if let Some(d) = r.digest() {
        return Ok(format!("{}@{d}", r.name()));
    }
    match registry.for_operation().image_info(&r).await {
        Ok(Some(info)) => Ok(format!("{}@{}", r.name(), info.digest)),
        Ok(None) => Err((format!("{reference}: no such image"), Retry::Permanent)),
        Err(e) => Err((e.to_string(), e.retry())),
    }
}

/// The lifecycle's record of `image` (`repo@sha256:…`) as the registry described it: each
/// architecture's manifest digest (the variant is not the registry's to say).
pub fn registry_image(image: String, info: machineos_registry::ImageInfo) -> RegistryImage {
    RegistryImage {
        image,
        architectures: info
            .architectures
            .into_iter()
            .map(|(a, d)| (a, d.to_string()))
            .collect(),
        variant: None,
    }
}

/// Delete `image` (`repo@sha256:…`) by digest; gone already or deletes disabled are fine.
pub async fn delete(registry: &Registry, image: &str) -> Result<DeleteOutcome, String> {
    let r = registry_ref(image)?;
    let Some(d) = r.digest().cloned() else {
        return Err(format!("{image}: not by digest"));
    };
    registry
        .for_operation()
        .delete_manifest(&r, &d)
        .await
        .map_err(|e| e.to_string())
}

/// Put the manifest `pushed` names under `tag` too (same repository).
pub async fn retag(registry: &Registry, pushed: &ImageRef, tag: &str) -> Result<(), RegistryError> {
    let ImageRef::Registry(r) = pushed else {
        return Ok(());
    };
    let (body, _) = registry.manifest(r).await?;
    let media_type = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v.get("mediaType")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".to_owned());
    let target = r
        .with_tag(tag)
        .map_err(|e| RegistryError::Setup(e.to_string()))?;
    registry
        .push_manifest(&target, &body, &media_type, Some(tag))
        .await?;
    Ok(())
}
