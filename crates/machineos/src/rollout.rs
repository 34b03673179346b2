//! `machineos rollout plan`: print, without changing anything, the order and batches in
//! which the controller would move a pool's nodes (machineos-rollout's `plan`, read from the
//! cluster kubectl would use).

use anyhow::Context;

/// Arguments of `machineos rollout`.
#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RolloutCommand {
    /// The order and batches the controller would use for a pool, now.
    Plan(PlanArgs),
}

#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// The MachineConfigPool.
    #[arg(long, value_name = "POOL")]
    pool: String,
    /// `text` or `json`.
    #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
    /// The controller's namespace (its ConfigMaps decide legacy opt-in).
    #[arg(long, env = "POD_NAMESPACE", default_value = "machineos")]
    namespace: String,
    /// The node the controller runs on (updated last), as the controller's `--node-name`.
    #[arg(long, value_name = "NODE")]
    node_name: Option<String>,
    /// As the controller's `--min-ready-seconds`.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    min_ready_seconds: i64,
}

/// Run `machineos rollout …`.
pub fn run(args: &RolloutArgs) -> anyhow::Result<()> {
    let RolloutCommand::Plan(a) = &args.command;
    let plan = crate::cli::runtime()?
        .block_on(machineos_controller::rollout::plan_default_cluster(
            &a.namespace,
            &a.pool,
            a.node_name.as_deref(),
            a.min_ready_seconds,
        ))
        .map_err(anyhow::Error::msg)
        .context("rollout plan")?;
    if a.output == "json" {
        return crate::cli::emit(&serde_json::to_string_pretty(&plan)?);
    }
    crate::cli::emit(&text(&plan))
}

/// The plan as text: a header, what is moving or unavailable now, then one line per batch.
pub fn text(p: &machineos_rollout::plan::Plan) -> String {
    let mut out = format!(
        "pool {}: {} nodes, maxUnavailable {}, config {}, image {}\n",
        p.pool,
        p.members,
        p.max_unavailable,
        p.config,
        p.image.as_deref().unwrap_or("(not built yet)")
    );
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(" ")
        }
    };
    out.push_str(&format!(
        "updated ({}): {}\n",
        p.updated.len(),
        list(&p.updated)
    ));
    out.push_str(&format!(
        "updating now ({}): {}\n",
        p.in_flight.len(),
        list(&p.in_flight)
    ));
    let unavailable: Vec<String> = p
        .unavailable
        .iter()
        .map(|(n, why)| format!("{n}({why})"))
        .collect();
    out.push_str(&format!(
        "unavailable now ({}): {}\n",
        unavailable.len(),
        list(&unavailable)
    ));
    for (node, mi) in &p.machine_images {
        out.push_str(&format!("{node}: follows MachineImage {mi}\n"));
    }
    for node in &p.conflicts {
        out.push_str(&format!(
            "{node}: matched by two MachineImages, not moved\n"
        ));
    }
    if !p.not_ready.is_empty() {
        out.push_str(&format!("waiting to be Ready: {}\n", p.not_ready.join(" ")));
    }
    if let Some(b) = &p.blocked {
        out.push_str(&format!("blocked: {b}\n"));
    }
    for (i, batch) in p.batches.iter().enumerate() {
        let nodes: Vec<String> = batch
            .iter()
            .map(|n| match &n.zone {
                Some(z) => format!("{}({z})", n.name),
                None => n.name.clone(),
            })
            .collect();
        let when = if i == 0 && p.blocked.is_none() {
            " (now)"
        } else {
            ""
        };
        out.push_str(&format!("batch {}{when}: {}\n", i + 1, nodes.join(" ")));
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_rollout::plan::{Plan, PlannedNode};

    #[test]
    fn the_text_names_batches_zones_and_why_nothing_moves() {
        let node = |n: &str, z: &str| PlannedNode {
            name: n.into(),
            zone: Some(z.into()),
            created: 0,
        };
        let p = Plan {
            pool: "worker".into(),
            config: "rendered-worker-1".into(),
            image: None,
            members: 4,
            max_unavailable: 2,
            updated: vec![],
            in_flight: vec!["w0".into()],
            unavailable: vec![("w0".into(), "Updating"), ("w3".into(), "NotReady")],
            batches: vec![vec![node("w1", "a"), node("w2", "b")]],
            machine_images: vec![("w4".into(), "canary".into())],
            conflicts: vec![],
            not_ready: vec!["w3".into()],
            blocked: Some("waiting for the image: MachineOSBuild worker-1 is Building".into()),
        };
        assert_eq!(
            text(&p),
            "pool worker: 4 nodes, maxUnavailable 2, config rendered-worker-1, image (not built yet)\n\
             updated (0): -\n\
             updating now (1): w0\n\
             unavailable now (2): w0(Updating) w3(NotReady)\n\
             w4: follows MachineImage canary\n\
             waiting to be Ready: w3\n\
             blocked: waiting for the image: MachineOSBuild worker-1 is Building\n\
             batch 1: w1(a) w2(b)"
        );
    }
}
