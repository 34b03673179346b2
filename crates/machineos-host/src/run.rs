//! Running host tools: a program with arguments, its stdout and stderr captured, a non-zero
//! exit turned into [`HostError::Tool`] naming the program, its arguments, its exit status
//! and the last lines of its stderr, with `transient` set when stderr looks like a registry,
//! DNS or network blip ([`is_transient`]).
//!
//! Contract:
//! * Program paths come from [`Tools`], so tests point them at stand-in scripts.
//! * [`Mode::Direct`] runs the program as a child of the agent.
//! * [`Mode::SystemdRun`] runs it as a transient systemd unit, `systemd-run --unit=<unit>
//!   --wait --collect --quiet --property=StandardError=truncate:<log> -- <prog> <args>`, so an
//!   agent restart does not kill a host switch half-way. The unit's stderr goes to
//!   `<state_dir>/<unit>.stderr` (the unit does not share the agent's pipes: a dead agent must
//!   not turn the tool's writes into `EPIPE`).
//! * **One state directory, two views.** The agent runs in a container; the tools run in the
//!   host's mount namespace (under the `nsenter` prefix), and systemd opens the unit's stderr
//!   file there. So the state directory lives on the host — `/run/machineos-host` as the
//!   tools see it ([`Runner::tools_state_dir`]), `<host root>/run/machineos-host` as the agent
//!   sees it through the DaemonSet's host mount ([`Runner::state_dir`]): the log path handed
//!   to systemd-run is the tools' view, the agent creates the directory and reads the log and
//!   the backends' marks through its own. On the host's `/run`, the marks outlive an agent
//!   restart and are cleared at the host's boot. [`Runner::for_host`] sets both as the agent
//!   runs; a runner whose tools see what the agent sees (no prefix) has one path. If the unit is already active (`systemctl
//!   is-active <unit>`, e.g. started by the agent before it restarted), the runner waits for
//!   it to finish, polling every [`Runner::poll`], instead of starting a second one, and
//!   reports [`Ran::Waited`]: the unit's exit status is gone (`--collect`), so the caller
//!   re-reads the host's status to learn whether it worked.
//! * [`Runner::run_idle`] runs a program in the idle I/O class (`ionice -c 3`), for pulls.
//! * Nothing here retries; [`crate::retry`] does, on transient errors only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::HostError;

/// How many trailing stderr lines an error keeps.
const STDERR_LINES: usize = 20;

/// The agent's state directory on the host, as the host sees it (a tmpfs: cleared at boot).
pub const HOST_STATE_DIR: &str = "/run/machineos-host";

/// Where the host tools are. Defaults are the names looked up on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    /// `bootc`.
    pub bootc: PathBuf,
    /// `rpm-ostree`.
    pub rpm_ostree: PathBuf,
    /// `systemd-run`.
    pub systemd_run: PathBuf,
    /// `systemctl`.
    pub systemctl: PathBuf,
    /// The reboot command and its arguments (`systemctl reboot`).
    pub reboot: Vec<String>,
    /// `ionice` (util-linux), for pulls in the idle I/O class.
    pub ionice: PathBuf,
    /// `ostree`, for `ostree admin prepare-soft-reboot`.
    pub ostree: PathBuf,
}

impl Default for Tools {
    fn default() -> Tools {
        Tools {
            bootc: "bootc".into(),
            rpm_ostree: "rpm-ostree".into(),
            systemd_run: "systemd-run".into(),
            systemctl: "systemctl".into(),
            reboot: vec!["systemctl".into(), "reboot".into()],
            ionice: "ionice".into(),
            ostree: "ostree".into(),
        }
    }
}

/// How a long-running host operation (the switch/rebase) is run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Mode {
    /// As a child process of the agent.
    #[default]
    Direct,
    /// As the transient systemd unit `unit` (e.g. `machineos-host-deploy.service`).
    SystemdRun {
        /// The unit's name.
        unit: String,
    },
}

/// What a program printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// How a [`Runner::run_long`] call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// The program ran to success (its output; stdout is empty in systemd-run mode).
    Done(Output),
    /// A unit of that name was already running; the runner waited for it to end. Its result
    /// is unknown: re-read the host's status.
    Waited,
}

/// Runs host tools.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The tools' paths.
    pub tools: Tools,
    /// How [`Runner::run_long`] runs (the host switch).
    pub long_mode: Mode,
    /// Where systemd-run units leave their stderr and backends their marks, as this process
    /// sees it (`/run/machineos-host` by default; `<host root>/run/machineos-host` for the
    /// agent in its container: [`Runner::for_host`]).
    pub state_dir: PathBuf,
    /// The same directory as the host tools see it, when they see it elsewhere (they run in
    /// the host's mount namespace); `None`: at [`Runner::state_dir`].
    pub tools_state_dir: Option<PathBuf>,
    /// How often to poll `systemctl is-active` while waiting for a unit.
    pub poll: Duration,
    /// A command every host tool runs under, e.g. `nsenter -t 1 -m -u -i -n -p --` from a
    /// container with `hostPID` (empty: the tools run as plain children).
    pub prefix: Vec<String>,
    /// How long one host tool may run (or a running unit be waited for) before it counts as
    /// hung: killed, and a transient failure (default 1 h: a switch over a slow link).
    pub timeout: Duration,
}

impl Runner {
    /// A runner for `tools`, running everything directly.
    pub fn new(tools: Tools) -> Runner {
        Runner {
            tools,
            long_mode: Mode::Direct,
            state_dir: PathBuf::from(HOST_STATE_DIR),
            tools_state_dir: None,
            poll: Duration::from_secs(2),
            prefix: Vec::new(),
            timeout: Duration::from_secs(3600),
        }
    }

    /// The agent's runner as the DaemonSet runs it: every tool under `prefix` (`nsenter -t 1
    /// -m -u -i -n -p --` to enter the host's namespaces; empty when the agent runs on the
    /// host itself), the switch as `long_mode` says, and the state directory on the host's
    /// `/run`: [`HOST_STATE_DIR`] for the tools, the same directory under `host_root` (the
    /// host's `/` as mounted in the agent's container) for the agent. Without a prefix the
    /// tools see what the agent sees, and both use the agent's path.
    pub fn for_host(
        tools: Tools,
        host_root: &Path,
        prefix: Vec<String>,
        long_mode: Mode,
    ) -> Runner {
        let on_host = host_root.join(HOST_STATE_DIR.trim_start_matches('/'));
        Runner {
            long_mode,
            tools_state_dir: (!prefix.is_empty()).then(|| PathBuf::from(HOST_STATE_DIR)),
            state_dir: on_host,
            prefix,
            ..Runner::new(tools)
        }
    }

    /// The state directory as the host tools see it.
    pub fn tools_state_dir(&self) -> &Path {
        self.tools_state_dir.as_deref().unwrap_or(&self.state_dir)
    }

    /// Run `prog args` as a child (under [`Runner::prefix`]), to success.
    pub fn run(&self, prog: &Path, args: &[String]) -> Result<Output, HostError> {
        match self.prefix.split_first() {
            None => run_within(prog, args, Some(self.timeout)),
            Some((first, rest)) => {
                let mut all: Vec<String> = rest.to_vec();
                all.push(prog.display().to_string());
                all.extend(args.iter().cloned());
                // Name the tool, not the prefix.
                run_within(Path::new(first), &all, Some(self.timeout))
                    .map_err(|e| named(e, prog, args))
            }
        }
    }

    /// Run `prog args` as [`Runner::run`] does, in the idle I/O scheduling class (`ionice -c
    /// 3`, inherited by what it starts): a pull ahead of a node's turn yields the disk to the
    /// node's workloads. Errors name `prog`, not `ionice`.
    pub fn run_idle(&self, prog: &Path, args: &[String]) -> Result<Output, HostError> {
        let mut all: Vec<String> = vec!["-c".into(), "3".into(), prog.display().to_string()];
        all.extend(args.iter().cloned());
        self.run(&self.tools.ionice, &all)
            .map_err(|e| named(e, prog, args))
    }

    /// Run `prog args` the way [`Runner::long_mode`] says.
    pub fn run_long(&self, prog: &Path, args: &[String]) -> Result<Ran, HostError> {
        match &self.long_mode {
            Mode::Direct => self.run(prog, args).map(Ran::Done),
            Mode::SystemdRun { unit } => self.run_unit(unit, prog, args),
        }
    }

    /// The command line `systemd-run` is given for `unit` (without the program itself).
    pub fn systemd_run_args(&self, unit: &str, prog: &Path, args: &[String]) -> Vec<String> {
        let mut v = vec![
            format!("--unit={unit}"),
            "--wait".to_owned(),
            "--collect".to_owned(),
            "--quiet".to_owned(),
            format!(
                "--property=StandardError=truncate:{}",
                self.tools_state_dir()
                    .join(format!("{unit}.stderr"))
                    .display()
            ),
            "--".to_owned(),
            prog.display().to_string(),
        ];
        v.extend(args.iter().cloned());
        v
    }

    /// The unit's stderr file, as this process reads it.
    fn stderr_log(&self, unit: &str) -> PathBuf {
        self.state_dir.join(format!("{unit}.stderr"))
    }

    /// Whether `unit` is running (`systemctl is-active` says active, activating,
    /// deactivating or reloading).
    pub fn unit_active(&self, unit: &str) -> Result<bool, HostError> {
        let prog = &self.tools.systemctl;
        let mut cmd = match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(prog);
                c
            }
            None => Command::new(prog),
        };
        let out = cmd
            .args(["is-active", unit])
            .output()
            .map_err(|source| HostError::Io {
                path: prog.display().to_string(),
                source,
            })?;
        // is-active exits non-zero for inactive/failed/unknown units; the word is what counts.
        let state = String::from_utf8_lossy(&out.stdout);
        Ok(matches!(
            state.trim(),
            "active" | "activating" | "deactivating" | "reloading"
        ))
    }

    fn run_unit(&self, unit: &str, prog: &Path, args: &[String]) -> Result<Ran, HostError> {
        if self.unit_active(unit)? {
            tracing::info!(unit, "a host operation is already running; waiting for it");
            let started = std::time::Instant::now();
            while self.unit_active(unit)? {
                if started.elapsed() >= self.timeout {
                    return Err(HostError::Tool {
                        tool: prog.display().to_string(),
                        args: format!("{} (systemd-run unit {unit})", args.join(" ")),
                        status: format!("still running after {:?}", self.timeout),
                        stderr: String::new(),
                        transient: true,
                    });
                }
                std::thread::sleep(self.poll);
            }
            return Ok(Ran::Waited);
        }
        std::fs::create_dir_all(&self.state_dir).map_err(|source| HostError::Io {
            path: self.state_dir.display().to_string(),
            source,
        })?;
        let sr_args = self.systemd_run_args(unit, prog, args);
        match self.run(&self.tools.systemd_run, &sr_args) {
            Ok(out) => Ok(Ran::Done(out)),
            Err(HostError::Tool {
                status,
                stderr: own,
                ..
            }) => {
                // The program's stderr is in the log; systemd-run's own (if any) follows.
                let logged = std::fs::read_to_string(self.stderr_log(unit)).unwrap_or_default();
                let stderr = last_lines(&format!("{logged}\n{own}"));
                Err(HostError::Tool {
                    tool: prog.display().to_string(),
                    args: format!("{} (systemd-run unit {unit})", args.join(" ")),
                    status,
                    transient: is_transient(&stderr),
                    stderr,
                })
            }
            Err(e) => Err(e),
        }
    }
}

/// A tool failure of a wrapper (`nsenter`, `ionice`) named as the failure of `prog args`,
/// the program the wrapper ran; other errors unchanged.
fn named(e: HostError, prog: &Path, args: &[String]) -> HostError {
    match e {
        HostError::Tool {
            status,
            stderr,
            transient,
            ..
        } => HostError::Tool {
            tool: prog.display().to_string(),
            args: args.join(" "),
            status,
            stderr,
            transient,
        },
        e => e,
    }
}

/// Run `prog args` as a child process; a non-zero exit is [`HostError::Tool`], a program
/// that cannot be started [`HostError::Io`] naming it.
pub fn run(prog: &Path, args: &[String]) -> Result<Output, HostError> {
    run_within(prog, args, None)
}

/// [`run`], killing the program (and failing, as a transient error) if it has not finished
/// within `timeout`: a hung host tool must not hang the agent.
pub fn run_within(
    prog: &Path,
    args: &[String],
    timeout: Option<Duration>,
) -> Result<Output, HostError> {
    use std::process::Stdio;
    tracing::debug!(prog = %prog.display(), ?args, "running");
    let io_err = |source| HostError::Io {
        path: prog.display().to_string(),
        source,
    };
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err)?;
    // Both pipes drained on their own threads, so a chatty tool never blocks on a full pipe.
    fn drain<R: std::io::Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out_t = drain(child.stdout.take());
    let err_t = drain(child.stderr.take());
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().map_err(io_err)? {
            break Some(st);
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = String::from_utf8_lossy(&out_t.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned();
    let Some(status) = status else {
        return Err(HostError::Tool {
            tool: prog.display().to_string(),
            args: args.join(" "),
            status: format!(
                "killed after {:?} without an answer",
                timeout.unwrap_or_default()
            ),
            stderr: last_lines(&stderr),
            transient: true,
        });
    };
    if status.success() {
        return Ok(Output { stdout, stderr });
    }
    let stderr = last_lines(&stderr);
    Err(HostError::Tool {
        tool: prog.display().to_string(),
        args: args.join(" "),
        status: status.to_string(),
        transient: is_transient(&stderr),
        stderr,
    })
}

/// The last lines of `s` (at most 20), trimmed, empty lines dropped.
pub fn last_lines(s: &str) -> String {
    let lines: Vec<&str> = s
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let start = lines.len().saturating_sub(STDERR_LINES);
    lines[start..].join("\n")
}

/// Whether a tool's stderr looks like a passing registry, DNS or network failure, worth a
/// retry: name resolution, refused/reset/timed-out connections, TLS handshake timeouts, and
/// HTTP 429/502/503/504 (as whole numbers, so a digest's hex never matches).
pub fn is_transient(stderr: &str) -> bool {
    const PHRASES: &[&str] = &[
        "temporary failure in name resolution",
        "no such host",
        "connection refused",
        "connection reset by peer",
        "i/o timeout",
        "tls handshake timeout",
        "network is unreachable",
        "no route to host",
        "service unavailable",
        "bad gateway",
        "gateway timeout",
        "too many requests",
        "unexpected eof",
        "server misbehaving",
    ];
    let s = stderr.to_ascii_lowercase();
    PHRASES.iter().any(|p| s.contains(p))
        || ["429", "502", "503", "504"]
            .iter()
            .any(|code| has_number(&s, code))
}

/// Whether `code` occurs in `s` with no letter or digit on either side.
fn has_number(s: &str, code: &str) -> bool {
    let b = s.as_bytes();
    s.match_indices(code).any(|(i, m)| {
        let before = i.checked_sub(1).and_then(|j| b.get(j));
        let after = b.get(i + m.len());
        !before.is_some_and(u8::is_ascii_alphanumeric)
            && !after.is_some_and(u8::is_ascii_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_stderr() {
        for (s, want) in [
            (
                "dial tcp: lookup quay.io: Temporary failure in name resolution",
                true,
            ),
            ("dial tcp 10.0.0.1:443: connect: connection refused", true),
            ("read tcp: i/o timeout", true),
            (
                "received unexpected HTTP status: 503 Service Unavailable",
                true,
            ),
            ("reading manifest: 502", true),
            ("net/http: TLS handshake timeout", true),
            ("lookup registry.local: no such host", true),
            ("manifest unknown", false),
            ("unauthorized: authentication required", false),
            ("sha256:a503bc not found", false),
            ("layer 15030 of 2", false),
        ] {
            assert_eq!(is_transient(s), want, "{s}");
        }
    }

    #[test]
    fn last_lines_keeps_the_tail() {
        let s: String = (0..30).map(|i| format!("line {i}\n\n")).collect();
        let l = last_lines(&s);
        assert!(l.starts_with("line 10\n"));
        assert!(l.ends_with("line 29"));
    }
}
