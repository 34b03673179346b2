//! A registry client for what a build does: read a base image's manifests and blobs, and
//! publish a derived image (mount or copy blobs, upload a layer, put a manifest) — the
//! distribution API over reqwest, with bounded retries, per-repository credentials, extra
//! CAs, an explicit plain-HTTP policy, timeouts and a total deadline, and a cap on every
//! response read into memory.
//!
//! Written by hand over reqwest rather than on oci-client: a client that will run unattended
//! against registries it does not control must bound what it reads (oci-client reads
//! manifests, token answers and error bodies whole, however large), must be able to ask one
//! token for a mount's two repositories, and must check sha512 blobs; the subset of the
//! distribution API a build uses is small (see [`crate::http`] and [`crate::auth`] for the
//! pieces).

use std::path::PathBuf;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use machineos_diagnostics::{Classify, Retry};
use machineos_image::auth::{AuthError, Credential, Credentials};
use machineos_image::{Digest, RegistryRef};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use reqwest::{Method, StatusCode, Url};
use tokio::time::Instant;

use crate::auth::{AuthCache, Challenge, parse_challenge};
use crate::http::{
    MAX_MANIFEST, MAX_TOKEN_RESPONSE, Timeouts, TransportError, read_capped, send, status_error,
};
use crate::retry::{RetryPolicy, with_retry};
use crate::scheme::{Scheme, may_use_plain_http};
use crate::stream::verified;

mod lifecycle;
mod probe;
pub use lifecycle::{DeleteOutcome, ImageInfo, MAX_CONFIG};
pub use probe::{PullAccess, PushCheck};

/// Every manifest media type a build can read.
pub const ACCEPTED_MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Where registry credentials come from.
#[derive(Debug, Clone)]
pub enum CredentialSource {
    /// Already loaded.
    Loaded(Credentials),
    /// These auth files, read (the first that exists per lookup wins) only when a registry
    /// is contacted — a build between OCI layouts never reads them.
    Files(Vec<PathBuf>),
}

impl Default for CredentialSource {
    fn default() -> Self {
        CredentialSource::Loaded(Credentials::default())
    }
}

impl From<Credentials> for CredentialSource {
    fn from(c: Credentials) -> Self {
        CredentialSource::Loaded(c)
    }
}

/// How to reach registries.
#[derive(Debug)]
pub struct RegistryOptions {
    /// Extra trusted CA certificates, PEM (one or several per entry).
    pub ca_pems: Vec<Vec<u8>>,
    /// Hosts (`host[:port]`) that may be reached over plain HTTP, besides loopback.
    pub insecure_hosts: Vec<String>,
    /// Credentials by registry and repository.
    pub credentials: CredentialSource,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Upload blobs in one PUT instead of a PATCH and a closing PUT.
    pub monolithic_push: bool,
    /// Blobs of at most this many bytes are uploaded in one PUT even without
    /// `monolithic_push` (default [`MONOLITHIC_MAX`]; 0: every blob in a PATCH first).
    pub monolithic_max: u64,
    /// Connect and request timeouts, and the total deadline.
    pub timeouts: Timeouts,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            ca_pems: Vec::new(),
            insecure_hosts: Vec::new(),
            credentials: CredentialSource::default(),
            retry: RetryPolicy::default(),
            monolithic_push: false,
            monolithic_max: MONOLITHIC_MAX,
            timeouts: Timeouts::default(),
        }
    }
}

/// The largest blob uploaded in the `PUT` that closes its session, saving the `PATCH`
/// round trip (every registry takes a monolithic `PUT`; larger blobs are streamed in a
/// `PATCH` first, as the docker client does, unless [`RegistryOptions::monolithic_push`]).
pub const MONOLITHIC_MAX: u64 = 4 << 20;

/// What an operation found missing when a registry answered "not found": it decides the
/// reason of [`RegistryError::NotFound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The manifest a reference names (its tag or digest, or its repository), read:
    /// `ImageNotFound`.
    Image,
    /// A blob of an image, read: `BlobNotFound`.
    Blob,
    /// The repository an image is pushed to (or its upload session): `RepositoryNotFound`.
    Repository,
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
        /// Whether there were credentials for the image (then they were refused, or do
        /// not allow the operation: `AuthDenied`), or none (`AuthRequired`).
        had_credentials: bool,
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
        /// What is missing.
        missing: Missing,
    },
    /// Any other failure, after the retries allowed.
    #[error("{op} {image}: failed after {attempts} attempt(s): {error}")]
    Request {
        /// The operation.
        op: String,
        /// The image.
        image: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        error: TransportError,
    },
    /// The registry served or stored other bytes than the digest we asked for or computed.
    #[error("{op} {image}: the registry gave digest {got}, expected {want}")]
    DigestMismatch {
        /// The operation.
        op: String,
        /// The image.
        image: String,
        /// What the registry gave.
        got: String,
        /// What we expected.
        want: Digest,
    },
    /// The registry served a manifest, index or image config that cannot be read as one.
    #[error("{op} {image}: {detail}")]
    Invalid {
        /// The operation.
        op: String,
        /// The image.
        image: String,
        /// What is wrong with what was served.
        detail: String,
    },
    /// A CA certificate could not be used.
    #[error("setting up TLS: {0}")]
    Tls(String),
    /// The HTTP client could not be built.
    #[error("setting up the registry client: {0}")]
    Setup(String),
    /// The auth files could not be read.
    #[error("reading registry credentials: {0}")]
    Credentials(AuthError),
}

impl From<AuthError> for RegistryError {
    fn from(e: AuthError) -> Self {
        RegistryError::Credentials(e)
    }
}

impl Classify for RegistryError {
    /// `AuthDenied` (credentials refused) or `AuthRequired` (none found), `ImageNotFound`,
    /// `BlobNotFound` or `RepositoryNotFound`, `DigestMismatch`, `InvalidManifest` (an
    /// unreadable manifest, index or image config), `InvalidCACertificate`,
    /// `RegistryClientSetupFailed`; a failed request has its last failure's reason (see
    /// [`TransportError`]'s), and unreadable credentials their [`AuthError`]'s.
    fn reason(&self) -> &'static str {
        match self {
            RegistryError::Unauthorized {
                had_credentials: true,
                ..
            } => "AuthDenied",
            RegistryError::Unauthorized { .. } => "AuthRequired",
            RegistryError::NotFound { missing, .. } => match missing {
                Missing::Image => "ImageNotFound",
                Missing::Blob => "BlobNotFound",
                Missing::Repository => "RepositoryNotFound",
            },
            RegistryError::Request { error, .. } => error.reason(),
            RegistryError::DigestMismatch { .. } => "DigestMismatch",
            RegistryError::Invalid { .. } => "InvalidManifest",
            RegistryError::Tls(_) => "InvalidCACertificate",
            RegistryError::Setup(_) => "RegistryClientSetupFailed",
            RegistryError::Credentials(e) => e.reason(),
        }
    }

    /// A failed request is transient when its last failure is (the retries ran out, or the
    /// deadline passed); unreadable credentials as their I/O error says; refusals, missing
    /// objects, wrong digests, unreadable manifests and a bad setup are permanent.
    fn retry(&self) -> Retry {
        match self {
            RegistryError::Request { error, .. } => error.retry(),
            RegistryError::Credentials(e) => e.retry(),
            RegistryError::Unauthorized { .. }
            | RegistryError::NotFound { .. }
            | RegistryError::DigestMismatch { .. }
            | RegistryError::Invalid { .. }
            | RegistryError::Tls(_)
            | RegistryError::Setup(_) => Retry::Permanent,
        }
    }
}

/// A registry client: a cheap handle (clone it) over one connection pool, the schemes
/// registries were found to speak, and tokens cached per registry, credential and scope —
/// made once and shared by every build of a process (a controller's reconcilers, the CLI's
/// one build). [`Registry::for_operation`] gives a handle whose total deadline starts now.
#[derive(Clone)]
pub struct Registry {
    shared: std::sync::Arc<Shared>,
    /// When the operation this handle serves must be over ([`Timeouts::total`]).
    deadline: Option<Instant>,
}

/// What every handle of one client shares.
struct Shared {
    http: reqwest::Client,
    insecure_hosts: Vec<String>,
    /// The scheme each host that may use plain HTTP answered on, once probed.
    schemes: std::sync::Mutex<std::collections::HashMap<String, Scheme>>,
    credentials: Credentials,
    retry: RetryPolicy,
    monolithic_push: bool,
    monolithic_max: u64,
    timeouts: Timeouts,
    auth: std::sync::Mutex<AuthCache>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("insecure_hosts", &self.shared.insecure_hosts)
            .field("retry", &self.shared.retry)
            .field("timeouts", &self.shared.timeouts)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// An `Authorization` header value, kept out of `Debug` output.
struct AuthHeader(String);

/// The scopes of a request, as the token service spells them.
fn pull(r: &RegistryRef) -> String {
    format!("repository:{}:pull", r.repository())
}
fn push(r: &RegistryRef) -> String {
    format!("repository:{}:pull,push", r.repository())
}

impl Registry {
    /// A client. Credentials from auth files are read now (blocking file reads: call it at
    /// start-up or on a blocking thread); which scheme a registry speaks is found on first
    /// use (see [`Registry::scheme`]). Its total deadline, if any, starts now.
    pub fn new(opts: RegistryOptions) -> Result<Registry, RegistryError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(opts.timeouts.connect)
            .read_timeout(opts.timeouts.request)
            .user_agent(concat!("machineos/", env!("CARGO_PKG_VERSION")));
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
            certs.extend(found);
        }
        if !certs.is_empty() {
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder
            .build()
            .map_err(|e| RegistryError::Setup(e.to_string()))?;
        let credentials = match opts.credentials {
            CredentialSource::Loaded(c) => c,
            CredentialSource::Files(files) => Credentials::load(&files)?,
        };
        Ok(Registry {
            shared: std::sync::Arc::new(Shared {
                http,
                insecure_hosts: opts.insecure_hosts,
                schemes: std::sync::Mutex::new(std::collections::HashMap::new()),
                credentials,
                retry: opts.retry,
                monolithic_push: opts.monolithic_push,
                monolithic_max: opts.monolithic_max,
                timeouts: opts.timeouts,
                auth: std::sync::Mutex::new(AuthCache::default()),
            }),
            deadline: opts.timeouts.total.map(|t| Instant::now() + t),
        })
    }

    /// [`Registry::new`] with the auth files read on a blocking thread, and the scheme of
    /// each of `hosts` found now.
    pub async fn connect(opts: RegistryOptions, hosts: &[&str]) -> Result<Registry, RegistryError> {
        let registry = tokio::task::spawn_blocking(move || Registry::new(opts))
            .await
            .map_err(|e| RegistryError::Setup(format!("reading credentials: {e}")))??;
        for host in hosts {
            registry.scheme(host).await;
        }
        Ok(registry)
    }

    /// A handle on the same client whose total deadline ([`Timeouts::total`]) starts now:
    /// one per build.
    pub fn for_operation(&self) -> Registry {
        Registry {
            shared: self.shared.clone(),
            deadline: self.shared.timeouts.total.map(|t| Instant::now() + t),
        }
    }

    /// The scheme `host` is spoken to on: HTTPS, or — for a host that may use plain HTTP
    /// (loopback, or named in `insecure_hosts`) and does not speak TLS — plain HTTP, probed
    /// once — a plain `GET /v2/`, which a TLS port refuses — and remembered.
    pub async fn scheme(&self, host: &str) -> Scheme {
        if !may_use_plain_http(host, &self.shared.insecure_hosts) {
            return Scheme::Https;
        }
        if let Some(s) = self.schemes_map().get(host) {
            return *s;
        }
        let found = crate::scheme::probe(host).await;
        *self.schemes_map().entry(host.to_string()).or_insert(found)
    }

    fn schemes_map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Scheme>> {
        // Plain inserts: a panic while holding it leaves it consistent.
        self.shared
            .schemes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `scheme://host/v2/repository/` for `r` (Docker Hub's API host for `docker.io`).
    async fn repo_url(&self, r: &RegistryRef, rest: &str) -> Result<Url, TransportError> {
        let registry = r.registry();
        let scheme = match self.scheme(registry).await {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let host = if registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            registry
        };
        Url::parse(&format!("{scheme}://{host}/v2/{}/{rest}", r.repository()))
            .map_err(|e| TransportError::Protocol(format!("building a URL for {r}: {e}")))
    }

    fn credential(&self, r: &RegistryRef) -> Option<&Credential> {
        self.shared.credentials.lookup(r.registry(), r.repository())
    }

    fn auth_cache(&self) -> std::sync::MutexGuard<'_, AuthCache> {
        // A panic while holding it cannot leave the cache inconsistent (plain inserts).
        self.shared
            .auth
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `Authorization` to send to `r`'s registry for `scopes`, as far as its challenge is
    /// known: the credential (Basic), or a token (Bearer, fetched when not cached).
    async fn authorization(
        &self,
        r: &RegistryRef,
        scopes: &[String],
    ) -> Result<Option<AuthHeader>, TransportError> {
        let registry = r.registry();
        let cred = self.credential(r);
        let challenge = self.auth_cache().challenge(registry).cloned();
        match challenge {
            None => Ok(None),
            Some(Challenge::Basic) => Ok(cred.map(|c| {
                use base64::Engine;
                let raw = format!("{}:{}", c.username, c.password.expose());
                AuthHeader(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(raw)
                ))
            })),
            Some(Challenge::Bearer { realm, service }) => {
                let key = token_key(registry, cred, scopes);
                if let Some(t) = self.auth_cache().token(&key) {
                    return Ok(Some(AuthHeader(format!("Bearer {t}"))));
                }
                let (token, ttl) = self
                    .fetch_token(&realm, service.as_deref(), cred, scopes)
                    .await?;
                self.auth_cache().set_token(key, token.clone(), ttl);
                Ok(Some(AuthHeader(format!("Bearer {token}"))))
            }
        }
    }

    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        cred: Option<&Credential>,
        scopes: &[String],
    ) -> Result<(String, std::time::Duration), TransportError> {
        let mut url = Url::parse(realm)
            .map_err(|e| TransportError::Protocol(format!("token realm {realm:?}: {e}")))?;
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = service {
                q.append_pair("service", s);
            }
            for s in scopes {
                q.append_pair("scope", s);
            }
        }
        let mut req = self.shared.http.get(url);
        if let Some(c) = cred {
            req = req.basic_auth(&c.username, Some(c.password.expose()));
        }
        let resp = send(req, self.shared.timeouts.request).await?;
        if !resp.status().is_success() {
            return Err(status_error(resp, self.shared.timeouts.request).await);
        }
        let body = read_capped(
            resp,
            MAX_TOKEN_RESPONSE,
            "token service answer",
            self.shared.timeouts.request,
        )
        .await?;
        serde_json::from_slice::<crate::auth::TokenAnswer>(&body)
            .ok()
            .and_then(crate::auth::TokenAnswer::token)
            .ok_or_else(|| {
                TransportError::Protocol(format!("the token service at {realm} gave no token"))
            })
    }

    /// Sends the request `make` builds (once, or twice after a `401` that names a scheme we
    /// can answer), authorised for `scopes` of `r`'s registry.
    async fn send_authed(
        &self,
        r: &RegistryRef,
        scopes: &[String],
        make: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, TransportError> {
        let with = |auth: &Option<AuthHeader>| match auth {
            Some(AuthHeader(v)) => make().header(AUTHORIZATION, v),
            None => make(),
        };
        let auth = self.authorization(r, scopes).await?;
        let resp = send(with(&auth), self.shared.timeouts.request).await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let Some(challenge) = resp
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge)
        else {
            return Ok(resp);
        };
        let registry = r.registry();
        let known = self.auth_cache().challenge(registry) == Some(&challenge);
        if known && auth.is_some() && challenge == Challenge::Basic {
            // The credential itself was refused.
            return Ok(resp);
        }
        {
            let mut cache = self.auth_cache();
            cache.set_challenge(registry, challenge);
            cache.drop_token(&token_key(registry, self.credential(r), scopes));
        }
        let Some(auth) = self.authorization(r, scopes).await? else {
            return Ok(resp);
        };
        send(with(&Some(auth)), self.shared.timeouts.request).await
    }

    /// Runs `op` with retries of transient failures, under the total deadline.
    async fn run<T, F, Fut>(&self, what: &str, op: F) -> Result<T, (TransportError, u32)>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, TransportError>>,
    {
        let attempts = with_retry(&self.shared.retry, what, op);
        match (self.deadline, self.shared.timeouts.total) {
            (Some(deadline), Some(total)) => tokio::time::timeout_at(deadline, attempts)
                .await
                .unwrap_or(Err((TransportError::Deadline(total), 1))),
            _ => attempts.await,
        }
    }

    /// The error an operation `op` on `r` ends with: refusals and missing objects (a
    /// `missing` one) by name, anything else with the last failure and the attempts made.
    fn classify(
        &self,
        missing: Missing,
        op: &str,
        r: &RegistryRef,
        (err, attempts): (TransportError, u32),
    ) -> RegistryError {
        let image = r.to_string();
        let denied = matches!(err.status(), Some(401 | 403))
            || matches!(err.code(), Some("UNAUTHORIZED" | "DENIED"));
        if denied {
            let had_credentials = self.credential(r).is_some();
            let hint = if had_credentials {
                format!(
                    "the credentials for {} were sent and refused, or its token service failed (credentials from {})",
                    r.registry(),
                    self.shared.credentials.describe_sources()
                )
            } else {
                format!(
                    "no credentials for {} were found (looked in {})",
                    r.registry(),
                    self.shared.credentials.describe_sources()
                )
            };
            return RegistryError::Unauthorized {
                op: op.to_string(),
                image,
                registry: r.registry().to_string(),
                detail: err.to_string(),
                hint,
                had_credentials,
            };
        }
        let not_found = err.status() == Some(404)
            || matches!(
                err.code(),
                Some("MANIFEST_UNKNOWN" | "NAME_UNKNOWN" | "BLOB_UNKNOWN" | "NOT_FOUND")
            );
        if not_found {
            return RegistryError::NotFound {
                op: op.to_string(),
                image,
                detail: err.to_string(),
                missing,
            };
        }
        RegistryError::Request {
            op: op.to_string(),
            image,
            attempts,
            error: err,
        }
    }

    /// A request whose answer must be a success; the answer.
    async fn expect_success(
        &self,
        r: &RegistryRef,
        scopes: &[String],
        make: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, TransportError> {
        let resp = self.send_authed(r, scopes, make).await?;
        if resp.status().is_success() {
            Ok(resp)
        } else {
            Err(status_error(resp, self.shared.timeouts.request).await)
        }
    }

    /// A manifest request to `url`, accepting every manifest type machineos reads.
    fn manifest_request(&self, method: Method, url: &Url) -> reqwest::RequestBuilder {
        self.shared
            .http
            .request(method, url.clone())
            .header(ACCEPT, ACCEPTED_MANIFEST_TYPES.join(", "))
    }

    /// Checks that `body` is `want` (in `want`'s algorithm).
    fn check_digest(
        op: &str,
        r: &RegistryRef,
        want: &Digest,
        body: &[u8],
    ) -> Result<(), RegistryError> {
        let got = want.same_algorithm_of(body);
        if &got != want {
            return Err(RegistryError::DigestMismatch {
                op: op.to_string(),
                image: r.to_string(),
                got: got.to_string(),
                want: want.clone(),
            });
        }
        Ok(())
    }

    /// The manifest `r` names (by digest when it has one, else by tag), with its digest, at
    /// most [`MAX_MANIFEST`] bytes. A reference with a digest is checked against the bytes.
    pub async fn manifest(&self, r: &RegistryRef) -> Result<(Vec<u8>, Digest), RegistryError> {
        let op = "fetching manifest";
        let reference = match (r.digest(), r.tag()) {
            (Some(d), _) => d.to_string(),
            (None, t) => t.unwrap_or("latest").to_string(),
        };
        let url = self
            .repo_url(r, &format!("manifests/{reference}"))
            .await
            .map_err(|e| self.classify(Missing::Image, op, r, (e, 1)))?;
        let scopes = [pull(r)];
        let body = self
            .run(op, || async {
                let make = || self.manifest_request(Method::GET, &url);
                let resp = self.expect_success(r, &scopes, &make).await?;
                read_capped(resp, MAX_MANIFEST, "manifest", self.shared.timeouts.request).await
            })
            .await
            .map_err(|e| self.classify(Missing::Image, op, r, e))?;
        let digest = match r.digest() {
            Some(d) => {
                Self::check_digest(op, r, d, &body)?;
                d.clone()
            }
            None => Digest::sha256(&body),
        };
        Ok((body.to_vec(), digest))
    }

    /// `GET` of blob `digest` of `r`, retried as a whole with `read` applied to the
    /// successful response (so a read that breaks off is retried too).
    async fn get_blob<T, F, Fut>(
        &self,
        r: &RegistryRef,
        digest: &Digest,
        op: &str,
        read: F,
    ) -> Result<T, RegistryError>
    where
        F: Fn(reqwest::Response) -> Fut,
        Fut: std::future::Future<Output = Result<T, TransportError>>,
    {
        let url = self
            .repo_url(r, &format!("blobs/{digest}"))
            .await
            .map_err(|e| self.classify(Missing::Blob, op, r, (e, 1)))?;
        let scopes = [pull(r)];
        self.run(op, || async {
            let make = || self.shared.http.get(url.clone());
            let resp = self.expect_success(r, &scopes, &make).await?;
            read(resp).await
        })
        .await
        .map_err(|e| self.classify(Missing::Blob, op, r, e))
    }

    /// A small blob (an image config) read whole, at most `max` bytes, and checked against
    /// its digest.
    pub async fn blob(
        &self,
        r: &RegistryRef,
        digest: &Digest,
        max: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let op = format!("fetching blob {digest} of");
        let body = self
            .get_blob(r, digest, &op, |resp| {
                read_capped(resp, max, "blob", self.shared.timeouts.request)
            })
            .await?;
        Self::check_digest(&op, r, digest, &body)?;
        Ok(body.to_vec())
    }

    /// A blob as a stream of bytes; the stream fails at its end (or once too long) if the
    /// bytes are not `digest` (in its algorithm) and, when given, `size` bytes. Opening is
    /// retried; a failure mid-stream is the caller's to retry.
    pub async fn blob_stream(
        &self,
        r: &RegistryRef,
        digest: &Digest,
        size: Option<u64>,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, RegistryError> {
        let op = format!("reading blob {digest} of");
        let resp = self
            .get_blob(r, digest, &op, |resp| async { Ok(resp) })
            .await?;
        if let (Some(want), Some(len)) = (size, resp.content_length())
            && want != len
        {
            return Err(self.classify(
                Missing::Blob,
                &op,
                r,
                (
                    TransportError::Protocol(format!(
                        "the registry sends {len} bytes, the descriptor says {want}"
                    )),
                    1,
                ),
            ));
        }
        let stream =
            futures_util::TryStreamExt::map_err(resp.bytes_stream(), std::io::Error::other);
        Ok(verified(Box::pin(stream), digest.clone(), size))
    }

    /// Whether the repository of `r` already has the blob.
    pub async fn has_blob(&self, r: &RegistryRef, digest: &Digest) -> Result<bool, RegistryError> {
        let op = format!("checking blob {digest} in");
        let url = self
            .repo_url(r, &format!("blobs/{digest}"))
            .await
            .map_err(|e| self.classify(Missing::Blob, &op, r, (e, 1)))?;
        let scopes = [pull(r)];
        self.run(&op, || async {
            let make = || self.shared.http.head(url.clone());
            let resp = self.send_authed(r, &scopes, &make).await?;
            match resp.status() {
                s if s.is_success() => Ok(true),
                StatusCode::NOT_FOUND => Ok(false),
                _ => Err(status_error(resp, self.shared.timeouts.request).await),
            }
        })
        .await
        .map_err(|e| self.classify(Missing::Blob, &op, r, e))
    }

    /// Asks the registry to mount a blob of `source` into the repository of `target`.
    /// `Ok(false)` when the registry declined, so the caller copies the blob: it answered
    /// with an upload session (202), or refused the mount itself (401/403/404). Only
    /// transient failures that outlast the retries are errors.
    pub async fn mount(
        &self,
        target: &RegistryRef,
        source: &RegistryRef,
        digest: &Digest,
    ) -> Result<bool, RegistryError> {
        if target.registry() != source.registry() {
            return Ok(false);
        }
        let op = format!("mounting blob {digest} into");
        let mut url = self
            .repo_url(target, "blobs/uploads/")
            .await
            .map_err(|e| self.classify(Missing::Repository, &op, target, (e, 1)))?;
        url.query_pairs_mut()
            .append_pair("mount", digest.as_str())
            .append_pair("from", source.repository());
        // One token for both repositories: pushing to the target, pulling from the source.
        let scopes = [push(target), pull(source)];
        let result = self
            .run(&op, || async {
                let make = || self.shared.http.post(url.clone()).header(CONTENT_LENGTH, 0);
                let resp = self.send_authed(target, &scopes, &make).await?;
                match resp.status() {
                    StatusCode::CREATED => Ok(true),
                    s if s.is_success() => Ok(false),
                    _ => Err(status_error(resp, self.shared.timeouts.request).await),
                }
            })
            .await;
        match result {
            Ok(mounted) => Ok(mounted),
            Err((e, attempts)) if e.is_transient() || matches!(e, TransportError::Deadline(_)) => {
                Err(self.classify(Missing::Repository, &op, target, (e, attempts)))
            }
            Err((e, _)) => {
                tracing::debug!("mounting blob {digest} into {target} declined: {e}");
                Ok(false)
            }
        }
    }

    /// Uploads a blob held in memory (the new layer, the config). Skipped when present
    /// (see [`Registry::push_blob_if_absent`]).
    pub async fn push_blob(
        &self,
        target: &RegistryRef,
        data: Bytes,
        digest: &Digest,
    ) -> Result<(), RegistryError> {
        let size = data.len() as u64;
        self.push_blob_if_absent(target, digest, size, || {
            let data = data.clone();
            async move {
                let s: BoxStream<'static, std::io::Result<Bytes>> =
                    Box::pin(futures_util::stream::once(async move { Ok(data) }));
                Ok(s)
            }
        })
        .await
        .map(|_| ())
    }

    /// Uploads a blob unless the repository of `target` has it; whether it was uploaded.
    /// The existence check and the opening of the upload session go out together, so an
    /// absent blob costs the round trips of the upload alone; a present one costs a
    /// cancelled session (`DELETE`, whose failure is only logged).
    pub async fn push_blob_if_absent<F, Fut>(
        &self,
        target: &RegistryRef,
        digest: &Digest,
        size: u64,
        open: F,
    ) -> Result<bool, RegistryError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<
                Output = std::io::Result<BoxStream<'static, std::io::Result<Bytes>>>,
            >,
    {
        let (present, session) =
            futures_util::join!(self.has_blob(target, digest), self.start_upload(target));
        if present? {
            if let Ok(session) = session {
                self.cancel_upload(target, session).await;
            }
            return Ok(false);
        }
        // A session that could not be opened is opened again by the upload, whose own
        // retries and error then say why.
        self.upload(target, digest, size, open, session.ok())
            .await?;
        Ok(true)
    }

    /// Uploads a blob of `size` bytes from a stream that `open` produces (once per attempt),
    /// without holding it in memory. A failure to open the source counts as a transient I/O
    /// failure. A blob of at most [`RegistryOptions::monolithic_max`] bytes (or any, with
    /// [`RegistryOptions::monolithic_push`]) goes up in the `PUT` that closes the session;
    /// a larger one in one `PATCH` before it.
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
        self.upload(target, digest, size, open, None).await
    }

    /// Opens an upload session in the repository of `target` (a `POST`, retried); its URL.
    async fn start_upload(&self, target: &RegistryRef) -> Result<Url, RegistryError> {
        let op = "starting an upload to";
        let start = self
            .repo_url(target, "blobs/uploads/")
            .await
            .map_err(|e| self.classify(Missing::Repository, op, target, (e, 1)))?;
        let scopes = [push(target)];
        self.run(op, || self.open_session(target, &scopes, &start))
            .await
            .map_err(|e| self.classify(Missing::Repository, op, target, e))
    }

    async fn open_session(
        &self,
        target: &RegistryRef,
        scopes: &[String],
        start: &Url,
    ) -> Result<Url, TransportError> {
        let make = || {
            self.shared
                .http
                .post(start.clone())
                .header(CONTENT_LENGTH, 0)
        };
        let resp = self.expect_success(target, scopes, &make).await?;
        location(&resp, start)
    }

    /// Cancels an upload session; a failure is logged, never an error (the registry
    /// expires abandoned sessions).
    async fn cancel_upload(&self, target: &RegistryRef, session: Url) {
        let scopes = [push(target)];
        let make = || self.shared.http.request(Method::DELETE, session.clone());
        match self.send_authed(target, &scopes, &make).await {
            Ok(r) if r.status().is_success() || r.status() == StatusCode::NOT_FOUND => {}
            Ok(r) => tracing::debug!("cancelling upload {session}: {}", r.status()),
            Err(e) => tracing::debug!("cancelling upload {session}: {e}"),
        }
    }

    async fn upload<F, Fut>(
        &self,
        target: &RegistryRef,
        digest: &Digest,
        size: u64,
        open: F,
        opened: Option<Url>,
    ) -> Result<(), RegistryError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<
                Output = std::io::Result<BoxStream<'static, std::io::Result<Bytes>>>,
            >,
    {
        let op = format!("uploading blob {digest} to");
        let start = self
            .repo_url(target, "blobs/uploads/")
            .await
            .map_err(|e| self.classify(Missing::Repository, &op, target, (e, 1)))?;
        let scopes = [push(target)];
        let monolithic = self.shared.monolithic_push || size <= self.shared.monolithic_max;
        // The session opened beforehand serves the first attempt only.
        let opened = std::sync::Mutex::new(opened);
        self.run(&op, || async {
            let first = opened.lock().ok().and_then(|mut o| o.take());
            let session = match first {
                Some(session) => session,
                None => self.open_session(target, &scopes, &start).await?,
            };
            let session = if monolithic {
                session
            } else {
                // The body in one PATCH; then a PUT with the digest closes the upload.
                let stream = open().await.map_err(TransportError::Io)?;
                let body = reqwest::Body::wrap_stream(stream);
                let patch = self
                    .shared
                    .http
                    .request(Method::PATCH, session.clone())
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .header(CONTENT_LENGTH, size)
                    .body(body);
                let resp = self.with_session_auth(target, &scopes, patch).await?;
                let resp = send(resp, self.shared.timeouts.request).await?;
                if !resp.status().is_success() {
                    return Err(status_error(resp, self.shared.timeouts.request).await);
                }
                location(&resp, &session)?
            };
            let mut done = session.clone();
            done.query_pairs_mut()
                .append_pair("digest", digest.as_str());
            let put = self.shared.http.put(done);
            let put = if monolithic {
                let stream = open().await.map_err(TransportError::Io)?;
                put.header(CONTENT_TYPE, "application/octet-stream")
                    .header(CONTENT_LENGTH, size)
                    .body(reqwest::Body::wrap_stream(stream))
            } else {
                put.header(CONTENT_LENGTH, 0)
            };
            let put = self.with_session_auth(target, &scopes, put).await?;
            let resp = send(put, self.shared.timeouts.request).await?;
            if resp.status() != StatusCode::CREATED && !resp.status().is_success() {
                return Err(status_error(resp, self.shared.timeouts.request).await);
            }
            Ok(())
        })
        .await
        .map_err(|e| self.classify(Missing::Repository, &op, target, e))
    }

    /// `req` with the authorization already established for `scopes` (an upload session's
    /// requests carry a body that cannot be sent twice, so they never answer a challenge).
    async fn with_session_auth(
        &self,
        r: &RegistryRef,
        scopes: &[String],
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, TransportError> {
        Ok(match self.authorization(r, scopes).await? {
            Some(AuthHeader(v)) => req.header(AUTHORIZATION, v),
            None => req,
        })
    }

    /// The digest the repository of `r` serves for the manifest `reference`, if it has it.
    async fn manifest_digest(
        &self,
        r: &RegistryRef,
        reference: &Digest,
    ) -> Result<Option<String>, TransportError> {
        let url = self.repo_url(r, &format!("manifests/{reference}")).await?;
        let scopes = [pull(r)];
        let make = || self.manifest_request(Method::HEAD, &url);
        let resp = self.send_authed(r, &scopes, &make).await?;
        match resp.status() {
            StatusCode::NOT_FOUND => return Ok(None),
            s if !s.is_success() => {
                return Err(status_error(resp, self.shared.timeouts.request).await);
            }
            _ => {}
        }
        if let Some(d) = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
        {
            return Ok(Some(d.to_string()));
        }
        // No digest header: hash what a GET serves.
        let make = || self.manifest_request(Method::GET, &url);
        let resp = self.expect_success(r, &scopes, &make).await?;
        let body =
            read_capped(resp, MAX_MANIFEST, "manifest", self.shared.timeouts.request).await?;
        Ok(Some(reference.same_algorithm_of(&body).to_string()))
    }

    /// Whether the repository of `r` has the manifest `digest`.
    pub async fn has_manifest(
        &self,
        r: &RegistryRef,
        digest: &Digest,
    ) -> Result<bool, RegistryError> {
        let op = format!("checking manifest {digest} in");
        self.run(&op, || self.manifest_digest(r, digest))
            .await
            .map(|got| got.as_deref() == Some(digest.as_str()))
            .map_err(|e| self.classify(Missing::Image, &op, r, e))
    }

    /// Puts a manifest into the repository of `target` by digest, checks that the registry
    /// stored it under the digest we computed (from its answer when that names the digest,
    /// else by reading back what it serves), and only then puts the same bytes under `tag`
    /// (if any), so a mismatch never moves a tag.
    pub async fn push_manifest(
        &self,
        target: &RegistryRef,
        body: &[u8],
        media_type: &str,
        tag: Option<&str>,
    ) -> Result<Digest, RegistryError> {
        let op = "pushing manifest";
        let want = Digest::sha256(body);
        let body = Bytes::copy_from_slice(body);
        let scopes = [push(target)];
        let scopes = &scopes;
        let put = |reference: String| {
            let body = body.clone();
            async move {
                let url = self
                    .repo_url(target, &format!("manifests/{reference}"))
                    .await
                    .map_err(|e| self.classify(Missing::Repository, op, target, (e, 1)))?;
                self.run(op, || async {
                    let make = || {
                        self.shared
                            .http
                            .put(url.clone())
                            .header(CONTENT_TYPE, media_type)
                            .body(body.clone())
                    };
                    let resp = self.expect_success(target, scopes, &make).await?;
                    let named = resp
                        .headers()
                        .get(LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let digest = resp
                        .headers()
                        .get("docker-content-digest")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    Ok((named, digest))
                })
                .await
                .map_err(|e| self.classify(Missing::Repository, op, target, e))
            }
        };
        let check = |(location, digest): (Option<String>, Option<String>)| {
            let from_location = location
                .as_deref()
                .and_then(|l| l.rsplit('/').next())
                .filter(|s| s.contains(':'))
                .map(str::to_string);
            let mut named = false;
            for got in [from_location, digest].into_iter().flatten() {
                if got != want.as_str() {
                    return Err(RegistryError::DigestMismatch {
                        op: op.into(),
                        image: target.to_string(),
                        got,
                        want: want.clone(),
                    });
                }
                named = true;
            }
            Ok(named)
        };
        // The registry's answer to the PUT by digest proves the digest when it names it (in
        // `Docker-Content-Digest` or the `Location`); else what it serves is read back.
        if !check(put(want.to_string()).await?)? {
            let served = self
                .run(op, || self.manifest_digest(target, &want))
                .await
                .map_err(|e| {
                    self.classify(Missing::Image, "checking pushed manifest", target, e)
                })?;
            if served.as_deref() != Some(want.as_str()) {
                return Err(RegistryError::DigestMismatch {
                    op: "checking pushed manifest".into(),
                    image: target.to_string(),
                    got: served.unwrap_or_else(|| "nothing".into()),
                    want,
                });
            }
        }
        if let Some(tag) = tag {
            check(put(tag.to_string()).await?)?;
        }
        Ok(want)
    }
}

/// The cache key of a token: registry, which credential (by a hash, never in clear), scopes.
fn token_key(
    registry: &str,
    cred: Option<&Credential>,
    scopes: &[String],
) -> (String, String, String) {
    let who = cred.map_or_else(String::new, |c| {
        format!(
            "{}\n{}",
            c.username,
            Digest::sha256(c.password.expose().as_bytes())
        )
    });
    (registry.to_string(), who, scopes.join(" "))
}

/// The upload session URL a response names in `Location`, resolved against `base`.
fn location(resp: &reqwest::Response, base: &Url) -> Result<Url, TransportError> {
    let value = resp
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            TransportError::Protocol(format!(
                "the registry answered {} to an upload without a Location",
                resp.status()
            ))
        })?;
    base.join(value)
        .map_err(|e| TransportError::Protocol(format!("upload Location {value:?}: {e}")))
}
