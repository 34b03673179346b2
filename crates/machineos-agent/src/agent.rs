//! The executor: [`run`] watches its own Node, observes (the node, the host's status, the
//! rendered MachineConfig), calls [`decide`] and carries out its [`Action`]s on kube-rs and
//! the [`Host`], until its [`CancellationToken`] is cancelled.
//!
//! Contract:
//! * **One node write per pass.** The pass's `Annotate`/`Cordon`/`Uncordon` actions become
//!   one merge patch carrying the observed `resourceVersion` (a concurrent change is a 409
//!   and the pass is decided again on fresh state); it is applied before anything else the
//!   pass does, so the progress record is written before the drain, deploy or reboot it
//!   announces.
//! * **MachineConfigNode status only.** Conditions (`lastTransitionTime` moves only when a
//!   status changes), `configVersion` and `configImage` go through the `status`
//!   subresource of the MCN named after the node; the controller creates the MCN and owns
//!   its spec — while it is missing the agent skips MCN writes.
//! * **Drain** ([`Action::Drain`], one round): the node's pods (`spec.nodeName` field
//!   selector) except DaemonSet-owned and mirror pods are evicted through `policy/v1`
//!   Evictions (a pod already terminating is waited for, not evicted); a 429 (or a 500 for
//!   several budgets) is a pod blocked by a PodDisruptionBudget, reported with the API
//!   server's cause, which names the budget. The round's [`DrainOutcome`] is handed to the
//!   next pass; the window, timeout and backoff are [`decide`]'s.
//! * **Host calls** run on `spawn_blocking`; a failure stops the pass's remaining actions
//!   and is handed to the next pass as a [`HostFailure`] (consecutive failures counted).
//! * **Reboot**: [`Host::reboot`] is called after the progress record (the boot id before
//!   it) is written; the agent then waits (a real host kills it). A harness stops the agent
//!   (cancels the token), boots the fake host and starts a new agent, which finds a new
//!   boot id and finishes.
//! * **Live apply** ([`Action::ApplyLive`]): [`Host::apply_live`], then each `systemctl`
//!   operation in order, on one blocking thread; its success is handed to the next pass
//!   ([`Observed::applied`]), as is [`Action::SyncLive`]'s ([`Host::sync_live`]). A soft
//!   reboot is [`Host::soft_reboot`] (the host falls back to a reboot where it cannot).
//! * **Features**: the first patch of an agent whose node does not say so yet sets
//!   `machineos.io/agent-features: live-apply`, which the rollout hands moves that take no
//!   slot to.
//! * **Architecture** ([`Observed::arch`], which picks a multi-architecture image's
//!   manifest): the Node's `kubernetes.io/arch` label, else the architecture the agent was
//!   built for (it runs on the node).
//! * **Health** ([`Observed::health`]): read only for a pass at the health gate — the Node's
//!   conditions (from the node read for the pass) and the pods on the node owned by a
//!   DaemonSet, listed by `spec.nodeName`. [`Action::Rollback`] is [`Host::rollback`].
//! * Events (`events.k8s.io/v1`, reporter `machineos-agent`/node) are about the Node and
//!   best effort. Nothing is kept in memory that a restart needs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{
    Api, ApiResource, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use machineos_api::v1::MachineConfigNode;
use machineos_diagnostics::Backoff;
use machineos_host::{Host, HostError, HostStatus};
use machineos_kube::error::code;
use machineos_kube::{Events, api_err, truncate, upsert_condition};
use machineos_rollout::health::{NodeHealth, PodHealth};
use machineos_rollout::vocab::{ARCH_LABEL, CURRENT_CONFIG, DESIRED_CONFIG, PULL_SECRET};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::machine::{
    Action, BlockedPod, DrainOutcome, HostFailure, HostOp, McnCondition, Millis, Observed, Policy,
    Rendered, decide,
};

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// This node's name (`--node`, env `NODE_NAME`).
    pub node: String,
    /// The agent's namespace (the default pull Secret's, when `pull_secret` names none).
    pub namespace: String,
    /// The default pull Secret (`namespace`, `name`) of type `kubernetes.io/dockerconfigjson`,
    /// used when the node has no `machineos.io/pull-secret` annotation.
    pub pull_secret: Option<(String, String)>,
    /// How long one drain window may take before the drain has failed (default 10 min).
    pub drain_timeout: Duration,
    /// Between eviction rounds (default 5 s).
    pub drain_retry: Duration,
    /// The longest wait after a failed drain (default 5 min).
    pub drain_backoff_max: Duration,
    /// How long a requested reboot may take before it is requested again (default 15 min).
    pub reboot_timeout: Duration,
    /// The first wait after a failed host operation (default 10 s; doubles, at most 16×).
    pub failure_backoff: Duration,
    /// Decide again at least this often even when nothing changes (default 60 s).
    pub resync: Duration,
    /// How long one eviction call may take (default 30 s). kube-rs clients retry 429s by
    /// default (`Config::default_retry`), which turns a PodDisruptionBudget refusal into a
    /// long wait: build the agent's client with [`client_config`]; past this bound an
    /// unanswered eviction counts as blocked.
    pub eviction_timeout: Duration,
}

impl AgentOptions {
    /// The defaults for node `node`, namespace `namespace`.
    pub fn new(node: &str, namespace: &str) -> AgentOptions {
        let p = Policy::default();
        AgentOptions {
            node: node.to_owned(),
            namespace: namespace.to_owned(),
            pull_secret: None,
            drain_timeout: p.drain_timeout,
            drain_retry: p.drain_retry,
            drain_backoff_max: p.drain_backoff_max,
            reboot_timeout: p.reboot_timeout,
            failure_backoff: p.failure_backoff,
            resync: Duration::from_secs(60),
            eviction_timeout: Duration::from_secs(30),
        }
    }

    /// The timings [`decide`] applies.
    pub fn policy(&self) -> Policy {
        Policy {
            drain_timeout: self.drain_timeout,
            drain_retry: self.drain_retry,
            drain_backoff_max: self.drain_backoff_max,
            reboot_timeout: self.reboot_timeout,
            failure_backoff: self.failure_backoff,
        }
    }
}

/// `config` made fit for the agent: no automatic retry of 429/503/504 responses (an
/// eviction's 429 is a PodDisruptionBudget's answer, which the drain reports and retries
/// itself). The controller's client is built the same way.
pub use machineos_kube::client_config;

/// The annotation marking a mirror (static) pod.
const MIRROR: &str = "kubernetes.io/config.mirror";
/// The longest wait between passes after API errors.
const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(30);

/// Run the agent for `opts.node` until `shutdown` is cancelled. Errors of single passes are
/// logged and retried with backoff; the agent ends only when cancelled (then `Ok`).
pub async fn run(
    client: Client,
    host: Arc<dyn Host>,
    opts: AgentOptions,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let mut agent = Agent::new(client.clone(), host, opts);
    let wake = Arc::new(tokio::sync::Notify::new());
    let watch = tokio::spawn(watch_node(
        client,
        agent.opts.node.clone(),
        agent.written.clone(),
        wake.clone(),
    ));
    let _abort = AbortOnDrop(watch);
    let mut errors = 0u32;
    loop {
        if shutdown.is_cancelled() {
            return Ok(());
        }
        let wait = match agent.pass().await {
            Ok(wait) => {
                errors = 0;
                wait
            }
            Err(e) => {
                errors += 1;
                let wait = if e.code() == Some(409) {
                    Duration::ZERO
                } else {
                    Backoff::doubling(Duration::from_millis(400), MAX_ERROR_BACKOFF).delay(errors)
                };
                tracing::warn!(node = %agent.opts.node, error = %e, ?wait, "agent pass failed");
                Some(wait)
            }
        };
        let wait = wait.unwrap_or(agent.opts.resync).min(agent.opts.resync);
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The Event reason on a Node whose host the agent cannot drive.
pub const REASON_HOST_NOT_IMAGE_BASED: &str = "HostNotImageBased";

/// On a host the agent cannot drive (no bootc, no rpm-ostree): say so once — a Warning
/// Event on the Node and a log line — and wait for `shutdown` instead of exiting, so a
/// DaemonSet that landed on such a node does not crash-loop a privileged pod there.
/// Nothing on the node is changed.
pub async fn idle_unsupported(
    client: Client,
    node: &str,
    why: &str,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let note = format!(
        "the machineos agent cannot update this node: {why}; it idles here (deploy/agent.yaml \
         schedules it only on image-based nodes)"
    );
    tracing::warn!(%node, reason = REASON_HOST_NOT_IMAGE_BASED, "{note}");
    let nodes: Api<Node> = Api::all(client.clone());
    let uid = tokio::select! {
        () = shutdown.cancelled() => return Ok(()),
        n = nodes.get_opt(node) => n
            .map_err(api_err("get", format!("Node/{node}")))?
            .and_then(|n| n.metadata.uid),
    };
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.to_owned()),
        uid,
        ..ObjectReference::default()
    };
    Events::new(client, "machineos-agent", node)
        .publish(&reference, true, REASON_HOST_NOT_IMAGE_BASED, &note)
        .await;
    shutdown.cancelled().await;
    Ok(())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Wake the agent on every change of its node not written by the agent itself.
async fn watch_node(
    client: Client,
    node: String,
    written: Arc<Mutex<Option<String>>>,
    wake: Arc<tokio::sync::Notify>,
) {
    let api: Api<Node> = Api::all(client);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut stream = watcher(api, cfg)
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(n) => {
                let ours = written
                    .lock()
                    .map(|w| w.is_some() && *w == n.metadata.resource_version)
                    .unwrap_or(false);
                if !ours {
                    wake.notify_one();
                }
            }
            Err(e) => tracing::debug!(%node, error = %e, "node watch"),
        }
    }
}

fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
        })
}

/// The architecture the agent was built for, in `kubernetes.io/arch` (GOARCH) terms.
fn own_arch() -> Option<&'static str> {
    goarch(std::env::consts::ARCH, cfg!(target_endian = "little"))
}

/// Rust's architecture name → GOARCH (`None` for one no image is built for).
fn goarch(arch: &str, little_endian: bool) -> Option<&'static str> {
    Some(match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" if little_endian => "ppc64le",
        "s390x" => "s390x",
        _ => return None,
    })
}

/// A pod's readiness for the health gate: Ready, or its phase and its containers' waiting
/// or terminated reasons.
fn pod_health(pod: &Pod) -> PodHealth {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        return PodHealth::Ready;
    }
    let mut why = vec![
        status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into()),
    ];
    for c in status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
    {
        let state = c.state.as_ref();
        if let Some(r) = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
            .or_else(|| {
                state
                    .and_then(|s| s.terminated.as_ref())
                    .and_then(|t| t.reason.clone())
            })
        {
            why.push(format!("{}: {r}", c.name));
        }
    }
    PodHealth::NotReady(format!("{} ({})", pod.name_any(), why.join(", ")))
}

fn machine_configs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", "MachineConfig"),
        "machineconfigs",
    )
}

/// The agent's state between passes: only what a restart may lose.
struct Agent {
    client: Client,
    host: Arc<dyn Host>,
    opts: AgentOptions,
    policy: Policy,
    events: Events,
    /// The resourceVersion of the agent's own last node write (the watch ignores it).
    written: Arc<Mutex<Option<String>>>,
    /// The previous pass's drain round.
    drain: Option<DrainOutcome>,
    /// The last drain round that finished (kept across passes, for messages).
    last_drain: Option<DrainOutcome>,
    /// The previous pass's host failure.
    failure: Option<HostFailure>,
    /// Consecutive failures per host operation.
    failures: HashMap<&'static str, u32>,
    /// Where the pull secret was written (for pulls and deploys).
    auth: Option<PathBuf>,
    /// The target the last pass applied live (its actions run), for the next pass.
    applied: Option<crate::machine::Target>,
}

fn op_key(op: HostOp) -> &'static str {
    match op {
        HostOp::Pull => "pull",
        HostOp::PullSecret => "pull-secret",
        HostOp::SshKeys => "ssh-keys",
        HostOp::Kargs => "kargs",
        HostOp::Deploy => "deploy",
        HostOp::Reboot => "reboot",
        HostOp::Live => "live",
        HostOp::Rollback => "rollback",
    }
}

impl Agent {
    fn new(client: Client, host: Arc<dyn Host>, opts: AgentOptions) -> Agent {
        let events = Events::new(client.clone(), "machineos-agent", &opts.node);
        Agent {
            client,
            host,
            policy: opts.policy(),
            opts,
            events,
            written: Arc::new(Mutex::new(None)),
            drain: None,
            last_drain: None,
            failure: None,
            failures: HashMap::new(),
            auth: None,
            applied: None,
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// One pass: observe, decide, act. Returns how long to wait before the next one
    /// (`None`: until the node changes or the resync).
    async fn pass(&mut self) -> Result<Option<Duration>, AgentError> {
        let node_name = self.opts.node.clone();
        let node = self
            .nodes()
            .get(&node_name)
            .await
            .map_err(api_err("get", format!("Node/{node_name}")))?;
        let host = self.host_status().await?;
        let boot_guard = self.boot_guard_record().await;
        let annotations: BTreeMap<String, String> = node.annotations().clone();
        let mut observed = Observed {
            arch: node
                .labels()
                .get(ARCH_LABEL)
                .filter(|a| !a.is_empty())
                .cloned()
                .or_else(|| own_arch().map(str::to_owned)),
            unschedulable: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            annotations,
            host,
            drain: self.drain.take(),
            last_drain: self.last_drain.clone(),
            failure: self.failure.take(),
            applied: self.applied.take(),
            boot_guard,
            ..Observed::default()
        };
        if observed.target().is_some() {
            let desired = observed
                .annotations
                .get(DESIRED_CONFIG)
                .cloned()
                .unwrap_or_default();
            observed.rendered = self.rendered(&desired).await?;
            if let Some(current) = observed.annotations.get(CURRENT_CONFIG).cloned() {
                observed.current_kargs = self
                    .rendered(&current)
                    .await?
                    .map(|r| r.kernel_arguments)
                    .unwrap_or_default();
            }
        }
        if observed.at_gate() {
            observed.health = Some(self.health(&node).await?);
        }
        let actions = decide(&observed, &self.policy, now_ms());
        if !actions.is_empty() {
            tracing::info!(node = %node_name, ?actions, "decided");
        }
        self.execute(&node, &observed, actions).await
    }

    /// What the node shows of its health for the gate: its conditions, and the pods on it
    /// owned by DaemonSets (`spec.nodeName` field selector), each Ready or why not.
    async fn health(&self, node: &Node) -> Result<NodeHealth, AgentError> {
        let mut h = NodeHealth::default();
        for c in node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
        {
            h.conditions.insert(
                c.type_.clone(),
                (
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                ),
            );
        }
        let name = &self.opts.node;
        let pods: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
        let list = pods
            .list(&lp)
            .await
            .map_err(api_err("list", format!("Pods on Node/{name}")))?;
        for pod in list {
            let Some(ds) = pod
                .owner_references()
                .iter()
                .find(|o| o.kind == "DaemonSet" && o.controller == Some(true))
            else {
                continue;
            };
            // A pod on its way out (deleted, or finished) is not the DaemonSet's pod on
            // this node any more; of several, a Ready one counts (a new pod beside an old
            // one after a reboot).
            let finished = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| p == "Succeeded" || p == "Failed");
            if pod.metadata.deletion_timestamp.is_some() || finished {
                continue;
            }
            let key = format!("{}/{}", pod.namespace().unwrap_or_default(), ds.name);
            let health = pod_health(&pod);
            match h.daemon_set_pods.get(&key) {
                Some(PodHealth::Ready) => {}
                _ => {
                    h.daemon_set_pods.insert(key, health);
                }
            }
        }
        Ok(h)
    }

    /// The boot guard's rollback record, parsed; an unreadable one is still a rollback the
    /// guard made (said so in its evidence); a read failure is logged and read as none.
    async fn boot_guard_record(&self) -> Option<machineos_boot_guard::Record> {
        let host = self.host.clone();
        let text = match blocking("read boot guard record", move || host.boot_guard_record()).await
        {
            Ok(t) => t?,
            Err(e) => {
                tracing::warn!(node = %self.opts.node, error = %e, "reading the boot guard's record failed");
                return None;
            }
        };
        Some(
            machineos_boot_guard::Record::parse(&text).unwrap_or_else(|e| {
                machineos_boot_guard::Record {
                    from: "an unknown deployment".into(),
                    tool: "an unknown tool".into(),
                    check: machineos_boot_guard::CHECK.into(),
                    evidence: format!("its record is unreadable ({e})"),
                    at: "an unknown time".into(),
                }
            }),
        )
    }

    async fn host_status(&self) -> Result<HostStatus, AgentError> {
        let host = self.host.clone();
        blocking("status", move || host.status()).await
    }

    /// The MachineConfig `name`'s kargs and SSH keys; `None` when it does not exist.
    async fn rendered(&self, name: &str) -> Result<Option<Rendered>, AgentError> {
        if name.is_empty() {
            return Ok(None);
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &machine_configs());
        let mc = match api.get_opt(name).await {
            Ok(Some(mc)) => mc,
            Ok(None) => return Ok(None),
            Err(e) => return Err(api_err("get", format!("MachineConfig/{name}"))(e).into()),
        };
        Ok(Some(rendered_of(&mc.data)))
    }

    async fn execute(
        &mut self,
        node: &Node,
        observed: &Observed,
        actions: Vec<Action>,
    ) -> Result<Option<Duration>, AgentError> {
        let mut wait: Option<Duration> = None;
        let mut acted = false;
        // 1. The node patch.
        let mut annotations = serde_json::Map::new();
        let mut unschedulable = None;
        let mut mcn_conditions = Vec::new();
        let mut mcn_versions = None;
        let mut events = Vec::new();
        let mut effects = Vec::new();
        for a in actions {
            match a {
                Action::Annotate(m) => {
                    for (k, v) in m {
                        annotations.insert(k, v.map_or(Value::Null, Value::String));
                    }
                }
                Action::Cordon => unschedulable = Some(true),
                Action::Uncordon => unschedulable = Some(false),
                Action::SetMcnCondition(c) => mcn_conditions.push(c),
                v @ Action::SetMcnVersions { .. } => mcn_versions = Some(v),
                Action::Event {
                    warning,
                    reason,
                    note,
                } => events.push((warning, reason, note)),
                Action::Requeue(d) => wait = Some(wait.map_or(d, |w| w.min(d))),
                other => effects.push(other),
            }
        }
        // What this agent can do, for the rollout (once per node, or after a downgrade).
        let features = machineos_rollout::vocab::FEATURE_LIVE_APPLY;
        if node
            .annotations()
            .get(machineos_rollout::vocab::AGENT_FEATURES)
            .map(String::as_str)
            != Some(features)
        {
            annotations
                .entry(machineos_rollout::vocab::AGENT_FEATURES.to_owned())
                .or_insert_with(|| Value::String(features.to_owned()));
        }
        if !annotations.is_empty() || unschedulable.is_some() {
            let mut patch = json!({"metadata": {
                "resourceVersion": node.metadata.resource_version,
                "annotations": annotations,
            }});
            if let Some(u) = unschedulable {
                patch["spec"] = json!({ "unschedulable": u });
            }
            let name = &self.opts.node;
            let patched = self
                .nodes()
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err("patch", format!("Node/{name}")))?;
            if let Ok(mut w) = self.written.lock() {
                *w = patched.metadata.resource_version.clone();
            }
            acted = true;
        }
        // 2. The MachineConfigNode's status.
        if (!mcn_conditions.is_empty() || mcn_versions.is_some())
            && let Err(e) = self.write_mcn(&mcn_conditions, mcn_versions.as_ref()).await
        {
            tracing::warn!(node = %self.opts.node, error = %e, "MachineConfigNode status");
        }
        // 3. Events (before the effects: a reboot may end the process).
        for (warning, reason, note) in events {
            self.event(node, warning, reason, &note).await;
        }
        // 4. Drain and host operations, in order; the first failure stops the rest.
        for effect in effects {
            acted = true;
            if let Err(f) = self.effect(observed, &effect).await {
                let n = self.failures.entry(op_key(f.op)).or_insert(0);
                *n += 1;
                tracing::warn!(node = %self.opts.node, op = ?f.op, attempts = *n, message = %f.message, "host operation failed");
                self.failure = Some(HostFailure { attempts: *n, ..f });
                break;
            }
        }
        Ok(match wait {
            Some(w) => Some(w),
            None if acted => Some(Duration::ZERO),
            None => None,
        })
    }

    /// One side effect; a host failure is returned as data for the next pass.
    async fn effect(&mut self, observed: &Observed, a: &Action) -> Result<(), HostFailure> {
        let host = self.host.clone();
        let auth = self.auth.clone();
        let (op, result) = match a {
            Action::Drain => {
                let round = self.drain_round().await;
                self.last_drain = Some(round.clone());
                self.drain = Some(round);
                return Ok(());
            }
            Action::WritePullSecret => (HostOp::PullSecret, self.write_pull_secret(observed).await),
            Action::ReleasePullSecret => {
                if let Err(e) =
                    blocking("release pull secret", move || host.release_pull_secret()).await
                {
                    tracing::warn!(node = %self.opts.node, error = %e, "putting back the host's own pull credentials failed");
                }
                self.auth = None;
                return Ok(());
            }
            Action::ClearBootGuard => {
                // A failure leaves the record: the next pass (the step RolledBack by then)
                // removes it again.
                if let Err(e) = blocking("clear boot guard record", move || {
                    host.clear_boot_guard_record()
                })
                .await
                {
                    tracing::warn!(node = %self.opts.node, error = %e, "removing the boot guard's record failed");
                }
                return Ok(());
            }
            Action::Pull(image) => {
                let image = image.clone();
                (
                    HostOp::Pull,
                    blocking(&format!("pull {image}"), move || {
                        host.pull(&image, auth.as_deref())
                    })
                    .await,
                )
            }
            Action::Deploy(image) => {
                let image = image.clone();
                (
                    HostOp::Deploy,
                    blocking(&format!("deploy {image}"), move || {
                        host.deploy(&image, auth.as_deref())
                    })
                    .await,
                )
            }
            Action::WriteSshKeys { user, keys } => {
                let (user, keys) = (user.clone(), keys.clone());
                (
                    HostOp::SshKeys,
                    blocking(&format!("ssh keys of {user}"), move || {
                        host.write_ssh_keys(&user, &keys)
                    })
                    .await,
                )
            }
            Action::Kargs { add, remove } => {
                let (add, remove) = (add.clone(), remove.clone());
                (
                    HostOp::Kargs,
                    blocking("kargs", move || host.kargs(&add, &remove)).await,
                )
            }
            Action::Reboot => (
                HostOp::Reboot,
                blocking("reboot", move || host.reboot()).await,
            ),
            Action::SoftReboot => (
                HostOp::Reboot,
                blocking("soft reboot", move || host.soft_reboot()).await,
            ),
            Action::Rollback(to) => {
                let to = to.clone();
                (
                    HostOp::Rollback,
                    blocking(&format!("roll back to {to}"), move || host.rollback(&to)).await,
                )
            }
            Action::ApplyLive { target, actions } => {
                self.live(
                    target,
                    actions,
                    ("live apply", "applied the staged configuration live"),
                    |h| h.apply_live(),
                )
                .await
            }
            Action::SyncLive { target, actions } => {
                self.live(
                    target,
                    actions,
                    (
                        "undo live applies",
                        "made the live-applied paths the next boot's image's",
                    ),
                    |h| h.sync_live(),
                )
                .await
            }
            _ => return Ok(()),
        };
        match result {
            Ok(()) => {
                self.failures.remove(op_key(op));
                Ok(())
            }
            Err(e) => {
                use machineos_diagnostics::Classify as _;
                Err(HostFailure {
                    op,
                    message: e.to_string(),
                    transient: e.is_transient(),
                    attempts: 0,
                })
            }
        }
    }

    /// A live host step for `target` — the apply, or the undo (`step`; `what`: its name in
    /// errors, and what the log says it did) — then the policy's `systemctl` operations in
    /// order, on one blocking thread; its success is remembered for the next pass
    /// ([`Observed::applied`]).
    async fn live(
        &mut self,
        target: &crate::machine::Target,
        actions: &[machineos_host::Systemctl],
        (op, done): (&'static str, &'static str),
        step: impl FnOnce(&dyn Host) -> Result<machineos_host::live::Applied, HostError>
        + Send
        + 'static,
    ) -> (HostOp, Result<(), AgentError>) {
        let (host, node, ops) = (self.host.clone(), self.opts.node.clone(), actions.to_vec());
        let result = blocking(op, move || {
            let applied = step(host.as_ref())?;
            tracing::info!(node = %node, written = ?applied.written, removed = ?applied.removed, "{done}");
            for op in &ops {
                host.systemctl(op)?;
            }
            Ok(())
        })
        .await;
        if result.is_ok() {
            self.applied = Some(target.clone());
        }
        (HostOp::Live, result)
    }

    /// The pull credentials onto the host: for a Secret the node's annotation names (a
    /// MachineImage's `pullSecret`), its copy in the controller's
    /// [`NODE_PULL_SECRETS`](machineos_rollout::vocab::NODE_PULL_SECRETS) — the agent may
    /// read no other Secret but its default pull Secret (`--pull-secret`), read as it is.
    async fn write_pull_secret(&mut self, observed: &Observed) -> Result<(), AgentError> {
        let named = observed
            .annotations
            .get(PULL_SECRET)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.rsplit_once('/')
                    .map_or(v.as_str(), |(_, name)| name)
                    .to_owned()
            });
        let data = if let Some(name) = named {
            let ns = self.opts.namespace.clone();
            let copy = machineos_rollout::vocab::NODE_PULL_SECRETS;
            let object = format!("Secret/{ns}/{copy}");
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
            let secret = api
                .get_opt(copy)
                .await
                .map_err(api_err("get", object.clone()))?;
            secret
                .and_then(|s| s.data)
                .and_then(|mut d| d.remove(&name))
                .map(|b| b.0)
                .ok_or_else(|| AgentError::Missing {
                    object: object.clone(),
                    message: format!(
                        "no key {name:?}: the controller has not copied pull Secret {name:?} \
                         (yet; does it exist, with registry credentials?)"
                    ),
                })?
        } else {
            let Some((ns, name)) = self.opts.pull_secret.clone() else {
                return Ok(());
            };
            let object = format!("Secret/{ns}/{name}");
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
            let secret = api
                .get_opt(&name)
                .await
                .map_err(api_err("get", object.clone()))?
                .ok_or_else(|| AgentError::Missing {
                    object: object.clone(),
                    message: "the pull secret does not exist".into(),
                })?;
            machineos_kube::secret::registry_auth(&secret).map_err(|why| AgentError::Missing {
                object: object.clone(),
                message: why,
            })?
        };
        let host = self.host.clone();
        let path = blocking("write pull secret", move || host.write_pull_secret(&data)).await?;
        self.auth = Some(path);
        Ok(())
    }

    /// One drain round.
    async fn drain_round(&self) -> DrainOutcome {
        let node = &self.opts.node;
        let pods = match self.pods_to_drain().await {
            Ok(p) => p,
            Err(e) => {
                return DrainOutcome::Error {
                    message: e.to_string(),
                };
            }
        };
        let mut blocked = Vec::new();
        for pod in &pods {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let evicted = tokio::time::timeout(
                self.opts.eviction_timeout,
                api.evict(&name, &EvictParams::default()),
            )
            .await;
            let Ok(evicted) = evicted else {
                blocked.push(BlockedPod {
                    pod: format!("{ns}/{name}"),
                    message: format!(
                        "the eviction got no answer within {:?} (a client retrying 429 refusals?)",
                        self.opts.eviction_timeout
                    ),
                });
                continue;
            };
            match evicted {
                Ok(_) => tracing::info!(%node, pod = %format!("{ns}/{name}"), "evicted"),
                Err(e) if code(&e) == Some(404) => {}
                Err(kube::Error::Api(s)) if s.code == 429 || s.code == 500 => {
                    let cause = s
                        .details
                        .as_ref()
                        .and_then(|d| d.causes.first())
                        .map(|c| c.message.clone())
                        .filter(|m| !m.is_empty());
                    blocked.push(BlockedPod {
                        pod: format!("{ns}/{name}"),
                        message: match cause {
                            Some(c) => format!("{} ({c})", s.message),
                            None => s.message.clone(),
                        },
                    });
                }
                Err(e) => {
                    return DrainOutcome::Error {
                        message: format!("evicting pod {ns}/{name}: {e}"),
                    };
                }
            }
        }
        if !blocked.is_empty() {
            return DrainOutcome::Blocked { pods: blocked };
        }
        match self.pods_to_drain().await {
            Ok(left) if left.is_empty() => DrainOutcome::Drained,
            Ok(left) => DrainOutcome::Waiting {
                pods: left
                    .iter()
                    .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
                    .collect(),
            },
            Err(e) => DrainOutcome::Error {
                message: e.to_string(),
            },
        }
    }

    /// The node's pods a drain evicts or waits for.
    async fn pods_to_drain(&self) -> Result<Vec<Pod>, AgentError> {
        let node = &self.opts.node;
        let api: Api<Pod> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let list = api
            .list(&lp)
            .await
            .map_err(api_err("list", format!("Pods on Node/{node}")))?;
        Ok(list.items.into_iter().filter(drainable).collect())
    }

    async fn write_mcn(
        &self,
        conditions: &[McnCondition],
        versions: Option<&Action>,
    ) -> Result<(), AgentError> {
        let name = &self.opts.node;
        let api: Api<MachineConfigNode> = Api::all(self.client.clone());
        let object = format!("MachineConfigNode/{name}");
        for _ in 0..3 {
            let Some(mcn) = api
                .get_opt(name)
                .await
                .map_err(api_err("get", object.clone()))?
            else {
                tracing::debug!(%name, "no MachineConfigNode yet; status not written");
                return Ok(());
            };
            let old = mcn.status.clone().unwrap_or_default();
            let mut conds = old.conditions.clone();
            let now = Time(k8s_openapi::jiff::Timestamp::now());
            for c in conditions {
                let new = Condition {
                    type_: c.type_.to_owned(),
                    status: c.status.to_owned(),
                    reason: c.reason.to_owned(),
                    message: truncate(&c.message, 32_768),
                    last_transition_time: now.clone(),
                    observed_generation: mcn.metadata.generation,
                };
                upsert_condition(&mut conds, new);
            }
            let mut status = json!({ "conditions": conds });
            if let Some(Action::SetMcnVersions {
                current_config,
                desired_config,
                current_image,
                desired_image,
            }) = versions
            {
                let mut cv = json!({ "desired": desired_config });
                if let Some(c) = current_config {
                    cv["current"] = json!(c);
                }
                status["configVersion"] = cv;
                let mut ci = serde_json::Map::new();
                if let Some(c) = current_image {
                    ci.insert("currentImage".into(), json!(c));
                }
                if let Some(d) = desired_image {
                    ci.insert("desiredImage".into(), json!(d));
                }
                if !ci.is_empty() {
                    status["configImage"] = Value::Object(ci);
                }
            }
            let patch = json!({
                "metadata": {"resourceVersion": mcn.metadata.resource_version},
                "status": status,
            });
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if code(&e) == Some(409) => continue,
                Err(e) => return Err(api_err("patch status", object)(e).into()),
            }
        }
        Ok(())
    }

    async fn event(&self, node: &Node, warning: bool, reason: &'static str, note: &str) {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.opts.node.clone()),
            uid: node.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        self.events.publish(&reference, warning, reason, note).await;
    }
}

/// Whether a drain evicts (or waits for) this pod: not a mirror pod, not DaemonSet-owned.
pub fn drainable(pod: &Pod) -> bool {
    let mirror = pod.annotations().contains_key(MIRROR);
    let daemonset = pod
        .owner_references()
        .iter()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    !mirror && !daemonset
}

/// A MachineConfig's (its JSON) kargs and SSH keys.
pub fn rendered_of(mc: &Value) -> Rendered {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let kernel_arguments = strings(mc.pointer("/spec/kernelArguments"));
    let mut ssh_keys = BTreeMap::new();
    for u in mc
        .pointer("/spec/config/passwd/users")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(keys)) = (
            u.get("name").and_then(Value::as_str),
            u.get("sshAuthorizedKeys"),
        ) else {
            continue;
        };
        ssh_keys.insert(name.to_owned(), strings(Some(keys)));
    }
    Rendered {
        kernel_arguments,
        ssh_keys,
    }
}

/// Run a host call on a blocking thread.
async fn blocking<T: Send + 'static>(
    op: &str,
    f: impl FnOnce() -> Result<T, HostError> + Send + 'static,
) -> Result<T, AgentError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(error)) => Err(AgentError::Host {
            op: op.to_owned(),
            error,
        }),
        Err(e) => Err(AgentError::Task {
            op: op.to_owned(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(meta: Value) -> Pod {
        serde_json::from_value(json!({ "metadata": meta })).unwrap_or_default()
    }

    #[test]
    fn drains_skip_daemonset_and_mirror_pods() {
        assert!(drainable(&pod(json!({"name": "web-0"}))));
        assert!(!drainable(&pod(
            json!({"name": "ds-0", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}
            ]})
        )));
        assert!(drainable(&pod(json!({"name": "rs-0", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}
        ]}))));
        assert!(!drainable(&pod(
            json!({"name": "static-0", "annotations": {MIRROR: "abc"}})
        )));
    }

    #[test]
    fn the_rendered_config_gives_kargs_and_ssh_keys() {
        let mc = json!({"spec": {
            "kernelArguments": ["nosmt", "a=b"],
            "config": {"passwd": {"users": [
                {"name": "core", "sshAuthorizedKeys": ["k1", "k2"]},
                {"name": "nokeys"},
            ]}},
        }});
        let r = rendered_of(&mc);
        assert_eq!(r.kernel_arguments, vec!["nosmt", "a=b"]);
        assert_eq!(
            r.ssh_keys,
            BTreeMap::from([("core".to_owned(), vec!["k1".to_owned(), "k2".to_owned()])])
        );
        assert_eq!(rendered_of(&json!({})), Rendered::default());
    }

    #[test]
    fn rust_architectures_map_to_kubernetes_arch_names() {
        let cases = [
            ("x86_64", true, Some("amd64")),
            ("aarch64", true, Some("arm64")),
            ("powerpc64", true, Some("ppc64le")),
            ("powerpc64", false, None),
            ("s390x", false, Some("s390x")),
            ("riscv64", true, None),
        ];
        for (arch, le, want) in cases {
            assert_eq!(goarch(arch, le), want, "{arch} little-endian={le}");
        }
    }
}
