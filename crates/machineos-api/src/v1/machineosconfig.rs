//! MachineOSConfig: a pool's opt-in to layered images — where to push, with which secrets,
//! which builder, and the per-architecture Containerfiles — as openshift/api declares it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{NameReference, ObjectReference};
use crate::image::{DigestedImage, MAX_PULLSPEC_LEN};
use crate::schema::{metav1_conditions, tag_pull_spec};
use crate::serde_util::null_as_default;

/// MachineOSConfigSpec describes user-configurable options as well as information about a
/// build process.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSConfig",
    plural = "machineosconfigs",
    status = "MachineOSConfigStatus",
    derive = "PartialEq",
    doc = "MachineOSConfig describes the configuration for a build process managed by the MCO.",
    validation = Rule::new(
        "self.metadata.name == self.spec.machineConfigPool.name || oldSelf.hasValue() && oldSelf.spec.machineConfigPool.name.value() == self.spec.machineConfigPool.name"
    )
    .message("MachineOSConfig name must match the referenced MachineConfigPool name; can only have one MachineOSConfig per MachineConfigPool")
    .optional_old_self(true)
)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    /// machineConfigPool is the pool which the build is for.
    pub machine_config_pool: NameReference,

    /// imageBuilder describes which image builder will be used in each build triggered by
    /// this MachineOSConfig.
    pub image_builder: MachineOSImageBuilder,

    /// baseImagePullSecret is the secret used to pull the base image; defaults to the
    /// cluster-wide pull secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NameReference")]
    pub base_image_pull_secret: Option<NameReference>,

    /// renderedImagePushSecret is the secret used to connect to a user registry.
    pub rendered_image_push_secret: NameReference,

    /// renderedImagePushSpec describes the location of the final image, in the format
    /// `host[:port][/namespace]/name:<tag>`; the tag is replaced by the build's name.
    #[schemars(length(min = 1, max = MAX_PULLSPEC_LEN), transform = tag_pull_spec)]
    pub rendered_image_push_spec: String,

    /// containerFile describes the custom data the user has specified to build into the
    /// image, one Containerfile per architecture, up to 4.
    #[serde(
        rename = "containerFile",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(
        length(min = 0, max = 4),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["containerfileArch"])
    )]
    pub containerfile: Vec<MachineOSContainerfile>,
}

/// Which image builder runs a build.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSImageBuilder {
    /// imageBuilderType specifies the backend to be used to build the image.
    pub image_builder_type: ImageBuilderType,
}

/// The image builder backends. openshift/api's enum has `Job` only; `Native` (issue 14) and
/// `OpenShiftBuild` (issue 15; the MCO's legacy `openshift-image-builder`) are machineos's
/// own values, listed after the MCO's so the schema's enum is a superset of openshift/api's
/// — the one deliberate difference `tests/upstream_crds.rs` allows.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ImageBuilderType {
    /// A Kubernetes Job running the build.
    Job,
    /// machineos's native builder, run in the controller process (no Job, no privileges).
    Native,
    /// An OpenShift `build.openshift.io/v1` Build (Docker strategy) runs the RUN steps on
    /// top of the native image.
    OpenShiftBuild,
}

/// MachineOSContainerfile contains all custom content the user wants built into the image.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSContainerfile {
    /// containerfileArch describes the architecture this containerfile is to be built for;
    /// NoArch (the default) applies to all architectures.
    #[serde(default)]
    pub containerfile_arch: ContainerfileArch,
    /// content is an embedded Containerfile that defines the contents to be built into the
    /// image; it continues the build with `FROM configs AS final`.
    #[schemars(length(max = 4096))]
    pub content: String,
}

/// The architectures a Containerfile can be given for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ContainerfileArch {
    /// arm64 (aarch64).
    #[serde(rename = "ARM64")]
    Arm64,
    /// amd64 (x86_64).
    #[serde(rename = "AMD64")]
    Amd64,
    /// ppc64le.
    #[serde(rename = "PPC64LE")]
    Ppc64le,
    /// s390x.
    #[serde(rename = "S390X")]
    S390x,
    /// Any architecture.
    #[default]
    NoArch,
}

/// MachineOSConfigStatus describes the status this config object and relates it to the
/// builds associated with this MachineOSConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    /// conditions are state related conditions for the object (the MCO sets `Seeded`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,

    /// observedGeneration represents the generation of the MachineOSConfig object observed by
    /// the build controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "i64",
        range(min = 0),
        extend("x-kubernetes-validations" = [{
            "rule": "self >= oldSelf",
            "message": "observedGeneration must not move backwards"
        }])
    )]
    pub observed_generation: Option<i64>,

    /// currentImagePullSpec is the fully qualified image pull spec, by digest, of the image
    /// the last successful build produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "DigestedImage")]
    pub current_image_pull_spec: Option<DigestedImage>,

    /// machineOSBuild is a reference to the MachineOSBuild object for this MachineOSConfig,
    /// which contains the status for the image build.
    #[serde(
        rename = "machineOSBuild",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "ObjectReference")]
    pub machine_os_build: Option<ObjectReference>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_documented_example() {
        let mosc: MachineOSConfig = serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig",
            "metadata": {"name": "worker"},
            "spec": {
                "machineConfigPool": {"name": "worker"},
                "imageBuilder": {"imageBuilderType": "Job"},
                "baseImagePullSecret": {"name": "global-pull-secret-copy"},
                "renderedImagePushSecret": {"name": "push-secret"},
                "renderedImagePushSpec": "image-registry.openshift-image-registry.svc:5000/openshift/os-image:latest",
                "containerFile": [{"containerfileArch": "NoArch",
                    "content": "FROM configs AS final\nRUN rpm-ostree install tree && ostree container commit\n"},
                    {"content": "FROM configs AS final\n"}]
            }
        }))
        .unwrap();
        assert_eq!(
            mosc.spec.image_builder.image_builder_type,
            ImageBuilderType::Job
        );
        assert_eq!(
            mosc.spec.containerfile[1].containerfile_arch,
            ContainerfileArch::NoArch
        );
    }

    #[test]
    fn enums_reject_unknown_values() {
        for (field, value) in [
            (
                "imageBuilderType",
                json!({"imageBuilderType": "PodImageBuilder"}),
            ),
            ("containerfileArch", json!({"imageBuilderType": "Job"})),
        ] {
            let spec = json!({
                "machineConfigPool": {"name": "worker"},
                "imageBuilder": value,
                "renderedImagePushSecret": {"name": "s"},
                "renderedImagePushSpec": "q.io/a/b:c",
                "containerFile": [{"containerfileArch": if field == "containerfileArch" { "RISCV" } else { "AMD64" }, "content": ""}]
            });
            let err = serde_json::from_value::<MachineOSConfigSpec>(spec).unwrap_err();
            assert!(
                err.to_string().contains("unknown variant"),
                "{field}: {err}"
            );
        }
    }
}
