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

use crate::schema::{dns1035_label, dns1123_label, dns1123_subdomain, dns1123_subdomain_lowercase};

/// A reference to a cluster-scoped object of a kind implied by the field: just its name, a
/// lowercase RFC 1123 subdomain of at most 253 characters.
///
/// openshift/api has one such type per field; this is the schema most of them share
/// (`MachineConfigPoolReference`, `ImageSecretObjectReference`, MachineConfigNode's
/// `MCOObjectReference`). The references whose schemas differ have
/// their own types: [`MachineConfigReference`], [`MachineOSConfigReference`],
/// [`PinnedImageSetRef`], [`OSImageStreamReference`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NameReference {
    /// name of the referenced object.
    #[schemars(length(max = 253), transform = dns1123_subdomain_lowercase)]
    pub name: String,
}

impl NameReference {
    /// A reference to `name`.
    pub fn new(name: impl Into<String>) -> Self {
        NameReference { name: name.into() }
    }
}

/// A reference to a rendered MachineConfig (openshift/api's `MachineConfigReference`): a
/// lowercase RFC 1123 subdomain of 10 to 253 characters (`rendered-` and a hash).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineConfigReference {
    /// name of the rendered MachineConfig.
    #[schemars(length(min = 10, max = 253), transform = dns1123_subdomain_lowercase)]
    pub name: String,
}

/// A reference to a MachineOSConfig (openshift/api's `MachineOSConfigReference`): a non-empty
/// lowercase RFC 1123 subdomain of at most 253 characters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineOSConfigReference {
    /// name of the MachineOSConfig.
    #[schemars(length(min = 1, max = 253), transform = dns1123_subdomain_lowercase)]
    pub name: String,
}

/// A pool's reference to a PinnedImageSet (openshift/api's `PinnedImageSetRef`): an RFC 1123
/// subdomain checked by pattern, which — unlike the CEL-checked names — allows upper case.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PinnedImageSetRef {
    /// name of the PinnedImageSet.
    #[schemars(
        length(min = 1, max = 253),
        regex(
            pattern = r"^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9]))*$"
        )
    )]
    pub name: String,
}

/// A pool's reference to an OSImageStream (openshift/api's `OSImageStreamReference`): a
/// non-empty RFC 1123 subdomain of at most 253 characters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct OSImageStreamReference {
    /// name of the OSImageStream.
    #[schemars(length(min = 1, max = 253), transform = dns1123_subdomain)]
    pub name: String,
}

/// A reference to an object by group, resource, namespace and name (openshift/api's
/// `machineconfiguration/v1.ObjectReference`, not core's).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ObjectReference {
    /// group of the referent, such as `batch` or `""` for the core group.
    #[schemars(length(max = 253), transform = dns1123_subdomain_lowercase)]
    pub group: String,
    /// resource of the referent, such as `jobs` or `configmaps`.
    #[schemars(length(min = 1, max = 63), transform = dns1035_label)]
    pub resource: String,
    /// namespace of the referent; `None` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 1, max = 63), transform = dns1123_label)]
    pub namespace: Option<String>,
    /// name of the referent.
    #[schemars(length(min = 1, max = 253), transform = dns1123_subdomain_lowercase)]
    pub name: String,
}
