//! MachineOSBuild: one build of one rendered MachineConfig for one MachineOSConfig, with the
//! MCO's five progress conditions and printer columns, as openshift/api declares it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{MachineConfigReference, MachineOSConfigReference, ObjectReference};
use crate::image::{DigestedImage, MAX_PULLSPEC_LEN};
use crate::schema::{metav1_conditions, tag_pull_spec};

/// MachineOSBuildSpec describes information about a build process primarily populated from a
/// MachineOSConfig object. It is immutable once set.
// Each `printcolumn(...)` is its own column; clippy reads their repeated `type_` keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSBuild",
    plural = "machineosbuilds",
    status = "MachineOSBuildStatus",
    derive = "PartialEq",
    doc = "MachineOSBuild describes a build process managed and deployed by the MCO.",
    printcolumn(
        name = "Prepared",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Prepared\")].status"
    ),
    printcolumn(
        name = "Building",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Building\")].status"
    ),
    printcolumn(
        name = "Succeeded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Succeeded\")].status"
    ),
    printcolumn(
        name = "Interrupted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Interrupted\")].status"
    ),
    printcolumn(
        name = "Failed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Failed\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self == oldSelf",
    "message": "machineOSBuildSpec is immutable once set"
}]))]
pub struct MachineOSBuildSpec {
    /// machineConfig points to the rendered MachineConfig resource to be included in this
    /// image build.
    pub machine_config: MachineConfigReference,

    /// machineOSConfig references the MachineOSConfig resource that this image build extends.
    #[serde(rename = "machineOSConfig")]
    pub machine_os_config: MachineOSConfigReference,

    /// renderedImagePushSpec is the location the image is pushed to once built:
    /// `host[:port][/namespace]/name:<tag>`.
    #[schemars(length(min = 1, max = MAX_PULLSPEC_LEN), transform = tag_pull_spec)]
    pub rendered_image_push_spec: String,
}

/// MachineOSBuildStatus describes the state of a build and other helpful information.
///
/// Condition types: `Prepared`, `Building`, `Failed`, `Interrupted`, `Succeeded`. Once
/// Failed, Interrupted or Succeeded is True, the conditions are immutable.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.buildEnd) ? has(self.buildStart) && timestamp(self.buildStart) < timestamp(self.buildEnd) : true",
    "message": "buildEnd must be after buildStart"
}]))]
pub struct MachineOSBuildStatus {
    /// conditions are state related conditions for the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        extend(
            "x-kubernetes-list-type" = "map",
            "x-kubernetes-list-map-keys" = ["type"],
            "x-kubernetes-validations" = [
                {"rule": "oldSelf.exists(x, x.type=='Failed' && x.status=='True') ? self==oldSelf : true",
                 "message": "once a Failed condition is set, conditions are immutable"},
                {"rule": "oldSelf.exists(x, x.type=='Interrupted' && x.status=='True') ? self==oldSelf : true",
                 "message": "once an Interrupted condition is set, conditions are immutable"},
                {"rule": "oldSelf.exists(x, x.type=='Succeeded' && x.status=='True') ? self==oldSelf : true",
                 "message": "once an Succeeded condition is set, conditions are immutable"}
            ]
        ),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,

    /// builder describes the image builder backend used for this build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "MachineOSBuilderReference")]
    pub builder: Option<MachineOSBuilderReference>,

    /// relatedObjects is a list of references to ephemeral objects such as ConfigMaps or
    /// Secrets that are meant to be consumed while the build process runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 10),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name", "resource"])
    )]
    pub related_objects: Vec<ObjectReference>,

    /// buildStart is when the build controller started the build backend for this build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "Time",
        extend("x-kubernetes-validations" = [{
            "rule": "self == oldSelf",
            "message": "buildStart is immutable once set"
        }])
    )]
    pub build_start: Option<Time>,

    /// buildEnd is when the build backend completed, failed or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "Time",
        extend("x-kubernetes-validations" = [{
            "rule": "self == oldSelf",
            "message": "buildEnd is immutable once set"
        }])
    )]
    pub build_end: Option<Time>,

    /// digestedImagePushSpec describes the fully qualified push spec produced by this build:
    /// `host[:port][/namespace]/name@sha256:<digest>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "DigestedImage")]
    pub digested_image_push_spec: Option<DigestedImage>,
}

/// MachineOSBuilderReference describes which ImageBuilder backend to use for this build.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.imageBuilderType) && self.imageBuilderType == 'Job' ?  has(self.job) : !has(self.job)",
    "message": "job is required when imageBuilderType is Job, and forbidden otherwise"
}]))]
pub struct MachineOSBuilderReference {
    /// imageBuilderType describes the type of image builder used to build this image. Any
    /// string, as in openshift/api (MachineOSConfig's spec restricts the choice; a build only
    /// records it): `Job` for a Kubernetes Job.
    pub image_builder_type: String,
    /// job is a reference to the job object that is managing the image build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ObjectReference")]
    pub job: Option<ObjectReference>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_a_succeeded_build() {
        let input = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSBuild",
            "metadata": {"name": "worker-0123456789abcdef0123456789abcdef"},
            "spec": {
                "machineConfig": {"name": "rendered-worker-0123"},
                "machineOSConfig": {"name": "worker"},
                "renderedImagePushSpec": "quay.io/org/os:worker-0123456789abcdef0123456789abcdef"
            },
            "status": {
                "conditions": [{"type": "Succeeded", "status": "True", "reason": "Ready",
                                "message": "Build Ready", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
                "builder": {"imageBuilderType": "Job",
                            "job": {"group": "batch", "resource": "jobs",
                                    "namespace": "openshift-machine-config-operator", "name": "build-worker-0123"}},
                "buildStart": "2026-01-02T03:00:00Z",
                "buildEnd": "2026-01-02T03:04:05Z",
                "digestedImagePushSpec": "quay.io/org/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            }
        });
        let mosb: MachineOSBuild = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(serde_json::to_value(&mosb).unwrap(), input);
    }
}
