//! What the binary's tests share: the binary run from the repository's root and the example
//! base as an OCI layout; for the tests against the test API server, the judge (the real
//! kubectl) required under `CI` — a test there fails without it instead of passing as
//! skipped — and the server itself, over TLS, with an admin kubeconfig and kubectl pointed
//! at it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::kubectl::{self, Kubectl};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `machineos` binary run with `args` from the repository's root.
pub fn machineos(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_machineos"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("the binary runs")
}

/// The example synthetic base as an OCI layout tagged `base`, at `<dir>/base-image` (made
/// once: an existing layout is reused).
pub fn example_base_image(dir: &Path) -> PathBuf {
    let path = dir.join("base-image");
    if !path.exists() {
        let layout = machineos_image::Layout::create(&path).unwrap();
        let desc =
            machineos_synth::write_image(&layout, &machineos_synth::SynthSpec::example()).unwrap();
        layout.set_tag("base", &desc).unwrap();
    }
    path
}

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
