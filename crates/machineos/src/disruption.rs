//! `machineos disruption --from OLD --to NEW`: what moving a node from one rendered
//! MachineConfig to another costs it, by the MCO's node disruption policies (its defaults,
//! or merged with a `MachineConfiguration` manifest's `spec.nodeDisruptionPolicy` given with
//! `--policy`) — see `machineos_disruption`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use machineos_disruption::{ClusterPolicies, ConfigChanges, decide};

use crate::build_args::Format;

/// Arguments of `machineos disruption`.
#[derive(Debug, clap::Args)]
pub struct DisruptionArgs {
    /// The rendered MachineConfig the node runs (a manifest, or as `build --rendered` reads).
    #[arg(long, value_name = "PATH")]
    from: PathBuf,
    /// The rendered MachineConfig it moves to.
    #[arg(long, value_name = "PATH")]
    to: PathBuf,
    /// A `MachineConfiguration` manifest (`kubectl get machineconfiguration cluster -o
    /// yaml`): its `spec.nodeDisruptionPolicy` is validated and merged over the MCO's
    /// defaults. Without it, the defaults.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output_format: Format,
}

/// Run `machineos disruption`.
pub fn run(args: &DisruptionArgs) -> anyhow::Result<()> {
    let old = crate::input::read_rendered(&args.from)?;
    let new = crate::input::read_rendered(&args.to)?;
    let policies = policies(args.policy.as_deref())?;
    let changes = ConfigChanges::between(&old, &new);
    let outcome = decide(&changes, &policies);
    match args.output_format {
        Format::Json => crate::cli::emit(&serde_json::to_string_pretty(&serde_json::json!({
            "from": old.name(),
            "to": new.name(),
            "changes": changes,
            "disruption": outcome,
        }))?),
        Format::Text => {
            let actions: Vec<String> = outcome.actions.iter().map(describe).collect();
            let mut out = format!(
                "{} → {}: {:?}{} — {}\n",
                old.name(),
                new.name(),
                outcome.class,
                if outcome.drain { ", drained first" } else { "" },
                actions.join(", ")
            );
            for r in &outcome.reasons {
                let acts: Vec<String> = r.actions.iter().map(describe).collect();
                out.push_str(&format!(
                    "  {}: {} ({})\n",
                    r.change,
                    acts.join(", "),
                    r.policy.as_deref().unwrap_or("no policy covers it")
                ));
            }
            crate::cli::emit(out.trim_end())
        }
    }
}

/// `Restart crio.service`, `Reboot`.
fn describe(a: &machineos_disruption::Action) -> String {
    use machineos_disruption::Action;
    match a {
        Action::Reload(s) | Action::Restart(s) => format!("{} {s}", a.type_name()),
        other => other.type_name().to_owned(),
    }
}

/// The node disruption policies: the MCO's defaults, or merged with the
/// `spec.nodeDisruptionPolicy` of the `MachineConfiguration` manifest at `path`.
pub(crate) fn policies(path: Option<&std::path::Path>) -> anyhow::Result<ClusterPolicies> {
    Ok(match path {
        None => ClusterPolicies::defaults(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--policy {}: reading it", path.display()))?;
            let docs = machineos_goyaml::from_str_documents(&text)
                .with_context(|| format!("--policy {}", path.display()))?;
            let [object] = docs.as_slice() else {
                bail!(
                    "--policy {}: {} documents; give one MachineConfiguration",
                    path.display(),
                    docs.len()
                );
            };
            if object.get("kind").and_then(|k| k.as_str()) != Some("MachineConfiguration") {
                bail!("--policy {}: not a MachineConfiguration", path.display());
            }
            ClusterPolicies::of_machine_configuration(Some(object))
                .with_context(|| format!("--policy {}", path.display()))?
        }
    })
}
