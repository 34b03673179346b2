//! What the executor observed, as plain data: per pool, the pool itself, its opt-in (a
//! MachineOSConfig or the legacy label + ConfigMap), its rendered config, the resolved base
//! image, its MachineOSBuilds with their backends' status, and what the registry holds; plus
//! the cluster-wide MachineOSImages and image references in use (for retention).
//!
//! Raw user input stays raw here (the builder type and push spec as strings, the legacy
//! ConfigMap as its data map, Secrets as a presence/type observation) so that [`crate::decide()`]
//! validates it and reports a bad field as a condition naming the object and the field,
//! instead of the executor failing to deserialize it. The API objects themselves
//! (`machineos-api`) are mapped to these types by the executor.

use std::collections::BTreeMap;

use machineos_diagnostics::Classified;
use serde::Serialize;

use crate::phase::Phase;

pub use machineos_vocab::Timestamp;

/// Everything [`crate::decide()`] looks at.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Observed {
    /// The controller's namespace (its ConfigMaps, Secrets and Events), `machineos` by default.
    pub namespace: String,
    /// Every pool that has opted in or has builds, in any order.
    pub pools: Vec<PoolObserved>,
    /// Secrets in the controller's namespace, by name; a referenced name absent here is
    /// missing.
    pub secrets: BTreeMap<String, SecretState>,
    /// Every MachineOSImage.
    pub machine_os_images: Vec<MachineOSImageObserved>,
    /// Digested pullspecs something uses: nodes' current and desired images, pools,
    /// MachineImages. Retention never deletes an image whose digest is here.
    pub images_in_use: Vec<String>,
    /// The builder backends this controller runs; a build for another one gets a
    /// "not supported yet" condition. Until the Job/Build backends land: `[Native]`
    /// ([`Observed::new`]; the `Default` value supports none).
    pub supported_backends: Vec<Backend>,
    /// MachineOSConfigs no pool takes: the pool they name does not exist, or they name none
    /// ([`crate::decide::decide_unbound`] says so on each).
    pub unbound_machine_os_configs: Vec<UnboundMachineOSConfig>,
}

/// A MachineOSConfig whose `spec.machineConfigPool.name` names no existing pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UnboundMachineOSConfig {
    /// The MachineOSConfig.
    pub config: MachineOSConfigObserved,
    /// The pool it names (`None`: it names none).
    pub pool: Option<String>,
}

impl Observed {
    /// An empty observation for a controller in `namespace` that runs the native builder
    /// only (what this controller runs until the Job and OpenShift Build backends land).
    pub fn new(namespace: &str) -> Self {
        Observed {
            namespace: namespace.to_owned(),
            supported_backends: vec![Backend::Native],
            ..Default::default()
        }
    }
}

/// One pool and everything about its builds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PoolObserved {
    /// The MachineConfigPool.
    pub pool: Pool,
    /// How it opted in, if it did.
    pub opt_in: Option<OptIn>,
    /// The rendered MachineConfig named by the pool's `spec.configuration`, if it exists.
    pub rendered: Option<RenderedConfig>,
    /// The base image by digest, resolved by the executor from the rendered config's
    /// `osImageURL` (else the `machine-config-osimageurl` ConfigMap); `None` until resolved.
    pub base_image: Option<String>,
    /// Why the base image cannot be had, when the executor knows it cannot (no reference
    /// anywhere, or the registry says it does not exist or refuses the credentials): the
    /// object and field to blame, and the message. `None` while it may still resolve.
    pub base_image_error: Option<BaseImageError>,
    /// Every MachineOSBuild of this pool's MachineOSConfig (or legacy opt-in).
    pub builds: Vec<BuildObserved>,
    /// What the registry holds for a build name (the tag `repo:<build name>`), when the
    /// executor has looked; a name absent here has not been checked.
    pub registry: BTreeMap<String, RegistryObservation>,
}

/// An object an action or Event is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ObjectRef {
    /// Kind: `MachineOSConfig`, `MachineOSBuild`, `MachineConfigPool`, `ConfigMap`, `Secret`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// UID, when known (owner references need it).
    pub uid: Option<String>,
}

impl ObjectRef {
    /// A cluster-scoped object.
    pub fn cluster(kind: &str, name: &str) -> Self {
        ObjectRef {
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: None,
            uid: None,
        }
    }
    /// A namespaced object.
    pub fn namespaced(kind: &str, namespace: &str, name: &str) -> Self {
        ObjectRef {
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: Some(namespace.to_owned()),
            uid: None,
        }
    }
}

/// Why a pool's base image is unavailable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BaseImageError {
    /// The object that names (or should name) the base image: the rendered MachineConfig or
    /// the `machine-config-osimageurl` ConfigMap.
    pub object: ObjectRef,
    /// Its field (`spec.osImageURL`, `data.baseOSContainerImage`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The MachineConfigPool fields the lifecycle reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Pool {
    /// metadata.name.
    pub name: String,
    /// metadata.uid (for owner references of legacy builds).
    pub uid: String,
    /// metadata.labels.
    pub labels: BTreeMap<String, String>,
    /// metadata.annotations.
    pub annotations: BTreeMap<String, String>,
    /// spec.configuration.name: the rendered MachineConfig the pool targets.
    pub rendered_config: Option<String>,
    /// status.conditions.
    pub conditions: Vec<PoolCondition>,
}

impl Pool {
    /// The first True condition among [`crate::vocab::BLOCKING_POOL_CONDITIONS`]: the pool is
    /// degraded for a reason other than its image build.
    pub fn degraded_for_another_reason(&self) -> Option<&PoolCondition> {
        self.conditions.iter().find(|c| {
            c.status == "True" && crate::vocab::BLOCKING_POOL_CONDITIONS.contains(&c.type_.as_str())
        })
    }

    /// The condition of this type, if set.
    pub fn condition(&self, type_: &str) -> Option<&PoolCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// A MachineConfigPool condition (its time is the executor's business).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolCondition {
    /// type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// reason.
    pub reason: String,
    /// message.
    pub message: String,
}

/// How a pool opted in to layering.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum OptIn {
    /// A `v1` MachineOSConfig whose `spec.machineConfigPool.name` is the pool.
    MachineOSConfig(Box<MachineOSConfigObserved>),
    /// The legacy pool label plus the `on-cluster-build-config` ConfigMap.
    Legacy(LegacyOptIn),
}

/// A MachineOSConfig, its user input raw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MachineOSConfigObserved {
    /// metadata.name.
    pub name: String,
    /// metadata.uid (owner references).
    pub uid: String,
    /// metadata.generation.
    pub generation: i64,
    /// metadata.annotations.
    pub annotations: BTreeMap<String, String>,
    /// spec.imageBuilder.imageBuilderType as written (`Native`, `Job`, …).
    pub image_builder_type: String,
    /// spec.renderedImagePushSpec as written.
    pub rendered_image_push_spec: String,
    /// spec.renderedImagePushSecret.name.
    pub rendered_image_push_secret: String,
    /// spec.baseImagePullSecret.name, if given.
    pub base_image_pull_secret: Option<String>,
    /// spec.containerFile: (containerfileArch, content), in any order.
    pub containerfiles: Vec<(String, String)>,
    /// status.currentImagePullSpec.
    pub current_image_pull_spec: Option<String>,
    /// status.machineOSBuild.name.
    pub current_build: Option<String>,
    /// status.observedGeneration.
    pub observed_generation: Option<i64>,
    /// status.conditions (type, status, reason, message).
    pub conditions: Vec<PoolCondition>,
    /// A field the controller could not read (its JSON path, what is wrong): the object
    /// is reported as invalid at that field before anything else.
    pub unreadable: Option<(String, String)>,
}

impl MachineOSConfigObserved {
    /// The condition of type `type_`, if set.
    pub fn condition(&self, type_: &str) -> Option<&PoolCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// The legacy opt-in: the pool carries the layering label; the ConfigMap's data, if found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LegacyOptIn {
    /// `on-cluster-build-config`'s data; `None` when the ConfigMap does not exist.
    pub config_map: Option<BTreeMap<String, String>>,
}

/// A Secret, as far as a build cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SecretState {
    /// Exists with type `kubernetes.io/dockerconfigjson` and a parseable `.dockerconfigjson`.
    Usable,
    /// Exists but unusable; the string says why (wrong type, bad JSON) without its content.
    Invalid(String),
}

/// The rendered MachineConfig the pool targets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RenderedConfig {
    /// metadata.name (`rendered-<pool>-<hash>`).
    pub name: String,
    /// sha256 of the rendered config's stored JSON: what the image carries.
    pub content_digest: String,
    /// spec.baseOSExtensionsContainerImage, if set.
    pub extensions_image: Option<String>,
}

/// A MachineOSBuild and what its backend reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BuildObserved {
    /// metadata.name (`<pool>-<hash>`).
    pub name: String,
    /// metadata.generation (the value of conditions' observedGeneration).
    pub generation: i64,
    /// metadata.creationTimestamp.
    pub created: Timestamp,
    /// spec.machineConfig.name (also its `rendered-machine-config` label).
    pub rendered_config: String,
    /// The phase its conditions say ([`Phase::from_conditions`]).
    pub phase: Phase,
    /// status.buildStart.
    pub build_start: Option<Timestamp>,
    /// status.buildEnd.
    pub build_end: Option<Timestamp>,
    /// status.digestedImagePushSpec.
    pub digested_image: Option<String>,
    /// What its backend reports; `None` when no backend knows the build (never started, or
    /// the controller restarted and an in-process build is gone).
    pub backend: Option<BackendStatus>,
    /// How often it was started again after a transient failure
    /// ([`crate::vocab::BUILD_RETRIES_ANNOTATION`], [`crate::vocab::BUILD_RETRIED_AT_ANNOTATION`]).
    pub retries: Retries,
}

/// The transient-failure retries of one build, as its annotations record them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Retries {
    /// Times started again (0: the first attempt is running or ran).
    pub count: u32,
    /// When it was last started again.
    pub last_at: Option<Timestamp>,
}

impl Retries {
    /// Read from a MachineOSBuild's annotations; a missing or unreadable value counts as
    /// none (the worst it costs is one more attempt).
    pub fn from_annotations<'a>(mut get: impl FnMut(&str) -> Option<&'a str>) -> Retries {
        Retries {
            count: get(crate::vocab::BUILD_RETRIES_ANNOTATION)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            last_at: get(crate::vocab::BUILD_RETRIED_AT_ANNOTATION).and_then(|v| v.parse().ok()),
        }
    }
}

/// A builder backend's report on one build (MCO `MapJobStatusToBuildStatus` for Jobs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum BackendStatus {
    /// Accepted, not running yet (a Job with no active pod).
    Pending {
        /// Why it is not running, when the backend knows (a waiting pod's reason, an
        /// unschedulable pod, a failed attempt being retried); shown in the pool's
        /// condition.
        detail: Option<String>,
    },
    /// Running since this time.
    Running {
        /// When the backend started the build.
        since: Timestamp,
    },
    /// Pushed.
    Succeeded {
        /// The image by digest.
        image: RegistryImage,
        /// When it finished.
        at: Timestamp,
    },
    /// Gave up.
    Failed {
        /// Why: the engine's message (file, JSON path) with its reason and retry class.
        error: Classified,
        /// When it gave up.
        at: Timestamp,
    },
}

/// What a registry holds for one build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum RegistryObservation {
    /// The tag exists.
    Present(RegistryImage),
    /// 404.
    Absent,
    /// Anything else (auth denied, 5xx): never a reason to rebuild (`docs/mco-behaviour.md` §2.7).
    Error {
        /// The error, without credentials.
        message: String,
        /// Whether retrying can help.
        transient: bool,
    },
}

/// An image in the registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RegistryImage {
    /// `repo@sha256:…` (the index for a multi-arch image).
    pub image: String,
    /// (architecture, manifest digest) per architecture.
    pub architectures: Vec<(String, String)>,
    /// What the base is, as the build detected it from the image itself (none when the
    /// image was found in the registry rather than built).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<ImageVariant>,
}

/// A base image's OS variant, as detected from its `/usr/lib/os-release` and labels
/// (`machineos-variant`): recorded in the MachineOSImage's `spec.variant`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImageVariant {
    /// `fcos`, `scos`, `rhcos`, `bootc` or `container`.
    pub kind: String,
    /// os-release `ID`.
    pub id: String,
    /// os-release `VERSION_ID`.
    pub version_id: String,
    /// os-release `VARIANT_ID`.
    pub variant_id: String,
}

/// A MachineOSImage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MachineOSImageObserved {
    /// metadata.name (the build's name).
    pub name: String,
    /// spec.machineConfigPool.name.
    pub pool: String,
    /// spec.machineOSBuild.name.
    pub build: Option<String>,
    /// spec.image.
    pub image: String,
}

/// A builder backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Backend {
    /// machineos' in-process native builder (`imageBuilderType: Native`, or a legacy opt-in
    /// without `imageBuilderType`).
    Native,
    /// A Kubernetes Job (`Job`; legacy `custom-pod-builder`).
    Job,
    /// An OpenShift Build (legacy `openshift-image-builder`).
    OpenShiftBuild,
}

impl Backend {
    /// The name recorded in `status.builder.imageBuilderType` and the builder annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Native => "Native",
            Backend::Job => "Job",
            Backend::OpenShiftBuild => "OpenShiftBuild",
        }
    }
}
