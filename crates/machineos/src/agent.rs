//! `machineos agent`: the command-line face of `machineos-agent` — flags in,
//! [`AgentOptions`] out, then [`machineos_agent::run`] until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use machineos_agent::AgentOptions;
use machineos_host::Host;
use machineos_host::run::{Mode, Runner, Tools};

/// Arguments of `machineos agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// This node's name (the DaemonSet passes `spec.nodeName`).
    #[arg(long, env = "NODE_NAME")]
    node: String,
    /// The agent's namespace (of its default pull Secret).
    #[arg(long, env = "POD_NAMESPACE", default_value = "machineos")]
    namespace: String,
    /// The default pull Secret, `namespace/name` (or `name` in --namespace), of type
    /// kubernetes.io/dockerconfigjson; a node's `machineos.io/pull-secret` annotation wins.
    #[arg(long, value_name = "NS/NAME")]
    pull_secret: Option<String>,
    /// How long a drain may take before it has failed (the node stays cordoned and the
    /// drain is retried after a backoff): `600`, `600s`, `10m`, `1h`.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    drain_timeout: Duration,
    /// Between eviction rounds while pods are blocked by PodDisruptionBudgets.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    drain_retry: Duration,
    /// How long a requested reboot may take before it is requested again.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = parse_duration)]
    reboot_timeout: Duration,
    /// Where the host's root filesystem is mounted in the agent's container.
    #[arg(long, value_name = "DIR", default_value = "/host")]
    host_root: PathBuf,
    /// The host backend: `auto` (rpm-ostree where the host has it, as the MCO; else bootc) or `fake`
    /// (a simulated machine for demos and tests: an in-memory host whose reboots restart
    /// the agent in process, the Node NotReady meanwhile; nothing here is touched). A fake
    /// machine that boots an image built from a rendered MachineConfig writing the file
    /// `/etc/machineos-fake/never-ready` stays NotReady on it, as a broken kubelet would
    /// leave it (to see the health gate roll it back); one writing
    /// `/etc/machineos-fake/kubelet-broken` starts no kubelet and so no agent, and after
    /// three reboot downtimes its boot guard rolls it back once (to see the boot guard).
    #[arg(long, value_name = "KIND", default_value = "auto", value_parser = ["auto", "fake"])]
    host: String,
    /// How host tools are run: `nsenter` (in the host's namespaces, `nsenter -t 1 -m -u -i
    /// -n -p --`, which needs `hostPID`: the DaemonSet) or `direct` (the agent runs on the
    /// host itself).
    #[arg(long, value_name = "HOW", default_value = "nsenter", value_parser = ["nsenter", "direct"])]
    host_exec: String,
    /// Run the host switch as a plain child instead of a transient systemd unit (which
    /// survives an agent restart).
    #[arg(long)]
    no_systemd_run: bool,
}

/// `600`, `600s`, `10m`, `1h`, `250ms`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit (ms, s, m, h)"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    })
}

fn options(args: &AgentArgs) -> anyhow::Result<AgentOptions> {
    let mut o = AgentOptions::new(&args.node, &args.namespace);
    o.pull_secret = args
        .pull_secret
        .as_deref()
        .map(|s| match s.split_once('/') {
            Some((ns, name)) => (ns.to_owned(), name.to_owned()),
            None => (args.namespace.clone(), s.to_owned()),
        });
    o.drain_timeout = args.drain_timeout;
    o.drain_retry = args.drain_retry;
    o.reboot_timeout = args.reboot_timeout;
    Ok(o)
}

/// Whether host detection found neither bootc nor rpm-ostree.
fn is_no_tool(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<machineos_host::HostError>(),
            Some(machineos_host::HostError::NoTool)
        )
    })
}

/// The real host: rpm-ostree where it has it, else bootc, run in its namespaces.
fn host(args: &AgentArgs) -> anyhow::Result<Arc<dyn Host>> {
    let prefix = if args.host_exec == "nsenter" {
        ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--"]
            .map(String::from)
            .to_vec()
    } else {
        Vec::new()
    };
    let long_mode = if args.no_systemd_run {
        Mode::Direct
    } else {
        Mode::SystemdRun {
            unit: "machineos-host-switch".into(),
        }
    };
    let runner = Runner::for_host(Tools::default(), &args.host_root, prefix, long_mode);
    let host = machineos_host::detect(&runner, &args.host_root)
        .with_context(|| format!("--host auto (host root {})", args.host_root.display()))?;
    Ok(Arc::from(host))
}

/// What the agent drives.
enum Target {
    Host(Arc<dyn Host>),
    Simulated,
    /// No bootc or rpm-ostree here: said once, then idle.
    Unsupported(String),
}

/// Run `machineos agent`.
pub fn run(args: &AgentArgs) -> anyhow::Result<()> {
    let opts = options(args)?;
    let target = match args.host.as_str() {
        "fake" => Target::Simulated,
        _ => match host(args) {
            Ok(h) => Target::Host(h),
            Err(e) if is_no_tool(&e) => Target::Unsupported(crate::cli::error_chain(&e)),
            Err(e) => return Err(e),
        },
    };
    let rt = crate::cli::runtime()?;
    rt.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("finding the cluster (in-cluster, KUBECONFIG, ~/.kube/config)")?;
        let client = kube::Client::try_from(machineos_agent::client_config(config))
            .context("building the Kubernetes client")?;
        let shutdown = crate::cli::shutdown_on_signal();
        match target {
            Target::Host(host) => machineos_agent::run(client, host, opts, shutdown).await,
            Target::Simulated => {
                let down = Duration::from_secs(1);
                machineos_agent::simulate::run_simulated(client, opts, down, shutdown).await
            }
            Target::Unsupported(why) => {
                machineos_agent::idle_unsupported(client, &opts.node, &why, shutdown).await
            }
        }
        .map_err(anyhow::Error::msg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("10 minutes").is_err());
        assert!(parse_duration("m").is_err());
    }
}
