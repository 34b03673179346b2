//! MachineConfigNode: per-node desired and current config and image, and the update
//! conditions the node agent reports, as openshift/api declares it (named after the node).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NameReference;
use crate::image::DigestedImage;
use crate::schema::{dns1123_subdomain_lowercase, metav1_conditions, release_image};
use crate::serde_util::{is_zero_i32, is_zero_i64};

/// MachineConfigNodeSpec describes the MachineConfigNode we are managing.
// Each `printcolumn(...)` is its own column; clippy reads their repeated `type_` keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigNode",
    plural = "machineconfignodes",
    status = "MachineConfigNodeStatus",
    derive = "PartialEq",
    doc = "MachineConfigNode describes the health of the Machines on the system.",
    validation = Rule::new("self.metadata.name == self.spec.node.name")
        .message("spec.node.name should match metadata.name"),
    printcolumn(name = "PoolName", type_ = "string", json_path = ".spec.pool.name"),
    printcolumn(name = "DesiredConfig", type_ = "string", json_path = ".spec.configVersion.desired"),
    printcolumn(name = "CurrentConfig", type_ = "string", json_path = ".status.configVersion.current"),
    printcolumn(
        name = "Updated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Updated\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(
        name = "UpdatePrepared",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdatePrepared\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdateExecuted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdateExecuted\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdatePostActionComplete",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdatePostActionComplete\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdateComplete",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdateComplete\")].status",
        priority = 1
    ),
    printcolumn(
        name = "Resumed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Resumed\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdatedFilesAndOS",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"AppliedFilesAndOS\")].status",
        priority = 1
    ),
    printcolumn(
        name = "CordonedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Cordoned\")].status",
        priority = 1
    ),
    printcolumn(
        name = "DrainedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drained\")].status",
        priority = 1
    ),
    printcolumn(
        name = "RebootedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"RebootedNode\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UncordonedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Uncordoned\")].status",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpec {
    /// node contains a reference to the node for this machine config node.
    pub node: NameReference,

    /// pool contains a reference to the machine config pool that this machine config node's
    /// referenced node belongs to.
    pub pool: NameReference,

    /// configVersion holds the desired config version for the node targeted by this machine
    /// config node resource.
    pub config_version: MachineConfigNodeSpecMachineConfigVersion,

    /// configImage is the OS image this node should run; present only when the node's pool
    /// uses layered images (FeatureGate ImageModeStatusReporting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "MachineConfigNodeSpecConfigImage")]
    pub config_image: Option<MachineConfigNodeSpecConfigImage>,
}

/// MachineConfigNodeSpecMachineConfigVersion holds the desired config version for the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineConfigNodeSpecMachineConfigVersion {
    /// desired is the name of the machine config that the node should be upgraded to.
    #[schemars(length(max = 253), transform = dns1123_subdomain_lowercase)]
    pub desired: String,
}

/// MachineConfigNodeSpecConfigImage holds the desired image for the node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpecConfigImage {
    /// desiredImage is the image, by digest, that the node should be updated to use.
    pub desired_image: DigestedImage,
}

/// MachineConfigNodeStatus holds the reported information on a particular machine config node.
///
/// Condition types: `UpdatePrepared`, `UpdateExecuted`, `UpdatePostActionComplete`,
/// `UpdateComplete`, `Updated`, `Resumed`, `Drained`, `AppliedFilesAndOS`, `Cordoned`,
/// `Uncordoned`, `RebootedNode`, `NodeDegraded`, `PinnedImageSetsProgressing`,
/// `PinnedImageSetsDegraded`; with image mode also `ImagePulledFromRegistry`,
/// `AppliedOSImage` and `AppliedFiles`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatus {
    /// conditions represent the observations of a machine config node's current state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 20),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,

    /// observedGeneration represents the generation of the MachineConfigNode object observed
    /// by the controller.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    #[schemars(
        range(min = 1),
        extend("x-kubernetes-validations" = [{
            "rule": "self >= oldSelf",
            "message": "observedGeneration must not decrease"
        }])
    )]
    pub observed_generation: i64,

    /// configVersion describes the current and desired machine config version for this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "MachineConfigNodeStatusMachineConfigVersion")]
    pub config_version: Option<MachineConfigNodeStatusMachineConfigVersion>,

    /// configImage shows the observed state of the node image when image mode is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "MachineConfigNodeStatusConfigImage")]
    pub config_image: Option<MachineConfigNodeStatusConfigImage>,

    /// pinnedImageSets describes the current and desired pinned image sets for this node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub pinned_image_sets: Vec<MachineConfigNodeStatusPinnedImageSet>,

    /// irreconcilableChanges contains the observed differences between this node's
    /// configuration and the target rendered MachineConfig that only new nodes can get.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(min = 1, max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["fieldPath"])
    )]
    pub irreconcilable_changes: Vec<IrreconcilableChangeDiff>,

    /// internalReleaseImage describes the status of the release payloads stored in the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "MachineConfigNodeStatusInternalReleaseImage")]
    pub internal_release_image: Option<MachineConfigNodeStatusInternalReleaseImage>,
}

/// The current and desired machine config version as last updated in the status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineConfigNodeStatusMachineConfigVersion {
    /// current is the name of the machine config currently in use on the node; `None` until
    /// the node has reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(max = 253), transform = dns1123_subdomain_lowercase)]
    pub current: Option<String>,
    /// desired is the MachineConfig the node wants to upgrade to.
    #[schemars(length(max = 253), transform = dns1123_subdomain_lowercase)]
    pub desired: String,
}

/// The observed state of the image on the node: the one targeted and the one applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineConfigNodeStatusConfigImage {
    /// currentImage is the image currently applied to the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "DigestedImage")]
    pub current_image: Option<DigestedImage>,
    /// desiredImage is the image the node is progressing to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "DigestedImage")]
    pub desired_image: Option<DigestedImage>,
}

/// The current, desired, and failed pinned image sets for the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.desiredGeneration) && has(self.currentGeneration) ? self.desiredGeneration >= self.currentGeneration : true",
     "message": "desired generation must be greater than or equal to the current generation"},
    {"rule": "has(self.lastFailedGeneration) && has(self.desiredGeneration) ? self.desiredGeneration >= self.lastFailedGeneration : true",
     "message": "desired generation must be greater than or equal to the last failed generation"},
    {"rule": "has(self.lastFailedGeneration) ? has(self.lastFailedGenerationError) : true",
     "message": "last failed generation error must be defined on image pull and pin failure"}
]))]
pub struct MachineConfigNodeStatusPinnedImageSet {
    /// name is the name of the pinned image set.
    #[schemars(length(max = 253), transform = dns1123_subdomain_lowercase)]
    pub name: String,
    /// currentGeneration is the generation of the pinned image set most recently pulled and
    /// pinned on this node.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(
        range(min = 1),
        extend("x-kubernetes-validations" = [{
            "rule": "self >= oldSelf",
            "message": "currentGeneration must not decrease"
        }])
    )]
    pub current_generation: i32,
    /// desiredGeneration is the generation of the pinned image set targeted on this node.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(
        range(min = 1),
        extend("x-kubernetes-validations" = [{
            "rule": "self >= oldSelf",
            "message": "desiredGeneration must not decrease"
        }])
    )]
    pub desired_generation: i32,
    /// lastFailedGeneration is the generation of the most recent pinned image set that failed
    /// to be pulled and pinned on this node.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(
        range(min = 1),
        extend("x-kubernetes-validations" = [{
            "rule": "self >= oldSelf",
            "message": "lastFailedGeneration must not decrease"
        }])
    )]
    pub last_failed_generation: i32,
    /// lastFailedGenerationError is the error explaining why the desired images failed;
    /// required whenever lastFailedGeneration is set (even if empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(max = 32768))]
    pub last_failed_generation_error: Option<String>,
}

/// A difference between the node's install-time configuration and the latest rendered one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IrreconcilableChangeDiff {
    /// fieldPath is the path in the rendered MachineConfig that differs, starting `spec.`.
    #[schemars(
        length(min = 1, max = 70),
        extend("x-kubernetes-validations" = [
            {"rule": "self.startsWith('spec.')", "message": "The fieldPath must start with `spec.`"},
            {"rule": r"self.matches('^[\\da-zA-Z\\.\\[\\]]+$')",
             "message": "The fieldPath must consist only of alphanumeric characters, brackets [] and dots ('.')."}
        ])
    )]
    pub field_path: String,
    /// diff is the difference for the field at fieldPath.
    #[schemars(length(min = 1, max = 4096))]
    pub diff: String,
}

/// The release bundles stored on the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineConfigNodeStatusInternalReleaseImage {
    /// releases is a list of the release bundles owned and managed by the cluster (at least
    /// one).
    #[schemars(
        length(min = 1, max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub releases: Vec<MachineConfigNodeStatusInternalReleaseImageRef>,
}

/// One release bundle on the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineConfigNodeStatusInternalReleaseImageRef {
    /// conditions of this release bundle: Mounted, Installing, Available, Removing, Degraded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(min = 1, max = 5),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,
    /// name is the release bundle identifier, `ocp-release-bundle-<version>-<arch|stream>`.
    #[schemars(
        length(min = 1, max = 64),
        extend("x-kubernetes-validations" = [{
            "rule": r"self.matches('^ocp-release-bundle-[0-9]+\\.[0-9]+\\.[0-9]+-[A-Za-z0-9._-]+$')",
            "message": "must be ocp-release-bundle-<version>-<arch|stream> and <= 64 chars"
        }])
    )]
    pub name: String,
    /// image is the OCP release image, by digest; its host may be `localhost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "release_image")]
    pub image: Option<DigestedImage>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_an_image_mode_node() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let input = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigNode",
            "metadata": {"name": "worker-0"},
            "spec": {
                "node": {"name": "worker-0"},
                "pool": {"name": "worker"},
                "configVersion": {"desired": "rendered-worker-1"},
                "configImage": {"desiredImage": format!("quay.io/org/os@{digest}")}
            },
            "status": {
                "conditions": [{"type": "Updated", "status": "False", "reason": "Updating",
                                "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
                "observedGeneration": 2,
                "configVersion": {"current": "rendered-worker-0", "desired": "rendered-worker-1"},
                "configImage": {"currentImage": format!("quay.io/org/os@{digest}")},
                "pinnedImageSets": [{"name": "set", "desiredGeneration": 1}]
            }
        });
        let mcn: MachineConfigNode = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(serde_json::to_value(&mcn).unwrap(), input);
    }
}
