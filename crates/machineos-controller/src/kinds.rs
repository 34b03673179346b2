//! The API resources the controller reads and writes, as kube `ApiResource`s, and `Api`
//! handles on them. Every custom kind is handled as JSON ([`DynamicObject`]; see
//! `crate::observe` for why); the resource names come from `machineos-api`'s types, so
//! they cannot drift from the CRDs.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};

/// MachineConfig.
pub fn machine_config() -> ApiResource {
    ApiResource::erase::<machineos_api::v1::MachineConfig>(&())
}
/// MachineConfiguration (`operator.openshift.io/v1`, the object `cluster`: node disruption
/// policies).
pub fn machine_configuration() -> ApiResource {
    ApiResource {
        group: "operator.openshift.io".into(),
        version: "v1".into(),
        api_version: "operator.openshift.io/v1".into(),
        kind: "MachineConfiguration".into(),
        plural: "machineconfigurations".into(),
    }
}
/// MachineConfigPool.
pub fn pool() -> ApiResource {
    ApiResource::erase::<machineos_api::v1::MachineConfigPool>(&())
}
/// MachineOSConfig.
pub fn machine_os_config() -> ApiResource {
    ApiResource::erase::<machineos_api::v1::MachineOSConfig>(&())
}
/// MachineOSBuild.
pub fn build() -> ApiResource {
    ApiResource::erase::<machineos_api::v1::MachineOSBuild>(&())
}
/// MachineOSImage.
pub fn image() -> ApiResource {
    ApiResource::erase::<machineos_api::v1alpha1::MachineOSImage>(&())
}
/// MachineImage.
pub fn machine_image() -> ApiResource {
    ApiResource::erase::<machineos_api::v1alpha1::MachineImage>(&())
}
/// MachineConfigNode.
pub fn machine_config_node() -> ApiResource {
    ApiResource::erase::<machineos_api::v1::MachineConfigNode>(&())
}
/// `batch/v1` Job (the Job builder backend).
pub fn job() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&())
}
/// Pod (the Job's pods: their termination message carries the digest).
pub fn pod() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&())
}
/// ConfigMap.
pub fn config_map() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
}
/// Secret.
pub fn secret() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())
}
/// OpenShift's `build.openshift.io/v1` Build (the OpenShift Build backend; an aggregated
/// API, not a CRD, so no type of ours describes it).
pub fn openshift_build() -> ApiResource {
    ApiResource {
        group: "build.openshift.io".into(),
        version: "v1".into(),
        api_version: "build.openshift.io/v1".into(),
        kind: "Build".into(),
        plural: "builds".into(),
    }
}

/// A cluster-scoped `Api` on `ar`.
pub fn all(client: &Client, ar: &ApiResource) -> Api<DynamicObject> {
    Api::all_with(client.clone(), ar)
}
