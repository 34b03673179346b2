//! The node agent, `machineos agent` (one per node, a DaemonSet): it carries out the update
//! the rollout controller asks of its node through the node's annotations (issue 16's
//! protocol; the keys are `machineos_rollout::vocab`): stage an image ahead of the node's
//! turn, then cordon, drain through the Eviction API, deploy the image, reboot, check what
//! booted, uncordon, and report on the node (annotations, Events) and its
//! MachineConfigNode (status conditions).
//!
//! Layout:
//! * [`machine`]: the pure state machine — [`machine::decide`] from [`machine::Observed`]
//!   to [`machine::Action`]s; every progress fact lives in the node's `update-progress`
//!   annotation, so a restarted agent resumes without re-draining or rebooting twice.
//! * [`agent`]: the executor on kube-rs — [`agent::run`] watches the node, observes,
//!   decides and acts until cancelled; host operations go through
//!   [`machineos_host::Host`] on blocking threads.
//! * [`error`]: [`AgentError`], classified ([`machineos_diagnostics::Classify`]).
//! * [`simulate`]: a simulated machine — the agent on a fake host whose reboots happen in
//!   process (demos and tests only).

pub mod agent;
pub mod error;
pub mod machine;
pub mod simulate;

pub use agent::{AgentOptions, client_config, idle_unsupported, run};
pub use error::AgentError;
