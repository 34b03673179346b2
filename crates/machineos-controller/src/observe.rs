//! The API objects the controller's caches hold → the lifecycle's [`Observed`]: pure.
//!
//! The executor keeps every object it watches as JSON ([`DynamicObject`]), not as the typed
//! `machineos-api` structs, on purpose: one object a user wrote that does not deserialize
//! (an unknown builder type, a malformed push spec) must become a condition naming its field
//! (`machineos_build_lifecycle::config::resolve` does that from the raw strings), never a
//! watch stream that fails forever. So this module reads them through the lenient typed
//! views of `machineos_kube::mco` (every field optional, enums as strings) and leaves their
//! validation to the lifecycle; a MachineOSConfig field of the wrong JSON type reaches the
//! lifecycle as `unreadable` (its path and why) and becomes the MachineOSConfig's condition.
//!
//! Which pools are observed: every pool that opts in (a MachineOSConfig names it, or it
//! carries the legacy label) or has builds. A pool with both a MachineOSConfig and the
//! legacy label follows the MachineOSConfig (the newer API wins, as in the MCO, where the
//! legacy path was removed). What the controller learnt outside the API server — backend
//! status of each build, registry answers, base images resolved to digests — comes in as
//! [`Learnt`].
//!
//! The rendered config's content digest is SHA-256 of its `spec` serialized as JSON with
//! the keys in the order the API server returned them (`serde_json`'s `preserve_order`):
//! two rendered configs with the same name have the same spec (their name is a hash of it),
//! so the digest only has to be stable for one object, which it is.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::DynamicObject;
use machineos_build_lifecycle::vocab;
use machineos_build_lifecycle::{
    BackendStatus, BaseImageError, BuildObserved, LegacyOptIn, MachineOSConfigObserved,
    MachineOSImageObserved, ObjectRef, Observed, OptIn, Phase, Pool, PoolCondition, PoolObserved,
    RegistryObservation, RenderedConfig, Retries, SecretState, Timestamp,
};
use machineos_kube::mco::{
    ImageView, MachineConfigView, MachineOSBuildView, MachineOSConfigView, PoolView,
};
use machineos_kube::view;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The ConfigMap whose `baseOSContainerImage` is the base image when the rendered config
/// sets no `osImageURL` (and whose `baseOSExtensionsContainerImage` is the extensions image).
pub const OS_IMAGE_URL_CONFIG_MAP: &str = "machine-config-osimageurl";

/// Node annotations naming images a node runs or is moving to (MCO daemon constants).
pub const NODE_IMAGE_ANNOTATIONS: [&str; 2] = [
    machineos_vocab::node::CURRENT_IMAGE,
    machineos_vocab::node::DESIRED_IMAGE,
];

/// Everything the caches hold, by kind.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// The controller's namespace.
    pub namespace: String,
    /// MachineConfigPools.
    pub pools: Vec<Arc<DynamicObject>>,
    /// MachineConfigs (only the rendered ones are read here).
    pub machine_configs: Vec<Arc<DynamicObject>>,
    /// MachineOSConfigs.
    pub machine_os_configs: Vec<Arc<DynamicObject>>,
    /// MachineOSBuilds.
    pub builds: Vec<Arc<DynamicObject>>,
    /// MachineOSImages.
    pub images: Vec<Arc<DynamicObject>>,
    /// MachineImages (their `spec.image` is in use).
    pub machine_images: Vec<Arc<DynamicObject>>,
    /// ConfigMaps of the controller's namespace.
    pub config_maps: Vec<Arc<ConfigMap>>,
    /// Secrets of the controller's namespace.
    pub secrets: Vec<Arc<Secret>>,
    /// Nodes, metadata only.
    pub nodes: Vec<Arc<k8s_openapi::api::core::v1::Node>>,
    /// MachineConfigNodes.
    pub machine_config_nodes: Vec<Arc<DynamicObject>>,
    /// Build Jobs of the controller's namespace (ephemeral build objects only).
    pub jobs: Vec<Arc<DynamicObject>>,
    /// Their pods.
    pub pods: Vec<Arc<DynamicObject>>,
    /// OpenShift Builds of the controller's namespace (ephemeral build objects only; empty
    /// where the Build API is not served).
    pub openshift_builds: Vec<Arc<DynamicObject>>,
}

impl Snapshot {
    /// The registry credentials (`config.json` bytes; a legacy `.dockercfg` converted, see
    /// `machineos_kube::secret`) of Secret `name` in the controller's namespace, with a name
    /// for messages (`Secret <ns>/<name>`).
    pub fn dockerconfigjson(&self, name: &str) -> Option<(String, Vec<u8>)> {
        let sec = self
            .secrets
            .iter()
            .find(|x| x.metadata.name.as_deref() == Some(name))?;
        let bytes = machineos_kube::secret::registry_auth(sec).ok()?;
        Some((format!("Secret {}/{name}", self.namespace), bytes))
    }
}

/// What the controller knows that is not in the API server.
#[derive(Debug, Default, Clone)]
pub struct Learnt {
    /// Backend status by build name.
    pub backend: HashMap<String, BackendStatus>,
    /// Registry answers by build name.
    pub registry: HashMap<String, RegistryObservation>,
    /// Each pool's base image as last resolved with its current credentials: pool →
    /// (reference, `repo@sha256:…`); used only while the pool's reference is still that one.
    pub base_images: HashMap<String, (String, String)>,
    /// Pools whose base image is known to be unavailable, and why.
    pub base_image_errors: HashMap<String, BaseImageError>,
    /// The builder backends this controller runs (empty: the native one only).
    pub supported_backends: Vec<machineos_build_lifecycle::Backend>,
}

/// Where a pool's base image comes from: the rendered config's `spec.osImageURL` when it
/// sets one, else the `machine-config-osimageurl` ConfigMap's `baseOSContainerImage` — the
/// object and field to name when it is missing or unusable, and the reference, not yet
/// resolved (`None` when neither gives one).
#[derive(Debug, Clone, PartialEq)]
pub struct BaseImageSource {
    /// The reference as written.
    pub reference: Option<String>,
    /// The object that names it (or should).
    pub object: ObjectRef,
    /// Its field.
    pub field: &'static str,
}

/// The [`BaseImageSource`] of a pool whose rendered config is `rendered` (named
/// `rendered_name`), in the controller's `namespace`.
pub fn base_image_source(
    rendered: Option<&DynamicObject>,
    rendered_name: &str,
    config_maps: &[Arc<ConfigMap>],
    namespace: &str,
) -> BaseImageSource {
    if let Some(url) = rendered
        .and_then(|r| {
            view_of::<MachineConfigView>("MachineConfig", r)
                .spec
                .os_image_url
        })
        .filter(|s| !s.is_empty())
    {
        return BaseImageSource {
            reference: Some(url),
            object: ObjectRef::cluster("MachineConfig", rendered_name),
            field: "spec.osImageURL",
        };
    }
    BaseImageSource {
        reference: config_map_value(config_maps, OS_IMAGE_URL_CONFIG_MAP, "baseOSContainerImage"),
        object: ObjectRef::namespaced("ConfigMap", namespace, OS_IMAGE_URL_CONFIG_MAP),
        field: "data.baseOSContainerImage",
    }
}

/// A value of a ConfigMap by name (non-empty).
pub fn config_map_value(config_maps: &[Arc<ConfigMap>], name: &str, key: &str) -> Option<String> {
    config_maps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .and_then(|c| c.data.as_ref())
        .and_then(|d| d.get(key))
        .filter(|s| !s.is_empty())
        .cloned()
}

/// Whether a reference is already by digest.
pub fn is_digested(reference: &str) -> bool {
    reference.contains("@sha256:")
}

/// SHA-256 of a rendered MachineConfig's spec (see the module contract).
pub fn content_digest(rendered: &DynamicObject) -> String {
    let spec = rendered.data.get("spec").cloned().unwrap_or(Value::Null);
    let bytes = serde_json::to_vec(&spec).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))
}

/// An RFC 3339 time (`metav1.Time`) in seconds since the epoch.
pub fn parse_time(s: &str) -> Option<Timestamp> {
    machineos_kube::time::parse(s)
}

/// A lenient view of `obj`; a field it cannot read is logged (the API server's schema makes
/// that rare) and the object observed as if the field were absent.
pub(crate) fn view_of<T: serde::de::DeserializeOwned + Default>(
    kind: &str,
    obj: &DynamicObject,
) -> T {
    let (v, error) = view::<T>(kind, obj);
    if let Some(e) = error {
        tracing::warn!(error = %e, "a field of a cached object cannot be read; observed as absent");
    }
    v
}

/// Conditions as the lifecycle compares them (type, status, reason, message; no times).
fn lifecycle_conditions(list: Vec<machineos_kube::ConditionView>) -> Vec<PoolCondition> {
    list.into_iter()
        .map(|c| PoolCondition {
            type_: c.type_,
            status: c.status,
            reason: c.reason,
            message: c.message,
        })
        .collect()
}

fn pool_of(obj: &DynamicObject) -> Pool {
    let v: PoolView = view_of("MachineConfigPool", obj);
    let conditions = lifecycle_conditions(v.status.conditions);
    Pool {
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
        labels: obj.labels().clone(),
        annotations: obj.annotations().clone(),
        rendered_config: v
            .spec
            .configuration
            .as_ref()
            .and_then(|c| c.get())
            .map(str::to_owned),
        conditions,
    }
}

/// A MachineOSConfig as the lifecycle reads it: its user input raw (the lifecycle validates
/// it); a field of the wrong type is passed on as `unreadable`, which the lifecycle reports
/// on the MachineOSConfig.
fn machine_os_config_of(obj: &DynamicObject) -> MachineOSConfigObserved {
    let (v, error) = view::<MachineOSConfigView>("MachineOSConfig", obj);
    let (spec, status) = (v.spec, v.status);
    MachineOSConfigObserved {
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
        generation: obj.metadata.generation.unwrap_or(1),
        annotations: obj.annotations().clone(),
        image_builder_type: spec.image_builder.image_builder_type.unwrap_or_default(),
        rendered_image_push_spec: spec.rendered_image_push_spec.unwrap_or_default(),
        rendered_image_push_secret: spec.rendered_image_push_secret.name.unwrap_or_default(),
        base_image_pull_secret: spec.base_image_pull_secret.get().map(str::to_owned),
        containerfiles: spec
            .container_file
            .into_iter()
            .map(|c| {
                (
                    c.containerfile_arch.unwrap_or_else(|| "NoArch".to_owned()),
                    c.content.unwrap_or_default(),
                )
            })
            .collect(),
        current_image_pull_spec: status.current_image_pull_spec,
        current_build: status.machine_os_build.name,
        observed_generation: status.observed_generation,
        conditions: lifecycle_conditions(status.conditions),
        unreadable: error.map(|e| (e.path, e.message)),
    }
}

/// A MachineOSBuild's phase from its conditions.
pub fn build_phase(obj: &DynamicObject) -> Phase {
    let v: MachineOSBuildView = view_of("MachineOSBuild", obj);
    phase_of(&v)
}

fn phase_of(v: &MachineOSBuildView) -> Phase {
    Phase::from_conditions(
        v.status
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str())),
    )
}

fn build_of(obj: &DynamicObject, learnt: &Learnt) -> BuildObserved {
    let v: MachineOSBuildView = view_of("MachineOSBuild", obj);
    let name = obj.name_any();
    BuildObserved {
        backend: learnt.backend.get(&name).cloned(),
        generation: obj.metadata.generation.unwrap_or(1),
        created: obj
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        rendered_config: v.spec.machine_config.name.clone().unwrap_or_default(),
        phase: phase_of(&v),
        build_start: v.status.build_start.as_deref().and_then(parse_time),
        build_end: v.status.build_end.as_deref().and_then(parse_time),
        digested_image: v.status.digested_image_push_spec,
        retries: Retries::from_annotations(|k| obj.annotations().get(k).map(String::as_str)),
        name,
    }
}

/// The pool a MachineOSBuild belongs to: its target-pool label.
pub fn build_pool(obj: &DynamicObject) -> Option<&str> {
    obj.labels()
        .get(vocab::TARGET_POOL_LABEL)
        .map(String::as_str)
}

fn secret_state(s: &Secret) -> SecretState {
    let bytes = match machineos_kube::secret::registry_auth(s) {
        Ok(b) => b,
        Err(why) => return SecretState::Invalid(why),
    };
    match machineos_image::auth::AuthFile::parse(&bytes) {
        Ok(_) => SecretState::Usable,
        Err(e) => {
            let key = if s.type_.as_deref() == Some(machineos_kube::secret::DOCKER_CFG.0) {
                machineos_kube::secret::DOCKER_CFG.1
            } else {
                machineos_kube::secret::DOCKER_CONFIG_JSON.1
            };
            SecretState::Invalid(format!("{key}: {e}"))
        }
    }
}

/// The whole observation.
pub fn observe(s: &Snapshot, learnt: &Learnt) -> Observed {
    let mut o = Observed::new(&s.namespace);
    if !learnt.supported_backends.is_empty() {
        o.supported_backends = learnt.supported_backends.clone();
    }
    o.secrets = s
        .secrets
        .iter()
        .filter_map(|sec| Some((sec.metadata.name.clone()?, secret_state(sec))))
        .collect();
    let rendered: HashMap<String, &DynamicObject> = s
        .machine_configs
        .iter()
        .map(|m| (m.name_any(), m.as_ref()))
        .collect();
    let legacy_cm = s
        .config_maps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(vocab::ON_CLUSTER_BUILD_CONFIG))
        .map(|c| c.data.clone().unwrap_or_default());
    let mut moscs: BTreeMap<String, &DynamicObject> = BTreeMap::new();
    let pool_names: BTreeSet<String> = s.pools.iter().map(|p| p.name_any()).collect();
    for m in &s.machine_os_configs {
        let v: MachineOSConfigView = view_of("MachineOSConfig", m);
        let named = v
            .spec
            .machine_config_pool
            .name
            .as_deref()
            .filter(|p| !p.is_empty());
        // No such pool (or none named): said on the MachineOSConfig (`decide_unbound`),
        // nothing built.
        if named.is_none_or(|p| !pool_names.contains(p)) {
            o.unbound_machine_os_configs
                .push(machineos_build_lifecycle::UnboundMachineOSConfig {
                    config: machine_os_config_of(m),
                    pool: named.map(str::to_owned),
                });
        }
        if let Some(pool) = named {
            // Two MachineOSConfigs for one pool: the older one (by creation, then name)
            // wins, deterministically; the API's own validation is what should prevent it.
            let key = (m.metadata.creation_timestamp.clone(), m.name_any());
            match moscs.get(pool) {
                Some(prev)
                    if (prev.metadata.creation_timestamp.clone(), prev.name_any()) <= key => {}
                _ => {
                    moscs.insert(pool.to_owned(), m.as_ref());
                }
            }
        }
    }
    let mut builds_by_pool: BTreeMap<&str, Vec<BuildObserved>> = BTreeMap::new();
    for b in &s.builds {
        if let Some(pool) = build_pool(b) {
            builds_by_pool
                .entry(pool)
                .or_default()
                .push(build_of(b, learnt));
        }
    }
    for p in &s.pools {
        let pool = pool_of(p);
        let opt_in = if let Some(m) = moscs.get(&pool.name) {
            Some(OptIn::MachineOSConfig(Box::new(machine_os_config_of(m))))
        } else if pool.labels.contains_key(vocab::LAYERING_ENABLED_LABEL) {
            Some(OptIn::Legacy(LegacyOptIn {
                config_map: legacy_cm.clone(),
            }))
        } else {
            None
        };
        let builds = builds_by_pool
            .remove(pool.name.as_str())
            .unwrap_or_default();
        if opt_in.is_none() && builds.is_empty() {
            continue;
        }
        let rendered_obj = pool
            .rendered_config
            .as_deref()
            .and_then(|n| rendered.get(n).copied());
        let rendered_cfg = rendered_obj.map(|r| RenderedConfig {
            name: r.name_any(),
            content_digest: content_digest(r),
            extensions_image: view_of::<MachineConfigView>("MachineConfig", r)
                .spec
                .base_os_extensions_container_image
                .filter(|s| is_digested(s)),
        });
        let rendered_name = pool.rendered_config.as_deref().unwrap_or_default();
        let base_image =
            base_image_source(rendered_obj, rendered_name, &s.config_maps, &s.namespace)
                .reference
                .and_then(|r| {
                    if is_digested(&r) {
                        Some(r)
                    } else {
                        learnt
                            .base_images
                            .get(&pool.name)
                            .filter(|(reference, _)| *reference == r)
                            .map(|(_, digest)| digest.clone())
                    }
                });
        let names: BTreeSet<&str> = builds.iter().map(|b| b.name.as_str()).collect();
        let registry: BTreeMap<String, RegistryObservation> = learnt
            .registry
            .iter()
            .filter(|(k, _)| {
                names.contains(k.as_str()) || k.starts_with(&format!("{}-", pool.name))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let base_image_error = if base_image.is_none() {
            learnt.base_image_errors.get(&pool.name).cloned()
        } else {
            None
        };
        o.pools.push(PoolObserved {
            base_image_error,
            pool,
            opt_in,
            rendered: rendered_cfg,
            base_image,
            builds,
            registry,
        });
    }
    o.machine_os_images = s
        .images
        .iter()
        .map(|i| {
            let v: ImageView = view_of("MachineOSImage", i);
            MachineOSImageObserved {
                name: i.name_any(),
                pool: v.spec.machine_config_pool.name.unwrap_or_default(),
                build: v.spec.machine_os_build.name,
                image: v.spec.image.unwrap_or_default(),
            }
        })
        .collect();
    let mut in_use: BTreeSet<String> = BTreeSet::new();
    for n in &s.nodes {
        for a in NODE_IMAGE_ANNOTATIONS {
            if let Some(v) = n.annotations().get(a).filter(|v| !v.is_empty()) {
                in_use.insert(v.clone());
            }
        }
    }
    for p in &o.pools {
        if let Some(v) = p
            .pool
            .annotations
            .get(vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION)
        {
            in_use.insert(v.clone());
        }
        if let Some(OptIn::MachineOSConfig(m)) = &p.opt_in
            && let Some(c) = &m.current_image_pull_spec
        {
            in_use.insert(c.clone());
        }
    }
    for m in &s.machine_images {
        if let Some(i) = view_of::<ImageView>("MachineImage", m).spec.image {
            in_use.insert(i);
        }
    }
    o.images_in_use = in_use.into_iter().collect();
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dynamic(v: Value) -> Arc<DynamicObject> {
        Arc::new(serde_json::from_value(v).expect("object"))
    }

    fn pool(name: &str, legacy: bool) -> Arc<DynamicObject> {
        let labels = if legacy {
            json!({vocab::LAYERING_ENABLED_LABEL: ""})
        } else {
            json!({})
        };
        dynamic(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": name, "uid": format!("{name}-uid"), "labels": labels,
                "annotations": {vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION: "r/p@sha256:11"}},
            "spec": {"configuration": {"name": format!("rendered-{name}-1")}},
            "status": {"conditions": [{"type": "RenderDegraded", "status": "False", "reason": "", "message": ""}]},
        }))
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            namespace: "machineos".into(),
            pools: vec![
                pool("worker", true),
                pool("infra", true),
                pool("plain", false),
            ],
            machine_configs: vec![dynamic(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": "rendered-worker-1"},
                "spec": {"osImageURL": "quay.io/os:1", "config": {"ignition": {"version": "3.5.0"}}},
            }))],
            machine_os_configs: vec![dynamic(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
                "metadata": {"name": "worker-mosc", "uid": "m-uid", "generation": 3},
                "spec": {"machineConfigPool": {"name": "worker"},
                    "imageBuilder": {"imageBuilderType": "Natve"},
                    "renderedImagePushSecret": {"name": "push"},
                    "renderedImagePushSpec": "r/worker:latest",
                    "containerFile": [{"content": "RUN true"}]},
                "status": {"currentImagePullSpec": "r/worker@sha256:22"},
            }))],
            jobs: vec![],
            pods: vec![],
            openshift_builds: vec![],
            nodes: vec![Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "n1", "annotations": {
                        "machineconfiguration.openshift.io/desiredImage": "r/worker@sha256:33"}},
                }))
                .expect("node"),
            )],
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_machine_os_config_wins_over_the_legacy_label_and_raw_input_stays_raw() {
        let o = observe(&snapshot(), &Learnt::default());
        let names: Vec<&str> = o.pools.iter().map(|p| p.pool.name.as_str()).collect();
        assert_eq!(
            names,
            ["worker", "infra"],
            "a pool that does not opt in is left out"
        );
        let Some(OptIn::MachineOSConfig(m)) = &o.pools[0].opt_in else {
            panic!("worker: {:?}", o.pools[0].opt_in)
        };
        // A typo stays a typo, for the lifecycle to report with its field.
        assert_eq!(m.image_builder_type, "Natve");
        assert_eq!(
            m.containerfiles,
            [("NoArch".to_string(), "RUN true".to_string())]
        );
        assert_eq!(m.generation, 3);
        assert!(matches!(
            &o.pools[1].opt_in,
            Some(OptIn::Legacy(LegacyOptIn { config_map: None }))
        ));
        // The rendered config is found by the pool's spec.configuration.name; its base image
        // is a tag until resolved.
        assert_eq!(
            o.pools[0].rendered.as_ref().map(|r| r.name.as_str()),
            Some("rendered-worker-1")
        );
        assert_eq!(o.pools[0].base_image, None);
        assert_eq!(o.pools[1].rendered, None);
    }

    #[test]
    fn resolved_base_images_and_images_in_use() {
        let learnt = Learnt {
            base_images: [(
                "worker".to_string(),
                (
                    "quay.io/os:1".to_string(),
                    "quay.io/os@sha256:aa".to_string(),
                ),
            )]
            .into_iter()
            .collect(),
            ..Learnt::default()
        };
        let o = observe(&snapshot(), &learnt);
        assert_eq!(
            o.pools[0].base_image.as_deref(),
            Some("quay.io/os@sha256:aa")
        );
        assert_eq!(
            o.images_in_use,
            ["r/p@sha256:11", "r/worker@sha256:22", "r/worker@sha256:33"]
        );
        // A digest resolved for another reference, or for another pool, does not stand in.
        for (pool, reference) in [("worker", "quay.io/os:0"), ("infra", "quay.io/os:1")] {
            let learnt = Learnt {
                base_images: [(
                    pool.to_string(),
                    (reference.to_string(), "quay.io/os@sha256:aa".to_string()),
                )]
                .into_iter()
                .collect(),
                ..Learnt::default()
            };
            assert_eq!(observe(&snapshot(), &learnt).pools[0].base_image, None);
        }
    }

    #[test]
    fn the_content_digest_is_stable_and_follows_the_spec() {
        let s = snapshot();
        let a = content_digest(&s.machine_configs[0]);
        assert_eq!(a, content_digest(&s.machine_configs[0]));
        let mut other = (*s.machine_configs[0]).clone();
        other.data["spec"]["osImageURL"] = json!("quay.io/os:2");
        assert_ne!(a, content_digest(&other));
        assert!(a.starts_with("sha256:") && a.len() == 71);
    }
}
