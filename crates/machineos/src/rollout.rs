//! `machineos rollout plan`: print, without changing anything, the order and batches in
//! which the controller would move a pool's nodes (machineos-rollout's `plan`, read from the
//! cluster kubectl would use). `machineos rollout status`: where the rollout stands, once or
//! until it ends (`--watch`), as `kubectl rollout status` does for a Deployment, with an
//! estimate of the time left from the per-node update times measured so far
//! (machineos-rollout's `status`); `--watch` prints again when the text would change (the
//! estimate to the minute), in either output.

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
    /// Where a pool's rollout stands: its image, updated of total, each moving node's phase,
    /// what holds it back. Exit 0 when every node is updated, 1 when the rollout is halted
    /// by a failed node (or on an error), 2 when it is still going (without --watch).
    Status(StatusArgs),
}

#[derive(Debug, clap::Args)]
struct StatusArgs {
    /// The MachineConfigPool.
    #[arg(long, value_name = "POOL")]
    pool: String,
    /// Print again on every change until the pool is updated (exit 0) or halted (exit 1).
    #[arg(long, short = 'w')]
    watch: bool,
    /// Seconds between looks with --watch.
    #[arg(long, value_name = "SECONDS", default_value_t = 2)]
    interval: u64,
    /// `text` or `json`.
    #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
    /// The controller's namespace (its ConfigMaps decide legacy opt-in).
    #[arg(long, env = "POD_NAMESPACE", default_value = "machineos")]
    namespace: String,
    /// As the controller's `--min-ready-seconds`.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    min_ready_seconds: i64,
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

/// Run `machineos rollout …`: the exit code.
pub fn run(args: &RolloutArgs) -> anyhow::Result<u8> {
    match &args.command {
        RolloutCommand::Plan(a) => run_plan(a).map(|()| 0),
        RolloutCommand::Status(a) => run_status(a),
    }
}

fn run_status(a: &StatusArgs) -> anyhow::Result<u8> {
    crate::cli::runtime()?.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("finding the cluster (in-cluster, KUBECONFIG, ~/.kube/config)")?;
        let mut last = String::new();
        loop {
            let s = machineos_controller::rollout::status_from_cluster(
                &client,
                &a.namespace,
                &a.pool,
                a.min_ready_seconds,
            )
            .await
            .map_err(anyhow::Error::msg)
            .context("rollout status")?;
            // Compared as text (the estimate to the minute), so the JSON is not printed again
            // on every look only because a second passed.
            let text = status_text(&s);
            if text != last {
                if a.output == "json" {
                    crate::cli::emit(&serde_json::to_string(&s)?)?;
                } else {
                    crate::cli::emit(&text)?;
                }
                last = text;
            }
            let code = status_code(&s);
            if !a.watch || code != 2 {
                return Ok(code);
            }
            tokio::time::sleep(std::time::Duration::from_secs(a.interval.max(1))).await;
        }
    })
}

/// 0 done, 1 halted, 2 still going.
fn status_code(s: &machineos_rollout::Status) -> u8 {
    if s.done {
        0
    } else if s.halted {
        1
    } else {
        2
    }
}

/// The status as text: a header with a progress bar, then the moving and held nodes.
pub fn status_text(s: &machineos_rollout::Status) -> String {
    const WIDTH: usize = 20;
    let filled = (s.updated * WIDTH).checked_div(s.total).unwrap_or(WIDTH);
    let mut out = format!(
        "pool {}: [{}{}] {}/{} nodes updated, image {}\n",
        s.pool,
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        s.updated,
        s.total,
        s.image.as_deref().unwrap_or("(not built yet)")
    );
    for (node, phase) in &s.moving {
        out.push_str(&format!("  {node}: {phase}\n"));
    }
    for h in &s.held {
        out.push_str(&format!("  {}: held: {}\n", h.node, h.reason));
    }
    if let Some(b) = &s.blocked {
        out.push_str(&format!("blocked: {b}\n"));
    }
    out.push_str(if s.done {
        "rollout complete"
    } else if s.halted {
        "rollout halted: a node failed its update (kubectl describe mcp names it)"
    } else if s.paused {
        "rollout paused (spec.paused)"
    } else {
        "rollout in progress"
    });
    if s.done || s.halted || s.paused {
        return out;
    }
    if let Some(e) = &s.estimate {
        let left = if e.seconds_left < 60 {
            "less than a minute left".to_owned()
        } else {
            format!("about {} left", duration(e.seconds_left))
        };
        let soak = if e.soak_seconds > 0 {
            format!(" + {} soak", duration(e.soak_seconds))
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\n{left} ({} per node{soak}, measured on {} node{})",
            duration(e.per_node_seconds),
            e.measured_nodes,
            if e.measured_nodes == 1 { "" } else { "s" }
        ));
    } else if let Some(why) = s.no_estimate {
        out.push_str(&format!("\nno estimate yet ({why})"));
    }
    out
}

/// A duration for people: `40s`, `6m`, `1h05m` (to the minute from a minute on).
fn duration(seconds: u64) -> String {
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds.saturating_add(30) / 60;
    if minutes < 60 {
        format!("{minutes}m")
    } else {
        format!("{}h{:02}m", minutes / 60, minutes % 60)
    }
}

fn run_plan(a: &PlanArgs) -> anyhow::Result<()> {
    let (plan, disruption) = crate::cli::runtime()?
        .block_on(async {
            let client = kube::Client::try_default()
                .await
                .map_err(|e| format!("no cluster: {e}"))?;
            // What the moves cost is extra: a reader who may not read MachineConfigs still
            // gets the plan, with the reason in place of the costs.
            let (plan, disruption) = machineos_controller::rollout::plan_with_disruption(
                &client,
                &a.namespace,
                &a.pool,
                a.node_name.as_deref(),
                a.min_ready_seconds,
            )
            .await?;
            Ok::<_, String>((plan, disruption))
        })
        .map_err(anyhow::Error::msg)
        .context("rollout plan")?;
    if a.output == "json" {
        let mut v = serde_json::to_value(&plan)?;
        v["disruption"] = match &disruption {
            Ok((d, source)) => {
                let mut dj = serde_json::to_value(d)?;
                dj["policies"] = serde_json::json!(source);
                // The rollout and the agent act on it: moves below Drain take no slot and
                // are applied live; SoftReboot soft-reboots.
                dj["actedOn"] = serde_json::json!(true);
                dj
            }
            Err(e) => serde_json::json!({"error": e}),
        };
        return crate::cli::emit(&serde_json::to_string_pretty(&v)?);
    }
    let mut out = text(&plan);
    out.push('\n');
    match &disruption {
        Ok((d, source)) => out.push_str(&disruption_text(d, source)),
        Err(e) => out.push_str(&format!("disruption by policy: unknown ({e})")),
    }
    crate::cli::emit(out.trim_end())
}

/// What the moves cost, by the node disruption policies: the strongest class, then one line
/// per node.
pub fn disruption_text(d: &machineos_disruption::Disruption, source: &str) -> String {
    use machineos_disruption::Action;
    let describe = |a: &Action| match a {
        Action::Reload(s) | Action::Restart(s) => format!("{} {s}", a.type_name()),
        other => other.type_name().to_owned(),
    };
    let mut out = format!(
        "disruption by policy ({source}): {:?} (a move below Drain is applied live and takes no slot)\n",
        d.class
    );
    for n in &d.nodes {
        let actions: Vec<String> = n.actions.iter().map(describe).collect();
        let why: Vec<String> = n.reasons.iter().map(|r| r.change.clone()).collect();
        out.push_str(&format!(
            "  {}: {:?}{} — {} ({})\n",
            n.node,
            n.class,
            if n.drain { ", drained" } else { "" },
            actions.join(", "),
            if why.is_empty() {
                "no change".to_owned()
            } else {
                why.join(", ")
            }
        ));
    }
    out.trim_end().to_owned()
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
    out.push_str(&format!("health gate: {}\n", p.health_gate));
    if !p.canaries.is_empty() {
        out.push_str(&format!(
            "canaries (first, alone): {}\n",
            p.canaries.join(" ")
        ));
    }
    for (node, verdict) in &p.health {
        out.push_str(&format!("{node}: {verdict}\n"));
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
    fn the_status_text_shows_progress_phases_and_what_holds_the_pool() {
        let s = machineos_rollout::Status {
            pool: "worker".into(),
            image: Some("reg/os@sha256:11".into()),
            total: 4,
            updated: 1,
            moving: vec![("w1".into(), "draining"), ("w2".into(), "soaking")],
            held: vec![machineos_rollout::status::Held {
                node: "w3".into(),
                reason: "drain blocked: pod apps/web-0".into(),
            }],
            blocked: None,
            paused: false,
            halted: false,
            done: false,
            estimate: None,
            no_estimate: Some(machineos_rollout::status::NO_NODE_FINISHED),
        };
        assert_eq!(
            status_text(&s),
            "pool worker: [#####...............] 1/4 nodes updated, image reg/os@sha256:11\n  \
             w1: draining\n  w2: soaking\n  w3: held: drain blocked: pod apps/web-0\n\
             rollout in progress\n\
             no estimate yet (no node has finished)"
        );
        assert_eq!(status_code(&s), 2);
        let estimated = machineos_rollout::Status {
            estimate: Some(machineos_rollout::status::Estimate {
                seconds_left: 12 * 60,
                per_node_seconds: 6 * 60,
                soak_seconds: 0,
                measured_nodes: 3,
            }),
            no_estimate: None,
            ..s.clone()
        };
        assert!(
            status_text(&estimated).ends_with(
                "rollout in progress\nabout 12m left (6m per node, measured on 3 nodes)"
            ),
            "{}",
            status_text(&estimated)
        );
        let soaked = machineos_rollout::Status {
            estimate: Some(machineos_rollout::status::Estimate {
                seconds_left: 20,
                per_node_seconds: 3900,
                soak_seconds: 30,
                measured_nodes: 1,
            }),
            ..estimated
        };
        assert!(
            status_text(&soaked).ends_with(
                "\nless than a minute left (1h05m per node + 30s soak, measured on 1 node)"
            ),
            "{}",
            status_text(&soaked)
        );
        let done = machineos_rollout::Status {
            updated: 4,
            moving: vec![],
            held: vec![],
            done: true,
            no_estimate: None,
            ..s
        };
        assert!(status_text(&done).ends_with("rollout complete"));
        assert_eq!(status_code(&done), 0);
    }

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
            health_gate: "Ready within 10m, held 0s".into(),
            canaries: vec!["w1".into()],
            health: vec![(
                "w0".into(),
                "rolled back: failed node Ready (Ready=False) on r/os@sha256:bb".into(),
            )],
        };
        assert_eq!(
            text(&p),
            "pool worker: 4 nodes, maxUnavailable 2, config rendered-worker-1, image (not built yet)\n\
             updated (0): -\n\
             updating now (1): w0\n\
             unavailable now (2): w0(Updating) w3(NotReady)\n\
             w4: follows MachineImage canary\n\
             waiting to be Ready: w3\n\
             health gate: Ready within 10m, held 0s\n\
             canaries (first, alone): w1\n\
             w0: rolled back: failed node Ready (Ready=False) on r/os@sha256:bb\n\
             blocked: waiting for the image: MachineOSBuild worker-1 is Building\n\
             batch 1: w1(a) w2(b)"
        );
    }

    #[test]
    fn the_disruption_text_names_the_class_actions_and_changes_per_node() {
        use machineos_disruption::{Action, Class, Disruption, NodeDisruption, Reason};
        let d = Disruption {
            to: "rendered-worker-b".into(),
            class: Class::Reboot,
            nodes: vec![
                NodeDisruption {
                    node: "w1".into(),
                    from: Some("rendered-worker-a".into()),
                    class: Class::Reload,
                    drain: false,
                    actions: vec![Action::Reload("crio.service".into())],
                    reasons: vec![Reason {
                        change: "file /etc/containers/policy.json".into(),
                        policy: Some("file /etc/containers/policy.json".into()),
                        actions: vec![Action::Reload("crio.service".into())],
                    }],
                },
                NodeDisruption {
                    node: "w2".into(),
                    from: None,
                    class: Class::Reboot,
                    drain: true,
                    actions: vec![Action::Reboot],
                    reasons: vec![Reason {
                        change: "Node w2 has no currentConfig".into(),
                        policy: None,
                        actions: vec![Action::Reboot],
                    }],
                },
            ],
        };
        assert_eq!(
            disruption_text(&d, "the MCO's defaults"),
            "disruption by policy (the MCO's defaults): Reboot (a move below Drain is applied live and takes no slot)\n  \
             w1: Reload — Reload crio.service (file /etc/containers/policy.json)\n  \
             w2: Reboot, drained — Reboot (Node w2 has no currentConfig)"
        );
    }
}
