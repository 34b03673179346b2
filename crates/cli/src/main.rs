//! `machineos`: the command-line shim over the machineos libraries.
//!
//! Each subcommand parses its arguments, calls one library function, and prints; the
//! logic lives in the crates (`machineos-build`, `machineos-render`, `machineos-api`).

mod build;
mod input;

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
    /// Compute the image layer that ignition-apply would write over a base root
    /// filesystem, and write it as a deterministic tar.
    Build(build::BuildArgs),
    /// Print the CustomResourceDefinitions of every machineos API kind as YAML.
    Crds,
    /// Render a pool's MachineConfigs into one rendered MachineConfig (JSON), with the
    /// MCO's merge rules.
    Render(RenderCmd),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MACHINEOS_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Build(args) => build::run(&args),
        Command::Render(cmd) => render(&cmd),
        Command::Crds => {
            print!("{}", machineos_api::crds_yaml());
            Ok(())
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
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
}

fn render(cmd: &RenderCmd) -> anyhow::Result<()> {
    match input::read(&cmd.inputs, &cmd.render)? {
        input::Input::Ignition { name, .. } => {
            anyhow::bail!(
                "{name}: an Ignition config has nothing to render; give MachineConfig manifests"
            )
        }
        input::Input::Rendered(r) => {
            println!("{}", serde_json::to_string_pretty(&r.machine_config)?);
            Ok(())
        }
    }
}
