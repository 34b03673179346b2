//! The HTTP layer of the test API server: a tokio + hyper HTTP/1.1 server on 127.0.0.1
//! serving a shared [`Store`] as the Kubernetes REST API, for the real `kubectl` and
//! kube-rs (issue 13).
//!
//! Contract:
//! * [`Server::start`] binds 127.0.0.1 on the given port (0 = any free port), spawns the
//!   accept loop on the current tokio runtime and returns once the socket listens; the
//!   server stops when the [`Server`] is dropped or [`Server::shutdown`] is called (open
//!   watches end at their timeout, when their client goes away, or at
//!   [`Server::close_watches`]). Plain HTTP has no authentication (in-process tests).
//! * [`Server::start_tls`] serves HTTPS with a generated CA and a bearer token
//!   ([`tls`]): the middleware authenticates every request first (401/403 as
//!   kube-apiserver with its default anonymous auth), then counts it and applies the
//!   injected faults and delays of [`Server::controls`] ([`crate::control`]), then routes.
//! * [`new_store`] is the store a served server starts with (the system clock).
//! * [`Server::kubeconfig`] / [`Server::write_kubeconfig`] give clients the URL, CA and
//!   token; kube-rs tests build their client from it with
//!   `kube::config::Kubeconfig::from_yaml` and `kube::Config::from_custom_kubeconfig`.
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
//! | [`tls`] | certificates, bearer token, authentication, kubeconfig |
//! | [`rbac`] | what a ServiceAccount's token may do: Roles, ClusterRoles, their bindings |
//! | [`body`] | response bodies, query strings, request-body limits, YAML bodies |
//! | [`table`] | server-side `Table` rendering for `kubectl get` |
//! | [`openapi`] | `/openapi/v3` documents kubectl's field validation and apply read |
//! | [`eviction`] | the pod `eviction` subresource |

pub mod body;
pub mod discovery;
pub mod eviction;
pub mod openapi;
pub mod protobuf;
pub mod rbac;
pub mod rest;
pub mod table;
pub mod tls;
pub mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::control::{self, Controls};
use crate::store::Store;
use body::{RespBody, json_response};
use tls::{Auth, TlsIdentity};

/// An empty store on the system clock ([`crate::clock::SystemClock`], otherwise
/// [`crate::StoreConfig::default`]), shared as a [`Server`] serves it: what `kubetest
/// serve` serves and what tests start their servers on.
pub fn new_store() -> Arc<Mutex<Store>> {
    Arc::new(Mutex::new(Store::new(crate::StoreConfig {
        clock: Arc::new(crate::clock::SystemClock),
        ..crate::StoreConfig::default()
    })))
}

/// How a server is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerOptions {
    /// The port on 127.0.0.1 (0: any free port).
    pub port: u16,
    /// HTTPS with a generated CA and a bearer token.
    pub tls: bool,
    /// With TLS, whether requests without credentials are `system:anonymous`
    /// (kube-apiserver's default, `--anonymous-auth=true`) or 401.
    pub anonymous_auth: bool,
}

impl Default for ServerOptions {
    /// Plain HTTP on any free port; anonymous auth on (used with TLS only).
    fn default() -> ServerOptions {
        ServerOptions {
            port: 0,
            tls: false,
            anonymous_auth: true,
        }
    }
}

/// What every request handler shares: the store, the write signal and the controls.
#[derive(Debug)]
pub struct Shared {
    store: Arc<Mutex<Store>>,
    changed: tokio::sync::watch::Sender<u64>,
    addr: SocketAddr,
    controls: Controls,
    tls: Option<TlsIdentity>,
    anonymous_auth: bool,
    /// ServiceAccount tokens minted for tests, by token.
    service_accounts: Mutex<HashMap<String, rbac::ServiceAccount>>,
    /// Every request RBAC refused: `user verb resource namespace/name` (or the path).
    denied: Mutex<Vec<String>>,
    /// Every resource request RBAC allowed a ServiceAccount.
    allowed: Mutex<Vec<rbac::Allowed>>,
}

impl Shared {
    /// Locks the store (recovering from a poisoned lock: the store's state is whatever
    /// the panicking call left, which a test harness can live with).
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Garbage collection as kube-controller-manager runs it, asynchronously: from now on
    /// writes leave it to a background task that runs the collector every `delay` (when a
    /// write may have given it work) and tells watchers what it changed. Dependents outlive
    /// their owner's DELETE, and an object created with an owner already gone exists until
    /// the next pass — what a controller must not mistake for its own. The task ends with
    /// the server. Returns its handle.
    pub fn defer_garbage_collection(
        self: &Arc<Self>,
        delay: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        self.lock().set_gc_deferred(true);
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(delay).await;
                let Some(shared) = weak.upgrade() else { return };
                let rv = {
                    let mut store = shared.lock();
                    store
                        .collect_deferred_garbage()
                        .then(|| store.resource_version())
                };
                if let Some(rv) = rv {
                    shared.notify(rv);
                }
            }
        })
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

    /// The test controls.
    pub fn controls(&self) -> &Controls {
        &self.controls
    }
}

/// A running server; dropping it stops accepting connections.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

/// Authenticates (with TLS), counts, injects faults and delays, then routes.
async fn serve(s: Arc<Shared>, mut req: Request<Incoming>) -> Response<RespBody> {
    let info = control::request_info(req.method().as_str(), req.uri().path(), req.uri().query());
    if let Some(id) = &s.tls {
        let header = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if let Some(sa) = service_account(&s, header) {
            if let Some(denied) = authorize(&s, &sa, &info) {
                return denied;
            }
            // Admission (the owner-reference check) needs to know who writes.
            req.extensions_mut().insert(sa);
        } else {
            match tls::authenticate(header, &id.token, s.anonymous_auth) {
                Auth::User => {}
                Auth::Anonymous if tls::anonymous_allowed(&info.method, &info.path) => {}
                Auth::Anonymous => {
                    let a = attributes(&info);
                    return json_response(403, &tls::forbidden_status(&a));
                }
                Auth::Unauthorized => return json_response(401, &tls::unauthorized_status()),
            }
        }
    }
    let d = s.controls.on_request(&info);
    if let Some(delay) = d.delay {
        tokio::time::sleep(delay).await;
    }
    if let Some(f) = d.fault {
        let mut r = json_response(f.code, &f.status());
        if let Some(secs) = f.retry_after
            && let Ok(v) = hyper::header::HeaderValue::from_str(&secs.to_string())
        {
            r.headers_mut().insert(hyper::header::RETRY_AFTER, v);
        }
        return r;
    }
    rest::handle(&s, req).await
}

/// What an authorizer sees of `info`.
fn attributes(info: &control::RequestInfo) -> tls::Attributes<'_> {
    tls::Attributes {
        verb: &info.verb,
        path: &info.path,
        resource: info.rbac_resource.as_ref().map(|r| {
            (
                info.group.as_str(),
                r.clone(),
                info.namespace.as_deref(),
                info.name.as_deref(),
            )
        }),
    }
}

/// OpenShift's `OwnerReferencesPermissionEnforcement` admission, as
/// `plugin/pkg/admission/gc/gc_admission.go` words it, for a ServiceAccount's create: every
/// owner reference with `blockOwnerDeletion: true` needs RBAC `update` on the owner's
/// `finalizers` subresource (its resource found by `apiVersion` and `kind`, its name, the
/// new object's namespace); `None` when allowed, else why. Only creates are checked (an
/// update that changes owner references also needs `delete` on the object: not modelled).
pub(crate) fn owner_references_permitted(
    s: &Shared,
    sa: &rbac::ServiceAccount,
    object: &serde_json::Value,
    namespace: Option<&str>,
) -> Option<String> {
    let refs = object["metadata"]["ownerReferences"].as_array()?;
    let rbac_objects = rbac_objects(s);
    for r in refs.iter().filter(|r| r["blockOwnerDeletion"] == true) {
        let api_version = r["apiVersion"].as_str().unwrap_or_default();
        let kind = r["kind"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let plural = s
            .lock()
            .registry()
            .by_kind(group, kind)
            .map(|i| i.plural.clone());
        let Some(plural) = plural else {
            return Some(format!(
                "cannot set blockOwnerDeletion in this case because cannot find RESTMapping \
                 for APIVersion {api_version} Kind {kind}"
            ));
        };
        let resource = format!("{plural}/finalizers");
        let req = rbac::Request::Resource {
            verb: "update",
            group,
            resource: &resource,
            namespace,
            name: r["name"].as_str(),
        };
        if rbac::allowed(sa, &req, rbac_objects.iter()) {
            // Used, as far as an audit of the role's grants is concerned.
            s.allowed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(rbac::Allowed {
                    sa: sa.clone(),
                    verb: "update".to_owned(),
                    group: group.to_owned(),
                    resource: resource.clone(),
                    namespace: namespace.map(str::to_owned),
                    name: r["name"].as_str().map(str::to_owned),
                });
        } else {
            return Some(format!(
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you \
                 can't set finalizers on: User \"{}\" cannot update resource \"{resource}\" in \
                 API group \"{group}\"",
                sa.user()
            ));
        }
    }
    None
}

/// The stored RBAC objects (Roles, ClusterRoles, their bindings), copied out of the lock.
fn rbac_objects(s: &Shared) -> Vec<serde_json::Value> {
    let store = s.lock();
    store
        .objects()
        .filter(|(k, _)| k.gr.group == "rbac.authorization.k8s.io")
        .map(|(_, v)| v.clone())
        .collect()
}

/// The ServiceAccount whose minted token the `Authorization` header carries, if any.
fn service_account(s: &Shared, header: Option<&[u8]>) -> Option<rbac::ServiceAccount> {
    let h = std::str::from_utf8(header?).ok()?;
    let (scheme, token) = h.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let map = s.service_accounts.lock().unwrap_or_else(|e| e.into_inner());
    map.get(token.trim()).cloned()
}

/// RBAC for a ServiceAccount's request: `None` when allowed, else the 403 response.
fn authorize(
    s: &Shared,
    sa: &rbac::ServiceAccount,
    info: &control::RequestInfo,
) -> Option<Response<RespBody>> {
    let req = match &info.rbac_resource {
        Some(resource) => rbac::Request::Resource {
            verb: &info.verb,
            group: &info.group,
            resource,
            namespace: info.namespace.as_deref(),
            name: info.name.as_deref(),
        },
        None => rbac::Request::NonResource {
            verb: &info.verb,
            path: &info.path,
        },
    };
    let allowed = { rbac::allowed(sa, &req, rbac_objects(s).iter()) };
    if allowed {
        if let Some(resource) = &info.rbac_resource {
            s.allowed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(rbac::Allowed {
                    sa: sa.clone(),
                    verb: info.verb.clone(),
                    group: info.group.clone(),
                    resource: resource.clone(),
                    namespace: info.namespace.clone(),
                    name: info.name.clone(),
                });
        }
        return None;
    }
    s.denied
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(match &info.rbac_resource {
            Some(r) => format!(
                "{} {} {}.{} {}/{}",
                sa.user(),
                info.verb,
                r,
                info.group,
                info.namespace.as_deref().unwrap_or("-"),
                info.name.as_deref().unwrap_or("-")
            ),
            None => format!("{} {} {}", sa.user(), info.verb, info.path),
        });
    Some(json_response(
        403,
        &tls::forbidden_status_for(&attributes(info), &sa.user()),
    ))
}

impl Server {
    /// Starts serving `store` over plain HTTP on 127.0.0.1:`port` (0: any free port).
    pub async fn start(store: Arc<Mutex<Store>>, port: u16) -> std::io::Result<Server> {
        Server::start_with(
            store,
            ServerOptions {
                port,
                ..ServerOptions::default()
            },
        )
        .await
    }

    /// Starts serving `store` over HTTPS with a generated CA and bearer token, with
    /// kube-apiserver's default anonymous auth.
    pub async fn start_tls(store: Arc<Mutex<Store>>, port: u16) -> std::io::Result<Server> {
        Server::start_with(
            store,
            ServerOptions {
                port,
                tls: true,
                ..ServerOptions::default()
            },
        )
        .await
    }

    /// Starts serving `store` as `opts` say.
    pub async fn start_with(
        store: Arc<Mutex<Store>>,
        opts: ServerOptions,
    ) -> std::io::Result<Server> {
        let tls = if opts.tls {
            Some(tls::generate()?)
        } else {
            None
        };
        let listener = TcpListener::bind(("127.0.0.1", opts.port)).await?;
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
            controls: Controls::default(),
            tls,
            anonymous_auth: opts.anonymous_auth,
            service_accounts: Mutex::default(),
            denied: Mutex::default(),
            allowed: Mutex::default(),
        });
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let acceptor = s.tls.as_ref().map(|t| t.acceptor.clone());
                    let svc = service_fn(move |req| {
                        let s = s.clone();
                        async move { Ok::<_, std::convert::Infallible>(serve(s, req).await) }
                    });
                    // A connection or handshake error (client gone, client distrusting
                    // the CA) ends that connection only.
                    match acceptor {
                        Some(a) => {
                            if let Ok(tls) = a.accept(stream).await {
                                let _ = http1::Builder::new()
                                    .serve_connection(TokioIo::new(tls), svc)
                                    .await;
                            }
                        }
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        }
                    }
                });
            }
        });
        Ok(Server { shared, accept })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.shared.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.shared.addr)
    }

    /// The bearer token (TLS only).
    pub fn token(&self) -> Option<&str> {
        self.shared.tls.as_ref().map(|t| t.token.as_str())
    }

    /// The CA certificate, PEM (TLS only).
    pub fn ca_pem(&self) -> Option<&str> {
        self.shared.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// A kubeconfig (YAML) for this server: context `kubetest`, namespace `default`,
    /// with `certificate-authority-data` and `token` under TLS.
    pub fn kubeconfig(&self) -> String {
        tls::kubeconfig(
            &self.url(),
            self.shared
                .tls
                .as_ref()
                .map(|t| (t.ca_pem.as_str(), t.token.as_str())),
        )
    }

    /// A bearer token for ServiceAccount `namespace`/`name` (TLS only): requests with it are
    /// that ServiceAccount's, authorized by the RBAC objects in the store ([`rbac`]), as a
    /// pod running under it would be.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> Option<String> {
        self.shared.tls.as_ref()?;
        let token = tls::random_token().ok()?;
        let mut map = self
            .shared
            .service_accounts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.insert(
            token.clone(),
            rbac::ServiceAccount {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
        );
        Some(token)
    }

    /// Stores the RBAC objects (Role, RoleBinding, ClusterRole, ClusterRoleBinding) of a
    /// multi-document YAML manifest — `deploy/`'s, say — as `kubectl apply` would create
    /// them, skipping every other kind; returns how many it stored.
    pub fn apply_rbac_yaml(&self, yaml: &str) -> Result<usize, String> {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(yaml).map_err(|e| e.to_string())?;
        let mut stored = 0;
        for doc in docs {
            let plural = match doc["kind"].as_str() {
                Some("Role") => "roles",
                Some("RoleBinding") => "rolebindings",
                Some("ClusterRole") => "clusterroles",
                Some("ClusterRoleBinding") => "clusterrolebindings",
                _ => continue,
            };
            let gr = crate::key::GroupResource::new("rbac.authorization.k8s.io", plural);
            let ns = doc["metadata"]["namespace"].as_str().map(str::to_owned);
            let rv = {
                let mut store = self.shared.lock();
                store
                    .create(&gr, ns.as_deref(), &doc, Default::default())
                    .map_err(|e| format!("{plural}: {e}"))?;
                store.resource_version()
            };
            self.shared.notify(rv);
            stored += 1;
        }
        Ok(stored)
    }

    /// Every request RBAC refused so far (`user verb resource.group namespace/name`, or the
    /// path of a non-resource request): what a component's Role lacks.
    pub fn denied(&self) -> Vec<String> {
        self.shared
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The grants of the roles bound to ServiceAccount `namespace`/`name` that none of its
    /// requests so far used (see [`rbac::unused_grants`]): after a test that drives a
    /// component through every path, the verbs its Role can lose.
    pub fn unused_grants(&self, namespace: &str, name: &str) -> Vec<String> {
        let sa = rbac::ServiceAccount {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let requests = self
            .shared
            .allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        rbac::unused_grants(&sa, &requests, rbac_objects(&self.shared).iter())
    }

    /// A kubeconfig like [`Server::kubeconfig`] for ServiceAccount `namespace`/`name`
    /// ([`Server::service_account_token`]; TLS only).
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> Option<String> {
        let token = self.service_account_token(namespace, name)?;
        let ca = self.shared.tls.as_ref()?.ca_pem.clone();
        Some(tls::kubeconfig(&self.url(), Some((&ca, &token))))
    }

    /// Writes [`Server::kubeconfig`] to `path` atomically (temporary file and rename in
    /// the same directory).
    pub async fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        tls::write_atomically(path, &self.kubeconfig()).await
    }

    /// The served store.
    pub fn store(&self) -> Arc<Mutex<Store>> {
        self.shared.store.clone()
    }

    /// What the handlers share: the store, its write signal and the controls (for
    /// [`crate::hooks`]).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The test controls: faults, delays, request counts.
    pub fn controls(&self) -> &Controls {
        &self.shared.controls
    }

    /// Ends every open watch stream now, as kube-apiserver does when it closes a watch
    /// (the response ends cleanly; clients re-watch from the last resourceVersion they
    /// saw). Atomic with respect to writes: no write made after this returns is sent on
    /// a closed stream.
    pub fn close_watches(&self) {
        let _store = self.shared.lock();
        self.shared.controls.close_watches();
    }

    /// Drops the store's whole change history: every watch or exact list from a
    /// resourceVersion older than the current one then gets 410 Gone. Returns the
    /// resourceVersion compacted to.
    pub fn compact_history(&self) -> u64 {
        let mut s = self.shared.lock();
        let rv = s.resource_version();
        s.compact(rv);
        rv
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
