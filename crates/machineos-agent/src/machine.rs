//! The agent's decision: what one node must do next, as a pure function of what was observed
//! (its annotations, `spec.unschedulable`, the host's deployments and boot id, the rendered
//! MachineConfig, and the outcome of the previous pass's drain or host call) and the time.
//! No I/O: [`decide`] returns [`Action`]s as data; `crate::agent` carries them out.
//!
//! Contract (issue 16's protocol, `/tmp/notes/protocol16.md`):
//! * **Every progress fact is persisted** in the [`PROGRESS`] annotation ([`Progress`]: the
//!   target, when the update started, the [`Step`], the drain window's start, attempts,
//!   failures, the boot id before the reboot, when the reboot was requested). [`Observed`]
//!   carries nothing from memory but the previous pass's drain outcome and host failure, so
//!   an agent rebuilt from the annotations resumes where the last one stopped.
//! * **Timing:** the update's start (the pass that cordons) is kept in the progress through
//!   every step; the pass that finishes it writes [`LAST_UPDATE`] (target, start, finish)
//!   with `currentImage`, in the same patch — or removes it when the start is unknown (the
//!   host ran the target already, or the progress predates the field), so the record never
//!   describes an update other than the last one. Nothing decides on it.
//! * **Safety rules:** staging never cordons and never changes `state`; a node is cordoned
//!   before it is drained and re-cordoned if someone uncordons it mid-drain; the drain
//!   window has a timeout, and a failed or timed-out drain never proceeds (the node stays
//!   cordoned, MCN `Drained=False` reason `DrainFailed`, a Warning Event, a retry after a
//!   backoff); past the drain a restarted agent never drains again; a reboot is requested
//!   once per target (again only after `reboot_timeout` with the boot id unchanged); a
//!   changed boot id means the reboot happened, and the booted image is then checked: the
//!   wrong image is `Degraded` with both digests in the reason and the node stays cordoned
//!   (a Degraded move that never cordoned — one applied live — leaves it schedulable);
//!   the agent uncordons only a node carrying [`CORDONED_BY_AGENT`].
//! * **Which image the host runs.** An image the host reports (booted, staged, pulled) *is*
//!   a target image when the pullspecs are equal, or when the target is a multi-architecture
//!   index that [`IMAGE_MANIFESTS`] lists and the report is its manifest for the node's
//!   architecture ([`Observed::arch`]) — bootc and rpm-ostree report the manifest they
//!   booted, not the index — or when the host says it deployed the report from the target's
//!   reference (`HostStatus::references`: also an index no MachineOSImage lists, as a
//!   MachineImage may name). Another architecture's manifest is not the target. What the
//!   agent writes (`currentImage`, the progress, the MachineConfigNode) stays the target's
//!   pullspec, so `currentImage` equals `desiredImage` once done.
//! * **Atomic node writes:** every [`Action::Annotate`], [`Action::Cordon`] and
//!   [`Action::Uncordon`] of one pass is meant to be applied as one node patch, before the
//!   pass's other actions (so the cordon and its `cordoned-by-agent` mark, or the reboot
//!   record and the reboot, never come apart).
//! * **What a move costs** is the rollout's plan for exactly this target
//!   ([`NODE_DISRUPTION`], [`Observed::class`]; none, unreadable or for another move: a
//!   reboot). Below `Drain` nothing is cordoned; `Drain` is cordoned and drained first; both
//!   stage the image, then apply it to the running system and run the plan's `systemctl`
//!   actions in one step ([`Step::Applying`], [`Action::ApplyLive`]: redone whole after a
//!   restart, idempotent) and finish with [`REBOOT_PENDING`] naming the image, which boots
//!   at the next reboot. `SoftReboot` and `Reboot` reboot (a soft reboot is done when the
//!   soft reboot count rose or the target booted; its boot id stays).
//! * **A refused live apply** (the image changes more than configuration, an action fails
//!   for good) never reboots on the agent's own say: the rollout counted no slot. The
//!   progress says `rebootRequired` and the node waits in service until the rollout hands a
//!   plan that takes a slot; then it drains and reboots.
//! * **What a live apply leaves**: before any reboot into another image, and when the target
//!   goes back to the booted image, the live-applied paths are made that image's first
//!   ([`Action::SyncLive`]); an image applied live whose staged deployment vanished is
//!   staged again.
//! * **The health gate** ([`HEALTH_GATE`], handed by the rollout with the desired
//!   annotations; `machineos_rollout::health`): a move that booted the target does not
//!   finish at the boot. It waits at [`Step::Verifying`] — cordoned still, `currentImage`
//!   still the image it ran before — until every check has held for the soak (then it
//!   finishes as any update, `NodeHealthy=True`), or until the deadline with a check failing.
//!   Then, if the host's rollback deployment is the image it ran before, [`Step::RollingBack`]:
//!   the step is written first, then [`Action::Rollback`] — only while that deployment does
//!   not boot next already (bootc and rpm-ostree toggle: a second rollback would undo the
//!   first) — and a reboot, requested once (again after `reboot_timeout`). A new boot id
//!   with that image booted is [`Step::RolledBack`]: uncordoned, `state` Done, the
//!   [`ROLLED_BACK`] record (image, config, check, evidence), Event `NodeRolledBack`,
//!   `NodeHealthy=False`; nothing more happens for that target, so a node is rolled back at
//!   most once per target, and never after it passed. No rollback deployment, or another
//!   image in it, or another image booted: Degraded, naming them. Moves applied live are not
//!   gated (they have no deployment to roll back to).
//! * A pass whose actions change nothing returns no actions (idle is a fixed point).

use std::collections::BTreeMap;
use std::time::Duration;

use machineos_diagnostics::Backoff;
use machineos_disruption::{Class, NodePlan};
use machineos_host::HostStatus;
use machineos_host::Systemctl;
use machineos_rollout::health::{self, Check, Gate, NodeHealth, RolledBack, Verdict};
use machineos_rollout::observed::{ImageManifests, LastUpdate};
use machineos_rollout::vocab::{
    CORDONED_BY_AGENT, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, HEALTH_GATE,
    IMAGE_MANIFESTS, LAST_UPDATE, NODE_DISRUPTION, NodeState, PROGRESS, REASON, REBOOT_PENDING,
    ROLLED_BACK, STAGE_IMAGE, STAGED_IMAGE, STATE, mcn,
};
use serde::{Deserialize, Serialize};

/// A point in time, milliseconds since the Unix epoch.
pub type Millis = i64;

/// What the node is to run: the rendered config and the image (by digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// `desiredConfig`.
    pub config: String,
    /// `desiredImage`.
    pub image: String,
}

/// Where an update is; persisted (with the target) in the [`PROGRESS`] annotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum Step {
    /// Cordoned; evicting pods. `drain_started` opens the current drain window (closed by
    /// the drain timeout); `attempts` counts eviction rounds in it; `failures` counts
    /// timed-out windows; `retry_at` is when the next window opens after a failure.
    #[serde(rename_all = "camelCase")]
    Draining {
        /// Start of the current drain window.
        drain_started: Millis,
        /// Eviction rounds in this window.
        attempts: u32,
        /// Drain windows that failed (timed out) for this target.
        failures: u32,
        /// After a failure: when the next window opens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_at: Option<Millis>,
    },
    /// Drained (or, for a move applied live, not cordoned at all); writing credentials,
    /// keys and kargs and deploying the image.
    Deploying,
    /// The image is the next boot; its configuration is being applied to the running system
    /// and the policy's actions run (a move below `SoftReboot`). Redone whole after a
    /// restart: the apply is idempotent.
    Applying,
    /// The image is the next boot; rebooting. `boot_id_before_reboot` is the boot id the
    /// host had when the reboot was decided: a different one means it happened. A soft
    /// reboot keeps the kernel and its boot id: a higher soft reboot count than
    /// `soft_reboots_before` means it happened.
    #[serde(rename_all = "camelCase")]
    Rebooting {
        /// The boot id before the reboot.
        boot_id_before_reboot: String,
        /// When the reboot was requested (none yet: request it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reboot_requested: Option<Millis>,
        /// A soft reboot (userspace only).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        soft: bool,
        /// The host's soft reboot count before it.
        #[serde(default, skip_serializing_if = "is_zero")]
        soft_reboots_before: u64,
    },
    /// Booted into the target; the health gate the rollout handed ([`HEALTH_GATE`]) is
    /// being checked. `currentImage` still names the image it ran before, so the update is
    /// not done until the gate passes.
    #[serde(rename_all = "camelCase")]
    Verifying {
        /// When the agent first saw the target booted (the gate's deadline counts from it).
        booted: Millis,
        /// When every check last began to hold (`None`: one failed at the last look).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        healthy_since: Option<Millis>,
    },
    /// The target failed the health gate: the rollback deployment `to` (the image the node
    /// ran before) is made the next boot and the node rebooted into it. `boot_id_before_reboot`
    /// tells the reboot happened, as in [`Step::Rebooting`].
    #[serde(rename_all = "camelCase")]
    RollingBack {
        /// The check that failed.
        check: Check,
        /// What the node showed.
        evidence: String,
        /// The image rolled back to.
        to: String,
        /// The boot id before the reboot.
        boot_id_before_reboot: String,
        /// When the rollback's reboot was requested (none yet: request it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reboot_requested: Option<Millis>,
    },
    /// Rolled back from the target: the node runs `to` again and nothing more happens for
    /// this target (never a second rollback, never a retry) until the rollout names another.
    #[serde(rename_all = "camelCase")]
    RolledBack {
        /// The image it runs again.
        to: String,
    },
    /// The update failed for this target; nothing more happens until the target changes.
    Degraded {
        /// Why.
        reason: String,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The [`PROGRESS`] annotation: one update's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// What the update is to.
    pub target: Target,
    /// When the update started (the pass that cordoned); absent in progress written before
    /// the field existed.
    #[serde(
        default,
        rename = "updateStarted",
        skip_serializing_if = "Option::is_none"
    )]
    pub started: Option<Millis>,
    /// The host refused to apply this move live (its image differs in more than
    /// configuration): it reboots, whatever its plan said.
    #[serde(
        default,
        rename = "rebootRequired",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub reboot_required: bool,
    /// Where it is.
    #[serde(flatten)]
    pub step: Step,
}

impl Progress {
    /// The annotation value (JSON).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse the annotation value; `None` for anything unreadable (treated as no progress:
    /// the update restarts at the cordon, which is safe).
    pub fn parse(s: &str) -> Option<Progress> {
        serde_json::from_str(s).ok()
    }
}

/// The rendered MachineConfig's parts the agent applies itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// `spec.kernelArguments`.
    pub kernel_arguments: Vec<String>,
    /// `spec.config.passwd.users[]`: user → `sshAuthorizedKeys`.
    pub ssh_keys: BTreeMap<String, Vec<String>>,
}

/// A pod the drain could not evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedPod {
    /// `namespace/name`.
    pub pod: String,
    /// Why (the API server's refusal, naming the PodDisruptionBudget).
    pub message: String,
}

/// What one drain round (an [`Action::Drain`]) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainOutcome {
    /// No pod left to evict or to wait for.
    Drained,
    /// Evictions accepted; these pods are still terminating.
    Waiting {
        /// `namespace/name` of each.
        pods: Vec<String>,
    },
    /// Evictions refused (429: a PodDisruptionBudget).
    Blocked {
        /// The refused pods.
        pods: Vec<BlockedPod>,
    },
    /// The round failed (the API server).
    Error {
        /// Why.
        message: String,
    },
}

/// A host operation, as reported in a [`HostFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOp {
    /// [`Action::Pull`].
    Pull,
    /// [`Action::WritePullSecret`].
    PullSecret,
    /// [`Action::WriteSshKeys`].
    SshKeys,
    /// [`Action::Kargs`].
    Kargs,
    /// [`Action::Deploy`].
    Deploy,
    /// [`Action::Reboot`] or [`Action::SoftReboot`].
    Reboot,
    /// [`Action::ApplyLive`].
    Live,
    /// [`Action::Rollback`].
    Rollback,
}

/// The previous pass's failed host operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFailure {
    /// Which.
    pub op: HostOp,
    /// The error.
    pub message: String,
    /// Whether a retry may help.
    pub transient: bool,
    /// Consecutive failures so far (1 for the first).
    pub attempts: u32,
}

/// Everything [`decide`] looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The node's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The node's architecture (`kubernetes.io/arch`: `amd64`, `arm64`, …), which picks the
    /// manifest of a multi-architecture image; `None`: unknown (only the pullspec itself is
    /// the image then).
    pub arch: Option<String>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The host's deployments and boot id.
    pub host: HostStatus,
    /// The MachineConfig named by `desiredConfig` (`None`: not read, or missing).
    pub rendered: Option<Rendered>,
    /// The kernel arguments of the MachineConfig named by `currentConfig` (the ones an
    /// update may remove).
    pub current_kargs: Vec<String>,
    /// The previous pass's drain round, if it ran one.
    pub drain: Option<DrainOutcome>,
    /// The last drain round that finished, in any earlier pass (for what a failed drain
    /// says when the pass that notices the timeout ran no round of its own).
    pub last_drain: Option<DrainOutcome>,
    /// The previous pass's failed host operation, if one failed.
    pub failure: Option<HostFailure>,
    /// The previous pass applied this target live, its actions included.
    pub applied: Option<Target>,
    /// What the node shows of its health (its conditions, its DaemonSet pods), read by the
    /// executor for a pass at the health gate ([`Step::Verifying`]); `None`: not read.
    pub health: Option<NodeHealth>,
    /// The rollback record the image's boot guard left on the host, if any.
    pub boot_guard: Option<machineos_boot_guard::Record>,
}

impl Observed {
    fn get(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The update the node is to make now, if any: `desiredImage` set and the desired
    /// config or image differs from the current one.
    pub fn target(&self) -> Option<Target> {
        let image = self.get(DESIRED_IMAGE)?;
        let config = self.get(DESIRED_CONFIG).unwrap_or_default();
        let pending = self.get(CURRENT_IMAGE) != Some(image)
            || self.get(CURRENT_CONFIG).unwrap_or_default() != config;
        pending.then(|| Target {
            config: config.to_owned(),
            image: image.to_owned(),
        })
    }

    /// The parsed [`PROGRESS`] annotation.
    pub fn progress(&self) -> Option<Progress> {
        self.get(PROGRESS).and_then(Progress::parse)
    }

    /// `image`'s manifest for the node's architecture, when `image` is a multi-architecture
    /// index [`IMAGE_MANIFESTS`] lists.
    pub fn arch_manifest(&self, image: &str) -> Option<String> {
        let arch = self.arch.as_deref()?;
        ImageManifests::parse(self.get(IMAGE_MANIFESTS)?)?
            .manifest(image, arch)
            .map(str::to_owned)
    }

    /// Whether an image the host reports (booted, staged or pulled) is `image`: the same
    /// pullspec, a deployment the host made from the reference `image` (bootc and rpm-ostree
    /// keep what they were asked for: [`HostStatus::is`]), or `image`'s manifest for the
    /// node's architecture.
    pub fn is_image(&self, reported: Option<&str>, image: &str) -> bool {
        self.host.is(reported, image)
            || reported.is_some_and(|r| self.arch_manifest(image).as_deref() == Some(r))
    }

    /// When the update to `target` in progress started, if recorded.
    fn started(&self, target: &Target) -> Option<Millis> {
        self.progress()
            .filter(|p| &p.target == target)
            .and_then(|p| p.started)
    }

    /// The plan the rollout handed for the move to `target` ([`NODE_DISRUPTION`]), if it is
    /// for that move.
    pub fn plan(&self, target: &Target) -> Option<NodePlan> {
        self.get(NODE_DISRUPTION)
            .and_then(NodePlan::parse)
            .filter(|p| p.is_for(&target.config, &target.image))
    }

    /// The health gate the rollout handed with the desired annotations ([`HEALTH_GATE`]).
    pub fn gate(&self) -> Option<Gate> {
        self.get(HEALTH_GATE).and_then(Gate::parse)
    }

    /// Whether the node is at the health gate: the executor reads its health for the pass.
    pub fn at_gate(&self) -> bool {
        self.target().is_some_and(|t| {
            self.progress()
                .is_some_and(|p| p.target == t && matches!(p.step, Step::Verifying { .. }))
        })
    }

    /// What the move to `target` costs: its plan's class; a reboot without a plan.
    pub fn class(&self, target: &Target) -> Class {
        self.plan(target).map_or(Class::Reboot, |p| p.class)
    }

    /// Whether the reboot of a [`Step::Rebooting`] to `image` happened: another boot id, or
    /// for a soft one (the kernel, and so the boot id, stays), a higher soft reboot count —
    /// or `image` booted, where systemd does not count soft reboots (before 256).
    fn rebooted(
        &self,
        image: &str,
        boot_id_before: &str,
        soft: bool,
        soft_reboots_before: u64,
    ) -> bool {
        self.host.boot_id != boot_id_before
            || (soft
                && (self.host.soft_reboots > soft_reboots_before
                    || self.is_image(self.host.booted.as_deref(), image)))
    }
}

/// The `systemctl` operations a plan's actions run after a live apply, in order: `Special`
/// is the MCO's CRI-O reload; `None`, `Drain` and `Reboot` run nothing.
pub fn systemctl_ops(actions: &[machineos_disruption::Action]) -> Vec<Systemctl> {
    use machineos_disruption::Action as A;
    actions
        .iter()
        .filter_map(|a| match a {
            A::Reload(u) => Some(Systemctl::Reload(u.clone())),
            A::Restart(u) => Some(Systemctl::Restart(u.clone())),
            A::DaemonReload => Some(Systemctl::DaemonReload),
            A::Special => Some(Systemctl::Reload("crio.service".into())),
            A::None | A::Drain | A::Reboot => None,
        })
        .collect()
}

/// The timings [`decide`] applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// How long one drain window may take before the drain has failed.
    pub drain_timeout: Duration,
    /// Between eviction rounds while pods are blocked or terminating.
    pub drain_retry: Duration,
    /// The longest wait after a failed drain (the wait doubles per failure from
    /// `drain_retry`).
    pub drain_backoff_max: Duration,
    /// How long a requested reboot may take before it is requested again.
    pub reboot_timeout: Duration,
    /// The first wait after a failed host operation (doubling, capped at 16×).
    pub failure_backoff: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            drain_timeout: Duration::from_secs(600),
            drain_retry: Duration::from_secs(5),
            drain_backoff_max: Duration::from_secs(300),
            reboot_timeout: Duration::from_secs(900),
            failure_backoff: Duration::from_secs(10),
        }
    }
}

/// An MCN condition to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McnCondition {
    /// The type ([`mcn`]).
    pub type_: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: &'static str,
    /// Human-readable.
    pub message: String,
}

/// What to do, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set (`Some`) or remove (`None`) node annotations.
    Annotate(BTreeMap<String, Option<String>>),
    /// `spec.unschedulable = true`.
    Cordon,
    /// `spec.unschedulable = false`.
    Uncordon,
    /// One drain round: evict every evictable pod on the node; report a [`DrainOutcome`].
    Drain,
    /// Write the pull secret (the node's `pull-secret` annotation, else the agent's default).
    WritePullSecret,
    /// The update is done: put back what the pull secret write replaced in the host's auth
    /// file (the node's own credentials) and drop the Secret's registries; the next pull
    /// writes it again first. Best effort: a failure is logged, never a Degraded node.
    ReleasePullSecret,
    /// Pull an image without deploying it.
    Pull(String),
    /// Write a user's authorized SSH keys.
    WriteSshKeys {
        /// The user.
        user: String,
        /// The keys.
        keys: Vec<String>,
    },
    /// Make the image the next boot.
    Deploy(String),
    /// Change the next boot's kernel arguments.
    Kargs {
        /// To add.
        add: Vec<String>,
        /// To remove.
        remove: Vec<String>,
    },
    /// Reboot the host.
    Reboot,
    /// Reboot userspace into the staged image, keeping the kernel (else a reboot).
    SoftReboot,
    /// Make the rollback deployment — this image, the one the node ran before — the next
    /// boot ([`machineos_host::Host::rollback`]).
    Rollback(String),
    /// Remove the boot guard's rollback record (after the node annotations that report it
    /// are written), which re-arms the guard.
    ClearBootGuard,
    /// Apply the staged image's configuration to the running system, then run `actions`;
    /// on success the next pass observes [`Observed::applied`] = `target`.
    ApplyLive {
        /// The move.
        target: Target,
        /// The policy's actions, in order.
        actions: Vec<Systemctl>,
    },
    /// Make what live applies wrote the next boot's image's again (before a reboot into
    /// another image, or when a live change is undone); on success the next pass observes
    /// [`Observed::applied`] = `target`.
    SyncLive {
        /// The move it is done for.
        target: Target,
        /// The policy's actions to run after it (a live change undone), in order.
        actions: Vec<Systemctl>,
    },
    /// Set a MachineConfigNode status condition.
    SetMcnCondition(McnCondition),
    /// Set the MachineConfigNode's `status.configVersion` and `status.configImage`.
    SetMcnVersions {
        /// `configVersion.current`.
        current_config: Option<String>,
        /// `configVersion.desired`.
        desired_config: String,
        /// `configImage.currentImage`.
        current_image: Option<String>,
        /// `configImage.desiredImage`.
        desired_image: Option<String>,
    },
    /// Record an Event on the Node.
    Event {
        /// Warning (else Normal).
        warning: bool,
        /// CamelCase reason.
        reason: &'static str,
        /// What happened.
        note: String,
    },
    /// Decide again after this long (or sooner, when the node changes).
    Requeue(Duration),
}

fn ms(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

fn until(at: Millis, now: Millis) -> Duration {
    Duration::from_millis(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
}

fn cond(type_: &'static str, status: bool, reason: &'static str, message: String) -> Action {
    Action::SetMcnCondition(McnCondition {
        type_,
        status: if status { "True" } else { "False" },
        reason,
        message,
    })
}

fn event(warning: bool, reason: &'static str, note: String) -> Action {
    Action::Event {
        warning,
        reason,
        note,
    }
}

/// An annotation patch builder.
#[derive(Default)]
struct Patch(BTreeMap<String, Option<String>>);

impl Patch {
    fn set(mut self, k: &str, v: impl Into<String>) -> Self {
        self.0.insert(k.to_owned(), Some(v.into()));
        self
    }
    fn remove(mut self, k: &str) -> Self {
        self.0.insert(k.to_owned(), None);
        self
    }
    fn progress(self, target: &Target, started: Option<Millis>, step: Step) -> Self {
        self.progress_of(target, started, false, step)
    }
    fn progress_of(
        self,
        target: &Target,
        started: Option<Millis>,
        reboot_required: bool,
        step: Step,
    ) -> Self {
        let p = Progress {
            target: target.clone(),
            started,
            reboot_required,
            step,
        };
        self.set(PROGRESS, p.to_annotation())
    }
    fn action(self) -> Action {
        Action::Annotate(self.0)
    }
}

/// The wait after the `failures`-th failure: `base` doubled per earlier failure, at most `max`.
fn backoff(base: Duration, failures: u32, max: Duration) -> Duration {
    Backoff::doubling(base, max).delay(failures)
}

/// What the node must do next.
pub fn decide(o: &Observed, policy: &Policy, now: Millis) -> Vec<Action> {
    if let Some(out) = boot_guard(o, policy, now) {
        return out;
    }
    match o.target() {
        Some(target) => update(o, policy, now, &target),
        None => idle(o, policy),
    }
}

/// No update to make: finish an abandoned one, keep `state` Done, stage.
fn idle(o: &Observed, policy: &Policy) -> Vec<Action> {
    let mut out = Vec::new();
    let mut patch = Patch::default();
    let mut dirty = false;
    if o.get(PROGRESS).is_some() {
        // The desired annotations went back to what runs (or away): the update is off. If
        // its image is staged for the next boot already, stage the running one again first,
        // or the next reboot — anyone's — would boot the abandoned image.
        let restage_failed = o.failure.as_ref().is_some_and(|f| f.op == HostOp::Deploy);
        // What runs: the booted image, or the one whose configuration was applied live.
        let running = o.get(REBOOT_PENDING).or(o.host.booted.as_deref());
        if let (Some(running), Some(staged)) = (running, o.host.staged.as_deref())
            && !o.is_image(Some(staged), running)
            && !restage_failed
        {
            return restage(staged, running);
        }
        patch = patch.remove(PROGRESS);
        dirty = true;
        let rolled_back = o
            .progress()
            .is_some_and(|p| matches!(p.step, Step::RolledBack { .. }));
        if !rolled_back {
            out.push(event(
                false,
                "UpdateAbandoned",
                "the desired config and image are the current ones again; the update in progress is dropped".into(),
            ));
        }
    }
    if o.get(CORDONED_BY_AGENT).is_some() {
        patch = patch.remove(CORDONED_BY_AGENT);
        dirty = true;
        if o.unschedulable {
            out.push(Action::Uncordon);
            out.push(uncordoned());
        }
    }
    if o.get(STATE) != Some(NodeState::Done.as_str()) {
        patch = patch.set(STATE, NodeState::Done.as_str()).set(REASON, "");
        dirty = true;
    }
    // The image applied live has been booted since: no reboot is pending any more.
    if let Some(pending) = o.get(REBOOT_PENDING)
        && o.is_image(o.host.booted.as_deref(), pending)
    {
        patch = patch.remove(REBOOT_PENDING);
        dirty = true;
    } else if let Some(pending) = o.get(REBOOT_PENDING)
        && !o.is_image(o.host.staged.as_deref(), pending)
        && !o.failure.as_ref().is_some_and(|f| f.op == HostOp::Deploy)
    {
        // Its staged deployment is gone (an unclean shutdown, a clean-up): the running
        // configuration is that image's, so it boots next again.
        return vec![
            event(
                true,
                "Restaged",
                format!(
                    "{pending}, applied live, was no longer staged for the next boot; staging it again"
                ),
            ),
            Action::WritePullSecret,
            Action::Deploy(pending.to_owned()),
        ];
    }
    if dirty {
        out.insert(0, patch.action());
    }
    out.extend(stage(o, policy));
    out
}

/// Staging: pull `stage-image` ahead of the node's turn; never cordons, never touches `state`.
fn stage(o: &Observed, policy: &Policy) -> Vec<Action> {
    let Some(image) = o.get(STAGE_IMAGE) else {
        return Vec::new();
    };
    if o.get(STAGED_IMAGE) == Some(image) || o.get(CURRENT_IMAGE) == Some(image) {
        return Vec::new();
    }
    let h = &o.host;
    let have = h.pulled.iter().any(|p| o.is_image(Some(p), image))
        || o.is_image(h.staged.as_deref(), image)
        || o.is_image(h.booted.as_deref(), image);
    if have {
        return vec![
            Patch::default().set(STAGED_IMAGE, image).action(),
            cond(
                mcn::IMAGE_PULLED,
                true,
                "Staged",
                format!("pulled {image} ahead of the update"),
            ),
            event(
                false,
                "Staged",
                format!("pulled {image} ahead of the update"),
            ),
        ];
    }
    match &o.failure {
        Some(f) if matches!(f.op, HostOp::Pull | HostOp::PullSecret) => {
            let wait = backoff(
                policy.failure_backoff,
                f.attempts,
                policy.failure_backoff.saturating_mul(16),
            );
            vec![
                cond(
                    mcn::IMAGE_PULLED,
                    false,
                    "PullFailed",
                    format!("pulling {image}: {}", f.message),
                ),
                event(
                    true,
                    "PullFailed",
                    format!(
                        "pulling {image} (attempt {}, {}): {}; retrying in {wait:?}",
                        f.attempts,
                        if f.transient {
                            "transient"
                        } else {
                            "permanent"
                        },
                        f.message
                    ),
                ),
                Action::Requeue(wait),
            ]
        }
        _ => vec![Action::WritePullSecret, Action::Pull(image.to_owned())],
    }
}

/// The node is to update to `target`.
fn update(o: &Observed, policy: &Policy, now: Millis, target: &Target) -> Vec<Action> {
    let progress = o.progress().filter(|p| &p.target == target);
    let Some(progress) = progress else {
        return start(o, policy, now, target);
    };
    let mut out = step(o, policy, now, target, &progress);
    if progress.reboot_required {
        // A refused live apply stays refused for this update, whatever step writes next.
        keep_reboot_required(&mut out);
    }
    out
}

/// Mark every progress this pass writes with `reboot_required`.
fn keep_reboot_required(actions: &mut [Action]) {
    for a in actions {
        let Action::Annotate(m) = a else { continue };
        if let Some(Some(v)) = m.get_mut(PROGRESS)
            && let Some(mut p) = Progress::parse(v)
        {
            p.reboot_required = true;
            *v = p.to_annotation();
        }
    }
}

/// The next move of the update in `progress`.
fn step(
    o: &Observed,
    policy: &Policy,
    now: Millis,
    target: &Target,
    progress: &Progress,
) -> Vec<Action> {
    // Whether the node was taken out of service for this move (a drain, a reboot).
    let disruptive = o.class(target).takes_slot();
    if progress.reboot_required && !disruptive {
        // Refused live: the image must be booted, and the rollout has not granted a slot
        // for it yet (it does by handing a plan that takes one). The node stays in service.
        return vec![Action::Requeue(policy.reboot_timeout)];
    }
    match progress.step.clone() {
        Step::Draining {
            drain_started,
            attempts,
            failures,
            retry_at,
        } => drain(
            o,
            policy,
            now,
            target,
            DrainWindow {
                started: drain_started,
                attempts,
                failures,
                retry_at,
            },
        ),
        // Uncordoned after the drain, before the reboot: pods may have landed since, and the
        // reboot would kill them undrained. Cordon again and drain again.
        Step::Deploying | Step::Applying if !o.unschedulable && disruptive => {
            redrain(target, progress.started)
        }
        Step::Rebooting {
            ref boot_id_before_reboot,
            soft,
            soft_reboots_before,
            ..
        } if !o.unschedulable
            && !o.rebooted(
                &target.image,
                boot_id_before_reboot,
                soft,
                soft_reboots_before,
            ) =>
        {
            redrain(target, progress.started)
        }
        Step::Deploying => deploy(o, policy, now, target),
        Step::Applying => applying(o, policy, now, target),
        Step::Rebooting {
            boot_id_before_reboot,
            reboot_requested,
            soft,
            soft_reboots_before,
        } => reboot(
            o,
            policy,
            now,
            target,
            &Reboot {
                boot_id_before: boot_id_before_reboot,
                requested: reboot_requested,
                soft,
                soft_reboots_before,
            },
        ),
        Step::Verifying {
            booted,
            healthy_since,
        } => verifying(o, policy, now, target, booted, healthy_since),
        Step::RollingBack {
            check,
            evidence,
            to,
            boot_id_before_reboot,
            reboot_requested,
        } => rolling_back(
            o,
            policy,
            now,
            target,
            &Rollback {
                check,
                evidence,
                to,
                boot_id_before: boot_id_before_reboot,
                requested: reboot_requested,
            },
        ),
        // Rolled back: nothing more for this target while its record stands (the rollout
        // names another target); the record removed is the quarantine lifted: start afresh.
        Step::RolledBack { .. } if o.get(ROLLED_BACK).is_none() => start(o, policy, now, target),
        Step::RolledBack { .. } => Vec::new(),
        Step::Degraded { reason } => {
            // Stays until the target changes; keep the annotations saying so.
            if o.get(STATE) != Some(NodeState::Degraded.as_str())
                || o.get(REASON) != Some(reason.as_str())
            {
                vec![
                    Patch::default()
                        .set(STATE, NodeState::Degraded.as_str())
                        .set(REASON, reason)
                        .action(),
                ]
            } else {
                Vec::new()
            }
        }
    }
}

/// A new target: already running it → done; else cordon and open the drain window.
fn start(o: &Observed, policy: &Policy, now: Millis, target: &Target) -> Vec<Action> {
    if o.is_image(o.host.booted.as_deref(), &target.image) {
        // Nothing to disrupt: the host already boots the image (a reinstall, or the
        // annotations were lost).
        return finish(o, policy, now, target, Finish::Running);
    }
    if o.rendered.is_none() {
        // Read the rendered config before disrupting anything: its SSH keys and kargs are
        // applied with the image.
        return vec![
            event(
                true,
                "RenderedConfigMissing",
                format!(
                    "MachineConfig {:?} (desiredConfig) cannot be read; waiting before cordoning",
                    target.config
                ),
            ),
            Action::Requeue(policy.failure_backoff),
        ];
    }
    let class = o.class(target);
    if !class.takes_slot() {
        // Applied live: nothing is cordoned or drained, the node stays in service.
        let note = format!(
            "updating to {} ({}); applied to the running system ({}), the node stays schedulable",
            target.image,
            target.config,
            class.name()
        );
        return vec![
            Patch::default()
                .set(STATE, NodeState::Working.as_str())
                .set(REASON, "")
                .progress(target, Some(now), Step::Deploying)
                .action(),
            cond(
                mcn::UPDATE_PREPARED,
                true,
                "UpdatePrepared",
                format!("updating to {} ({})", target.image, target.config),
            ),
            Action::SetMcnVersions {
                current_config: o.get(CURRENT_CONFIG).map(str::to_owned),
                desired_config: target.config.clone(),
                current_image: o.get(CURRENT_IMAGE).map(str::to_owned),
                desired_image: Some(target.image.clone()),
            },
            event(false, "UpdateStarted", note),
        ];
    }
    let mut out = Vec::new();
    let mut patch = Patch::default()
        .set(STATE, NodeState::Working.as_str())
        .set(REASON, "")
        .progress(
            target,
            Some(now),
            Step::Draining {
                drain_started: 0,
                attempts: 0,
                failures: 0,
                retry_at: None,
            },
        );
    // The drain window opens at the first eviction round (below), not here.
    let cordon_note;
    if o.unschedulable {
        cordon_note = if o.get(CORDONED_BY_AGENT).is_some() {
            "the node is still cordoned by the agent"
        } else {
            "the node was already cordoned (not by the agent); it stays cordoned after the update"
        };
    } else {
        patch = patch.set(CORDONED_BY_AGENT, target.image.clone());
        out.push(Action::Cordon);
        cordon_note = "cordoned the node";
    }
    out.insert(0, patch.action());
    out.extend([
        cond(
            mcn::UPDATE_PREPARED,
            true,
            "UpdatePrepared",
            format!("updating to {} ({})", target.image, target.config),
        ),
        cond(mcn::CORDONED, true, "Cordoned", cordon_note.into()),
        Action::SetMcnVersions {
            current_config: o.get(CURRENT_CONFIG).map(str::to_owned),
            desired_config: target.config.clone(),
            current_image: o.get(CURRENT_IMAGE).map(str::to_owned),
            desired_image: Some(target.image.clone()),
        },
        event(
            false,
            "UpdateStarted",
            format!(
                "updating to {} ({}); {cordon_note}",
                target.image, target.config
            ),
        ),
    ]);
    out
}

struct DrainWindow {
    started: Millis,
    attempts: u32,
    failures: u32,
    retry_at: Option<Millis>,
}

fn draining(w: &DrainWindow) -> Step {
    Step::Draining {
        drain_started: w.started,
        attempts: w.attempts,
        failures: w.failures,
        retry_at: w.retry_at,
    }
}

/// Someone uncordoned the node between the drain and the reboot: cordon it again (it is now
/// ours to uncordon) and open a new drain window.
fn redrain(target: &Target, started: Option<Millis>) -> Vec<Action> {
    let fresh = DrainWindow {
        started: 0,
        attempts: 0,
        failures: 0,
        retry_at: None,
    };
    vec![
        Patch::default()
            .set(CORDONED_BY_AGENT, target.image.clone())
            .progress(target, started, draining(&fresh))
            .action(),
        Action::Cordon,
        cond(
            mcn::CORDONED,
            true,
            "Recordoned",
            "the node was uncordoned before its reboot; cordoned again to drain it again".into(),
        ),
        event(
            true,
            "Recordoned",
            "the node was uncordoned after its drain and before its reboot; cordoned it again and draining again".into(),
        ),
    ]
}

fn drain(
    o: &Observed,
    policy: &Policy,
    now: Millis,
    target: &Target,
    w: DrainWindow,
) -> Vec<Action> {
    if !o.unschedulable {
        // Someone uncordoned the node mid-drain: cordon it again (and it is now ours to
        // uncordon).
        return vec![
            Patch::default()
                .set(CORDONED_BY_AGENT, target.image.clone())
                .action(),
            Action::Cordon,
            cond(
                mcn::CORDONED,
                true,
                "Recordoned",
                "the node was uncordoned during the drain; cordoned again".into(),
            ),
            event(
                true,
                "Recordoned",
                "the node was uncordoned while it was being drained; cordoned it again".into(),
            ),
        ];
    }
    if let Some(at) = w.retry_at
        && now < at
    {
        return vec![Action::Requeue(until(at, now))];
    }
    if w.started == 0 || w.retry_at.is_some() {
        // Open a drain window (the first, or the next after a failure) and run a round.
        let next = DrainWindow {
            started: now,
            attempts: 1,
            retry_at: None,
            ..w
        };
        return vec![
            Patch::default()
                .progress(target, o.started(target), draining(&next))
                .action(),
            cond(
                mcn::DRAINED,
                false,
                "Draining",
                format!("drain attempt {} started", next.failures + 1),
            ),
            Action::Drain,
        ];
    }
    let timed_out = now.saturating_sub(w.started) >= ms(policy.drain_timeout);
    let mut out = Vec::new();
    let why = match &o.drain {
        Some(DrainOutcome::Drained) => {
            return vec![
                Patch::default()
                    .progress(target, o.started(target), Step::Deploying)
                    .action(),
                cond(
                    mcn::DRAINED,
                    true,
                    "Drained",
                    "every evictable pod is gone".into(),
                ),
                event(false, "Drained", "every evictable pod is gone".into()),
            ];
        }
        None => match &o.last_drain {
            Some(DrainOutcome::Blocked { pods }) => format!(
                "the last round's evictions were refused: {}",
                pods.iter()
                    .map(|p| format!("{}: {}", p.pod, p.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Some(DrainOutcome::Waiting { pods }) => format!(
                "after the last round, waiting for {} evicted pod(s): {}",
                pods.len(),
                pods.join(", ")
            ),
            Some(DrainOutcome::Error { message }) => format!("the last round failed: {message}"),
            Some(DrainOutcome::Drained) | None => "no drain round has finished yet".to_owned(),
        },
        Some(DrainOutcome::Waiting { pods }) => {
            format!(
                "waiting for {} evicted pod(s): {}",
                pods.len(),
                pods.join(", ")
            )
        }
        Some(DrainOutcome::Blocked { pods }) => {
            for p in pods {
                out.push(event(
                    true,
                    "DrainBlocked",
                    format!("evicting {} was refused: {}", p.pod, p.message),
                ));
            }
            pods.iter()
                .map(|p| format!("{}: {}", p.pod, p.message))
                .collect::<Vec<_>>()
                .join("; ")
        }
        Some(DrainOutcome::Error { message }) => {
            out.push(event(true, "DrainError", message.clone()));
            message.clone()
        }
    };
    if timed_out {
        let failures = w.failures + 1;
        let wait = backoff(policy.drain_retry, failures, policy.drain_backoff_max);
        let next = DrainWindow {
            failures,
            retry_at: Some(now.saturating_add(ms(wait))),
            ..w
        };
        let msg = format!(
            "drain did not finish within {:?} (attempt {failures}): {why}; the node stays cordoned, retrying in {wait:?}",
            policy.drain_timeout
        );
        out.extend([
            Patch::default()
                .progress(target, o.started(target), draining(&next))
                .action(),
            cond(mcn::DRAINED, false, "DrainFailed", msg.clone()),
            event(true, "DrainFailed", msg),
            Action::Requeue(wait),
        ]);
        return out;
    }
    if o.drain.is_none() {
        // A restarted agent in the middle of a window: run a round now.
        out.push(Action::Drain);
        return out;
    }
    let next = DrainWindow {
        attempts: w.attempts + 1,
        ..w
    };
    let left = until(w.started.saturating_add(ms(policy.drain_timeout)), now);
    // The next round runs after the wait (the pass then has no outcome: `drain` is None).
    out.extend([
        Patch::default()
            .progress(target, o.started(target), draining(&next))
            .action(),
        Action::Requeue(policy.drain_retry.min(left)),
    ]);
    out
}

fn host_failed(
    o: &Observed,
    policy: &Policy,
    target: &Target,
    ops: &[HostOp],
) -> Option<Vec<Action>> {
    let f = o.failure.as_ref().filter(|f| ops.contains(&f.op))?;
    if !f.transient {
        return Some(degrade(
            o,
            target,
            format!("{:?} for {} failed: {}", f.op, target.image, f.message),
        ));
    }
    let wait = backoff(
        policy.failure_backoff,
        f.attempts,
        policy.failure_backoff.saturating_mul(16),
    );
    Some(vec![
        event(
            true,
            "HostRetry",
            format!(
                "{:?} for {} failed (attempt {}): {}; retrying in {wait:?}",
                f.op, target.image, f.attempts, f.message
            ),
        ),
        Action::Requeue(wait),
    ])
}

fn deploy(o: &Observed, policy: &Policy, now: Millis, target: &Target) -> Vec<Action> {
    // A failure of the last pass's operations first: a failed kargs change must not be
    // passed over because the image is staged already.
    if let Some(out) = host_failed(
        o,
        policy,
        target,
        &[
            HostOp::PullSecret,
            HostOp::SshKeys,
            HostOp::Deploy,
            HostOp::Kargs,
        ],
    ) {
        return out;
    }
    if o.is_image(o.host.staged.as_deref(), &target.image) {
        let class = o.class(target);
        let refused = o
            .progress()
            .is_some_and(|p| &p.target == target && p.reboot_required);
        if !class.boots() && !refused {
            // Staged for the next boot; now its configuration, live.
            return vec![
                Patch::default()
                    .progress(target, o.started(target), Step::Applying)
                    .action(),
                cond(
                    mcn::APPLIED_OS_IMAGE,
                    true,
                    "Staged",
                    format!("{} is the next boot", target.image),
                ),
                apply_live(o, target),
            ];
        }
        return vec![
            Patch::default()
                .set(STATE, NodeState::Rebooting.as_str())
                .progress(
                    target,
                    o.started(target),
                    Step::Rebooting {
                        boot_id_before_reboot: o.host.boot_id.clone(),
                        reboot_requested: None,
                        soft: class == Class::SoftReboot,
                        soft_reboots_before: o.host.soft_reboots,
                    },
                )
                .action(),
            cond(
                mcn::IMAGE_PULLED,
                true,
                "Pulled",
                format!("pulled {}", target.image),
            ),
            cond(
                mcn::APPLIED_OS_IMAGE,
                true,
                "Deployed",
                format!("{} is the next boot", target.image),
            ),
        ];
    }
    if o.is_image(o.host.booted.as_deref(), &target.image) {
        // Running it already (deploying the booted image stages nothing).
        return finish(o, policy, now, target, Finish::Running);
    }
    let Some(rendered) = &o.rendered else {
        return vec![
            event(
                true,
                "RenderedConfigMissing",
                format!(
                    "MachineConfig {:?} (desiredConfig) cannot be read; waiting",
                    target.config
                ),
            ),
            Action::Requeue(policy.failure_backoff),
        ];
    };
    let mut out = vec![Action::WritePullSecret];
    for (user, keys) in &rendered.ssh_keys {
        out.push(Action::WriteSshKeys {
            user: user.clone(),
            keys: keys.clone(),
        });
    }
    out.push(Action::Deploy(target.image.clone()));
    let want = &rendered.kernel_arguments;
    let have = &o.host.kargs;
    let add: Vec<String> = want.iter().filter(|k| !have.contains(k)).cloned().collect();
    let remove: Vec<String> = o
        .current_kargs
        .iter()
        .filter(|k| !want.contains(k) && have.contains(k))
        .cloned()
        .collect();
    if !add.is_empty() || !remove.is_empty() {
        out.push(Action::Kargs { add, remove });
    }
    out
}

/// A [`Step::Rebooting`]'s record.
struct Reboot {
    boot_id_before: String,
    requested: Option<Millis>,
    soft: bool,
    soft_reboots_before: u64,
}

impl Reboot {
    fn step(&self, requested: Option<Millis>) -> Step {
        Step::Rebooting {
            boot_id_before_reboot: self.boot_id_before.clone(),
            reboot_requested: requested,
            soft: self.soft,
            soft_reboots_before: self.soft_reboots_before,
        }
    }
}

/// The live apply of `target`'s staged image and the plan's actions.
fn apply_live(o: &Observed, target: &Target) -> Action {
    Action::ApplyLive {
        target: target.clone(),
        actions: o
            .plan(target)
            .map(|p| systemctl_ops(&p.actions))
            .unwrap_or_default(),
    }
}

/// The staged image's configuration is being applied live.
fn applying(o: &Observed, policy: &Policy, now: Millis, target: &Target) -> Vec<Action> {
    if o.progress()
        .is_some_and(|p| &p.target == target && p.reboot_required)
    {
        // Refused live, and the move holds a slot now (granted, or a Drain move's own):
        // drained (again: harmless after a Drain move's drain), then rebooted into.
        let mut patch = Patch::default().progress_of(
            target,
            o.started(target),
            true,
            Step::Draining {
                drain_started: 0,
                attempts: 0,
                failures: 0,
                retry_at: None,
            },
        );
        let mut out = Vec::new();
        if !o.unschedulable {
            patch = patch.set(CORDONED_BY_AGENT, target.image.clone());
            out.push(Action::Cordon);
        }
        out.insert(0, patch.action());
        out.push(cond(
            mcn::CORDONED,
            true,
            "Cordoned",
            "cordoned to reboot into the image it could not apply live".into(),
        ));
        return out;
    }
    if o.applied.as_ref() == Some(target) {
        return finish(o, policy, now, target, Finish::Live);
    }
    if !o.is_image(o.host.staged.as_deref(), &target.image) {
        // The staged deployment went (someone deployed another): stage it again.
        return vec![
            Patch::default()
                .progress(target, o.started(target), Step::Deploying)
                .action(),
        ];
    }
    if let Some(f) = o.failure.as_ref().filter(|f| f.op == HostOp::Live) {
        if f.transient {
            return host_failed(o, policy, target, &[HostOp::Live]).unwrap_or_default();
        }
        // Refused (the image changes more than configuration) or failed for good: the
        // image must be booted. Not on the agent's own say: the rollout did not count a slot
        // for this move, so the node waits, in service, until the rollout grants one (a plan
        // that takes a slot); then it drains and reboots as any such move.
        let msg = format!(
            "{} could not be applied to the running system ({}); waiting for a slot to reboot into it",
            target.image, f.message
        );
        let out = vec![
            Patch::default()
                .progress_of(target, o.started(target), true, Step::Applying)
                .action(),
            cond(
                mcn::APPLIED_FILES_AND_OS,
                false,
                "LiveApplyRefused",
                msg.clone(),
            ),
            event(true, "LiveApplyRefused", msg),
        ];
        return out;
    }
    // A restarted agent (or the pass after an API error): apply again, it is idempotent.
    vec![apply_live(o, target)]
}

fn reboot(o: &Observed, policy: &Policy, now: Millis, target: &Target, r: &Reboot) -> Vec<Action> {
    let boot_id_before = r.boot_id_before.as_str();
    let requested = r.requested;
    if o.rebooted(&target.image, boot_id_before, r.soft, r.soft_reboots_before) {
        // Verify what booted: the image, and the rendered config's kernel arguments.
        let missing: Vec<&String> = o
            .rendered
            .as_ref()
            .map(|r| {
                r.kernel_arguments
                    .iter()
                    .filter(|k| !o.host.kargs.contains(k))
                    .collect()
            })
            .unwrap_or_default();
        let booted_target = o.is_image(o.host.booted.as_deref(), &target.image);
        return match o.host.booted.as_deref() {
            Some(b) if booted_target && !missing.is_empty() => degrade(
                o,
                target,
                format!(
                    "booted {b} without the kernel arguments {missing:?} of {}",
                    target.config
                ),
            ),
            Some(_) if booted_target => at_gate(o, policy, now, target),
            booted => degrade(
                o,
                target,
                format!(
                    "booted {} after the reboot, expected {}{}",
                    booted.unwrap_or("<not a container image>"),
                    target.image,
                    match (o.arch_manifest(&target.image), o.arch.as_deref()) {
                        (Some(m), Some(arch)) => format!(" (its {arch} manifest {m})"),
                        _ => String::new(),
                    }
                ),
            ),
        };
    }
    if let Some(mut out) = host_failed(o, policy, target, &[HostOp::Reboot, HostOp::Live]) {
        // The request failed: forget it, so the retry asks again after the backoff rather
        // than after `reboot_timeout`.
        if o.failure.as_ref().is_some_and(|f| f.transient) {
            out.insert(
                0,
                Patch::default()
                    .progress(target, o.started(target), r.step(None))
                    .action(),
            );
        }
        return out;
    }
    let how = if r.soft {
        "soft-rebooting"
    } else {
        "rebooting"
    };
    let note = match requested {
        None => format!("{how} into {}", target.image),
        Some(at) if now.saturating_sub(at) >= ms(policy.reboot_timeout) => format!(
            "no reboot within {:?} of the request (boot id still {boot_id_before}); requesting it again",
            policy.reboot_timeout
        ),
        Some(at) => {
            return vec![Action::Requeue(until(
                at.saturating_add(ms(policy.reboot_timeout)),
                now,
            ))];
        }
    };
    let mut out = vec![
        Patch::default()
            .set(STATE, NodeState::Rebooting.as_str())
            .progress(target, o.started(target), r.step(Some(now)))
            .action(),
        cond(mcn::REBOOTED, false, "Rebooting", note.clone()),
        event(requested.is_some(), "Rebooting", note),
    ];
    if o.get(REBOOT_PENDING).is_some() {
        // A live apply of an earlier image is in the running /etc: made this image's
        // first, or the merge at the reboot would keep it as a local change.
        out.push(Action::SyncLive {
            target: target.clone(),
            actions: Vec::new(),
        });
    }
    out.extend([
        if r.soft {
            Action::SoftReboot
        } else {
            Action::Reboot
        },
        Action::Requeue(policy.reboot_timeout),
    ]);
    out
}

/// The update is done: current annotations, Done, our cordon undone, progress removed.
/// Stage `running` again in place of `staged`, so the next boot — anyone's — keeps it.
fn restage(staged: &str, running: &str) -> Vec<Action> {
    vec![
        event(
            false,
            "Restaged",
            format!("{staged} was staged for the next boot; staging {running} (running) instead"),
        ),
        Action::Deploy(running.to_owned()),
    ]
}

/// The MachineConfigNode condition of an uncordon the agent did.
fn uncordoned() -> Action {
    cond(
        mcn::UNCORDONED,
        true,
        "Uncordoned",
        "the agent uncordoned the node it cordoned".into(),
    )
}

/// How an update ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// The host booted the target already.
    Running,
    /// It rebooted (or soft-rebooted) into the target.
    Rebooted,
    /// The target's configuration is applied live and the target is the next boot.
    Live,
}

fn finish(o: &Observed, policy: &Policy, now: Millis, target: &Target, how: Finish) -> Vec<Action> {
    // Another image staged for the next boot (the target moved back to the booted image
    // mid-update): stage the target instead first, or the next reboot — anyone's — would
    // boot an image nobody wants any more.
    if let Some(staged) = o
        .host
        .staged
        .as_deref()
        .filter(|s| !o.is_image(Some(s), &target.image))
    {
        // A failed restage backs off (transient) or degrades (permanent), never spins.
        if let Some(out) = host_failed(o, policy, target, &[HostOp::Deploy]) {
            return out;
        }
        return restage(staged, &target.image);
    }
    // An image applied live is pending and this update did not boot it: what that apply
    // wrote is made the next boot's image's again first (the move back to the booted image
    // undoes it).
    if how == Finish::Running
        && o.get(REBOOT_PENDING).is_some()
        && o.applied.as_ref() != Some(target)
    {
        if let Some(out) = host_failed(o, policy, target, &[HostOp::Live]) {
            return out;
        }
        return vec![Action::SyncLive {
            target: target.clone(),
            actions: o
                .plan(target)
                .map(|p| systemctl_ops(&p.actions))
                .unwrap_or_default(),
        }];
    }
    let mut patch = Patch::default()
        .set(CURRENT_CONFIG, target.config.clone())
        .set(CURRENT_IMAGE, target.image.clone())
        .set(STATE, NodeState::Done.as_str())
        .set(REASON, "");
    if o.get(PROGRESS).is_some() {
        patch = patch.remove(PROGRESS);
    }
    // An update to another image finished: an earlier rollback no longer describes the
    // node. The re-target at the image it rolled back to (the rollout's, where the node had
    // no `currentImage`) keeps the record: it is what quarantines the image it failed on.
    let re_target = o
        .get(ROLLED_BACK)
        .and_then(RolledBack::parse)
        .is_some_and(|r| o.is_image(Some(&r.to), &target.image));
    if o.get(ROLLED_BACK).is_some() && !re_target {
        patch = patch.remove(ROLLED_BACK);
    }
    let pending = how == Finish::Live && !o.is_image(o.host.booted.as_deref(), &target.image);
    if pending {
        patch = patch.set(REBOOT_PENDING, target.image.clone());
    } else if o.get(REBOOT_PENDING).is_some() {
        patch = patch.remove(REBOOT_PENDING);
    }
    // The timing of this update, if its start is known; else no record (an older one would
    // describe another update).
    match o.started(target) {
        Some(started) => {
            let record = LastUpdate {
                config: target.config.clone(),
                image: target.image.clone(),
                started,
                finished: now,
            };
            patch = patch.set(LAST_UPDATE, record.to_annotation());
        }
        None if o.get(LAST_UPDATE).is_some() => patch = patch.remove(LAST_UPDATE),
        None => {}
    }
    let mut out = Vec::new();
    let ours = o.get(CORDONED_BY_AGENT).is_some();
    if ours {
        patch = patch.remove(CORDONED_BY_AGENT);
    }
    out.push(patch.action());
    if ours && o.unschedulable {
        out.push(Action::Uncordon);
        out.push(uncordoned());
    } else if o.unschedulable {
        out.push(cond(
            mcn::UNCORDONED,
            false,
            "CordonedByOthers",
            "the node was cordoned before the update, not by the agent; it stays cordoned".into(),
        ));
    }
    if how == Finish::Rebooted {
        out.push(cond(
            mcn::REBOOTED,
            true,
            "Rebooted",
            format!("booted {}", target.image),
        ));
    }
    if how == Finish::Live {
        let actions = o
            .plan(target)
            .map(|p| systemctl_ops(&p.actions))
            .unwrap_or_default();
        out.push(cond(
            mcn::APPLIED_FILES_AND_OS,
            true,
            "AppliedLive",
            format!(
                "the configuration of {} is applied to the running system; it boots next",
                target.image
            ),
        ));
        out.push(cond(
            mcn::UPDATE_POST_ACTION_COMPLETE,
            true,
            "ActionsRun",
            if actions.is_empty() {
                "no action needed".into()
            } else {
                format!(
                    "ran systemctl {}",
                    actions
                        .iter()
                        .map(|a| a.args().join(" "))
                        .collect::<Vec<_>>()
                        .join("; systemctl ")
                )
            },
        ));
    }
    let msg = if pending {
        format!(
            "running {} ({}), applied live; {} boots next",
            target.image, target.config, target.image
        )
    } else {
        format!("running {} ({})", target.image, target.config)
    };
    out.extend([
        cond(mcn::UPDATE_COMPLETE, true, "UpdateComplete", msg.clone()),
        cond(mcn::UPDATED, true, "Updated", msg.clone()),
        cond(mcn::NODE_DEGRADED, false, "AsExpected", msg.clone()),
        Action::SetMcnVersions {
            current_config: Some(target.config.clone()),
            desired_config: target.config.clone(),
            current_image: Some(target.image.clone()),
            desired_image: Some(target.image.clone()),
        },
        event(false, "UpdateComplete", msg),
        Action::ReleasePullSecret,
    ]);
    out
}

/// Booted into the target with its kernel arguments: the health gate, if the rollout handed
/// one, else done.
fn at_gate(o: &Observed, policy: &Policy, now: Millis, target: &Target) -> Vec<Action> {
    let Some(gate) = o.gate() else {
        return finish(o, policy, now, target, Finish::Rebooted);
    };
    vec![
        Patch::default()
            .set(STATE, NodeState::Working.as_str())
            .progress(
                target,
                o.started(target),
                Step::Verifying {
                    booted: now,
                    healthy_since: None,
                },
            )
            .action(),
        cond(
            mcn::REBOOTED,
            true,
            "Rebooted",
            format!("booted {}", target.image),
        ),
        cond_unknown(
            mcn::NODE_HEALTHY,
            "Checking",
            format!("booted {}; health gate: {}", target.image, gate.describe()),
        ),
    ]
}

/// An MCN condition with status `Unknown`.
fn cond_unknown(type_: &'static str, reason: &'static str, message: String) -> Action {
    Action::SetMcnCondition(McnCondition {
        type_,
        status: "Unknown",
        reason,
        message,
    })
}

/// At the health gate: done once it passes (held for the soak); rolled back when a check
/// still fails at the deadline and the rollback deployment is the image the node ran before;
/// Degraded when there is none.
fn verifying(
    o: &Observed,
    policy: &Policy,
    now: Millis,
    target: &Target,
    booted: Millis,
    healthy_since: Option<Millis>,
) -> Vec<Action> {
    let Some(gate) = o.gate() else {
        // The pool turned its gate off since.
        return finish(o, policy, now, target, Finish::Rebooted);
    };
    if !o.is_image(o.host.booted.as_deref(), &target.image) {
        return degrade(
            o,
            target,
            format!(
                "booted {} while at the health gate of {}",
                o.host
                    .booted
                    .as_deref()
                    .unwrap_or("<not a container image>"),
                target.image
            ),
        );
    }
    let Some(h) = &o.health else {
        // The executor could not read the node's health this pass.
        return vec![Action::Requeue(policy.failure_backoff)];
    };
    let secs = |m: Millis| m.div_euclid(1000);
    let progress = |healthy_since| {
        Patch::default()
            .progress(
                target,
                o.started(target),
                Step::Verifying {
                    booted,
                    healthy_since,
                },
            )
            .action()
    };
    let recheck = Duration::from_secs(5);
    match health::verdict(&gate, h, secs(booted), healthy_since.map(secs), secs(now)) {
        Verdict::Healthy => {
            let mut out = finish(o, policy, now, target, Finish::Rebooted);
            out.push(cond(
                mcn::NODE_HEALTHY,
                true,
                "Healthy",
                format!("passed the health gate ({})", gate.describe()),
            ));
            out
        }
        Verdict::Soaking { until, .. } => {
            let mut out = Vec::new();
            if healthy_since.is_none() {
                out.push(progress(Some(now)));
                out.push(cond_unknown(
                    mcn::NODE_HEALTHY,
                    "Soaking",
                    format!("every check holds; passes if they hold until {until}"),
                ));
            }
            let left = Duration::from_secs(u64::try_from(until - secs(now)).unwrap_or(0));
            out.push(Action::Requeue(left.clamp(Duration::from_secs(1), recheck)));
            out
        }
        Verdict::Waiting { failing, deadline } => {
            let mut out = Vec::new();
            if healthy_since.is_some() {
                out.push(progress(None));
            }
            let note = format!(
                "waiting for {} ({}); rolled back if it still fails at {deadline}",
                failing.check, failing.evidence
            );
            // Said when the checks stop holding; the first failing check is said when the
            // node reaches the gate.
            if healthy_since.is_some() {
                out.push(cond_unknown(mcn::NODE_HEALTHY, "Checking", note));
            }
            let left = Duration::from_secs(u64::try_from(deadline - secs(now)).unwrap_or(0));
            out.push(Action::Requeue(left.clamp(Duration::from_secs(1), recheck)));
            out
        }
        Verdict::Failed(failing) => {
            let before = o.get(CURRENT_IMAGE);
            let rollback = o
                .host
                .rollback
                .as_deref()
                .filter(|r| before.is_none_or(|b| o.is_image(Some(r), b)));
            let Some(to) = rollback else {
                return degrade(
                    o,
                    target,
                    format!(
                        "failed the health gate: {} ({}); no deployment of {} to roll back to (rollback deployment: {})",
                        failing.check,
                        failing.evidence,
                        before.unwrap_or("the previous image"),
                        o.host.rollback.as_deref().unwrap_or("none")
                    ),
                );
            };
            let note = format!(
                "{} failed the health gate: {} ({}); rolling back to {to}",
                target.image, failing.check, failing.evidence
            );
            vec![
                Patch::default()
                    .progress(
                        target,
                        o.started(target),
                        Step::RollingBack {
                            check: failing.check,
                            evidence: failing.evidence,
                            to: to.to_owned(),
                            boot_id_before_reboot: o.host.boot_id.clone(),
                            reboot_requested: None,
                        },
                    )
                    .action(),
                cond(mcn::NODE_HEALTHY, false, "HealthGateFailed", note.clone()),
                event(true, "HealthGateFailed", note),
            ]
        }
    }
}

/// A [`Step::RollingBack`]'s record.
#[derive(Clone)]
struct Rollback {
    check: Check,
    evidence: String,
    to: String,
    boot_id_before: String,
    requested: Option<Millis>,
}

impl Rollback {
    fn step(&self, requested: Option<Millis>) -> Step {
        Step::RollingBack {
            check: self.check.clone(),
            evidence: self.evidence.clone(),
            to: self.to.clone(),
            boot_id_before_reboot: self.boot_id_before.clone(),
            reboot_requested: requested,
        }
    }
}

/// Rolling back: the rollback deployment made the next boot (once: the tools toggle), the
/// reboot requested once (again after `reboot_timeout`), then what booted verified.
fn rolling_back(
    o: &Observed,
    policy: &Policy,
    now: Millis,
    target: &Target,
    r: &Rollback,
) -> Vec<Action> {
    if o.host.boot_id != r.boot_id_before {
        if o.is_image(o.host.booted.as_deref(), &r.to) {
            return rolled_back(o, policy, now, target, r);
        }
        // A reboot before the rollback's was asked (someone else's): the rollback never
        // took, the target booted again; it goes on from this boot.
        if r.requested.is_none() && o.is_image(o.host.booted.as_deref(), &target.image) {
            let again = Rollback {
                boot_id_before: o.host.boot_id.clone(),
                requested: None,
                ..r.clone()
            };
            return vec![
                Patch::default()
                    .progress(target, o.started(target), again.step(None))
                    .action(),
            ];
        }
        return degrade(
            o,
            target,
            format!(
                "rolled back from {} (it failed {}), but booted {} instead of {}",
                target.image,
                r.check,
                o.host
                    .booted
                    .as_deref()
                    .unwrap_or("<not a container image>"),
                r.to
            ),
        );
    }
    if let Some(mut out) = host_failed(o, policy, target, &[HostOp::Rollback, HostOp::Reboot]) {
        if o.failure.as_ref().is_some_and(|f| f.transient) {
            out.insert(
                0,
                Patch::default()
                    .progress(target, o.started(target), r.step(None))
                    .action(),
            );
        }
        return out;
    }
    if let Some(at) = r.requested
        && now.saturating_sub(at) < ms(policy.reboot_timeout)
    {
        return vec![Action::Requeue(until(
            at.saturating_add(ms(policy.reboot_timeout)),
            now,
        ))];
    }
    let mut patch = Patch::default()
        .set(STATE, NodeState::Rebooting.as_str())
        .progress(target, o.started(target), r.step(Some(now)));
    let mut out = Vec::new();
    if !o.unschedulable {
        // Nothing new lands on a node about to reboot.
        patch = patch.set(CORDONED_BY_AGENT, target.image.clone());
        out.push(Action::Cordon);
    }
    out.insert(0, patch.action());
    let note = format!(
        "rolling back to {} and rebooting ({} failed {})",
        r.to, target.image, r.check
    );
    out.push(cond(mcn::REBOOTED, false, "RollingBack", note.clone()));
    out.push(event(true, "RollingBack", note));
    if !o.host.boots_next(&r.to) {
        out.push(Action::Rollback(r.to.clone()));
    }
    out.extend([Action::Reboot, Action::Requeue(policy.reboot_timeout)]);
    out
}

/// The image's boot guard rolled the node back (its record on the host): the update in
/// progress booted its target and the node now runs another image — the guard's rollback is
/// reported as the agent's own ([`Step::RolledBack`], the [`ROLLED_BACK`] record with
/// [`Check::BootGuard`], so the rollout quarantines the image), then the record is removed,
/// which re-arms the guard. Already reported (the step is `RolledBack`), or no update of
/// the agent's was booting: the record is only removed (said in an Event in the second case).
fn boot_guard(o: &Observed, policy: &Policy, now: Millis) -> Option<Vec<Action>> {
    let record = o.boot_guard.as_ref()?;
    let progress = o.progress();
    if progress
        .as_ref()
        .is_some_and(|p| matches!(p.step, Step::RolledBack { .. }))
    {
        return Some(vec![Action::ClearBootGuard]);
    }
    let booting = progress.as_ref().and_then(|p| {
        let booted_it = matches!(p.step, Step::Rebooting { .. } | Step::Verifying { .. });
        (booted_it && o.target().as_ref() == Some(&p.target)).then(|| p.target.clone())
    });
    if let (Some(target), Some(booted)) = (booting, o.host.booted.as_deref())
        && !o.is_image(Some(booted), &target.image)
    {
        let r = Rollback {
            check: Check::BootGuard,
            evidence: format!(
                "{} (the guard rolled back from deployment {} with {} at {})",
                record.evidence, record.from, record.tool, record.at
            ),
            to: booted.to_owned(),
            boot_id_before: o.host.boot_id.clone(),
            requested: None,
        };
        let mut out = rolled_back(o, policy, now, &target, &r);
        out.push(Action::ClearBootGuard);
        return Some(out);
    }
    Some(vec![
        event(
            true,
            "BootGuardRolledBack",
            format!(
                "the boot guard rolled this node back from deployment {} with {} at {}: {}; \
                 no update of the agent's was booting it",
                record.from, record.tool, record.at, record.evidence
            ),
        ),
        Action::ClearBootGuard,
    ])
}

/// The node booted the image it ran before: uncordoned, the record left for the rollout
/// ([`ROLLED_BACK`]), `currentImage` unchanged (it never named the target).
fn rolled_back(
    o: &Observed,
    _policy: &Policy,
    now: Millis,
    target: &Target,
    r: &Rollback,
) -> Vec<Action> {
    let record = RolledBack {
        image: target.image.clone(),
        config: target.config.clone(),
        to: o.get(CURRENT_IMAGE).unwrap_or(&r.to).to_owned(),
        check: r.check.clone(),
        evidence: r.evidence.clone(),
        at: now,
    };
    let mut patch = Patch::default()
        .set(STATE, NodeState::Done.as_str())
        .set(REASON, "")
        .set(ROLLED_BACK, record.to_annotation())
        .progress(
            target,
            o.started(target),
            Step::RolledBack { to: r.to.clone() },
        );
    let ours = o.get(CORDONED_BY_AGENT).is_some();
    if ours {
        patch = patch.remove(CORDONED_BY_AGENT);
    }
    let mut out = vec![patch.action()];
    if ours && o.unschedulable {
        out.push(Action::Uncordon);
        out.push(uncordoned());
    }
    let msg = format!(
        "rolled back from {} to {}: {}",
        target.image,
        record.to,
        record.describe()
    );
    out.extend([
        cond(mcn::REBOOTED, true, "Rebooted", format!("booted {}", r.to)),
        cond(mcn::NODE_HEALTHY, false, "RolledBack", msg.clone()),
        cond(mcn::UPDATED, false, "RolledBack", msg.clone()),
        Action::SetMcnVersions {
            current_config: o.get(CURRENT_CONFIG).map(str::to_owned),
            desired_config: target.config.clone(),
            current_image: Some(record.to.clone()),
            desired_image: Some(target.image.clone()),
        },
        event(true, "NodeRolledBack", msg),
        Action::ReleasePullSecret,
    ]);
    out
}

/// The update failed for this target: Degraded, the node stays cordoned.
fn degrade(o: &Observed, target: &Target, reason: String) -> Vec<Action> {
    vec![
        Patch::default()
            .set(STATE, NodeState::Degraded.as_str())
            .set(REASON, reason.clone())
            .progress(
                target,
                o.started(target),
                Step::Degraded {
                    reason: reason.clone(),
                },
            )
            .action(),
        cond(mcn::NODE_DEGRADED, true, "UpdateFailed", reason.clone()),
        cond(mcn::UPDATED, false, "UpdateFailed", reason.clone()),
        event(true, "UpdateFailed", reason),
    ]
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
