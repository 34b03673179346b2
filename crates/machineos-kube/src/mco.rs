//! Lenient views ([`crate::view()`]) of the MCO objects the controller reads from its caches:
//! the fields it reads, every one optional, enums as strings, selectors and quantities as
//! JSON (their own parsers judge them). Field names are the API's (openshift/api
//! `machineconfiguration/v1` and machineos's `v1alpha1`).

use std::collections::BTreeMap;

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
    pub status: PoolStatus,
}

/// A pool's `configuration`: the rendered MachineConfig and the MachineConfigs it was
/// rendered from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Configuration {
    /// `name`.
    pub name: Option<String>,
    /// `source`: the inputs (`{name}` each; kind and apiVersion not read).
    pub source: Vec<NameRef>,
}

impl Configuration {
    /// The name, when set and not empty.
    pub fn get(&self) -> Option<&str> {
        self.name.as_deref().filter(|n| !n.is_empty())
    }
}

/// A MachineConfigPool's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PoolStatus {
    /// `conditions`.
    pub conditions: Vec<ConditionView>,
    /// `configuration`: what every node of the pool runs.
    pub configuration: Option<Configuration>,
}

/// A MachineConfigPool's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PoolSpec {
    /// `configuration`: the rendered MachineConfig (`None`: not rendered yet).
    pub configuration: Option<Configuration>,
    /// `machineConfigSelector` (a label selector).
    pub machine_config_selector: Option<Value>,
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
    /// `conditions`.
    pub conditions: Vec<ConditionView>,
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

/// A build runner — a batch Job or an OpenShift Build — as the RUN-step backend reads it:
/// where it pushes, on which architecture, and its progress.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct RunnerView {
    /// `spec`.
    pub spec: RunnerSpec,
    /// `status`.
    pub status: RunnerStatus,
}

/// A runner's `spec`: a Job's pod template, a Build's node selector and output.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunnerSpec {
    /// Job: `template`.
    pub template: PodTemplateView,
    /// Build: `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Build: `output`.
    pub output: BuildOutput,
}

/// A Job's pod template.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodTemplateView {
    /// `spec`.
    pub spec: PodSpecView,
}

/// A pod spec: its node selector and containers.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpecView {
    /// `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `containers`.
    pub containers: Vec<ContainerView>,
}

/// A container: its environment.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ContainerView {
    /// `env`.
    pub env: Vec<EnvVarView>,
}

/// An environment variable.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct EnvVarView {
    /// `name`.
    pub name: String,
    /// `value`.
    pub value: Option<String>,
}

/// A Build's `output`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct BuildOutput {
    /// `to` (`{kind: DockerImage, name: <pullspec>}`).
    pub to: NameRef,
}

/// A runner's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunnerStatus {
    /// Job: `conditions`.
    pub conditions: Vec<ConditionView>,
    /// Job: `startTime`.
    pub start_time: Option<String>,
    /// Job: `completionTime`.
    pub completion_time: Option<String>,
    /// Build: `completionTimestamp`.
    pub completion_timestamp: Option<String>,
}

impl RunnerView {
    /// The value of the first container's environment variable `name` (a Job's).
    pub fn env(&self, name: &str) -> Option<&str> {
        self.spec
            .template
            .spec
            .containers
            .first()?
            .env
            .iter()
            .find(|e| e.name == name)?
            .value
            .as_deref()
    }

    /// The node selector's value for `key`: the Job's pod template's, else the Build's.
    pub fn node_selector(&self, key: &str) -> Option<&str> {
        self.spec
            .template
            .spec
            .node_selector
            .get(key)
            .or_else(|| self.spec.node_selector.get(key))
            .map(String::as_str)
    }

    /// When it finished: a Job's `completionTime`, a Build's `completionTimestamp`.
    pub fn finished(&self) -> Option<&str> {
        self.status
            .completion_time
            .as_deref()
            .or(self.status.completion_timestamp.as_deref())
    }

    /// Whether a condition of one of `types` is True.
    pub fn has_true(&self, types: &[&str]) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| types.contains(&c.type_.as_str()) && c.is_true())
    }
}

/// A pod, for its phase.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodView {
    /// `status`.
    pub status: PodStatusView,
}

/// A pod's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodStatusView {
    /// `phase`.
    pub phase: Option<String>,
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
