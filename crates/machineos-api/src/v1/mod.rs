//! `machineconfiguration.openshift.io/v1`: the MCO's kinds, field for field as openshift/api
//! declares them (JSON names, optionality, list semantics), so existing manifests and objects
//! read from an OpenShift cluster deserialize unchanged.

mod machineconfig;
mod machineconfignode;
mod machineosbuild;
mod machineosconfig;
mod pool;

pub use machineconfig::{MachineConfig, MachineConfigSpec};
pub use machineconfignode::{
    IrreconcilableChangeDiff, MachineConfigNode, MachineConfigNodeSpec,
    MachineConfigNodeSpecConfigImage, MachineConfigNodeSpecMachineConfigVersion,
    MachineConfigNodeStatus, MachineConfigNodeStatusConfigImage,
    MachineConfigNodeStatusInternalReleaseImage, MachineConfigNodeStatusInternalReleaseImageRef,
    MachineConfigNodeStatusMachineConfigVersion, MachineConfigNodeStatusPinnedImageSet,
};
pub use machineosbuild::{
    MachineOSBuild, MachineOSBuildSpec, MachineOSBuildStatus, MachineOSBuilderReference,
};
pub use machineosconfig::{
    ContainerfileArch, ImageBuilderType, MachineOSConfig, MachineOSConfigSpec,
    MachineOSConfigStatus, MachineOSContainerfile, MachineOSImageBuilder,
};
pub use pool::{
    CertExpiry, MachineConfigPool, MachineConfigPoolCondition, MachineConfigPoolSpec,
    MachineConfigPoolStatus, MachineConfigPoolStatusConfiguration, PoolSynchronizerStatus,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to a cluster-scoped object of a kind implied by the field: just its name.
///
/// openshift/api has one such type per field (`MachineConfigPoolReference`,
/// `MachineConfigReference`, `ImageSecretObjectReference`, …); they share this JSON shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NameReference {
    /// name of the referenced object.
    #[schemars(length(max = 253))]
    pub name: String,
}

impl NameReference {
    /// A reference to `name`.
    pub fn new(name: impl Into<String>) -> Self {
        NameReference { name: name.into() }
    }
}

/// A reference to an object by group, resource, namespace and name (openshift/api's
/// `machineconfiguration/v1.ObjectReference`, not core's).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ObjectReference {
    /// group of the referent, such as `batch` or `""` for the core group.
    #[schemars(length(max = 253))]
    pub group: String,
    /// resource of the referent, such as `jobs` or `configmaps`.
    #[schemars(length(min = 1, max = 63))]
    pub resource: String,
    /// namespace of the referent; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63))]
    pub namespace: String,
    /// name of the referent.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}
