//! The rollout: which nodes move to which desired config and image, and when.
//!
//! Contract:
//! * [`vocab`]: the node annotations and MachineConfigNode conditions the controller and
//!   the agent share (the MCO's, plus machineos's documented additions).
//! * [`decide()`] is a pure function of what was [`observed`] (pools, nodes, MachineImages)
//!   and the time: node annotation patches, statuses and Events. The controller's executor
//!   only applies them. [`plan()`] extends the same rules into the order and batches of a
//!   whole rollout (`machineos rollout plan`), without changing anything.
//! * [`health`]: the health gate after an update (what a node must show, the verdict) and
//!   the rollback record the agent leaves.
//! * No I/O, no clock: time is an argument.

pub mod decide;
pub mod health;
pub mod observed;
pub mod plan;
pub mod selector;
pub mod status;
/// The node-side names shared with the agent (see [`machineos_vocab::node`]).
pub use machineos_vocab::node as vocab;

pub use decide::{Decision, NodePatch, decide};
pub use observed::{
    ImageManifests, ImageTarget, MachineImageObserved, MaxUnavailable, NodeAnnotations,
    NodeObserved, Observed, PoolImage, PoolObserved, Timestamp,
};
pub use plan::{Plan, plan};
pub use selector::Selector;
pub use status::{Status, status};
