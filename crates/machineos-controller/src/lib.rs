//! `machineos controller`: the cluster side of machineos on kube-rs — the render controller,
//! the BuildController (the MachineOSBuild lifecycle of [`machineos_build_lifecycle`]) and its
//! builder backends behind one interface ([`builder`]): the in-process native builder
//! ([`native`]), a buildah Job and an OpenShift Build ([`runsteps`]) — with leader election,
//! metrics and health endpoints.
//!
//! Contract (filled in as the modules land):
//! * The decisions are [`machineos_build_lifecycle::decide()`]'s; this crate observes the API
//!   server and the registry into its `Observed` and carries its actions out, nothing more.

pub mod app;
pub mod arches;
pub mod builder;
pub mod controller;
pub mod execute;
pub mod health;
pub mod kinds;
pub mod leader;
pub mod metrics;
pub mod native;
pub mod observe;
pub mod registry_ops;
pub mod render;
pub mod rollout;
pub mod runsteps;
