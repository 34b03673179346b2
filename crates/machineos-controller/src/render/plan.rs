//! The render controller: each pool's MachineConfigs → its `rendered-<pool>-<hash>`
//! MachineConfig, and the pool pointed at it — the MCO's render controller
//! (`pkg/controller/render/render_controller.go`: `syncGeneratedMachineConfig`) with the
//! `machineos-render` crate's rules.
//!
//! [`plan`] is pure: a pool, the MachineConfigs, the render defaults, the nodes → a
//! [`RenderPlan`] (what to create and which fields to set). [`crate::execute`] carries it out.
//!
//! * **Selection** is the pool's `machineConfigSelector`; rendered configs themselves (owned
//!   by a pool) are never inputs.
//! * **Success**: the rendered MachineConfig is created when no object of that name exists
//!   (its name is a hash of its content, so an existing one is the same); it is owned by the
//!   pool (`controller: true`), as the MCO does. `spec.configuration` gets its name and the
//!   source list (the MCO's merge order); `RenderDegraded` becomes False if it was True.
//! * **Failure** (a MachineConfig that does not parse or validate, a selector that does not
//!   parse, nothing selected): `RenderDegraded=True` with the error — it names the
//!   MachineConfig and the JSON path — and *nothing else changes*: the previous rendered
//!   config stays in force, as in the MCO.
//! * **`status.configuration`** follows the MCO's node controller's rule
//!   (`calculateStatus`): it becomes `spec.configuration` once every node the pool's
//!   `nodeSelector` selects runs it (`currentConfig` annotation) — at once for a pool with no
//!   nodes. Moving nodes is the rollout's job (a later issue).
//!
//! Render defaults (`osImageURL`, `baseOSExtensionsContainerImage`) come from the
//! `machine-config-osimageurl` ConfigMap in the controller's namespace (the MCO takes them
//! from its ControllerConfig, which the same ConfigMap feeds).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::DynamicObject;
use machineos_api::v1::{MachineConfig, MachineConfigPool};
use machineos_build_lifecycle::PoolCondition;
use machineos_render::{RenderDefaults, Selector};
use serde_json::{Value, json};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use machineos_api::GENERATED_BY_CONTROLLER_VERSION_ANNOTATION as GENERATED_BY;
use machineos_kube::mco::{Configuration, PoolView};
use machineos_vocab::condition::RENDER_DEGRADED;
use machineos_vocab::node::CURRENT_CONFIG;

/// What the render controller does for one pool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderPlan {
    /// The pool.
    pub pool: String,
    /// A rendered MachineConfig to create (JSON object, owner set).
    pub create: Option<Value>,
    /// New `spec.configuration` (`{name, source}`), when it changes.
    pub spec_configuration: Option<Value>,
    /// New `status.configuration`, when it changes.
    pub status_configuration: Option<Value>,
    /// The `RenderDegraded` condition, when it changes.
    pub condition: Option<PoolCondition>,
    /// The render error, for an Event (when the condition changes to True).
    pub error: Option<String>,
}

impl RenderPlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.create.is_none()
            && self.spec_configuration.is_none()
            && self.status_configuration.is_none()
            && self.condition.is_none()
    }
}

fn typed<T: serde::de::DeserializeOwned>(obj: &DynamicObject) -> Result<T, String> {
    let v = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        format!(
            "{}: {}",
            if path == "." { "(root)".into() } else { path },
            e.inner()
        )
    })
}

/// The part of a pool the render reads — its metadata, `spec.machineConfigSelector` and
/// `spec.osImageStream` — so that a field another controller owns and judges (a
/// `maxUnavailable` out of the int-or-string's 32-bit range, a status written by hand) is
/// reported there, not as a render failure.
fn render_inputs(pool: &DynamicObject) -> DynamicObject {
    let mut view = pool.clone();
    let keep = ["machineConfigSelector", "osImageStream"];
    if let Some(spec) = view.data.get_mut("spec").and_then(Value::as_object_mut) {
        spec.retain(|k, _| keep.contains(&k.as_str()));
    }
    if let Some(data) = view.data.as_object_mut() {
        data.remove("status");
    }
    view
}

/// Whether a MachineConfig was rendered by a pool (owned by one).
pub fn is_rendered(mc: &DynamicObject) -> bool {
    mc.owner_references()
        .iter()
        .any(|o| o.kind == "MachineConfigPool" && o.controller == Some(true))
}

fn pool_view(pool: &DynamicObject) -> PoolView {
    crate::observe::view_of("MachineConfigPool", pool)
}

fn current_condition(pool: &DynamicObject) -> Option<PoolCondition> {
    pool_view(pool)
        .status
        .conditions
        .into_iter()
        .find(|c| c.type_ == RENDER_DEGRADED)
        .map(|c| PoolCondition {
            type_: RENDER_DEGRADED.into(),
            status: c.status,
            reason: c.reason,
            message: c.message,
        })
}

fn degraded(pool: &DynamicObject, name: &str, error: String) -> RenderPlan {
    let c = PoolCondition {
        type_: RENDER_DEGRADED.into(),
        status: "True".into(),
        reason: "RenderFailed".into(),
        message: format!("Failed to render configuration for pool {name}: {error}"),
    };
    let changed = current_condition(pool).as_ref() != Some(&c);
    RenderPlan {
        pool: name.to_owned(),
        error: changed.then_some(c.message.clone()),
        condition: changed.then_some(c),
        ..RenderPlan::default()
    }
}

/// Plan the render of `pool` from every MachineConfig (rendered ones are skipped).
pub fn plan(
    pool: &DynamicObject,
    machine_configs: &[Arc<DynamicObject>],
    defaults: &RenderDefaults,
    nodes: &[Arc<Node>],
    controller_version: &str,
) -> RenderPlan {
    let name = pool.name_any();
    let typed_pool: MachineConfigPool = match typed(&render_inputs(pool)) {
        Ok(p) => p,
        Err(e) => return degraded(pool, &name, format!("MachineConfigPool {name}: {e}")),
    };
    // Only this pool's inputs are decoded (a cluster has thousands of MachineConfigs); with
    // no usable selector, all of them, and `select_for_pool` says what is wrong.
    let mut mcs: Vec<MachineConfig> = Vec::new();
    for m in candidates(pool, machine_configs) {
        match typed::<MachineConfig>(m) {
            Ok(mc) => mcs.push(mc),
            Err(e) => {
                return degraded(pool, &name, format!("MachineConfig {}: {e}", m.name_any()));
            }
        }
    }
    mcs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let selected = match machineos_render::select_for_pool(Some(&typed_pool), &name, &mcs) {
        Ok(s) => s,
        Err(e) => return degraded(pool, &name, e.to_string()),
    };
    let mut defaults = defaults.clone();
    if let Some(stream) = typed_pool.spec.os_image_stream.as_ref() {
        defaults.os_image_stream = stream.name.clone();
    }
    let rendered = match machineos_render::render(&name, &selected, &defaults) {
        Ok(r) => r,
        Err(e) => return degraded(pool, &name, e.to_string()),
    };
    let mut out = RenderPlan {
        pool: name.clone(),
        ..RenderPlan::default()
    };
    let rendered_name = rendered
        .machine_config
        .metadata
        .name
        .clone()
        .unwrap_or_default();
    // Owned by the pool, as the MCO does; the controller's version annotated.
    let mut typed_mc = rendered.machine_config.clone();
    typed_mc.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "machineconfiguration.openshift.io/v1".into(),
        kind: "MachineConfigPool".into(),
        name: name.clone(),
        uid: pool.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    typed_mc
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(GENERATED_BY.to_owned(), controller_version.to_owned());
    let mc = match serde_json::to_value(&typed_mc) {
        Ok(v) => v,
        Err(e) => return degraded(pool, &name, e.to_string()),
    };
    let exists = machine_configs
        .iter()
        .any(|m| m.name_any() == rendered_name);
    if !exists {
        out.create = Some(mc);
    }
    let source: Vec<Value> = rendered
        .source
        .iter()
        .map(|s| {
            json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfig",
                "name": s.name.clone().unwrap_or_default(),
            })
        })
        .collect();
    let want = json!({"name": rendered_name, "source": source});
    let view = pool_view(pool);
    if !same_configuration(
        view.spec.configuration.as_ref(),
        &rendered_name,
        &rendered.source,
    ) {
        out.spec_configuration = Some(want.clone());
    }
    // status.configuration: once every node of the pool runs the spec's config.
    // No usable nodeSelector selects no node: every node (of none) is updated.
    let all_updated = pool_nodes(pool, nodes)
        .all(|n| n.annotations().get(CURRENT_CONFIG) == Some(&rendered_name));
    let status_now = view.status.configuration.as_ref();
    if all_updated && !same_configuration(status_now, &rendered_name, &rendered.source) {
        out.status_configuration = Some(want);
    }
    if current_condition(pool).is_some_and(|c| c.status == "True") {
        out.condition = Some(PoolCondition {
            type_: RENDER_DEGRADED.into(),
            status: "False".into(),
            reason: String::new(),
            message: String::new(),
        });
    }
    out
}

fn selector_of(v: Option<&Value>) -> Option<Selector> {
    let s: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(v?.clone()).ok()?;
    Selector::parse(&s).ok()
}

/// The MachineConfigs that may be the pool's inputs: not rendered, and matching its
/// `machineConfigSelector` when it has a usable one (else every one).
fn candidates<'a>(
    pool: &DynamicObject,
    machine_configs: &'a [Arc<DynamicObject>],
) -> impl Iterator<Item = &'a Arc<DynamicObject>> {
    let selector = selector_of(pool_view(pool).spec.machine_config_selector.as_ref());
    machine_configs
        .iter()
        .filter(move |m| !is_rendered(m) && selector.as_ref().is_none_or(|s| s.matches(m.labels())))
}

/// The nodes the pool's `nodeSelector` selects (none without one).
fn pool_nodes<'a>(
    pool: &DynamicObject,
    nodes: &'a [Arc<Node>],
) -> impl Iterator<Item = &'a Arc<Node>> {
    let selector = selector_of(pool_view(pool).spec.node_selector.as_ref());
    nodes
        .iter()
        .filter(move |n| selector.as_ref().is_some_and(|s| s.matches(n.labels())))
}

/// Whether `now` names `name` rendered from the same MachineConfigs as `source` (in any
/// order).
fn same_configuration(
    now: Option<&Configuration>,
    name: &str,
    source: &[k8s_openapi::api::core::v1::ObjectReference],
) -> bool {
    let Some(now) = now else { return false };
    let have: BTreeSet<&str> = now
        .source
        .iter()
        .filter_map(|s| s.name.as_deref())
        .collect();
    let want: BTreeSet<&str> = source.iter().filter_map(|s| s.name.as_deref()).collect();
    now.name.as_deref() == Some(name) && have == want
}

/// A cheap fingerprint of a pool's render inputs: its generation, labels, configuration and
/// `RenderDegraded` condition (not its resourceVersion: the controller's own status writes
/// change that), its candidate MachineConfigs' names and resourceVersions, the defaults, and
/// its nodes' current configs. Equal fingerprints render equally, so the controller skips
/// the work.
pub fn fingerprint(
    pool: &DynamicObject,
    machine_configs: &[Arc<DynamicObject>],
    defaults: &RenderDefaults,
    nodes: &[Arc<Node>],
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pool.metadata.generation.hash(&mut h);
    pool.metadata.labels.hash(&mut h);
    // The raw JSON: any change of the spec or of the status configuration counts.
    let raw = |v: Option<&Value>| v.map(Value::to_string);
    raw(pool.data.get("spec")).hash(&mut h);
    raw(pool.data.get("status").and_then(|s| s.get("configuration"))).hash(&mut h);
    current_condition(pool)
        .map(|c| (c.status, c.message))
        .hash(&mut h);
    for m in candidates(pool, machine_configs) {
        m.metadata.name.hash(&mut h);
        m.metadata.resource_version.hash(&mut h);
    }
    defaults.os_image_url.hash(&mut h);
    defaults.base_os_extensions_container_image.hash(&mut h);
    for n in pool_nodes(pool, nodes) {
        n.metadata.name.hash(&mut h);
        n.annotations().get(CURRENT_CONFIG).hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Arc<DynamicObject> {
        Arc::new(serde_json::from_value(v).expect("object"))
    }

    fn pool(extra_status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": "worker", "uid": "pool-uid", "generation": 1},
            "spec": {
                "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
                "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
            },
            "status": extra_status,
        }))
        .expect("pool")
    }

    fn mc(name: &str, path: &str) -> Arc<DynamicObject> {
        obj(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
                {"path": path, "mode": 420, "contents": {"source": "data:,x"}}]}}},
        }))
    }

    fn node(name: &str, current: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name,
                    "labels": {"node-role.kubernetes.io/worker": ""},
                    "annotations": {CURRENT_CONFIG: current}},
            }))
            .expect("node"),
        )
    }

    fn defaults() -> RenderDefaults {
        RenderDefaults {
            os_image_url: "quay.io/fedora/fedora-coreos@sha256:00".into(),
            ..RenderDefaults::default()
        }
    }

    #[test]
    fn a_max_unavailable_out_of_range_is_not_a_render_failure() {
        // The typed pool's int-or-string is 32-bit; the rollout judges maxUnavailable
        // (`MaxUnavailable::Invalid`), the render never reads it.
        let mcs = vec![mc("00-worker", "/etc/a")];
        let want = plan(&pool(json!({})), &mcs, &defaults(), &[], "v").create;
        assert!(want.is_some());
        for bad in [json!(3_000_000_000_i64), json!(1.5), json!({"x": 1})] {
            let mut p = pool(json!({"conditions": "not a list"}));
            p.data["spec"]["maxUnavailable"] = bad.clone();
            let got = plan(&p, &mcs, &defaults(), &[], "v");
            assert_eq!(got.condition, None, "{bad}");
            assert_eq!(got.create, want, "{bad}");
        }
    }

    #[test]
    fn a_pool_is_rendered_once_and_pointed_at_its_rendered_config() {
        let mcs = vec![mc("00-worker", "/etc/a"), mc("10-worker", "/etc/b")];
        let p = pool(json!({}));
        let plan = plan(&p, &mcs, &defaults(), &[], "machineos 0.1.0");
        let created = plan.create.clone().expect("a rendered config");
        let name = created["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_owned();
        assert!(name.starts_with("rendered-worker-"), "{name}");
        assert_eq!(
            created["metadata"]["ownerReferences"][0]["kind"],
            "MachineConfigPool"
        );
        assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "pool-uid");
        assert_eq!(
            created["metadata"]["ownerReferences"][0]["controller"],
            true
        );
        let spec = plan.spec_configuration.clone().expect("spec.configuration");
        assert_eq!(spec["name"], name.as_str());
        let sources: Vec<&str> = spec["source"]
            .as_array()
            .expect("source")
            .iter()
            .map(|s| s["name"].as_str().expect("name"))
            .collect();
        assert_eq!(sources, ["00-worker", "10-worker"]);
        // No nodes selected: status.configuration follows at once.
        assert_eq!(plan.status_configuration, Some(spec.clone()));
        assert_eq!(plan.condition, None);

        // Applied: nothing left to do.
        let mut done = mcs.clone();
        done.push(obj(created));
        let mut p = pool(json!({"configuration": spec.clone()}));
        p.data["spec"]["configuration"] = spec;
        let again = super::plan(&p, &done, &defaults(), &[], "machineos 0.1.0");
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn status_configuration_waits_for_every_node_of_the_pool() {
        let mcs = vec![mc("00-worker", "/etc/a")];
        let first = plan(&pool(json!({})), &mcs, &defaults(), &[], "v");
        let name = first.spec_configuration.as_ref().expect("spec")["name"]
            .as_str()
            .expect("name")
            .to_owned();
        let nodes = vec![node("a", &name), node("b", "rendered-worker-old")];
        let p = pool(json!({}));
        let plan = plan(&p, &mcs, &defaults(), &nodes, "v");
        assert!(plan.spec_configuration.is_some());
        assert_eq!(plan.status_configuration, None, "node b is not there yet");
        let nodes = vec![node("a", &name), node("b", &name)];
        let plan = super::plan(&p, &mcs, &defaults(), &nodes, "v");
        assert!(plan.status_configuration.is_some());
    }

    #[test]
    fn a_bad_machine_config_degrades_naming_it_and_its_path_and_changes_nothing_else() {
        let mcs = vec![mc("00-worker", "/etc/a"), mc("50-bad", "etc/relative")];
        let p = pool(json!({}));
        let plan = plan(&p, &mcs, &defaults(), &[], "v");
        assert_eq!(plan.create, None);
        assert_eq!(plan.spec_configuration, None);
        assert_eq!(plan.status_configuration, None);
        let c = plan.condition.expect("condition");
        assert_eq!(
            (c.type_.as_str(), c.status.as_str()),
            (RENDER_DEGRADED, "True")
        );
        assert!(c.message.contains("50-bad"), "{}", c.message);
        assert!(c.message.contains("storage.files.0.path"), "{}", c.message);
        assert_eq!(plan.error.as_deref(), Some(c.message.as_str()));

        // Already degraded with the same message: nothing to write, no second Event.
        let p = pool(json!({"conditions": [{
            "type": RENDER_DEGRADED, "status": "True", "reason": c.reason, "message": c.message}]}));
        let again = super::plan(&p, &mcs, &defaults(), &[], "v");
        assert!(again.is_empty(), "{again:?}");

        // A MachineConfig of another pool that does not even parse is not this pool's problem.
        let other = obj(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "99-infra", "labels": {"machineconfiguration.openshift.io/role": "infra"}},
            "spec": {"kernelArguments": "not-a-list"},
        }));
        let fine = vec![mc("00-worker", "/etc/a"), other];
        let plan = super::plan(&pool(json!({})), &fine, &defaults(), &[], "v");
        assert!(
            plan.create.is_some() && plan.condition.is_none(),
            "{plan:?}"
        );
    }

    #[test]
    fn rendered_configs_are_never_inputs() {
        let mcs = vec![mc("00-worker", "/etc/a")];
        let first = plan(&pool(json!({})), &mcs, &defaults(), &[], "v");
        let mut with_rendered = mcs.clone();
        let mut rendered = first.create.expect("created");
        rendered["metadata"]["labels"] =
            json!({"machineconfiguration.openshift.io/role": "worker"});
        with_rendered.push(obj(rendered));
        let again = plan(&pool(json!({})), &with_rendered, &defaults(), &[], "v");
        assert_eq!(
            again.spec_configuration.expect("spec")["name"],
            first.spec_configuration.expect("spec")["name"]
        );
    }
}
