//! The rollout controller's observation and executor: the caches → [`machineos_rollout`]'s
//! `Observed` ([`observe()`], pure), and its [`Decision`] → API writes ([`execute()`]).
//!
//! * **Which image a pool rolls.** A pool is layered when the lifecycle sees it opt in (a
//!   MachineOSConfig or the legacy label). Its image is the digested image of the
//!   MachineOSBuild for the pool's current rendered config once that build Succeeded — and,
//!   with a MachineOSConfig, once the MachineOSConfig records it as its current image (the
//!   MCO's `canLayeredContinue`). Otherwise the pool's image is pending, with the reason.
//! * **Writes.** Node annotations by JSON merge patch (only the keys that change); one
//!   MachineConfigNode per pool member, created by the controller, whose spec mirrors the
//!   node's desired annotations (its status is the agent's); pool status counts and
//!   conditions, MachineOSImage and MachineImage conditions — each written only when it
//!   changes; Events as decided. Failed writes are retried on the next pass (requeue).
//! * `minReadySeconds` is the controller's `--min-ready-seconds`, overridden per pool by
//!   its annotation [`MIN_READY_ANNOTATION`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{EventType, ObjectRef, OptIn, Phase, PoolCondition};
use machineos_rollout::decide::{Condition, Decision, EventObject};
use machineos_rollout::{
    ImageTarget, MachineImageObserved, MaxUnavailable, NodeAnnotations, NodeObserved, PoolImage,
    PoolObserved, Selector, vocab,
};
use serde_json::{Value, json};

use crate::execute::{self, Events, ExecError};
use crate::kinds;
use crate::observe::{self, Snapshot, str_at};

/// Pool annotation: this pool's `minReadySeconds` (the soak before a slot frees).
pub const MIN_READY_ANNOTATION: &str = "machineos.io/min-ready-seconds";

/// A selector from its JSON (`None` when absent; an invalid one selects nothing).
pub(crate) fn selector(v: Option<&Value>, path: &str) -> Option<Selector> {
    let v = v.filter(|v| !v.is_null())?;
    let labels: BTreeMap<String, String> = v
        .get("matchLabels")
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_default();
    let exprs: Vec<(String, String, Vec<String>)> = v
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    let values = e
                        .get("values")
                        .and_then(|v| serde_json::from_value(v.clone()).ok())
                        .unwrap_or_default();
                    (s("key"), s("operator"), values)
                })
                .collect()
        })
        .unwrap_or_default();
    match Selector::new(path, &labels, &exprs) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "invalid label selector: selects no node");
            Some(Selector {
                requirements: vec![machineos_rollout::selector::Requirement::In(
                    String::new(),
                    vec![],
                )],
            })
        }
    }
}

/// The statuses of an object's conditions (type → True).
fn condition_map(obj: &Value) -> BTreeMap<String, bool> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    Some((
                        c.get("type")?.as_str()?.to_owned(),
                        c.get("status")?.as_str()? == "True",
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A node, as the rollout reads it.
pub fn node_observed(n: &Node, mcn: Option<&DynamicObject>) -> NodeObserved {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let annotations: BTreeMap<String, String> = n.annotations().clone();
    let drain_blocked = mcn.and_then(|m| {
        m.data
            .pointer("/status/conditions")
            .and_then(Value::as_array)?
            .iter()
            .find(|c| {
                c.get("type").and_then(Value::as_str) == Some(vocab::mcn::DRAINED)
                    && c.get("status").and_then(Value::as_str) == Some("False")
            })
            .and_then(|c| c.get("message").and_then(Value::as_str))
            .map(str::to_owned)
    });
    NodeObserved {
        name: n.name_any(),
        labels: n.labels().clone(),
        created: n
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        ready: ready.is_some_and(|c| c.status == "True"),
        // The soak runs from the later of Ready and the agent's `Updated`: a fast reboot may
        // never flip Ready, and Ready usually comes before the agent is done.
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_second())
            .max(mcn.and_then(updated_since)),
        unschedulable: n
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        annotations: NodeAnnotations::from_map(&annotations),
        drain_blocked,
    }
}

/// When the MachineConfigNode's `Updated` condition last became True (the agent's "done").
fn updated_since(mcn: &DynamicObject) -> Option<i64> {
    mcn.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some(vocab::mcn::UPDATED)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
        .and_then(|c| c.get("lastTransitionTime").and_then(Value::as_str))
        .and_then(observe::parse_time)
}

/// The largest `minReadySeconds` accepted (a day); larger values are clamped.
pub const MAX_MIN_READY_SECONDS: i64 = 86_400;

/// The rollout's view of the caches. `lifecycle` is the lifecycle's observation of the same
/// snapshot (which pools opt in, their builds).
pub fn observe(
    s: &Snapshot,
    lifecycle: &machineos_build_lifecycle::Observed,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> machineos_rollout::Observed {
    let pools = s
        .pools
        .iter()
        .map(|p| {
            let name = p.name_any();
            let config = str_at(&p.data, "/spec/configuration/name")
                .unwrap_or("")
                .to_owned();
            let image = match lifecycle.pools.iter().find(|lp| lp.pool.name == name) {
                None => PoolImage::NotLayered,
                Some(lp) => match &lp.opt_in {
                    None => PoolImage::NotLayered,
                    Some(_) if config.is_empty() => {
                        PoolImage::Pending("the pool is not rendered yet".into())
                    }
                    Some(opt_in) => pool_image(lp, opt_in, &config),
                },
            };
            PoolObserved {
                node_selector: selector(p.data.pointer("/spec/nodeSelector"), "spec.nodeSelector"),
                config,
                image,
                paused: p
                    .data
                    .pointer("/spec/paused")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                max_unavailable: p
                    .data
                    .pointer("/spec/maxUnavailable")
                    .and_then(MaxUnavailable::parse),
                min_ready_seconds: p
                    .annotations()
                    .get(MIN_READY_ANNOTATION)
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(min_ready_seconds)
                    .clamp(0, MAX_MIN_READY_SECONDS),
                conditions: condition_map(&p.data),
                name,
            }
        })
        .collect();
    let mcns: BTreeMap<String, &DynamicObject> = s
        .machine_config_nodes
        .iter()
        .map(|m| (m.name_any(), m.as_ref()))
        .collect();
    let nodes = s
        .nodes
        .iter()
        .map(|n| node_observed(n, mcns.get(&n.name_any()).copied()))
        .collect();
    let machine_images = s
        .machine_images
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter_map(|m| machine_image(m, &s.namespace))
        .collect();
    machineos_rollout::Observed {
        pools,
        nodes,
        machine_images,
        controller_node: controller_node.map(str::to_owned),
    }
}

/// The image a layered pool rolls, or why not yet.
fn pool_image(
    lp: &machineos_build_lifecycle::PoolObserved,
    opt_in: &OptIn,
    config: &str,
) -> PoolImage {
    let Some(build) = lp
        .builds
        .iter()
        .filter(|b| b.rendered_config == config)
        .max_by_key(|b| b.created)
    else {
        return PoolImage::Pending(format!("no MachineOSBuild for {config} yet"));
    };
    let digested = match (build.phase, &build.digested_image) {
        (Phase::Succeeded, Some(d)) => d.clone(),
        (phase, _) => {
            return PoolImage::Pending(format!("MachineOSBuild {} is {phase:?}", build.name));
        }
    };
    if let OptIn::MachineOSConfig(mosc) = opt_in
        && mosc.current_image_pull_spec.as_deref() != Some(digested.as_str())
    {
        return PoolImage::Pending(format!(
            "MachineOSConfig {} does not record {} as its current image yet",
            mosc.name, build.name
        ));
    }
    PoolImage::Built(digested)
}

/// A MachineImage, or `None` (logged) when its spec does not parse.
fn machine_image(m: &DynamicObject, ns: &str) -> Option<MachineImageObserved> {
    let name = m.name_any();
    let spec = m.data.get("spec")?;
    let image = spec.get("image").and_then(Value::as_str)?.to_owned();
    let target = match (
        spec.get("nodeName").and_then(Value::as_str),
        spec.get("nodeSelector"),
    ) {
        (Some(n), None) => ImageTarget::Node(n.to_owned()),
        (None, Some(sel)) => ImageTarget::Selector {
            selector: selector(Some(sel), "spec.nodeSelector")?,
            max_unavailable: spec.get("maxUnavailable").and_then(MaxUnavailable::parse),
        },
        _ => {
            tracing::warn!(machine_image = %name, "spec: exactly one of nodeName and nodeSelector must be set; ignored");
            return None;
        }
    };
    Some(MachineImageObserved {
        pull_secret: spec
            .pointer("/pullSecret/name")
            .and_then(Value::as_str)
            .map(|s| format!("{ns}/{s}")),
        conditions: condition_map(&m.data),
        name,
        image,
        target,
    })
}

/// The MachineConfigNode a pool member should have (spec only), or `None` when the node has
/// no config to name yet.
pub fn machine_config_node(node: &NodeObserved, pool: &str, pool_config: &str) -> Option<Value> {
    let a = &node.annotations;
    let desired = a
        .desired_config
        .clone()
        .or_else(|| a.current_config.clone())
        .unwrap_or_else(|| pool_config.to_owned());
    if desired.is_empty() {
        return None;
    }
    let mut spec = json!({
        "node": {"name": node.name},
        "pool": {"name": pool},
        "configVersion": {"desired": desired},
    });
    if let Some(img) = a
        .desired_image
        .as_deref()
        .filter(|i| observe::is_digested(i))
    {
        spec["configImage"] = json!({"desiredImage": img});
    }
    Some(spec)
}

/// The result of carrying a decision out.
#[derive(Debug, Default)]
pub struct Executed {
    /// Writes that failed (retried on the next pass).
    pub failures: Vec<ExecError>,
    /// Nodes patched, with the annotation values each patch set (`None`: removed).
    pub patched: Vec<(String, BTreeMap<&'static str, Option<String>>)>,
    /// MachineConfigNodes created.
    pub created: Vec<String>,
}

fn pool_condition(c: &Condition) -> PoolCondition {
    PoolCondition {
        type_: c.type_.to_owned(),
        status: if c.status { "True" } else { "False" }.to_owned(),
        reason: c.reason.to_owned(),
        message: c.message.clone(),
    }
}

/// Whether `conds` would change `status`'s conditions (type, status, reason, message).
fn conditions_change(status: &Value, conds: &[Condition]) -> bool {
    let now = execute::conditions_of(status);
    conds.iter().any(|c| {
        let cur = now
            .iter()
            .find(|o| o.get("type").and_then(Value::as_str) == Some(c.type_));
        cur.is_none_or(|o| {
            o.get("status").and_then(Value::as_str) != Some(if c.status { "True" } else { "False" })
                || o.get("reason").and_then(Value::as_str) != Some(c.reason)
                || o.get("message").and_then(Value::as_str).unwrap_or("") != c.message
        })
    })
}

/// The pool's `Degraded`: any of `NodeDegraded`, `RenderDegraded`, `ImageBuildDegraded` True
/// in `status`.
fn aggregate_degraded(status: &Value) -> Condition {
    use machineos_rollout::decide::condition;
    let now = execute::conditions_of(status);
    let on: Vec<&'static str> = [
        condition::NODE_DEGRADED,
        condition::RENDER_DEGRADED,
        condition::IMAGE_BUILD_DEGRADED,
    ]
    .into_iter()
    .filter(|t| {
        now.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(*t)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    })
    .collect();
    Condition {
        type_: condition::DEGRADED,
        status: !on.is_empty(),
        reason: if on.is_empty() {
            "AsExpected"
        } else {
            "Degraded"
        },
        message: if on.is_empty() {
            String::new()
        } else {
            format!("{} True", on.join(", "))
        },
    }
}

/// Set `conds` in `status` (metav1 conditions: `observedGeneration` from `generation`).
fn set_conditions(status: &mut Value, conds: &[Condition], generation: Option<i64>) {
    let mut list = execute::conditions_of(status);
    for c in conds {
        list = execute::set_condition(&list, &pool_condition(c));
        if let (Some(g), Some(last)) = (
            generation,
            list.iter_mut()
                .find(|o| o.get("type").and_then(Value::as_str) == Some(c.type_)),
        ) {
            last["observedGeneration"] = json!(g);
        }
    }
    status["conditions"] = Value::Array(list);
}

/// Carry `d` out against the API server. `o` is what it was decided from.
pub async fn execute(
    client: &Client,
    events: &Events,
    s: &Snapshot,
    o: &machineos_rollout::Observed,
    d: &Decision,
) -> Executed {
    let mut out = Executed::default();
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    // Node annotations.
    let patches: Vec<_> = d
        .node_patches
        .iter()
        .map(|p| {
            let annotations: serde_json::Map<String, Value> = p
                .annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), json!(v)))
                .collect();
            let nodes = nodes.clone();
            let name = p.node.clone();
            let changes = p.annotations.clone();
            async move {
                nodes
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
                    )
                    .await
                    .map(|_| (name.clone(), changes))
                    .map_err(|e| ExecError::Api {
                        op: "patching",
                        object: format!("Node {name}"),
                        error: Box::new(e),
                    })
            }
        })
        .collect();
    use futures_util::StreamExt as _;
    type Patched = (String, BTreeMap<&'static str, Option<String>>);
    let results: Vec<Result<Patched, ExecError>> = futures_util::stream::iter(patches)
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        match r {
            Ok(done) => out.patched.push(done),
            Err(e) => out.failures.push(e),
        }
    }
    // MachineConfigNodes of pool members: the spec mirrors the node's desired annotations
    // after the patches above.
    let mcn_api = kinds::all(client, &kinds::machine_config_node());
    let patched: BTreeMap<&str, &BTreeMap<&'static str, Option<String>>> = d
        .node_patches
        .iter()
        .map(|p| (p.node.as_str(), &p.annotations))
        .collect();
    let existing: BTreeMap<String, &Arc<DynamicObject>> = s
        .machine_config_nodes
        .iter()
        .map(|m| (m.name_any(), m))
        .collect();
    let views = machineos_rollout::decide::views(o);
    for v in &views {
        let Some(pi) = v.pool else { continue };
        let pool = &o.pools[pi];
        if pool.image == PoolImage::NotLayered {
            continue;
        }
        let mut node = v.node.clone();
        if let Some(changes) = patched.get(node.name.as_str()) {
            let a = &mut node.annotations;
            if let Some(c) = changes.get(vocab::DESIRED_CONFIG) {
                a.desired_config = c.clone();
            }
            if let Some(i) = changes.get(vocab::DESIRED_IMAGE) {
                a.desired_image = i.clone();
            }
        }
        let Some(spec) = machine_config_node(&node, &pool.name, &pool.config) else {
            continue;
        };
        let result = match existing.get(&node.name) {
            Some(m) if m.data.get("spec") == Some(&spec) => Ok(()),
            Some(_) => {
                execute::merge(
                    &mcn_api,
                    &node.name,
                    json!({"spec": spec}),
                    format!("MachineConfigNode {}", node.name),
                )
                .await
            }
            None => {
                let obj = json!({
                    "apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineConfigNode",
                    "metadata": {"name": node.name},
                    "spec": spec,
                });
                match serde_json::from_value::<DynamicObject>(obj) {
                    Ok(obj) => match mcn_api.create(&PostParams::default(), &obj).await {
                        Ok(_) => {
                            out.created.push(node.name.clone());
                            Ok(())
                        }
                        Err(kube::Error::Api(ae)) if ae.code == 409 => Ok(()),
                        Err(e) => Err(ExecError::Api {
                            op: "creating",
                            object: format!("MachineConfigNode {}", node.name),
                            error: Box::new(e),
                        }),
                    },
                    Err(e) => {
                        tracing::warn!(node = %node.name, error = %e, "MachineConfigNode");
                        Ok(())
                    }
                }
            }
        };
        if let Err(e) = result {
            out.failures.push(e);
        }
    }
    // Pool statuses.
    let pool_api = kinds::all(client, &kinds::pool());
    for r in &d.pools {
        let Some(current) = s.pools.iter().find(|p| p.name_any() == r.pool) else {
            continue;
        };
        let status = current
            .data
            .get("status")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let counts = json!({
            "machineCount": r.counts.machine,
            "updatedMachineCount": r.counts.updated,
            "readyMachineCount": r.counts.ready,
            "unavailableMachineCount": r.counts.unavailable,
            "degradedMachineCount": r.counts.degraded,
        });
        let counts_change = counts.as_object().is_some_and(|m| {
            m.iter()
                .any(|(k, v)| status.get(k).unwrap_or(&json!(0)) != v)
        });
        if counts_change || conditions_change(&status, &r.conditions) {
            let conds = r.conditions.clone();
            let result = execute::edit_status(
                &pool_api,
                &r.pool,
                format!("MachineConfigPool {}", r.pool),
                move |_, status| {
                    if let (Some(st), Some(c)) = (status.as_object_mut(), counts.as_object()) {
                        for (k, v) in c {
                            st.insert(k.clone(), v.clone());
                        }
                    }
                    set_conditions(status, &conds, None);
                    // `Degraded` from the conditions as they are now, not as the snapshot
                    // had them (the lifecycle writes ImageBuildDegraded concurrently).
                    set_conditions(status, &[aggregate_degraded(status)], None);
                    true
                },
            )
            .await;
            if let Err(e) = result {
                out.failures.push(e);
            }
        }
        // The MachineOSImage of the pool's image.
        if let Some((image, conds)) = &r.image {
            let api = kinds::all(client, &kinds::image());
            let found = s.images.iter().find(|m| {
                str_at(&m.data, "/spec/image") == Some(image.as_str())
                    && str_at(&m.data, "/spec/machineConfigPool/name") == Some(r.pool.as_str())
            });
            if let Some(m) = found {
                let status = m.data.get("status").cloned().unwrap_or_else(|| json!({}));
                if conditions_change(&status, conds) {
                    let conds = conds.clone();
                    let generation = m.metadata.generation;
                    let result = execute::edit_status(
                        &api,
                        &m.name_any(),
                        format!("MachineOSImage {}", m.name_any()),
                        move |_, status| {
                            set_conditions(status, &conds, generation);
                            true
                        },
                    )
                    .await;
                    if let Err(e) = result {
                        out.failures.push(e);
                    }
                }
            }
        }
    }
    // MachineImage statuses.
    let mi_api = kinds::all(client, &kinds::machine_image());
    for r in &d.machine_images {
        let Some(m) = s.machine_images.iter().find(|m| m.name_any() == r.name) else {
            continue;
        };
        let status = m.data.get("status").cloned().unwrap_or_else(|| json!({}));
        let counts = json!({
            "machineCount": r.counts.machine,
            "updatedMachineCount": r.counts.updated,
            "unavailableMachineCount": r.counts.unavailable,
            "degradedMachineCount": r.counts.degraded,
        });
        let counts_change = counts.as_object().is_some_and(|c| {
            c.iter()
                .any(|(k, v)| status.get(k).unwrap_or(&json!(0)) != v)
        });
        if counts_change || conditions_change(&status, &r.conditions) {
            let conds = r.conditions.clone();
            let generation = m.metadata.generation;
            let result = execute::edit_status(
                &mi_api,
                &r.name,
                format!("MachineImage {}", r.name),
                move |_, status| {
                    if let (Some(st), Some(c)) = (status.as_object_mut(), counts.as_object()) {
                        for (k, v) in c {
                            st.insert(k.clone(), v.clone());
                        }
                        if let Some(g) = generation {
                            st.insert("observedGeneration".into(), json!(g));
                        }
                    }
                    set_conditions(status, &conds, generation);
                    true
                },
            )
            .await;
            if let Err(e) = result {
                out.failures.push(e);
            }
        }
    }
    // Events.
    for e in &d.events {
        let (kind, uid) = match e.kind {
            EventObject::Pool => (
                "MachineConfigPool",
                s.pools
                    .iter()
                    .find(|p| p.name_any() == e.name)
                    .and_then(|p| p.uid()),
            ),
            EventObject::MachineImage => (
                "MachineImage",
                s.machine_images
                    .iter()
                    .find(|p| p.name_any() == e.name)
                    .and_then(|p| p.uid()),
            ),
        };
        let object = ObjectRef {
            uid,
            ..ObjectRef::cluster(kind, &e.name)
        };
        let t = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        events.publish(&object, t, e.reason, &e.message).await;
    }
    out
}

/// The rollout plan of `pool` as the controller would carry it out now, read from the API
/// server (nothing is written): `machineos rollout plan`.
pub async fn plan_from_cluster(
    client: &Client,
    namespace: &str,
    pool: &str,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> Result<machineos_rollout::plan::Plan, String> {
    use kube::api::ListParams;
    let lp = ListParams::default();
    let list = |ar: kube::api::ApiResource| {
        let api = kinds::all(client, &ar);
        let lp = lp.clone();
        async move {
            let kind = ar.kind.clone();
            api.list(&lp)
                .await
                .map(|l| l.items.into_iter().map(Arc::new).collect::<Vec<_>>())
                .map_err(|e| format!("listing {kind}s: {e}"))
        }
    };
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), namespace);
    let mut s = Snapshot {
        config_maps: config_maps
            .list(&lp)
            .await
            .map_err(|e| format!("listing ConfigMaps in {namespace}: {e}"))?
            .items
            .into_iter()
            .map(Arc::new)
            .collect(),
        namespace: namespace.to_owned(),
        pools: list(kinds::pool()).await?,
        machine_os_configs: list(kinds::machine_os_config()).await?,
        builds: list(kinds::build()).await?,
        images: list(kinds::image()).await?,
        machine_images: list(kinds::machine_image()).await?,
        machine_config_nodes: list(kinds::machine_config_node()).await.unwrap_or_default(),
        nodes: nodes
            .list(&lp)
            .await
            .map_err(|e| format!("listing Nodes: {e}"))?
            .items
            .into_iter()
            .map(Arc::new)
            .collect(),
        ..Snapshot::default()
    };
    s.nodes.sort_by_key(|n| n.name_any());
    s.machine_images.sort_by_key(|m| m.name_any());
    let lifecycle = observe::observe(&s, &observe::Learnt::default());
    let o = observe(&s, &lifecycle, controller_node, min_ready_seconds);
    machineos_rollout::plan(&o, pool, execute::now()).map_err(|e| e.to_string())
}

/// [`plan_from_cluster`] on the cluster kubectl would use (in-cluster, `KUBECONFIG`,
/// `~/.kube/config`).
pub async fn plan_default_cluster(
    namespace: &str,
    pool: &str,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> Result<machineos_rollout::plan::Plan, String> {
    let client = Client::try_default()
        .await
        .map_err(|e| format!("no cluster: {e}"))?;
    plan_from_cluster(&client, namespace, pool, controller_node, min_ready_seconds).await
}
