//! The one vocabulary of machineos: every label, annotation, condition type and reason that
//! more than one crate writes or reads — the MCO's, reused verbatim so existing manifests,
//! dashboards and runbooks keep working, and machineos's own under `machineos.io/` — and the
//! time the pure deciders reason in.
//!
//! * [`build`] — layering opt-in, MachineOSConfig and MachineOSBuild labels, annotations,
//!   condition types and reasons, the BuildController's Event reasons;
//! * [`node`] — node annotations and labels shared by the rollout and the node agent, the
//!   node state, MachineConfigNode condition types;
//! * [`condition`] — pool, MachineOSImage and MachineImage condition types;
//! * [`reason`] — the rollout's Event reasons.
//!
//! Pure constants and two small value types; no dependency.

pub mod build;
pub mod condition;
pub mod node;
pub mod reason;

/// Seconds since the Unix epoch: the deciders' clock (`metav1.Time` at its precision).
pub type Timestamp = i64;
