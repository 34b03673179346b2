//! What moving onto its image costs each layered pool's nodes still to move: pure, over the
//! pass's snapshot and observation, with the node disruption policies the pass read
//! ([`moves`]: [`machineos_disruption::for_node_moves`] from each node's `currentConfig` to
//! the pool's rendered config, when the node's image is that config's build on the target's
//! base; with the images' filesystem difference when they differ by more and the target's
//! `status.changes` was measured from the node's image; otherwise a reboot). The result is acted on: each moving node is handed its plan
//! with its desired annotations ([`plans`], the rollout's `NodeObserved::move_plan`: a move
//! below `Drain` takes no `maxUnavailable` slot and the agent applies it live), and the
//! MachineOSImage records the summary (`status.disruption`, [`for_pools`]).
//!
//! The policies are the `MachineConfiguration` object `cluster`'s merged over the MCO's
//! defaults, read at most every [`POLICY_TTL`] ([`Policies`]); without the object (or the
//! CRD), or when it cannot be read or is invalid, the MCO's defaults (logged). The merged
//! policies are written back to the object's `status.nodeDisruptionPolicyStatus
//! .clusterPolicies` when they differ from what it holds, as the MCO's operator does.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::{Client, ResourceExt};
use machineos_api::v1alpha1::{ClassCount, ImageDisruption};
use machineos_disruption::{Class, ClusterPolicies, ImageBasis, NodeMove};
use machineos_rollout::observed::PoolImage;

use crate::kinds;
use crate::observe::Snapshot;

/// How long read policies are used before they are read again.
pub const POLICY_TTL: Duration = Duration::from_secs(30);

/// How long after a pool's image is recorded its rollout waits for the image's comparison
/// with the pool's previous image (`status.changes`), which decides the moves across images
/// ([`moves`]); after that the moves go ahead without it (as reboots).
pub const CHANGES_WAIT_SECONDS: i64 = 60;

/// The layered pools (index into `o.pools`, and why) whose built image has no
/// `status.changes` yet and was recorded less than [`CHANGES_WAIT_SECONDS`] before `now`:
/// their rollout waits (the pass makes their image `Pending` with this reason), so the
/// first nodes are not planned as reboots a second before the comparison says less is
/// needed. Only when the controller records changes at all. Pure.
pub fn awaiting_changes(
    s: &Snapshot,
    o: &machineos_rollout::Observed,
    now: i64,
) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, pool) in o.pools.iter().enumerate() {
        let PoolImage::Built(image) = &pool.image else {
            continue;
        };
        let Some(record) = s.images.iter().find(|m| {
            m.data
                .pointer("/spec/image")
                .and_then(serde_json::Value::as_str)
                == Some(image.as_str())
        }) else {
            continue;
        };
        if record.data.pointer("/status/changes").is_some() {
            continue;
        }
        let Some(created) = record.creation_timestamp().map(|t| t.0.as_second()) else {
            continue;
        };
        let age = now.saturating_sub(created);
        if (0..CHANGES_WAIT_SECONDS).contains(&age) {
            out.push((
                i,
                format!(
                    "waiting for the image to be compared with the nodes' image (MachineOSImage {} status.changes; at most {}s more)",
                    record.name_any(),
                    CHANGES_WAIT_SECONDS - age
                ),
            ));
        }
    }
    out
}

/// The policies the controller uses, and where they came from.
#[derive(Debug, Clone)]
pub struct Policies {
    /// The merged policies.
    pub policies: ClusterPolicies,
    /// `MachineConfiguration cluster` or `the MCO's defaults`.
    pub source: String,
    read_at: Instant,
}

impl Policies {
    fn defaults() -> Policies {
        Policies {
            policies: ClusterPolicies::defaults(),
            source: "the MCO's defaults".into(),
            read_at: Instant::now(),
        }
    }

    /// Whether these were read less than [`POLICY_TTL`] ago.
    pub fn fresh(&self) -> bool {
        self.read_at.elapsed() < POLICY_TTL
    }

    /// The cluster's policies, read now; what cannot be read, or is invalid, is logged and
    /// the MCO's defaults are used. The merged policies are written back to the object's
    /// status when they differ (`publish`).
    pub async fn read(client: &Client) -> Policies {
        match Policies::read_strict(client).await {
            Ok((Some(object), policies)) => {
                let api = kinds::all(client, &kinds::machine_configuration());
                publish(&api, &object, &policies.policies).await;
                policies
            }
            Ok((None, policies)) => policies,
            Err(e) => {
                tracing::warn!(error = %e, "using the MCO's default disruption policies");
                Policies::defaults()
            }
        }
    }

    /// The cluster's policies, read now, and the object they came from: without the object
    /// (or the kind: a 404), the MCO's defaults; an object that cannot be read, or whose
    /// `spec.nodeDisruptionPolicy` the API server's rules refuse, is an error naming it
    /// (`machineos rollout plan` says so; [`Policies::read`] falls back to the defaults).
    pub async fn read_strict(
        client: &Client,
    ) -> Result<(Option<serde_json::Value>, Policies), String> {
        let api = kinds::all(client, &kinds::machine_configuration());
        let object = match api.get_opt("cluster").await {
            Ok(Some(o)) => serde_json::to_value(&o).map_err(|e| e.to_string())?,
            Ok(None) => return Ok((None, Policies::defaults())),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok((None, Policies::defaults())),
            Err(e) => return Err(format!("reading MachineConfiguration cluster: {e}")),
        };
        let policies = ClusterPolicies::of_machine_configuration(Some(&object))
            .map_err(|e| format!("MachineConfiguration cluster: {e}"))?;
        Ok((
            Some(object),
            Policies {
                policies,
                source: "MachineConfiguration cluster".into(),
                read_at: Instant::now(),
            },
        ))
    }
}

/// Write the merged policies to the object's `status.nodeDisruptionPolicyStatus
/// .clusterPolicies`, as the MCO's operator does, when they differ from what it holds (the
/// same rules give the same value: two writers agree). Best effort: a refusal (no status
/// subresource, no grant) is logged.
async fn publish(
    api: &kube::Api<kube::api::DynamicObject>,
    object: &serde_json::Value,
    policies: &ClusterPolicies,
) {
    let want = policies.status_json();
    if object.pointer("/status/nodeDisruptionPolicyStatus/clusterPolicies") == Some(&want) {
        return;
    }
    let patch =
        serde_json::json!({"status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": want}}});
    if let Err(e) = api
        .patch_status(
            "cluster",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(error = %e, "writing the merged node disruption policies to MachineConfiguration cluster's status");
    }
}

fn class_name(c: Class) -> String {
    c.name().to_owned()
}

/// Each layered pool's moves (pool → its built image and the disruption of moving each of
/// its members not on that image), over the pass's snapshot.
///
/// A node's move is decided from the rendered config it runs alone when its image is that
/// config's build on the same base and extensions image as the target (its MachineOSImage
/// says so): then the images differ by what the configs differ by, and the policies' answer
/// holds — raised by what the paths need when the target's `status.changes` was measured
/// from exactly the node's image (a Containerfile's RUN step the configs do not show:
/// [`machineos_disruption::raise_by_paths`]). When they differ by more — another base or
/// extensions image, a rebuild of the same config, a node image whose MachineOSImage is
/// gone — and that measurement exists, the move is decided with the filesystem difference
/// ([`machineos_disruption::decide_across_images`]: a new base with the same kernel
/// soft-reboots). A measurement counts for a node only when it compared the node's
/// architecture (or the image has one). Otherwise — no `currentConfig`, its MachineConfig
/// gone, an image built for another config or pool, no measured difference — the move
/// counts as a reboot, and the reason says which.
pub fn moves(
    s: &Snapshot,
    o: &machineos_rollout::Observed,
    policies: &Policies,
) -> BTreeMap<String, (String, machineos_disruption::Disruption)> {
    // Only the MachineConfigs named (pools' targets, nodes' current configs) are read.
    let mut wanted: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for pool in &o.pools {
        wanted.insert(pool.config.as_str());
    }
    for n in &o.nodes {
        wanted.extend(n.annotations.current_config.as_deref());
    }
    let mcs: BTreeMap<String, machineos_api::v1::MachineConfig> = s
        .machine_configs
        .iter()
        .filter(|m| wanted.contains(m.name_any().as_str()))
        .filter_map(|m| {
            let v = serde_json::to_value(m.as_ref()).ok()?;
            Some((m.name_any(), serde_json::from_value(v).ok()?))
        })
        .collect();
    let records = ImageRecords::of(&s.images);
    let mut out = BTreeMap::new();
    for pool in &o.pools {
        let PoolImage::Built(image) = &pool.image else {
            continue;
        };
        let Some(target) = mcs.get(&pool.config) else {
            continue;
        };
        let target_record = records.get(image);
        // Per moving node: its MachineConfig, and how its image relates to the target's with
        // their measured difference when it was measured from exactly its image (and its
        // architecture); or why nothing says what it runs.
        let moves: Vec<(String, Result<NodeMove<'_>, String>)> = o
            .nodes
            .iter()
            .filter(|n| {
                pool.node_selector
                    .as_ref()
                    .is_some_and(|sel| sel.matches(&n.labels))
            })
            .filter(|n| n.annotations.current_image.as_deref() != Some(image.as_str()))
            .map(|n| {
                let a = &n.annotations;
                let measured = target_record.and_then(|t| {
                    t.evidence_for(
                        a.current_image.as_deref(),
                        n.labels
                            .get(machineos_vocab::node::ARCH_LABEL)
                            .map(String::as_str),
                    )
                });
                let mc = match a.current_config.as_deref() {
                    None | Some("") => Err(format!("Node {} has no currentConfig", n.name)),
                    Some(c) => mcs
                        .get(c)
                        .ok_or_else(|| format!("its MachineConfig {c} is gone"))
                        .and_then(|mc| {
                            match same_build_inputs(
                                a.current_image.as_deref(),
                                c,
                                &pool.config,
                                &records,
                                target_record,
                            ) {
                                Ok(()) => Ok(NodeMove {
                                    config: mc,
                                    image: measured.map(ImageBasis::SameBase),
                                }),
                                // The images' difference decides, when it was measured.
                                Err(Mismatch {
                                    reason,
                                    images_decide: true,
                                }) if measured.is_some() => Ok(NodeMove {
                                    config: mc,
                                    image: measured.map(|e| ImageBasis::Across(reason, e)),
                                }),
                                Err(m) => Err(m.reason),
                            }
                        }),
                };
                (n.name.clone(), mc)
            })
            .collect();
        let d = machineos_disruption::for_node_moves(&moves, target, &policies.policies);
        out.insert(pool.name.clone(), (image.clone(), d));
    }
    out
}

/// What a MachineOSImage says an image was built from, and what its filesystem differs in
/// from the image before it (`status.changes`).
struct ImageRecord {
    pool: String,
    config: String,
    base: String,
    extensions: Option<String>,
    changes: Option<Measured>,
    /// How many architectures the image has (an index's, or one).
    architectures: usize,
}

impl ImageRecord {
    /// The measured difference, when it was measured from exactly `node_image` and covers
    /// `node_arch` (a single-architecture image, or the architecture compared).
    fn evidence_for(
        &self,
        node_image: Option<&str>,
        node_arch: Option<&str>,
    ) -> Option<&machineos_disruption::ImageEvidence> {
        let m = self.changes.as_ref()?;
        let arch_covered = self.architectures <= 1
            || (!m.architecture.is_empty() && node_arch == Some(m.architecture.as_str()));
        (node_image == Some(m.evidence.from.as_str()) && arch_covered).then_some(&m.evidence)
    }
}

/// What a MachineOSImage's `status.changes` measured: the difference, and the architecture
/// compared (empty on an older record).
struct Measured {
    evidence: machineos_disruption::ImageEvidence,
    architecture: String,
}

/// `status.changes` as the decision takes it; `None` when absent or unreadable.
fn measured(status: Option<&serde_json::Value>) -> Option<Measured> {
    let c = status?;
    Some(Measured {
        evidence: evidence(c)?,
        architecture: c
            .get("architecture")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

fn evidence(c: &serde_json::Value) -> Option<machineos_disruption::ImageEvidence> {
    let count = |k: &str| c.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    Some(machineos_disruption::ImageEvidence {
        from: c.get("from")?.as_str()?.to_owned(),
        changed: count("added") + count("removed") + count("modified"),
        kernel_changed: c.get("kernelChanged")?.as_bool()?,
        path_class: Class::parse(c.get("pathClass")?.as_str()?)?,
    })
}

/// The MachineOSImages by `spec.image`.
struct ImageRecords(BTreeMap<String, ImageRecord>);

impl ImageRecords {
    fn of(images: &[std::sync::Arc<kube::api::DynamicObject>]) -> ImageRecords {
        let text = |v: &serde_json::Value, p: &str| v.pointer(p)?.as_str().map(str::to_owned);
        ImageRecords(
            images
                .iter()
                .filter_map(|m| {
                    let d = &m.data;
                    Some((
                        text(d, "/spec/image")?,
                        ImageRecord {
                            pool: text(d, "/spec/machineConfigPool/name")?,
                            config: text(d, "/spec/machineConfig/name")?,
                            base: text(d, "/spec/baseImage")?,
                            extensions: text(d, "/spec/extensionsImage"),
                            changes: measured(d.pointer("/status/changes")),
                            architectures: d
                                .pointer("/spec/architectures")
                                .and_then(serde_json::Value::as_array)
                                .map_or(1, Vec::len),
                        },
                    ))
                })
                .collect(),
        )
    }

    fn get(&self, image: &str) -> Option<&ImageRecord> {
        self.0.get(image)
    }
}

/// Why a node's move cannot be decided from the configs alone.
struct Mismatch {
    reason: String,
    /// Whether the two images' filesystem difference may decide instead: the node's image
    /// and the target differ by more than the configs (base, extensions, a rebuild, a
    /// record gone), not by an inconsistency (an image built for another config or pool).
    images_decide: bool,
}

/// `Ok` when the node's image is its config's build from the target's base and extensions.
fn same_build_inputs(
    current_image: Option<&str>,
    current_config: &str,
    target_config: &str,
    records: &ImageRecords,
    target: Option<&ImageRecord>,
) -> Result<(), Mismatch> {
    let no = |reason: String| Mismatch {
        reason,
        images_decide: false,
    };
    let images = |reason: String| Mismatch {
        reason,
        images_decide: true,
    };
    let Some(target) = target else {
        return Err(no("no MachineOSImage records the pool's image".into()));
    };
    let Some(img) = current_image else {
        return Err(no("the node names no currentImage".into()));
    };
    let Some(cur) = records.get(img) else {
        return Err(images(format!("no MachineOSImage records its image {img}")));
    };
    if cur.pool != target.pool || cur.config != current_config {
        return Err(no(format!(
            "its image {img} was built for {} {}, not for its currentConfig {current_config}",
            cur.pool, cur.config
        )));
    }
    if cur.base != target.base {
        return Err(images(format!(
            "the base image changes ({} → {})",
            cur.base, target.base
        )));
    }
    if cur.extensions != target.extensions {
        return Err(images("the extensions image changes".into()));
    }
    if current_config == target_config {
        return Err(images(format!(
            "the image is rebuilt from the same MachineConfig {current_config}: what changed is not a configuration change"
        )));
    }
    Ok(())
}

/// The plan each moving node is handed (node → plan), from [`moves`].
pub fn plans(
    moves: &BTreeMap<String, (String, machineos_disruption::Disruption)>,
) -> BTreeMap<String, machineos_disruption::NodePlan> {
    let mut out = BTreeMap::new();
    for (image, d) in moves.values() {
        for n in &d.nodes {
            out.insert(
                n.node.clone(),
                machineos_disruption::NodePlan {
                    config: d.to.clone(),
                    image: image.clone(),
                    class: n.class,
                    actions: n.actions.clone(),
                },
            );
        }
    }
    out
}

/// Per layered pool with a built image: what its members not on the image cost to move
/// (`None` for a pool none of whose members is left to move), from [`moves`].
pub fn for_pools(
    moves: &BTreeMap<String, (String, machineos_disruption::Disruption)>,
    policies: &Policies,
) -> BTreeMap<String, Option<ImageDisruption>> {
    let mut out = BTreeMap::new();
    for (pool, (_, d)) in moves {
        if d.nodes.is_empty() {
            out.insert(pool.clone(), None);
            continue;
        }
        let mut counts: BTreeMap<Class, i64> = BTreeMap::new();
        for n in &d.nodes {
            *counts.entry(n.class).or_default() += 1;
        }
        out.insert(
            pool.clone(),
            Some(ImageDisruption {
                class: class_name(d.class),
                nodes: counts
                    .into_iter()
                    .rev()
                    .map(|(class, count)| ClassCount {
                        class: class_name(class),
                        count,
                    })
                    .collect(),
                policies: policies.source.clone(),
                acted_on: true,
            }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::api::DynamicObject;
    use machineos_rollout::observed::{PoolImage, PoolObserved};
    use serde_json::json;

    use super::*;

    const IMAGE: &str =
        "reg/os@sha256:0000000000000000000000000000000000000000000000000000000000000001";

    fn pool(image: PoolImage) -> PoolObserved {
        PoolObserved {
            name: "worker".into(),
            node_selector: None,
            config: "rendered-worker-1".into(),
            image,
            paused: false,
            max_unavailable: None,
            min_ready_seconds: 0,
            max_staging: None,
            conditions: Default::default(),
            gate: Ok(None),
            canary: None,
            rollback_pool: false,
        }
    }

    fn record(created: &str, changes: bool) -> Arc<DynamicObject> {
        let mut v = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1alpha1",
            "kind": "MachineOSImage",
            "metadata": {"name": "worker-1", "creationTimestamp": created},
            "spec": {"image": IMAGE},
        });
        if changes {
            v["status"] = json!({"changes": {"from": "reg/os@sha256:prev"}});
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    /// The wait: only for a built image without `status.changes`, recorded less than
    /// [`CHANGES_WAIT_SECONDS`] ago; never for a pending or non-layered pool.
    #[test]
    fn a_rollout_waits_for_its_images_changes_at_most_a_minute() {
        // 2026-12-04T12:00:00Z.
        let created = 1_796_385_600;
        let table: Vec<(PoolImage, bool, i64, bool)> = vec![
            (PoolImage::Built(IMAGE.into()), false, created, true),
            (PoolImage::Built(IMAGE.into()), false, created + 59, true),
            (PoolImage::Built(IMAGE.into()), false, created + 60, false),
            (PoolImage::Built(IMAGE.into()), true, created + 1, false),
            (
                PoolImage::Built("reg/os@sha256:other".into()),
                false,
                created + 1,
                false,
            ),
            (
                PoolImage::Pending("building".into()),
                false,
                created + 1,
                false,
            ),
            (PoolImage::NotLayered, false, created + 1, false),
        ];
        for (image, changes, now, waits) in table {
            let s = Snapshot {
                images: vec![record("2026-12-04T12:00:00Z", changes)],
                ..Snapshot::default()
            };
            let o = machineos_rollout::Observed {
                pools: vec![pool(image.clone())],
                ..Default::default()
            };
            let got = awaiting_changes(&s, &o, now);
            assert_eq!(
                got.len() == 1,
                waits,
                "{image:?} changes={changes} now={now}"
            );
            if let Some((i, why)) = got.first() {
                assert_eq!(*i, 0);
                assert!(
                    why.contains("MachineOSImage worker-1 status.changes"),
                    "{why}"
                );
            }
        }
    }
}
