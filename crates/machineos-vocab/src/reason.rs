//! Event reasons of the rollout (on pools, MachineOSImages and MachineImages).

/// A node was targeted (the MCO's node controller reason).
pub const SET_DESIRED_CONFIG: &str = "SetDesiredConfig";
/// A failed node stopped a rollout.
pub const ROLLOUT_HALTED: &str = "RolloutHalted";
/// Two MachineImages match one node.
pub const MACHINE_IMAGE_CONFLICT: &str = "MachineImageConflict";
/// A node rolled back from an image, which is quarantined.
pub const IMAGE_QUARANTINED: &str = "ImageQuarantined";
/// An image's quarantine was lifted.
pub const QUARANTINE_LIFTED: &str = "QuarantineLifted";
