//! `machineos-synth`: write a deterministic synthetic Fedora CoreOS-like base image into an
//! OCI layout directory, for the README's example, tests and benchmarks.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use machineos_image::{Layout, Platform};
use machineos_synth::{
    ExtraFile, FOUR_ARCHES, Generated, Profile, SynthVariant, generate, generate_multi_arch,
};

/// Write a synthetic Fedora CoreOS-like base image into an OCI layout.
///
/// Prints the manifest digest (the index digest with several --platform) on stdout and
/// statistics on stderr. The same arguments always give the same digest.
#[derive(Debug, Parser)]
#[command(name = "machineos-synth", version)]
struct Args {
    /// OCI layout directory (created if missing; other tags in it are kept).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Tag of the written image in the layout's index.json.
    #[arg(long, default_value = "latest")]
    tag: String,
    /// Preset: example (Fedora CoreOS; 5 layers, 400 files, 2 MiB), bench-100m (40 layers,
    /// 60 000 files, 100 MiB), bench-1g (same tree, 1 GiB), scos or rhcos (example's size
    /// as CentOS Stream or RHEL CoreOS).
    #[arg(long, default_value = "example", value_parser = parse_profile)]
    profile: Profile,
    /// Shape the tree like fcos (Fedora CoreOS), scos (CentOS Stream CoreOS) or rhcos (RHEL
    /// CoreOS), with that variant's preset version; default: the profile's (fcos except for
    /// the scos and rhcos profiles).
    #[arg(long, value_parser = parse_variant)]
    variant: Option<SynthVariant>,
    /// Write the image for linux/amd64, linux/arm64, linux/ppc64le and linux/s390x, and an
    /// index over them.
    #[arg(long, conflicts_with = "platforms")]
    four_arch: bool,
    /// Platform os/arch[/variant]; give it several times for a multi-arch image index.
    /// Default linux/amd64 whatever the host is.
    #[arg(long = "platform", value_name = "OS/ARCH")]
    platforms: Vec<Platform>,
    /// Emit Docker schema2 media types instead of OCI ones.
    #[arg(long)]
    docker: bool,
    /// A plain container image (the planned layers as they are, whiteouts in the last one)
    /// instead of an ostree-encapsulated one as Fedora CoreOS ships.
    #[arg(long)]
    plain: bool,
    /// Copy host file SRC into the image at absolute path DEST (mode taken from SRC).
    #[arg(long = "extra-file", value_name = "SRC:DEST")]
    extra_files: Vec<String>,
    /// Override the preset's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Add a shell and stub package tools so RUN steps work in the image (see the crate's
    /// `stub` module): busybox is read from --busybox, bash and its libraries from the
    /// host; the digest then depends on them. Only for the host's architecture.
    #[arg(long)]
    stub_tools: bool,
    /// The static busybox binary --stub-tools copies in.
    #[arg(long, value_name = "FILE", default_value = machineos_synth::HOST_BUSYBOX, requires = "stub_tools")]
    busybox: PathBuf,
    /// Instead of a base, write an extensions image whose stub repository has these
    /// packages (repeatable; for the first --platform).
    #[arg(
        long = "extensions",
        value_name = "PACKAGE",
        conflicts_with_all = ["stub_tools", "plain", "docker", "extra_files", "seed"]
    )]
    extensions: Vec<String>,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Profile::ALL.iter().map(|p| p.name()).collect();
        format!(
            "unknown profile {s:?}; expected one of {}",
            names.join(", ")
        )
    })
}

fn parse_variant(s: &str) -> Result<SynthVariant, String> {
    SynthVariant::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = SynthVariant::ALL.iter().map(|v| v.name()).collect();
        format!(
            "unknown variant {s:?}; expected one of {}",
            names.join(", ")
        )
    })
}

fn extra_file(arg: &str) -> anyhow::Result<ExtraFile> {
    let Some((src, dest)) = arg.rsplit_once(':') else {
        bail!("--extra-file {arg:?}: expected SRC:DEST");
    };
    if src.is_empty() || !dest.starts_with('/') {
        bail!("--extra-file {arg:?}: expected SRC:DEST with DEST an absolute path in the image");
    }
    let contents = std::fs::read(src).with_context(|| format!("--extra-file: reading {src}"))?;
    let meta = std::fs::metadata(src).with_context(|| format!("--extra-file: inspecting {src}"))?;
    Ok(ExtraFile {
        path: dest.to_owned(),
        contents,
        mode: host_mode(&meta),
    })
}

#[cfg(unix)]
fn host_mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn host_mode(meta: &std::fs::Metadata) -> u32 {
    if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn report(g: &Generated) {
    let platform = g
        .manifest
        .platform
        .as_ref()
        .map_or_else(|| "?".to_owned(), Platform::to_string);
    eprintln!(
        "machineos-synth: {platform} {}: {} layers, {} files, {} entries, kernel {}; contents {}, tar {}, gzip {}",
        g.manifest.digest,
        g.layers,
        g.files,
        g.entries,
        g.kernel_version,
        mib(g.content_bytes),
        mib(g.uncompressed_bytes),
        mib(g.compressed_bytes),
    );
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let platforms = if args.four_arch {
        FOUR_ARCHES
            .iter()
            .map(|a| Platform::new("linux", a, None))
            .collect()
    } else if args.platforms.is_empty() {
        vec![Platform::new("linux", "amd64", None)]
    } else {
        args.platforms.clone()
    };
    let extra_files = args
        .extra_files
        .iter()
        .map(|a| extra_file(a))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let specs: Vec<machineos_synth::SynthSpec> = platforms
        .iter()
        .cloned()
        .map(|p| {
            let mut s = args.profile.spec(p);
            if let Some(v) = args.variant {
                s.variant = v;
                s.version = v.default_version().to_owned();
            }
            s.docker_media_types = args.docker;
            s.ostree = !args.plain;
            s.extra_files = extra_files.clone();
            if let Some(seed) = args.seed {
                s.seed = seed;
            }
            if args.stub_tools {
                s = s.with_stub_tools_from(
                    &args.busybox,
                    std::path::Path::new(machineos_synth::HOST_BASH),
                )?;
            }
            Ok(s)
        })
        .collect::<anyhow::Result<_>>()?;
    let layout = Layout::create(&args.out)?;
    let start = Instant::now();
    if !args.extensions.is_empty() {
        let packages: Vec<&str> = args.extensions.iter().map(String::as_str).collect();
        let platform = platforms.first().context("no platform")?;
        let desc = machineos_synth::write_extensions_image(&layout, platform, &packages)?;
        layout.set_tag(&args.tag, &desc)?;
        eprintln!(
            "machineos-synth: extensions image ({} packages) written to {}:{}",
            packages.len(),
            args.out.display(),
            args.tag
        );
        println!("{}", desc.digest);
        return Ok(());
    }
    let desc = if let [spec] = specs.as_slice() {
        let g = generate(&layout, spec)?;
        report(&g);
        g.manifest
    } else {
        let g = generate_multi_arch(&layout, &specs)?;
        for image in &g.images {
            report(image);
        }
        g.index
    };
    layout.set_tag(&args.tag, &desc)?;
    eprintln!(
        "machineos-synth: profile {} written to {}:{} in {:.2?}",
        args.profile.name(),
        args.out.display(),
        args.tag,
        start.elapsed()
    );
    println!("{}", desc.digest);
    Ok(())
}
