//! `machineos diff FROM TO`: what differs between two images — any two, in a registry or an
//! OCI layout — and what moving a node from the first to the second would cost it.
//!
//! The files come from `machineos_native_builder::diff` (the base indexes compared, only
//! the contents that decide read; nothing unpacked). On top, from the images themselves:
//! the kernel and initrd files among them, the base image each was built from (machineos's
//! `baseOSContainerImage` label), and, when both embed a rendered MachineConfig (machineos
//! builds do), its kernel arguments and extensions and the node disruption policies'
//! decision for the move (`machineos disruption`; across bases or extensions images,
//! `machineos_disruption::decide_across_images` — the configs and the filesystem difference
//! together, so a new base with the same kernel is a soft reboot — as the controller decides
//! such a move). The disruption is the stronger of that decision and what the paths need (`machineos_disruption::image_class`: a kernel or initrd
//! reboots, other paths outside `/etc`, `/var` and `/usr/local` soft-reboot); when either
//! image embeds no rendered MachineConfig and anything differs, a reboot (the change cannot
//! be classified).
//!
//! Exit status as diff(1)'s: 0 when nothing differs, 1 when something does, 2 on trouble.

use std::path::PathBuf;

use anyhow::Context;
use machineos_disruption::{
    Class, ConfigChanges, ImageEvidence, OsChange, decide, decide_across_images, image_class,
    is_kernel_path,
};
use machineos_image::ImageRef;
use machineos_native_builder::diff::{DiffSpec, FileChange, ImageDiff};
use serde_json::{Value, json};

use crate::build_args::Format;

/// Arguments of `machineos diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The first image: `host[:port]/repo[:tag][@digest]`, `docker://…` or `oci:DIR[:tag]`.
    #[arg(value_name = "FROM")]
    from: String,
    /// The second image.
    #[arg(value_name = "TO")]
    to: String,
    /// The platform to compare in multi-platform images. Defaults to this machine's.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// A `MachineConfiguration` manifest whose `spec.nodeDisruptionPolicy` is merged over the
    /// MCO's defaults for the disruption (as `machineos disruption --policy`).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The base index cache. Defaults to `$XDG_CACHE_HOME/machineos`.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Do not use the base index cache.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// Output format: text (a summary and one line per path) or json.
    #[arg(short = 'o', long = "output-format", value_enum, default_value_t = Format::Text)]
    output_format: Format,
    #[command(flatten)]
    registry: crate::registry::RegistryArgs,
}

/// Run `machineos diff`: whether the images differ.
pub fn run(args: &DiffArgs) -> anyhow::Result<bool> {
    let from = ImageRef::parse(&args.from).context("FROM")?;
    let to = ImageRef::parse(&args.to).context("TO")?;
    let platform = match &args.platform {
        Some(p) => p.parse().context("--platform")?,
        None => machineos_image::Platform::host(),
    };
    let policies = crate::disruption::policies(args.policy.as_deref())?;
    let cache = crate::build::index_cache(args.cache_dir.as_deref(), args.no_cache)?;
    let registry = args.registry.client(&[&from, &to])?;
    let runtime = crate::cli::runtime()?;
    let progress: std::sync::Arc<dyn machineos_native_builder::Progress> =
        std::sync::Arc::new(machineos_native_builder::Quiet);
    let mut warnings = Vec::new();
    let spec = DiffSpec {
        from: from.clone(),
        to: to.clone(),
        platform: platform.clone(),
        cache_images: true,
    };
    let diff = runtime.block_on(machineos_native_builder::diff::diff(
        &spec,
        registry.as_ref(),
        cache.as_ref(),
        &progress,
        &mut warnings,
    ))?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let embedded = |side: &machineos_native_builder::diff::DiffSide| -> anyhow::Result<Option<machineos_api::v1::MachineConfig>> {
        Ok(match &side.machine_config {
            Some(v) => Some(
                serde_json::from_value(v.clone())
                    .with_context(|| format!("{}: the embedded MachineConfig", side.image))?,
            ),
            None => None,
        })
    };
    let (mc_from, mc_to) = (embedded(&diff.from)?, embedded(&diff.to)?);
    let report = report(&diff, mc_from.as_ref(), mc_to.as_ref(), &policies);
    match args.output_format {
        Format::Json => crate::cli::emit(&serde_json::to_string_pretty(&report)?)?,
        Format::Text => text(&diff, &report)?,
    }
    Ok(!diff.files.is_empty() || report["machineConfig"]["changed"] == true)
}

/// The JSON report: the two sides, counts, the files, the kernel, the base, the embedded
/// MachineConfigs' kernel arguments and extensions, and the disruption. Pure.
pub fn report(
    diff: &ImageDiff,
    from: Option<&machineos_api::v1::MachineConfig>,
    to: Option<&machineos_api::v1::MachineConfig>,
    policies: &machineos_disruption::ClusterPolicies,
) -> Value {
    let count = |c: &str| diff.files.iter().filter(|f| f.change == c).count();
    let kernel: Vec<&FileChange> = diff
        .files
        .iter()
        .filter(|f| is_kernel_path(&f.path))
        .collect();
    let by_paths = image_class(diff.files.iter().map(|f| f.path.as_str()));
    let (mut class, mut reasons) = (by_paths.class, by_paths.reasons.clone());
    let label = |d: &machineos_native_builder::diff::DiffSide| {
        d.labels
            .get(machineos_layering::labels::BASE_OS_CONTAINER_IMAGE)
            .cloned()
    };
    let machine_config = match (from, to) {
        (Some(a), Some(b)) => {
            let changes = ConfigChanges::between(a, b);
            // Two builds of one base differ by what their configs differ by; across bases
            // (or extensions) the filesystem difference decides with the configs, as the
            // controller decides such a move.
            let (base_from, base_to) = (label(&diff.from), label(&diff.to));
            let across = if base_from != base_to {
                Some(format!(
                    "the base image changes ({} → {})",
                    base_from.as_deref().unwrap_or("?"),
                    base_to.as_deref().unwrap_or("?")
                ))
            } else if changes
                .os
                .iter()
                .any(|o| matches!(o, OsChange::OsImageUrl | OsChange::Extensions))
            {
                Some("the osImageURL or extensions change".to_owned())
            } else if a.metadata.name == b.metadata.name && !diff.files.is_empty() {
                Some(format!(
                    "the image is rebuilt from the same MachineConfig {}",
                    a.metadata.name.as_deref().unwrap_or("?")
                ))
            } else {
                None
            };
            let outcome = match across {
                Some(why) => decide_across_images(
                    &changes,
                    policies,
                    &ImageEvidence {
                        from: diff.from.image.clone(),
                        changed: u64::try_from(diff.files.len()).unwrap_or(u64::MAX),
                        kernel_changed: !kernel.is_empty(),
                        path_class: by_paths.class,
                    },
                    &why,
                ),
                None => decide(&changes, policies),
            };
            if outcome.class > class {
                class = outcome.class;
                reasons = outcome.reasons.iter().map(|r| r.change.clone()).collect();
            } else if outcome.class == class && class != Class::None {
                reasons.extend(outcome.reasons.iter().map(|r| r.change.clone()));
            }
            let (sa, sb) = (&a.spec, &b.spec);
            json!({
                "from": a.metadata.name,
                "to": b.metadata.name,
                "changed": a.metadata.name != b.metadata.name,
                "kernelArguments": { "from": sa.kernel_arguments, "to": sb.kernel_arguments },
                "extensions": { "from": sa.extensions, "to": sb.extensions },
                "disruption": outcome,
            })
        }
        _ => {
            // Without both rendered MachineConfigs the policies cannot classify what changed
            // in the configuration: an unknown change reboots, as the MCO's defaults do.
            if class < Class::Reboot && !diff.files.is_empty() {
                let which = match (from, to) {
                    (None, None) => "neither image embeds",
                    (None, Some(_)) => "the first image does not embed",
                    _ => "the second image does not embed",
                };
                class = Class::Reboot;
                reasons = vec![format!(
                    "{which} a rendered MachineConfig: the configuration changes cannot be \
                     classified, and an unclassified change reboots"
                )];
            }
            Value::Null
        }
    };
    json!({
        "from": diff.from,
        "to": diff.to,
        "summary": {
            "added": count("added"),
            "removed": count("removed"),
            "modified": count("modified"),
        },
        "files": diff.files,
        "kernel": {
            "changed": !kernel.is_empty(),
            "files": kernel,
        },
        "baseImage": { "from": label(&diff.from), "to": label(&diff.to) },
        "machineConfig": machine_config,
        "disruption": { "class": class.name(), "reasons": reasons },
        "layerReads": diff.layer_reads,
    })
}

fn text(diff: &ImageDiff, report: &Value) -> anyhow::Result<()> {
    use crate::cli::emit;
    emit(&format!("from: {} ({})", diff.from.image, diff.from.digest))?;
    emit(&format!("to:   {} ({})", diff.to.image, diff.to.digest))?;
    let s = &report["summary"];
    emit(&format!(
        "files: {} added, {} removed, {} modified",
        s["added"], s["removed"], s["modified"]
    ))?;
    for f in &diff.files {
        let sign = match f.change {
            "added" => "+",
            "removed" => "-",
            _ => "M",
        };
        let node = f.after.as_ref().or(f.before.as_ref());
        let what = node
            .map(|n| {
                let mut w = format!("{} {} {}:{}", n.kind, n.mode, n.uid, n.gid);
                if let Some(size) = n.size {
                    w.push_str(&format!(" {size} B"));
                }
                if let Some(t) = &n.target {
                    w.push_str(&format!(" -> {t}"));
                }
                if let Some(d) = &n.digest {
                    w.push_str(&format!(" {d}"));
                }
                w
            })
            .unwrap_or_default();
        emit(&format!("  {sign} {} ({what})", f.path))?;
    }
    let kernel = if report["kernel"]["changed"] == true {
        "changed"
    } else {
        "unchanged"
    };
    emit(&format!("kernel: {kernel}"))?;
    let base = &report["baseImage"];
    if base["from"] != base["to"] {
        emit(&format!("base image: {} -> {}", base["from"], base["to"]))?;
    }
    let mc = &report["machineConfig"];
    if !mc.is_null() {
        emit(&format!(
            "machineconfig: {} -> {}",
            mc["from"].as_str().unwrap_or("?"),
            mc["to"].as_str().unwrap_or("?")
        ))?;
        for key in ["kernelArguments", "extensions"] {
            if mc[key]["from"] != mc[key]["to"] {
                emit(&format!("{key}: {} -> {}", mc[key]["from"], mc[key]["to"]))?;
            }
        }
    }
    let d = &report["disruption"];
    emit(&format!(
        "disruption: {}",
        d["class"].as_str().unwrap_or("?")
    ))?;
    for r in d["reasons"].as_array().into_iter().flatten() {
        emit(&format!("  {}", r.as_str().unwrap_or_default()))?;
    }
    Ok(())
}
