//! `machineos`: the command-line shim over the machineos libraries.
//!
//! Each subcommand parses its arguments, calls one library function, and prints; the
//! logic lives in the crates (`machineos-layer`, `machineos-render`, `machineos-native-builder`,
//! `machineos-api`).

mod agent;
mod build;
mod build_args;
mod build_multi;
mod check;
mod cli;
mod controller;
mod diff;
mod disruption;
mod input;
mod registry;
mod rollout;

use clap::{Parser, Subcommand};

/// Build layered OS images from MachineConfigs, natively and reproducibly.
#[derive(Debug, Parser)]
#[command(name = "machineos", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a layered image: the base image plus one layer with what ignition-apply
    /// would write for the inputs, published by digest to a registry or an OCI layout.
    /// Extensions, a kernelType or --containerfile then run as RUN steps with the local
    /// buildah (registry output).
    Build(Box<build_args::BuildArgs>),
    /// Describe an image: platform, labels, layers, and the rendered MachineConfig it
    /// embeds.
    Inspect(InspectCmd),
    /// Print the CustomResourceDefinitions of every machineos API kind as YAML.
    Crds,
    /// Run the cluster side: render pools' MachineConfigs, build the images of the pools
    /// that opt in (MachineOSConfig, or the legacy label + ConfigMap), record them, keep
    /// them current. Finds the cluster as kubectl does (in-cluster, KUBECONFIG,
    /// ~/.kube/config).
    Controller(Box<controller::ControllerArgs>),
    /// Run the node agent (one per node, a DaemonSet): stage the images the rollout asks
    /// for, then cordon, drain (Eviction API, PodDisruptionBudgets honoured), deploy,
    /// reboot, verify and uncordon, reporting on the node and its MachineConfigNode.
    Agent(Box<agent::AgentArgs>),
    /// Render a pool's MachineConfigs into one rendered MachineConfig (JSON), with the
    /// MCO's rules and the MCO's name; with --diff, compare it with one the MCO rendered.
    Render(RenderCmd),
    /// Preflight for a build: does pulling the base need credentials, do the given ones pull
    /// it, may they push to the output repository (nothing is written). Exit 1 on a failure.
    Check(Box<check::CheckArgs>),
    /// Show how the controller would roll a pool's nodes onto its image (`rollout plan
    /// --pool P`): order and batches, nothing changed.
    Rollout(rollout::RolloutArgs),
    /// What moving a node from one rendered MachineConfig to another costs it, by the MCO's
    /// node disruption policies: reboot, drain, service reloads or restarts, or nothing.
    Disruption(disruption::DisruptionArgs),
    /// What differs between two images (files with mode, owner and digest, the kernel, the
    /// base, the embedded MachineConfigs) and what moving a node between them costs, from
    /// their base indexes, nothing unpacked. Exit 0 when identical, 1 when different.
    Diff(Box<diff::DiffArgs>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // A long-running controller logs what it does; the one-shot commands only warnings.
    let default_level = match cli.command {
        Command::Controller(_) | Command::Agent(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(cli::log_colour(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MACHINEOS_LOG")
                .unwrap_or_else(|_| default_level.into()),
        )
        .init();
    let result = match cli.command {
        Command::Build(args) => build::run(&args),
        Command::Render(cmd) if cmd.diff.is_some() => {
            // Like diff(1): 0 identical, 1 different, 2 trouble.
            return match render_diff(&cmd) {
                Ok(true) => std::process::ExitCode::SUCCESS,
                Ok(false) => std::process::ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {}", cli::error_chain(&e));
                    std::process::ExitCode::from(2)
                }
            };
        }
        Command::Diff(args) => {
            // Like diff(1): 0 identical, 1 different, 2 trouble.
            return match diff::run(&args) {
                Ok(false) => std::process::ExitCode::SUCCESS,
                Ok(true) => std::process::ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {}", cli::error_chain(&e));
                    std::process::ExitCode::from(2)
                }
            };
        }
        Command::Render(cmd) => render(&cmd),
        Command::Inspect(cmd) => inspect(&cmd),
        Command::Controller(args) => controller::run(&args),
        Command::Rollout(args) => {
            return match rollout::run(&args) {
                Ok(code) => std::process::ExitCode::from(code),
                Err(e) => {
                    eprintln!("error: {}", cli::error_chain(&e));
                    std::process::ExitCode::FAILURE
                }
            };
        }
        Command::Check(args) => check::run(&args),
        Command::Agent(args) => agent::run(&args),
        Command::Crds => cli::emit(machineos_api::crds_yaml().trim_end()),
        Command::Disruption(args) => disruption::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cli::error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Arguments of `machineos render`.
#[derive(Debug, clap::Args)]
struct RenderCmd {
    #[command(flatten)]
    render: input::RenderArgs,
    /// MachineConfig (and MachineConfigPool) manifests, or directories of them.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<std::path::PathBuf>,
    /// Compare the rendered MachineConfig with this one (YAML or JSON; `-` reads stdin, as
    /// in `kubectl get mc rendered-worker-… -o json | machineos render --diff - …`): print
    /// each difference, exit 0 when identical, 1 when not, 2 on error.
    #[arg(long, value_name = "FILE")]
    diff: Option<std::path::PathBuf>,
}

fn rendered(cmd: &RenderCmd) -> anyhow::Result<machineos_render::Rendered> {
    match input::read(&cmd.inputs, &cmd.render)? {
        input::Input::Ignition { name, .. } => {
            anyhow::bail!(
                "{name}: an Ignition config has nothing to render; give MachineConfig manifests"
            )
        }
        input::Input::Rendered(r) => Ok(*r),
    }
}

fn render(cmd: &RenderCmd) -> anyhow::Result<()> {
    let r = rendered(cmd)?;
    cli::emit(&serde_json::to_string_pretty(&r.machine_config)?)
}

/// `render --diff`: whether machineos's rendered MachineConfig equals the given one.
fn render_diff(cmd: &RenderCmd) -> anyhow::Result<bool> {
    use anyhow::Context;
    let path = cmd.diff.as_deref().context("--diff")?;
    let (name, bytes) = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).context("reading stdin")?;
        ("<stdin>".to_owned(), bytes)
    } else {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
        (name, bytes)
    };
    let given = machineos_render::load_machine_configs(&name, &bytes)?;
    let [given] = given.as_slice() else {
        anyhow::bail!(
            "{name}: --diff takes one MachineConfig, found {}",
            given.len()
        );
    };
    let ours = rendered(cmd)?;
    let differences = machineos_render::diff(&ours.machine_config, given);
    if differences.is_empty() {
        cli::emit(&format!(
            "{}: identical to {name} ({})",
            ours.machine_config.name(),
            given.name()
        ))?;
        return Ok(true);
    }
    cli::emit(&format!(
        "{} differs from {name} ({}) in {} place(s):",
        ours.machine_config.name(),
        given.name(),
        differences.len()
    ))?;
    for d in &differences {
        cli::emit(&format!("  {d}"))?;
    }
    Ok(false)
}

/// Arguments of `machineos inspect`.
#[derive(Debug, clap::Args)]
struct InspectCmd {
    /// The image: `host[:port]/repo[:tag][@digest]`, `docker://…` or `oci:DIR[:tag]`.
    #[arg(value_name = "IMAGE")]
    image: String,
    /// The platform to describe in a multi-platform image. Defaults to this machine's.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// `json` (the whole description, the default) or `text` (a summary: image, platform,
    /// OS variant, layers, embedded MachineConfig).
    #[arg(short = 'o', long = "output-format", default_value = "json", value_parser = ["json", "text"])]
    output_format: String,
    #[command(flatten)]
    registry: registry::RegistryArgs,
}

fn inspect(cmd: &InspectCmd) -> anyhow::Result<()> {
    use anyhow::Context;
    let image = machineos_image::ImageRef::parse(&cmd.image).context("IMAGE")?;
    let platform = match &cmd.platform {
        Some(p) => p.parse().context("--platform")?,
        None => machineos_image::Platform::host(),
    };
    let registry = cmd.registry.client(&[&image])?;
    let inspection = cli::runtime()?.block_on(machineos_native_builder::inspect::inspect(
        &image,
        &platform,
        registry.as_ref(),
    ))?;
    if cmd.output_format == "text" {
        let i = &inspection;
        cli::emit(&format!("image:    {}", i.image))?;
        cli::emit(&format!("platform: {}", i.platform))?;
        cli::emit(&format!("os:       {}", i.variant.summary()))?;
        if let Some(name) = &i.variant.pretty_name {
            cli::emit(&format!("          {name}"))?;
        }
        for w in &i.variant.warnings {
            cli::emit(&format!("          {w}"))?;
        }
        cli::emit(&format!("layers:   {}", i.layers.len()))?;
        let mc = i
            .machine_config
            .as_ref()
            .and_then(|m| m["metadata"]["name"].as_str())
            .unwrap_or("none");
        cli::emit(&format!("machineconfig: {mc}"))?;
    } else {
        cli::emit(&serde_json::to_string_pretty(&inspection)?)?;
    }
    Ok(())
}
