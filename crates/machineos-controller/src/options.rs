//! How the controller runs: [`ControllerOptions`], what `machineos controller`'s flags set.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use machineos_image::Platform;

use crate::registry_ops::RegistrySettings;

/// The default of [`ControllerOptions::index_memory`]: 256 MiB, the indexes of about eight
/// ostree-encapsulated CoreOS bases (one per pool and architecture).
pub const DEFAULT_INDEX_MEMORY: usize = 256 << 20;

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Namespace of its own objects (ConfigMaps, Secrets, Lease).
    pub namespace: String,
    /// Run the render controller (off where the MCO renders).
    pub render: bool,
    /// Native builds at once.
    pub max_concurrent_builds: usize,
    /// Base-index cache directory.
    pub cache_dir: Option<PathBuf>,
    /// Bytes of base indexes native builds keep in memory between builds (least recently
    /// used out; 0: none, every build loads its index from `cache_dir`).
    pub index_memory: usize,
    /// The platform native builds produce.
    pub platform: Platform,
    /// Registry access.
    pub registry: RegistrySettings,
    /// This replica's identity (leader election, Events).
    pub identity: String,
    /// Where `/metrics`, `/healthz`, `/readyz` listen (`None`: not served).
    pub listen: Option<SocketAddr>,
    /// Lease name.
    pub lease_name: String,
    /// Run leader election (off: act at once, e.g. a single replica in tests).
    pub leader_election: bool,
    /// Lease duration, renew deadline and retry period (client-go's 15 s / 10 s / 2 s).
    pub lease_timings: (Duration, Duration, Duration),
    /// The Job builder backend's image (machineos's: `machineos build` and buildah).
    pub builder_image: String,
    /// The build Job's `backoffLimit`.
    pub job_backoff_limit: i32,
    /// The service account of build pods and Builds (`None`: the namespace's default).
    pub build_service_account: Option<String>,
    /// Run the OpenShift Build backend: `None` asks the API server whether it serves
    /// `build.openshift.io/v1` at start-up.
    pub openshift_build: Option<bool>,
    /// Run the rollout (move layered pools' nodes onto their images).
    pub rollout: bool,
    /// The node this replica runs on (updated last).
    pub node_name: Option<String>,
    /// Default soak before an updated node's slot frees (pools override it with
    /// `machineos.io/min-ready-seconds`).
    pub min_ready_seconds: i64,
    /// How long a registry answer (does a build's tag exist, may the push Secret push, a
    /// base image refused) is trusted before it is asked again; answers got with other
    /// credentials than a pool's current ones are never used.
    pub registry_answer_ttl: Duration,
    /// Record on each MachineOSImage what its filesystem differs in from the pool's
    /// previous image (`status.changes`, see the `changes` module). Off here (a comparison
    /// reads the registry); `machineos controller` turns it on by default.
    pub image_changes: bool,
}

impl ControllerOptions {
    /// Defaults for namespace `ns`.
    pub fn new(ns: &str) -> Self {
        ControllerOptions {
            namespace: ns.to_owned(),
            render: true,
            max_concurrent_builds: 4,
            cache_dir: None,
            index_memory: DEFAULT_INDEX_MEMORY,
            platform: Platform::host(),
            registry: RegistrySettings::default(),
            identity: format!("machineos-controller-{}", std::process::id()),
            listen: None,
            lease_name: "machineos-controller".into(),
            leader_election: true,
            lease_timings: (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2),
            ),
            builder_image: machineos_buildrequest::objects::job::DEFAULT_IMAGE.to_owned(),
            job_backoff_limit: machineos_buildrequest::objects::job::DEFAULT_BACKOFF_LIMIT,
            build_service_account: None,
            openshift_build: None,
            rollout: true,
            node_name: None,
            min_ready_seconds: 0,
            registry_answer_ttl: Duration::from_secs(30),
            image_changes: false,
        }
    }
}
