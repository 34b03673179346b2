//! The API resources the controller reads and writes, as kube `ApiResource`s, and `Api`
//! handles on them. Every custom kind is handled as JSON ([`DynamicObject`]; see
//! [`crate::observe`] for why); the resource names come from `machineos-api`'s types, so
//! they cannot drift from the CRDs.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};

/// MachineConfig.
pub fn machine_config() -> ApiResource {
    ApiResource::erase::<machineos_api::v1::MachineConfig>(&())
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

/// A cluster-scoped `Api` on `ar`.
pub fn all(client: &Client, ar: &ApiResource) -> Api<DynamicObject> {
    Api::all_with(client.clone(), ar)
}
