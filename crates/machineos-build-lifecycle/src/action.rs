//! What [`crate::decide()`] asks the executor to do, as data, in the order to do it.
//!
//! Each action is one API or registry operation the executor can carry out idempotently
//! (create → AlreadyExists is success; delete → NotFound is success; status writes are
//! whole-object replacements of the fields named). [`Requeue`] is kube-runtime's
//! `Action::requeue` with the why attached: a [`machineos_diagnostics::Retry`] saying whether
//! retrying unchanged can help, and a stable reason usable as a metric label.

use serde::Serialize;

use crate::identity::{BuildInputs, PushTarget};
use crate::observed::{Backend, PoolCondition, RegistryImage, Timestamp};
use crate::phase::{Condition, Phase};

pub use crate::observed::ObjectRef;

/// Event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum EventType {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// A MachineOSBuild status write, already checked by [`crate::phase::transition`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildStatusUpdate {
    /// The build.
    pub build: String,
    /// The phase it was observed in (the executor may use it as a precondition).
    pub from: Phase,
    /// The phase it goes to.
    pub to: Phase,
    /// All five conditions.
    pub conditions: Vec<Condition>,
    /// status.buildStart (kept once set).
    pub build_start: Option<Timestamp>,
    /// status.buildEnd (kept once set).
    pub build_end: Option<Timestamp>,
    /// status.digestedImagePushSpec.
    pub digested_image: Option<String>,
    /// status.builder.imageBuilderType.
    pub builder: Backend,
}

/// Requeue data: kube-runtime's `Action::requeue(after)` with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requeue {
    /// The pool concerned.
    pub pool: String,
    /// Stable CamelCase reason (condition reason and metric label).
    pub reason: &'static str,
    /// Whether retrying unchanged can help; `Permanent` means: wait for a watch event.
    pub retry: machineos_diagnostics::Retry,
    /// Requeue after this many seconds; `None`: only on a watch event.
    pub after_seconds: Option<u64>,
}

/// One thing for the executor to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Action {
    /// Ask the registry whether `pullspec` (`repo:<build>`) exists; the answer goes into
    /// [`crate::PoolObserved::registry`] under `build`.
    CheckRegistry {
        /// The build name (the key of the answer).
        build: String,
        /// `repo:<build>`.
        pullspec: String,
        /// Secret to authenticate with.
        push_secret: String,
    },
    /// Create a MachineOSBuild (spec is immutable, so the name fixes everything).
    CreateBuild {
        /// `<pool>-<hash>`.
        name: String,
        /// spec.machineConfig.name.
        rendered_config: String,
        /// spec.machineOSConfig.name (the pool's name for a legacy opt-in).
        machine_os_config: String,
        /// spec.renderedImagePushSpec: `repo:<name>`.
        rendered_image_push_spec: String,
        /// metadata.labels (the MCO's three).
        labels: Vec<(String, String)>,
        /// metadata.annotations (push secret, builder).
        annotations: Vec<(String, String)>,
        /// The controlling owner: the MachineOSConfig, or the pool for a legacy opt-in.
        owner: ObjectRef,
    },
    /// Start (or adopt, if already running) a build on a backend.
    StartBuild {
        /// The build.
        build: String,
        /// Which backend.
        backend: Backend,
        /// What to build.
        inputs: BuildInputs,
        /// Where to push.
        push: PushTarget,
        /// Push Secret name.
        push_secret: String,
        /// Base image pull Secret name, if any.
        base_image_pull_secret: Option<String>,
    },
    /// Cancel a running build on its backend (it was interrupted).
    CancelBuild {
        /// The build.
        build: String,
    },
    /// Start a build again after a transient failure: cancel it on its backend (which forgets
    /// the failure) and record the retry on the MachineOSBuild
    /// ([`crate::vocab::BUILD_RETRIES_ANNOTATION`] = `retries`,
    /// [`crate::vocab::BUILD_RETRIED_AT_ANNOTATION`] = `at`); the next pass starts it.
    RetryBuild {
        /// The build.
        build: String,
        /// How many times it has now been started again.
        retries: u32,
        /// When.
        at: Timestamp,
    },
    /// Write a MachineOSBuild's status.
    SetBuildStatus(BuildStatusUpdate),
    /// Delete a MachineOSBuild (rebuild, or retention).
    DeleteBuild {
        /// The build.
        build: String,
    },
    /// Remove the rebuild annotation from a MachineOSConfig.
    RemoveRebuildAnnotation {
        /// The MachineOSConfig.
        machine_os_config: String,
    },
    /// Point a MachineOSConfig at its current image: `status.currentImagePullSpec`,
    /// `status.machineOSBuild`, `status.observedGeneration` and the
    /// `current-machine-os-build` annotation.
    UpdateMachineOSConfigStatus {
        /// The MachineOSConfig.
        machine_os_config: String,
        /// The digested image.
        current_image_pull_spec: String,
        /// The build.
        machine_os_build: String,
        /// Its generation.
        observed_generation: i64,
    },
    /// Record a built image.
    CreateMachineOSImage {
        /// Name (the build's).
        name: String,
        /// spec.machineConfigPool.name.
        pool: String,
        /// spec.machineConfig.name.
        rendered_config: String,
        /// spec.machineOSBuild.name.
        build: String,
        /// spec.image and spec.architectures.
        image: RegistryImage,
        /// spec.baseImage.
        base_image: String,
        /// spec.extensionsImage.
        extensions_image: Option<String>,
        /// The image the pool had before (its MachineOSConfig's `currentImagePullSpec`, or
        /// the legacy pool annotation), when another: the annotation
        /// `machineos.io/previous-image`.
        previous_image: Option<String>,
        /// Owner (the MachineOSBuild).
        owner: ObjectRef,
    },
    /// Delete a MachineOSImage.
    DeleteMachineOSImage {
        /// Name.
        name: String,
    },
    /// DELETE a manifest by digest (404/405 tolerated).
    DeleteRegistryImage {
        /// `repo@sha256:…`.
        image: String,
        /// Secret to authenticate with, if known.
        push_secret: Option<String>,
    },
    /// Set one pool condition (only emitted when it differs from what is observed).
    SetPoolCondition {
        /// Pool.
        pool: String,
        /// The condition.
        condition: PoolCondition,
    },
    /// Set one condition of a MachineOSConfig's `status.conditions` (machineos'
    /// [`crate::vocab::REGISTRY_ACCESS`]).
    SetMachineOSConfigCondition {
        /// The MachineOSConfig.
        machine_os_config: String,
        /// The condition.
        condition: PoolCondition,
    },
    /// Set a pool annotation.
    SetPoolAnnotation {
        /// Pool.
        pool: String,
        /// Key.
        key: String,
        /// Value.
        value: String,
    },
    /// Record an Event.
    Event {
        /// About.
        object: ObjectRef,
        /// Normal or Warning.
        type_: EventType,
        /// The MCO's reason.
        reason: String,
        /// Message.
        message: String,
    },
    /// Come back later.
    Requeue(Requeue),
}

impl Action {
    /// Whether the action changes anything (everything but [`Action::Requeue`]).
    pub fn is_mutation(&self) -> bool {
        !matches!(self, Action::Requeue(_))
    }
}
