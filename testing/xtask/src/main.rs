//! `xtask`: repository tasks that are programs rather than tests.
//!
//! - `xtask bench`: the benchmark of `machineos build` against the MCO's buildah build
//!   (see `bench/README.md`); `bash scripts/bench.sh` builds and runs it.
//! - `xtask contents`: peak memory and time of builds whose file contents are huge (a
//!   gzip bomb, a large data: URL), and the data: URL decoding rate.
//! - `xtask inprocess`: warm builds with the native builder used as a library, as the
//!   controller runs them (one process, one registry client, indexes kept in memory).
//! - `xtask fixture`: regenerates the benchmark's MachineConfigs in `bench/machineconfigs`
//!   and their render in `bench/rendered`.

mod base;
mod bench;
mod buildah;
mod compare;
mod contents;
mod fixture;
mod inprocess;
mod measure;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Repository tasks.
#[derive(Debug, Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Time `machineos build` (warm and cold base index cache, 1 GiB and 100 MiB bases)
    /// against buildah doing the MCO's build, check both produce the same filesystem
    /// changes, and print a markdown report.
    Bench(bench::BenchArgs),
    /// Regenerate `bench/machineconfigs` (and `bench/rendered` with `machineos render`).
    Fixture(FixtureArgs),
    /// Peak memory and time of builds with huge file contents (a gzip bomb, a large data:
    /// URL), and the data: URL decoding rate.
    Contents(contents::ContentsArgs),
    /// Time warm builds with the native builder as a library, in one process (as the
    /// controller builds): latency per build and builds per second.
    Inprocess(inprocess::InprocessArgs),
}

/// Arguments of `xtask fixture`.
#[derive(Debug, clap::Args)]
struct FixtureArgs {
    /// Where the MachineConfig manifests go.
    #[arg(long, default_value = "bench/machineconfigs")]
    out: PathBuf,
    /// Where the rendered MachineConfig's `currentconfig` and `config.ign` go.
    #[arg(long, default_value = "bench/rendered")]
    rendered: PathBuf,
    /// The `machineos` binary used to render. Defaults to the one next to this executable;
    /// without it only the manifests are written.
    #[arg(long)]
    machineos: Option<PathBuf>,
}

/// Flushes dirty pages so that one measured command does not pay for the previous one's
/// writes. Failures are ignored: it is an optimisation of fairness, not of correctness.
pub fn sync() {
    let _ = std::process::Command::new("sync").status();
}

fn fixture(args: &FixtureArgs) -> anyhow::Result<()> {
    let s = fixture::write(&args.out)?;
    eprintln!(
        "wrote {} MachineConfigs to {} ({} files, {} units, {} bytes)",
        s.manifests,
        args.out.display(),
        s.files,
        s.units,
        s.bytes
    );
    let bin = match &args.machineos {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name("machineos"),
    };
    if !bin.is_file() {
        eprintln!(
            "{} not found: bench/rendered not updated (build machineos or give --machineos)",
            bin.display()
        );
        return Ok(());
    }
    let out = measure::run(
        &bin.display().to_string(),
        &[
            "render",
            "--pool",
            "worker",
            &args.out.display().to_string(),
        ],
    )?;
    let value: serde_json::Value =
        serde_json::from_str(&out).context("parsing `machineos render`'s output")?;
    let config = value
        .pointer("/spec/config")
        .context("the rendered MachineConfig has no spec.config")?;
    std::fs::create_dir_all(&args.rendered)?;
    let mut ign = serde_json::to_vec_pretty(config)?;
    ign.push(b'\n');
    for (name, bytes) in [
        ("currentconfig", serde_json::to_vec(&value)?),
        ("config.ign", ign),
    ] {
        let path = args.rendered.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "wrote {}/currentconfig and config.ign ({})",
        args.rendered.display(),
        value
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Fixture(args) => fixture(args).map(|()| ExitCode::SUCCESS),
        Command::Contents(args) => contents::run(args).map(|()| ExitCode::SUCCESS),
        Command::Inprocess(args) => inprocess::run(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
