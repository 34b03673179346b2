//! `operator.openshift.io/v1`: the one kind of the MCO operator's group machineos serves.
//!
//! * [`MachineConfiguration`]: the cluster-wide settings of the Machine Config Operator; the
//!   object named `cluster` carries the node disruption policies (`spec.nodeDisruptionPolicy`)
//!   and, in its status, the policies merged over the MCO's defaults.

mod machineconfiguration;

pub use machineconfiguration::*;

/// The API group of [`MachineConfiguration`].
pub const GROUP: &str = "operator.openshift.io";
