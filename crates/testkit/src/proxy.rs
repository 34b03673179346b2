//! A fault-injecting HTTP/1 reverse proxy, so registry clients can be tested against the
//! failures real registries produce (error statuses, slow answers, connections reset
//! mid-upload) at exactly the request where they matter.

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};

use crate::registry::AUTH_REALM;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = BoxBody<Bytes, BoxError>;

/// How long a `Status` fault keeps reading (and discarding) the request body before it
/// answers, so the client has finished sending and reliably sees the status.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What a matching [`FaultRule`] does to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this status (200..=599) and an OCI-style JSON error body, without
    /// forwarding. The request body is read and discarded first (for at most 5 s). A 401
    /// carries `WWW-Authenticate: Basic realm="machineos-test"`.
    Status(u16),
    /// Read this many bytes of the request body (or all of it, if shorter), then close the
    /// TCP connection abruptly (RST) without answering: a connection reset mid-upload.
    ResetAfterBody(usize),
    /// Wait this long, then forward as usual.
    Delay(Duration),
}

/// Applies an action to the first `times` requests that match a method and a path substring.
///
/// Rules are checked in order; the first matching rule that has fired fewer than `times`
/// times fires (and counts); rules that are used up are skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    /// HTTP method to match (case-insensitive); `None` matches any.
    pub method: Option<String>,
    /// Substring of the path and query to match (e.g. `/blobs/uploads/`); `""` matches all.
    pub path_contains: String,
    /// What to do with a matching request.
    pub action: FaultAction,
    /// How many matching requests get the action.
    pub times: usize,
}

impl FaultRule {
    /// A rule for any method, firing once.
    pub fn new(path_contains: impl Into<String>, action: FaultAction) -> Self {
        FaultRule {
            method: None,
            path_contains: path_contains.into(),
            action,
            times: 1,
        }
    }

    /// Restricts the rule to one HTTP method (e.g. `"PATCH"`).
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// Sets how many matching requests get the action.
    pub fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }

    /// Whether a request with this method and path (with query) matches, ignoring `times`.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && path.contains(&self.path_contains)
    }

    fn validate(&self) -> Result<()> {
        if let FaultAction::Status(code) = self.action
            && !(200..=599).contains(&code)
        {
            bail!("fault rule status {code} is outside 200..=599");
        }
        Ok(())
    }
}

/// One request the proxy received, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// HTTP method, e.g. `PATCH`.
    pub method: String,
    /// Path with query, e.g. `/v2/os/blobs/uploads/?mount=...`.
    pub path: String,
    /// Status sent back to the client: injected, from upstream, or 502 when upstream was
    /// unreachable. `None` while in flight, and for connections that were reset.
    pub status: Option<u16>,
    /// Whether a fault rule fired for this request (including `Delay`).
    pub faulted: bool,
}

/// State shared between the proxy handle and its connection tasks.
struct Shared {
    upstream: SocketAddr,
    addr: SocketAddr,
    /// Rules with how often each has fired.
    rules: Mutex<Vec<(FaultRule, usize)>>,
    log: Mutex<Vec<SeenRequest>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn record(&self, request: SeenRequest) -> usize {
        let mut log = lock(&self.log);
        log.push(request);
        log.len() - 1
    }

    fn update(&self, index: usize, f: impl FnOnce(&mut SeenRequest)) {
        // The log may have been cleared meanwhile; then there is nothing to update.
        if let Some(entry) = lock(&self.log).get_mut(index) {
            f(entry);
        }
    }

    fn take_action(&self, method: &str, path: &str) -> Option<FaultAction> {
        let mut rules = lock(&self.rules);
        let (rule, fired) = rules
            .iter_mut()
            .find(|(rule, fired)| *fired < rule.times && rule.matches(method, path))?;
        *fired += 1;
        Some(rule.action.clone())
    }
}

/// A reverse proxy on `127.0.0.1:PORT` in front of a plain-HTTP registry, injecting faults
/// per [`FaultRule`] and logging every request.
///
/// It runs on its own tokio runtime on a background thread, so it works from synchronous
/// tests and from inside other runtimes; dropping it stops it. Requests are forwarded with
/// method, path and query, headers (including the client's `Host`, so the registry's
/// `Location` headers point at the proxy; absolute `Location`s naming the upstream are
/// rewritten too) and streamed bodies; hop-by-hop headers are dropped.
pub struct FaultProxy {
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.shared.addr)
            .field("upstream", &self.shared.upstream)
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `upstream` (plain HTTP).
    pub fn start(upstream: SocketAddr, rules: Vec<FaultRule>) -> Result<FaultProxy> {
        for rule in &rules {
            rule.validate()?;
        }
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .context("binding the fault proxy to 127.0.0.1:0")?;
        listener
            .set_nonblocking(true)
            .context("making the fault proxy listener non-blocking")?;
        let addr = listener
            .local_addr()
            .context("reading the fault proxy's address")?;
        let shared = Arc::new(Shared {
            upstream,
            addr,
            rules: Mutex::new(rules.into_iter().map(|rule| (rule, 0)).collect()),
            log: Mutex::new(Vec::new()),
        });

        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("fault-proxy-worker")
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = ready_tx
                            .send(Err(anyhow!(err).context("building the fault proxy runtime")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => {
                            let _ =
                                ready_tx
                                    .send(Err(anyhow!(err)
                                        .context("registering the fault proxy listener")));
                            return;
                        }
                    };
                    // Built here so its connection pool belongs to this runtime.
                    let client = match reqwest::Client::builder()
                        .no_proxy()
                        .redirect(reqwest::redirect::Policy::none())
                        .build()
                    {
                        Ok(client) => client,
                        Err(err) => {
                            let _ = ready_tx
                                .send(Err(anyhow!(err)
                                    .context("building the fault proxy's upstream client")));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    accept_loop(listener, thread_shared, client, shutdown_rx).await;
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .context("spawning the fault proxy thread")?;

        let started = ready_rx
            .recv()
            .unwrap_or_else(|_| Err(anyhow!("the fault proxy thread exited during startup")));
        if let Err(err) = started {
            let _ = thread.join();
            return Err(err);
        }
        Ok(FaultProxy {
            shared,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        })
    }

    /// `127.0.0.1:PORT`, the registry part of image references through the proxy.
    pub fn host(&self) -> String {
        self.shared.addr.to_string()
    }

    /// The socket address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// `127.0.0.1:PORT/{name}` through the proxy.
    pub fn reference(&self, name: &str) -> String {
        format!("{}/{name}", self.shared.addr)
    }

    /// The address requests are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// Replaces the rules (fire counts start at zero again).
    pub fn set_rules(&self, rules: Vec<FaultRule>) -> Result<()> {
        for rule in &rules {
            rule.validate()?;
        }
        *lock(&self.shared.rules) = rules.into_iter().map(|rule| (rule, 0)).collect();
        Ok(())
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.shared.log).clone()
    }

    /// Forgets the requests received so far.
    pub fn clear_requests(&self) {
        lock(&self.shared.log).clear();
    }

    /// How many requests with this method (case-insensitive; `""` for any) had a path
    /// (with query) containing `path_contains`.
    pub fn count(&self, method: &str, path_contains: &str) -> usize {
        lock(&self.shared.log)
            .iter()
            .filter(|r| {
                (method.is_empty() || r.method.eq_ignore_ascii_case(method))
                    && r.path.contains(path_contains)
            })
            .count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    client: reqwest::Client,
    mut shutdown: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(serve_connection(stream, Arc::clone(&shared), client.clone()));
                }
                // Transient (e.g. out of file descriptors): back off briefly and go on.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// Lets a request handler ask for its connection to be torn down with a TCP reset.
#[derive(Default)]
struct ResetSignal {
    requested: AtomicBool,
    notify: Notify,
}

/// A TCP stream that, when dropped after a reset was requested, sets `SO_LINGER` to zero so
/// closing it sends RST instead of FIN.
struct ResettableStream {
    inner: TcpStream,
    reset: Arc<ResetSignal>,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.requested.load(Ordering::SeqCst) {
            // Best effort: without it the close is a FIN, which clients see as an error too.
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>, client: reqwest::Client) {
    let _ = stream.set_nodelay(true);
    let reset = Arc::new(ResetSignal::default());
    let io = TokioIo::new(ResettableStream {
        inner: stream,
        reset: Arc::clone(&reset),
    });
    let service = {
        let reset = Arc::clone(&reset);
        hyper::service::service_fn(move |req| {
            handle(Arc::clone(&shared), client.clone(), Arc::clone(&reset), req)
        })
    };
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
    // Dropping the connection (second branch) drops the stream, which then resets.
    tokio::select! {
        _ = connection => {}
        _ = reset.notify.notified() => {}
    }
}

async fn handle(
    shared: Arc<Shared>,
    client: reqwest::Client,
    reset: Arc<ResetSignal>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let method = req.method().as_str().to_owned();
    let path = path_and_query(&req);
    let index = shared.record(SeenRequest {
        method: method.clone(),
        path: path.clone(),
        status: None,
        faulted: false,
    });
    let action = shared.take_action(&method, &path);
    if action.is_some() {
        shared.update(index, |r| r.faulted = true);
    }
    match action {
        Some(FaultAction::Status(code)) => {
            let _ =
                tokio::time::timeout(DRAIN_TIMEOUT, read_body(req.into_body(), usize::MAX)).await;
            let response = injected_status(code);
            shared.update(index, |r| r.status = Some(response.status().as_u16()));
            return Ok(response);
        }
        Some(FaultAction::ResetAfterBody(bytes)) => {
            read_body(req.into_body(), bytes).await;
            reset.requested.store(true, Ordering::SeqCst);
            reset.notify.notify_one();
            // The connection task drops this future together with the connection.
            let never: Infallible = std::future::pending().await;
            match never {}
        }
        Some(FaultAction::Delay(delay)) => tokio::time::sleep(delay).await,
        None => {}
    }
    let response = forward(&shared, &client, req).await;
    shared.update(index, |r| r.status = Some(response.status().as_u16()));
    Ok(response)
}

fn path_and_query<B>(req: &Request<B>) -> String {
    req.uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned())
}

/// Reads body frames until at least `limit` data bytes were seen, the body ends or fails.
async fn read_body(mut body: Incoming, limit: usize) {
    let mut seen = 0usize;
    while seen < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    seen = seen.saturating_add(data.len());
                }
            }
            Some(Err(_)) | None => break,
        }
    }
}

/// Headers that describe one connection rather than the message (RFC 9110 §7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// Points an absolute `Location` naming the upstream at the proxy instead.
fn rewrite_location(headers: &mut HeaderMap, upstream: SocketAddr, proxy: SocketAddr) {
    let Some(location) = headers.get(header::LOCATION).and_then(|v| v.to_str().ok()) else {
        return;
    };
    let upstream_prefix = format!("http://{upstream}");
    let Some(rest) = location.strip_prefix(&upstream_prefix) else {
        return;
    };
    if !(rest.is_empty() || rest.starts_with(['/', '?', '#'])) {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&format!("http://{proxy}{rest}")) {
        headers.insert(header::LOCATION, value);
    }
}

async fn forward(
    shared: &Shared,
    client: &reqwest::Client,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    let url = format!("http://{}{path}", shared.upstream);
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    let sent = client
        .request(parts.method, &url)
        .headers(headers)
        .body(reqwest::Body::wrap(body))
        .send()
        .await;
    match sent {
        Ok(upstream_response) => {
            let mut response = Response::<reqwest::Body>::from(upstream_response);
            strip_hop_by_hop(response.headers_mut());
            rewrite_location(response.headers_mut(), shared.upstream, shared.addr);
            response.map(|body| body.map_err(BoxError::from).boxed())
        }
        Err(err) => json_error(
            StatusCode::BAD_GATEWAY,
            "UNAVAILABLE",
            &format!(
                "fault proxy could not forward to {url}: {}",
                crate::registry::error_chain(&err)
            ),
        ),
    }
}

/// The response for a `FaultAction::Status`.
fn injected_status(code: u16) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (oci_code, message) = match code {
        401 => ("UNAUTHORIZED", "authentication required"),
        403 => ("DENIED", "requested access to the resource is denied"),
        404 => ("NAME_UNKNOWN", "repository name not known to registry"),
        405 => ("UNSUPPORTED", "the operation is unsupported"),
        429 => ("TOOMANYREQUESTS", "too many requests"),
        503 => ("UNAVAILABLE", "service unavailable"),
        _ => ("UNKNOWN", "unknown error"),
    };
    let mut response = json_error(
        status,
        oci_code,
        &format!("{message} (injected by the machineos-testkit fault proxy)"),
    );
    if code == 401
        && let Ok(challenge) = HeaderValue::from_str(&format!("Basic realm=\"{AUTH_REALM}\""))
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

fn json_error(status: StatusCode, code: &str, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "errors": [{ "code": code, "message": message, "detail": null }]
    })
    .to_string();
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    headers.insert(
        HeaderName::from_static("docker-distribution-api-version"),
        HeaderValue::from_static("registry/2.0"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_fire_in_order_and_count_per_rule() {
        let shared = Shared {
            upstream: "127.0.0.1:1".parse().unwrap(),
            addr: "127.0.0.1:2".parse().unwrap(),
            rules: Mutex::new(vec![
                (
                    FaultRule::new("/blobs/", FaultAction::Status(500))
                        .method("put")
                        .times(2),
                    0,
                ),
                (FaultRule::new("", FaultAction::Status(503)), 0),
            ]),
            log: Mutex::new(Vec::new()),
        };
        let put = |path| shared.take_action("PUT", path);
        assert_eq!(put("/v2/a/blobs/x"), Some(FaultAction::Status(500)));
        assert_eq!(put("/v2/a/manifests/x"), Some(FaultAction::Status(503)));
        assert_eq!(put("/v2/a/blobs/x"), Some(FaultAction::Status(500)));
        assert_eq!(put("/v2/a/blobs/x"), None);
        assert!(
            FaultRule::new("", FaultAction::Status(42))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn location_rewrite_only_touches_upstream() {
        let up: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let px: SocketAddr = "127.0.0.1:6000".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::LOCATION,
            HeaderValue::from_static("http://127.0.0.1:5000/v2/a/blobs/uploads/u?_state=s"),
        );
        rewrite_location(&mut headers, up, px);
        assert_eq!(
            headers[header::LOCATION],
            "http://127.0.0.1:6000/v2/a/blobs/uploads/u?_state=s"
        );
        for other in [
            "/v2/relative",
            "http://127.0.0.1:50000/v2/",
            "http://example.com/",
        ] {
            headers.insert(header::LOCATION, HeaderValue::from_static(other));
            rewrite_location(&mut headers, up, px);
            assert_eq!(headers[header::LOCATION], other);
        }
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("close, x-custom"),
        );
        headers.insert("x-custom", HeaderValue::from_static("1"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::CONTENT_LENGTH));
    }
}
