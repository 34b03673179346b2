//! Lenient views ([`crate::view`]) of the MCO objects the controller reads from its caches:
//! the fields it reads, every one optional, enums as strings, selectors and quantities as
//! JSON (their own parsers judge them). Field names are the API's (openshift/api
//! `machineconfiguration/v1` and machineos's `v1alpha1`).

use serde::Deserialize;
use serde_json::Value;

use crate::condition::ConditionView;

/// A `{name: …}` reference.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NameRef {
    /// `name`.
    pub name: Option<String>,
}

impl NameRef {
    /// The name, when set and not empty.
    pub fn get(&self) -> Option<&str> {
        self.name.as_deref().filter(|n| !n.is_empty())
    }
}

/// A status with conditions.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Conditions {
    /// `conditions`.
    pub conditions: Vec<ConditionView>,
}

/// A MachineConfigPool.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PoolView {
    /// `spec`.
    pub spec: PoolSpec,
    /// `status`.
    pub status: Conditions,
}

/// A MachineConfigPool's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PoolSpec {
    /// `configuration`: the rendered MachineConfig.
    pub configuration: NameRef,
    /// `nodeSelector` (a label selector).
    pub node_selector: Option<Value>,
    /// `paused`.
    pub paused: Option<bool>,
    /// `maxUnavailable` (an int or a percent string).
    pub max_unavailable: Option<Value>,
}

/// A MachineOSConfig.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MachineOSConfigView {
    /// `spec`.
    pub spec: MachineOSConfigSpec,
    /// `status`.
    pub status: MachineOSConfigStatus,
}

/// A MachineOSConfig's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    /// `machineConfigPool`.
    pub machine_config_pool: NameRef,
    /// `imageBuilder`.
    pub image_builder: ImageBuilder,
    /// `renderedImagePushSpec`.
    pub rendered_image_push_spec: Option<String>,
    /// `renderedImagePushSecret`.
    pub rendered_image_push_secret: NameRef,
    /// `baseImagePullSecret`.
    pub base_image_pull_secret: NameRef,
    /// `containerFile`.
    pub container_file: Vec<ContainerfileView>,
}

/// `spec.imageBuilder`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImageBuilder {
    /// `imageBuilderType`.
    pub image_builder_type: Option<String>,
}

/// One `spec.containerFile[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerfileView {
    /// `containerfileArch`.
    pub containerfile_arch: Option<String>,
    /// `content`.
    pub content: Option<String>,
}

/// A MachineOSConfig's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    /// `currentImagePullSpec`.
    pub current_image_pull_spec: Option<String>,
    /// `machineOSBuild`.
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: NameRef,
    /// `observedGeneration`.
    pub observed_generation: Option<i64>,
}

/// A MachineOSBuild.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MachineOSBuildView {
    /// `spec`.
    pub spec: MachineOSBuildSpec,
    /// `status`.
    pub status: MachineOSBuildStatus,
}

/// A MachineOSBuild's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineOSBuildSpec {
    /// `machineConfig`: the rendered MachineConfig built.
    pub machine_config: NameRef,
    /// `machineOSConfig`.
    #[serde(rename = "machineOSConfig")]
    pub machine_os_config: NameRef,
}

/// A MachineOSBuild's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineOSBuildStatus {
    /// `conditions`.
    pub conditions: Vec<ConditionView>,
    /// `buildStart` (RFC 3339).
    pub build_start: Option<String>,
    /// `buildEnd` (RFC 3339).
    pub build_end: Option<String>,
    /// `digestedImagePushSpec`.
    pub digested_image_push_spec: Option<String>,
}

/// A MachineOSImage or a MachineImage: what both name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ImageView {
    /// `spec`.
    pub spec: ImageSpec,
    /// `status`.
    pub status: Conditions,
}

/// Any object whose status has conditions (a MachineConfigNode, …), for those alone.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StatusView {
    /// `status`.
    pub status: Conditions,
}

/// The `spec` of a MachineOSImage or a MachineImage.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImageSpec {
    /// `image`.
    pub image: Option<String>,
    /// MachineOSImage: `machineConfigPool`.
    pub machine_config_pool: NameRef,
    /// MachineOSImage: `machineOSBuild`.
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: NameRef,
    /// MachineImage: `pullSecret`.
    pub pull_secret: NameRef,
    /// MachineImage: `nodeName`.
    pub node_name: Option<String>,
    /// MachineImage: `nodeSelector` (a label selector).
    pub node_selector: Option<Value>,
    /// MachineImage: `maxUnavailable`.
    pub max_unavailable: Option<Value>,
}

/// A (rendered) MachineConfig: what the build reads besides its content.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MachineConfigView {
    /// `spec`.
    pub spec: MachineConfigSpec,
}

/// A MachineConfig's `spec`, the fields read outside rendering.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MachineConfigSpec {
    /// `osImageURL`.
    #[serde(rename = "osImageURL")]
    pub os_image_url: Option<String>,
    /// `baseOSExtensionsContainerImage`.
    #[serde(rename = "baseOSExtensionsContainerImage")]
    pub base_os_extensions_container_image: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn views_read_the_api_field_names() {
        let m: MachineOSConfigView = serde_json::from_value(json!({
            "spec": {"machineConfigPool": {"name": "worker"},
                     "imageBuilder": {"imageBuilderType": "Job"},
                     "renderedImagePushSpec": "r/os:latest",
                     "renderedImagePushSecret": {"name": "push"},
                     "containerFile": [{"containerfileArch": "AMD64", "content": "RUN x"}]},
            "status": {"machineOSBuild": {"name": "worker-1"}, "observedGeneration": 2,
                       "currentImagePullSpec": "r/os@sha256:aa"}
        }))
        .unwrap();
        assert_eq!(m.spec.machine_config_pool.get(), Some("worker"));
        assert_eq!(
            m.spec.image_builder.image_builder_type.as_deref(),
            Some("Job")
        );
        assert_eq!(m.spec.base_image_pull_secret.get(), None);
        assert_eq!(
            m.spec.container_file[0].containerfile_arch.as_deref(),
            Some("AMD64")
        );
        assert_eq!(m.status.machine_os_build.get(), Some("worker-1"));
        assert_eq!(m.status.observed_generation, Some(2));
        let b: MachineOSBuildView = serde_json::from_value(json!({
            "spec": {"machineConfig": {"name": "rendered-worker-1"}, "machineOSConfig": {"name": "worker"}},
            "status": {"buildStart": "2026-01-01T00:00:00Z", "conditions": [{"type": "Building", "status": "True"}]}
        }))
        .unwrap();
        assert_eq!(b.spec.machine_os_config.get(), Some("worker"));
        assert_eq!(b.status.conditions[0].type_, "Building");
        let mc: MachineConfigView = serde_json::from_value(
            json!({"spec": {"osImageURL": "q/os:1", "baseOSExtensionsContainerImage": "q/ext:1"}}),
        )
        .unwrap();
        assert_eq!(mc.spec.os_image_url.as_deref(), Some("q/os:1"));
        assert_eq!(
            NameRef {
                name: Some(String::new())
            }
            .get(),
            None
        );
    }
}
