//! Running one container process on the host (tokio::process): in its own process group
//! (so killing the "container" kills everything it started), stdout and stderr appended to
//! one shared log buffer as they arrive, the exit status as a container exit code
//! (`128 + signal` when killed by a signal), and a teardown that kills whatever the main
//! process left behind in its group, as a container runtime tears down the container.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// A log buffer shared between the readers and whoever reads the log.
pub type SharedLog = Arc<Mutex<Vec<u8>>>;

/// How long the log readers may take to drain after the process group is killed (a
/// process that escaped the group may hold the pipe open).
const DRAIN: Duration = Duration::from_secs(5);

/// Appends `bytes` to `log`.
pub fn append(log: &SharedLog, bytes: &[u8]) {
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend_from_slice(bytes);
}

/// A copy of `log`.
pub fn snapshot(log: &SharedLog) -> Vec<u8> {
    log.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// SIGKILL to process group `pgid` (ignoring a group that is already gone).
pub fn kill_group(pgid: i32) {
    // Never group 0/1 (ourselves, init): a child's group id is its own pid, always > 1.
    if pgid > 1
        && let Some(pid) = rustix::process::Pid::from_raw(pgid)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The container exit code of `status`.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// A running process.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    pgid: i32,
    readers: Vec<JoinHandle<()>>,
}

fn reader(mut r: impl AsyncRead + Unpin + Send + 'static, log: SharedLog) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => append(&log, &buf[..n]),
            }
        }
    })
}

impl Proc {
    /// Starts `program args` with exactly `env` in `cwd`, stdin from /dev/null, output into
    /// `log`, in a new process group.
    pub fn spawn(
        program: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: &Path,
        log: &SharedLog,
    ) -> io::Result<Proc> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        let mut readers = Vec::new();
        if let Some(o) = child.stdout.take() {
            readers.push(reader(o, log.clone()));
        }
        if let Some(e) = child.stderr.take() {
            readers.push(reader(e, log.clone()));
        }
        Ok(Proc {
            child,
            pgid,
            readers,
        })
    }

    /// The process group id (the process's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Waits for the main process to exit; its exit code.
    pub async fn wait(&mut self) -> i32 {
        match self.child.wait().await {
            Ok(s) => exit_code(s),
            Err(_) => -1,
        }
    }

    /// Kills the whole group now.
    pub fn kill(&self) {
        kill_group(self.pgid);
    }

    /// Tears the container down after its main process exited (or was killed): kills what
    /// is left in the group and lets the log readers drain.
    pub async fn finish(mut self) {
        kill_group(self.pgid);
        let _ = self.child.wait().await;
        // Reaped: the id may be reused from now on, so Drop must not signal it.
        self.pgid = 0;
        for r in self.readers.drain(..) {
            let abort = r.abort_handle();
            if tokio::time::timeout(DRAIN, r).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // An aborted task (executor dropped) must not leave the container's processes.
        kill_group(self.pgid);
        for r in &self.readers {
            r.abort();
        }
    }
}
