//! The rollout's observation: the caches (and the lifecycle's view of which pools are
//! layered and which build each records) → [`machineos_rollout`]'s `Observed`, pure.
//!
//! * **Which image a pool rolls.** A pool is layered when the lifecycle sees it opt in (a
//!   MachineOSConfig or the legacy label). Its image is the digested image of the
//!   MachineOSBuild for the pool's current rendered config once that build Succeeded — and,
//!   with a MachineOSConfig, once the MachineOSConfig records it as its current image (the
//!   MCO's `canLayeredContinue`). Otherwise the pool's image is pending, with the reason.
//! * `minReadySeconds` is the controller's `--min-ready-seconds`, overridden per pool by
//!   its annotation [`MIN_READY_ANNOTATION`].
//! * **Multi-architecture images.** Every MachineOSImage whose `spec.image` is an index
//!   (no architecture's manifest is the image itself) contributes its `spec.architectures`
//!   as manifest pullspecs in the image's repository; a spec that does not parse is
//!   skipped (logged).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::DynamicObject;
use machineos_api::v1alpha1::MachineOSImageSpec;
use machineos_build_lifecycle::{OptIn, Phase};
use machineos_rollout::{
    ImageManifests, ImageTarget, MachineImageObserved, MaxUnavailable, NodeAnnotations,
    NodeObserved, PoolImage, PoolObserved, Selector, vocab,
};
use serde_json::{Value, json};

use crate::observe::{self, Snapshot, view_of};
use machineos_kube::ConditionView;
use machineos_kube::mco::{ImageView, PoolView, StatusView};

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
fn condition_map(conditions: &[ConditionView]) -> BTreeMap<String, bool> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.is_true()))
        .collect()
}

/// A node, as the rollout reads it.
pub fn node_observed(n: &Node, mcn: Option<&DynamicObject>) -> NodeObserved {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let annotations: BTreeMap<String, String> = n.annotations().clone();
    let mcn_conditions = mcn
        .map(|m| {
            view_of::<StatusView>("MachineConfigNode", m)
                .status
                .conditions
        })
        .unwrap_or_default();
    let drain_blocked = mcn_conditions
        .iter()
        .find(|c| c.type_ == vocab::mcn::DRAINED && c.status == "False")
        .map(|c| c.message.clone());
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
            .max(updated_since(&mcn_conditions)),
        unschedulable: n
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        annotations: NodeAnnotations::from_map(&annotations),
        drain_blocked,
        move_plan: None,
        health: mcn_conditions
            .iter()
            .find(|c| c.type_ == vocab::mcn::NODE_HEALTHY)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone())),
    }
}

/// When the MachineConfigNode's `Updated` condition last became True (the agent's "done").
fn updated_since(conditions: &[ConditionView]) -> Option<i64> {
    conditions
        .iter()
        .find(|c| c.type_ == vocab::mcn::UPDATED && c.is_true())
        .and_then(|c| c.last_transition_time.as_ref()?.as_str())
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
            let v: PoolView = view_of("MachineConfigPool", p);
            let config = v
                .spec
                .configuration
                .as_ref()
                .and_then(|c| c.name.clone())
                .unwrap_or_default();
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
                node_selector: selector(v.spec.node_selector.as_ref(), "spec.nodeSelector"),
                config,
                image,
                paused: v.spec.paused.unwrap_or(false),
                max_unavailable: v
                    .spec
                    .max_unavailable
                    .as_ref()
                    .and_then(MaxUnavailable::parse),
                min_ready_seconds: p
                    .annotations()
                    .get(MIN_READY_ANNOTATION)
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(min_ready_seconds)
                    .clamp(0, MAX_MIN_READY_SECONDS),
                max_staging: p
                    .annotations()
                    .get(machineos_rollout::vocab::MAX_STAGING)
                    .map(|v| MaxUnavailable::parse_text(v)),
                conditions: condition_map(&v.status.conditions),
                gate: {
                    let min_ready = p
                        .annotations()
                        .get(MIN_READY_ANNOTATION)
                        .and_then(|v| v.parse::<i64>().ok())
                        .unwrap_or(min_ready_seconds)
                        .clamp(0, MAX_MIN_READY_SECONDS);
                    machineos_rollout::health::Gate::from_pool(p.annotations(), min_ready)
                },
                canary: p
                    .annotations()
                    .get(machineos_rollout::vocab::CANARY)
                    .and_then(|v| machineos_rollout::observed::Canary::parse(v)),
                rollback_pool: p
                    .annotations()
                    .get(machineos_rollout::vocab::ROLLBACK_POLICY)
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("pool")),
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
        image_manifests: image_manifests(&s.images),
        controller_node: controller_node.map(str::to_owned),
        quarantine: quarantine(&s.images),
    }
}

/// Every MachineOSImage's quarantine, by its image pullspec: its `Quarantined` condition and
/// whether [`LIFT_QUARANTINE`](machineos_rollout::vocab::LIFT_QUARANTINE) asks to lift it.
pub fn quarantine(
    images: &[std::sync::Arc<DynamicObject>],
) -> BTreeMap<String, machineos_rollout::observed::QuarantineObserved> {
    let mut out = BTreeMap::new();
    for m in images {
        if m.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(image) = m
            .data
            .pointer("/spec/image")
            .and_then(serde_json::Value::as_str)
        else {
            continue;
        };
        let quarantined = m
            .data
            .pointer("/status/conditions")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| {
                c.get("type").and_then(serde_json::Value::as_str)
                    == Some(machineos_rollout::decide::condition::QUARANTINED)
            })
            .filter(|c| c.get("status").and_then(serde_json::Value::as_str) == Some("True"))
            .map(|c| {
                c.get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            });
        out.insert(
            image.to_owned(),
            machineos_rollout::observed::QuarantineObserved {
                name: m.name_any(),
                quarantined,
                lift: m
                    .annotations()
                    .contains_key(machineos_rollout::vocab::LIFT_QUARANTINE),
                previous: previous(images, m),
            },
        );
    }
    out
}

/// The image MachineOSImage `m` followed (its previous-image annotation) and that image's
/// rendered MachineConfig, while a MachineOSImage of it exists.
fn previous(
    images: &[std::sync::Arc<DynamicObject>],
    m: &DynamicObject,
) -> Option<machineos_rollout::observed::Previous> {
    let image = m
        .annotations()
        .get(machineos_vocab::build::PREVIOUS_IMAGE_ANNOTATION)?;
    let config = images.iter().find_map(|o| {
        (o.metadata.deletion_timestamp.is_none()
            && o.data
                .pointer("/spec/image")
                .and_then(serde_json::Value::as_str)
                == Some(image.as_str()))
        .then(|| {
            o.data
                .pointer("/spec/machineConfig/name")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
        .flatten()
    })?;
    Some(machineos_rollout::observed::Previous {
        image: image.clone(),
        config,
    })
}

/// The per-architecture manifests of the MachineOSImages that record an image index.
pub fn image_manifests(images: &[std::sync::Arc<DynamicObject>]) -> ImageManifests {
    let mut out = ImageManifests::default();
    for m in images {
        let spec = match m
            .data
            .get("spec")
            .cloned()
            .map(serde_json::from_value::<MachineOSImageSpec>)
        {
            Some(Ok(spec)) => spec,
            Some(Err(e)) => {
                tracing::warn!(machine_os_image = %m.name_any(), error = %e, "spec does not parse; its manifests are not passed to nodes");
                continue;
            }
            None => continue,
        };
        if !spec.is_index() {
            continue;
        }
        let repository = spec.image.repository();
        let arches = spec
            .architectures
            .iter()
            .map(|a| (a.architecture.clone(), format!("{repository}@{}", a.digest)))
            .collect();
        out.0.insert(spec.image.to_string(), arches);
    }
    out
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
    let v: ImageView = view_of("MachineImage", m);
    let spec = v.spec;
    let image = spec.image?;
    let target = match (spec.node_name, spec.node_selector) {
        (Some(n), None) => ImageTarget::Node(n),
        (None, Some(sel)) => ImageTarget::Selector {
            selector: selector(Some(&sel), "spec.nodeSelector")?,
            max_unavailable: spec
                .max_unavailable
                .as_ref()
                .and_then(MaxUnavailable::parse),
        },
        _ => {
            tracing::warn!(machine_image = %name, "spec: exactly one of nodeName and nodeSelector must be set; ignored");
            return None;
        }
    };
    Some(MachineImageObserved {
        pull_secret: spec.pull_secret.name.map(|s| format!("{ns}/{s}")),
        conditions: condition_map(&v.status.conditions),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn moi(name: &str, image: &str, arches: &[(&str, &str)]) -> Arc<DynamicObject> {
        let architectures: Vec<Value> = arches
            .iter()
            .map(|(a, d)| json!({"architecture": a, "digest": d}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1alpha1",
                "kind": "MachineOSImage",
                "metadata": {"name": name},
                "spec": {
                    "machineConfigPool": {"name": "worker"},
                    "machineConfig": {"name": "rendered-worker-1"},
                    "image": image,
                    "architectures": architectures,
                    "baseImage": format!("quay.io/fedora/fedora-coreos@sha256:{}", "d".repeat(64)),
                },
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_quarantined_images_previous_is_the_annotated_image_with_its_machineconfig() {
        let d = |c: char| format!("reg.example/os@sha256:{}", c.to_string().repeat(64));
        let mut old = (*moi("worker-old", &d('1'), &[])).clone();
        old.data["spec"]["machineConfig"]["name"] = json!("rendered-worker-old");
        let mut new = (*moi("worker-new", &d('2'), &[])).clone();
        new.metadata.annotations = Some(
            [(
                machineos_vocab::build::PREVIOUS_IMAGE_ANNOTATION.to_owned(),
                d('1'),
            )]
            .into(),
        );
        let orphan = {
            let mut o = (*moi("worker-orphan", &d('3'), &[])).clone();
            o.metadata.annotations = Some(
                [(
                    machineos_vocab::build::PREVIOUS_IMAGE_ANNOTATION.to_owned(),
                    d('9'),
                )]
                .into(),
            );
            o
        };
        let q = quarantine(&[Arc::new(old), Arc::new(new), Arc::new(orphan)]);
        assert_eq!(
            q[&d('2')].previous,
            Some(machineos_rollout::observed::Previous {
                image: d('1'),
                config: "rendered-worker-old".into(),
            })
        );
        assert_eq!(q[&d('1')].previous, None, "no annotation");
        assert_eq!(
            q[&d('3')].previous,
            None,
            "its previous image has no MachineOSImage"
        );
    }

    #[test]
    fn only_image_indexes_pass_their_per_architecture_manifests() {
        let d = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        let repo = "reg.example:5000/machineos/worker";
        let index = format!("{repo}@{}", d('1'));
        let images = [
            moi("multi", &index, &[("amd64", &d('a')), ("arm64", &d('b'))]),
            moi(
                "single",
                &format!("{repo}@{}", d('c')),
                &[("amd64", &d('c'))],
            ),
            // Not a valid spec (no digest): skipped.
            moi("broken", &format!("{repo}:latest"), &[("amd64", &d('e'))]),
        ];
        let m = image_manifests(&images);
        assert_eq!(m.0.len(), 1, "{m:?}");
        assert_eq!(
            m.manifest(&index, "amd64"),
            Some(format!("{repo}@{}", d('a')).as_str())
        );
        assert_eq!(
            m.manifest(&index, "arm64"),
            Some(format!("{repo}@{}", d('b')).as_str())
        );
        assert_eq!(m.manifest(&index, "s390x"), None);
    }
}
