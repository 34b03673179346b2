//! The rollout: which nodes move to which desired config and image, and when.
//!
//! Contract:
//! * [`vocab`]: the node annotations and MachineConfigNode conditions the controller and
//!   the agent share (the MCO's, plus machineos's documented additions).
//! * The decision is a pure function of what was observed; the controller's executor only
//!   applies the node patches and statuses it returns.

pub mod vocab;
