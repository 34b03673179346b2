//! A kubelet and Job controller that really run pods on this machine: [`PodExecutor`]
//! runs every Job's pods as host processes (as root), so a controller's Job backend (the
//! buildah build Job) is tested end to end against the test API server. The simulated
//! outcomes of [`crate::hooks`] stay for tests that do not need real processes; use one or
//! the other for a store, not both.
//!
//! Contract:
//! * Job controller: on every store change (and every [`crate::http::watch::POLL`]), each
//!   Job without a terminal condition gets one [`crate::hooks::sync_job`] step (pods
//!   created from its template, status, `Complete`/`Failed` conditions, `backoffLimit`
//!   retries), as [`crate::hooks`] documents.
//! * Kubelet: every pod controlled by a Job, in phase `Pending`, not being deleted and not
//!   yet started, is planned ([`plan::plan_pod`]: re-rooted filesystem, volumes, env,
//!   command — see that module for exactly what is supported) and run asynchronously in
//!   its own directory `<work_dir>/pods/<namespace>/<pod>-<uid>`: files and directories
//!   written in `spawn_blocking`, the first container's command started with
//!   `tokio::process` in a new process group with exactly the planned environment plus
//!   [`ExecSettings::extra_env`] (which wins), and its own containers storage
//!   (`CONTAINERS_STORAGE_CONF`). The store lock is never held across an `.await`.
//! * Status, through the pod's `status` subresource as the kubelet writes it: `Running`
//!   once the process started; then `Succeeded` (exit 0) or `Failed` (exit code, `128 +
//!   signal` when killed by one) with the termination message of [`plan::termination_message`];
//!   then the owning Job is synced, so a failed pod is replaced until `backoffLimit`. A
//!   missing ConfigMap/Secret keeps the pod `Pending` with `CreateContainerConfigError`
//!   (retried on every change); any other planning error or a failure to start (program
//!   not found) fails the pod with exit code 128 and reason `StartError`.
//! * Eviction injection ([`PodExecutor::evict_next`], [`PodExecutor::evict_next_of_job`]):
//!   the decision is taken when a pod starts; such a pod is reported `Running`, then its
//!   process group is killed and it is reported evicted ([`status::evicted_status`]: phase
//!   `Failed`, reason `Evicted`, the eviction manager's ephemeral-storage message, exit code
//!   137, `DisruptionTarget`). The outcome does not depend on timing: a process that had
//!   already exited is reported evicted all the same.
//! * A pod deleted (or replaced under the same name) while it runs — directly, or by the
//!   garbage collector when its Job is deleted with `Background`/`Foreground` propagation
//!   (as kubectl and controllers delete Jobs) — has its process group killed and no status
//!   written ([`RunOutcome::Killed`]). A Job deleted with batch/v1's default `Orphan`
//!   policy leaves its pods running, as in a real cluster. When the main process exits,
//!   whatever it left in its group is killed too (container teardown).
//! * The log (stdout and stderr interleaved as they arrive) stays readable with
//!   [`PodExecutor::log`] after the pod finished; [`PodExecutor::runs`] lists what each
//!   finished pod did. The pod directory is removed after the pod finished unless
//!   [`ExecSettings::keep_dirs`]; a directory with a mount point inside is never removed.
//! * Dropping the executor (or [`PodExecutor::stop`]) stops the loop and kills every running
//!   pod's process group.
//! * Simplifications: processes run as root on the host, `securityContext`, resources,
//!   probes, images (`image` is ignored: the command runs from the host) and
//!   `restartPolicy` are ignored (no container restarts, as for Job pods with `Never`);
//!   no scheduler or node (`spec.nodeName` untouched); only Job-controlled pods run; only
//!   the first container runs (others are reported as the first one ends).
//!
//! Hand-written rather than a real kubelet: a kubelet needs a container runtime and a
//! node; this is the part of its behaviour a build controller observes.

pub mod plan;
pub mod process;
pub mod status;

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use crate::hooks::{PodPhase, job_finished, pod_status, sync_job_in};
use crate::http::Shared;
use crate::resource::GroupResource;
use crate::store::{Store, WriteOptions};
use plan::{PodPlan, SourceKind, plan_pod, termination_message};
use process::{Proc, SharedLog};

const W: WriteOptions = WriteOptions { dry_run: false };

pub(crate) fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

pub(crate) fn source_gr(kind: SourceKind) -> GroupResource {
    match kind {
        SourceKind::ConfigMap => GroupResource::new("", "configmaps"),
        SourceKind::Secret => GroupResource::new("", "secrets"),
    }
}

/// How the executors run things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// Where pod and build directories go (`pods/…`, `builds/…`); created when needed.
    pub work_dir: PathBuf,
    /// Environment added to every process, after the pod's (so it wins): host paths, not
    /// re-rooted (e.g. `CONTAINERS_REGISTRIES_CONF`).
    pub extra_env: Vec<(String, String)>,
    /// Keep each pod's or build's directory after it finished (for debugging).
    pub keep_dirs: bool,
    /// The `buildah` the build executor runs (default `buildah`, looked up in `PATH`).
    pub buildah: String,
}

impl ExecSettings {
    /// Directories under `work_dir`, no extra environment, directories removed, `buildah`.
    pub fn new(work_dir: impl Into<PathBuf>) -> ExecSettings {
        ExecSettings {
            work_dir: work_dir.into(),
            extra_env: Vec::new(),
            keep_dirs: false,
            buildah: "buildah".into(),
        }
    }

    /// Adds `name=value` to [`ExecSettings::extra_env`].
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> ExecSettings {
        self.extra_env.push((name.into(), value.into()));
        self
    }

    /// Sets [`ExecSettings::keep_dirs`].
    pub fn keep_dirs(mut self, keep: bool) -> ExecSettings {
        self.keep_dirs = keep;
        self
    }
}

/// A file-system step that failed, naming the path.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// An I/O operation on `path`.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done (`writing`, `creating directory`, …).
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A directory not removed because something is mounted inside it.
    #[error("not removing {}: {mount} is mounted inside it", path.display())]
    MountedInside {
        /// The directory.
        path: PathBuf,
        /// The mount point.
        mount: String,
    },
}

pub(crate) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ExecError + use<> {
    let path = path.to_path_buf();
    move |source| ExecError::Io { op, path, source }
}

/// Writes `files` (parents created, then `chmod`).
pub(crate) fn write_files(files: &[plan::PlannedFile]) -> Result<(), ExecError> {
    use std::os::unix::fs::PermissionsExt;
    for f in files {
        if let Some(parent) = f.path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err("creating directory", parent))?;
        }
        std::fs::write(&f.path, &f.contents).map_err(io_err("writing", &f.path))?;
        std::fs::set_permissions(&f.path, std::fs::Permissions::from_mode(f.mode))
            .map_err(io_err("setting the mode of", &f.path))?;
    }
    Ok(())
}

/// Creates `dirs` (with parents).
pub(crate) fn create_dirs(dirs: &[PathBuf]) -> Result<(), ExecError> {
    for d in dirs {
        std::fs::create_dir_all(d).map_err(io_err("creating directory", d))?;
    }
    Ok(())
}

/// Lays out `plan` on disk: volume directories, the mount links, the other directories
/// (through the links), then the files.
pub fn materialise(plan: &PodPlan) -> Result<(), ExecError> {
    let volumes = plan.dir.join(plan::VOLUMES_DIR);
    let (vol_dirs, other_dirs): (Vec<PathBuf>, Vec<PathBuf>) = plan
        .dirs
        .iter()
        .cloned()
        .partition(|d| d.starts_with(&volumes));
    create_dirs(std::slice::from_ref(&plan.root))?;
    create_dirs(&vol_dirs)?;
    for (link, target) in &plan.links {
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent).map_err(io_err("creating directory", parent))?;
        }
        std::os::unix::fs::symlink(target, link).map_err(io_err("linking", link))?;
    }
    create_dirs(&other_dirs)?;
    write_files(&plan.files)
}

/// Removes `dir` unless something is mounted inside it (a bind mount left behind must not
/// have its host content deleted). A missing directory is fine.
pub fn remove_dir_safely(dir: &Path) -> Result<(), ExecError> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // Field 5 is the mount point (octal escapes for spaces are not decoded: such a path
    // never matches a directory of ours, which has none).
    if let Some(m) = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .find(|mp| Path::new(mp).starts_with(dir))
    {
        return Err(ExecError::MountedInside {
            path: dir.to_path_buf(),
            mount: m.to_string(),
        });
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("removing", dir)(e)),
        _ => Ok(()),
    }
}

/// The last `max` bytes of the file at `path` (`None` when it does not exist).
pub(crate) fn read_tail(path: &Path, max: usize) -> Option<Vec<u8>> {
    std::fs::read(path)
        .ok()
        .map(|d| plan::tail_bytes(&d, max).to_vec())
}

/// What a finished pod did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Exited 0, with this termination message.
    Succeeded {
        /// The termination message.
        message: String,
    },
    /// Exited non-zero.
    Failed {
        /// The exit code.
        exit_code: i32,
        /// The termination message.
        message: String,
    },
    /// Evicted by [`PodExecutor::evict_next`].
    Evicted,
    /// Could not be laid out or started (exit code 128).
    StartError {
        /// Why.
        message: String,
    },
    /// The pod or its Job was deleted while it ran: killed, no status written.
    Killed,
}

/// One finished pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRun {
    /// The namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The owning Job's name.
    pub job: Option<String>,
    /// What happened.
    pub outcome: RunOutcome,
}

struct Running {
    ns: String,
    name: String,
    stop: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    started: HashSet<String>,
    running: HashMap<String, Running>,
    logs: HashMap<(String, String), SharedLog>,
    runs: Vec<PodRun>,
    evict_any: usize,
    evict_jobs: HashMap<String, usize>,
    tasks: Vec<AbortHandle>,
}

struct Inner {
    shared: Arc<Shared>,
    settings: ExecSettings,
    state: Mutex<State>,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `step` under the store lock on every store change (and every watch poll
/// interval), then signals watchers. Never holds the lock across an `.await`.
pub(crate) fn drive(
    shared: Arc<Shared>,
    mut step: impl FnMut(&mut Store) + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut signal = shared.subscribe();
        let mut seen_rv = u64::MAX;
        loop {
            {
                let mut s = shared.lock();
                if s.resource_version() != seen_rv {
                    step(&mut s);
                    seen_rv = s.resource_version();
                    shared.notify(seen_rv);
                }
            }
            tokio::select! {
                _ = signal.changed() => {}
                _ = tokio::time::sleep(crate::http::watch::POLL) => {}
            }
        }
    })
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// The name of the Job controlling `pod`.
fn controlling_job(pod: &Value) -> Option<String> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r["kind"] == "Job" && r["controller"] == Value::Bool(true))
        .and_then(|r| r["name"].as_str())
        .map(str::to_string)
}

/// Whether pod `ns/name` is still the one with `uid` and not being deleted.
fn current_pod(s: &Store, ns: &str, name: &str, uid: &str) -> Option<Value> {
    s.get(&pods(), Some(ns), name).ok().filter(|p| {
        str_at(p, "/metadata/uid") == uid && p.pointer("/metadata/deletionTimestamp").is_none()
    })
}

fn write_pod_status_in(
    s: &mut Store,
    ns: &str,
    name: &str,
    uid: &str,
    f: impl FnOnce(&Value, &str) -> Value,
) -> bool {
    let Some(mut pod) = current_pod(s, ns, name, uid) else {
        return false;
    };
    let status = f(&pod, &s.now());
    if let Some(m) = pod.as_object_mut() {
        m.insert("status".into(), status);
    }
    s.update_status(&pods(), Some(ns), name, &pod, W).is_ok()
}

/// The kubelet and Job controller that run pods for real (see the module documentation).
/// Stops, killing its pods' processes, when dropped.
pub struct PodExecutor {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for PodExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodExecutor")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl PodExecutor {
    /// Starts the executor on the current tokio runtime.
    pub fn spawn(shared: Arc<Shared>, settings: ExecSettings) -> PodExecutor {
        let inner = Arc::new(Inner {
            shared: shared.clone(),
            settings,
            state: Mutex::new(State::default()),
        });
        let i = inner.clone();
        let task = drive(shared, move |s| step(&i, s));
        PodExecutor { inner, task }
    }

    /// The next `n` pods to start (of any Job) are evicted.
    pub fn evict_next(&self, n: usize) {
        self.inner.state().evict_any += n;
    }

    /// The next `n` pods of Job `job` (by name, any namespace) to start are evicted.
    pub fn evict_next_of_job(&self, job: &str, n: usize) {
        *self
            .inner
            .state()
            .evict_jobs
            .entry(job.to_string())
            .or_default() += n;
    }

    /// The log of pod `ns/pod` so far (lossy UTF-8), while it runs and after; `None` for a
    /// pod this executor never started.
    pub fn log(&self, ns: &str, pod: &str) -> Option<String> {
        let log = self
            .inner
            .state()
            .logs
            .get(&(ns.to_string(), pod.to_string()))
            .cloned()?;
        Some(String::from_utf8_lossy(&process::snapshot(&log)).into_owned())
    }

    /// The pods that finished, in the order they finished.
    pub fn runs(&self) -> Vec<PodRun> {
        self.inner.state().runs.clone()
    }

    /// How many pods are running now.
    pub fn running(&self) -> usize {
        self.inner.state().running.len()
    }

    /// Stops the executor and kills every running pod's processes.
    pub fn stop(&self) {
        self.task.abort();
        let tasks = std::mem::take(&mut self.inner.state().tasks);
        for t in tasks {
            t.abort();
        }
    }
}

impl Drop for PodExecutor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One pass of the Job controller and the kubelet, under the store lock.
fn step(inner: &Arc<Inner>, s: &mut Store) {
    let unfinished: Vec<(String, String)> = s
        .objects()
        .filter(|(k, v)| k.gr == jobs() && !job_finished(v))
        .map(|(k, _)| (k.namespace.clone().unwrap_or_default(), k.name.clone()))
        .collect();
    for (ns, name) in unfinished {
        // A Job that cannot be synced (deleted meanwhile) is retried on the next change.
        let _ = sync_job_in(s, &ns, &name);
    }
    {
        let st = inner.state();
        for (uid, r) in &st.running {
            if current_pod(s, &r.ns, &r.name, uid).is_none() {
                r.stop.send_replace(true);
            }
        }
    }
    let candidates: Vec<Value> = s
        .objects()
        .filter(|(k, _)| k.gr == pods())
        .map(|(_, v)| v)
        .filter(|p| {
            controlling_job(p).is_some()
                && matches!(str_at(p, "/status/phase"), "" | "Pending")
                && p.pointer("/metadata/deletionTimestamp").is_none()
        })
        .cloned()
        .collect();
    for pod in candidates {
        let uid = str_at(&pod, "/metadata/uid").to_string();
        if inner.state().started.contains(&uid) {
            continue;
        }
        start_pod(inner, s, pod, uid);
    }
    inner.state().tasks.retain(|t| !t.is_finished());
}

/// Plans pod `pod` and starts it (or records why it cannot start).
fn start_pod(inner: &Arc<Inner>, s: &mut Store, pod: Value, uid: String) {
    let ns = str_at(&pod, "/metadata/namespace").to_string();
    let name = str_at(&pod, "/metadata/name").to_string();
    let job = controlling_job(&pod);
    let dir = inner
        .settings
        .work_dir
        .join("pods")
        .join(&ns)
        .join(format!("{name}-{uid}"));
    let planned = {
        let lookup = |kind: SourceKind, n: &str| s.get(&source_gr(kind), Some(&ns), n).ok();
        plan_pod(&pod, &dir, &lookup)
    };
    let plan = match planned {
        Ok(p) => p,
        Err(e) if e.is_config_error() => {
            let message = e.to_string();
            let waiting = pod.pointer("/status/containerStatuses/0/state/waiting/message");
            if waiting.and_then(Value::as_str) != Some(message.as_str()) {
                write_pod_status_in(s, &ns, &name, &uid, |p, now| {
                    status::waiting_status(p, "CreateContainerConfigError", &message, now)
                });
            }
            return;
        }
        Err(e) => {
            let message = e.to_string();
            inner.state().started.insert(uid.clone());
            write_pod_status_in(s, &ns, &name, &uid, |p, now| {
                status::start_error_status(p, &message, now)
            });
            if let Some(j) = &job {
                let _ = sync_job_in(s, &ns, j);
            }
            inner.state().runs.push(PodRun {
                namespace: ns,
                pod: name,
                job,
                outcome: RunOutcome::StartError { message },
            });
            return;
        }
    };
    let (stop, stop_rx) = watch::channel(false);
    let log: SharedLog = Arc::default();
    let evict = {
        let mut st = inner.state();
        st.started.insert(uid.clone());
        st.logs.insert((ns.clone(), name.clone()), log.clone());
        st.running.insert(
            uid.clone(),
            Running {
                ns: ns.clone(),
                name: name.clone(),
                stop,
            },
        );
        let by_job = job
            .as_ref()
            .and_then(|j| st.evict_jobs.get_mut(j))
            .filter(|n| **n > 0);
        if let Some(n) = by_job {
            *n -= 1;
            true
        } else if st.evict_any > 0 {
            st.evict_any -= 1;
            true
        } else {
            false
        }
    };
    let pod_ref = PodRef { ns, name, uid, job };
    let task = tokio::spawn(run_pod(inner.clone(), pod_ref, plan, evict, stop_rx, log));
    inner.state().tasks.push(task.abort_handle());
}

#[derive(Debug, Clone)]
struct PodRef {
    ns: String,
    name: String,
    uid: String,
    job: Option<String>,
}

async fn run_pod(
    inner: Arc<Inner>,
    pod: PodRef,
    plan: PodPlan,
    evict: bool,
    stop: watch::Receiver<bool>,
    log: SharedLog,
) {
    let end = execute(&inner, &pod, &plan, evict, stop, &log).await;
    finish_run(&inner, &pod, end);
    if !inner.settings.keep_dirs {
        let dir = plan.dir.clone();
        // A directory left behind (a mount inside) is the only failure; tests' work_dir
        // is a temporary directory anyway.
        let _ = tokio::task::spawn_blocking(move || remove_dir_safely(&dir)).await;
    }
}

/// A pod status write: the new status from the current pod and the time.
type StatusWrite = Box<dyn FnOnce(&Value, &str) -> Value + Send>;

/// How a pod's process ended: the outcome, and the final status to write (if any).
struct RunEnd {
    outcome: RunOutcome,
    write: Option<StatusWrite>,
    /// The outcome becomes [`RunOutcome::Killed`] when the pod is gone by the write.
    killed_if_gone: bool,
}

impl RunEnd {
    fn no_write(outcome: RunOutcome) -> Self {
        Self {
            outcome,
            write: None,
            killed_if_gone: false,
        }
    }
}

/// Writes a run's final pod status, syncs its Job and records the run in [`PodExecutor::runs`]
/// under one store lock, so whoever sees the pod (or its Job) finished also finds the run
/// recorded.
fn finish_run(inner: &Arc<Inner>, pod: &PodRef, end: RunEnd) {
    let shared = &inner.shared;
    let mut s = shared.lock();
    let mut outcome = end.outcome;
    if let Some(f) = end.write {
        let written = write_pod_status_in(&mut s, &pod.ns, &pod.name, &pod.uid, f);
        if !written && end.killed_if_gone {
            outcome = RunOutcome::Killed;
        }
        if let Some(job) = &pod.job {
            let _ = sync_job_in(&mut s, &pod.ns, job);
        }
    }
    {
        let mut st = inner.state();
        st.running.remove(&pod.uid);
        st.runs.push(PodRun {
            namespace: pod.ns.clone(),
            pod: pod.name.clone(),
            job: pod.job.clone(),
            outcome,
        });
    }
    shared.notify(s.resource_version());
}

async fn execute(
    inner: &Arc<Inner>,
    pod: &PodRef,
    plan: &PodPlan,
    evict: bool,
    mut stop: watch::Receiver<bool>,
    log: &SharedLog,
) -> RunEnd {
    let shared = &inner.shared;
    let start_error = |message: String| {
        let m = message.clone();
        RunEnd {
            outcome: RunOutcome::StartError { message },
            write: Some(Box::new(move |p: &Value, now: &str| {
                status::start_error_status(p, &m, now)
            })),
            killed_if_gone: false,
        }
    };
    let p = plan.clone();
    match tokio::task::spawn_blocking(move || materialise(&p)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return start_error(e.to_string()),
        Err(e) => return start_error(format!("laying out the pod: {e}")),
    }
    let mut env = plan.env.clone();
    env.extend(inner.settings.extra_env.iter().cloned());
    let mut proc = match Proc::spawn(&plan.program, &plan.args, &env, &plan.working_dir, log) {
        Ok(p) => p,
        Err(e) => {
            return start_error(format!(
                "failed to start container \"{}\": exec: \"{}\": {e}",
                plan.container, plan.program
            ));
        }
    };
    let running = {
        let mut s = shared.lock();
        let ok = write_pod_status_in(&mut s, &pod.ns, &pod.name, &pod.uid, |p, now| {
            pod_status(p, &PodPhase::Running, now)
        });
        shared.notify(s.resource_version());
        ok
    };
    if !running {
        proc.kill();
        proc.finish().await;
        return RunEnd::no_write(RunOutcome::Killed);
    }
    let (code, killed) = if evict {
        proc.kill();
        (proc.wait().await, false)
    } else {
        tokio::select! {
            code = proc.wait() => (code, false),
            _ = stop.wait_for(|v| *v) => (0, true),
        }
    };
    proc.finish().await;
    if killed {
        return RunEnd::no_write(RunOutcome::Killed);
    }
    let path = plan.termination_message_path.clone();
    let file = tokio::task::spawn_blocking(move || read_tail(&path, plan::MAX_TERMINATION_MESSAGE))
        .await
        .ok()
        .flatten();
    let log_bytes = process::snapshot(log);
    if evict {
        let code = status::KILLED_EXIT_CODE;
        let cmsg = termination_message(file.as_deref(), code, plan.fallback_to_logs, &log_bytes);
        let message = status::eviction_message(&plan.container);
        return RunEnd {
            outcome: RunOutcome::Evicted,
            write: Some(Box::new(move |p: &Value, now: &str| {
                status::evicted_status(p, &message, &cmsg, now)
            })),
            killed_if_gone: false,
        };
    }
    let message = termination_message(file.as_deref(), code, plan.fallback_to_logs, &log_bytes);
    let (phase, outcome) = if code == 0 {
        (
            PodPhase::Succeeded {
                message: message.clone(),
            },
            RunOutcome::Succeeded { message },
        )
    } else {
        (
            PodPhase::Failed {
                exit_code: code,
                message: message.clone(),
            },
            RunOutcome::Failed {
                exit_code: code,
                message,
            },
        )
    };
    RunEnd {
        outcome,
        write: Some(Box::new(move |p: &Value, now: &str| {
            pod_status(p, &phase, now)
        })),
        killed_if_gone: true,
    }
}
