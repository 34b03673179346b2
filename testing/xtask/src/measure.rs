//! Running a command and measuring it: wall time, CPU time (user + system, the command and
//! all its descendants) and peak resident set size.
//!
//! Without `unsafe` there is no `getrusage`, so the measurement is delegated to two standard
//! tools, nested: bash's `time` keyword prints the wall time and the `RUSAGE_CHILDREN` user
//! and system times of what it ran with millisecond resolution (`TIMEFORMAT='%3R %3U %3S'`),
//! and GNU time (`/usr/bin/time -f %M`) prints the largest maximum RSS of the command and its
//! waited-for descendants. GNU time's own cost (a fork and an exec, about a millisecond of
//! wall time and less of CPU) is inside the figures; it is the same for every case.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// GNU time, Debian package `time`.
pub const GNU_TIME: &str = "/usr/bin/time";

/// The runner: `bash -c SCRIPT bash TIMEFILE RSSFILE CMD...`. The command's stderr keeps
/// going to the caller's stderr (through fd 3); only `time`'s report goes to TIMEFILE.
const RUNNER: &str = r#"TIMEFORMAT='%3R %3U %3S'
tf=$1; rf=$2; shift 2
exec 3>&2
{ time /usr/bin/time -f '%M' -o "$rf" "$@" 2>&3 ; } 2>"$tf""#;

/// One measured run.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Wall-clock seconds.
    pub wall: f64,
    /// User CPU seconds of the command and its descendants.
    pub user: f64,
    /// System CPU seconds of the command and its descendants.
    pub sys: f64,
    /// Peak resident set size in KiB (the largest of the command and its descendants).
    pub max_rss_kib: u64,
    /// What the command wrote to stdout.
    pub stdout: String,
}

impl Sample {
    /// User + system CPU seconds.
    pub fn cpu(&self) -> f64 {
        self.user + self.sys
    }

    /// The sum of two runs (wall and CPU added, the larger peak RSS), e.g. `bud` + `push`.
    pub fn then(&self, next: &Sample) -> Sample {
        Sample {
            wall: self.wall + next.wall,
            user: self.user + next.user,
            sys: self.sys + next.sys,
            max_rss_kib: self.max_rss_kib.max(next.max_rss_kib),
            stdout: format!("{}{}", self.stdout, next.stdout),
        }
    }
}

/// A command to measure.
#[derive(Debug, Clone)]
pub struct Cmd {
    /// Program and arguments.
    pub argv: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Working directory, if not the current one.
    pub dir: Option<PathBuf>,
}

impl Cmd {
    /// `program args...` with the inherited environment.
    pub fn new<I, S>(program: impl Into<OsString>, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut argv = vec![program.into()];
        argv.extend(args.into_iter().map(Into::into));
        Cmd {
            argv,
            env: Vec::new(),
            dir: None,
        }
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: impl Into<String>) -> Cmd {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    /// The command line, for messages.
    pub fn shown(&self) -> String {
        let env = self.env.iter().map(|(k, v)| format!("{k}={v} "));
        env.collect::<String>()
            + &self
                .argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
    }
}

/// Runs `cmd` under the timers; its stderr, then its stdout, are appended to `log`. Fails,
/// with the tails of both, when the command exits non-zero.
pub fn measure(cmd: &Cmd, scratch: &Path, log: &Path) -> Result<Sample> {
    let time_file = scratch.join("time.out");
    let rss_file = scratch.join("rss.out");
    let _ = std::fs::remove_file(&time_file);
    let _ = std::fs::remove_file(&rss_file);
    let stderr = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(RUNNER)
        .arg("bash")
        .arg(&time_file)
        .arg(&rss_file)
        .args(&cmd.argv)
        .stdin(Stdio::null())
        .stderr(Stdio::from(stderr));
    for (k, v) in &cmd.env {
        c.env(k, v);
    }
    if let Some(d) = &cmd.dir {
        c.current_dir(d);
    }
    let out = c
        .output()
        .with_context(|| format!("running `{}`", cmd.shown()))?;
    // Keep the command's stdout in the log too (ignition-apply logs there under buildah).
    if let Ok(mut f) = File::options().append(true).open(log) {
        use std::io::Write as _;
        let _ = f.write_all(&out.stdout);
    }
    if !out.status.success() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        bail!(
            "`{}` failed with {}; its stdout ends with:\n{}\nits stderr ({}) ends with:\n{}",
            cmd.shown(),
            out.status,
            lines[lines.len().saturating_sub(30)..].join("\n"),
            log.display(),
            tail(log, 30)
        );
    }
    let times = std::fs::read_to_string(&time_file)
        .with_context(|| format!("reading {}", time_file.display()))?;
    let rss = std::fs::read_to_string(&rss_file)
        .with_context(|| format!("reading {}", rss_file.display()))?;
    let (wall, user, sys) =
        parse_times(&times).with_context(|| format!("parsing bash's time report {times:?}"))?;
    let max_rss_kib = rss
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("parsing GNU time's report {rss:?}"))?;
    Ok(Sample {
        wall,
        user,
        sys,
        max_rss_kib,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

fn parse_times(report: &str) -> Option<(f64, f64, f64)> {
    let line = report.lines().rev().find(|l| !l.trim().is_empty())?;
    let mut it = line.split_whitespace().map(str::parse::<f64>);
    let wall = it.next()?.ok()?;
    let user = it.next()?.ok()?;
    let sys = it.next()?.ok()?;
    Some((wall, user, sys))
}

/// The last `n` lines of a text file (empty if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs a command untimed and returns its stdout; fails with its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running `{program} {}`", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed with {}:\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The median of `values` (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn parses_bash_time_report() {
        assert_eq!(
            parse_times("noise\n0.052 0.031 0.012\n"),
            Some((0.052, 0.031, 0.012))
        );
        assert_eq!(parse_times(""), None);
    }

    #[test]
    fn measures_a_command() {
        if !Path::new(GNU_TIME).exists() {
            eprintln!("skipping: {GNU_TIME} is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let cmd = Cmd::new(
            "sh",
            [
                "-c",
                "echo out; echo err >&2; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
            ],
        );
        let s = measure(&cmd, dir.path(), &log).unwrap();
        assert_eq!(s.stdout, "out\n");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "err\nout\n");
        assert!(s.wall > 0.0 && s.cpu() > 0.0 && s.max_rss_kib > 0, "{s:?}");
        let err = measure(
            &Cmd::new("sh", ["-c", "echo boom >&2; exit 3"]),
            dir.path(),
            &log,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("boom"), "{err:#}");
    }
}
