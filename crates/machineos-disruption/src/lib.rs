//! What a configuration change costs a node, decided before anything moves.
//!
//! The MCO does not reboot a node for every MachineConfig change: its *node disruption
//! policies* (the `MachineConfiguration` object `cluster`, `spec.nodeDisruptionPolicy`,
//! merged over built-in defaults) say, per file path, per unit and for SSH keys, whether a
//! change needs a reboot, a drain, a service reload or restart, a `daemon-reload`, or
//! nothing. This crate is those rules as data and pure functions:
//!
//! | module | its job |
//! |---|---|
//! | [`policy`] | the policy types as the API writes them, the MCO's defaults, the API server's validation, the operator's merge |
//! | [`changes`] | what changed between two rendered MachineConfigs: files, units, passwd, OS fields |
//! | [`decide`](mod@decide) | the actions those changes need, whether the node drains, and the one [`Class`] a rollout schedules by |
//! | [`nodes`] | a rollout's moves node by node, and the strongest class over them |
//! | [`plan`] | one node's move as the rollout hands it to the agent (`machineos.io/disruption`) |
//! | [`registries`] | whether a registries.conf change needs no drain (the `Special` action) |
//! | [`image`] | what the paths two images differ in need (a kernel: reboot; `/usr`: soft reboot), and a move decided with the images' difference when they differ by more than the configs |
//!
//! No I/O: the controller reads the objects, the CLI reads files.

pub mod changes;
pub mod decide;
pub mod image;
pub mod nodes;
pub mod plan;
pub mod policy;
pub mod registries;

pub use changes::{ConfigChanges, OsChange};
pub use decide::{Class, Outcome, Reason, decide, is_live_path};
pub use image::{
    ImageClass, ImageEvidence, decide_across_images, image_class, is_kargs_path, is_kernel_path,
    raise_by_paths,
};
pub use nodes::{Disruption, ImageBasis, NodeDisruption, NodeMove, for_node_moves, for_nodes};
pub use plan::{NODE_DISRUPTION, NodePlan};
pub use policy::{Action, ClusterPolicies, PolicyConfig, PolicyError};
