//! MachineConfig: the input of everything — an Ignition config plus the OS-level knobs
//! (kernel arguments, extensions, kernel type, FIPS, OS image) — as openshift/api declares it.
//!
//! The MCO declares no status for MachineConfig, so there is none here either. `spec.config` is
//! a `runtime.RawExtension`: kept as the JSON object it is, every unknown field preserved;
//! parsing it as Ignition is the renderer's job, where errors can name the object.
//!
//! Serialization omits empty spec fields where Go would write `""`, `false` and `null`; both
//! mean the same to the MCO, and omitting them lets manifests round-trip unchanged. Decoding
//! accepts both, including `null` lists.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::serde_util::{is_false, null_as_default, preserve_unknown_object};
use crate::{GENERATED_BY_CONTROLLER_VERSION_ANNOTATION, ROLE_LABEL};

/// MachineConfigSpec is the spec for MachineConfig.
// Each `printcolumn(...)` is its own column; clippy reads their repeated `type_` keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfig",
    plural = "machineconfigs",
    shortname = "mc",
    derive = "PartialEq",
    derive = "Default",
    doc = "MachineConfig defines the configuration for a machine.",
    printcolumn(
        name = "GeneratedByController",
        type_ = "string",
        json_path = ".metadata.annotations.machineconfiguration\\.openshift\\.io/generated-by-controller-version",
        description = "Version of the controller that generated the machineconfig. This will be empty if the machineconfig is not managed by a controller."
    ),
    printcolumn(
        name = "IgnitionVersion",
        type_ = "string",
        json_path = ".spec.config.ignition.version",
        description = "Version of the Ignition Config defined in the machineconfig."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigSpec {
    /// osImageURL specifies the remote location that will be used to fetch the OS.
    #[serde(
        rename = "osImageURL",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub os_image_url: String,

    /// baseOSExtensionsContainerImage specifies the remote location that will be used to
    /// fetch the extensions container matching a new-format OS image.
    #[serde(
        rename = "baseOSExtensionsContainerImage",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub base_os_extensions_container_image: String,

    /// config is a Ignition Config object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub config: Option<Map<String, Value>>,

    /// kernelArguments contains a list of kernel arguments to be added.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("nullable" = true, "x-kubernetes-list-type" = "atomic"))]
    pub kernel_arguments: Vec<String>,

    /// extensions contains a list of additional features that can be enabled on host.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub extensions: Vec<String>,

    /// fips controls FIPS mode.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fips: bool,

    /// kernelType contains which kernel we want to be running like default (traditional),
    /// realtime, 64k-pages (aarch64 only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_type: String,
}

impl MachineConfig {
    /// The object's name (`metadata.name`), or `""` when unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The object's labels, `None` when it has none at all — the case the MCO's merge rejects.
    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.labels.as_ref().filter(|l| !l.is_empty())
    }

    /// The value of the role label (`machineconfiguration.openshift.io/role`), if any.
    pub fn role(&self) -> Option<&str> {
        self.labels()?.get(ROLE_LABEL).map(String::as_str)
    }

    /// An annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// Whether one of the MCO's controllers generated this MachineConfig: it carries
    /// `machineconfiguration.openshift.io/generated-by-controller-version` with a value. An
    /// empty value counts as absent, as in the MCO (`cfg.Annotations[key] != ""`).
    pub fn is_generated_by_controller(&self) -> bool {
        self.annotation(GENERATED_BY_CONTROLLER_VERSION_ANNOTATION)
            .is_some_and(|v| !v.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mc(value: Value) -> MachineConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn helpers_read_metadata() {
        struct Case {
            object: Value,
            name: &'static str,
            has_labels: bool,
            role: Option<&'static str>,
            generated: bool,
        }
        let cases = [
            Case {
                object: json!({"metadata": {"name": "99-worker-ssh",
                    "labels": {"machineconfiguration.openshift.io/role": "worker"}}, "spec": {}}),
                name: "99-worker-ssh",
                has_labels: true,
                role: Some("worker"),
                generated: false,
            },
            Case {
                object: json!({"metadata": {"name": "00-master", "labels": {"x": "y"},
                    "annotations": {"machineconfiguration.openshift.io/generated-by-controller-version": "abc"}},
                    "spec": {}}),
                name: "00-master",
                has_labels: true,
                role: None,
                generated: true,
            },
            Case {
                object: json!({"metadata": {"name": "50-user", "labels": {"x": "y"},
                    "annotations": {"machineconfiguration.openshift.io/generated-by-controller-version": ""}},
                    "spec": {}}),
                name: "50-user",
                has_labels: true,
                role: None,
                generated: false,
            },
            Case {
                object: json!({"metadata": {"labels": {}}, "spec": {}}),
                name: "",
                has_labels: false,
                role: None,
                generated: false,
            },
            Case {
                object: json!({"metadata": {"name": "bare"}, "spec": {}}),
                name: "bare",
                has_labels: false,
                role: None,
                generated: false,
            },
        ];
        for c in cases {
            let m = mc(c.object.clone());
            assert_eq!(m.name(), c.name, "{}", c.object);
            assert_eq!(m.labels().is_some(), c.has_labels, "{}", c.object);
            assert_eq!(m.role(), c.role, "{}", c.object);
            assert_eq!(m.is_generated_by_controller(), c.generated, "{}", c.object);
        }
    }

    #[test]
    fn go_style_empty_values_decode() {
        // What `json.Marshal` of an MCO MachineConfig looks like: every field present.
        let m = mc(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "x"},
            "spec": {"osImageURL": "", "baseOSExtensionsContainerImage": "", "config": null,
                     "kernelArguments": null, "extensions": null, "fips": false, "kernelType": ""}
        }));
        assert_eq!(m.spec, MachineConfigSpec::default());
        assert_eq!(
            serde_json::to_value(&m.spec).unwrap(),
            json!({}),
            "empty fields are omitted"
        );
    }

    #[test]
    fn rejects_non_object_config() {
        let err = serde_json::from_value::<MachineConfig>(
            json!({"metadata": {"name": "x"}, "spec": {"config": "ignition"}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
