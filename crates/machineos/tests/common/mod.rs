//! What the binary's tests against the test API server share: the judge (the real kubectl)
//! required under `CI` — a test there fails without it instead of passing as skipped — and
//! the server itself, over TLS, with an admin kubeconfig and kubectl pointed at it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::kubectl::{self, Kubectl};

/// Whether kubectl is here to judge; without it, `SKIPPED: <what>` is printed and the test
/// returns — except under `CI`, where the missing judge fails the test.
pub fn kubectl_or_skip(what: &str) -> bool {
    kubectl::judge_or_skip(what)
}

/// The test API server for one test, and kubectl on it.
pub struct ApiServer {
    /// The runtime the server runs on (kept alive with it).
    pub rt: tokio::runtime::Runtime,
    /// The server.
    pub server: Server,
    /// Its admin kubeconfig (`<dir>/kubeconfig`).
    pub kubeconfig: PathBuf,
    /// kubectl with that kubeconfig and HOME `<dir>/home`.
    pub kubectl: Kubectl,
}

/// Start the server over TLS on a free port; its files under `dir`; kubectl's deadline per
/// invocation `deadline`.
pub fn start(dir: &Path, deadline: Duration) -> ApiServer {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = rt
        .block_on(Server::start_tls(new_store(), 0))
        .expect("API server");
    let kubeconfig = dir.join("kubeconfig");
    rt.block_on(server.write_kubeconfig(&kubeconfig))
        .expect("kubeconfig");
    let kubectl = Kubectl::with_kubeconfig(&kubeconfig, dir.join("home")).deadline(deadline);
    ApiServer {
        rt,
        server,
        kubeconfig,
        kubectl,
    }
}

/// The `kubectl get` arguments of the controller's leader-election Lease holder.
pub const LEASE_HOLDER: [&str; 7] = [
    "get",
    "lease",
    "machineos-controller",
    "-n",
    "machineos",
    "-o",
    "jsonpath={.spec.holderIdentity}",
];
