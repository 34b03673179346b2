//! MachineConfigPool: selects MachineConfigs (to render) and nodes (to update), with the
//! rollout knobs and the status counts the MCO reports, as openshift/api declares them.
//!
//! Its conditions are the MCO's own `MachineConfigPoolCondition` (nullable
//! `lastTransitionTime`, no `observedGeneration`), not `metav1.Condition`: objects read from an
//! OpenShift cluster carry that shape, and a stricter type would reject them.

use k8s_openapi::api::core::v1::ObjectReference as CoreObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{OSImageStreamReference, PinnedImageSetRef};
use crate::schema::{atomic_items, atomic_map, label_selector, no_default};
use crate::serde_util::{is_false, is_zero_i64, null_as_default};

/// MachineConfigPoolSpec is the spec for MachineConfigPool resource.
// Each `printcolumn(...)` is its own column; clippy reads their repeated `type_` keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigPool",
    plural = "machineconfigpools",
    shortname = "mcp",
    status = "MachineConfigPoolStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "MachineConfigPool describes a pool of MachineConfigs.",
    printcolumn(
        name = "Config",
        type_ = "string",
        json_path = ".status.configuration.name"
    ),
    printcolumn(
        name = "Updated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Updated\")].status",
        description = "When all the machines in the pool are updated to the correct machine config."
    ),
    printcolumn(
        name = "Updating",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Updating\")].status",
        description = "When at least one of machine is not either not updated or is in the process of updating to the desired machine config."
    ),
    printcolumn(
        name = "Degraded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Degraded\")].status",
        description = "When progress is blocked on updating one or more nodes or the pool configuration is failing."
    ),
    printcolumn(
        name = "MachineCount",
        type_ = "number",
        json_path = ".status.machineCount",
        description = "Total number of machines in the machine config pool"
    ),
    printcolumn(
        name = "ReadyMachineCount",
        type_ = "number",
        json_path = ".status.readyMachineCount",
        description = "Total number of ready machines targeted by the pool"
    ),
    printcolumn(
        name = "UpdatedMachineCount",
        type_ = "number",
        json_path = ".status.updatedMachineCount",
        description = "Total number of machines targeted by the pool that have the CurrentMachineConfig as their config"
    ),
    printcolumn(
        name = "DegradedMachineCount",
        type_ = "number",
        json_path = ".status.degradedMachineCount",
        description = "Total number of machines marked degraded (or unreconcilable)"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    /// machineConfigSelector specifies a label selector for MachineConfigs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "label_selector")]
    pub machine_config_selector: Option<LabelSelector>,

    /// nodeSelector specifies a label selector for Machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "label_selector")]
    pub node_selector: Option<LabelSelector>,

    /// paused specifies whether or not changes to this machine config pool should be stopped.
    /// This includes generating new desiredMachineConfig and update of machines.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,

    /// maxUnavailable defines either an integer number or percentage of nodes in the pool
    /// that can go Unavailable during an update. The default value is 1; 0 also means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,

    /// The targeted MachineConfig object for the machine config pool.
    #[serde(
        default,
        skip_serializing_if = "MachineConfigPoolStatusConfiguration::is_empty"
    )]
    pub configuration: MachineConfigPoolStatusConfiguration,

    /// pinnedImageSets specifies a sequence of PinnedImageSetRef objects for the pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub pinned_image_sets: Vec<PinnedImageSetRef>,

    /// osImageStream specifies an OS stream to be used for the pool (FeatureGate OSStreams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "OSImageStreamReference")]
    pub os_image_stream: Option<OSImageStreamReference>,
}

/// MachineConfigPoolStatusConfiguration stores the current configuration for the pool, and
/// optionally also stores the list of MachineConfig objects used to generate the configuration.
///
/// It inlines a core `ObjectReference`, as openshift/api does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = atomic_map)]
pub struct MachineConfigPoolStatusConfiguration {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub api_version: Option<String>,
    /// If referring to a piece of an object instead of an entire object, the field path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub field_path: Option<String>,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub kind: Option<String>,
    /// Name of the referent: the rendered MachineConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub name: Option<String>,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub namespace: Option<String>,
    /// Specific resourceVersion to which this reference is made, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub resource_version: Option<String>,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub uid: Option<String>,
    /// source is the list of MachineConfig objects that were used to generate the single
    /// MachineConfig object specified in `content`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"), transform = atomic_items)]
    pub source: Vec<CoreObjectReference>,
}

impl MachineConfigPoolStatusConfiguration {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// MachineConfigPoolStatus is the status for MachineConfigPool resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    /// observedGeneration represents the generation observed by the controller.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,

    /// configuration represents the current MachineConfig object for the machine config pool.
    #[serde(
        default,
        skip_serializing_if = "MachineConfigPoolStatusConfiguration::is_empty"
    )]
    pub configuration: MachineConfigPoolStatusConfiguration,

    /// machineCount represents the total number of machines in the machine config pool.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub machine_count: i32,

    /// updatedMachineCount represents the total number of machines targeted by the pool that
    /// have the CurrentMachineConfig as their config.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub updated_machine_count: i32,

    /// readyMachineCount represents the total number of ready machines targeted by the pool.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub ready_machine_count: i32,

    /// unavailableMachineCount represents the total number of unavailable (non-ready) machines
    /// targeted by the pool. A node is marked unavailable if it is in updating state or
    /// NodeReady condition is false.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub unavailable_machine_count: i32,

    /// degradedMachineCount represents the total number of machines marked degraded (or
    /// unreconcilable). A node is marked degraded if applying a configuration failed.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub degraded_machine_count: i32,

    /// conditions represents the latest available observations of current state.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub conditions: Vec<MachineConfigPoolCondition>,

    /// certExpirys keeps track of important certificate expiration data.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub cert_expirys: Vec<CertExpiry>,

    /// poolSynchronizersStatus is the status of the machines managed by the pool synchronizers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["poolSynchronizerType"]
    ))]
    pub pool_synchronizers_status: Vec<PoolSynchronizerStatus>,

    /// osImageStream specifies the last updated OSImageStream for the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "OSImageStreamReference")]
    pub os_image_stream: Option<OSImageStreamReference>,
}

/// MachineConfigPoolCondition contains condition information for a MachineConfigPool.
///
/// Types the MCO sets: `Updated`, `Updating`, `Degraded`, `NodeDegraded`, `RenderDegraded`,
/// `ImageBuildDegraded`, `PinnedImageSetsDegraded`, `PoolSynchronizerDegraded`, and the legacy
/// `BuildPending`, `Building`, `BuildSuccess`, `BuildFailed`, `BuildInterrupted`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolCondition {
    /// type of the condition.
    #[serde(rename = "type", default)]
    #[schemars(transform = no_default)]
    pub type_: String,
    /// status of the condition, one of ('True', 'False', 'Unknown').
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// lastTransitionTime is the timestamp corresponding to the last status change of this
    /// condition.
    #[serde(default)]
    pub last_transition_time: Option<Time>,
    /// reason is a brief machine readable explanation for the condition's last transition.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub reason: String,
    /// message is a human readable description of the details of the last transition,
    /// complementing reason.
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub message: String,
}

/// CertExpiry contains the bundle name and the expiry date.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CertExpiry {
    /// bundle is the name of the bundle in which the subject certificate resides.
    pub bundle: String,
    /// subject is the subject of the certificate.
    pub subject: String,
    /// expiry is the date after which the certificate will no longer be valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Time")]
    pub expiry: Option<Time>,
}

/// The status of the machines a pool synchronizer manages.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.machineCount >= self.updatedMachineCount",
     "message": "machineCount must be greater than or equal to updatedMachineCount"},
    {"rule": "self.machineCount >= self.availableMachineCount",
     "message": "machineCount must be greater than or equal to availableMachineCount"},
    {"rule": "self.machineCount >= self.unavailableMachineCount",
     "message": "machineCount must be greater than or equal to unavailableMachineCount"},
    {"rule": "self.machineCount >= self.readyMachineCount",
     "message": "machineCount must be greater than or equal to readyMachineCount"},
    {"rule": "self.availableMachineCount >= self.readyMachineCount",
     "message": "availableMachineCount must be greater than or equal to readyMachineCount"}
]))]
pub struct PoolSynchronizerStatus {
    /// poolSynchronizerType describes the type of the pool synchronizer (`PinnedImageSets`,
    /// the only one openshift/api allows).
    #[schemars(length(max = 256), extend("enum" = ["PinnedImageSets"]))]
    pub pool_synchronizer_type: String,
    /// machineCount is the number of machines that are managed by the node synchronizer.
    #[schemars(range(min = 0))]
    pub machine_count: i64,
    /// updatedMachineCount is the number of machines that have been updated by the node
    /// synchronizer.
    #[schemars(range(min = 0))]
    pub updated_machine_count: i64,
    /// readyMachineCount is the number of machines managed by the node synchronizer that are in
    /// a ready state.
    #[schemars(range(min = 0))]
    pub ready_machine_count: i64,
    /// availableMachineCount is the number of machines managed by the node synchronizer which
    /// are available.
    #[schemars(range(min = 0))]
    pub available_machine_count: i64,
    /// unavailableMachineCount is the number of machines managed by the node synchronizer but
    /// are unavailable.
    #[schemars(range(min = 0))]
    pub unavailable_machine_count: i64,
    /// observedGeneration is the last generation change that has been applied; it may go back
    /// to 0 (a reset), which is not the same as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "i64",
        range(min = 0),
        extend("x-kubernetes-validations" = [{
            "rule": "self >= oldSelf || (self == 0 && oldSelf > 0)",
            "message": "observedGeneration must not move backwards except to zero"
        }])
    )]
    pub observed_generation: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_mco_pool() {
        // Shape of `oc get mcp worker -o json` (trimmed).
        let pool: MachineConfigPool = serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {
                "configuration": {"name": "rendered-worker-0123",
                    "source": [{"apiVersion": "machineconfiguration.openshift.io/v1",
                                "kind": "MachineConfig", "name": "00-worker"}]},
                "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
                "maxUnavailable": "10%",
                "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                "paused": false
            },
            "status": {
                "certExpirys": null,
                "conditions": [{"lastTransitionTime": null, "message": "", "reason": "",
                                "status": "True", "type": "Updated"}],
                "configuration": {"name": "rendered-worker-0123"},
                "degradedMachineCount": 0, "machineCount": 3, "observedGeneration": 4,
                "readyMachineCount": 3, "unavailableMachineCount": 0, "updatedMachineCount": 3
            }
        }))
        .unwrap();
        assert_eq!(
            pool.spec.configuration.name.as_deref(),
            Some("rendered-worker-0123")
        );
        assert_eq!(
            pool.spec.configuration.source[0].name.as_deref(),
            Some("00-worker")
        );
        assert_eq!(
            pool.spec.max_unavailable,
            Some(IntOrString::String("10%".into()))
        );
        let status = pool.status.unwrap();
        assert_eq!(status.machine_count, 3);
        assert_eq!(status.conditions[0].type_, "Updated");
        assert_eq!(status.conditions[0].last_transition_time, None);
    }

    #[test]
    fn optional_fields_are_omitted_not_null() {
        let sync = PoolSynchronizerStatus {
            pool_synchronizer_type: "PinnedImageSets".into(),
            observed_generation: Some(0),
            ..Default::default()
        };
        let v = serde_json::to_value(&sync).unwrap();
        assert_eq!(v["observedGeneration"], 0, "a reset to 0 is written");
        let v = serde_json::to_value(PoolSynchronizerStatus::default()).unwrap();
        assert!(v.get("observedGeneration").is_none(), "{v}");
        let expiry = CertExpiry {
            bundle: "b".into(),
            subject: "s".into(),
            expiry: None,
        };
        assert_eq!(
            serde_json::to_value(&expiry).unwrap(),
            json!({"bundle": "b", "subject": "s"})
        );
    }

    #[test]
    fn zero_counts_are_written() {
        // The MCO's counts have no omitempty: a status always says how many machines it has.
        let v = serde_json::to_value(MachineConfigPoolStatus::default()).unwrap();
        assert_eq!(
            v,
            json!({"machineCount": 0, "updatedMachineCount": 0, "readyMachineCount": 0,
                   "unavailableMachineCount": 0, "degradedMachineCount": 0})
        );
    }
}
