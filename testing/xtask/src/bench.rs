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
//!    cache, (b) the same with an empty cache directory each time, (a') (a) on the 100 MB
//!    base, (e) `xtask inprocess` pinned to one CPU — the native builder as a library, as the
//!    controller runs it (indexes and configs in memory), 30 builds — (d) `buildah bud --layers=false --pull=never` + `buildah push` on an overlay
//!    storage that already holds the base (pulled untimed; kernel overlayfs, or
//!    fuse-overlayfs where a probe finds the kernel's unusable), then (c) `buildah bud` +
//!    `buildah push` from an empty vfs storage each time. (d) runs before (c) so that
//!    (c)'s ~27 GB of writes and their deletion do not land on it.
//! 4. Unpacks (a)'s, (c)'s and (d)'s last images and the base and compares the changes of
//!    each buildah build with (a)'s ([`crate::compare`]).
//! 5. Prints the report (markdown) and writes it, with every sample as JSON beside it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use machineos_synth::{Generated, Profile};
use machineos_testkit::{CopyOptions, TestRegistry};
use serde_json::Value;

use crate::base;
use crate::buildah::{self, Driver, Storage};
use crate::compare::{self, Comparison};
use crate::measure::{self, Cmd};
use crate::report::{self, BestStorage, CaseReport, Machine, Report};

/// Arguments of `xtask bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Repetitions of (a), (b) and (a'); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Builds of (e), the in-process case (after one untimed build).
    #[arg(long, default_value_t = 30)]
    pub inprocess_reps: usize,
    /// Repetitions of (c), the MCO's buildah build. Each takes 2–6 minutes here, plus 2–3
    /// minutes to delete its ~27 GB vfs storage (untimed), hence the default of one (the
    /// whole run must stay under 15 minutes).
    #[arg(long, default_value_t = 1)]
    pub buildah_reps: usize,
    /// Repetitions of (d), buildah at its best (about 1.5 s each).
    #[arg(long, default_value_t = 5)]
    pub buildah_best_reps: usize,
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
    /// Skip both buildah cases, (c) and (d), and the equality checks (for a quick look at
    /// machineos's figures).
    #[arg(long)]
    pub skip_buildah: bool,
    /// Skip (c) only, the slow MCO-style build, and its equality check; (d) still runs.
    #[arg(long)]
    pub skip_mco_buildah: bool,
    /// Run (c), (d) and the equality checks on the 100 MiB base instead (against (a')'s
    /// image): a quick check of the buildah paths, whose figures are then not comparable.
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
        let storage = buildah::Storage::new(&dir, Driver::Vfs)?;
        last_tag = format!("{repo}:rep{rep}");
        settle_io(clock);
        clock.say(format!(
            "(c) rep {}/{}: buildah bud + push from an empty vfs storage (minutes)…",
            rep + 1,
            args.buildah_reps
        ));
        let result = buildah::build(
            &storage,
            buildah::MCO_BUD,
            context,
            &last_tag,
            &scratch,
            &log,
        );
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

/// Sets up (d)'s storage below `work`: kernel overlay if it works, else fuse-overlayfs.
///
/// The probe is the real thing: `buildah info` initialises the overlay driver (which
/// test-mounts an overlay), the base is pulled (untimed, once) and mounted as a working
/// container's root like a `RUN` mounts it. Any failure with the kernel's overlayfs
/// discards that storage and starts again with fuse-overlayfs as the mount program.
fn prepare_best_storage(
    clock: &Clock,
    work: &Path,
    image: &str,
) -> Result<(Storage, PathBuf, BestStorage)> {
    let kernel_dir = work.join("buildah-best");
    let kernel_error = match try_storage(clock, &kernel_dir, Driver::Overlay, image) {
        Ok((storage, note)) => return Ok((storage, kernel_dir, note)),
        Err(e) => one_line(&format!("{e:#}"), 400),
    };
    clock.say(format!(
        "(d) kernel overlay probe failed; falling back to fuse-overlayfs: {kernel_error}"
    ));
    discard_storage(
        &Storage {
            root: kernel_dir.join("root"),
            runroot: kernel_dir.join("runroot"),
            driver: Driver::Overlay,
        },
        &kernel_dir,
    )?;
    if !Path::new(buildah::FUSE_OVERLAYFS).is_file() {
        bail!(
            "kernel overlayfs is unusable for buildah here ({kernel_error}) and {} is missing: `apt-get install fuse-overlayfs`",
            buildah::FUSE_OVERLAYFS
        );
    }
    let fuse_dir = work.join("buildah-best-fuse");
    let (storage, mut note) = try_storage(clock, &fuse_dir, Driver::FuseOverlay, image)
        .context("(d) with fuse-overlayfs, after the kernel overlay probe failed")?;
    clock.say(
        "(d) on fuse-overlayfs, expect minutes per repetition (3 on the 100 MiB base when this was \
         tried; without native overlay diff the commit compares the whole tree with the base's \
         through FUSE, probably most of it); --buildah-best-reps lowers the count",
    );
    note.kernel_probe_failure = Some(kernel_error);
    note.mount_program_version = measure::run(buildah::FUSE_OVERLAYFS, &["--version"])
        .ok()
        .and_then(|v| {
            v.lines()
                .find(|l| l.starts_with("fuse-overlayfs"))
                .map(str::to_owned)
        });
    Ok((storage, fuse_dir, note))
}

/// `text` on one line (newlines as ` / `), cut to about `max` characters, for the report.
fn one_line(text: &str, max: usize) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ");
    match joined.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &joined[..i]),
        None => joined,
    }
}

/// One attempt of [`prepare_best_storage`] with `driver`, in `dir`.
fn try_storage(
    clock: &Clock,
    dir: &Path,
    driver: Driver,
    image: &str,
) -> Result<(Storage, BestStorage)> {
    remove_tree(dir)?;
    let storage = Storage::new(dir, driver)?;
    let graph_status = storage.graph_status()?;
    clock.say(format!(
        "(d) pulling {image} into a persistent {} storage (untimed)",
        driver.name()
    ));
    let started = Instant::now();
    storage.pull(image)?;
    let pull = started.elapsed().as_secs_f64();
    storage
        .probe_mount(image)
        .context("mounting the base as a working container's root")?;
    clock.say(format!(
        "(d) base pulled in {pull:.1} s and mounted once; {} ({})",
        driver.name(),
        graph_status
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok((
        storage,
        BestStorage {
            driver: driver.name(),
            graph_status,
            kernel_probe_failure: None,
            mount_program_version: None,
            pull,
        },
    ))
}

/// Unmounts what buildah may still have mounted of `storage`, then deletes `dir`.
fn discard_storage(storage: &Storage, dir: &Path) -> Result<()> {
    if dir.exists() {
        storage.unmount_all();
    }
    remove_tree(dir)
}

/// (d)'s storage, kept until nothing timed follows (deleting its ~60 000 files takes a
/// couple of minutes on a slow disk, which would otherwise precede (c)'s build).
struct KeptStorage {
    storage: Storage,
    dir: PathBuf,
}

impl KeptStorage {
    /// Unmounts what buildah may still have mounted and deletes the storage in the
    /// background.
    fn delete_in_background(self, clock: &Clock) -> Cleanup {
        // No `du` here: it walks the same ~60 000 files (20 s on a loaded disk).
        clock.say("(d) deleting its storage in the background");
        self.storage.unmount_all();
        std::thread::spawn(move || remove_tree(&self.dir))
    }
}

/// Case (d): buildah at its best, on a persistent overlay storage that holds the base.
/// Returns the storage too, for the caller to delete when nothing timed follows.
fn run_best_case(
    clock: &Clock,
    args: &BenchArgs,
    work: &Path,
    context: &Path,
    base: &str,
    repo: &str,
) -> Result<(CaseReport, String, BestStorage, KeptStorage)> {
    let log = work.join("d.log");
    let scratch = work.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    let (storage, dir, note) = prepare_best_storage(clock, work, base)?;
    settle_io(clock);
    let result = best_reps(clock, args, &storage, context, repo, &scratch, &log);
    let (parts, totals, last_tag) = match result {
        Ok(r) => r,
        Err(e) => {
            clock.say("(d) failed; deleting its storage before reporting");
            discard_storage(&storage, &dir)?;
            return Err(e);
        }
    };
    let fuse_opt = if storage.driver == Driver::FuseOverlay {
        format!(
            " --storage-opt overlay.mount_program={}",
            buildah::FUSE_OVERLAYFS
        )
    } else {
        String::new()
    };
    let command = format!(
        "buildah --root R --runroot RR --storage-driver overlay{fuse_opt} bud --isolation chroot {} -f Containerfile -t {repo}:TAG . && buildah … push --tls-verify=false {repo}:TAG && buildah … rmi {repo}:TAG (untimed); R holds the base, pulled once beforehand (untimed)",
        buildah::BEST_BUD.join(" ")
    );
    Ok((
        CaseReport {
            key: "(d)",
            title: format!(
                "buildah at its best: the base already in a persistent {} storage; COPY, RUN ignition-apply, commit, push (`--layers=false --pull=never`, chroot)",
                storage.driver.name()
            ),
            command,
            samples: totals,
            summaries: Vec::new(),
            parts,
        },
        last_tag,
        note,
        KeptStorage { storage, dir },
    ))
}

/// The `bud` and `push` samples, their sums, and the last tag pushed.
type BestSamples = (
    Vec<(String, Vec<measure::Sample>)>,
    Vec<measure::Sample>,
    String,
);

/// (d)'s timed repetitions; each built image is removed (untimed) after its push.
fn best_reps(
    clock: &Clock,
    args: &BenchArgs,
    storage: &Storage,
    context: &Path,
    repo: &str,
    scratch: &Path,
    log: &Path,
) -> Result<BestSamples> {
    let mut buds = Vec::new();
    let mut pushes = Vec::new();
    let mut totals = Vec::new();
    let mut last_tag = String::new();
    for rep in 0..args.buildah_best_reps {
        last_tag = format!("{repo}:rep{rep}");
        let b = buildah::build(storage, buildah::BEST_BUD, context, &last_tag, scratch, log)?;
        let total = b.bud.then(&b.push);
        clock.say(format!(
            "(d) rep {}/{}: {:.2} s wall (bud {:.2} s, push {:.2} s), {:.2} s CPU, {:.1} MB peak RSS",
            rep + 1,
            args.buildah_best_reps,
            total.wall,
            b.bud.wall,
            b.push.wall,
            total.cpu(),
            total.max_rss_kib as f64 * 1024.0 / 1e6
        ));
        // The image is in the registry now; the base stays in the storage.
        storage.rmi(&last_tag)?;
        buds.push(b.bud);
        pushes.push(b.push);
        totals.push(total);
    }
    Ok((
        vec![("bud".to_owned(), buds), ("push".to_owned(), pushes)],
        totals,
        last_tag,
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

/// Compares the changes each buildah build in `others` (case key, image) made to the base
/// with (a)'s, in the order given.
fn equality(
    clock: &Clock,
    work: &Path,
    base_layout: &Path,
    image_a: &str,
    others: &[(&'static str, String)],
) -> Result<Vec<Comparison>> {
    let dir = work.join("compare");
    remove_tree(&dir)?;
    std::fs::create_dir_all(&dir)?;
    let layout = dir.join("layout");
    clock.say("equality: unpacking and snapshotting the base and (a) with umoci");
    let base_root = unpack_layout(base_layout, base::TAG, &dir.join("base"))?;
    let base_tree = compare::snapshot(&base_root)?;
    remove_tree(&dir.join("base"))?;
    let a_root = unpack_image(image_a, &layout, "a", &dir.join("a"))?;
    let a_tree = compare::snapshot(&a_root)?;
    remove_tree(&dir.join("a"))?;
    let mut results = Vec::new();
    for (key, image) in others {
        clock.say(format!(
            "equality: unpacking {key}, comparing its changes with (a)'s"
        ));
        let name = slug(key);
        let root = unpack_image(image, &layout, &name, &dir.join(&name))?;
        let tree = compare::snapshot(&root)?;
        remove_tree(&dir.join(&name))?;
        let result = compare::compare(&base_tree, &a_tree, key, &tree);
        clock.say(format!(
            "equality of (a) and {key}: {}",
            if result.equal() {
                "equal".to_owned()
            } else {
                format!("{} differences", result.differences.len())
            }
        ));
        results.push(result);
    }
    remove_tree(&dir)?;
    Ok(results)
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

/// Runs the benchmark. Exit status 1 when (a) differs from (c) or (d); targets are reported
/// only.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    let clock = Clock(Instant::now());
    let run_d = !args.skip_buildah;
    let run_c = run_d && !args.skip_mco_buildah;
    if args.reps == 0 || (run_c && args.buildah_reps == 0) || (run_d && args.buildah_best_reps == 0)
    {
        bail!("--reps, --buildah-reps and --buildah-best-reps must be at least 1");
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
        &["out-a", "out-b", "out-c", "out-d", "out-e"],
    )?;
    let base_100m = push_base(
        &clock,
        &registry,
        &bases[1].1,
        "base-100m",
        &["out-a100", "out-c", "out-d"],
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

    // (e): the native builder as a library, as the controller builds — one process pinned
    // to one CPU, indexes and configs in memory, (a)'s cache directory behind them.
    let rendered_file = work.join("rendered-currentconfig.json");
    std::fs::write(&rendered_file, &rendered.currentconfig)
        .with_context(|| format!("writing {}", rendered_file.display()))?;
    clock.say(format!(
        "(e) {} in-process builds on one CPU (taskset -c 0)",
        args.inprocess_reps
    ));
    let inprocess = match crate::inprocess::run_pinned(
        &base_1g,
        &registry.reference("bench/out-e"),
        &rendered_file,
        &work.join(format!("cache-{}", slug("(a)"))),
        args.inprocess_reps,
    ) {
        Ok(v) => Some(v),
        Err(e) => {
            let note = format!("(e) did not run: {e:#}");
            clock.say(note.clone());
            notes.push(note);
            None
        }
    };

    let mut comparisons = Vec::new();
    let mut best_storage = None;
    if run_d {
        let context = work.join("context");
        let (buildah_base, buildah_layout, a_image) = if args.buildah_on_100m {
            (&base_100m, &bases[1].1, &tag_a100)
        } else {
            (&base_1g, &bases[0].1, &tag_a)
        };
        buildah::write_context(
            &context,
            buildah_base,
            &rendered.currentconfig,
            &config_for_ignition_2_14(&rendered.config)?,
        )?;
        let on_100m = |title: String| {
            if args.buildah_on_100m {
                format!("{title}, **100 MiB base** (--buildah-on-100m)")
            } else {
                title
            }
        };
        let mut others = Vec::new();
        let (mut d, tag_d, storage, d_storage) = run_best_case(
            &clock,
            args,
            &work,
            &context,
            buildah_base,
            &registry.reference("bench/out-d"),
        )?;
        d.title = on_100m(d.title);
        best_storage = Some(storage);
        let mut cleanups = Vec::new();
        if run_c {
            let c_result = run_buildah_case(
                &clock,
                args,
                &work,
                &context,
                &registry.reference("bench/out-c"),
            );
            // Nothing timed follows (c): (d)'s storage goes now, whatever (c)'s outcome.
            cleanups.push(("(d)'s overlay", d_storage.delete_in_background(&clock)));
            let (mut c, tag_c, c_cleanup) = c_result?;
            c.title = on_100m(c.title);
            cases.push(c);
            others.push(("(c)", tag_c));
            cleanups.extend(c_cleanup.map(|c| ("(c)'s vfs", c)));
        } else {
            cleanups.push(("(d)'s overlay", d_storage.delete_in_background(&clock)));
        }
        cases.push(d);
        others.push(("(d)", tag_d));
        let compared = equality(&clock, &work, buildah_layout, a_image, &others);
        for (what, cleanup) in cleanups {
            clock.say(format!("waiting for the deletion of {what} storage"));
            cleanup
                .join()
                .map_err(|_| anyhow::anyhow!("the storage deletion thread panicked"))??;
        }
        comparisons = compared?;
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
        comparisons: comparisons.clone(),
        best_storage,
        inprocess,
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
    let differing: Vec<&str> = comparisons
        .iter()
        .filter(|c| !c.equal())
        .map(|c| c.other)
        .collect();
    Ok(if differing.is_empty() {
        ExitCode::SUCCESS
    } else {
        clock.say(format!(
            "(a) and {} differ: see the report",
            differing.join(" and ")
        ));
        ExitCode::FAILURE
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
    fn one_line_joins_and_cuts() {
        assert_eq!(one_line("a\n\n b \nc", 100), "a / b / c");
        assert_eq!(one_line("abcdef", 3), "abc…");
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
