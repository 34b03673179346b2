//! `machineos build`: inputs → a layered image published by digest (from a base image), or
//! just the layer (over an unpacked root filesystem with `--base-dir`).
//!
//! What the native engine cannot apply — `spec.extensions`, a `spec.kernelType` kernel
//! swap, a `--containerfile` — runs as RUN steps with the local buildah on top of the
//! native image, which is then pushed to `<output tag>-native` (see [`machineos_pipeline::runsteps`]);
//! without them, no buildah is involved.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use machineos_image::ImageRef;
use machineos_layer::DirView;
use machineos_layer::write::{self, LayerOptions};
use machineos_layering::Recipe;
use machineos_native_builder::output::OutputFile;
use machineos_native_builder::{BuildSpec, Environment};

use machineos_pipeline::base::BaseChoice;

use crate::build_args::{Bar, BuildArgs, Counts, Format};
use crate::input::Input;

/// The inputs as a recipe (see [`machineos_layering`]), its warnings printed, and the
/// rendered MachineConfig (none for an Ignition input).
fn recipe(args: &BuildArgs) -> anyhow::Result<(Recipe, Option<machineos_api::v1::MachineConfig>)> {
    let input = match &args.rendered {
        Some(path) => {
            let mc = crate::input::read_rendered(path)?;
            let recipe = machineos_layering::recipe(&mc, &args.render.pool)?;
            return with_warnings(args, guarded(args, recipe), Some(mc));
        }
        None => crate::input::read(&args.inputs, &args.render)?,
    };
    let (recipe, mc) = match input {
        Input::Ignition { name, bytes } => {
            if args.boot_guard {
                bail!(
                    "{name}: --boot-guard is for MachineConfig inputs; a plain Ignition config \
                     gets exactly what ignition-apply writes"
                );
            }
            (machineos_layering::ignition_recipe(&bytes, &name)?, None)
        }
        Input::Rendered(r) => (
            guarded(
                args,
                machineos_layering::recipe_of(
                    &r.machine_config,
                    r.ignition.clone(),
                    &args.render.pool,
                )?,
            ),
            Some(r.machine_config),
        ),
    };
    with_warnings(args, recipe, mc)
}

/// The recipe with the boot guard when `--boot-guard` asks for it.
fn guarded(args: &BuildArgs, recipe: Recipe) -> Recipe {
    if args.boot_guard {
        recipe.with_boot_guard()
    } else {
        recipe
    }
}

/// The recipe's warnings, and what it holds that this build does not apply, on stderr.
fn with_warnings(
    args: &BuildArgs,
    recipe: Recipe,
    mc: Option<machineos_api::v1::MachineConfig>,
) -> anyhow::Result<(Recipe, Option<machineos_api::v1::MachineConfig>)> {
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
    index_cache(args.cache_dir.as_deref(), args.no_cache)
}

/// The base index cache of `--cache-dir DIR` / `--no-cache` (none), else the default one.
pub(crate) fn index_cache(
    cache_dir: Option<&Path>,
    no_cache: bool,
) -> anyhow::Result<Option<machineos_baseindex::Cache>> {
    if no_cache {
        return Ok(None);
    }
    let dir = match cache_dir {
        Some(d) => d.to_path_buf(),
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
    let source = BaseChoice {
        base: args.base.as_deref(),
        os_image_url: recipe.base_image.as_deref(),
        stream: args.stream.as_deref(),
        stream_name: args.stream_name.as_deref(),
    };
    let platform = match machineos_pipeline::platform::choice(args.platform.as_deref())? {
        machineos_pipeline::platform::Choice::One(p) => p,
        many => {
            let fixed = source.fixed()?;
            let cache = cache(args)?;
            return crate::build_multi::run(
                args,
                &recipe,
                machine_config.as_ref(),
                (&source, fixed),
                output,
                many,
                cache,
            );
        }
    };
    let (base, from_stream) = source.one(&platform, &recipe.source_name, &mut |m: &str| {
        eprintln!("{m}")
    })?;
    let cache = cache(args)?;
    let run_plan = machineos_pipeline::runsteps::plan(
        machine_config.as_ref(),
        &recipe.source_name,
        args.containerfile.as_deref(),
        &args.render.pool,
        &platform,
    )?;
    let mut run_plan = machineos_pipeline::stream::with_extensions(run_plan, from_stream.as_ref());
    if args.native_only
        && let Some(plan) = run_plan.take()
    {
        eprintln!(
            "{}: --native-only: the RUN steps ({}) are left to the next stage",
            recipe.source_name,
            plan.steps_ran().join(", ")
        );
    }
    // A rendered MachineConfig keeps its content; the extensions image may be named apart
    // (the controller resolves it by digest).
    if let Some(plan) = run_plan.as_mut()
        && args.rendered.is_some()
        && !args.render.extensions_image.is_empty()
    {
        plan.extensions_image = args.render.extensions_image.clone();
    }
    let runtime = crate::cli::runtime()?;
    let registry = args.registry.client(&[&base, &output])?;
    // RUN steps: everything that can fail is checked before the native image is pushed.
    let run = match &run_plan {
        None => None,
        Some(plan) => Some((
            plan,
            runtime.block_on(machineos_pipeline::runsteps::prepare(
                plan,
                &base,
                &output,
                &platform,
                registry.as_ref(),
            ))?,
        )),
    };
    let native_output = match &run {
        Some((_, prepared)) => ImageRef::Registry(prepared.native.clone()),
        None => output,
    };
    let progress = Arc::new(Bar::new());
    let env = Environment {
        registry,
        cache,
        memory: None,
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
        Some((plan, prepared)) => {
            let (buildah, extensions, native) =
                (&prepared.buildah, &prepared.extensions, &prepared.native);
            eprintln!(
                "{}: native image {}; RUN steps: {} (buildah {})",
                recipe.source_name,
                outcome.pullspec,
                plan.steps_ran().join(", "),
                buildah.version
            );
            let built = prepared.run(
                plan,
                &outcome.pullspec,
                &outcome.base_pullspec,
                &args.registry.buildah_access(),
            )?;
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
    let result_digest = run_summary
        .as_ref()
        .and_then(|r| r["digest"].as_str().map(str::to_owned))
        .unwrap_or_else(|| outcome.manifest_digest.to_string());
    crate::build_args::write_digestfile(args, &result_digest)?;
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
                obj.insert("stream".to_owned(), machineos_pipeline::stream::summary(s));
            }
            crate::cli::emit(&serde_json::to_string_pretty(&summary)?)?;
            crate::cli::emit(&result_pullspec)?;
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
            crate::cli::emit(&result_pullspec)?;
        }
    }
    Ok(())
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
            crate::cli::emit(&serde_json::to_string_pretty(&summary)?)?;
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
            crate::cli::emit(&format!("diff_id {}", digests.diff_id))?;
            crate::cli::emit(digests.digest.as_str())?;
        }
    }
    Ok(())
}
