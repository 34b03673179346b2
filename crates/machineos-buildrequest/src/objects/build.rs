//! The OpenShift Build `build-<build>` (`build.openshift.io/v1`), the other RUN-step
//! backend: OpenShift's build controller runs the Containerfile in its own (privileged)
//! builder pod with buildah, pushes, and reports the digest in the Build's status.
//!
//! Field names and values are those of openshift/api `build/v1/types.go` (the type names
//! in parentheses; the `StatusReason` constants [`mod@super::build_state`] reads live in
//! `build/v1/consts.go`). Contract of [`build_build`]:
//!
//! * `apiVersion: build.openshift.io/v1`, `kind: Build` (`Build`), named like the Job
//!   ([`super::names::build_name`], `build-<build>` fitted to 63), in the namespace given,
//!   with the labels, annotations and owner reference of the Job (the MachineOSBuild as
//!   controller, `blockOwnerDeletion`).
//! * `spec` (`BuildSpec`, which inlines `CommonSpec`):
//!   * `serviceAccount` when given; otherwise OpenShift runs the build as the namespace's
//!     `builder` service account.
//!   * `source` (`BuildSource`): `type: Dockerfile` (`BuildSourceDockerfile`), `dockerfile`
//!     = the rendered Containerfile inline, and `configMaps` (`ConfigMapBuildSource`):
//!     `mc-<build>`, or every part `mc-<build>-<i>` of a split MachineConfig, each with
//!     `destinationDir: machineconfig` — the build context the MCO's build had
//!     (`machineconfig/machineconfig.json.gz`). The Containerfile does not read it: it
//!     starts `FROM` the native image, where the MachineConfig is applied already; it is
//!     an input as the MCO's, for parity and inspection. A split MachineConfig's parts land
//!     side by side in that directory (`machineconfig.json.gz.part<i>`) and are not
//!     reassembled (no script runs before the build here; nothing reads them either).
//!     The Containerfile ConfigMap is not used: the text is inline.
//!   * `strategy` (`BuildStrategy`): `type: Docker` (`DockerBuildStrategyType`),
//!     `dockerStrategy` (`DockerBuildStrategy`): `pullSecret` = the merged Secret
//!     `pull-<build>` ([`super::secrets`]; one Secret for the native image in the push
//!     registry and the extensions image), `noCache: true`, `imageOptimizationPolicy:
//!     SkipLayers` (`ImageOptimizationSkipLayers`, a valid value: OpenShift's builder then
//!     runs buildah with layers off, as `buildah bud` runs by default in the Job, so the
//!     image gets one new layer over the `FROM` image; the MCO's Build used the same).
//!     No `from` (it would replace the `FROM` line), no `env` (the builder writes strategy
//!     variables into the Containerfile as `ENV` after `FROM`, so they would land in the OS
//!     image; `BUILDAH_ISOLATION` is the builder pod's business), no `buildArgs`.
//!   * `output` (`BuildOutput`): `to: {kind: DockerImage, name: <tag>}` (a
//!     `corev1.ObjectReference`; `DockerImage` is one of the two kinds it allows),
//!     `pushSecret: {name: <push Secret>}`. No `imageLabels`: the Containerfile sets its
//!     labels itself.
//!   * `nodeSelector: {kubernetes.io/arch: <arch>}` when an architecture is given. Left
//!     out otherwise, so the cluster's default build node selector applies (an empty map
//!     would turn it off).
//!   * `completionDeadlineSeconds` when given (the API server wants it > 0; refused here
//!     with [`BuildApiError::InvalidDeadline`]).
//!   * `triggeredBy` (`[]BuildTriggerCause`): its Go field has no `omitempty`, so the API's
//!     OpenAPI schema lists it as required; one cause with the `message` `machineos:
//!     MachineOSBuild <build>` (shown by `oc describe build`).
//! * The API server refuses a `dockerfile` above 60 000 bytes (openshift-apiserver's
//!   `maxDockerfileLengthBytes`); [`build_build`] refuses it first, with
//!   [`BuildApiError::ContainerfileTooLarge`] naming the build and the sizes.
//!
//! Differences from the Job backend, which the Build's builder decides: the builder adds
//! `ENV OPENSHIFT_BUILD_NAME`/`OPENSHIFT_BUILD_NAMESPACE` and `io.openshift.build.*`
//! labels to the image's last stage; the heredocs and `RUN --mount=type=bind,from=` the
//! template uses need a builder with a buildah that supports them (current OpenShift
//! releases' builder is buildah-based; not verified here).
//!
//! Why JSON values: `k8s-openapi` has no OpenShift types; the tests check every field path
//! against a list derived from `types.go`'s JSON tags.

use machineos_diagnostics::{Classify, Retry};
use serde_json::{Value, json};

use super::names::{
    BuildMeta, build_name, machine_config_config_map_name, machine_config_part_name, object_meta,
    pull_secret_name,
};

/// The `apiVersion` of the Build.
pub const BUILD_API_VERSION: &str = "build.openshift.io/v1";
/// Where the MachineConfig ConfigMap(s) land in the build context.
pub const MACHINECONFIG_DESTINATION_DIR: &str = "machineconfig";
/// The largest inline Dockerfile the API server accepts (bytes).
pub const MAX_DOCKERFILE_BYTES: usize = 60_000;

/// Everything the OpenShift Build is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildApiInputs {
    /// The build.
    pub meta: BuildMeta,
    /// The namespace of the Build, its ConfigMaps and Secrets.
    pub namespace: String,
    /// Where to push (the MachineOSBuild's `renderedImagePushSpec`, a tagged pullspec).
    pub tag: String,
    /// The rendered Containerfile ([`crate::containerfile::render`]).
    pub containerfile: String,
    /// The Secret to push with (`kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg`).
    pub push_secret: String,
    /// How many MachineConfig ConfigMaps there are (1: `mc-<build>`; more: the parts).
    pub mc_parts: usize,
    /// The target architecture in Kubernetes' naming (`amd64`, `arm64`, …): the build pod
    /// is scheduled on such a node. None: the cluster's default build node selector.
    pub arch: Option<String>,
    /// The build's service account; None: OpenShift's `builder`.
    pub service_account: Option<String>,
    /// `spec.completionDeadlineSeconds`, if any (> 0).
    pub completion_deadline_seconds: Option<i64>,
}

impl BuildApiInputs {
    /// Inputs with one MachineConfig ConfigMap and no architecture, service account or
    /// deadline.
    pub fn new(
        meta: BuildMeta,
        namespace: impl Into<String>,
        tag: impl Into<String>,
        containerfile: impl Into<String>,
        push_secret: impl Into<String>,
    ) -> Self {
        Self {
            meta,
            namespace: namespace.into(),
            tag: tag.into(),
            containerfile: containerfile.into(),
            push_secret: push_secret.into(),
            mc_parts: 1,
            arch: None,
            service_account: None,
            completion_deadline_seconds: None,
        }
    }
}

/// Why [`build_build`] gives no Build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildApiError {
    /// The Containerfile is larger than the API server accepts inline.
    #[error(
        "Build for MachineOSBuild {build}: spec.source.dockerfile: the Containerfile is {bytes} \
         bytes, more than the {limit} bytes the API server accepts; shorten the MachineOSConfig's \
         containerFile"
    )]
    ContainerfileTooLarge {
        /// The MachineOSBuild.
        build: String,
        /// The Containerfile's size.
        bytes: usize,
        /// [`MAX_DOCKERFILE_BYTES`].
        limit: usize,
    },
    /// `completionDeadlineSeconds` is not positive.
    #[error(
        "Build for MachineOSBuild {build}: spec.completionDeadlineSeconds: {value} is not a \
         positive number of seconds"
    )]
    InvalidDeadline {
        /// The MachineOSBuild.
        build: String,
        /// The value given.
        value: i64,
    },
}

impl Classify for BuildApiError {
    /// `InvalidContainerfile` or `InvalidBuildInput`.
    fn reason(&self) -> &'static str {
        match self {
            BuildApiError::ContainerfileTooLarge { .. } => "InvalidContainerfile",
            BuildApiError::InvalidDeadline { .. } => "InvalidBuildInput",
        }
    }

    /// Permanent: the input must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// The OpenShift Build (see the module documentation).
pub fn build_build(inputs: &BuildApiInputs) -> Result<Value, BuildApiError> {
    let meta = &inputs.meta;
    if inputs.containerfile.len() > MAX_DOCKERFILE_BYTES {
        return Err(BuildApiError::ContainerfileTooLarge {
            build: meta.build.clone(),
            bytes: inputs.containerfile.len(),
            limit: MAX_DOCKERFILE_BYTES,
        });
    }
    let config_maps: Vec<Value> = if inputs.mc_parts <= 1 {
        vec![machine_config_config_map_name(&meta.build)]
    } else {
        (0..inputs.mc_parts)
            .map(|i| machine_config_part_name(&meta.build, i))
            .collect()
    }
    .into_iter()
    .map(|name| {
        json!({
            "configMap": { "name": name },
            "destinationDir": MACHINECONFIG_DESTINATION_DIR,
        })
    })
    .collect();

    let mut spec = json!({
        "source": {
            "type": "Dockerfile",
            "dockerfile": inputs.containerfile,
            "configMaps": config_maps,
        },
        "strategy": {
            "type": "Docker",
            "dockerStrategy": {
                "pullSecret": { "name": pull_secret_name(&meta.build) },
                "noCache": true,
                "imageOptimizationPolicy": "SkipLayers",
            },
        },
        "output": {
            "to": { "kind": "DockerImage", "name": inputs.tag },
            "pushSecret": { "name": inputs.push_secret },
        },
        "triggeredBy": [{ "message": format!("machineos: MachineOSBuild {}", meta.build) }],
    });
    if let Some(account) = &inputs.service_account {
        spec["serviceAccount"] = json!(account);
    }
    if let Some(arch) = &inputs.arch {
        spec["nodeSelector"] = json!({ "kubernetes.io/arch": arch });
    }
    if let Some(deadline) = inputs.completion_deadline_seconds {
        if deadline <= 0 {
            return Err(BuildApiError::InvalidDeadline {
                build: meta.build.clone(),
                value: deadline,
            });
        }
        spec["completionDeadlineSeconds"] = json!(deadline);
    }
    Ok(json!({
        "apiVersion": BUILD_API_VERSION,
        "kind": "Build",
        "metadata": object_meta(meta, &build_name(&meta.build), &inputs.namespace, true),
        "spec": spec,
    }))
}
