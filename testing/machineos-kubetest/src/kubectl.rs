//! Test support: running the installed `kubectl` (and any child process) against a test
//! server with a deadline, for this crate's tests and for end-to-end tests of controllers
//! that use the server. Not part of the API server itself.
//!
//! Contract:
//! * [`path`] is `/usr/bin/kubectl` when it exists (the v1.32 the tests are written
//!   against), else `kubectl` looked up on `PATH`; [`available`] says whether either is
//!   there; [`judge_or_skip`] lets a test print `SKIPPED` and pass without it, except under
//!   `CI`, where a missing kubectl fails the test.
//! * [`run`] spawns a [`Command`] with stdin null and stdout/stderr piped, reads both pipes
//!   on threads (a child writing more than a pipe buffer never stalls) and kills the child
//!   at the deadline ([`Error::Deadline`]); spawn and wait failures are [`Error::Spawn`] /
//!   [`Error::Wait`]. Output is decoded as lossy UTF-8 ([`Output`]).
//! * [`Kubectl`] holds the target (a kubeconfig file, or a `--server` URL) and a HOME
//!   directory (kubectl's discovery cache goes there, and with `KUBECONFIG` unset no
//!   user's `~/.kube/config` is read); every invocation adds `--request-timeout`.
//!   [`Kubectl::run`] answers the [`Output`] whatever the exit status;
//!   [`Kubectl::ok`] answers stdout of a successful run and [`Error::Failed`] otherwise.
//!   Nothing here asserts or panics.
//! * Everything here blocks the calling thread (it waits for a process): call it from
//!   `tokio::task::spawn_blocking` (or a plain thread) in async tests, never from an
//!   async task directly.
//!
//! Waiting is a `try_wait` poll every 20 ms, written by hand rather than with the
//! `wait-timeout` crate because that crate installs a process-wide `SIGCHLD` handler,
//! which would share the test process with tokio's own child reaping.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Where the tests expect kubectl.
pub const INSTALLED: &str = "/usr/bin/kubectl";

/// How long a [`Kubectl`] invocation may run before it is killed, unless set otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// kubectl's `--request-timeout` for each request, unless set otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// How often a running child is polled.
const POLL: Duration = Duration::from_millis(20);

/// The kubectl to run: [`INSTALLED`] if it exists, else `kubectl` found on `PATH` (or the
/// bare name `kubectl` when it is on neither, so spawning it fails with "not found").
pub fn path() -> PathBuf {
    if Path::new(INSTALLED).is_file() {
        return PathBuf::from(INSTALLED);
    }
    on_path("kubectl").unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// Whether kubectl is installed ([`INSTALLED`] or on `PATH`).
pub fn available() -> bool {
    Path::new(INSTALLED).is_file() || on_path("kubectl").is_some()
}

/// Whether kubectl is here to judge `what`. Without it a test prints `SKIPPED <what>` and
/// passes — except under `CI` (the variable set), where kubectl is installed on purpose and
/// its absence is a failure (this panics, naming `what`), never a silent pass.
pub fn judge_or_skip(what: &str) -> bool {
    if available() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "kubectl is required under CI: {what} cannot be judged without it"
    );
    eprintln!("SKIPPED {what}: kubectl is not installed");
    false
}

/// `name` in the first `PATH` directory holding a file of that name.
fn on_path(name: &str) -> Option<PathBuf> {
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What a finished child printed and whether it succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its stdout, lossy UTF-8.
    pub stdout: String,
    /// Its stderr, lossy UTF-8.
    pub stderr: String,
}

/// Why a child did not give an [`Output`], or (for [`Kubectl::ok`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It could not be started.
    #[error("cannot start {command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("waiting for {command}: {source}")]
    Wait {
        /// The command line.
        command: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// It was still running at the deadline and was killed.
    #[error("{command} did not exit within {deadline:?} and was killed")]
    Deadline {
        /// The command line.
        command: String,
        /// The deadline it missed.
        deadline: Duration,
    },
    /// It exited with a failure status ([`Kubectl::ok`] only).
    #[error("{command} failed:\n{}\n{}", output.stdout, output.stderr)]
    Failed {
        /// The command line.
        command: String,
        /// What it printed.
        output: Output,
    },
}

/// `cmd`'s program and arguments, for messages.
fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits for `child` to exit, killing it (and reaping it) once `deadline` has passed.
/// Blocks. `command` names it in errors.
pub fn wait(child: &mut Child, command: &str, deadline: Duration) -> Result<ExitStatus, Error> {
    let end = Instant::now() + deadline;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            Err(source) => {
                return Err(Error::Wait {
                    command: command.to_string(),
                    source,
                });
            }
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Deadline {
                command: command.to_string(),
                deadline,
            });
        }
        std::thread::sleep(POLL);
    }
}

/// A pipe read to its end on a thread.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

/// Runs `cmd` to completion with stdin null and its outputs captured, killing it after
/// `deadline`. Blocks.
pub fn run(cmd: &mut Command, deadline: Duration) -> Result<Output, Error> {
    let command = describe(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            command: command.clone(),
            source,
        })?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    // On an error the readers are left to end when the (killed) child's pipes close.
    let status = wait(&mut child, &command, deadline)?;
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
    };
    Ok(Output {
        success: status.success(),
        stdout: text(stdout),
        stderr: text(stderr),
    })
}

/// What a [`Kubectl`] points at.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Kubeconfig(PathBuf),
    Server(String),
}

/// kubectl configured for one server: `--kubeconfig FILE` or `--server URL`, a HOME
/// directory, a request timeout and a deadline per invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubectl {
    target: Target,
    home: PathBuf,
    request_timeout: Duration,
    deadline: Duration,
}

impl Kubectl {
    /// kubectl using the kubeconfig file `kubeconfig`, with HOME `home`.
    pub fn with_kubeconfig(kubeconfig: impl Into<PathBuf>, home: impl Into<PathBuf>) -> Kubectl {
        Kubectl::new(Target::Kubeconfig(kubeconfig.into()), home.into())
    }

    /// kubectl as the test's admin on `server`: its kubeconfig written to `dir/kubeconfig`
    /// (returned too, for other clients), HOME `dir/kubectl-home`.
    pub fn for_server(
        server: &crate::http::Server,
        dir: &std::path::Path,
    ) -> std::io::Result<(Kubectl, PathBuf)> {
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig())?;
        let k = Kubectl::with_kubeconfig(&kubeconfig, dir.join("kubectl-home"));
        Ok((k, kubeconfig))
    }

    /// kubectl talking to `url` with `--server` and no kubeconfig (plain HTTP, no
    /// credentials), with HOME `home`.
    pub fn with_server(url: impl Into<String>, home: impl Into<PathBuf>) -> Kubectl {
        Kubectl::new(Target::Server(url.into()), home.into())
    }

    fn new(target: Target, home: PathBuf) -> Kubectl {
        Kubectl {
            target,
            home,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            deadline: DEFAULT_DEADLINE,
        }
    }

    /// The same with `--request-timeout` set to `t` (whole seconds, at least one).
    pub fn request_timeout(mut self, t: Duration) -> Kubectl {
        self.request_timeout = t;
        self
    }

    /// The same with invocations killed after `d`.
    pub fn deadline(mut self, d: Duration) -> Kubectl {
        self.deadline = d;
        self
    }

    /// The HOME directory kubectl runs with.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// A `kubectl` command for `args`, not started, for a caller that spawns it itself
    /// (a `get -w` read while it runs); its stdio is left to the caller.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(path());
        match &self.target {
            Target::Kubeconfig(k) => c.arg("--kubeconfig").arg(k),
            Target::Server(url) => c.arg("--server").arg(url),
        };
        c.arg(format!(
            "--request-timeout={}s",
            self.request_timeout.as_secs().max(1)
        ))
        .args(args)
        .env("HOME", &self.home)
        .env_remove("KUBECONFIG");
        c
    }

    /// Runs kubectl with `args` to completion (killed at the deadline): its output,
    /// success or not. Blocks.
    pub fn run(&self, args: &[&str]) -> Result<Output, Error> {
        run(&mut self.command(args), self.deadline)
    }

    /// Runs kubectl with `args`: its stdout when it succeeds, [`Error::Failed`] (with what
    /// it printed) when it exits with a failure status. Blocks.
    pub fn ok(&self, args: &[&str]) -> Result<String, Error> {
        let output = self.run(args)?;
        if output.success {
            Ok(output.stdout)
        } else {
            Err(Error::Failed {
                command: format!("kubectl {args:?}"),
                output,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn captures_both_outputs_and_the_status() {
        let out = run(&mut sh("echo out; echo err >&2"), DEFAULT_DEADLINE).unwrap();
        assert_eq!(
            out,
            Output {
                success: true,
                stdout: "out\n".into(),
                stderr: "err\n".into()
            }
        );
        let out = run(&mut sh("echo no >&2; exit 3"), DEFAULT_DEADLINE).unwrap();
        assert!(!out.success);
        assert_eq!(out.stderr, "no\n");
    }

    #[test]
    fn output_larger_than_a_pipe_buffer_does_not_stall() {
        let out = run(&mut sh("head -c 300000 /dev/zero"), DEFAULT_DEADLINE).unwrap();
        assert!(out.success);
        assert_eq!(out.stdout.len(), 300_000);
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let e = run(&mut sh("exec sleep 600"), Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, Error::Deadline { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("sh -c exec sleep 600 did not exit"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let e = run(
            &mut Command::new("/nonexistent/kubetest-no-such-program"),
            DEFAULT_DEADLINE,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Spawn { .. }), "{e}");
    }

    #[test]
    fn kubectl_commands_name_the_target_home_and_timeout() {
        let k = Kubectl::with_server("http://127.0.0.1:1", "/tmp/h")
            .request_timeout(Duration::from_secs(10));
        let c = k.command(&["get", "cm"]);
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            args,
            [
                "--server",
                "http://127.0.0.1:1",
                "--request-timeout=10s",
                "get",
                "cm"
            ]
        );
        let envs: Vec<_> = c.get_envs().collect();
        assert!(envs.contains(&("HOME".as_ref(), Some("/tmp/h".as_ref()))));
        assert!(envs.contains(&("KUBECONFIG".as_ref(), None)));
        let k = Kubectl::with_kubeconfig("/tmp/h/kc", "/tmp/h");
        let args: Vec<_> = k
            .command(&[])
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["--kubeconfig", "/tmp/h/kc", "--request-timeout=20s"]);
    }
}
