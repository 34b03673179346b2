//! Preflight checks of a registry, before any build work: whether pulling an image needs
//! credentials at all ([`Registry::pull_access`], asked **without** the client's
//! credentials), whether the credentials given pull it ([`Registry::image_info`]), and
//! whether they may push to a repository ([`Registry::check_push`]: a blob upload is started
//! and cancelled, so nothing is written).
//!
//! Guarantees:
//! - "Anonymous pull works" is only said when the registry served the manifest to a request
//!   without credentials (a token service's anonymous token included, as every client asks
//!   for one); "authentication required" only on a 401/403 (or `UNAUTHORIZED`/`DENIED`).
//!   Anything else — not found, a server error, a timeout — is an error, never taken for an
//!   answer about auth.
//! - `check_push` leaves no upload behind when the registry let it start: the session is
//!   deleted (a registry that refuses the cancel is reported as a warning, not a failure:
//!   distribution expires unfinished uploads itself).

use machineos_image::RegistryRef;
use reqwest::{Method, StatusCode};

use super::{Missing, Registry, RegistryError, Shared};
use crate::auth::AuthCache;
use crate::http::{TransportError, status_error};

/// Whether an image can be pulled without credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullAccess {
    /// The registry served the manifest to an anonymous request.
    Anonymous,
    /// The registry asked for credentials (the refusal's detail).
    AuthRequired(String),
}

/// What [`Registry::check_push`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushCheck {
    /// Cancelling the upload session failed (the detail); the check itself passed.
    pub cancel_warning: Option<String>,
}

impl Registry {
    /// The same client (HTTP connections, TLS, schemes, timeouts) without any credentials.
    pub fn anonymous(&self) -> Registry {
        let s = &self.shared;
        Registry {
            shared: std::sync::Arc::new(Shared {
                http: s.http.clone(),
                insecure_hosts: s.insecure_hosts.clone(),
                schemes: std::sync::Mutex::new(self.schemes_map().clone()),
                credentials: machineos_image::auth::Credentials::default(),
                retry: s.retry,
                monolithic_push: s.monolithic_push,
                monolithic_max: s.monolithic_max,
                timeouts: s.timeouts,
                auth: std::sync::Mutex::new(AuthCache::default()),
            }),
            deadline: self.deadline,
        }
    }

    /// Whether `r` can be pulled without credentials (this client's are not sent).
    pub async fn pull_access(&self, r: &RegistryRef) -> Result<PullAccess, RegistryError> {
        match self.anonymous().manifest(r).await {
            Ok(_) => Ok(PullAccess::Anonymous),
            Err(RegistryError::Unauthorized { detail, .. }) => Ok(PullAccess::AuthRequired(detail)),
            Err(e) => Err(e),
        }
    }

    /// Whether this client's credentials may push to `r`'s repository: a blob upload is
    /// started (`POST /v2/<name>/blobs/uploads/`, which needs push permission) and then
    /// cancelled (`DELETE` of its session).
    pub async fn check_push(&self, r: &RegistryRef) -> Result<PushCheck, RegistryError> {
        let op = "checking push permission";
        let scopes = [super::push(r)];
        let started = self
            .run(op, || async {
                let url = self.repo_url(r, "blobs/uploads/").await?;
                let resp = self
                    .send_authed(r, &scopes, &|| {
                        self.shared.http.request(Method::POST, url.clone())
                    })
                    .await?;
                if resp.status() != StatusCode::ACCEPTED && !resp.status().is_success() {
                    return Err(status_error(resp, self.shared.timeouts.request).await);
                }
                let location = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        TransportError::Protocol(
                            "the upload was accepted without a Location".into(),
                        )
                    })?;
                url.join(&location).map_err(|e| {
                    TransportError::Protocol(format!("upload Location {location:?}: {e}"))
                })
            })
            .await
            .map_err(|e| self.classify(Missing::Repository, op, r, e))?;
        let cancel = self
            .send_authed(r, &scopes, &|| {
                self.shared.http.request(Method::DELETE, started.clone())
            })
            .await;
        let cancel_warning = match cancel {
            Ok(resp) if resp.status().is_success() || resp.status() == StatusCode::NOT_FOUND => {
                None
            }
            Ok(resp) => Some(format!(
                "cancelling the upload {started}: {}",
                status_error(resp, self.shared.timeouts.request).await
            )),
            Err(e) => Some(format!("cancelling the upload {started}: {e}")),
        };
        Ok(PushCheck { cancel_warning })
    }
}
