//! `machineos build --platform all` or `--platform linux/amd64,linux/arm64`: one image per
//! platform over the base's per-platform manifests, and an OCI index over them, published
//! all or nothing (see [`machineos_native_builder::build_platforms`]).
//!
//! Refused up front, before any work: RUN steps (extensions, a kernelType, a Containerfile
//! — they execute on this machine's architecture through buildah; with `--native-only` they
//! are left to the next stage and not refused) and `--layer-out` (one file cannot hold
//! several layers).

use std::sync::Arc;

use anyhow::bail;
use machineos_image::ImageRef;
use machineos_layer::write::LayerOptions;
use machineos_layering::Recipe;
use machineos_native_builder::{Environment, MultiSpec};
use machineos_pipeline::base::BaseChoice;
use machineos_pipeline::platform::Choice;

use crate::build_args::{Bar, BuildArgs, Counts, Format};

/// Builds every platform of `choice` and prints the summary.
pub fn run(
    args: &BuildArgs,
    recipe: &Recipe,
    machine_config: Option<&machineos_api::v1::MachineConfig>,
    (source, fixed): (&BaseChoice<'_>, Option<ImageRef>),
    output: ImageRef,
    choice: Choice,
    cache: Option<machineos_baseindex::Cache>,
) -> anyhow::Result<()> {
    if args.layer_out.is_some() {
        bail!(
            "--layer-out: a multi-platform build adds one layer per platform; build one platform to get its layer"
        );
    }
    if !args.native_only {
        machineos_pipeline::runsteps::refuse_multi_platform(
            machine_config,
            &recipe.source_name,
            args.containerfile.as_deref(),
            &args.render.pool,
        )?;
    }
    let runtime = crate::cli::runtime()?;
    let mut report = |m: &str| eprintln!("{m}");
    // Without a stream, one base for every platform; a stream may name one per platform.
    let base = source.shared(fixed, &recipe.source_name, &mut report)?;
    let mut refs = vec![&output];
    refs.extend(base.as_ref());
    let registry = args.registry.client(&refs)?;
    let progress = Arc::new(Bar::new());
    let env = Environment {
        registry,
        cache,
        memory: None,
        progress: progress.clone(),
    };
    let bases = runtime.block_on(machineos_pipeline::base::platform_bases(
        source,
        choice,
        base.as_ref(),
        &env,
        &mut report,
    ))?;
    // Per-platform bases from a stream may live in registries the client was not made for.
    let env = if base.is_none() {
        let mut refs: Vec<&ImageRef> = bases.iter().map(|b| &b.base).collect();
        refs.push(&output);
        Environment {
            registry: args.registry.client(&refs)?,
            ..env
        }
    } else {
        env
    };
    let spec = MultiSpec {
        bases,
        output,
        recipe: recipe.clone(),
        created_by: format!("machineos build {}", env!("CARGO_PKG_VERSION")),
        layer: LayerOptions::from_env()?,
    };
    let outcome = runtime.block_on(machineos_native_builder::build_platforms(spec, env));
    progress.finish();
    let outcome = outcome?;
    for img in &outcome.images {
        for w in &img.plan.warnings {
            eprintln!("{} ({}): {w}", recipe.source_name, img.platform);
        }
        for w in &img.warnings {
            eprintln!("{} ({}): {w}", recipe.source_name, img.platform);
        }
    }
    match args.output_format {
        Format::Json => {
            let images: Vec<_> = outcome
                .images
                .iter()
                .map(|img| {
                    let counts = Counts::of(&img.plan, &recipe.config);
                    serde_json::json!({
                        "platform": img.platform.to_string(),
                        "image": img.pullspec,
                        "digest": img.manifest_digest.to_string(),
                        "base": img.base_pullspec,
                        "baseLayers": img.base_layers,
                        "layer": {
                            "digest": img.layer.digest,
                            "diffID": img.layer.diff_id,
                            "size": img.layer.size,
                        },
                        "entries": img.plan.entries.len(),
                        "files": counts.files,
                        "baseIndexCache": img.cache,
                        "baseLayerReads": img.base_layer_reads,
                        "timings": img.timings,
                    })
                })
                .collect();
            let summary = serde_json::json!({
                "input": recipe.source_name,
                "image": outcome.pullspec,
                "digest": outcome.index_digest.to_string(),
                "mediaType": machineos_image::media_type::OCI_INDEX,
                "platforms": images,
                "totalMs": outcome.total_ms,
            });
            crate::cli::emit(&serde_json::to_string_pretty(&summary)?)?;
        }
        Format::Text => {
            for img in &outcome.images {
                eprintln!(
                    "{}: base {} ({} layers, {}); image {} (layer {}, {} entries) in {:.1} ms",
                    img.platform,
                    img.base_pullspec,
                    img.base_layers,
                    img.cache,
                    img.manifest_digest,
                    img.layer.digest,
                    img.plan.entries.len(),
                    img.timings.total_ms
                );
            }
            eprintln!(
                "index of {} platforms in {:.1} ms",
                outcome.images.len(),
                outcome.total_ms
            );
        }
    }
    crate::build_args::write_digestfile(args, &outcome.index_digest.to_string())?;
    crate::cli::emit(&outcome.pullspec)?;
    Ok(())
}
