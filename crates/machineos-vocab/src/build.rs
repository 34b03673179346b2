//! The MCO's names, reused verbatim so existing manifests, dashboards and runbooks keep
//! working: labels and annotations (MCO `pkg/controller/build/constants/constants.go`,
//! `pkg/controller/common/constants.go`), MachineOSBuild condition types, reasons and
//! messages (MCO `pkg/apihelpers/machineosbuild.go`), pool condition types (openshift/api
//! `machineconfiguration/v1/types.go`) and Event reasons (MCO `ocl_events.go`); see
//! `docs/mco-behaviour.md` §1.1–§1.3, §1.7, §2.2–§2.8.
//!
//! Names machineos adds are marked as such: the `Native` builder type, the retention
//! annotations and the condition reasons for configuration errors (the MCO has no reason for
//! those; it logs them).

/// The pool label of the first BuildController: the pool opts in to layering.
pub const LAYERING_ENABLED_LABEL: &str = "machineconfiguration.openshift.io/layering-enabled";
/// The legacy ConfigMap that makes a labelled pool an implicit MachineOSConfig.
pub const ON_CLUSTER_BUILD_CONFIG: &str = "on-cluster-build-config";
/// Legacy ConfigMap key: the Secret to pull the base image with.
pub const KEY_BASE_IMAGE_PULL_SECRET: &str = "baseImagePullSecretName";
/// Legacy ConfigMap key: the Secret to push the built image with.
pub const KEY_FINAL_IMAGE_PUSH_SECRET: &str = "finalImagePushSecretName";
/// Legacy ConfigMap key: where to push the built image.
pub const KEY_FINAL_IMAGE_PULLSPEC: &str = "finalImagePullspec";
/// Legacy ConfigMap key: which builder (`openshift-image-builder` | `custom-pod-builder`).
pub const KEY_IMAGE_BUILDER_TYPE: &str = "imageBuilderType";

/// MachineOSConfig annotation: the user asks for a rebuild; removed when honoured.
pub const REBUILD_ANNOTATION: &str = "machineconfiguration.openshift.io/rebuild";
/// MachineOSConfig annotation: the MachineOSBuild currently associated with it.
pub const CURRENT_MACHINE_OS_BUILD_ANNOTATION: &str =
    "machineconfiguration.openshift.io/current-machine-os-build";
/// Legacy pool annotation: the digested pullspec of the newest image for the pool's config.
pub const NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION: &str =
    "machineconfiguration.openshift.io/newestImageEquivalentConfig";

/// MachineOSImage annotation (machineos's): the image the pool had before this one (its
/// MachineOSConfig's `currentImagePullSpec` when the image was recorded), what
/// `status.changes` compares with.
pub const PREVIOUS_IMAGE_ANNOTATION: &str = "machineos.io/previous-image";

/// MachineOSConfig annotation (machineos's): `off` (or `false`, `0`) builds its images
/// without the boot guard (`machineos_boot_guard`); absent or anything else: with it. Read
/// when a build starts.
pub const BOOT_GUARD_ANNOTATION: &str = "machineos.io/boot-guard";

/// Whether a [`BOOT_GUARD_ANNOTATION`] value leaves the guard in.
pub fn boot_guard_on(value: Option<&str>) -> bool {
    !matches!(
        value.map(str::trim).map(str::to_ascii_lowercase).as_deref(),
        Some("off" | "false" | "0")
    )
}

/// MachineOSBuild label: the pool it builds for.
pub const TARGET_POOL_LABEL: &str = "machineconfiguration.openshift.io/target-machine-config-pool";
/// MachineOSBuild label: the rendered MachineConfig it builds.
pub const RENDERED_MACHINE_CONFIG_LABEL: &str =
    "machineconfiguration.openshift.io/rendered-machine-config";
/// MachineOSBuild label: its MachineOSConfig.
pub const MACHINE_OS_CONFIG_LABEL: &str = "machineconfiguration.openshift.io/machine-os-config";
/// MachineOSBuild annotation: the Secret its image was pushed with (to inspect and delete it).
pub const RENDERED_IMAGE_PUSH_SECRET_ANNOTATION: &str =
    "machineconfiguration.openshift.io/rendered-image-push-secret";
/// machineos' MachineOSBuild annotation: the builder backend that runs it.
pub const BUILDER_ANNOTATION: &str = "machineos.io/builder";

/// machineos' MachineOSConfig annotation: how many Succeeded builds retention keeps.
pub const RETAIN_SUCCEEDED_ANNOTATION: &str = "machineos.io/retain-succeeded-builds";
/// machineos' MachineOSConfig annotation: for how many seconds Failed and Interrupted builds
/// are kept after they ended.
pub const RETAIN_FAILED_SECONDS_ANNOTATION: &str = "machineos.io/retain-failed-builds-seconds";
/// machineos' MachineOSBuild annotation: how many times the build was started again after a
/// transient failure (absent: never).
pub const BUILD_RETRIES_ANNOTATION: &str = "machineos.io/build-retries";
/// machineos' MachineOSBuild annotation: when (Unix seconds) it was last started again after
/// a transient failure; a failure its backend reports from before then is the one already
/// retried.
pub const BUILD_RETRIED_AT_ANNOTATION: &str = "machineos.io/build-retried-at";

/// MachineOSBuild condition types, in the order the MCO writes them.
pub const BUILD_CONDITION_TYPES: [&str; 5] =
    ["Prepared", "Building", "Succeeded", "Failed", "Interrupted"];

pub use crate::condition::IMAGE_BUILD_DEGRADED;

/// machineos' MachineOSConfig condition: the registry preflight before a build — the
/// output repository answered with the push Secret and that Secret may push there (a blob
/// upload started and cancelled). `False` with reason [`REASON_REGISTRY_CHECK_FAILED`]
/// names the Secret, the repository and the registry's answer; `True` once a build starts.
pub const REGISTRY_ACCESS: &str = "RegistryAccess";
/// machineos' MachineOSConfig condition: whether the pool `spec.machineConfigPool.name`
/// names exists. `False` (reason [`REASON_POOL_NOT_FOUND`], with a Warning Event) while it
/// does not — nothing is built for the MachineOSConfig; `True` once it does, written only
/// when it was `False` (a MachineOSConfig that never lacked its pool carries none).
pub const POOL_FOUND: &str = "MachineConfigPoolFound";
/// Reason of `MachineConfigPoolFound=False` (and its Event).
pub const REASON_POOL_NOT_FOUND: &str = "MachineConfigPoolNotFound";
/// Reason of `MachineConfigPoolFound=True`.
pub const REASON_POOL_FOUND: &str = "MachineConfigPoolFound";
/// Reason of `RegistryAccess=False` (and of the pool's `ImageBuildDegraded`).
pub const REASON_REGISTRY_CHECK_FAILED: &str = "RegistryCheckFailed";
/// Reason of `RegistryAccess=True`.
pub const REASON_REGISTRY_ACCESS_VERIFIED: &str = "RegistryAccessVerified";
/// Reason of `RegistryAccess=Unknown`: what made it `False` (a missing or unusable push
/// Secret, an invalid push spec) is fixed and the registry is being checked again.
pub const REASON_REGISTRY_CHECKING: &str = "RegistryChecking";
/// Legacy pool condition (and `ImageBuildDegraded` reason): a build is pending.
pub const BUILD_PENDING: &str = "BuildPending";
/// Legacy pool condition (and reason): a build is running.
pub const BUILDING: &str = "Building";
/// Legacy pool condition (and reason): the build succeeded.
pub const BUILD_SUCCESS: &str = "BuildSuccess";
/// Legacy pool condition (and reason): the build failed.
pub const BUILD_FAILED: &str = "BuildFailed";
/// The legacy pool conditions, which the first BuildController kept with exactly one True.
pub const LEGACY_POOL_CONDITIONS: [&str; 4] =
    [BUILD_PENDING, BUILDING, BUILD_SUCCESS, BUILD_FAILED];
/// Pool conditions that mean "degraded for another reason": no new build starts while one is
/// True (MCO `reconciler.go`; `ImageBuildDegraded` itself does not block, so a retry can).
///
/// `NodeDegraded` is not among them, unlike the MCO: a node that failed its update is fixed
/// by a new image (which re-targets it), so refusing to build while a node is degraded would
/// leave the pool stuck for good.
pub const BLOCKING_POOL_CONDITIONS: [&str; 3] = [
    crate::condition::RENDER_DEGRADED,
    "PinnedImageSetsDegraded",
    "PoolSynchronizerDegraded",
];

/// machineos' `ImageBuildDegraded` reason: a ConfigMap, Secret or MachineOSConfig field is
/// missing or invalid.
pub const REASON_INVALID_CONFIGURATION: &str = "InvalidConfiguration";
/// machineos' `ImageBuildDegraded` reason: no base image is named, or the registry says the
/// named one does not exist or refuses the credentials.
pub const REASON_BASE_IMAGE_UNAVAILABLE: &str = "BaseImageUnavailable";
/// machineos' `RegistryAccess` reason: the push registry did not answer the check (a
/// transient failure: unreachable, 5xx, timeout); checked again until it does.
pub const REASON_REGISTRY_UNAVAILABLE: &str = "RegistryUnavailable";
/// machineos' `ImageBuildDegraded` reason: the pool is not layered (any more): nothing opts it
/// in, so no build concerns it — what its build conditions said is over.
pub const REASON_NOT_LAYERED: &str = "NotLayered";
/// machineos' `ImageBuildDegraded` reason: the builder type names a backend this controller
/// does not run yet.
pub const REASON_BUILDER_NOT_SUPPORTED: &str = "BuilderNotSupported";

/// Event reasons (component `machineosbuilder`, MCO `ocl_events.go`).
pub mod event {
    /// A build was started on its backend.
    pub const BUILD_STARTED: &str = "BuildStarted";
    /// A build is prepared and pending.
    pub const BUILD_PREPARING: &str = "BuildPreparing";
    /// A build is running.
    pub const BUILD_BUILDING: &str = "BuildBuilding";
    /// A build succeeded.
    pub const BUILD_COMPLETED: &str = "BuildCompleted";
    /// A build failed.
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// A build was interrupted.
    pub const BUILD_INTERRUPTED: &str = "BuildInterrupted";
    /// A build was deleted.
    pub const BUILD_DELETED: &str = "BuildDeleted";
    /// The configuration could not be reconciled.
    pub const CONFIG_RECONCILE_FAILED: &str = "ConfigReconcileFailed";
    /// The user asked for a rebuild.
    pub const REBUILD_REQUESTED: &str = "RebuildRequested";
    /// The pool's rendered config changed.
    pub const POOL_CONFIG_CHANGED: &str = "PoolConfigChanged";
    /// The pool's image build is degraded.
    pub const BUILD_DEGRADED: &str = "BuildDegraded";
    /// The pool's image build recovered.
    pub const BUILD_RECOVERED: &str = "BuildRecovered";
    /// machineos' own: a build that failed transiently is started again.
    pub const BUILD_RETRYING: &str = "BuildRetrying";
}
