//! The bench's report: the machine, the inputs, a markdown table of medians, the ratios, the
//! targets (met or missed, never asserted) and the equality checks; plus every sample as JSON.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use machineos_synth::Generated;
use serde_json::{Value, json};

use crate::compare::Comparison;
use crate::fixture::Summary;
use crate::measure::{Sample, median, run};

/// The machine and tool versions the figures come from.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// `nproc`.
    pub nproc: String,
    /// `MemTotal`, GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os: String,
    /// Tool versions, one string each.
    pub tools: Vec<String>,
    /// `git describe`-like revision of the checkout, if any.
    pub revision: String,
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_owned()
}

fn file_field(path: &str, key: &str, sep: char) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(sep)?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

impl Machine {
    /// Reads `/proc`, `/etc/os-release` and the tools' `--version`.
    pub fn detect(machineos: &Path, ignition: &Path) -> Machine {
        let memory_gib = file_field("/proc/meminfo", "MemTotal", ':')
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / f64::from(1 << 20));
        let version = |program: &str, args: &[&str]| {
            run(program, args)
                .map(|o| first_line(&o))
                .unwrap_or_else(|_| format!("{program}: unknown"))
        };
        let ignition_version = run(
            "bash",
            &[
                "-c",
                r#"exec -a ignition-apply "$0" --version 2>&1"#,
                &ignition.display().to_string(),
            ],
        )
        .map(|o| first_line(&o))
        .unwrap_or_else(|_| "ignition-apply: unknown".to_owned());
        let revision = match run("git", &["rev-parse", "--short", "HEAD"]) {
            Ok(rev) => {
                let dirty = run("git", &["status", "--porcelain"])
                    .map(|s| !s.trim().is_empty())
                    .unwrap_or(false);
                format!(
                    "{}{}",
                    rev.trim(),
                    if dirty { " (with local changes)" } else { "" }
                )
            }
            Err(_) => "unknown".to_owned(),
        };
        Machine {
            cpu: file_field("/proc/cpuinfo", "model name", ':').unwrap_or_else(|| "?".into()),
            nproc: run("nproc", &[])
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
            memory_gib,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
            os: file_field("/etc/os-release", "PRETTY_NAME", '=').unwrap_or_default(),
            tools: vec![
                version(&machineos.display().to_string(), &["--version"]),
                version("buildah", &["--version"]),
                version("skopeo", &["--version"]),
                version("umoci", &["--version"]),
                ignition_version,
            ],
            revision,
        }
    }

    /// One line for the progress output and the report.
    pub fn line(&self) -> String {
        format!(
            "{}, {} CPUs (nproc), {:.1} GiB memory, Linux {}, {}",
            self.cpu, self.nproc, self.memory_gib, self.kernel, self.os
        )
    }
}

/// One case's measurements.
#[derive(Debug, Clone)]
pub struct CaseReport {
    /// `(a)`, `(b)`, `(a')`, `(c)` or `(d)`.
    pub key: &'static str,
    /// What it is.
    pub title: String,
    /// The command of one repetition.
    pub command: String,
    /// One sample per repetition.
    pub samples: Vec<Sample>,
    /// machineos's JSON summaries, one per repetition (empty for buildah).
    pub summaries: Vec<Value>,
    /// Named sub-measurements (buildah's `bud` and `push`), one sample per repetition.
    pub parts: Vec<(String, Vec<Sample>)>,
}

impl CaseReport {
    fn med(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(&self.samples.iter().map(f).collect::<Vec<_>>())
    }

    /// Median wall seconds.
    pub fn wall(&self) -> f64 {
        self.med(|s| s.wall)
    }

    /// Median CPU seconds.
    pub fn cpu(&self) -> f64 {
        self.med(Sample::cpu)
    }

    /// Median peak RSS, bytes.
    pub fn rss(&self) -> f64 {
        self.med(|s| s.max_rss_kib as f64 * 1024.0)
    }

    /// Largest peak RSS over the repetitions, bytes.
    pub fn rss_max(&self) -> f64 {
        self.samples
            .iter()
            .map(|s| s.max_rss_kib as f64 * 1024.0)
            .fold(0.0, f64::max)
    }

    fn wall_range(&self) -> (f64, f64) {
        let w: Vec<f64> = self.samples.iter().map(|s| s.wall).collect();
        (
            w.iter().copied().fold(f64::INFINITY, f64::min),
            w.iter().copied().fold(0.0, f64::max),
        )
    }

    fn stage(&self, key: &str) -> f64 {
        median(
            &self
                .summaries
                .iter()
                .filter_map(|s| {
                    s.pointer(&format!("/timings/{key}"))
                        .and_then(Value::as_f64)
                })
                .collect::<Vec<_>>(),
        )
    }
}

/// How (d)'s storage was set up.
#[derive(Debug, Clone)]
pub struct BestStorage {
    /// The storage driver that ran ([`crate::buildah::Driver::name`]).
    pub driver: &'static str,
    /// `buildah info`'s `store.GraphStatus`.
    pub graph_status: Vec<(String, String)>,
    /// Why kernel overlayfs was not used, when fuse-overlayfs ran instead.
    pub kernel_probe_failure: Option<String>,
    /// fuse-overlayfs's version, when it ran.
    pub mount_program_version: Option<String>,
    /// Seconds the untimed pull of the base into the storage took.
    pub pull: f64,
}

/// Everything the report shows.
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// The generated bases: profile name and statistics.
    pub bases: Vec<(String, Generated)>,
    /// The MachineConfig fixture's counts.
    pub fixture: Summary,
    /// The rendered MachineConfig's name.
    pub rendered_name: String,
    /// The cases: (a), (b), (a'), then those of (c) and (d) that ran ((d) runs before (c)).
    pub cases: Vec<CaseReport>,
    /// The equality checks of (a) against (c) and (d), those that ran.
    pub comparisons: Vec<Comparison>,
    /// (d)'s storage, when (d) ran.
    pub best_storage: Option<BestStorage>,
    /// (e)'s report (`xtask inprocess`), when it ran.
    pub inprocess: Option<Value>,
    /// Remarks (e.g. a stale checked-in render).
    pub notes: Vec<String>,
    /// How long the whole bench took.
    pub elapsed: Duration,
    /// The command line.
    pub command: String,
}

impl Report {
    fn case(&self, key: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|c| c.key == key)
    }
}

/// `12.3 ms`, `4.56 s`, `212 s (3:32)`.
fn time(secs: f64) -> String {
    if secs.is_nan() {
        "–".to_owned()
    } else if secs < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else if secs < 100.0 {
        format!("{secs:.2} s")
    } else {
        let s = secs.round() as u64;
        format!("{s} s ({}:{:02})", s / 60, s % 60)
    }
}

/// Milliseconds as `12.3 ms`.
fn ms(x: f64) -> String {
    time(x / 1e3)
}

/// Bytes as decimal MB.
fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

fn ratio(x: f64) -> String {
    if x.is_nan() || x.is_infinite() {
        "–".to_owned()
    } else if x >= 10.0 {
        format!("{x:.0}×")
    } else {
        format!("{x:.2}×")
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1 << 20))
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut m = String::new();
    let _ = writeln!(
        m,
        "## Benchmark: `machineos build` vs the MCO's buildah build\n"
    );
    let _ = writeln!(
        m,
        "Machine: {}; checkout {}.\nTools: {}.\n",
        r.machine.line(),
        r.machine.revision,
        r.machine.tools.join("; ")
    );
    for (name, g) in &r.bases {
        let _ = writeln!(
            m,
            "- Base `{name}` (machineos-synth, Fedora CoreOS-shaped, + ignition-apply's runtime): {} layers, {} files, {} of file contents, {} of tar, {} gzip.",
            g.layers,
            g.files,
            mib(g.content_bytes),
            mib(g.uncompressed_bytes),
            mib(g.compressed_bytes)
        );
    }
    let layer = r
        .case("(a)")
        .and_then(|c| c.summaries.first())
        .map(|s| {
            format!(
                "; the layer: {} entries, {} bytes gzip ({} uncompressed)",
                s.get("entries").cloned().unwrap_or(Value::Null),
                s.pointer("/layer/size").cloned().unwrap_or(Value::Null),
                s.pointer("/layer/uncompressedSize")
                    .cloned()
                    .unwrap_or(Value::Null)
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        m,
        "- Config: `bench/machineconfigs`, {} MachineConfigs ({} files, {} units, {:.0} KB) rendered for pool `worker` as `{}`{layer}.",
        r.fixture.manifests,
        r.fixture.files,
        r.fixture.units,
        r.fixture.bytes as f64 / 1e3,
        r.rendered_name,
    );
    let _ = writeln!(
        m,
        "- Registry: CNCF distribution (`docker-registry`) on 127.0.0.1, plain HTTP, page cache warm; every repetition starts after `sync`."
    );
    if let Some(s) = &r.best_storage {
        let status = s
            .graph_status
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let why = match (&s.kernel_probe_failure, &s.mount_program_version) {
            (Some(e), v) => format!(
                " — **fuse-overlayfs fallback** ({}), because the kernel overlay probe failed: {e}",
                v.as_deref().unwrap_or("version unknown")
            ),
            (None, _) => String::new(),
        };
        let _ = writeln!(
            m,
            "- (d)'s storage: {}{why}; `buildah info`: {status}; the base pulled into it once beforehand in {} (untimed).",
            s.driver,
            time(s.pull)
        );
    }
    let _ = writeln!(m);

    let _ = writeln!(
        m,
        "| case | what | runs | wall, median | wall, min–max | CPU user+sys, median | peak RSS, median (max) |"
    );
    let _ = writeln!(m, "|---|---|---:|---:|---:|---:|---:|");
    for c in &r.cases {
        let (lo, hi) = c.wall_range();
        let _ = writeln!(
            m,
            "| {} | {} | {} | **{}** | {} – {} | {} | {} ({}) |",
            c.key,
            c.title,
            c.samples.len(),
            time(c.wall()),
            time(lo),
            time(hi),
            time(c.cpu()),
            mb(c.rss()),
            mb(c.rss_max())
        );
        for (name, parts) in &c.parts {
            let w = median(&parts.iter().map(|s| s.wall).collect::<Vec<_>>());
            let cpu = median(&parts.iter().map(Sample::cpu).collect::<Vec<_>>());
            let rss = median(
                &parts
                    .iter()
                    .map(|s| s.max_rss_kib as f64 * 1024.0)
                    .collect::<Vec<_>>(),
            );
            let _ = writeln!(
                m,
                "| {} | of which `buildah {name}` | {} | {} | | {} | {} |",
                c.key,
                parts.len(),
                time(w),
                time(cpu),
                mb(rss)
            );
        }
    }

    let machineos: Vec<&CaseReport> = r.cases.iter().filter(|c| !c.summaries.is_empty()).collect();
    if !machineos.is_empty() {
        let _ = writeln!(
            m,
            "\n`machineos build`'s own stage timings (JSON summary, median ms; the process's wall time above adds start-up and exit):\n"
        );
        let _ = writeln!(
            m,
            "| case | resolve | index | plan | derive | publish | total | base index cache |"
        );
        let _ = writeln!(m, "|---|---:|---:|---:|---:|---:|---:|---|");
        for c in machineos {
            let cache = c
                .summaries
                .iter()
                .filter_map(|s| s.get("baseIndexCache"))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                m,
                "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
                c.key,
                c.stage("resolveMs"),
                c.stage("indexMs"),
                c.stage("planMs"),
                c.stage("deriveMs"),
                c.stage("publishMs"),
                c.stage("totalMs"),
                cache
            );
        }
    }

    let a = r.case("(a)");
    let b = r.case("(b)");
    let c = r.case("(c)");
    let d = r.case("(d)");
    let a100 = r.case("(a')");
    let div =
        |x: Option<&CaseReport>, y: Option<&CaseReport>, f: fn(&CaseReport) -> f64| match (x, y) {
            (Some(x), Some(y)) => f(x) / f(y),
            _ => f64::NAN,
        };
    let c_a = div(c, a, CaseReport::wall);
    let d_a = div(d, a, CaseReport::wall);
    let c_b = div(c, b, CaseReport::wall);
    let base_ratio = div(a, a100, CaseReport::wall);
    let _ = writeln!(m, "\nRatios (medians):\n");
    let _ = writeln!(
        m,
        "- (c)/(a): wall {}, CPU {} — what an MCO user gets today: a fresh build pod pulls the whole base into an empty vfs storage, copies it for each step, and pushes, where machineos with its base index cache reads an index and uploads one layer.",
        ratio(c_a),
        ratio(div(c, a, CaseReport::cpu))
    );
    let _ = writeln!(
        m,
        "- (d)/(a): wall {}, CPU {} — buildah at its best, the base already local and overlay storage: the fair tool-to-tool comparison, each tool starting from what it keeps of the base on the machine (buildah the unpacked layers, machineos its index) and pushing to a repository that has the base's blobs.",
        ratio(d_a),
        ratio(div(d, a, CaseReport::cpu))
    );
    let _ = writeln!(
        m,
        "- (c)/(d): wall {}, CPU {} — what the fresh build pod (pull into empty storage) and vfs cost buildah itself.",
        ratio(div(c, d, CaseReport::wall)),
        ratio(div(c, d, CaseReport::cpu))
    );
    let _ = writeln!(
        m,
        "- (c)/(b): wall {}, CPU {}",
        ratio(c_b),
        ratio(div(c, b, CaseReport::cpu))
    );
    let _ = writeln!(
        m,
        "- (a) on the 1 GiB base / (a') on the 100 MiB base: wall {}, CPU {}, peak RSS {}",
        ratio(base_ratio),
        ratio(div(a, a100, CaseReport::cpu)),
        ratio(div(a, a100, CaseReport::rss))
    );

    let e = r.inprocess.as_ref();
    let ef = |ptr: &str| e.and_then(|v| v.pointer(ptr)).and_then(Value::as_f64);
    if let Some(v) = e {
        let stage = |k: &str| ef(&format!("/stagesMsMedian/{k}")).map_or("–".into(), ms);
        let _ = writeln!(
            m,
            "\n(e) the native builder as a library, as the controller builds (`xtask inprocess`: one process pinned to one CPU, one registry client, base index and config kept in memory; {} builds after one untimed, each a new layer): **{}** median per build, {} builds per second on one core, {} of CPU per build; stages (median): resolve {}, index {}, plan {}, derive {}, publish {}.",
            v["builds"],
            ef("/wallMsMedian").map_or("–".into(), ms),
            ef("/buildsPerSecond").map_or("–".into(), |x| format!("{x:.1}")),
            ef("/cpuMsPerBuild").map_or("–".into(), ms),
            stage("resolve"),
            stage("index"),
            stage("plan"),
            stage("derive"),
            stage("publish"),
        );
    }

    let _ = writeln!(m, "\nTargets (reported, not asserted):\n");
    let _ = writeln!(m, "| target | measured | |");
    let _ = writeln!(m, "|---|---:|---|");
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measured",
    };
    let known = |x: f64| (!x.is_nan()).then_some(x);
    let spread = a
        .zip(a100)
        .map(|(x, y)| x.wall().max(y.wall()) / x.wall().min(y.wall()));
    let rows = [
        (
            "(a) at least 100× faster than (c)",
            ratio(c_a),
            known(c_a).map(|x| x >= 100.0),
        ),
        (
            "(a) at least 50× faster than (d)",
            ratio(d_a),
            known(d_a).map(|x| x >= 50.0),
        ),
        (
            "(a) median at most 27 ms",
            a.map_or("–".into(), |x| time(x.wall())),
            a.map(|x| x.wall() <= 0.027),
        ),
        (
            "(e) in-process median at most 10 ms",
            ef("/wallMsMedian").map_or("–".into(), ms),
            ef("/wallMsMedian").map(|x| x <= 10.0),
        ),
        (
            "(b) indexing the 1 GiB base at most 1.5 s (its index stage)",
            b.map_or("–".into(), |x| ms(x.stage("indexMs"))),
            b.map(|x| x.stage("indexMs") <= 1500.0),
        ),
        (
            "(a) within 1.5× between the 100 MiB and the 1 GiB base",
            spread.map_or("–".into(), ratio),
            spread.map(|x| x <= 1.5),
        ),
        (
            "(a) peak RSS at most 32 MB (largest of the runs)",
            a.map_or("–".into(), |x| mb(x.rss_max())),
            a.map(|x| x.rss_max() <= 32e6),
        ),
        (
            "(b) faster than (c)",
            ratio(c_b),
            known(c_b).map(|x| x > 1.0),
        ),
    ];
    for (what, value, ok) in rows {
        let _ = writeln!(m, "| {what} | {value} | {} |", verdict(ok));
    }

    let _ = writeln!(m, "\nEquality of (a) with the buildah builds:\n");
    if r.comparisons.is_empty() {
        let _ = writeln!(m, "- not checked (buildah skipped)");
    }
    for cmp in &r.comparisons {
        let _ = writeln!(
            m,
            "- (a) and {}: **{}**: (a) changed {} paths of the base, {} {}; {} compared after leaving out {}; `{}` compared as sorted lines.",
            cmp.other,
            if cmp.equal() { "equal" } else { "DIFFERENT" },
            cmp.changed_a,
            cmp.other,
            cmp.changed_other,
            cmp.compared,
            if cmp.excluded.is_empty() {
                "nothing (no build artefact or known deviation was present)".to_owned()
            } else {
                excluded_by_reason(&cmp.excluded)
            },
            crate::compare::PRESET_FILE
        );
        for d in &cmp.differences {
            let _ = writeln!(m, "  - {d}");
        }
    }

    let _ = writeln!(m, "\nCommands (one repetition each):\n");
    for c in &r.cases {
        let _ = writeln!(m, "- {}: `{}`", c.key, c.command);
    }
    for n in &r.notes {
        let _ = writeln!(m, "\nNote: {n}");
    }
    let secs = r.elapsed.as_secs();
    let _ = writeln!(
        m,
        "\nRun: `{}` — {}:{:02} in total (generation, pushes, warm-ups, untimed clean-ups and the equality check included).",
        r.command,
        secs / 60,
        secs % 60
    );
    m
}

fn sample_json(s: &Sample) -> Value {
    json!({
        "wallS": s.wall,
        "userS": s.user,
        "sysS": s.sys,
        "maxRssKiB": s.max_rss_kib,
    })
}

/// Every sample and summary, for whoever wants more than medians.
pub fn json(r: &Report) -> Value {
    json!({
        "machine": {
            "cpu": r.machine.cpu,
            "nproc": r.machine.nproc,
            "memoryGiB": r.machine.memory_gib,
            "kernel": r.machine.kernel,
            "os": r.machine.os,
            "tools": r.machine.tools,
            "revision": r.machine.revision,
        },
        "cases": r.cases.iter().map(|c| json!({
            "key": c.key,
            "title": c.title,
            "command": c.command,
            "samples": c.samples.iter().map(sample_json).collect::<Vec<_>>(),
            "summaries": c.summaries,
            "parts": c.parts.iter().map(|(n, p)| json!({
                "name": n,
                "samples": p.iter().map(sample_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "comparisons": r.comparisons.iter().map(|c| json!({
            "case": c.other,
            "equal": c.equal(),
            "changedA": c.changed_a,
            "changedOther": c.changed_other,
            "compared": c.compared,
            "excluded": c.excluded.iter().map(|(p, why)| json!({"path": p, "why": why})).collect::<Vec<_>>(),
            "differences": c.differences,
        })).collect::<Vec<_>>(),
        "buildahBestStorage": r.best_storage.as_ref().map(|s| json!({
            "driver": s.driver,
            "graphStatus": s.graph_status.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "kernelProbeFailure": s.kernel_probe_failure,
            "mountProgramVersion": s.mount_program_version,
            "pullS": s.pull,
        })),
        "inprocess": r.inprocess,
        "elapsedS": r.elapsed.as_secs_f64(),
    })
}

/// The paths left out of the equality check, grouped by why: `why: `p`, `q`; why2: …`,
/// reasons in the order they first appear.
fn excluded_by_reason(excluded: &[(String, &'static str)]) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for (p, why) in excluded {
        match groups.iter_mut().find(|(w, _)| w == why) {
            Some((_, ps)) => ps.push(format!("`{p}`")),
            None => groups.push((why, vec![format!("`{p}`")])),
        }
    }
    groups
        .into_iter()
        .map(|(why, ps)| format!("{why}: {}", ps.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(time(0.0123), "12.3 ms");
        assert_eq!(time(4.561), "4.56 s");
        assert_eq!(time(212.4), "212 s (3:32)");
        assert_eq!(ratio(1234.4), "1234×");
        assert_eq!(ratio(1.234), "1.23×");
        assert_eq!(mb(21_300_000.0), "21.3 MB");
    }

    fn case(key: &'static str, wall: f64) -> CaseReport {
        let sample = Sample {
            wall,
            user: wall / 2.0,
            sys: wall / 4.0,
            max_rss_kib: 1000,
            stdout: String::new(),
        };
        CaseReport {
            key,
            title: key.to_owned(),
            command: "cmd".to_owned(),
            samples: vec![sample.clone(); 5],
            summaries: Vec::new(),
            parts: vec![("bud".to_owned(), vec![sample; 5])],
        }
    }

    fn j_inprocess(r: &Report) -> i64 {
        json(r)["inprocess"]["builds"].as_i64().unwrap_or(0)
    }

    #[test]
    fn buildah_at_its_best_is_reported() {
        let r = Report {
            machine: Machine::default(),
            bases: Vec::new(),
            fixture: Summary {
                manifests: 1,
                files: 1,
                units: 1,
                bytes: 1,
            },
            rendered_name: "rendered-worker-x".to_owned(),
            cases: vec![case("(a)", 0.05), case("(d)", 1.5)],
            comparisons: vec![Comparison {
                other: "(d)",
                ..Comparison::default()
            }],
            best_storage: Some(BestStorage {
                driver: "overlay (kernel overlayfs)",
                graph_status: vec![("Native Overlay Diff".to_owned(), "true".to_owned())],
                kernel_probe_failure: None,
                mount_program_version: None,
                pull: 12.0,
            }),
            inprocess: Some(json!({
                "builds": 30,
                "wallMsMedian": 8.5,
                "stagesMsMedian": {"resolve": 1.0, "index": 0.1, "plan": 2.0, "derive": 3.0, "publish": 2.4},
                "buildsPerSecond": 110.0,
                "cpuMsPerBuild": 7.0,
            })),
            notes: Vec::new(),
            elapsed: Duration::from_secs(90),
            command: "xtask bench".to_owned(),
        };
        let md = markdown(&r);
        assert!(md.contains("- (d)/(a): wall 30×, CPU 30×"), "{md}");
        assert!(md.contains("- (c)/(a): wall –"), "{md}");
        assert!(
            md.contains("| (a) at least 50× faster than (d) | 30× | **missed** |"),
            "{md}"
        );
        assert!(md.contains("- (a) and (d): **equal**"), "{md}");
        assert!(md.contains("(d)'s storage: overlay (kernel overlayfs); `buildah info`: Native Overlay Diff: true"), "{md}");
        assert!(!md.contains("fuse-overlayfs fallback"), "{md}");
        assert!(md.contains("**8.5 ms** median per build, 110.0 builds per second on one core, 7.0 ms of CPU per build"), "{md}");
        assert!(
            md.contains("| (e) in-process median at most 10 ms | 8.5 ms | met |"),
            "{md}"
        );
        assert_eq!(j_inprocess(&r), 30);
        let j = json(&r);
        assert_eq!(j["cases"][1]["key"], "(d)");
        assert_eq!(j["cases"][1]["samples"].as_array().map(Vec::len), Some(5));
        assert_eq!(j["comparisons"][0]["case"], "(d)");
        assert_eq!(
            j["buildahBestStorage"]["graphStatus"]["Native Overlay Diff"],
            "true"
        );
    }
}
