//! The controller's HTTP endpoints for Prometheus and the kubelet: `/metrics`, `/healthz`
//! and `/readyz`, on a small hyper 1 HTTP/1.1 server.
//!
//! Contract:
//! * `GET /metrics` → 200 with [`Metrics::encode`], content type
//!   [`crate::metrics::CONTENT_TYPE`] (OpenMetrics text 1.0.0).
//! * `GET /healthz` → 200 `ok` while the main loop is alive: it calls [`Health::beat`]
//!   regularly; with no beat for [`Health`]'s staleness (default 60 s) → 503 naming how long
//!   ago the last beat was, so the kubelet restarts a wedged process. Staleness is measured
//!   with [`tokio::time::Instant`] (tests can pause time).
//! * `GET /readyz` → 200 `ok` once the caches have synced ([`Health::set_ready`]), else 503
//!   with the reason. A **standby replica is ready**: it syncs its caches, serves metrics and
//!   can take over at once, so readiness never depends on leadership (the Deployment's two
//!   replicas are both Ready; only the Lease says which one acts).
//! * Other paths → 404; other methods on the three paths → 405 (`HEAD` is answered like
//!   `GET`, by hyper, without a body).
//! * [`serve`] binds the given address (port 0 allowed) and returns the bound address; the
//!   server stops accepting when the [`CancellationToken`] is cancelled, and open
//!   connections finish their current request and close.
//! * Plain HTTP, no authentication: the endpoints expose no secrets (metrics labels are pool
//!   names and reasons).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// The default staleness after which `/healthz` fails.
pub const DEFAULT_STALENESS: Duration = Duration::from_secs(60);

/// The reason `/readyz` gives before the first [`Health::set_ready`].
const NOT_SYNCED: &str = "caches not synced yet";

#[derive(Debug)]
struct State {
    last_beat: Instant,
    ready: Result<(), String>,
}

/// Liveness and readiness, set by the main loop and read by the endpoints (cheap to clone).
#[derive(Debug, Clone)]
pub struct Health {
    state: Arc<Mutex<State>>,
    staleness: Duration,
}

impl Default for Health {
    fn default() -> Self {
        Health::new(DEFAULT_STALENESS)
    }
}

impl Health {
    /// Alive now (as if it had just beaten), not ready; `/healthz` fails after `staleness`
    /// without a beat.
    pub fn new(staleness: Duration) -> Self {
        Health {
            state: Arc::new(Mutex::new(State {
                last_beat: Instant::now(),
                ready: Err(NOT_SYNCED.to_string()),
            })),
            staleness,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The main loop is alive now.
    pub fn beat(&self) {
        self.state().last_beat = Instant::now();
    }

    /// Ready (caches synced) or not (with a generic reason).
    pub fn set_ready(&self, ready: bool) {
        self.state().ready = if ready {
            Ok(())
        } else {
            Err(NOT_SYNCED.to_string())
        };
    }

    /// Not ready, for `reason` (shown by `/readyz`).
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        self.state().ready = Err(reason.into());
    }

    /// `Ok` if the last beat is younger than the staleness, else why not.
    pub fn alive(&self) -> Result<(), String> {
        let since = self.state().last_beat.elapsed();
        if since < self.staleness {
            Ok(())
        } else {
            Err(format!(
                "no heartbeat from the main loop for {:.1}s (limit {:.1}s)",
                since.as_secs_f64(),
                self.staleness.as_secs_f64()
            ))
        }
    }

    /// `Ok` if ready, else why not.
    pub fn ready(&self) -> Result<(), String> {
        self.state().ready.clone()
    }
}

/// Serves the endpoints on `addr` until `shutdown` is cancelled: the bound address and the
/// accept task (it ends once the listener is closed).
///
/// # Errors
/// Binding `addr` failed.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    health: Health,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "serving /metrics, /healthz and /readyz");
    let task = tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        continue;
                    }
                },
            };
            let (metrics, health, shutdown) = (metrics.clone(), health.clone(), shutdown.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let r = respond(&req, &metrics, &health);
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = shutdown.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
            });
        }
        tracing::info!(addr = %bound, "health and metrics server stopped");
    });
    Ok((bound, task))
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

const PLAIN: &str = "text/plain; charset=utf-8";

fn check(result: Result<(), String>) -> Response<Full<Bytes>> {
    match result {
        Ok(()) => text(StatusCode::OK, PLAIN, "ok\n".to_string()),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, format!("{why}\n")),
    }
}

fn respond(req: &Request<Incoming>, metrics: &Metrics, health: &Health) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
        return text(StatusCode::NOT_FOUND, PLAIN, format!("{path} not found\n"));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            format!("{} not allowed\n", req.method()),
        );
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match path {
        "/metrics" => text(
            StatusCode::OK,
            crate::metrics::CONTENT_TYPE,
            metrics.encode(),
        ),
        "/healthz" => check(health.alive()),
        _ => check(health.ready()),
    }
}
