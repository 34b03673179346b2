//! `machineos controller`: the cluster side of machineos on kube-rs.
//!
//! The map (each module's `//!` says the rest):
//! * [`app`] — the process: the cluster client, `/metrics` `/healthz` `/readyz`
//!   ([`health`], [`metrics`]), leader election ([`leader`]) and the loop;
//! * [`controller`] — the loop: wake-ups, leadership, requeues, per-pool backoff; one
//!   snapshot of the caches (`caches`) per pass, given to the sub-controllers in order;
//! * the sub-controllers, each `observe → decide → execute` with its executor beside it:
//!   `render` (MachineConfigs → rendered MachineConfig), `build` (the MachineOSBuild
//!   lifecycle of [`machineos_build_lifecycle`] and its builder backends behind one
//!   interface, `builder`: in-process native, a buildah Job and OpenShift Builds),
//!   [`rollout`] (nodes onto their images, by [`machineos_rollout`]'s decision) and
//!   `changes` (each MachineOSImage's `status.changes`: its filesystem against the pool's
//!   previous image);
//! * what they share: `observe` (the caches → the lifecycle's `Observed`, pure), `api` (the
//!   API writes and their one error type), [`kinds`] (the resources), [`registry_ops`]
//!   (registry settings, checks, deletes), `pass` (a pass's context and outcome).
//!
//! Contract: the decisions are the pure deciders' ([`machineos_build_lifecycle::decide()`],
//! `render::plan::plan`, [`machineos_rollout::decide()`]); this crate observes the API server
//! and the registry into their inputs and carries their outputs out, nothing more.

pub mod app;
pub mod controller;
pub mod health;
pub mod kinds;
pub mod leader;
pub mod metrics;
pub mod registry_ops;
pub mod rollout;

pub(crate) mod api;
pub(crate) mod arches;
pub(crate) mod build;
pub(crate) mod builder;
pub(crate) mod caches;
pub(crate) mod changes;
pub(crate) mod native;
pub(crate) mod observe;
pub(crate) mod options;
pub(crate) mod pass;
pub(crate) mod render;
pub(crate) mod runsteps;
