//! MachineOSImage: the immutable record of one built image and the status of its rollout,
//! so "which image carries which rendered config, for which architectures, built on which
//! base" is an object rather than something to reconstruct from builds and annotations.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::image::{Digest, DigestedImage};
use crate::schema::metav1_conditions;
use crate::serde_util::is_zero_i64;
use crate::v1::{MachineConfigReference, NameReference};

/// MachineOSImageSpec records what a build produced. It is immutable once set.
// Each `printcolumn(...)` is its own column; clippy reads their repeated `type_` keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1alpha1",
    kind = "MachineOSImage",
    plural = "machineosimages",
    status = "MachineOSImageStatus",
    derive = "PartialEq",
    doc = "MachineOSImage records a layered OS image built for a pool: its digests per architecture and as pulled by nodes, its base image, and the rendered MachineConfig it carries.",
    printcolumn(
        name = "Pool",
        type_ = "string",
        json_path = ".spec.machineConfigPool.name"
    ),
    printcolumn(
        name = "Config",
        type_ = "string",
        json_path = ".spec.machineConfig.name"
    ),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.image",
        priority = 1
    ),
    printcolumn(
        name = "RolledOut",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"RolledOut\")].status"
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
    "message": "machineOSImageSpec is immutable once set"
}]))]
pub struct MachineOSImageSpec {
    /// machineConfigPool is the pool the image was built for.
    pub machine_config_pool: NameReference,

    /// machineConfig is the rendered MachineConfig baked into the image.
    pub machine_config: MachineConfigReference,

    /// machineOSBuild is the build that produced the image, when a MachineOSBuild did.
    #[serde(
        rename = "machineOSBuild",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "NameReference")]
    pub machine_os_build: Option<NameReference>,

    /// image is what nodes pull, by digest: the OCI image index for a multi-architecture
    /// image, else the single image manifest.
    pub image: DigestedImage,

    /// architectures lists the image manifest of each architecture, by digest, in the same
    /// repository as image.
    #[schemars(
        length(min = 1, max = 8),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["architecture"])
    )]
    pub architectures: Vec<ArchitectureManifest>,

    /// baseImage is the OS image the image was built from, by digest.
    pub base_image: DigestedImage,

    /// extensionsImage is the extensions container the build installed RPMs from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "DigestedImage")]
    pub extensions_image: Option<DigestedImage>,

    /// variant is the base's OS as the build detected it from the image itself (its
    /// `/usr/lib/os-release` and labels); absent when the image was not built by this
    /// controller (found in the registry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ImageVariant")]
    pub variant: Option<ImageVariant>,
}

/// A base image's OS, as detected from the image.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ImageVariant {
    /// kind is `fcos` (Fedora CoreOS), `scos` (CentOS Stream CoreOS), `rhcos` (RHEL CoreOS),
    /// `bootc` (another bootable container image) or `container` (not bootable).
    #[schemars(extend("enum" = ["fcos", "scos", "rhcos", "bootc", "container"]))]
    pub kind: String,
    /// id is os-release's `ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
    /// versionID is os-release's `VERSION_ID`.
    #[serde(rename = "versionID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub version_id: Option<String>,
    /// variantID is os-release's `VARIANT_ID`.
    #[serde(rename = "variantID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub variant_id: Option<String>,
}

/// The image manifest for one architecture.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ArchitectureManifest {
    /// architecture in Go/OCI terms (`amd64`, `arm64`, `ppc64le`, `s390x`), as in the
    /// `kubernetes.io/arch` node label.
    #[schemars(length(min = 1, max = 16))]
    pub architecture: String,
    /// digest of the image manifest for this architecture.
    #[schemars(schema_with = "crate::image::digest_schema")]
    pub digest: Digest,
}

/// MachineOSImageStatus reports the image's rollout.
///
/// Condition types: `RollingOut` (nodes are moving to the image), `RolledOut` (every node of
/// the pool runs it), `RolloutFailed` (a node could not be moved to it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSImageStatus {
    /// observedGeneration is the generation the controller last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    #[schemars(range(min = 0))]
    pub observed_generation: i64,

    /// conditions of the rollout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,

    /// disruption is what moving the pool's nodes that do not run the image yet onto it
    /// costs them, by the node disruption policies (the MCO's rules): the strongest class
    /// and how many nodes take each. Absent when no node is left to move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ImageDisruption")]
    pub disruption: Option<ImageDisruption>,

    /// changes is what the image's filesystem differs in from the pool's previous image (the
    /// image the pool had when this one was recorded, else the MachineOSImage of the pool
    /// created before it, else the base image), as `machineos diff` reports it:
    /// counts, whether the kernel or initrd changed, what the paths alone need, and the first
    /// paths. Absent until the controller has compared them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ImageChanges")]
    pub changes: Option<ImageChanges>,
}

/// The most paths `ImageChanges.files` lists; the rest are counted in `omitted`.
pub const MAX_LISTED_CHANGES: usize = 100;

/// What an image's filesystem differs in from another image.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageChanges {
    /// from is the image compared with, by digest.
    #[schemars(length(max = 512))]
    pub from: String,
    /// architecture is the one architecture whose manifests were compared (`amd64`, …): for
    /// an image index, the others' may differ otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16))]
    pub architecture: String,
    /// added counts the paths only in this image.
    #[schemars(range(min = 0))]
    pub added: i64,
    /// removed counts the paths only in the other.
    #[schemars(range(min = 0))]
    pub removed: i64,
    /// modified counts the paths in both that differ (kind, mode, owner, size, symlink
    /// target or contents).
    #[schemars(range(min = 0))]
    pub modified: i64,
    /// kernelChanged says whether a kernel or initramfs (`/usr/lib/modules/*/vmlinuz`,
    /// `initramfs.img`) differs.
    pub kernel_changed: bool,
    /// pathClass is what the paths alone need on a node: `Reboot` for a kernel or initrd,
    /// `SoftReboot` for other paths outside `/etc`, `/var` and `/usr/local`, else `None`
    /// (the node disruption policies decide the rest, see `disruption`).
    #[schemars(extend("enum" = ["None", "SoftReboot", "Reboot"]))]
    pub path_class: String,
    /// files lists the first paths that differ, in path order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub files: Vec<ImageFileChange>,
    /// omitted counts the paths that differ beyond `files`.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    #[schemars(range(min = 0))]
    pub omitted: i64,
}

/// One path that differs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ImageFileChange {
    /// path, absolute.
    #[schemars(length(min = 1, max = 4096))]
    pub path: String,
    /// change is `added`, `removed` or `modified`.
    #[schemars(extend("enum" = ["added", "removed", "modified"]))]
    pub change: String,
    /// kind of the node in this image (in the other for a removed path): `file`, `dir`,
    /// `symlink` or `other`.
    #[schemars(extend("enum" = ["file", "dir", "symlink", "other"]))]
    pub kind: String,
    /// mode is the permission bits, octal (`0644`).
    #[schemars(length(max = 5))]
    pub mode: String,
    /// uid of the owner.
    #[schemars(range(min = 0))]
    pub uid: i64,
    /// gid of the owner.
    #[schemars(range(min = 0))]
    pub gid: i64,
    /// size of a regular file, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub size: Option<i64>,
    /// digest (`sha256:…`) of a regular file's contents in this image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 71))]
    pub digest: Option<String>,
}

/// What moving onto an image costs the nodes still to move.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageDisruption {
    /// class is the strongest over the nodes: `None`, `Reload`, `Restart`, `DaemonReload`,
    /// `Drain`, `SoftReboot` or `Reboot`.
    #[schemars(extend("enum" = ["None", "Reload", "Restart", "DaemonReload", "Drain", "SoftReboot", "Reboot"]))]
    pub class: String,
    /// nodes counts the nodes still to move by class.
    #[schemars(
        length(max = 7),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["class"])
    )]
    pub nodes: Vec<ClassCount>,
    /// policies says where the node disruption policies came from: the cluster's
    /// `MachineConfiguration` object `cluster`, or the MCO's defaults.
    #[schemars(length(max = 64))]
    pub policies: String,
    /// actedOn says whether the rollout acts on the classes: moves below Drain take no
    /// maxUnavailable slot and are applied to the running node, SoftReboot soft-reboots.
    pub acted_on: bool,
}

/// How many nodes take one disruption class.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ClassCount {
    /// class, as in `ImageDisruption.class`.
    #[schemars(extend("enum" = ["None", "Reload", "Restart", "DaemonReload", "Drain", "SoftReboot", "Reboot"]))]
    pub class: String,
    /// count of nodes.
    #[schemars(range(min = 0))]
    pub count: i64,
}

impl MachineOSImageSpec {
    /// The manifest digest for one architecture, if the image has it.
    pub fn digest_for(&self, architecture: &str) -> Option<&Digest> {
        self.architectures
            .iter()
            .find(|a| a.architecture == architecture)
            .map(|a| &a.digest)
    }

    /// Whether `image` is an index over several manifests rather than one of them.
    pub fn is_index(&self) -> bool {
        !self
            .architectures
            .iter()
            .any(|a| &a.digest == self.image.digest())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn reads_per_architecture_digests() {
        let index = digest('a');
        let amd = digest('b');
        let arm = digest('c');
        let cases = [
            (
                json!([{"architecture": "amd64", "digest": amd}, {"architecture": "arm64", "digest": arm}]),
                format!("quay.io/o/os@{index}"),
                true,
                Some(amd.clone()),
                Some(arm.clone()),
            ),
            (
                json!([{"architecture": "amd64", "digest": amd}]),
                format!("quay.io/o/os@{amd}"),
                false,
                Some(amd.clone()),
                None,
            ),
        ];
        for (architectures, image, is_index, want_amd, want_arm) in cases {
            let spec: MachineOSImageSpec = serde_json::from_value(json!({
                "machineConfigPool": {"name": "worker"},
                "machineConfig": {"name": "rendered-worker-0123"},
                "image": image,
                "architectures": architectures,
                "baseImage": format!("quay.io/fedora/fedora-coreos@{}", digest('d')),
            }))
            .unwrap();
            assert_eq!(spec.is_index(), is_index, "{image}");
            assert_eq!(spec.digest_for("amd64").map(Digest::to_string), want_amd);
            assert_eq!(spec.digest_for("arm64").map(Digest::to_string), want_arm);
        }
    }

    #[test]
    fn rejects_tagged_images() {
        let err = serde_json::from_value::<MachineOSImageSpec>(json!({
            "machineConfigPool": {"name": "worker"},
            "machineConfig": {"name": "rendered-worker-0123"},
            "image": "quay.io/o/os:latest",
            "architectures": [],
            "baseImage": format!("quay.io/fedora/fedora-coreos@{}", digest('d')),
        }))
        .unwrap_err();
        assert!(err.to_string().contains("has no digest"), "{err}");
    }
}
