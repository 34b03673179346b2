//! The Kubernetes API of machineos, in the MCO's group `machineconfiguration.openshift.io`, so
//! manifests written for the Machine Config Operator apply unchanged.
//!
//! * [`v1`]: MachineConfig, MachineConfigPool, MachineOSConfig, MachineOSBuild and
//!   MachineConfigNode — field-compatible with openshift/api's `machineconfiguration/v1`.
//! * [`v1alpha1`]: MachineOSImage (a built image) and MachineImage (admin-owned per-node image
//!   assignment) — machineos' own kinds, proposed for the MCO but never shipped there.
//! * [`operator_v1`]: MachineConfiguration (`operator.openshift.io/v1`), the MCO operator's
//!   cluster-wide settings, whose object `cluster` holds the node disruption policies — as
//!   openshift/api's `operator/v1` declares it.
//! * [`image`]: digested image references, parsed rather than carried as strings.
//! * [`crds`] / [`crds_yaml`]: every CustomResourceDefinition, in a deterministic order.
//!
//! All kinds are cluster-scoped, like the MCO's; all but MachineConfiguration are in
//! [`GROUP`].

pub mod image;
pub mod operator_v1;
pub mod v1;
pub mod v1alpha1;

mod crd;
mod schema;
mod serde_util;

pub use crd::{crds, crds_yaml};

/// The API group of every kind here but [`operator_v1::MachineConfiguration`].
pub const GROUP: &str = "machineconfiguration.openshift.io";

/// Label on a MachineConfig naming the pool role it belongs to (`worker`, `master`, …).
pub const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";

/// Annotation the MCO's controllers put on MachineConfigs they generate; a MachineConfig
/// carrying it cannot override the rendered `osImageURL`.
pub const GENERATED_BY_CONTROLLER_VERSION_ANNOTATION: &str =
    "machineconfiguration.openshift.io/generated-by-controller-version";

/// Annotation on a rendered MachineConfig whose `osImageURL` differs from the default.
pub const OS_IMAGE_URL_OVERRIDDEN_ANNOTATION: &str =
    "machineconfiguration.openshift.io/os-image-url-overridden";

/// Annotation on a rendered MachineConfig: the release image version it was rendered for.
pub const RELEASE_IMAGE_VERSION_ANNOTATION: &str =
    "machineconfiguration.openshift.io/release-image-version";

/// The role (and pool) name of worker nodes.
pub const WORKER_ROLE: &str = "worker";

/// The role (and pool) name of control-plane nodes.
pub const MASTER_ROLE: &str = "master";
