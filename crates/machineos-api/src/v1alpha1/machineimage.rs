//! MachineImage: an admin-owned assignment of an image, by digest, to one node (`nodeName`) or
//! to the nodes a selector matches (`nodeSelector`), like a pod for the host OS (MCO issue
//! #3327). Matched nodes leave their pool's rollout; this object's controller moves them.
//!
//! The wire form has two optional fields of which exactly one must be set; in Rust that is the
//! [`NodeTarget`] enum, so code downstream never sees both or neither.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::image::DigestedImage;
use crate::schema::{dns1123_subdomain_lowercase, label_selector, metav1_conditions, no_default};
use crate::serde_util::is_zero_i64;
use crate::v1::NameReference;

/// MachineImageSpec assigns an image to nodes.
// Each `printcolumn(...)` is its own column; clippy reads their repeated `type_` keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1alpha1",
    kind = "MachineImage",
    plural = "machineimages",
    status = "MachineImageStatus",
    derive = "PartialEq",
    doc = "MachineImage assigns an OS image, by digest, to a node or to the nodes a selector matches; those nodes are updated to it instead of to their pool's image.",
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(name = "Node", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(
        name = "Updated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Updated\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(try_from = "MachineImageSpecWire", into = "MachineImageSpecWire")]
pub struct MachineImageSpec {
    /// The image, by digest.
    pub image: DigestedImage,
    /// Which nodes run it.
    pub target: NodeTarget,
    /// Secret (in the controller's namespace) the nodes pull the image with; the cluster
    /// pull secret when `None`.
    pub pull_secret: Option<NameReference>,
}

/// The nodes a [`MachineImage`] applies to.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeTarget {
    /// Exactly one node, by name.
    Node(String),
    /// The nodes a label selector matches, updated at most `max_unavailable` at a time
    /// (an integer or a percentage; 1 when `None`).
    Selector {
        /// Selects nodes by their labels.
        selector: LabelSelector,
        /// How many matched nodes may be unavailable at once.
        max_unavailable: Option<IntOrString>,
    },
}

/// Why a MachineImage spec is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineImageSpecError {
    /// Both or neither of nodeName and nodeSelector.
    #[error("exactly one of spec.nodeName and spec.nodeSelector must be set")]
    Target,
    /// maxUnavailable with a single node.
    #[error("spec.maxUnavailable applies only with spec.nodeSelector")]
    MaxUnavailableWithNodeName,
    /// An empty node name.
    #[error("spec.nodeName must not be empty")]
    EmptyNodeName,
}

/// The JSON form of [`MachineImageSpec`], and the source of its schema.
#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.nodeName) != has(self.nodeSelector)",
     "message": "exactly one of nodeName and nodeSelector must be set"},
    {"rule": "!has(self.nodeName) || !has(self.maxUnavailable)",
     "message": "maxUnavailable applies only with nodeSelector"}
]))]
struct MachineImageSpecWire {
    /// image is the OS image the nodes run, by digest: `host[:port][/namespace]/name@sha256:<digest>`.
    image: DigestedImage,
    /// nodeName is the one node that runs the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        length(min = 1, max = 253),
        transform = dns1123_subdomain_lowercase
    )]
    node_name: Option<String>,
    /// nodeSelector selects the nodes that run the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "label_selector")]
    node_selector: Option<LabelSelector>,
    /// pullSecret names a secret in the controller's namespace to pull the image with; the
    /// cluster pull secret is used when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NameReference")]
    pull_secret: Option<NameReference>,
    /// maxUnavailable is how many selected nodes may be updating at once: an integer or a
    /// percentage of the selected nodes; 1 when omitted. Only with nodeSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_unavailable: Option<IntOrString>,
}

impl TryFrom<MachineImageSpecWire> for MachineImageSpec {
    type Error = MachineImageSpecError;

    fn try_from(w: MachineImageSpecWire) -> Result<Self, Self::Error> {
        let target = match (w.node_name, w.node_selector) {
            (Some(name), None) => {
                if w.max_unavailable.is_some() {
                    return Err(MachineImageSpecError::MaxUnavailableWithNodeName);
                }
                if name.is_empty() {
                    return Err(MachineImageSpecError::EmptyNodeName);
                }
                NodeTarget::Node(name)
            }
            (None, Some(selector)) => NodeTarget::Selector {
                selector,
                max_unavailable: w.max_unavailable,
            },
            _ => return Err(MachineImageSpecError::Target),
        };
        Ok(MachineImageSpec {
            image: w.image,
            target,
            pull_secret: w.pull_secret,
        })
    }
}

impl From<MachineImageSpec> for MachineImageSpecWire {
    fn from(s: MachineImageSpec) -> Self {
        let (node_name, node_selector, max_unavailable) = match s.target {
            NodeTarget::Node(name) => (Some(name), None, None),
            NodeTarget::Selector {
                selector,
                max_unavailable,
            } => (None, Some(selector), max_unavailable),
        };
        MachineImageSpecWire {
            image: s.image,
            node_name,
            node_selector,
            pull_secret: s.pull_secret,
            max_unavailable,
        }
    }
}

/// MachineImageStatus reports the assignment's progress.
///
/// Condition types: `Updating` (a matched node is moving to the image), `Updated` (every
/// matched node runs it), `Degraded` (a matched node failed to move to it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineImageStatus {
    /// observedGeneration is the generation the controller last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    #[schemars(range(min = 0))]
    pub observed_generation: i64,
    /// conditions of the assignment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,
    /// machineCount is the number of nodes matched.
    #[serde(default)]
    #[schemars(transform = no_default, range(min = 0))]
    pub machine_count: i32,
    /// updatedMachineCount is the number of matched nodes running the image.
    #[serde(default)]
    #[schemars(transform = no_default, range(min = 0))]
    pub updated_machine_count: i32,
    /// unavailableMachineCount is the number of matched nodes updating or not ready.
    #[serde(default)]
    #[schemars(transform = no_default, range(min = 0))]
    pub unavailable_machine_count: i32,
    /// degradedMachineCount is the number of matched nodes that failed to update.
    #[serde(default)]
    #[schemars(transform = no_default, range(min = 0))]
    pub degraded_machine_count: i32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const IMAGE: &str =
        "quay.io/o/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_exactly_one_target() {
        let cases: Vec<(Value, Result<NodeTarget, &str>)> = vec![
            (
                json!({"image": IMAGE, "nodeName": "worker-0"}),
                Ok(NodeTarget::Node("worker-0".into())),
            ),
            (
                json!({"image": IMAGE, "nodeSelector": {"matchLabels": {"canary": "true"}},
                       "maxUnavailable": "25%"}),
                Ok(NodeTarget::Selector {
                    selector: LabelSelector {
                        match_labels: Some([("canary".to_owned(), "true".to_owned())].into()),
                        ..Default::default()
                    },
                    max_unavailable: Some(IntOrString::String("25%".into())),
                }),
            ),
            (json!({"image": IMAGE}), Err("exactly one of")),
            (
                json!({"image": IMAGE, "nodeName": "a", "nodeSelector": {}}),
                Err("exactly one of"),
            ),
            (
                json!({"image": IMAGE, "nodeName": "a", "maxUnavailable": 2}),
                Err("applies only with spec.nodeSelector"),
            ),
            (
                json!({"image": IMAGE, "nodeName": ""}),
                Err("must not be empty"),
            ),
            (
                json!({"image": "quay.io/o/os:latest", "nodeName": "a"}),
                Err("has no digest"),
            ),
        ];
        for (input, want) in cases {
            let got = serde_json::from_value::<MachineImageSpec>(input.clone());
            match (want, got) {
                (Ok(target), Ok(spec)) => {
                    assert_eq!(spec.target, target, "{input}");
                    assert_eq!(serde_json::to_value(&spec).unwrap(), input, "round trip");
                }
                (Err(fragment), Err(e)) => {
                    assert!(e.to_string().contains(fragment), "{input}: {e}")
                }
                (want, got) => panic!("{input}: want {want:?}, got {got:?}"),
            }
        }
    }
}
