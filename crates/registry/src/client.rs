//! A registry client for what a build does: read a base image's manifests and blobs, and
//! publish a derived image (mount or copy blobs, upload a layer, put a manifest) — on
//! oci-client, with bounded retries, per-registry credentials, extra CAs and an explicit
//! plain-HTTP policy.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use machineos_image::auth::Credentials;
use machineos_image::{Digest, RegistryRef};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use crate::retry::{RetryPolicy, with_retry};
use crate::scheme::{Scheme, may_use_plain_http};

/// Every manifest media type a build can read.
pub const ACCEPTED_MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// How to reach registries.
#[derive(Debug, Default)]
pub struct RegistryOptions {
    /// Extra trusted CA certificates, PEM (one or several per entry).
    pub ca_pems: Vec<Vec<u8>>,
    /// Hosts (`host[:port]`) that may be reached over plain HTTP, besides loopback.
    pub insecure_hosts: Vec<String>,
    /// Credentials by registry and repository.
    pub credentials: Credentials,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Upload blobs in one PUT instead of chunks.
    pub monolithic_push: bool,
}

/// Why a registry operation failed. Each names the operation and the image.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The registry refused our credentials, or wanted some we do not have.
    #[error("{op} {image}: access denied by {registry} ({detail}); {hint}")]
    Unauthorized {
        /// The operation.
        op: String,
        /// The image.
        image: String,
        /// The registry host.
        registry: String,
        /// What the registry said.
        detail: String,
        /// Whether we sent credentials, and where they would come from.
        hint: String,
    },
    /// The manifest, tag, repository or blob does not exist.
    #[error("{op} {image}: not found ({detail})")]
    NotFound {
        /// The operation.
        op: String,
        /// The image.
        image: String,
        /// What the registry said.
        detail: String,
    },
    /// Any other failure, after the retries allowed.
    #[error("{op} {image}: failed after {attempts} attempt(s): {source}")]
    Request {
        /// The operation.
        op: String,
        /// The image.
        image: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        source: Box<OciDistributionError>,
    },
    /// The registry stored a manifest under another digest than the one we computed.
    #[error("pushing manifest {image}: the registry reports digest {got}, we computed {want}")]
    DigestMismatch {
        /// The image.
        image: String,
        /// What the registry reported.
        got: String,
        /// What we computed.
        want: Digest,
    },
    /// A CA certificate could not be used.
    #[error("setting up TLS: {0}")]
    Tls(String),
    /// The HTTP client could not be built.
    #[error("setting up the registry client: {0}")]
    Setup(String),
}

/// A registry client shared by every operation of one build.
///
/// oci-client keeps one credential per registry host, while credentials may be scoped to a
/// repository path (`quay.io/org-a` and `quay.io/org-b` with different robots); so there is
/// one oci-client per credential in use, chosen per operation by longest match.
pub struct Registry {
    settings: Settings,
    clients: std::sync::Mutex<std::collections::HashMap<String, Arc<Client>>>,
    credentials: Credentials,
    retry: RetryPolicy,
}

/// What every oci-client of a [`Registry`] is built with.
struct Settings {
    plain_http: Vec<String>,
    certs: Vec<Certificate>,
    monolithic_push: bool,
}

impl Settings {
    fn client(&self) -> Result<Client, RegistryError> {
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.plain_http.clone()),
            extra_root_certificates: self.certs.clone(),
            use_monolithic_push: self.monolithic_push,
            connect_timeout: Some(Duration::from_secs(30)),
            read_timeout: Some(Duration::from_secs(300)),
            user_agent: concat!("machineos/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        Client::try_from(config).map_err(|e| RegistryError::Setup(e.to_string()))
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("plain_http", &self.settings.plain_http)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A client for `hosts` (`host[:port]`). Hosts that may use plain HTTP (loopback, or named
    /// in `insecure_hosts`) are probed (see [`crate::scheme::probe`]): plain HTTP only when the
    /// registry does not speak TLS.
    pub async fn connect(opts: RegistryOptions, hosts: &[&str]) -> Result<Registry, RegistryError> {
        let mut certs = Vec::new();
        for (i, pem) in opts.ca_pems.iter().enumerate() {
            // Validate early, so a bad CA file is reported as such and not as a TLS failure.
            let which = format!("CA bundle {} of {}", i + 1, opts.ca_pems.len());
            let found = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                RegistryError::Tls(format!("{which}: not a PEM certificate bundle: {e}"))
            })?;
            if found.is_empty() {
                return Err(RegistryError::Tls(format!(
                    "{which}: no PEM certificate in it"
                )));
            }
            certs.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data: pem.clone(),
            });
        }
        let mut plain_http = Vec::new();
        let mut seen = HashSet::new();
        for host in hosts {
            if !seen.insert(host.to_string()) || !may_use_plain_http(host, &opts.insecure_hosts) {
                continue;
            }
            if crate::scheme::probe(host).await == Scheme::Http {
                plain_http.push(host.to_string());
            }
        }
        let settings = Settings {
            plain_http,
            certs,
            monolithic_push: opts.monolithic_push,
        };
        // Build one client now, so a bad setting is reported before any work is done.
        let first = settings.client()?;
        Ok(Registry {
            settings,
            clients: std::sync::Mutex::new(std::collections::HashMap::from([(
                String::new(),
                Arc::new(first),
            )])),
            credentials: opts.credentials,
            retry: opts.retry,
        })
    }

    fn auth_for(&self, r: &RegistryRef) -> RegistryAuth {
        match self.credentials.lookup(r.registry(), r.repository()) {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.expose().to_string()),
            None => RegistryAuth::Anonymous,
        }
    }

    /// The client that carries the credential for `r` (by longest match), with it stored.
    async fn client_for(&self, r: &RegistryRef) -> Result<Arc<Client>, RegistryError> {
        let auth = self.auth_for(r);
        // The key identifies the credential without keeping its password in clear text.
        let key = match &auth {
            RegistryAuth::Basic(user, pass) => format!(
                "{}\n{user}\n{}",
                r.registry(),
                Digest::sha256(pass.as_bytes())
            ),
            _ => String::new(),
        };
        let client = {
            let mut clients = self
                .clients
                .lock()
                .map_err(|_| RegistryError::Setup("client table poisoned".into()))?;
            match clients.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = Arc::new(self.settings.client()?);
                    clients.insert(key, c.clone());
                    c
                }
            }
        };
        client
            .store_auth_if_needed(to_reference(r).resolve_registry(), &auth)
            .await;
        Ok(client)
    }

    fn classify(
        &self,
        op: &str,
        r: &RegistryRef,
        (err, attempts): (OciDistributionError, u32),
    ) -> RegistryError {
        let image = r.to_string();
        let denied = match &err {
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => true,
            OciDistributionError::ServerError { code, .. } => *code == 401 || *code == 403,
            OciDistributionError::RequestError(e) => e
                .status()
                .is_some_and(|s| s.as_u16() == 401 || s.as_u16() == 403),
            OciDistributionError::RegistryError { envelope, .. } => envelope
                .errors
                .iter()
                .any(|e| matches!(e.code, OciErrorCode::Unauthorized | OciErrorCode::Denied)),
            _ => false,
        };
        if denied {
            let hint = if self
                .credentials
                .lookup(r.registry(), r.repository())
                .is_some()
            {
                format!(
                    "the credentials for {} were sent and refused, or its token service failed (credentials from {})",
                    r.registry(),
                    self.credentials.describe_sources()
                )
            } else {
                format!(
                    "no credentials for {} were found (looked in {})",
                    r.registry(),
                    self.credentials.describe_sources()
                )
            };
            return RegistryError::Unauthorized {
                op: op.to_string(),
                image,
                registry: r.registry().to_string(),
                detail: brief(&err),
                hint,
            };
        }
        let missing = match &err {
            OciDistributionError::ImageManifestNotFoundError(_) => true,
            OciDistributionError::ServerError { code, .. } => *code == 404,
            OciDistributionError::RequestError(e) => e.status().is_some_and(|s| s.as_u16() == 404),
            OciDistributionError::RegistryError { envelope, .. } => {
                envelope.errors.iter().any(|e| {
                    matches!(
                        e.code,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                    )
                })
            }
            _ => false,
        };
        if missing {
            return RegistryError::NotFound {
                op: op.to_string(),
                image,
                detail: brief(&err),
            };
        }
        RegistryError::Request {
            op: op.to_string(),
            image,
            attempts,
            source: Box::new(err),
        }
    }

    /// The manifest `r` names (by digest when it has one, else by tag), with its digest. A
    /// reference with a digest is checked against the bytes received.
    pub async fn manifest(&self, r: &RegistryRef) -> Result<(Vec<u8>, Digest), RegistryError> {
        let client = self.client_for(r).await?;
        let reference = to_reference(r);
        let auth = self.auth_for(r);
        let (body, _) = with_retry(&self.retry, "fetching manifest", || {
            client.pull_manifest_raw(&reference, &auth, ACCEPTED_MANIFEST_TYPES)
        })
        .await
        .map_err(|e| self.classify("fetching manifest", r, e))?;
        let digest = match r.digest() {
            Some(d) => {
                let got = d.same_algorithm_of(&body);
                if &got != d {
                    return Err(RegistryError::DigestMismatch {
                        image: r.to_string(),
                        got: got.to_string(),
                        want: d.clone(),
                    });
                }
                got
            }
            None => Digest::sha256(&body),
        };
        Ok((body.to_vec(), digest))
    }

    /// A small blob (an image config) read whole and checked against its digest.
    pub async fn blob(&self, r: &RegistryRef, digest: &Digest) -> Result<Vec<u8>, RegistryError> {
        let client = self.client_for(r).await?;
        let reference = to_reference(r);
        let desc = descriptor(digest);
        let body = with_retry(&self.retry, "fetching blob", || async {
            let mut out = Vec::new();
            client.pull_blob(&reference, &desc, &mut out).await?;
            Ok(out)
        })
        .await
        .map_err(|e| self.classify(&format!("fetching blob {digest} of"), r, e))?;
        Ok(body)
    }

    /// A blob as a stream of bytes; the stream fails at its end if the bytes do not match
    /// `digest`. Opening is retried; a failure mid-stream is the caller's to retry.
    pub async fn blob_stream(
        &self,
        r: &RegistryRef,
        digest: &Digest,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, RegistryError> {
        let client = self.client_for(r).await?;
        let reference = to_reference(r);
        let desc = descriptor(digest);
        let stream = with_retry(&self.retry, "opening blob", || {
            client.pull_blob_stream(&reference, &desc)
        })
        .await
        .map_err(|e| self.classify(&format!("reading blob {digest} of"), r, e))?;
        Ok(stream.stream)
    }

    /// Whether the repository of `r` already has the blob.
    pub async fn has_blob(&self, r: &RegistryRef, digest: &Digest) -> Result<bool, RegistryError> {
        let client = self.client_for(r).await?;
        let reference = to_reference(r);
        with_retry(&self.retry, "checking blob", || {
            client.blob_exists(&reference, digest.as_str())
        })
        .await
        .map_err(|e| self.classify(&format!("checking blob {digest} in"), r, e))
    }

    /// Asks the registry to mount a blob of `source` into the repository of `target`.
    /// `Ok(false)` when the registry declined, so the caller copies the blob: it answered
    /// with an upload session (202), or refused the mount itself (a token registry wants
    /// pull access to the source repository in the same token, which oci-client does not ask
    /// for; 401/403/404). Only transient failures that outlast the retries are errors.
    pub async fn mount(
        &self,
        target: &RegistryRef,
        source: &RegistryRef,
        digest: &Digest,
    ) -> Result<bool, RegistryError> {
        if target.registry() != source.registry() {
            return Ok(false);
        }
        let client = self.client_for(target).await?;
        let t = to_reference(target);
        let s = to_reference(source);
        match with_retry(&self.retry, "mounting blob", || {
            client.mount_blob(&t, &s, digest.as_str())
        })
        .await
        {
            Ok(()) => Ok(true),
            Err((e, attempts)) if crate::retry::is_transient(&e) => Err(self.classify(
                &format!("mounting blob {digest} into"),
                target,
                (e, attempts),
            )),
            Err((e, _)) => {
                tracing::debug!("mounting blob {digest} into {target} declined: {e}");
                Ok(false)
            }
        }
    }

    /// Uploads a blob held in memory (the new layer, the config). Skipped when present.
    pub async fn push_blob(
        &self,
        target: &RegistryRef,
        data: Bytes,
        digest: &Digest,
    ) -> Result<(), RegistryError> {
        if self.has_blob(target, digest).await? {
            return Ok(());
        }
        let client = self.client_for(target).await?;
        let t = to_reference(target);
        with_retry(&self.retry, "uploading blob", || {
            client.push_blob(&t, data.clone(), digest.as_str())
        })
        .await
        .map_err(|e| self.classify(&format!("uploading blob {digest} to"), target, e))?;
        Ok(())
    }

    /// Uploads a blob from a stream that `open` produces (once per attempt), without holding
    /// it in memory. A failure to open the source counts as a transient I/O failure.
    pub async fn push_blob_stream<F, Fut>(
        &self,
        target: &RegistryRef,
        digest: &Digest,
        size: u64,
        open: F,
    ) -> Result<(), RegistryError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<
                Output = std::io::Result<BoxStream<'static, std::io::Result<Bytes>>>,
            >,
    {
        let client = self.client_for(target).await?;
        let t = to_reference(target);
        let mut attempt = 1;
        loop {
            let pushed = match open().await {
                Ok(stream) => {
                    let stream =
                        futures_util::TryStreamExt::map_err(stream, OciDistributionError::IoError);
                    client
                        .push_blob_stream(&t, stream, digest.as_str(), Some(size))
                        .await
                }
                Err(e) => Err(OciDistributionError::IoError(e)),
            };
            match pushed {
                Ok(_) => {
                    return Ok(());
                }
                Err(e) if crate::retry::is_transient(&e) => match self.retry.backoff(attempt) {
                    Some(wait) => {
                        tracing::warn!("uploading blob {digest}: attempt {attempt} failed: {e}");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    None => {
                        return Err(self.classify(
                            &format!("uploading blob {digest} to"),
                            target,
                            (e, attempt),
                        ));
                    }
                },
                Err(e) => {
                    return Err(self.classify(
                        &format!("uploading blob {digest} to"),
                        target,
                        (e, attempt),
                    ));
                }
            }
        }
    }

    /// Whether the repository of `r` has the manifest `digest`.
    pub async fn has_manifest(
        &self,
        r: &RegistryRef,
        digest: &Digest,
    ) -> Result<bool, RegistryError> {
        let client = self.client_for(r).await?;
        let reference = to_reference(&r.with_digest(digest.clone()));
        let auth = self.auth_for(r);
        match with_retry(&self.retry, "checking manifest", || {
            client.fetch_manifest_digest(&reference, &auth)
        })
        .await
        .map_err(|e| self.classify(&format!("checking manifest {digest} in"), r, e))
        {
            Ok(got) => Ok(got == digest.as_str()),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Puts a manifest into the repository of `target` by digest, checks that the registry
    /// stored it under the digest we computed, and only then puts the same bytes under `tag`
    /// (if any), so a mismatch never moves a tag.
    pub async fn push_manifest(
        &self,
        target: &RegistryRef,
        body: &[u8],
        media_type: &str,
        tag: Option<&str>,
    ) -> Result<Digest, RegistryError> {
        let client = self.client_for(target).await?;
        let want = Digest::sha256(body);
        let by_digest = to_reference(&target.with_digest(want.clone()));
        let content_type = reqwest::header::HeaderValue::from_str(media_type)
            .map_err(|e| RegistryError::Setup(format!("media type {media_type:?}: {e}")))?;
        let body = Bytes::copy_from_slice(body);
        let put = |reference: Reference| {
            let client = client.clone();
            let body = body.clone();
            let content_type = content_type.clone();
            async move {
                with_retry(&self.retry, "pushing manifest", || {
                    client.push_manifest_raw(&reference, body.clone(), content_type.clone())
                })
                .await
                .map_err(|e| self.classify("pushing manifest", target, e))
            }
        };
        let location = put(by_digest.clone()).await?;
        self.check_location(target, &location, &want)?;
        // Read back what the registry serves under that digest.
        let auth = self.auth_for(target);
        let got = with_retry(&self.retry, "checking pushed manifest", || {
            client.fetch_manifest_digest(&by_digest, &auth)
        })
        .await
        .map_err(|e| self.classify("checking pushed manifest", target, e))?;
        if got != want.as_str() {
            return Err(RegistryError::DigestMismatch {
                image: target.to_string(),
                got,
                want,
            });
        }
        if let Some(tag) = tag {
            let tagged = Reference::with_tag(
                target.registry().to_string(),
                target.repository().to_string(),
                tag.to_string(),
            );
            let location = put(tagged).await?;
            self.check_location(target, &location, &want)?;
        }
        Ok(want)
    }

    /// The Location of a pushed manifest names its digest when the registry follows the
    /// spec; it must be ours.
    fn check_location(
        &self,
        target: &RegistryRef,
        location: &str,
        want: &Digest,
    ) -> Result<(), RegistryError> {
        match location
            .rsplit('/')
            .next()
            .filter(|s| s.contains(':') && *s != want.as_str())
        {
            Some(got) => Err(RegistryError::DigestMismatch {
                image: target.to_string(),
                got: got.to_string(),
                want: want.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// The short form of an oci-client error for messages that already name the operation.
fn brief(err: &OciDistributionError) -> String {
    match err {
        OciDistributionError::ServerError { code, message, .. } => {
            let message = message.trim();
            if message.is_empty() {
                format!("HTTP {code}")
            } else {
                format!("HTTP {code}: {message}")
            }
        }
        other => other.to_string(),
    }
}

fn to_reference(r: &RegistryRef) -> Reference {
    let registry = r.registry().to_string();
    let repository = r.repository().to_string();
    match (r.tag(), r.digest()) {
        (_, Some(d)) => Reference::with_digest(registry, repository, d.to_string()),
        (Some(t), None) => Reference::with_tag(registry, repository, t.to_string()),
        (None, None) => Reference::with_tag(registry, repository, "latest".to_string()),
    }
}

fn descriptor(digest: &Digest) -> OciDescriptor {
    OciDescriptor {
        digest: digest.to_string(),
        ..OciDescriptor::default()
    }
}
