//! `machineos`: the command-line shim over the machineos libraries.
//!
//! Each subcommand parses its arguments, calls one library function, and prints; the
//! logic lives in the crates (`machineos-build`, `machineos-render`, `machineos-api`).

mod build;

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
