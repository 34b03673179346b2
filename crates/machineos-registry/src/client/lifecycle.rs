//! The registry operations a controller needs around a build's life, beyond pulling and
//! pushing: what an image reference resolves to ([`Registry::image_info`]: its digest, media
//! type and per-architecture manifests), and deleting a manifest by digest when a retention
//! policy says so ([`Registry::delete_manifest`]).
//!
//! Guarantees:
//! - "Not there" is an answer, not an error, only where the registry said so about the
//!   manifest asked for: `image_info` is `Ok(None)` for a 404 / `MANIFEST_UNKNOWN` /
//!   `NAME_UNKNOWN` on the reference itself; a refusal (401/403), a server error, a timeout,
//!   a manifest that is found but unreadable, or a found manifest whose config blob is
//!   missing are errors — a caller must never take those for "absent" and rebuild or forget
//!   an image because a registry was down.
//! - `delete_manifest` tolerates what retention must tolerate: a manifest already gone (404,
//!   [`DeleteOutcome::NotFound`]) and a registry with deletes disabled (405 or
//!   `UNSUPPORTED`, [`DeleteOutcome::Unsupported`]); every other answer is an error naming
//!   the operation, the digest and the image.
//! - Both retry transient failures (429, 5xx, broken connections) with the client's
//!   [`crate::RetryPolicy`] under its total deadline, and classify their errors like every
//!   other operation ([`RegistryError`]'s `Classify`), so `retry()` says whether trying again
//!   later may help.
//!
//! Simplifications:
//! - Architectures only, in GOARCH spelling after containerd's normalisation (`aarch64` →
//!   `arm64`); OS and variant are not reported (an index with `arm/v6` and `arm/v7` gives two
//!   `arm` entries, in index order).
//! - Index entries for attestations (platform `unknown/unknown`, or the annotation
//!   `vnd.docker.reference.type: attestation-manifest`) are skipped; an entry without a
//!   platform is resolved through its manifest's config when it is an image manifest, and
//!   skipped when it is a nested index or an artifact.
//! - A delete asks a token service for the scope `repository:<name>:*`: distribution wants
//!   the `delete` action, quay.io wants `push` and refuses a scope naming `delete`, and both
//!   take `*` for "every action" (what containers/image's `skopeo delete` asks for too).
//!   Registries with basic auth just get the credential.

use machineos_diagnostics::{Classify as _, Retry};
use machineos_image::descriptor::{Descriptor, media_type};
use machineos_image::manifest::{Manifest, parse_manifest};
use machineos_image::platform::Platform;
use machineos_image::{Digest, RegistryRef};
use reqwest::StatusCode;

use super::{Missing, Registry, RegistryError};
use crate::http::status_error;

/// The largest image config read to find its architecture (what a build accepts too).
pub const MAX_CONFIG: u64 = 4 << 20;

/// What a manifest delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The registry accepted the delete (202, or another 2xx).
    Deleted,
    /// The registry does not have the manifest (404): already deleted, or never pushed.
    NotFound,
    /// The registry does not allow deletes (405, or the distribution code `UNSUPPORTED`):
    /// nothing was deleted, and trying again will not change that.
    Unsupported,
}

/// What an image reference resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The digest of the manifest (or index) the reference names.
    pub digest: Digest,
    /// Its media type: the body's `mediaType`, else the OCI manifest or index type.
    pub media_type: String,
    /// `(architecture, that platform's manifest digest)`: one entry per platform of an index
    /// (attestations skipped), or the single manifest's own architecture (from its config)
    /// and digest.
    pub architectures: Vec<(String, Digest)>,
}

impl ImageInfo {
    /// Whether the reference names an index (or Docker manifest list).
    pub fn is_index(&self) -> bool {
        media_type::is_index(&self.media_type)
    }

    /// The manifest digest of the first entry for `architecture` (GOARCH spelling).
    pub fn architecture(&self, architecture: &str) -> Option<&Digest> {
        self.architectures
            .iter()
            .find(|(a, _)| a == architecture)
            .map(|(_, d)| d)
    }
}

/// The scope a delete asks a token service for (see the module's simplifications).
fn delete_scope(r: &RegistryRef) -> String {
    format!("repository:{}:*", r.repository())
}

/// Whether an index entry is an attestation rather than a platform's image.
fn is_attestation(d: &Descriptor) -> bool {
    d.platform
        .as_ref()
        .is_some_and(|p| p.os == "unknown" && p.architecture == "unknown")
        || d.annotations
            .get("vnd.docker.reference.type")
            .is_some_and(|t| t == "attestation-manifest")
}

/// An architecture in GOARCH spelling.
fn normalized_architecture(architecture: &str) -> String {
    Platform::new("linux", architecture, None)
        .normalized()
        .architecture
}

impl Registry {
    /// `DELETE /v2/<name>/manifests/<digest>`, authorised to delete (see the module's
    /// simplifications for the token scope), retried on transient failures.
    /// [`DeleteOutcome::NotFound`] and [`DeleteOutcome::Unsupported`] are outcomes, not
    /// errors; any other refusal or failure is a [`RegistryError`] naming the operation, the
    /// digest and the image. Distribution also removes the tags that pointed at the manifest;
    /// the blobs stay until the registry's garbage collection.
    pub async fn delete_manifest(
        &self,
        r: &RegistryRef,
        digest: &Digest,
    ) -> Result<DeleteOutcome, RegistryError> {
        let op = format!("deleting manifest {digest} of");
        let url = self
            .repo_url(r, &format!("manifests/{digest}"))
            .await
            .map_err(|e| self.classify(Missing::Image, &op, r, (e, 1)))?;
        let scopes = [delete_scope(r)];
        self.run(&op, || async {
            let make = || self.shared.http.delete(url.clone());
            let resp = self.send_authed(r, &scopes, &make).await?;
            match resp.status() {
                s if s.is_success() => Ok(DeleteOutcome::Deleted),
                StatusCode::NOT_FOUND => Ok(DeleteOutcome::NotFound),
                StatusCode::METHOD_NOT_ALLOWED => Ok(DeleteOutcome::Unsupported),
                _ => {
                    let e = status_error(resp, self.shared.timeouts.request).await;
                    if e.code() == Some("UNSUPPORTED") && e.retry() == Retry::Permanent {
                        Ok(DeleteOutcome::Unsupported)
                    } else {
                        Err(e)
                    }
                }
            }
        })
        .await
        .map_err(|e| self.classify(Missing::Image, &op, r, e))
    }

    /// What `r` (by digest when it has one, else by tag) resolves to: its digest, media type
    /// and per-architecture manifest digests — from the index's platforms, or from a single
    /// manifest's config. `Ok(None)` only when the registry says the manifest or its
    /// repository does not exist; refusals, server errors and unreadable manifests or
    /// configs are errors (see the module's guarantees).
    pub async fn image_info(&self, r: &RegistryRef) -> Result<Option<ImageInfo>, RegistryError> {
        let (body, digest) = match self.manifest(r).await {
            Ok(found) => found,
            Err(RegistryError::NotFound {
                missing: Missing::Image,
                ..
            }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let op = "resolving image";
        let (media_type, architectures) = match parse(op, r, &body)? {
            Manifest::Image(m) => {
                let media_type = m
                    .media_type
                    .clone()
                    .unwrap_or_else(|| media_type::OCI_MANIFEST.to_owned());
                let arch = self.config_architecture(op, r, &m.config).await?;
                (media_type, vec![(arch, digest.clone())])
            }
            Manifest::Index(index) => {
                let media_type = index
                    .media_type
                    .clone()
                    .unwrap_or_else(|| media_type::OCI_INDEX.to_owned());
                let mut architectures = Vec::new();
                for entry in &index.manifests {
                    if is_attestation(entry) {
                        continue;
                    }
                    let arch = match &entry.platform {
                        Some(p) => normalized_architecture(&p.architecture),
                        None if media_type::is_image_manifest(&entry.media_type) => {
                            let child = r.with_digest(entry.digest.clone());
                            let (body, _) = self.manifest(&child).await?;
                            match parse(op, &child, &body)? {
                                Manifest::Image(m) => {
                                    self.config_architecture(op, &child, &m.config).await?
                                }
                                Manifest::Index(_) => continue,
                            }
                        }
                        None => continue,
                    };
                    architectures.push((arch, entry.digest.clone()));
                }
                (media_type, architectures)
            }
        };
        Ok(Some(ImageInfo {
            digest,
            media_type,
            architectures,
        }))
    }

    /// The architecture an image config (`config` of `r`) states, normalised.
    async fn config_architecture(
        &self,
        op: &str,
        r: &RegistryRef,
        config: &Descriptor,
    ) -> Result<String, RegistryError> {
        #[derive(serde::Deserialize)]
        struct Arch {
            architecture: Option<String>,
        }
        if config.size > MAX_CONFIG {
            return Err(invalid(
                op,
                r,
                format!(
                    "its config {} is {} bytes, more than the {MAX_CONFIG} read",
                    config.digest, config.size
                ),
            ));
        }
        let bytes = self.blob(r, &config.digest, config.size).await?;
        let parsed: Arch = serde_json::from_slice(&bytes).map_err(|e| {
            invalid(
                op,
                r,
                format!("its config {} is not an image config: {e}", config.digest),
            )
        })?;
        match parsed.architecture.filter(|a| !a.is_empty()) {
            Some(a) => Ok(normalized_architecture(&a)),
            None => Err(invalid(
                op,
                r,
                format!("its config {}: $.architecture is missing", config.digest),
            )),
        }
    }
}

/// `body` parsed as a manifest or index of `r`.
fn parse(op: &str, r: &RegistryRef, body: &[u8]) -> Result<Manifest, RegistryError> {
    parse_manifest(body, None).map_err(|e| invalid(op, r, e.to_string()))
}

fn invalid(op: &str, r: &RegistryRef, detail: String) -> RegistryError {
    RegistryError::Invalid {
        op: op.to_string(),
        image: r.to_string(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attestations_and_architectures() {
        let digest = Digest::sha256(b"m");
        let mut d = Descriptor::new(media_type::OCI_MANIFEST, digest, 1);
        assert!(!is_attestation(&d));
        d.platform = Some(Platform::new("unknown", "unknown", None));
        assert!(is_attestation(&d));
        d.platform = Some(Platform::new("linux", "amd64", None));
        d.annotations.insert(
            "vnd.docker.reference.type".into(),
            "attestation-manifest".into(),
        );
        assert!(is_attestation(&d));
        assert_eq!(normalized_architecture("aarch64"), "arm64");
        assert_eq!(normalized_architecture("x86_64"), "amd64");
        assert_eq!(normalized_architecture("s390x"), "s390x");
        let r = RegistryRef::parse("quay.io/a/b:1").unwrap();
        assert_eq!(delete_scope(&r), "repository:a/b:*");
    }
}
