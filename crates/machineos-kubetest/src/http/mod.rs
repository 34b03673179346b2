//! The HTTP layer of the test API server: a tokio + hyper HTTP/1.1 server on 127.0.0.1
//! serving a shared [`Store`] as the Kubernetes REST API, for the real `kubectl` and
//! kube-rs (issue 13).
//!
//! Contract:
//! * [`Server::start`] binds 127.0.0.1 on the given port (0 = any free port), spawns the
//!   accept loop on the current tokio runtime and returns once the socket listens; the
//!   server stops when the [`Server`] is dropped or [`Server::shutdown`] is called (open
//!   watches end at their timeout or when their client goes away).
//! * The store sits behind a `std::sync::Mutex`, locked only for one synchronous store
//!   call and never across an `.await`; handlers do no file I/O.
//! * Every write that commits signals watchers ([`Shared::notify`]); watchers also poll
//!   the store's log every [`watch::POLL`] so writes made straight through the library
//!   API reach them too.
//!
//! | module | what |
//! |---|---|
//! | [`discovery`] | `/version`, `/api`, `/apis`, group and group/version discovery |
//! | [`rest`] | routing and the REST verbs on resources and `/status` |
//! | [`watch`] | `?watch=true` streaming responses |
//! | [`protobuf`] | the protobuf request bodies of kubectl's typed clients |
//! | [`body`] | response bodies, query strings, request-body limits, YAML bodies |
//! | [`table`] | server-side `Table` rendering for `kubectl get` |
//! | [`openapi`] | `/openapi/v3` documents kubectl's field validation and apply read |
//! | [`eviction`] | the pod `eviction` subresource |

pub mod body;
pub mod discovery;
pub mod eviction;
pub mod openapi;
pub mod protobuf;
pub mod rest;
pub mod table;
pub mod watch;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::store::Store;

/// What every request handler shares: the store and the write signal.
#[derive(Debug)]
pub struct Shared {
    store: Arc<Mutex<Store>>,
    changed: tokio::sync::watch::Sender<u64>,
    addr: SocketAddr,
}

impl Shared {
    /// Locks the store (recovering from a poisoned lock: the store's state is whatever
    /// the panicking call left, which a test harness can live with).
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells watchers the store changed, up to resourceVersion `rv`.
    pub fn notify(&self, rv: u64) {
        self.changed.send_replace(rv);
    }

    /// A receiver of write signals.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// A running server; dropping it stops accepting connections.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Server {
    /// Starts serving `store` on 127.0.0.1:`port` (0: any free port).
    pub async fn start(store: Arc<Mutex<Store>>, port: u16) -> std::io::Result<Server> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let rv = store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .resource_version();
        let (changed, _) = tokio::sync::watch::channel(rv);
        let shared = Arc::new(Shared {
            store,
            changed,
            addr,
        });
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let s = s.clone();
                        async move { Ok::<_, std::convert::Infallible>(rest::handle(&s, req).await) }
                    });
                    // A connection error (client gone mid-request) ends that connection only.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Ok(Server { shared, accept })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// The served store.
    pub fn store(&self) -> Arc<Mutex<Store>> {
        self.shared.store.clone()
    }

    /// Signals watchers after a write made straight through the store (optional: they
    /// poll anyway).
    pub fn notify(&self) {
        let rv = self.shared.lock().resource_version();
        self.shared.notify(rv);
    }

    /// Stops accepting connections.
    pub fn shutdown(&self) {
        self.accept.abort();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
