//! `machineos build`: inputs → a layered image published by digest (from a base image), or
//! just the layer (over an unpacked root filesystem with `--base-dir`).

use std::collections::BTreeMap;
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use machineos_image::{ImageRef, Platform};
use machineos_layer::plan::{ExtraFile, PlanOptions};
use machineos_layer::write::{self, LayerOptions};
use machineos_layer::{DirView, EntryKind, Plan};
use machineos_native_builder::output::OutputFile;
use machineos_native_builder::{BuildSpec, Environment, Metadata, Progress};

use crate::input::Input;
use crate::registry::RegistryArgs;

/// Where the MCO's build puts the rendered MachineConfig.
const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";

/// Arguments of `machineos build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The base OS image: `host[:port]/repo[:tag][@digest]`, `docker://…` or
    /// `oci:DIR[:tag]`. Defaults to the rendered MachineConfig's `spec.osImageURL`.
    #[arg(long, value_name = "IMAGE", conflicts_with = "base_dir")]
    base: Option<String>,
    /// Instead of a base image, plan over this unpacked root filesystem and write only the
    /// layer (`--layer-out`, `--blob-out`); nothing is published.
    #[arg(long, value_name = "DIR")]
    base_dir: Option<PathBuf>,
    /// Where to publish: `host[:port]/repo[:tag]` (tag defaults to `latest`) or
    /// `oci:DIR[:tag]`.
    #[arg(
        long,
        value_name = "DEST",
        default_value = "oci:./machineos-out",
        conflicts_with = "base_dir"
    )]
    output: String,
    /// The platform to take from a multi-platform base, `os/arch[/variant]`. Defaults to
    /// this machine's.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// Write the uncompressed layer tar that was added here.
    #[arg(long, value_name = "FILE")]
    layer_out: Option<PathBuf>,
    /// Write the gzip-compressed layer blob here (`--base-dir` only; with a base image the
    /// blob is in the output).
    #[arg(long, value_name = "FILE", requires = "base_dir")]
    blob_out: Option<PathBuf>,
    /// The base index cache. Defaults to `$XDG_CACHE_HOME/machineos` (`~/.cache/machineos`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Do not use the base index cache: index the base's layers every time.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Output format of the summary.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output_format: Format,
    #[command(flatten)]
    render: crate::input::RenderArgs,
    /// MachineConfig manifests (YAML or JSON, multi-document allowed) or directories of
    /// them, rendered for `--pool`; or a single Ignition config (spec 3.0.0–3.5.0).
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<PathBuf>,
}

/// Summary formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

/// What the inputs amount to, ready to plan.
struct Job {
    name: String,
    config: machineos_ignition::Config,
    opts: PlanOptions,
    labels: BTreeMap<String, String>,
    os_image_url: Option<String>,
}

fn job(args: &BuildArgs) -> anyhow::Result<Job> {
    Ok(match crate::input::read(&args.inputs, &args.render)? {
        Input::Ignition { name, bytes } => {
            let prepared = machineos_layer::prepare(&bytes, &name)?;
            for w in &prepared.warnings {
                eprintln!("{name}: {w}");
            }
            // A plain Ignition config gets exactly what ignition-apply would write.
            Job {
                name,
                config: prepared.config,
                opts: PlanOptions::default(),
                labels: BTreeMap::new(),
                os_image_url: None,
            }
        }
        Input::Rendered(r) => {
            let mc_name = r.machine_config.name().to_string();
            let config = crate::input::rendered_config(&r)?;
            // As the MCO's build: the rendered MachineConfig is written to
            // currentconfig before ignition-apply, and the commit empties /tmp & co.
            let opts = PlanOptions {
                extra_files: vec![ExtraFile {
                    path: CURRENT_CONFIG.into(),
                    contents: serde_json::to_vec(&r.machine_config)?,
                }],
                commit_cleanup: true,
            };
            let labels = BTreeMap::from([
                ("machineconfig".to_string(), mc_name.clone()),
                ("machineconfigpool".to_string(), args.render.pool.clone()),
            ]);
            let url = r.machine_config.spec.os_image_url.clone();
            Job {
                name: format!("MachineConfig {mc_name}"),
                config,
                opts,
                labels,
                os_image_url: (!url.is_empty()).then_some(url),
            }
        }
    })
}

/// Run `machineos build`.
pub fn run(args: &BuildArgs) -> anyhow::Result<()> {
    let job = job(args)?;
    if let Some(dir) = &args.base_dir {
        return layer_only(args, dir, job);
    }
    let base = match (&args.base, &job.os_image_url) {
        (Some(b), _) => b.clone(),
        (None, Some(url)) => url.clone(),
        (None, None) => bail!(
            "{}: no base image: give --base IMAGE (or a MachineConfig with spec.osImageURL, or --os-image-url)",
            job.name
        ),
    };
    let base = ImageRef::parse(&base).with_context(|| "--base")?;
    let output = ImageRef::parse(&args.output).with_context(|| "--output")?;
    let platform = match &args.platform {
        Some(p) => p.parse::<Platform>().context("--platform")?,
        None => Platform::host(),
    };
    let cache = if args.no_cache {
        None
    } else {
        let dir = match &args.cache_dir {
            Some(d) => d.clone(),
            None => machineos_baseindex::Cache::default_dir().context(
                "no cache directory: set XDG_CACHE_HOME or HOME, or give --cache-dir or --no-cache",
            )?,
        };
        Some(machineos_baseindex::Cache::new(dir))
    };
    let progress = Arc::new(Bar::new());
    let env = Environment {
        registry: args.registry.options()?,
        cache,
        progress: progress.clone(),
    };
    let spec = BuildSpec {
        base,
        output,
        platform,
        config: job.config.clone(),
        source_name: job.name.clone(),
        plan_options: job.opts.clone(),
        metadata: Metadata {
            labels: job.labels.clone(),
            created_by: format!("machineos build {}", env!("CARGO_PKG_VERSION")),
            comment: Some(job.name.clone()),
        },
        layer: LayerOptions::from_env()?,
        layer_out: args.layer_out.clone(),
    };
    let outcome = crate::runtime()?.block_on(machineos_native_builder::build(spec, env));
    progress.finish();
    let outcome = outcome?;
    for w in &outcome.plan.warnings {
        eprintln!("{}: {w}", job.name);
    }
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    let counts = Counts::of(&outcome.plan, &job.config);
    match args.output_format {
        Format::Json => {
            let summary = serde_json::json!({
                "input": job.name,
                "image": outcome.pullspec,
                "digest": outcome.manifest_digest.to_string(),
                "config": outcome.config_digest.to_string(),
                "base": outcome.base_pullspec,
                "platform": outcome.platform.to_string(),
                "baseLayers": outcome.base_layers,
                "layer": {
                    "digest": outcome.layer.digest,
                    "diffID": outcome.layer.diff_id,
                    "size": outcome.layer.size,
                    "uncompressedSize": outcome.layer.uncompressed_size,
                },
                "entries": outcome.plan.entries.len(),
                "files": counts.files,
                "units": counts.units,
                "whiteouts": counts.whiteouts,
                "baseIndexCache": outcome.cache,
                "warnings": outcome.warnings,
                "baseLayerReads": outcome.base_layer_reads,
                "baseBlobs": outcome.blobs,
                "timings": outcome.timings,
            });
            crate::emit(&serde_json::to_string_pretty(&summary)?)?;
            crate::emit(&outcome.pullspec)?;
        }
        Format::Text => {
            eprintln!(
                "base {} ({}, {} layers, {}); layer {} ({} entries: {} files, {} units, {} whiteouts; {} bytes gzip) in {:.1} ms",
                outcome.base_pullspec,
                outcome.platform,
                outcome.base_layers,
                outcome.cache,
                outcome.layer.digest,
                outcome.plan.entries.len(),
                counts.files,
                counts.units,
                counts.whiteouts,
                outcome.layer.size,
                outcome.timings.total_ms
            );
            crate::emit(&outcome.pullspec)?;
        }
    }
    Ok(())
}

/// Counts for the summary: files and units as the config declares them, whiteouts as the
/// layer carries them.
struct Counts {
    files: usize,
    units: usize,
    whiteouts: usize,
}

impl Counts {
    fn of(plan: &Plan, config: &machineos_ignition::Config) -> Counts {
        Counts {
            files: config.storage.files.len(),
            units: config.systemd.units.len(),
            whiteouts: plan
                .entries
                .iter()
                .filter(|e| matches!(e.kind, EntryKind::Whiteout | EntryKind::Opaque))
                .count(),
        }
    }
}

/// `--base-dir`: plan over an unpacked root filesystem, write the layer, publish nothing.
fn layer_only(args: &BuildArgs, dir: &Path, job: Job) -> anyhow::Result<()> {
    let started = Instant::now();
    if !dir.is_dir() {
        bail!("--base-dir {}: not a directory", dir.display());
    }
    // Both outputs are checked before any work, so a failure changes neither.
    let prepare = |flag: &str, path: &Option<PathBuf>| {
        path.as_deref()
            .map(OutputFile::prepare)
            .transpose()
            .with_context(|| flag.to_string())
    };
    let blob_out = prepare("--blob-out", &args.blob_out)?;
    let layer_out = prepare("--layer-out", &args.layer_out)?;
    let base = DirView::new(dir);
    let name = job.name;
    let plan =
        machineos_layer::plan::plan_with(&job.config, &base, &job.opts).map_err(|error| {
            machineos_layer::LayerError::Plan {
                source_name: name.clone(),
                error,
            }
        })?;
    for w in &plan.warnings {
        eprintln!("{name}: {w}");
    }
    let planned = started.elapsed();
    let lopts = LayerOptions::from_env()?;
    let digests = match blob_out {
        Some(mut out) => {
            let shown = format!("--blob-out {}", out.path().display());
            let d = write::write_blob(&plan, &lopts, BufWriter::new(out.file()))
                .and_then(|(d, w)| Ok((d, w.into_inner().map_err(|e| e.into_error())?)))
                .context(shown)?
                .0;
            out.commit().context("--blob-out")?;
            d
        }
        None => write::write_blob(&plan, &lopts, std::io::sink())?.0,
    };
    if let Some(mut out) = layer_out {
        let shown = format!("--layer-out {}", out.path().display());
        write::write_tar(&plan, &lopts, BufWriter::new(out.file()))
            .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
            .context(shown)?;
        out.commit().context("--layer-out")?;
    }
    let counts = Counts::of(&plan, &job.config);
    let total = started.elapsed();
    match args.output_format {
        Format::Json => {
            let summary = serde_json::json!({
                "input": name,
                "diffID": digests.diff_id,
                "layerDigest": digests.digest,
                "layerSize": digests.size,
                "uncompressedSize": digests.uncompressed_size,
                "entries": plan.entries.len(),
                "files": counts.files,
                "units": counts.units,
                "whiteouts": counts.whiteouts,
                "timings": { "planMs": planned.as_secs_f64() * 1e3, "totalMs": total.as_secs_f64() * 1e3 },
            });
            crate::emit(&serde_json::to_string_pretty(&summary)?)?;
        }
        Format::Text => {
            eprintln!(
                "{} entries ({} files, {} whiteouts), {} bytes uncompressed, {} bytes gzip, in {:.1} ms",
                plan.entries.len(),
                counts.files,
                counts.whiteouts,
                digests.uncompressed_size,
                digests.size,
                total.as_secs_f64() * 1e3
            );
            crate::emit(&format!("diff_id {}", digests.diff_id))?;
            crate::emit(&digests.digest)?;
        }
    }
    Ok(())
}

/// A spinner on stderr when it is a terminal; nothing otherwise.
struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    fn new() -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar(None);
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Bar(Some(bar))
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn event(&self, event: machineos_native_builder::Event) {
        let Some(bar) = &self.0 else { return };
        match event {
            machineos_native_builder::Event::Stage(s) => {
                if bar.length().is_some() {
                    // Back to a spinner after the layer bar.
                    bar.set_style(indicatif::ProgressStyle::default_spinner());
                    bar.unset_length();
                }
                bar.set_message(s.to_string())
            }
            machineos_native_builder::Event::IndexLayer { index, count, size } => {
                if bar.length() != Some(count as u64) {
                    bar.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{msg} [{bar:30}] {pos}/{len} layers ({elapsed})",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                        .progress_chars("=> "),
                    );
                    bar.set_length(count as u64);
                }
                bar.set_position(index as u64);
                bar.set_message(format!("indexing base layer ({size} bytes)"));
            }
            machineos_native_builder::Event::CopyBlob { digest, size } => {
                bar.set_message(format!("copying {digest} ({size} bytes)"))
            }
            machineos_native_builder::Event::Bytes(_) => {}
        }
    }
}
