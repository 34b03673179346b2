//! Condition types of MachineConfigPools, MachineOSImages and MachineImages: the MCO's pool
//! conditions (openshift/api `machineconfiguration/v1/types.go`) and machineos's own, each
//! written by exactly one sub-controller (named per constant).

/// Pool / MachineImage: every node runs what it should.
pub const UPDATED: &str = "Updated";
/// Pool / MachineImage: nodes are moving.
pub const UPDATING: &str = "Updating";
/// Pool: a node failed.
pub const NODE_DEGRADED: &str = "NodeDegraded";
/// Pool: any of NodeDegraded, RenderDegraded, ImageBuildDegraded. MachineImage: a node failed.
pub const DEGRADED: &str = "Degraded";
/// Pool: rendering failed (the render controller's).
pub const RENDER_DEGRADED: &str = "RenderDegraded";
/// Pool: the build failed (the BuildController's).
pub const IMAGE_BUILD_DEGRADED: &str = "ImageBuildDegraded";
/// MachineImage: another MachineImage matches some of its nodes.
pub const CONFLICT: &str = "Conflict";
/// MachineOSImage: nodes are moving to it.
pub const ROLLING_OUT: &str = "RollingOut";
/// MachineOSImage: every node of its pool runs it.
pub const ROLLED_OUT: &str = "RolledOut";
/// MachineOSImage: a node failed to move to it.
pub const ROLLOUT_FAILED: &str = "RolloutFailed";
/// MachineOSImage: a node rolled back from it after failing the health gate; no pool
/// targets it (the rollout's).
pub const QUARANTINED: &str = "Quarantined";
