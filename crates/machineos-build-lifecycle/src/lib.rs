//! The MachineOSBuild lifecycle of machineos' BuildController, as a pure decision function:
//! [`decide()`]`(&Observed, now) -> Vec<Action>`.
//!
//! Contract:
//! * **Pure.** No I/O, no clock, no randomness: the same [`Observed`] and `now` give the same
//!   actions in the same order. The kube-rs executor (a later crate) reads the cluster and the
//!   registry into an [`Observed`], carries the [`Action`]s out in order, and reads again.
//! * **State is data, decisions are functions** (zincati / bottlerocket-update-operator
//!   style): a build's state is a [`Phase`]; its changes go through [`phase::transition`],
//!   which refuses every transition the MCO's API refuses (nothing leaves a terminal phase).
//! * **Idempotent.** Deciding again on the state the actions produced asks for no new build
//!   and no second start ([`apply()`] is the model of what the executor does, used by the tests
//!   and usable as a dry run). Conditions and Events are emitted only when something changes.
//! * **MCO vocabulary.** Labels, annotations, condition types, reasons and Event reasons are
//!   the MCO's ([`vocab`]), from `pkg/controller/build/**` as summarised in
//!   `docs/mco-behaviour.md` §1–§2; where machineos adds something (a `Native`
//!   builder, retention, the MachineOSImage record) the module that does says so.
//! * **Never panics on bad input**: a missing or invalid ConfigMap, Secret or MachineOSConfig
//!   field becomes a pool condition and an Event naming the object and the field
//!   ([`decide()`]'s configuration checks), plus a [`Requeue`] that says not to retry until the
//!   input changes.
//!
//! It depends on no Kubernetes crate on purpose: the decisions are tested in milliseconds
//! without building kube/k8s-openapi, and the executor owns the mapping from API objects
//! (`machineos-api`) to [`Observed`] and from [`Action`]s to API writes.

pub mod action;
pub mod apply;
pub mod config;
pub mod decide;
pub mod identity;
pub mod observed;
pub mod phase;
pub mod retention;
/// The names this crate reads and writes (see [`machineos_vocab::build`]).
pub use machineos_vocab::build as vocab;

pub use action::{Action, BuildStatusUpdate, EventType, ObjectRef, Requeue};
pub use apply::apply;
pub use config::RetentionPolicy;
pub use decide::{decide, decide_unbound};
pub use identity::{BuildInputs, PushTarget, build_name};
pub use observed::{
    Backend, BackendStatus, BaseImageError, BuildObserved, ImageVariant, LegacyOptIn,
    MachineOSConfigObserved, MachineOSImageObserved, Observed, OptIn, Pool, PoolCondition,
    PoolObserved, RegistryImage, RegistryObservation, RenderedConfig, Retries, SecretState,
    Timestamp, UnboundMachineOSConfig,
};
pub use phase::{Condition, Phase, TransitionError};
pub use retention::retention;
