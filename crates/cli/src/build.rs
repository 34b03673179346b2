//! `machineos build`: inputs → plan over a base root filesystem → layer files and a summary.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use machineos_build::layer::{self, LayerOptions};
use machineos_build::plan::{ExtraFile, PlanOptions};
use machineos_build::{DirView, EntryKind};

use crate::input::Input;

/// Where the MCO's build puts the rendered MachineConfig.
const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";

/// Arguments of `machineos build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The base image's root filesystem, unpacked in a directory. (Registry and OCI
    /// layout bases are not supported yet.)
    #[arg(long, value_name = "DIR")]
    base_dir: PathBuf,
    /// Write the uncompressed layer tar here.
    #[arg(long, value_name = "FILE")]
    layer_out: Option<PathBuf>,
    /// Write the gzip-compressed layer blob here.
    #[arg(long, value_name = "FILE")]
    blob_out: Option<PathBuf>,
    /// Output format of the summary.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
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

/// Run `machineos build`.
pub fn run(args: &BuildArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    if !args.base_dir.is_dir() {
        bail!("--base-dir {}: not a directory", args.base_dir.display());
    }
    let base = DirView::new(&args.base_dir);
    let (name, config, opts) = match crate::input::read(&args.inputs, &args.render)? {
        Input::Ignition { name, bytes } => {
            let prepared = machineos_build::prepare(&bytes, &name)?;
            for w in &prepared.warnings {
                eprintln!("{name}: {w}");
            }
            // A plain Ignition config gets exactly what ignition-apply would write.
            (name, prepared.config, PlanOptions::default())
        }
        Input::Rendered(r) => {
            let name = format!("MachineConfig {}", r.machine_config.name());
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
            (name, config, opts)
        }
    };
    let plan = machineos_build::plan::plan_with(&config, &base, &opts).map_err(|error| {
        machineos_build::BuildError::Plan {
            source_name: name.clone(),
            error,
        }
    })?;
    for w in &plan.warnings {
        eprintln!("{name}: {w}");
    }
    let planned = started.elapsed();
    let lopts = LayerOptions::from_env()?;
    let digests = match &args.blob_out {
        Some(path) => write_atomically(path, |f| Ok(layer::write_blob(&plan, &lopts, f)?.0))?,
        None => layer::write_blob(&plan, &lopts, std::io::sink())?.0,
    };
    if let Some(path) = &args.layer_out {
        write_atomically(path, |f| {
            layer::write_tar(&plan, &lopts, f)?;
            Ok(())
        })?;
    }
    let count =
        |pred: fn(&EntryKind) -> bool| plan.entries.iter().filter(|e| pred(&e.kind)).count();
    let files = count(|k| matches!(k, EntryKind::File(_)));
    let whiteouts = count(|k| matches!(k, EntryKind::Whiteout | EntryKind::Opaque));
    let total = started.elapsed();
    match args.output {
        Format::Json => {
            let summary = serde_json::json!({
                "input": name,
                "diffID": digests.diff_id,
                "layerDigest": digests.digest,
                "layerSize": digests.size,
                "uncompressedSize": digests.uncompressed_size,
                "entries": plan.entries.len(),
                "files": files,
                "whiteouts": whiteouts,
                "timings": { "planMs": planned.as_secs_f64() * 1e3, "totalMs": total.as_secs_f64() * 1e3 },
            });
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
        Format::Text => {
            eprintln!(
                "{} entries ({files} files, {whiteouts} whiteouts), {} bytes uncompressed, {} bytes gzip, in {:.1} ms",
                plan.entries.len(),
                digests.uncompressed_size,
                digests.size,
                total.as_secs_f64() * 1e3
            );
            println!("diff_id {}", digests.diff_id);
            println!("{}", digests.digest);
        }
    }
    Ok(())
}

/// Write through a temporary file in the same directory and rename, so a failure leaves
/// nothing half-written at `path`.
fn write_atomically<T>(
    path: &PathBuf,
    f: impl FnOnce(&mut std::fs::File) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("out")
    ));
    let result = (|| {
        let mut file =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let out = f(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        Ok(out)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
