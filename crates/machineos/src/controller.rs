//! `machineos controller`: the command-line face of `machineos-controller` — flags in,
//! [`ControllerOptions`] out, then [`machineos_controller::app::run`] until SIGTERM or
//! SIGINT (graceful: builds cancelled, the Lease released).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use machineos_controller::controller::ControllerOptions;
use machineos_controller::registry_ops::RegistrySettings;

/// Arguments of `machineos controller`.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// Namespace of the controller's own objects: the `on-cluster-build-config` and
    /// `machine-config-osimageurl` ConfigMaps, the push and pull Secrets, the Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "machineos")]
    namespace: String,
    /// Directory of the base-index cache (a volume: warm builds read it).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Address of `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Do not serve `/metrics`, `/healthz` and `/readyz`.
    #[arg(long)]
    no_listen: bool,
    /// Do not render MachineConfigs (for clusters where the MCO's render controller does).
    #[arg(long)]
    no_render: bool,
    /// MiB of base indexes native builds keep in memory between builds (least recently
    /// used out; 0: load each build's index from --cache-dir).
    #[arg(long, value_name = "MIB", default_value_t = machineos_controller::controller::DEFAULT_INDEX_MEMORY >> 20)]
    index_memory: usize,
    /// Native builds running at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    max_concurrent_builds: usize,
    /// The platform native builds produce (`os/arch[/variant]`); default: the controller's own.
    #[arg(long, value_name = "PLATFORM")]
    platform: Option<String>,
    /// This replica's identity in leader election and Events (default: the pod name, else
    /// the host name and process id).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "machineos-controller")]
    lease_name: String,
    /// Act without leader election (a single replica only).
    #[arg(long)]
    no_leader_election: bool,
    /// A registry (`host[:port]`) that may be reached over plain HTTP. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,
    /// An extra CA certificate (PEM) to trust for registries. Repeatable.
    #[arg(long = "ca-file", value_name = "FILE")]
    ca_files: Vec<PathBuf>,
    /// The image the `Job` builder's pod runs: machineos's own (`machineos build`, buildah).
    /// `deploy/` sets it to the controller's image.
    #[arg(long, value_name = "IMAGE", env = "MACHINEOS_BUILDER_IMAGE", default_value = machineos_buildrequest::objects::job::DEFAULT_IMAGE)]
    builder_image: String,
    /// The build Job's `backoffLimit` (retries after a failed or evicted pod).
    #[arg(long, value_name = "N", default_value_t = machineos_buildrequest::objects::job::DEFAULT_BACKOFF_LIMIT)]
    job_backoff_limit: i32,
    /// The service account of build pods and OpenShift Builds (default: the namespace's).
    #[arg(long, value_name = "NAME")]
    build_service_account: Option<String>,
    /// The `OpenShiftBuild` builder: `auto` runs it when the API server serves
    /// `build.openshift.io/v1`.
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "on", "off"])]
    openshift_build: String,
    /// Do not move nodes (for clusters where the MCO's node controller does).
    #[arg(long)]
    no_rollout: bool,
    /// Do not record on each MachineOSImage what its filesystem differs in from the pool's
    /// previous image (`status.changes`; each comparison reads the registry).
    #[arg(long)]
    no_image_changes: bool,
    /// The node this replica runs on: the rollout updates it last.
    #[arg(long, env = "NODE_NAME", value_name = "NODE")]
    node_name: Option<String>,
    /// Seconds an updated node must have been Ready before its slot frees (pools override
    /// it with the annotation `machineos.io/min-ready-seconds`).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    min_ready_seconds: i64,
}

fn options(args: &ControllerArgs) -> anyhow::Result<ControllerOptions> {
    let mut o = ControllerOptions::new(&args.namespace);
    o.cache_dir = args.cache_dir.clone();
    o.index_memory = args.index_memory.saturating_mul(1 << 20);
    o.listen = (!args.no_listen).then_some(args.listen);
    o.render = !args.no_render;
    o.max_concurrent_builds = args.max_concurrent_builds.max(1);
    if let Some(p) = &args.platform {
        o.platform = p.parse().context("--platform")?;
    }
    if let Some(id) = &args.identity {
        o.identity = id.clone();
    } else if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        o.identity = format!("{}-{}", host.trim(), std::process::id());
    }
    o.lease_name = args.lease_name.clone();
    o.leader_election = !args.no_leader_election;
    let mut ca_pems = Vec::new();
    for f in &args.ca_files {
        ca_pems.push(std::fs::read(f).with_context(|| format!("--ca-file {}", f.display()))?);
    }
    o.registry = RegistrySettings::new(ca_pems, args.insecure_registries.clone());
    o.builder_image = args.builder_image.clone();
    o.job_backoff_limit = args.job_backoff_limit.max(0);
    o.build_service_account = args.build_service_account.clone();
    o.openshift_build = match args.openshift_build.as_str() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    };
    o.rollout = !args.no_rollout;
    o.image_changes = !args.no_image_changes;
    o.node_name = args.node_name.clone();
    o.min_ready_seconds = args.min_ready_seconds.max(0);
    Ok(o)
}

/// Run `machineos controller`.
pub fn run(args: &ControllerArgs) -> anyhow::Result<()> {
    let opts = options(args)?;
    let rt = crate::cli::runtime()?;
    rt.block_on(async move {
        let shutdown = crate::cli::shutdown_on_signal();
        machineos_controller::app::run(opts, shutdown)
            .await
            .map_err(anyhow::Error::msg)
    })
}
