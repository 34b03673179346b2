//! Which architectures a pool's image is built for: the MachineOSConfig's annotation
//! `machineos.io/architectures` (a comma-separated list of `kubernetes.io/arch` values) when
//! set, else the distinct `kubernetes.io/arch` labels of the nodes the pool selects — so a
//! pool of amd64 and arm64 nodes gets one image index with both, and a pool that gains an
//! arm64 node gets arm64 in its next build. Pure: a function of the snapshot's objects.
//!
//! Names are Kubernetes' (GOARCH: `amd64`, `arm64`, `ppc64le`, `s390x`), sorted and
//! deduplicated, so equal inputs give equal lists (and equal index digests). Empty when
//! neither source says: the backend builds its own platform then.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::DynamicObject;

/// The MachineOSConfig annotation that fixes the architectures built.
pub const ARCHITECTURES_ANNOTATION: &str = "machineos.io/architectures";

/// The node label naming a node's architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";

/// The architectures to build for `pool` (see the module documentation).
pub fn for_pool(
    pool: Option<&DynamicObject>,
    machine_os_config: Option<&DynamicObject>,
    nodes: &[std::sync::Arc<Node>],
) -> Vec<String> {
    if let Some(list) =
        machine_os_config.and_then(|m| m.annotations().get(ARCHITECTURES_ANNOTATION))
    {
        let set: BTreeSet<String> = list
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        if !set.is_empty() {
            return set.into_iter().collect();
        }
    }
    let Some(pool) = pool else {
        return Vec::new();
    };
    let v: machineos_kube::mco::PoolView = crate::observe::view_of("MachineConfigPool", pool);
    let Some(selector) =
        crate::rollout::observe::selector(v.spec.node_selector.as_ref(), "spec.nodeSelector")
    else {
        return Vec::new();
    };
    nodes
        .iter()
        .filter(|n| selector.matches(n.labels()))
        .filter_map(|n| n.labels().get(ARCH_LABEL).cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn node(name: &str, labels: &[(&str, &str)]) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        Arc::new(n)
    }

    fn obj(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn architectures_come_from_the_annotation_else_the_pools_nodes() {
        let pool = obj(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}
        }));
        let worker = ("node-role.kubernetes.io/worker", "");
        let nodes = vec![
            node("a", &[worker, (ARCH_LABEL, "arm64")]),
            node("b", &[worker, (ARCH_LABEL, "amd64")]),
            node("c", &[worker, (ARCH_LABEL, "arm64")]),
            node(
                "m",
                &[
                    ("node-role.kubernetes.io/master", ""),
                    (ARCH_LABEL, "s390x"),
                ],
            ),
            node("x", &[worker]),
        ];
        assert_eq!(for_pool(Some(&pool), None, &nodes), ["amd64", "arm64"]);
        let mosc = |a: &str| {
            obj(serde_json::json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineOSConfig",
                "metadata": {"name": "worker", "annotations": {ARCHITECTURES_ANNOTATION: a}},
            }))
        };
        assert_eq!(
            for_pool(Some(&pool), Some(&mosc("s390x, amd64,amd64")), &nodes),
            ["amd64", "s390x"]
        );
        // An empty annotation says nothing.
        assert_eq!(
            for_pool(Some(&pool), Some(&mosc(" ")), &nodes),
            ["amd64", "arm64"]
        );
        assert!(for_pool(Some(&pool), None, &[]).is_empty());
        assert!(for_pool(None, None, &nodes).is_empty());
    }
}
