//! Acting as the kubelet and the Job controller: library functions a test calls so that
//! Pods run and Jobs finish "in the cluster" without either (issue 13, "a hook to act
//! as the kubelet and the Job controller"), and [`JobController`], a background task
//! that does it for every new Job with a chosen outcome. The outcomes here are simulated;
//! [`crate::podexec::PodExecutor`] runs the pods for real (it reuses [`sync_job`]); and
//! [`DisruptionController`], which keeps PodDisruptionBudget status current with the pods
//! ([`sync_budgets_in`], the status [`crate::disruption::status`] computes).
//!
//! Contract:
//! * Every function goes through the [`Store`] API under the server's
//!   lock (never held across an `.await`) and signals watchers
//!   ([`Shared::notify`]), so watches, lists and kubectl see each change as the real
//!   components' writes: pod and node status through the `status` subresource, pods
//!   created as the Job controller creates them.
//! * Kubelet ([`set_pod_phase`]): `Pending` (containers `waiting`/`ContainerCreating`),
//!   `Running` (`startTime`, pod IP, `Ready`/`ContainersReady`/`Initialized`/
//!   `PodScheduled`/`PodReadyToStartContainers` conditions, containers `running`),
//!   `Succeeded`/`Failed` (containers `terminated` with exit code, reason
//!   `Completed`/`Error` and the termination message in `state.terminated.message` of
//!   the first container, as the kubelet reads it from `terminationMessagePath`).
//!   [`set_node_ready`] flips a node's `Ready` condition (reasons `KubeletReady` /
//!   `KubeletNotReady`, as `pkg/kubelet/nodestatus/setters.go`).
//! * Job controller ([`sync_job`], a pure [`plan_job`] underneath), following
//!   `pkg/controller/job/job_controller.go` of Kubernetes 1.32: pods from
//!   `spec.template` named `<job>-<random>` with the labels `batch.kubernetes.io/job-name`,
//!   `batch.kubernetes.io/controller-uid` and their legacy `job-name`/`controller-uid`,
//!   an owner reference to the Job with `controller: true` and `blockOwnerDeletion:
//!   true`; up to `parallelism` active pods until `completions` succeed; status
//!   `active`/`ready`/`succeeded`/`failed`/`terminating`, `startTime`, and on success
//!   `SuccessCriteriaMet` then `Complete` (reason `CompletionsReached`) with
//!   `completionTime`, on more than `backoffLimit` failed pods `FailureTarget` then
//!   `Failed` (reason `BackoffLimitExceeded`) — 1.32's delayed terminal conditions, the
//!   interim condition first; remaining active pods are deleted at either end.
//! * Simplifications vs the real components: no scheduler (`spec.nodeName` is left as
//!   created), no container restarts, no pod-tracking finalizer
//!   (`batch.kubernetes.io/job-tracking`), no replacement back-off delay, NonIndexed
//!   completion mode only (Indexed jobs run as NonIndexed), no `activeDeadlineSeconds`,
//!   `podFailurePolicy`, `successPolicy` or `ttlSecondsAfterFinished`; `suspend: true`
//!   only stops new pods.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;

use crate::error::ApiError;
use crate::http::Shared;
use crate::resource::GroupResource;
use crate::store::{DeleteOptions, Store, WriteOptions};

const W: WriteOptions = WriteOptions { dry_run: false };

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

fn nodes() -> GroupResource {
    GroupResource::new("", "nodes")
}

/// A pod phase to set, as the kubelet reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodPhase {
    /// Accepted, containers being created.
    Pending,
    /// Every container running and ready.
    Running,
    /// Every container exited 0; the first one wrote `message` as its termination message.
    Succeeded {
        /// The termination message (may be empty).
        message: String,
    },
    /// The first container exited with `exit_code` and wrote `message`.
    Failed {
        /// The exit code (non-zero).
        exit_code: i32,
        /// The termination message (may be empty).
        message: String,
    },
}

impl PodPhase {
    fn name(&self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded { .. } => "Succeeded",
            PodPhase::Failed { .. } => "Failed",
        }
    }
}

fn condition(kind: &str, status: bool, now: &str, reason: Option<&str>) -> Value {
    let mut c = json!({"type": kind, "status": if status { "True" } else { "False" },
        "lastProbeTime": null, "lastTransitionTime": now});
    if let (Some(r), Some(m)) = (reason, c.as_object_mut()) {
        m.insert("reason".into(), json!(r));
    }
    c
}

/// A stable fake hex id derived from a string (container ids, pod IPs).
fn fake_id(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The pod's `status` for `phase` at `now` (pure): what the kubelet would write.
pub fn pod_status(pod: &Value, phase: &PodPhase, now: &str) -> Value {
    let old = pod.get("status").cloned().unwrap_or_else(|| json!({}));
    let started = old
        .get("startTime")
        .and_then(Value::as_str)
        .unwrap_or(now)
        .to_string();
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let h = fake_id(uid);
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let name = c.get("name").cloned().unwrap_or(json!(""));
            let image = c.get("image").cloned().unwrap_or(json!(""));
            let id = format!("containerd://{:016x}{i:048x}", h);
            let terminated = |code: i32, reason: &str, message: &str| {
                let mut t = json!({"exitCode": code, "reason": reason,
                    "startedAt": started, "finishedAt": now, "containerID": id});
                if !message.is_empty()
                    && let Some(m) = t.as_object_mut()
                {
                    m.insert("message".into(), json!(message));
                }
                json!({"terminated": t})
            };
            let (state, ready, started_flag) = match phase {
                PodPhase::Pending => (
                    json!({"waiting": {"reason": "ContainerCreating"}}),
                    false,
                    false,
                ),
                PodPhase::Running => (json!({"running": {"startedAt": started}}), true, true),
                PodPhase::Succeeded { message } => (
                    terminated(0, "Completed", if i == 0 { message } else { "" }),
                    false,
                    false,
                ),
                PodPhase::Failed { exit_code, message } => {
                    if i == 0 {
                        (terminated(*exit_code, "Error", message), false, false)
                    } else {
                        (terminated(0, "Completed", ""), false, false)
                    }
                }
            };
            let mut s = json!({"name": name, "image": image, "imageID": "",
                "ready": ready, "started": started_flag, "restartCount": 0, "state": state});
            if *phase != PodPhase::Pending
                && let Some(m) = s.as_object_mut()
            {
                m.insert("containerID".into(), json!(id));
            }
            s
        })
        .collect();
    let running = *phase == PodPhase::Running;
    let done = matches!(phase, PodPhase::Succeeded { .. } | PodPhase::Failed { .. });
    let completed = done.then_some("PodCompleted");
    let mut conditions = vec![condition("PodScheduled", true, now, None)];
    if *phase != PodPhase::Pending {
        conditions.extend([
            condition("PodReadyToStartContainers", running, now, None),
            condition("Initialized", true, now, completed),
            condition("Ready", running, now, completed),
            condition("ContainersReady", running, now, completed),
        ]);
    }
    let mut st = Map::new();
    st.insert("phase".into(), json!(phase.name()));
    st.insert("conditions".into(), Value::Array(conditions));
    st.insert("qosClass".into(), json!("BestEffort"));
    if *phase != PodPhase::Pending {
        st.insert("hostIP".into(), json!("10.0.0.1"));
        st.insert("hostIPs".into(), json!([{"ip": "10.0.0.1"}]));
        let ip = format!("10.244.{}.{}", (h >> 8) % 250 + 1, h % 250 + 2);
        st.insert("podIP".into(), json!(ip));
        st.insert("podIPs".into(), json!([{"ip": ip}]));
        st.insert("startTime".into(), json!(started));
    }
    st.insert("containerStatuses".into(), Value::Array(statuses));
    Value::Object(st)
}

/// Sets pod `ns/name` to `phase` through its `status` subresource, as the kubelet does.
pub fn set_pod_phase(
    shared: &Shared,
    ns: &str,
    name: &str,
    phase: &PodPhase,
) -> Result<Value, ApiError> {
    let mut s = shared.lock();
    let out = set_pod_phase_in(&mut s, ns, name, phase);
    shared.notify(s.resource_version());
    out
}

pub(crate) fn set_pod_phase_in(
    s: &mut Store,
    ns: &str,
    name: &str,
    phase: &PodPhase,
) -> Result<Value, ApiError> {
    let mut pod = s.get(&pods(), Some(ns), name)?;
    let status = pod_status(&pod, phase, &s.now());
    if let Some(m) = pod.as_object_mut() {
        m.insert("status".into(), status);
    }
    s.update_status(&pods(), Some(ns), name, &pod, W)
}

/// Creates node `name` (cluster-scoped) if absent, with a `Ready` status.
pub fn ensure_node(shared: &Shared, name: &str) -> Result<Value, ApiError> {
    {
        let mut s = shared.lock();
        if s.get(&nodes(), None, name).is_err() {
            s.create(
                &nodes(),
                None,
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}}),
                W,
            )?;
        }
    }
    set_node_ready(shared, name, true)
}

/// Sets node `name`'s `Ready` condition, as the kubelet's status setter words it.
pub fn set_node_ready(shared: &Shared, name: &str, ready: bool) -> Result<Value, ApiError> {
    let mut s = shared.lock();
    let mut node = s.get(&nodes(), None, name)?;
    let now = s.now();
    let (reason, message) = if ready {
        ("KubeletReady", "kubelet is posting ready status")
    } else {
        ("KubeletNotReady", "container runtime network not ready")
    };
    let mut conds: Vec<Value> = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let status = if ready { "True" } else { "False" };
    let old = conds.iter().position(|c| c["type"] == "Ready");
    let transition = match old.map(|i| &conds[i]) {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let c = json!({"type": "Ready", "status": status, "lastHeartbeatTime": now,
        "lastTransitionTime": transition, "reason": reason, "message": message});
    match old {
        Some(i) => conds[i] = c,
        None => conds.push(c),
    }
    if let Some(m) = node.as_object_mut() {
        let st = m.entry("status").or_insert_with(|| json!({}));
        if let Some(st) = st.as_object_mut() {
            st.insert("conditions".into(), Value::Array(conds));
        }
    }
    let out = s.update_status(&nodes(), None, name, &node, W);
    shared.notify(s.resource_version());
    out
}

/// What the Job controller should do for one Job now (the pure part of [`sync_job`]).
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    /// How many pods to create.
    pub create: usize,
    /// The names of active pods to delete (the Job finished).
    pub delete: Vec<String>,
    /// The new `status`.
    pub status: Value,
}

fn is_true(conds: &[Value], kind: &str) -> bool {
    conds
        .iter()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

fn job_condition(kind: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": "True", "lastProbeTime": now,
        "lastTransitionTime": now, "reason": reason, "message": message})
}

/// Whether a Job has a terminal condition (`Complete` or `Failed`).
pub fn job_finished(job: &Value) -> bool {
    let conds = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    is_true(conds, "Complete") || is_true(conds, "Failed")
}

/// Plans the Job controller's step for `job` with its `pods` at `now`.
pub fn plan_job(job: &Value, pods: &[Value], now: &str) -> JobPlan {
    let old = job.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut status = old.as_object().cloned().unwrap_or_default();
    if job_finished(job) {
        return JobPlan {
            create: 0,
            delete: Vec::new(),
            status: Value::Object(status),
        };
    }
    let spec = job.get("spec").cloned().unwrap_or(Value::Null);
    let parallelism = spec.get("parallelism").and_then(Value::as_u64);
    // batch/v1 defaulting (SetDefaults_Job): both unset → 1 and 1.
    let completions = match (spec.get("completions").and_then(Value::as_u64), parallelism) {
        (Some(c), _) => Some(c),
        (None, None) => Some(1),
        (None, Some(_)) => None,
    };
    let parallelism = parallelism.unwrap_or(1);
    let backoff_limit = spec
        .get("backoffLimit")
        .and_then(Value::as_u64)
        .unwrap_or(6);
    let suspended = spec.get("suspend").and_then(Value::as_bool) == Some(true);
    let phase = |p: &Value| {
        p.pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            .to_string()
    };
    let deleting = |p: &Value| p.pointer("/metadata/deletionTimestamp").is_some();
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| !deleting(p) && !matches!(phase(p).as_str(), "Succeeded" | "Failed"))
        .collect();
    let terminating = pods
        .iter()
        .filter(|p| deleting(p) && !matches!(phase(p).as_str(), "Succeeded" | "Failed"))
        .count();
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count() as u64;
    let failed = pods.iter().filter(|p| phase(p) == "Failed").count() as u64;
    let ready = active
        .iter()
        .filter(|p| {
            p.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| is_true(c, "Ready"))
        })
        .count();
    let mut conds: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !suspended && !status.contains_key("startTime") {
        status.insert("startTime".into(), json!(now));
    }
    let names = |v: &[&Value]| -> Vec<String> {
        v.iter()
            .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect()
    };
    let success = match completions {
        Some(c) => succeeded >= c,
        None => succeeded >= 1 && active.is_empty(),
    };
    let mut create = 0;
    let mut delete = Vec::new();
    let mut active_n = active.len();
    if success {
        const MSG: &str = "Reached expected number of succeeded pods";
        if !is_true(&conds, "SuccessCriteriaMet") {
            conds.push(job_condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                MSG,
                now,
            ));
        }
        delete = names(&active);
        active_n = 0;
        conds.push(job_condition("Complete", "CompletionsReached", MSG, now));
        status.insert("completionTime".into(), json!(now));
    } else if failed > backoff_limit {
        const MSG: &str = "Job has reached the specified backoff limit";
        if !is_true(&conds, "FailureTarget") {
            conds.push(job_condition(
                "FailureTarget",
                "BackoffLimitExceeded",
                MSG,
                now,
            ));
        }
        delete = names(&active);
        active_n = 0;
        conds.push(job_condition("Failed", "BackoffLimitExceeded", MSG, now));
    } else if !suspended {
        let remaining = match completions {
            Some(c) => c.saturating_sub(succeeded),
            None if succeeded > 0 => 0,
            None => parallelism,
        };
        let want = usize::try_from(parallelism.min(remaining)).unwrap_or(usize::MAX);
        create = want.saturating_sub(active.len());
        active_n += create;
    }
    status.insert("active".into(), json!(active_n));
    status.insert("ready".into(), json!(if active_n == 0 { 0 } else { ready }));
    status.insert("succeeded".into(), json!(succeeded));
    status.insert("failed".into(), json!(failed));
    status.insert("terminating".into(), json!(terminating));
    status.insert("uncountedTerminatedPods".into(), json!({}));
    if !conds.is_empty() {
        status.insert("conditions".into(), Value::Array(conds));
    }
    JobPlan {
        create,
        delete,
        status: Value::Object(status),
    }
}

/// The pod the Job controller creates from `job`'s template (pure).
pub fn job_pod(job: &Value) -> Value {
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let uid = job
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let template = job
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut labels = template
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", uid),
        ("batch.kubernetes.io/job-name", name),
        ("controller-uid", uid),
        ("job-name", name),
    ] {
        labels.insert(k.into(), json!(v));
    }
    let mut meta = json!({
        "generateName": format!("{name}-"),
        "labels": labels,
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
            "uid": uid, "controller": true, "blockOwnerDeletion": true}],
    });
    if let (Some(a), Some(m)) = (
        template.pointer("/metadata/annotations"),
        meta.as_object_mut(),
    ) {
        m.insert("annotations".into(), a.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

pub(crate) fn owned_pods(s: &Store, ns: &str, uid: &str) -> Vec<Value> {
    let gr = pods();
    s.objects()
        .filter(|(k, _)| k.gr == gr && k.namespace.as_deref() == Some(ns))
        .map(|(_, v)| v)
        .filter(|p| {
            p.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|o| {
                    o.iter()
                        .any(|r| r["uid"] == uid && r["controller"] == json!(true))
                })
        })
        .cloned()
        .collect()
}

pub(crate) fn sync_job_in(s: &mut Store, ns: &str, name: &str) -> Result<Value, ApiError> {
    let job = s.get(&jobs(), Some(ns), name)?;
    let uid = job
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plan = plan_job(&job, &owned_pods(s, ns, &uid), &s.now());
    for _ in 0..plan.create {
        s.create(&pods(), Some(ns), &job_pod(&job), W)?;
    }
    let write_status = |s: &mut Store, status: Value| -> Result<Value, ApiError> {
        let mut new = s.get(&jobs(), Some(ns), name)?;
        if new.get("status") == Some(&status) {
            return Ok(new);
        }
        if let Some(m) = new.as_object_mut() {
            m.insert("status".into(), status);
        }
        s.update_status(&jobs(), Some(ns), name, &new, W)
    };
    let plan_status = plan.status;
    if job_finished(&json!({"status": plan_status.clone()})) {
        // The interim condition (SuccessCriteriaMet / FailureTarget) is its own write
        // before the remaining pods go and the terminal condition is added, as 1.32's
        // controller does.
        let mut interim = plan_status.clone();
        if let Some(m) = interim.as_object_mut() {
            m.remove("completionTime");
            if let Some(Value::Array(c)) = m.get_mut("conditions") {
                c.retain(|c| c["type"] != "Complete" && c["type"] != "Failed");
            }
        }
        write_status(s, interim)?;
    }
    for p in &plan.delete {
        s.delete(&pods(), Some(ns), p, &DeleteOptions::default())?;
    }
    write_status(s, plan_status)
}

/// One Job-controller step for Job `ns/name`: creates the pods it lacks, deletes active
/// pods of a finished Job, and writes its status from its pods. Returns the Job.
pub fn sync_job(shared: &Shared, ns: &str, name: &str) -> Result<Value, ApiError> {
    let mut s = shared.lock();
    let out = sync_job_in(&mut s, ns, name);
    shared.notify(s.resource_version());
    out
}

/// The outcome [`run_job`] and [`JobController`] give a Job's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Pods created and running; the Job stays active.
    Run,
    /// Every pod succeeds with this termination message, until the Job is `Complete`.
    Succeed {
        /// The termination message.
        message: String,
    },
    /// Every pod fails with this exit code and message, until the Job is `Failed`
    /// (after `backoffLimit` + 1 pods).
    Fail {
        /// The exit code.
        exit_code: i32,
        /// The termination message.
        message: String,
    },
}

fn run_job_in(
    s: &mut Store,
    ns: &str,
    name: &str,
    outcome: &JobOutcome,
) -> Result<Value, ApiError> {
    // Bounded: each round finishes at least one pod (or stops), and a Job finishes
    // after completions successes or backoffLimit + 1 failures.
    for _ in 0..10_000 {
        let job = sync_job_in(s, ns, name)?;
        if job_finished(&job) {
            return Ok(job);
        }
        let uid = job
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let active: Vec<Value> = owned_pods(s, ns, &uid)
            .into_iter()
            .filter(|p| {
                !matches!(
                    p.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
            })
            .collect();
        let phase = match outcome {
            JobOutcome::Run => PodPhase::Running,
            JobOutcome::Succeed { message } => PodPhase::Succeeded {
                message: message.clone(),
            },
            JobOutcome::Fail { exit_code, message } => PodPhase::Failed {
                exit_code: *exit_code,
                message: message.clone(),
            },
        };
        let mut changed = false;
        for p in &active {
            let pn = p
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let now = p.pointer("/status/phase").and_then(Value::as_str);
            if now != Some("Running") {
                set_pod_phase_in(s, ns, pn, &PodPhase::Running)?;
                changed = true;
            }
            if phase != PodPhase::Running {
                set_pod_phase_in(s, ns, pn, &phase)?;
                changed = true;
            }
        }
        if !changed {
            return sync_job_in(s, ns, name);
        }
    }
    s.get(&jobs(), Some(ns), name)
}

/// Runs Job `ns/name` to `outcome`: creates its pods, moves them Pending → Running →
/// the outcome, and updates the Job's status, step by step as the Job controller and
/// the kubelet would (every step is its own write, seen by watches). Returns the Job.
pub fn run_job(
    shared: &Shared,
    ns: &str,
    name: &str,
    outcome: &JobOutcome,
) -> Result<Value, ApiError> {
    let mut s = shared.lock();
    let out = run_job_in(&mut s, ns, name, outcome);
    shared.notify(s.resource_version());
    out
}

/// A background Job controller: every Job without a terminal condition is run to the
/// chosen outcome as soon as it appears ([`run_job`]). Stops when dropped.
#[derive(Debug)]
pub struct JobController {
    task: JoinHandle<()>,
}

impl JobController {
    /// Starts the controller on the current tokio runtime.
    pub fn spawn(shared: Arc<Shared>, outcome: JobOutcome) -> JobController {
        let gr = jobs();
        let task = on_changes(shared, crate::http::watch::POLL, false, move |s| {
            let todo: Vec<(String, String, bool)> = s
                .objects()
                .filter(|(k, _)| k.gr == gr)
                .map(|(k, v)| {
                    (
                        k.namespace.clone().unwrap_or_default(),
                        k.name.clone(),
                        job_finished(v),
                    )
                })
                .collect();
            for (ns, name, finished) in todo {
                if !finished {
                    // A Job deleted or invalid meanwhile is skipped; the next change
                    // retries the others.
                    let _ = run_job_in(s, &ns, &name, &outcome);
                }
            }
            true
        });
        JobController { task }
    }

    /// Stops the controller.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for JobController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long [`wait_for`] polls between looks.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// Polls `f` on the store until it returns `Some`, or `None` after `deadline` (for
/// tests: "eventually").
pub async fn wait_for<T>(
    shared: &Shared,
    deadline: Duration,
    mut f: impl FnMut(&Store) -> Option<T>,
) -> Option<T> {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(t) = f(&shared.lock()) {
            return Some(t);
        }
        if tokio::time::Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(spec: Value) -> Value {
        json!({"metadata": {"name": "j", "namespace": "d", "uid": "u1"}, "spec": spec})
    }

    fn pod(name: &str, phase: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    /// (spec, pods, create, delete, active, succeeded, failed, conditions)
    type Case = (
        Value,
        Vec<Value>,
        usize,
        usize,
        u64,
        u64,
        u64,
        Vec<&'static str>,
    );

    #[test]
    fn job_plans() {
        let t = "2024-01-01T00:00:00Z";
        let spec = json!({"template": {}});
        // (spec, pods, create, delete, active, succeeded, failed, conditions)
        let cases: Vec<Case> = vec![
            (spec.clone(), vec![], 1, 0, 1, 0, 0, vec![]),
            (
                spec.clone(),
                vec![pod("a", "Running", true)],
                0,
                0,
                1,
                0,
                0,
                vec![],
            ),
            (
                spec.clone(),
                vec![pod("a", "Succeeded", false)],
                0,
                0,
                0,
                1,
                0,
                vec!["SuccessCriteriaMet", "Complete"],
            ),
            (
                json!({"completions": 3, "parallelism": 2}),
                vec![pod("a", "Succeeded", false)],
                2,
                0,
                2,
                1,
                0,
                vec![],
            ),
            (
                json!({"completions": 2, "parallelism": 2}),
                vec![
                    pod("a", "Succeeded", false),
                    pod("b", "Succeeded", false),
                    pod("c", "Running", true),
                ],
                0,
                1,
                0,
                2,
                0,
                vec!["SuccessCriteriaMet", "Complete"],
            ),
            (
                json!({"backoffLimit": 1}),
                vec![pod("a", "Failed", false)],
                1,
                0,
                1,
                0,
                1,
                vec![],
            ),
            (
                json!({"backoffLimit": 1}),
                vec![pod("a", "Failed", false), pod("b", "Failed", false)],
                0,
                0,
                0,
                0,
                2,
                vec!["FailureTarget", "Failed"],
            ),
            (json!({"parallelism": 2}), vec![], 2, 0, 2, 0, 0, vec![]),
            (
                json!({"parallelism": 2}),
                vec![pod("a", "Succeeded", false), pod("b", "Running", true)],
                0,
                0,
                1,
                1,
                0,
                vec![],
            ),
            (json!({"suspend": true}), vec![], 0, 0, 0, 0, 0, vec![]),
        ];
        for (i, (spec, pods, create, delete, active, succeeded, failed, conds)) in
            cases.into_iter().enumerate()
        {
            let p = plan_job(&job(spec), &pods, t);
            assert_eq!(p.create, create, "case {i}");
            assert_eq!(p.delete.len(), delete, "case {i}");
            assert_eq!(p.status["active"], active, "case {i}");
            assert_eq!(p.status["succeeded"], succeeded, "case {i}");
            assert_eq!(p.status["failed"], failed, "case {i}");
            let got: Vec<&str> = p.status["conditions"]
                .as_array()
                .map(|c| c.iter().filter_map(|c| c["type"].as_str()).collect())
                .unwrap_or_default();
            assert_eq!(got, conds, "case {i}");
        }
        let done = plan_job(&job(spec.clone()), &[pod("a", "Succeeded", false)], t);
        assert_eq!(done.status["completionTime"], t);
        assert_eq!(done.status["conditions"][1]["reason"], "CompletionsReached");
        let mut finished = job(spec);
        finished["status"] = done.status.clone();
        assert!(job_finished(&finished));
        let again = plan_job(&finished, &[pod("a", "Succeeded", false)], "later");
        assert_eq!(again.status, done.status, "a finished Job is left alone");
        assert_eq!(again.create, 0);
    }

    #[test]
    fn job_pods_carry_the_controller_labels_and_owner() {
        let p = job_pod(&json!({"metadata": {"name": "j", "uid": "u1"},
            "spec": {"template": {"metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}}));
        assert_eq!(p["metadata"]["generateName"], "j-");
        let l = &p["metadata"]["labels"];
        assert_eq!(l["app"], "x");
        assert_eq!(l["batch.kubernetes.io/job-name"], "j");
        assert_eq!(l["batch.kubernetes.io/controller-uid"], "u1");
        assert_eq!(l["job-name"], "j");
        assert_eq!(l["controller-uid"], "u1");
        assert_eq!(p["metadata"]["annotations"]["a"], "b");
        let o = &p["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                o["kind"].as_str(),
                o["controller"].as_bool(),
                o["blockOwnerDeletion"].as_bool()
            ),
            (Some("Job"), Some(true), Some(true))
        );
        assert_eq!(p["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn pod_statuses_as_the_kubelet_writes_them() {
        let pod = json!({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let s = pod_status(&pod, &PodPhase::Pending, "t0");
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        let mut running = pod.clone();
        running["status"] = pod_status(&pod, &PodPhase::Running, "t1");
        assert_eq!(running["status"]["startTime"], "t1");
        assert_eq!(running["status"]["containerStatuses"][1]["ready"], true);
        let s = pod_status(
            &running,
            &PodPhase::Failed {
                exit_code: 3,
                message: "boom".into(),
            },
            "t2",
        );
        assert_eq!(s["phase"], "Failed");
        let t = &s["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(
            (
                t["exitCode"].as_i64(),
                t["reason"].as_str(),
                t["message"].as_str()
            ),
            (Some(3), Some("Error"), Some("boom"))
        );
        assert_eq!(t["startedAt"], "t1");
        assert_eq!(t["finishedAt"], "t2");
        assert!(
            s["containerStatuses"][1]["state"]["terminated"]
                .get("message")
                .is_none()
        );
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(
            (ready["status"].as_str(), ready["reason"].as_str()),
            (Some("False"), Some("PodCompleted"))
        );
    }
}

/// The disruption controller's status pass over `s`: every PodDisruptionBudget's status as
/// [`crate::disruption::status`] computes it from its namespace's pods now, written through
/// the `status` subresource when it differs from the stored one (so a pass that changes
/// nothing writes nothing). Returns how many it wrote.
pub fn sync_budgets_in(s: &mut Store) -> usize {
    let pdb_gr = GroupResource::new("policy", "poddisruptionbudgets");
    let now = crate::http::eviction::now_secs();
    let budgets: Vec<(String, String, Value)> = s
        .objects()
        .filter(|(k, _)| k.gr == pdb_gr)
        .map(|(k, v)| {
            (
                k.namespace.clone().unwrap_or_default(),
                k.name.clone(),
                v.clone(),
            )
        })
        .collect();
    let mut written = 0;
    for (ns, name, pdb) in budgets {
        let pods: Vec<Value> = s
            .objects()
            .filter(|(k, _)| k.gr == pods() && k.namespace.as_deref() == Some(ns.as_str()))
            .map(|(_, v)| v.clone())
            .collect();
        let status =
            crate::disruption::status(&pdb, &pods, now, &crate::http::table::parse_rfc3339);
        if pdb.get("status") == Some(&status) {
            continue;
        }
        let mut obj = pdb;
        obj["status"] = status;
        if s.update_status(&pdb_gr, Some(&ns), &name, &obj, WriteOptions::default())
            .is_ok()
        {
            written += 1;
        }
    }
    written
}

/// A background disruption controller (`pkg/controller/disruption/disruption.go`): after
/// every change to the store, each PodDisruptionBudget's status is brought up to date with
/// its pods ([`sync_budgets_in`]) — `currentHealthy`, `desiredHealthy`, `expectedPods`,
/// `disruptionsAllowed`, the `DisruptionAllowed` condition — as `kubectl get pdb` and a
/// drain see it between evictions. Stops when dropped.
#[derive(Debug)]
pub struct DisruptionController {
    task: JoinHandle<()>,
}

impl DisruptionController {
    /// Starts the controller on the current tokio runtime.
    pub fn spawn(shared: Arc<Shared>) -> DisruptionController {
        // disruptedPods entries expire with time, not only with writes: a pass every 5 s.
        let task = on_changes(shared, Duration::from_secs(5), true, |s| {
            sync_budgets_in(s) > 0
        });
        DisruptionController { task }
    }
}

/// A background controller's loop: `pass` runs under the store's lock whenever the store
/// changed since its last run (and, with `rerun_on_timer`, every `every` regardless);
/// watchers are told when it says it wrote.
fn on_changes(
    shared: Arc<Shared>,
    every: Duration,
    rerun_on_timer: bool,
    mut pass: impl FnMut(&mut Store) -> bool + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut signal = shared.subscribe();
        let mut seen_rv = u64::MAX;
        loop {
            {
                let mut s = shared.lock();
                if s.resource_version() != seen_rv {
                    if pass(&mut s) {
                        shared.notify(s.resource_version());
                    }
                    seen_rv = s.resource_version();
                }
            }
            tokio::select! {
                _ = signal.changed() => {}
                _ = tokio::time::sleep(every) => {
                    if rerun_on_timer {
                        seen_rv = u64::MAX;
                    }
                }
            }
        }
    })
}

impl Drop for DisruptionController {
    fn drop(&mut self) {
        self.task.abort();
    }
}
