//! `xtask bench`: `machineos build` against the MCO's buildah build, on the same base image,
//! the same rendered MachineConfig and the same local registry, in one run.
//!
//! 1. Renders `bench/machineconfigs` for pool `worker` with `machineos render`: the rendered
//!    MachineConfig is the MCO build's `currentconfig`, its `spec.config` the Ignition config.
//! 2. Generates the `bench-1g` and `bench-100m` bases (machineos-synth) with ignition-apply's
//!    runtime inside, starts a registry on loopback and pushes both with skopeo. Every output
//!    repository is seeded with the base first, so every repetition publishes into a
//!    repository that already has the base's blobs (the steady state of a pool's image
//!    repository), for machineos and buildah alike.
//! 3. Times, each repetition after a `sync`: (a) `machineos build` with a warm base index
//!    cache, (b) the same with an empty cache directory each time, (c) `buildah bud` +
//!    `buildah push` from an empty vfs storage each time, (a') (a) on the 100 MB base.
//! 4. Unpacks (a)'s and (c)'s last images and the base and compares their changes
//!    ([`crate::compare`]).
//! 5. Prints the report (markdown) and writes it, with every sample as JSON beside it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use machineos_synth::{Generated, Profile};
use machineos_testkit::{CopyOptions, TestRegistry};
use serde_json::Value;

use crate::base;
use crate::buildah;
use crate::compare::{self, Comparison};
use crate::measure::{self, Cmd};
use crate::report::{self, CaseReport, Machine, Report};

/// Arguments of `xtask bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Repetitions of (a), (b) and (a'); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Repetitions of (c), the buildah build. Each takes 2–6 minutes here, plus 2–3 minutes
    /// to delete its ~27 GB vfs storage (untimed), hence the default of one (the whole run
    /// must stay under 15 minutes).
    #[arg(long, default_value_t = 1)]
    pub buildah_reps: usize,
    /// Where the markdown report goes (the samples go beside it, as `.json`).
    #[arg(long, default_value = "target/bench/report.md")]
    pub report: PathBuf,
    /// Scratch directory (emptied first). buildah's vfs storage needs ~30 GB free there.
    #[arg(long, default_value = "target/bench/work")]
    pub work_dir: PathBuf,
    /// The MachineConfigs to build.
    #[arg(long, default_value = "bench/machineconfigs")]
    pub machineconfigs: PathBuf,
    /// The checked-in rendered config, compared with the fresh render (a mismatch is
    /// reported, not fatal: the fresh render is what both builds use).
    #[arg(long, default_value = "bench/rendered")]
    pub rendered: PathBuf,
    /// The `machineos` binary. Defaults to the one next to this executable.
    #[arg(long)]
    pub machineos: Option<PathBuf>,
    /// Debian's ignition binary, installed in the base as `/usr/bin/ignition-apply`.
    #[arg(long, default_value = base::DEBIAN_IGNITION)]
    pub ignition: PathBuf,
    /// Skip (c) and the equality check (for a quick look at machineos's figures).
    #[arg(long)]
    pub skip_buildah: bool,
    /// Run (c) and the equality check on the 100 MiB base instead (against (a')'s image):
    /// a quick check of the buildah path, whose (c) figures are then not comparable.
    #[arg(long)]
    pub buildah_on_100m: bool,
    /// Keep the scratch directory (buildah storages are deleted regardless).
    #[arg(long)]
    pub keep: bool,
}

/// The tools the bench runs, with the Debian package that has each.
const TOOLS: &[(&str, &str)] = &[
    ("docker-registry", "docker-registry"),
    ("skopeo", "skopeo"),
    ("umoci", "umoci"),
    ("buildah", "buildah"),
    ("ldd", "libc-bin"),
    ("bash", "bash"),
    (measure::GNU_TIME, "time"),
];

/// Elapsed time since the start, for progress lines.
struct Clock(Instant);

impl Clock {
    fn say(&self, msg: impl AsRef<str>) {
        let s = self.0.elapsed().as_secs();
        eprintln!("[bench {:02}:{:02}] {}", s / 60, s % 60, msg.as_ref());
    }
}

/// What the render produced.
struct Rendered {
    /// The rendered MachineConfig as `machineos build` writes it to `currentconfig`.
    currentconfig: Vec<u8>,
    /// Its Ignition config as rendered (spec 3.5.0).
    config: Value,
    /// The name (`rendered-worker-<hash>`).
    name: String,
}

fn render(machineos: &Path, inputs: &Path) -> Result<Rendered> {
    let out = measure::run(
        &machineos.display().to_string(),
        &["render", "--pool", "worker", &inputs.display().to_string()],
    )?;
    let value: Value = serde_json::from_str(&out).context("parsing `machineos render`'s output")?;
    // The workspace's serde_json keeps key order, so this is the compact serialisation of
    // the same MachineConfig, which is what `machineos build` writes to currentconfig.
    let currentconfig = serde_json::to_vec(&value)?;
    let config = value
        .pointer("/spec/config")
        .cloned()
        .context("the rendered MachineConfig has no spec.config")?;
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    Ok(Rendered {
        currentconfig,
        config,
        name,
    })
}

/// The Ignition config handed to Debian's ignition-apply 2.14, which parses spec 3.0.0–3.3.0
/// only: the rendered 3.5.0 config with its version set to 3.3.0. The fixture uses nothing
/// newer than 3.3.0 (files, units, drop-ins, masks, presets) and no special mode bits (which
/// 3.4/3.5 would mask), so this is the same configuration; the equality check guards it.
fn config_for_ignition_2_14(config: &Value) -> Result<Vec<u8>> {
    let mut c = config.clone();
    let version = c
        .pointer_mut("/ignition/version")
        .context("the rendered config has no ignition.version")?;
    *version = Value::String("3.3.0".to_owned());
    Ok(serde_json::to_vec_pretty(&c)?)
}

/// Compares the fresh render with the checked-in copy; returns a note when they differ.
fn check_checked_in(dir: &Path, rendered: &Rendered) -> Option<String> {
    let want_cc = std::fs::read(dir.join("currentconfig")).ok();
    let want_ign = std::fs::read(dir.join("config.ign")).ok();
    let ign = serde_json::to_vec_pretty(&rendered.config).ok()?;
    let mut ign_nl = ign.clone();
    ign_nl.push(b'\n');
    let same_cc = want_cc.as_deref() == Some(rendered.currentconfig.as_slice());
    let same_ign =
        want_ign.as_deref() == Some(ign.as_slice()) || want_ign.as_deref() == Some(&ign_nl[..]);
    (!same_cc || !same_ign).then(|| {
        format!(
            "{} differs from the fresh render ({}); the fresh render was used — run `xtask fixture` to update it",
            dir.display(),
            rendered.name
        )
    })
}

/// Removes `dir`, refusing if anything is mounted below it (a killed `buildah` run could in
/// principle leave a bind mount of /dev or /sys behind, which must never be recursed into).
pub fn remove_tree(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let abs = std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mounts.lines() {
        if let Some(point) = line.split(' ').nth(4)
            && Path::new(point).starts_with(&abs)
        {
            bail!(
                "refusing to delete {}: {point} is mounted below it (unmount it first)",
                abs.display()
            );
        }
    }
    std::fs::remove_dir_all(&abs).with_context(|| format!("removing {}", abs.display()))
}

/// `machineos build … -o json` for one repetition.
fn machineos_cmd(
    bin: &Path,
    base: &str,
    output: &str,
    cache: &Path,
    inputs: &Path,
    epoch: u64,
) -> Cmd {
    Cmd::new(
        bin,
        [
            "build".to_owned(),
            "--base".to_owned(),
            base.to_owned(),
            "--output".to_owned(),
            output.to_owned(),
            "--cache-dir".to_owned(),
            cache.display().to_string(),
            "-o".to_owned(),
            "json".to_owned(),
            inputs.display().to_string(),
        ],
    )
    // A different mtime per repetition gives a new layer digest each time, so every
    // repetition uploads its layer, config and manifest, like a real config change.
    .env("SOURCE_DATE_EPOCH", epoch.to_string())
}

/// The JSON summary `machineos build -o json` prints before the pullspec line.
fn summary(stdout: &str) -> Result<Value> {
    let mut it = serde_json::Deserializer::from_str(stdout).into_iter::<Value>();
    it.next()
        .context("no JSON summary on machineos's stdout")?
        .context("parsing machineos's JSON summary")
}

/// How a machineos case treats the base index cache.
enum CacheMode {
    /// One directory, filled by an untimed run before the repetitions.
    Warm,
    /// A new empty directory for every repetition.
    Cold,
}

struct MachineosCase<'a> {
    key: &'static str,
    title: &'static str,
    base: &'a str,
    repo: String,
    cache: CacheMode,
}

fn run_machineos_case(
    clock: &Clock,
    args: &BenchArgs,
    bin: &Path,
    work: &Path,
    case: &MachineosCase<'_>,
) -> Result<(CaseReport, String)> {
    let log = work.join(format!("{}.log", slug(case.key)));
    let scratch = work.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    let warm = work.join(format!("cache-{}", slug(case.key)));
    if let CacheMode::Warm = case.cache {
        clock.say(format!(
            "{} warm-up run (fills the base index cache)",
            case.key
        ));
        let cmd = machineos_cmd(
            bin,
            case.base,
            &format!("{}:warmup", case.repo),
            &warm,
            &args.machineconfigs,
            1_700_000_000,
        );
        measure::measure(&cmd, &scratch, &log)?;
    }
    let mut samples = Vec::new();
    let mut stages = Vec::new();
    let mut last_tag = String::new();
    let mut shown = String::new();
    for rep in 0..args.reps {
        let cache = match case.cache {
            CacheMode::Warm => warm.clone(),
            CacheMode::Cold => {
                let d = work.join(format!("cache-{}-{rep}", slug(case.key)));
                remove_tree(&d)?;
                d
            }
        };
        last_tag = format!("{}:rep{rep}", case.repo);
        let cmd = machineos_cmd(
            bin,
            case.base,
            &last_tag,
            &cache,
            &args.machineconfigs,
            1_700_000_001 + rep as u64,
        );
        if rep == 0 {
            shown = cmd.shown();
        }
        crate::sync();
        let s = measure::measure(&cmd, &scratch, &log)?;
        let sum = summary(&s.stdout)?;
        let cache_use = sum.get("baseIndexCache").cloned().unwrap_or(Value::Null);
        clock.say(format!(
            "{} rep {}/{}: {:.1} ms wall, {:.1} ms CPU, {:.1} MB peak RSS (cache {cache_use}, in-process total {} ms)",
            case.key,
            rep + 1,
            args.reps,
            s.wall * 1e3,
            s.cpu() * 1e3,
            s.max_rss_kib as f64 * 1024.0 / 1e6,
            sum.pointer("/timings/totalMs")
                .and_then(Value::as_f64)
                .map_or("?".to_owned(), |v| format!("{v:.1}")),
        ));
        stages.push(sum);
        samples.push(s);
        if let CacheMode::Cold = case.cache {
            remove_tree(&cache)?;
        }
    }
    Ok((
        CaseReport {
            key: case.key,
            title: case.title.to_owned(),
            command: shown,
            samples,
            summaries: stages,
            parts: Vec::new(),
        },
        last_tag,
    ))
}

fn slug(key: &str) -> String {
    key.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        + if key.contains('\'') { "prime" } else { "" }
}

/// A background deletion.
type Cleanup = std::thread::JoinHandle<Result<()>>;

fn run_buildah_case(
    clock: &Clock,
    args: &BenchArgs,
    work: &Path,
    context: &Path,
    repo: &str,
) -> Result<(CaseReport, String, Option<Cleanup>)> {
    let log = work.join("c.log");
    let scratch = work.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    let mut buds = Vec::new();
    let mut pushes = Vec::new();
    let mut totals = Vec::new();
    let mut last_tag = String::new();
    let mut cleanup = None;
    for rep in 0..args.buildah_reps {
        let dir = work.join(format!("buildah-{rep}"));
        remove_tree(&dir)?;
        let storage = buildah::Storage::new(&dir)?;
        last_tag = format!("{repo}:rep{rep}");
        settle_io(clock);
        clock.say(format!(
            "(c) rep {}/{}: buildah bud + push from an empty vfs storage (minutes)…",
            rep + 1,
            args.buildah_reps
        ));
        let result = buildah::build(&storage, context, &last_tag, &scratch, &log);
        if result.is_err() {
            clock.say("(c) failed; deleting the repetition's vfs storage before reporting");
            remove_tree(&dir)?;
        }
        let b = result?;
        let total = b.bud.then(&b.push);
        clock.say(format!(
            "(c) rep {}/{}: {:.1} s wall (bud {:.1} s, push {:.1} s), {:.1} s CPU, {:.1} MB peak RSS",
            rep + 1,
            args.buildah_reps,
            total.wall,
            b.bud.wall,
            b.push.wall,
            total.cpu(),
            total.max_rss_kib as f64 * 1024.0 / 1e6
        ));
        if rep + 1 < args.buildah_reps {
            clock.say(format!(
                "(c) deleting the repetition's vfs storage (untimed; {} GB)…",
                du_gb(&dir)
            ));
            remove_tree(&dir)?;
        } else {
            // Nothing timed follows: delete the last storage while the equality check runs.
            clock.say(format!(
                "(c) deleting the last vfs storage ({} GB) in the background",
                du_gb(&dir)
            ));
            cleanup = Some(std::thread::spawn(move || remove_tree(&dir)));
        }
        buds.push(b.bud);
        pushes.push(b.push);
        totals.push(total);
    }
    let command = format!(
        "buildah --root R --runroot RR --storage-driver vfs bud --isolation chroot --tls-verify=false -f Containerfile -t {repo}:TAG . && buildah … push --tls-verify=false {repo}:TAG"
    );
    Ok((
        CaseReport {
            key: "(c)",
            title: "buildah as the MCO's build: pull, COPY, RUN ignition-apply, commit, push (vfs, chroot)".to_owned(),
            command,
            samples: totals,
            summaries: Vec::new(),
            parts: vec![("bud".to_owned(), buds), ("push".to_owned(), pushes)],
        },
        last_tag,
        cleanup,
    ))
}

/// The `some avg10` figure of `/proc/pressure/io`: the share of the last 10 s in which some
/// task waited for I/O, in percent; `None` without PSI.
fn io_pressure() -> Option<f64> {
    parse_io_pressure(&std::fs::read_to_string("/proc/pressure/io").ok()?)
}

fn parse_io_pressure(text: &str) -> Option<f64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// Waits (up to two minutes) until the disk is quiet, so that a buildah build does not pay
/// for the write-back or the deletion of what ran before it.
fn settle_io(clock: &Clock) {
    crate::sync();
    let started = Instant::now();
    let mut said = false;
    while let Some(p) = io_pressure() {
        if p < 1.0 || started.elapsed().as_secs() >= 120 {
            if said {
                clock.say(format!("I/O pressure now {p:.1}% (some avg10)"));
            }
            return;
        }
        if !said {
            clock.say(format!(
                "waiting for the disk to settle (I/O pressure {p:.1}%, some avg10)"
            ));
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// `du -s` of `dir` in GB (decimal), for progress messages; `?` when unknown.
fn du_gb(dir: &Path) -> String {
    measure::run("du", &["-sk", &dir.display().to_string()])
        .ok()
        .and_then(|o| o.split_whitespace().next()?.parse::<f64>().ok())
        .map_or("?".to_owned(), |k| format!("{:.1}", k * 1024.0 / 1e9))
}

/// Unpacks tag `tag` of the OCI layout `layout` with umoci into `dest/rootfs`.
fn unpack_layout(layout: &Path, tag: &str, dest: &Path) -> Result<PathBuf> {
    machineos_testkit::umoci_unpack(layout, tag, dest)
        .with_context(|| format!("unpacking {}:{tag}", layout.display()))?;
    Ok(dest.join("rootfs"))
}

/// Copies `image` from the (plain HTTP) registry into `layout` as `tag` and unpacks it.
fn unpack_image(image: &str, layout: &Path, tag: &str, dest: &Path) -> Result<PathBuf> {
    machineos_testkit::skopeo_copy(
        image,
        &format!("oci:{}:{tag}", layout.display()),
        &CopyOptions::new().src_tls_verify(false),
    )
    .with_context(|| format!("copying {image} to an OCI layout"))?;
    unpack_layout(layout, tag, dest)
}

fn equality(
    clock: &Clock,
    work: &Path,
    base_layout: &Path,
    image_a: &str,
    image_c: &str,
) -> Result<Comparison> {
    let dir = work.join("compare");
    remove_tree(&dir)?;
    std::fs::create_dir_all(&dir)?;
    let layout = dir.join("layout");
    clock.say("equality: unpacking the base, (a) and (c) with umoci");
    let base_root = unpack_layout(base_layout, base::TAG, &dir.join("base"))?;
    let a_root = unpack_image(image_a, &layout, "a", &dir.join("a"))?;
    let c_root = unpack_image(image_c, &layout, "c", &dir.join("c"))?;
    clock.say("equality: snapshotting and comparing the trees");
    let base_tree = compare::snapshot(&base_root)?;
    let a_tree = compare::snapshot(&a_root)?;
    let c_tree = compare::snapshot(&c_root)?;
    let result = compare::compare(&base_tree, &a_tree, &c_tree);
    remove_tree(&dir)?;
    Ok(result)
}

fn check_tools(ignition: &Path) -> Result<()> {
    let mut missing = Vec::new();
    for (tool, package) in TOOLS {
        if machineos_testkit::require_tool(tool).is_err() {
            missing.push(*package);
        }
    }
    if !ignition.is_file() {
        missing.push("ignition");
    }
    if !missing.is_empty() {
        bail!(
            "missing tools; install them with `apt-get install {}` (or run `bash scripts/bench.sh`)",
            missing.join(" ")
        );
    }
    Ok(())
}

fn machineos_binary(args: &BenchArgs) -> Result<PathBuf> {
    let bin = match &args.machineos {
        Some(b) => b.clone(),
        None => std::env::current_exe()
            .context("locating this executable")?
            .with_file_name("machineos"),
    };
    if !bin.is_file() {
        bail!(
            "{} not found: build it with `cargo build --release -p machineos` or give --machineos",
            bin.display()
        );
    }
    Ok(bin)
}

fn push_base(
    clock: &Clock,
    registry: &TestRegistry,
    layout: &Path,
    name: &str,
    seeds: &[&str],
) -> Result<String> {
    let reference = registry.reference(&format!("bench/{name}:{}", base::TAG));
    let opts = CopyOptions::new().dest_registry(registry);
    let started = Instant::now();
    machineos_testkit::skopeo_copy(
        &format!("oci:{}:{}", layout.display(), base::TAG),
        &reference,
        &opts,
    )
    .with_context(|| format!("pushing {name}"))?;
    clock.say(format!(
        "pushed {reference} in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    // Registry to registry, so skopeo mounts the blobs instead of uploading them again.
    let seed_opts = CopyOptions::new()
        .src_registry(registry)
        .dest_registry(registry);
    for seed in seeds {
        machineos_testkit::skopeo_copy(
            &reference,
            &registry.reference(&format!("bench/{seed}:base")),
            &seed_opts,
        )
        .with_context(|| format!("seeding bench/{seed} with {name}"))?;
    }
    Ok(reference)
}

/// Runs the benchmark. Exit status 1 when (a) and (c) differ; targets are reported only.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    let clock = Clock(Instant::now());
    if args.reps == 0 || (!args.skip_buildah && args.buildah_reps == 0) {
        bail!("--reps and --buildah-reps must be at least 1");
    }
    check_tools(&args.ignition)?;
    let machineos = machineos_binary(args)?;
    let machine = Machine::detect(&machineos, &args.ignition);
    clock.say(format!("machine: {}", machine.line()));

    let work = args.work_dir.clone();
    if work.exists() {
        clock.say(format!("emptying {}", work.display()));
        remove_tree(&work)?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let work = std::fs::canonicalize(&work)?;

    clock.say(format!(
        "rendering {} for pool worker",
        args.machineconfigs.display()
    ));
    let rendered = render(&machineos, &args.machineconfigs)?;
    let mut notes = Vec::new();
    if let Some(note) = check_checked_in(&args.rendered, &rendered) {
        clock.say(format!("note: {note}"));
        notes.push(note);
    }
    let fixture = crate::fixture::summary();

    let runtime = base::runtime_files(&args.ignition)?;
    clock.say(format!(
        "ignition-apply runtime for the base: {}",
        runtime
            .iter()
            .map(|(_, d)| d.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut bases: Vec<(Profile, PathBuf, Generated)> = Vec::new();
    for profile in [Profile::Bench1g, Profile::Bench100m] {
        let dir = work.join(format!("base-{}", profile.name()));
        let started = Instant::now();
        let g = base::generate(profile, &dir, &runtime)?;
        clock.say(format!(
            "generated {}: {} layers, {} files, {:.0} MiB of files, {:.0} MiB tar, {:.0} MiB gzip in {:.1} s",
            profile.name(),
            g.layers,
            g.files,
            g.content_bytes as f64 / f64::from(1 << 20),
            g.uncompressed_bytes as f64 / f64::from(1 << 20),
            g.compressed_bytes as f64 / f64::from(1 << 20),
            started.elapsed().as_secs_f64()
        ));
        bases.push((profile, dir, g));
    }

    let registry = TestRegistry::start_plain()?;
    clock.say(format!("registry on {}", registry.url()));
    let base_1g = push_base(
        &clock,
        &registry,
        &bases[0].1,
        "base-1g",
        &["out-a", "out-b", "out-c"],
    )?;
    let base_100m = push_base(
        &clock,
        &registry,
        &bases[1].1,
        "base-100m",
        &["out-a100", "out-c"],
    )?;

    let mut cases = Vec::new();
    let (a, tag_a) = run_machineos_case(
        &clock,
        args,
        &machineos,
        &work,
        &MachineosCase {
            key: "(a)",
            title: "machineos build, warm base index cache, 1 GiB base",
            base: &base_1g,
            repo: registry.reference("bench/out-a"),
            cache: CacheMode::Warm,
        },
    )?;
    cases.push(a);
    let (b, _) = run_machineos_case(
        &clock,
        args,
        &machineos,
        &work,
        &MachineosCase {
            key: "(b)",
            title: "machineos build, empty base index cache, 1 GiB base",
            base: &base_1g,
            repo: registry.reference("bench/out-b"),
            cache: CacheMode::Cold,
        },
    )?;
    cases.push(b);
    let (a100, tag_a100) = run_machineos_case(
        &clock,
        args,
        &machineos,
        &work,
        &MachineosCase {
            key: "(a')",
            title: "machineos build, warm base index cache, 100 MiB base",
            base: &base_100m,
            repo: registry.reference("bench/out-a100"),
            cache: CacheMode::Warm,
        },
    )?;
    cases.push(a100);

    let mut comparison = None;
    if !args.skip_buildah {
        let context = work.join("context");
        let (c_base, c_layout, a_image) = if args.buildah_on_100m {
            (&base_100m, &bases[1].1, &tag_a100)
        } else {
            (&base_1g, &bases[0].1, &tag_a)
        };
        buildah::write_context(
            &context,
            c_base,
            &rendered.currentconfig,
            &config_for_ignition_2_14(&rendered.config)?,
        )?;
        let (mut c, tag_c, cleanup) = run_buildah_case(
            &clock,
            args,
            &work,
            &context,
            &registry.reference("bench/out-c"),
        )?;
        if args.buildah_on_100m {
            c.title = format!("{}, **100 MiB base** (--buildah-on-100m)", c.title);
        }
        cases.push(c);
        let compared = equality(&clock, &work, c_layout, a_image, &tag_c);
        if let Some(cleanup) = cleanup {
            clock.say("waiting for the vfs storage deletion");
            cleanup
                .join()
                .map_err(|_| anyhow::anyhow!("the storage deletion thread panicked"))??;
        }
        comparison = Some(compared?);
    }

    let elapsed = clock.0.elapsed();
    let report = Report {
        machine,
        bases: bases
            .iter()
            .map(|(p, _, g)| (p.name().to_owned(), g.clone()))
            .collect(),
        fixture,
        rendered_name: rendered.name.clone(),
        cases,
        comparison: comparison.clone(),
        notes,
        elapsed,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let markdown = report::markdown(&report);
    println!("{markdown}");
    if let Some(dir) = args.report.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&args.report, &markdown)
        .with_context(|| format!("writing {}", args.report.display()))?;
    let json_path = args.report.with_extension("json");
    std::fs::write(
        &json_path,
        serde_json::to_vec_pretty(&report::json(&report))?,
    )
    .with_context(|| format!("writing {}", json_path.display()))?;
    clock.say(format!(
        "report written to {} (samples in {})",
        args.report.display(),
        json_path.display()
    ));
    drop(registry);
    if !args.keep {
        remove_tree(&work)?;
    }
    Ok(match comparison {
        Some(c) if !c.equal() => {
            clock.say("(a) and (c) differ: see the report");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_psi() {
        let text = "some avg10=27.61 avg60=23.83 avg300=18.73 total=258300119\nfull avg10=20.04 avg60=16.95 avg300=13.21 total=151563913\n";
        assert_eq!(parse_io_pressure(text), Some(27.61));
        assert_eq!(parse_io_pressure(""), None);
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("(a)"), "a");
        assert_eq!(slug("(a')"), "aprime");
    }

    #[test]
    fn ignition_2_14_gets_version_3_3_0() {
        let c = serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {}});
        let out: Value = serde_json::from_slice(&config_for_ignition_2_14(&c).unwrap()).unwrap();
        assert_eq!(out["ignition"]["version"], "3.3.0");
        assert_eq!(out["storage"], c["storage"]);
    }
}
