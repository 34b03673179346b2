//! The arguments of `machineos build` and what its one-platform and multi-platform paths
//! share: the summary format, the counts a summary prints, the progress spinner, and the
//! `--digestfile` write.

use std::io::IsTerminal;
use std::path::PathBuf;

use machineos_layer::{EntryKind, Plan};
use machineos_native_builder::Progress;

use crate::registry::RegistryArgs;

/// Arguments of `machineos build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The base OS image: `host[:port]/repo[:tag][@digest]`, `docker://…` or
    /// `oci:DIR[:tag]`. Defaults to the rendered MachineConfig's `spec.osImageURL`.
    #[arg(long, value_name = "IMAGE", conflicts_with = "base_dir")]
    pub(crate) base: Option<String>,
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
    pub(crate) base_dir: Option<PathBuf>,
    /// Where to publish: `host[:port]/repo[:tag]` (tag defaults to `latest`) or
    /// `oci:DIR[:tag]`.
    #[arg(
        long,
        value_name = "DEST",
        default_value = "oci:./machineos-out",
        conflicts_with = "base_dir"
    )]
    pub(crate) output: String,
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
    pub(crate) blob_out: Option<PathBuf>,
    /// The base index cache. Defaults to `$XDG_CACHE_HOME/machineos` (`~/.cache/machineos`).
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Do not use the base index cache: index the base's layers every time.
    #[arg(long, conflicts_with = "cache_dir")]
    pub(crate) no_cache: bool,
    #[command(flatten)]
    pub(crate) registry: RegistryArgs,
    /// A Containerfile to build on top, as a MachineOSConfig's `containerFile` (it must
    /// continue `FROM configs AS final`): the native image is pushed to
    /// `<output tag>-native` and the local buildah builds the result from it (registry
    /// --output only). Extensions and a kernelType of the MachineConfigs run the same way.
    #[arg(long, value_name = "FILE", conflicts_with = "base_dir")]
    pub(crate) containerfile: Option<PathBuf>,
    /// Build and publish only the native image at --output, also when the MachineConfigs
    /// need RUN steps (extensions, a kernelType): the first stage of a build whose RUN
    /// steps run elsewhere (the controller's OpenShift Build backend). No buildah is run.
    #[arg(long, conflicts_with_all = ["containerfile", "base_dir"])]
    pub(crate) native_only: bool,
    /// Add the boot guard to the image (as the controller's builds do unless the
    /// MachineOSConfig says `machineos.io/boot-guard: off`): a systemd unit that rolls a node
    /// whose kubelet never gets healthy after booting this image back to its previous
    /// deployment, once (see docs/boot-guard.md). Only for MachineConfig inputs: a plain
    /// Ignition config gets exactly what ignition-apply writes.
    #[arg(long)]
    pub(crate) boot_guard: bool,
    /// Output format of the summary. With RUN steps the JSON's fields describe the native
    /// image and `runSteps` the result (its `digest` and `image`); the last line of stdout is
    /// always the published result.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub(crate) output_format: Format,
    #[command(flatten)]
    pub(crate) render: crate::input::RenderArgs,
    /// MachineConfig manifests (YAML or JSON, multi-document allowed) or directories of
    /// them, rendered for `--pool`; or a single Ignition config (spec 3.0.0–3.6.0).
    #[arg(value_name = "INPUT", required_unless_present = "rendered")]
    pub(crate) inputs: Vec<PathBuf>,
    /// Instead of INPUTs: one MachineConfig already rendered for `--pool` (by the MCO or
    /// `machineos controller`), built as it is — its name and content kept, no selection
    /// or merge. A YAML or JSON manifest, the MCO's build encoding (base64 of gzip), or the
    /// directory where a build's MachineConfig ConfigMap is mounted (the key
    /// `machineconfig.json.gz`, or its parts `machineconfig.json.gz.part0`, …). With it,
    /// a non-empty `--extensions-image` names the extensions image the RUN steps use.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["inputs", "base_dir"])]
    pub(crate) rendered: Option<PathBuf>,
    /// Write the published result's digest (`sha256:…`, the index's for several
    /// platforms, the RUN steps' image with them) to this file, as `buildah push
    /// --digestfile` does: what a build pod's termination message carries.
    #[arg(long, value_name = "FILE", conflicts_with = "base_dir")]
    pub(crate) digestfile: Option<PathBuf>,
}

/// Summary formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
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

/// `--digestfile`: the result's digest, alone (no newline), as `buildah push --digestfile`
/// writes it.
pub(crate) fn write_digestfile(args: &BuildArgs, digest: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    if let Some(path) = &args.digestfile {
        std::fs::write(path, digest)
            .with_context(|| format!("--digestfile {}: writing it", path.display()))?;
    }
    Ok(())
}
