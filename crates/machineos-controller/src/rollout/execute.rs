//! The rollout's executor: a [`Decision`] → API writes, thin.
//!
//! Node annotations by JSON merge patch (only the keys that change), conditional on the
//! resourceVersion the decision saw (a 409 is decided again); one MachineConfigNode
//! per pool member, created by the controller, whose spec mirrors the node's desired
//! annotations (its status is the agent's); pool status counts and conditions,
//! MachineOSImage and MachineImage conditions — each written only when it changes (a
//! MachineOSImage's `Quarantined` not written False where it never was); a lifted
//! quarantine's annotation removed after the node patches succeeded; Events as decided. Failed writes are returned and retried on the next pass.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_build_lifecycle::{EventType, ObjectRef, PoolCondition};
use machineos_rollout::decide::{Condition, Decision, EventObject};
use machineos_rollout::{PoolImage, vocab};
use serde_json::{Value, json};

use crate::api::{self, Events, ExecError};
use crate::kinds;
use crate::observe::{Snapshot, view_of};
use machineos_kube::mco::ImageView;

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
    let now = api::conditions_of(status);
    conds.iter().any(|c| {
        let cur = now.iter().find(|o| o.type_ == c.type_);
        cur.is_none_or(|o| {
            o.status != if c.status { "True" } else { "False" }
                || o.reason != c.reason
                || o.message != c.message
        })
    })
}

/// The pool's `Degraded`: any of `NodeDegraded`, `RenderDegraded`, `ImageBuildDegraded` True
/// in `status`.
fn aggregate_degraded(status: &Value) -> Condition {
    use machineos_rollout::decide::condition;
    let now = api::conditions_of(status);
    let on: Vec<&'static str> = [
        condition::NODE_DEGRADED,
        condition::RENDER_DEGRADED,
        condition::IMAGE_BUILD_DEGRADED,
    ]
    .into_iter()
    .filter(|t| now.iter().any(|c| c.type_ == *t && c.is_true()))
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
    let mut list = api::conditions_of(status);
    for c in conds {
        api::set_condition(&mut list, &pool_condition(c));
        if let (Some(g), Some(last)) = (generation, list.iter_mut().find(|o| o.type_ == c.type_)) {
            last.observed_generation = Some(g);
        }
    }
    status["conditions"] = machineos_kube::ConditionView::to_json(&list);
}

/// Carry `d` out against the API server. `o` is what it was decided from.
pub async fn execute(
    client: &Client,
    events: &Events,
    s: &Snapshot,
    o: &machineos_rollout::Observed,
    d: &Decision,
    costs: &BTreeMap<String, Option<machineos_api::v1alpha1::ImageDisruption>>,
) -> Executed {
    let mut out = Executed::default();
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    // The resourceVersion each node was decided from: its patch is conditional on it, so a
    // decision about a node that changed since (or a replica's that no longer leads, whose
    // view has gone stale) is refused with a 409 and decided again from the new state.
    let decided_from: BTreeMap<String, String> = s
        .nodes
        .iter()
        .filter_map(|n| Some((n.name_any(), n.resource_version()?)))
        .collect();
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
            let mut metadata = json!({"annotations": annotations});
            if let Some(rv) = decided_from.get(&name) {
                metadata["resourceVersion"] = json!(rv);
            }
            async move {
                nodes
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "metadata": metadata })),
                    )
                    .await
                    .map(|_| (name.clone(), changes))
                    .map_err(|e| {
                        ExecError::Api(machineos_kube::api_err("patching", format!("Node {name}"))(
                            e,
                        ))
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
    // Whether every node patch landed (a lift's records removed with them): the lift's
    // annotation goes only then, whatever else fails in the pass.
    let nodes_written = out.failures.is_empty();
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
            if let Some(p) = changes.get(vocab::NODE_DISRUPTION) {
                a.disruption = p.clone();
            }
        }
        let Some(spec) = super::observe::machine_config_node(&node, &pool.name, &pool.config)
        else {
            continue;
        };
        // What the node's move costs (the MCO's kind has no field for it): the plan the node
        // was handed, as the same annotation.
        let plan = node.annotations.disruption.clone();
        let result = match existing.get(&node.name) {
            Some(m)
                if m.data.get("spec") == Some(&spec)
                    && m.annotations().get(vocab::NODE_DISRUPTION) == plan.as_ref() =>
            {
                Ok(())
            }
            Some(_) => api::merge(
                &mcn_api,
                &node.name,
                json!({"metadata": {"annotations": {vocab::NODE_DISRUPTION: plan}}, "spec": spec}),
                format!("MachineConfigNode {}", node.name),
            )
            .await,
            None => {
                let mut metadata = json!({"name": node.name});
                if let Some(p) = &plan {
                    metadata["annotations"] = json!({ vocab::NODE_DISRUPTION: p });
                }
                let obj = json!({
                    "apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineConfigNode",
                    "metadata": metadata,
                    "spec": spec,
                });
                match serde_json::from_value::<DynamicObject>(obj) {
                    Ok(obj) => match mcn_api.create(&PostParams::default(), &obj).await {
                        Ok(_) => {
                            out.created.push(node.name.clone());
                            Ok(())
                        }
                        Err(kube::Error::Api(ae)) if ae.code == 409 => Ok(()),
                        Err(e) => Err(ExecError::Api(machineos_kube::api_err(
                            "creating",
                            format!("MachineConfigNode {}", node.name),
                        )(e))),
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
            let result = api::edit_status(
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
                let v: ImageView = view_of("MachineOSImage", m);
                v.spec.image.as_deref() == Some(image.as_str())
                    && v.spec.machine_config_pool.name.as_deref() == Some(r.pool.as_str())
            });
            if let Some(m) = found {
                let status = m.data.get("status").cloned().unwrap_or_else(|| json!({}));
                // What the nodes still to move cost (none left: the field goes).
                let cost = costs
                    .get(&r.pool)
                    .cloned()
                    .flatten()
                    .and_then(|c| serde_json::to_value(c).ok());
                let cost_changes = status.get("disruption") != cost.as_ref();
                if conditions_change(&status, conds) || cost_changes {
                    let conds = conds.clone();
                    let generation = m.metadata.generation;
                    let result = api::edit_status(
                        &api,
                        &m.name_any(),
                        format!("MachineOSImage {}", m.name_any()),
                        move |_, status| {
                            set_conditions(status, &conds, generation);
                            match &cost {
                                Some(c) => status["disruption"] = c.clone(),
                                None => {
                                    if let Some(o) = status.as_object_mut() {
                                        o.remove("disruption");
                                    }
                                }
                            }
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
            let result = api::edit_status(
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
    // MachineOSImage quarantines: the condition (not written False where it never was),
    // then a lift's annotation removed once the node records are (the node patches above
    // succeeded).
    let image_api = kinds::all(client, &kinds::image());
    for q in &d.quarantines {
        let Some(m) = s.images.iter().find(|m| m.name_any() == q.name) else {
            continue;
        };
        let status = m.data.get("status").cloned().unwrap_or_else(|| json!({}));
        let never = !api::conditions_of(&status)
            .iter()
            .any(|c| c.type_ == q.condition.type_);
        let quiet = never && !q.condition.status && !q.lifted;
        if !quiet && conditions_change(&status, std::slice::from_ref(&q.condition)) {
            let conds = vec![q.condition.clone()];
            let generation = m.metadata.generation;
            let result = api::edit_status(
                &image_api,
                &q.name,
                format!("MachineOSImage {}", q.name),
                move |_, status| {
                    set_conditions(status, &conds, generation);
                    true
                },
            )
            .await;
            if let Err(e) = result {
                out.failures.push(e);
                continue;
            }
        }
        if q.lifted && nodes_written {
            let patch = json!({"metadata": {"annotations": {vocab::LIFT_QUARANTINE: null}}});
            if let Err(e) = image_api
                .patch(&q.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                out.failures.push(ExecError::Api(machineos_kube::api_err(
                    "patch",
                    format!("MachineOSImage/{}", q.name),
                )(e)));
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
