//! `xtask inprocess`: the native builder used as a library, as the controller uses it — one
//! process, one registry client (its connections reused), one [`IndexMemory`] — timing
//! build after build of one rendered MachineConfig onto one base. Each build sets another
//! mtime, so each uploads a new layer, config and manifest, as a configuration change would.
//!
//! It prints one JSON object: every build's wall time and stage timings, the medians,
//! builds per second, and the process's CPU time over the timed builds. `xtask bench` runs
//! it pinned to one CPU (`taskset -c 0`), so "builds per second" is on one core.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use machineos_baseindex::{Cache, IndexMemory};
use machineos_image::{ImageRef, Platform};
use machineos_layer::write::LayerOptions;
use machineos_native_builder::{BuildSpec, Environment, Quiet};
use machineos_registry::{Registry, RegistryOptions};
use serde_json::{Value, json};

/// Arguments of `xtask inprocess`.
#[derive(Debug, clap::Args)]
pub struct InprocessArgs {
    /// The base image (`host/repo:tag`).
    #[arg(long)]
    pub base: String,
    /// The output repository (`host/repo`); build `i` is tagged `inproc-<i>`.
    #[arg(long)]
    pub output: String,
    /// The rendered MachineConfig (JSON), e.g. `bench/rendered/currentconfig`.
    #[arg(long, default_value = "bench/rendered/currentconfig")]
    pub rendered: PathBuf,
    /// The pool it was rendered for.
    #[arg(long, default_value = "worker")]
    pub pool: String,
    /// The base index cache directory (the first, untimed build fills it if empty).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Timed builds (after one untimed warm-up build).
    #[arg(long, default_value_t = 30)]
    pub reps: usize,
    /// The first mtime; build `i` uses `epoch + i`.
    #[arg(long, default_value_t = 1_800_000_000)]
    pub epoch: u64,
    /// Blobs up to this size go up in the PUT that closes their upload (the registry
    /// client's `monolithic_max`; 0: a PATCH first, for an A/B of the two).
    #[arg(long, default_value_t = machineos_registry::MONOLITHIC_MAX)]
    pub monolithic_max: u64,
}

/// Runs the builds and prints the JSON report.
pub fn run(args: &InprocessArgs) -> Result<()> {
    // One worker thread: the controller's build is latency on a shared runtime; the CPU
    // figure counts the blocking threads too.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    let report = rt.block_on(builds(args))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// CPU time of the whole process (every thread) so far, from `/proc/self/stat` (the
/// workspace forbids the `unsafe` a `getrusage` call needs).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime is the 14th field of
    // the whole line, stime the 15th, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

async fn builds(args: &InprocessArgs) -> Result<Value> {
    let text = std::fs::read_to_string(&args.rendered)
        .with_context(|| format!("reading {}", args.rendered.display()))?;
    let rendered: machineos_api::v1::MachineConfig = serde_json::from_str(&text)
        .with_context(|| format!("parsing {}", args.rendered.display()))?;
    let recipe = machineos_layering::recipe(&rendered, &args.pool)
        .with_context(|| format!("the recipe of {}", args.rendered.display()))?;
    let registry = Registry::new(RegistryOptions {
        monolithic_max: args.monolithic_max,
        ..RegistryOptions::default()
    })
    .context("registry client")?;
    let memory = IndexMemory::new(256 << 20);
    let base = ImageRef::parse(&args.base).context("--base")?;
    let mut samples = Vec::new();
    let mut cpu_start = 0.0;
    let mut started = Instant::now();
    for i in 0..=args.reps {
        if i == 1 {
            cpu_start = cpu_seconds();
            started = Instant::now();
        }
        let output = ImageRef::parse(&format!("{}:inproc-{i}", args.output)).context("--output")?;
        let spec = BuildSpec {
            base: base.clone(),
            output,
            platform: Platform::host(),
            recipe: recipe.clone(),
            created_by: "xtask inprocess".into(),
            layer: LayerOptions {
                mtime: args.epoch + i as u64,
                ..LayerOptions::default()
            },
            layer_out: None,
        };
        let env = Environment {
            registry: Some(registry.for_operation()),
            cache: args.cache_dir.clone().map(Cache::new),
            memory: Some(memory.clone()),
            progress: Arc::new(Quiet),
        };
        let t = Instant::now();
        let outcome = machineos_native_builder::build(spec, env)
            .await
            .with_context(|| format!("build {i}"))?;
        let wall = t.elapsed().as_secs_f64() * 1e3;
        if i > 0 {
            samples.push(json!({
                "wallMs": wall,
                "timings": outcome.timings,
                "cache": outcome.cache,
            }));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let median = |key: &dyn Fn(&Value) -> f64| {
        let mut v: Vec<f64> = samples.iter().map(key).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let stage = |name: &'static str| move |s: &Value| s["timings"][name].as_f64().unwrap_or(0.0);
    let stats = memory.stats();
    Ok(json!({
        "builds": samples.len(),
        "wallMsMedian": median(&|s| s["wallMs"].as_f64().unwrap_or(0.0)),
        "stagesMsMedian": {
            "resolve": median(&stage("resolveMs")),
            "index": median(&stage("indexMs")),
            "plan": median(&stage("planMs")),
            "derive": median(&stage("deriveMs")),
            "publish": median(&stage("publishMs")),
        },
        "buildsPerSecond": samples.len() as f64 / elapsed,
        "cpuMsPerBuild": cpu * 1e3 / samples.len().max(1) as f64,
        "indexMemory": {"entries": stats.entries, "bytes": stats.bytes, "hits": stats.hits, "misses": stats.misses},
        "samples": samples,
    }))
}

/// Runs `xtask inprocess` (this executable) pinned to one CPU (`taskset -c 0`) and returns
/// its JSON report: the case `xtask bench` reports as "(e)".
pub fn run_pinned(
    base: &str,
    output: &str,
    rendered: &std::path::Path,
    cache_dir: &std::path::Path,
    reps: usize,
) -> Result<Value> {
    let me = std::env::current_exe().context("locating xtask")?;
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1_900_000_000, |d| d.as_secs());
    let out = std::process::Command::new("taskset")
        .arg("-c")
        .arg("0")
        .arg(&me)
        .args([
            "inprocess",
            "--base",
            base,
            "--output",
            output,
            "--rendered",
        ])
        .arg(rendered)
        .arg("--cache-dir")
        .arg(cache_dir)
        .args(["--reps", &reps.to_string(), "--epoch", &epoch.to_string()])
        .output()
        .context("running `taskset -c 0 xtask inprocess` (util-linux's taskset)")?;
    if !out.status.success() {
        anyhow::bail!(
            "xtask inprocess failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("parsing xtask inprocess's report")
}
