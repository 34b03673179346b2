//! `machineos build`: inputs → a layered image published by digest (from a base image), or
//! just the layer (over an unpacked root filesystem with `--base-dir`).

use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use machineos_image::{ImageRef, Platform};
use machineos_layer::write::{self, LayerOptions};
use machineos_layer::{DirView, EntryKind, Plan};
use machineos_layering::Recipe;
use machineos_native_builder::output::OutputFile;
use machineos_native_builder::{BuildSpec, Environment, Progress};

use crate::input::Input;
use crate::registry::RegistryArgs;

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

/// The inputs as a recipe (see [`machineos_layering`]), its warnings printed.
fn recipe(args: &BuildArgs) -> anyhow::Result<Recipe> {
    let recipe = match crate::input::read(&args.inputs, &args.render)? {
        Input::Ignition { name, bytes } => machineos_layering::ignition_recipe(&bytes, &name)?,
        Input::Rendered(r) => {
            machineos_layering::recipe_of(&r.machine_config, r.ignition.clone(), &args.render.pool)?
        }
    };
    for w in &recipe.warnings {
        eprintln!("{}: {w}", recipe.source_name);
    }
    let os = &recipe.os_changes;
    if !os.is_empty() {
        eprintln!(
            "{}: warning: not applied by the native builder (they need an RPM install or a boot \
             argument change): extensions {:?}, kernelType {:?}, kernelArguments {:?}",
            recipe.source_name,
            os.extensions,
            os.kernel_type.as_deref().unwrap_or("default"),
            os.kernel_arguments
        );
    }
    Ok(recipe)
}

/// Run `machineos build`.
pub fn run(args: &BuildArgs) -> anyhow::Result<()> {
    let recipe = recipe(args)?;
    if let Some(dir) = &args.base_dir {
        return layer_only(args, dir, recipe);
    }
    let base = match (&args.base, &recipe.base_image) {
        (Some(b), _) => b.clone(),
        (None, Some(url)) => url.clone(),
        (None, None) => bail!(
            "{}: no base image: give --base IMAGE (or a MachineConfig with spec.osImageURL, or --os-image-url)",
            recipe.source_name
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
        registry: args.registry.client(&[&base, &output])?,
        cache,
        progress: progress.clone(),
    };
    let spec = BuildSpec {
        base,
        output,
        platform,
        recipe: recipe.clone(),
        created_by: format!("machineos build {}", env!("CARGO_PKG_VERSION")),
        layer: LayerOptions::from_env()?,
        layer_out: args.layer_out.clone(),
    };
    let outcome = crate::runtime()?.block_on(machineos_native_builder::build(spec, env));
    progress.finish();
    let outcome = outcome?;
    for w in &outcome.plan.warnings {
        eprintln!("{}: {w}", recipe.source_name);
    }
    for w in &outcome.warnings {
        eprintln!("{w}");
    }
    let counts = Counts::of(&outcome.plan, &recipe.config);
    match args.output_format {
        Format::Json => {
            let summary = serde_json::json!({
                "input": recipe.source_name,
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
fn layer_only(args: &BuildArgs, dir: &Path, recipe: Recipe) -> anyhow::Result<()> {
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
    let name = recipe.source_name;
    let plan = machineos_layer::plan::plan_with(&recipe.config, &base, &recipe.plan_options)
        .map_err(|error| machineos_layer::LayerError::Plan {
            source_name: name.clone(),
            error,
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
    let counts = Counts::of(&plan, &recipe.config);
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
            crate::emit(digests.digest.as_str())?;
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
