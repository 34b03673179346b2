//! `machineos build`: inputs → a layered image published by digest (from a base image), or
//! just the layer (over an unpacked root filesystem with `--base-dir`).
//!
//! What the native engine cannot apply — `spec.extensions`, a `spec.kernelType` kernel
//! swap, a `--containerfile` — runs as RUN steps with the local buildah on top of the
//! native image, which is then pushed to `<output tag>-native` (see [`crate::run_steps`]);
//! without them, no buildah is involved.

use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use machineos_image::{Digest, ImageRef};
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
    /// Instead of --base: take the base (and the extensions image) for --platform from this
    /// file — CoreOS stream metadata, an OSImageStream or the machine-config-osimageurl
    /// ConfigMap, JSON or YAML (`kubectl get -o yaml`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["base", "base_dir"])]
    pub(crate) stream: Option<PathBuf>,
    /// The stream of --stream to use (`rhel-10`). Defaults to the file's default stream.
    #[arg(long, value_name = "NAME", requires = "stream")]
    pub(crate) stream_name: Option<String>,
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
    /// this machine's. `all` (every platform of the base) or a comma-separated list builds
    /// one image per platform and publishes an OCI index over them.
    #[arg(long, value_name = "OS/ARCH|all|LIST")]
    pub(crate) platform: Option<String>,
    /// Write the uncompressed layer tar that was added here.
    #[arg(long, value_name = "FILE")]
    pub(crate) layer_out: Option<PathBuf>,
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
    pub(crate) registry: RegistryArgs,
    /// A Containerfile to build on top, as a MachineOSConfig's `containerFile` (it must
    /// continue `FROM configs AS final`): the native image is pushed to
    /// `<output tag>-native` and the local buildah builds the result from it (registry
    /// --output only). Extensions and a kernelType of the MachineConfigs run the same way.
    #[arg(long, value_name = "FILE", conflicts_with = "base_dir")]
    pub(crate) containerfile: Option<PathBuf>,
    /// Output format of the summary. With RUN steps the JSON's fields describe the native
    /// image and `runSteps` the result (its `digest` and `image`); the last line of stdout is
    /// always the published result.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub(crate) output_format: Format,
    #[command(flatten)]
    pub(crate) render: crate::input::RenderArgs,
    /// MachineConfig manifests (YAML or JSON, multi-document allowed) or directories of
    /// them, rendered for `--pool`; or a single Ignition config (spec 3.0.0–3.5.0).
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<PathBuf>,
}

/// Summary formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

/// The inputs as a recipe (see [`machineos_layering`]), its warnings printed, and the
/// rendered MachineConfig (none for an Ignition input).
fn recipe(args: &BuildArgs) -> anyhow::Result<(Recipe, Option<machineos_api::v1::MachineConfig>)> {
    let (recipe, mc) = match crate::input::read(&args.inputs, &args.render)? {
        Input::Ignition { name, bytes } => {
            (machineos_layering::ignition_recipe(&bytes, &name)?, None)
        }
        Input::Rendered(r) => (
            machineos_layering::recipe_of(
                &r.machine_config,
                r.ignition.clone(),
                &args.render.pool,
            )?,
            Some(r.machine_config),
        ),
    };
    for w in &recipe.warnings {
        eprintln!("{}: {w}", recipe.source_name);
    }
    let os = &recipe.os_changes;
    if !os.kernel_arguments.is_empty() {
        eprintln!(
            "{}: warning: kernelArguments {:?} are not applied: they are boot arguments, not \
             image content",
            recipe.source_name, os.kernel_arguments
        );
    }
    if args.base_dir.is_some() && (!os.extensions.is_empty() || os.kernel_type.is_some()) {
        eprintln!(
            "{}: warning: not applied with --base-dir (they need RUN steps): extensions {:?}, \
             kernelType {:?}",
            recipe.source_name,
            os.extensions,
            os.kernel_type.as_deref().unwrap_or("default")
        );
    }
    Ok((recipe, mc))
}

/// The base index cache the arguments ask for.
fn cache(args: &BuildArgs) -> anyhow::Result<Option<machineos_baseindex::Cache>> {
    if args.no_cache {
        return Ok(None);
    }
    let dir = match &args.cache_dir {
        Some(d) => d.clone(),
        None => machineos_baseindex::Cache::default_dir().context(
            "no cache directory: set XDG_CACHE_HOME or HOME, or give --cache-dir or --no-cache",
        )?,
    };
    Ok(Some(machineos_baseindex::Cache::new(dir)))
}

/// Run `machineos build`.
pub fn run(args: &BuildArgs) -> anyhow::Result<()> {
    let (recipe, machine_config) = recipe(args)?;
    if let Some(dir) = &args.base_dir {
        return layer_only(args, dir, recipe);
    }
    let output = ImageRef::parse(&args.output).with_context(|| "--output")?;
    let platform = match crate::build_multi::choice(args.platform.as_deref())? {
        crate::build_multi::Choice::One(p) => p,
        many => {
            let fixed = match (&args.base, &recipe.base_image) {
                (Some(b), _) | (None, Some(b)) if args.stream.is_none() => {
                    Some(ImageRef::parse(b).with_context(|| "--base")?)
                }
                _ => None,
            };
            let cache = cache(args)?;
            return crate::build_multi::run(
                args,
                &recipe,
                machine_config.as_ref(),
                fixed,
                output,
                many,
                cache,
            );
        }
    };
    let from_stream = match &args.stream {
        Some(path) => crate::stream::bases_from_stream(
            path,
            args.stream_name.as_deref(),
            std::slice::from_ref(&platform),
        )?
        .pop(),
        None => None,
    };
    let base = match (&from_stream, &args.base, &recipe.base_image) {
        (Some(s), _, _) => s.base.clone(),
        (None, Some(b), _) | (None, None, Some(b)) => {
            ImageRef::parse(b).with_context(|| "--base")?
        }
        (None, None, None) => bail!(
            "{}: no base image: give --base IMAGE or --stream FILE (or a MachineConfig with spec.osImageURL, or --os-image-url)",
            recipe.source_name
        ),
    };
    let cache = cache(args)?;
    let run_plan = crate::run_steps::plan(
        machine_config.as_ref(),
        &recipe.source_name,
        args.containerfile.as_deref(),
        &args.render.pool,
        &platform,
    )?;
    let run_plan = crate::stream::with_extensions(run_plan, from_stream.as_ref());
    let runtime = crate::runtime()?;
    let registry = args.registry.client(&[&base, &output])?;
    // RUN steps: everything that can fail is checked before the native image is pushed.
    let run = match &run_plan {
        None => None,
        Some(plan) => {
            let buildah = plan.check(&base, &output, &platform)?;
            let extensions = runtime.block_on(crate::run_steps::resolve_extensions_image(
                plan,
                registry.as_ref(),
                &platform,
            ))?;
            let ImageRef::Registry(final_output) = &output else {
                bail!("--output: not a registry reference");
            };
            let placeholder = final_output.by_digest(&Digest::sha256(b""));
            plan.containerfile(&placeholder, extensions.as_deref(), &placeholder)?;
            let native = crate::run_steps::native_output(final_output)?;
            Some((plan, buildah, extensions, final_output.clone(), native))
        }
    };
    let native_output = match &run {
        Some((.., native)) => ImageRef::Registry(native.clone()),
        None => output,
    };
    let progress = Arc::new(Bar::new());
    let env = Environment {
        registry,
        cache,
        progress: progress.clone(),
    };
    let spec = BuildSpec {
        base,
        output: native_output,
        platform,
        recipe: recipe.clone(),
        created_by: format!("machineos build {}", env!("CARGO_PKG_VERSION")),
        layer: LayerOptions::from_env()?,
        layer_out: args.layer_out.clone(),
    };
    let outcome = runtime.block_on(machineos_native_builder::build(spec, env));
    progress.finish();
    let outcome = outcome?;
    for w in &outcome.plan.warnings {
        eprintln!("{}: {w}", recipe.source_name);
    }
    for w in &outcome.warnings {
        eprintln!("{w}");
    }
    let run_summary = match &run {
        None => None,
        Some((plan, buildah, extensions, final_output, native)) => {
            eprintln!(
                "{}: native image {}; RUN steps: {} (buildah {})",
                recipe.source_name,
                outcome.pullspec,
                plan.steps_ran().join(", "),
                buildah.version
            );
            let containerfile = plan.containerfile(
                &outcome.pullspec,
                extensions.as_deref(),
                &outcome.base_pullspec,
            )?;
            let mut registries = vec![final_output];
            let extensions_ref = extensions
                .as_deref()
                .map(machineos_image::RegistryRef::parse)
                .transpose()
                .context("the extensions image")?;
            registries.extend(extensions_ref.as_ref());
            let built = crate::run_steps::build_and_push(
                buildah,
                &containerfile,
                final_output,
                &registries,
                &args.registry,
            )
            .with_context(|| {
                format!(
                    "{}: RUN steps on the native image {} (pushed as {native})",
                    recipe.source_name, outcome.pullspec
                )
            })?;
            eprintln!(
                "{}: RUN steps ran ({}) in {:.1} s: {}",
                recipe.source_name,
                plan.steps_ran().join(", "),
                built.seconds,
                built.pullspec
            );
            Some(serde_json::json!({
                "image": built.pullspec,
                "digest": built.digest.to_string(),
                "from": outcome.pullspec,
                "nativeTag": native.to_string(),
                "steps": plan.steps_ran(),
                "extensions": plan.steps.extensions().iter().map(|e| e.as_str()).collect::<Vec<_>>(),
                "packages": plan.steps.extension_packages(),
                "kernelType": plan.steps.kernel_swap().map(|k| k.as_str()),
                "containerfile": plan.containerfile.as_ref().map(|p| p.display().to_string()),
                "extensionsImage": extensions,
                "buildah": { "version": buildah.version, "seconds": built.seconds },
            }))
        }
    };
    let result_pullspec = run_summary
        .as_ref()
        .and_then(|r| r["image"].as_str().map(str::to_owned))
        .unwrap_or_else(|| outcome.pullspec.clone());
    let counts = Counts::of(&outcome.plan, &recipe.config);
    match args.output_format {
        Format::Json => {
            let mut summary = serde_json::json!({
                "input": recipe.source_name,
                "image": outcome.pullspec,
                "digest": outcome.manifest_digest.to_string(),
                "config": outcome.config_digest.to_string(),
                "base": outcome.base_pullspec,
                "platform": outcome.platform.to_string(),
                "baseLayers": outcome.base_layers,
                "variant": outcome.variant,
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
            if let (Some(r), Some(obj)) = (run_summary, summary.as_object_mut()) {
                obj.insert("runSteps".to_owned(), r);
            }
            if let (Some(s), Some(obj)) = (&from_stream, summary.as_object_mut()) {
                obj.insert("stream".to_owned(), crate::stream::summary(s));
            }
            crate::emit(&serde_json::to_string_pretty(&summary)?)?;
            crate::emit(&result_pullspec)?;
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
            crate::emit(&result_pullspec)?;
        }
    }
    Ok(())
}

/// Counts for the summary: files and units as the config declares them, whiteouts as the
/// layer carries them.
pub(crate) struct Counts {
    pub(crate) files: usize,
    pub(crate) units: usize,
    pub(crate) whiteouts: usize,
}

impl Counts {
    pub(crate) fn of(plan: &Plan, config: &machineos_ignition::Config) -> Counts {
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
pub(crate) struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    pub(crate) fn new() -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar(None);
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Bar(Some(bar))
    }

    pub(crate) fn finish(&self) {
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
