//! The node-side vocabulary shared by the rollout controller and the node agent.
//!
//! The MCO's node annotations (MCO `pkg/daemon/constants/constants.go`,
//! `docs/mco-behaviour.md` §1.4) keep their meaning exactly: `desiredConfig` and
//! `desiredImage` are set only on a node the rollout lets update *now*; the agent sets
//! `currentConfig`, `currentImage`, `state` and `reason`. What machineos adds lives under
//! `machineos.io/` and is documented here, one constant each.

/// The MCO's annotation prefix.
const MCO: &str = "machineconfiguration.openshift.io/";

/// Node annotation (agent): the rendered MachineConfig the node runs.
pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
/// Node annotation (controller): the rendered MachineConfig the node is to run now.
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
/// Node annotation (agent): the image, by digest, the node booted.
pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
/// Node annotation (controller): the image, by digest, the node is to boot now.
pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";
/// Node annotation (agent): [`NodeState`].
pub const STATE: &str = "machineconfiguration.openshift.io/state";
/// Node annotation (agent): why the state is Degraded (empty otherwise).
pub const REASON: &str = "machineconfiguration.openshift.io/reason";

/// Node annotation (controller, machineos): pull and stage this image (by digest) now,
/// ahead of the node's turn. Set on every node the rollout targets whose desired
/// annotations do not yet name it; removed once the node runs it. Staging never disrupts.
pub const STAGE_IMAGE: &str = "machineos.io/stage-image";
/// Node annotation (agent, machineos): the image (by digest) the node has pulled and staged.
pub const STAGED_IMAGE: &str = "machineos.io/staged-image";
/// Pool annotation: how many of its nodes may pull the pool's image ahead of their turn at
/// once (`3`, `25%`); absent: all (paced staging).
pub const MAX_STAGING: &str = "machineos.io/max-staging";
/// Node annotation (controller, machineos): `namespace/name` of the Secret the agent pulls
/// with (a MachineImage's `pullSecret`); absent: the agent's default pull secret. The agent
/// does not read that Secret itself: it reads its copy, the key `name` of
/// [`NODE_PULL_SECRETS`].
pub const PULL_SECRET: &str = "machineos.io/pull-secret";
/// Secret (controller, machineos; in the controller's namespace): the registry credentials
/// of every Secret a MachineImage names as `pullSecret`, one key per Secret name, each a
/// `config.json`. The agents may read this Secret and their default pull Secret only
/// (`resourceNames`), never the push Secret or any other.
pub const NODE_PULL_SECRETS: &str = "machineos-node-pull-secrets";
/// Node annotation (controller, machineos): who drives this node's desired image —
/// `MachineConfigPool/<name>` or `MachineImage/<name>`.
pub const DRIVEN_BY: &str = "machineos.io/driven-by";
/// Node annotation (agent, machineos): present when the agent cordoned the node (value: the
/// update it cordoned for); the agent uncordons only nodes carrying it.
pub const CORDONED_BY_AGENT: &str = "machineos.io/cordoned-by-agent";
/// Node annotation (agent, machineos): the agent's progress through one update, JSON
/// (target, step, when the update started, drain start, attempts, boot id before the
/// reboot), so a restarted agent resumes without re-draining or rebooting twice. Removed when
/// the update finishes or is abandoned (a failed one keeps it until the target changes).
pub const PROGRESS: &str = "machineos.io/update-progress";
/// Node annotation (agent, machineos): the last update the agent finished and timed, JSON
/// `{"config", "image", "started", "finished"}` (milliseconds since the Unix epoch: when it
/// began the update, when the node ran the target), written with `currentImage`; removed
/// when an update finishes without a recorded start. `machineos rollout status` estimates
/// the time left from it.
pub const LAST_UPDATE: &str = "machineos.io/last-update";
/// Node annotation (controller, machineos): the per-architecture image manifests of the
/// multi-architecture images the node's `desiredImage` and [`STAGE_IMAGE`] name, JSON
/// `{"<index pullspec>": {"<kubernetes.io/arch>": "<repository>@<manifest digest>"}}`, from
/// their MachineOSImages' `spec.architectures`. bootc and rpm-ostree report the manifest
/// they booted, not the index: the agent takes its architecture's manifest as the index.
/// Absent when neither image is an index (a single-arch image needs no translation).
/// Written in the same patch as the annotations it describes.
pub const IMAGE_MANIFESTS: &str = "machineos.io/image-manifests";

/// Node annotation (controller, machineos): the plan of the move the desired annotations
/// name, JSON `{"config", "image", "class", "actions"}` (`machineos_disruption::NodePlan`):
/// what the node disruption policies say that move costs. Written in the same patch as the
/// desired annotations; absent or for another move: a reboot.
pub const NODE_DISRUPTION: &str = "machineos.io/disruption";
/// Node annotation (agent, machineos): what the node's agent can do beyond the MCO
/// daemon's update, a comma-separated list: [`FEATURE_LIVE_APPLY`]. The rollout hands a
/// move that takes no slot only to an agent that says it applies such moves live (an
/// older agent would drain and reboot for it, outside `maxUnavailable`).
pub const AGENT_FEATURES: &str = "machineos.io/agent-features";
/// [`AGENT_FEATURES`]: moves below `Drain` applied to the running node, `SoftReboot`.
pub const FEATURE_LIVE_APPLY: &str = "live-apply";
/// Node annotation (agent, machineos): the image (by digest) the node runs the
/// configuration of, applied live, and boots at its next reboot (staged); removed once it
/// booted it. `currentImage` names it too: the node is updated, its next boot is due.
pub const REBOOT_PENDING: &str = "machineos.io/reboot-pending";

/// Pool annotation: how long after its reboot an updated node has to pass the health gate
/// (a duration: `90s`, `10m`, `1h`, or seconds); `0` or `off` turns the gate off. Absent:
/// `10m`. See `machineos_rollout::health`.
pub const HEALTH_TIMEOUT: &str = "machineos.io/health-timeout";
/// Pool annotation: the DaemonSets (`namespace/name`, comma-separated) whose pod on an
/// updated node must be Ready for it to pass the health gate. Absent: none.
pub const HEALTH_DAEMONSETS: &str = "machineos.io/health-daemonsets";
/// Pool annotation: node conditions (`Type=Status`, comma-separated) an updated node must
/// report to pass the health gate, beyond `Ready=True` and the kubelet's pressure
/// conditions. Absent: none.
pub const HEALTH_CONDITIONS: &str = "machineos.io/health-conditions";
/// Pool annotation: the canary nodes — a count (`2`: the first two in rollout order) or
/// node names (comma-separated) — that update first and must pass the health gate and the
/// soak before any other node of the pool is targeted at the same image.
pub const CANARY: &str = "machineos.io/canary";
/// Pool annotation: `pool` moves the nodes already running an image that gets quarantined
/// back to the image the pool ran before (its MachineOSImage's previous image), within
/// `maxUnavailable` and through the health gate as any move; `node` (the default): only the
/// nodes that failed roll back, the others stay on it.
pub const ROLLBACK_POLICY: &str = "machineos.io/rollback-policy";
/// Node annotation (controller, machineos): the health gate the agent checks after the move
/// the desired annotations name, JSON (`machineos_rollout::health::Gate`); written with the
/// desired annotations; absent: no gate.
pub const HEALTH_GATE: &str = "machineos.io/health-gate";
/// Node annotation (agent, machineos): the node failed the health gate on an image and was
/// rolled back to the deployment it ran before, JSON (`machineos_rollout::health::RolledBack`:
/// the image, the config, the failed check, the evidence, when). Kept until the node
/// finishes an update to another image, or the image's quarantine is lifted.
pub const ROLLED_BACK: &str = "machineos.io/rolled-back";
/// MachineOSImage annotation (user): lift the image's quarantine (any value). The
/// controller clears the rollback records that caused it and removes the annotation.
pub const LIFT_QUARANTINE: &str = "machineos.io/lift-quarantine";

/// Node label the MCO and kube-scheduler use for zones.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Node label: the CPU architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";

/// The MCO's `state` annotation values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeState {
    /// Running what its desired annotations name (or idle).
    Done,
    /// Applying an update (cordon, drain, pull, deploy).
    Working,
    /// Rebooting into the new image.
    Rebooting,
    /// The update failed; `reason` says why.
    Degraded,
    /// The requested change cannot be applied on this node.
    Unreconcilable,
}

impl NodeState {
    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Done => "Done",
            NodeState::Working => "Working",
            NodeState::Rebooting => "Rebooting",
            NodeState::Degraded => "Degraded",
            NodeState::Unreconcilable => "Unreconcilable",
        }
    }

    /// Parse an annotation value (`None` for anything else, e.g. absent).
    pub fn parse(s: &str) -> Option<NodeState> {
        Some(match s {
            "Done" => NodeState::Done,
            "Working" => NodeState::Working,
            "Rebooting" => NodeState::Rebooting,
            "Degraded" => NodeState::Degraded,
            "Unreconcilable" => NodeState::Unreconcilable,
            _ => return None,
        })
    }
}

/// MachineConfigNode condition types (openshift/api `types_machineconfignode.go`), the ones
/// the agent and the controller set.
pub mod mcn {
    /// The update is prepared (the controller targeted the node).
    pub const UPDATE_PREPARED: &str = "UpdatePrepared";
    /// The update is being executed.
    pub const UPDATE_EXECUTED: &str = "UpdateExecuted";
    /// The node is cordoned.
    pub const CORDONED: &str = "Cordoned";
    /// The node is drained (False with reason `DrainFailed` when a drain failed or timed out).
    pub const DRAINED: &str = "Drained";
    /// The image is pulled (image mode).
    pub const IMAGE_PULLED: &str = "ImagePulledFromRegistry";
    /// The image is deployed for the next boot (image mode).
    pub const APPLIED_OS_IMAGE: &str = "AppliedOSImage";
    /// The configuration files (and, in image mode, the staged image's configuration) are
    /// applied to the running system.
    pub const APPLIED_FILES_AND_OS: &str = "AppliedFilesAndOS";
    /// The policy's post-update actions (reload, restart, daemon-reload) ran.
    pub const UPDATE_POST_ACTION_COMPLETE: &str = "UpdatePostActionComplete";
    /// The node rebooted.
    pub const REBOOTED: &str = "RebootedNode";
    /// The node is uncordoned.
    pub const UNCORDONED: &str = "Uncordoned";
    /// The update completed.
    pub const UPDATE_COMPLETE: &str = "UpdateComplete";
    /// The node runs its desired config and image.
    pub const UPDATED: &str = "Updated";
    /// The node failed.
    pub const NODE_DEGRADED: &str = "NodeDegraded";
    /// machineos: the node passed (True), is being checked by (Unknown) or failed (False)
    /// the health gate after its last update.
    pub const NODE_HEALTHY: &str = "NodeHealthy";
}

/// `machineconfiguration.openshift.io/` + `key`.
pub fn mco_key(key: &str) -> String {
    format!("{MCO}{key}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for s in [
            NodeState::Done,
            NodeState::Working,
            NodeState::Rebooting,
            NodeState::Degraded,
            NodeState::Unreconcilable,
        ] {
            assert_eq!(NodeState::parse(s.as_str()), Some(s));
        }
        assert_eq!(NodeState::parse(""), None);
        assert_eq!(mco_key("state"), STATE);
    }
}
