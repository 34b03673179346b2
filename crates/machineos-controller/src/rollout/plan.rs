//! `machineos rollout plan` and `status`: the rollout a pool would take, and where it
//! stands, read from the API server with the controller's own observation and
//! [`machineos_rollout::plan`] / [`machineos_rollout::status`]; and what each move costs
//! its node by the node disruption policies of the `MachineConfiguration` object `cluster`
//! when the cluster serves one, else the MCO's defaults: [`plan_with_disruption`] decides
//! it as the controller does (`super::disruption::moves`: the configs' difference when the
//! node's image is its config's build on the target's base, else a reboot), so the plan's
//! batches count the moves applied live as the controller will — none takes a slot;
//! [`disruption_from_cluster`] is the policies' answer for two configs alone. Nothing is
//! written.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::{Client, ResourceExt};

use crate::api::{self};
use crate::kinds;
use crate::observe::{self, Snapshot};

/// The rollout plan of `pool` as the controller would carry it out now, read from the API
/// server (nothing is written): `machineos rollout plan`.
pub async fn plan_from_cluster(
    client: &Client,
    namespace: &str,
    pool: &str,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> Result<machineos_rollout::plan::Plan, String> {
    let o = observe_cluster(client, namespace, controller_node, min_ready_seconds).await?;
    machineos_rollout::plan(&o, pool, api::now()).map_err(|e| e.to_string())
}

/// Where `pool`'s rollout stands now, read from the API server (nothing is written):
/// `machineos rollout status`.
pub async fn status_from_cluster(
    client: &Client,
    namespace: &str,
    pool: &str,
    min_ready_seconds: i64,
) -> Result<machineos_rollout::Status, String> {
    let o = observe_cluster(client, namespace, None, min_ready_seconds).await?;
    machineos_rollout::status(&o, pool, api::now()).map_err(|e| e.to_string())
}

/// `machineos rollout plan`: the plan of `pool` with what each move costs, decided as the
/// controller decides it (see the module documentation). The costs need the
/// MachineConfigs and the policies: when those cannot be read (a reader without the grant,
/// an invalid `MachineConfiguration`), the plan is returned with the reason in their place,
/// and its batches count every move as a reboot.
pub async fn plan_with_disruption(
    client: &Client,
    namespace: &str,
    pool: &str,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> Result<
    (
        machineos_rollout::plan::Plan,
        Result<(machineos_disruption::Disruption, String), String>,
    ),
    String,
> {
    let (mut s, mut o) =
        observe_snapshot(client, namespace, controller_node, min_ready_seconds).await?;
    let costs = async {
        let (_, p) = super::disruption::Policies::read_strict(client).await?;
        s.machine_configs = kinds::all(client, &kinds::machine_config())
            .list(&kube::api::ListParams::default())
            .await
            .map_err(|e| format!("listing MachineConfigs: {e}"))?
            .items
            .into_iter()
            .map(Arc::new)
            .collect();
        let moves = super::disruption::moves(&s, &o, &p);
        Ok::<_, String>((moves, p.source))
    }
    .await;
    let disruption = match costs {
        Ok((moves, source)) => {
            let mut plans = super::disruption::plans(&moves);
            for n in &mut o.nodes {
                n.move_plan = plans.remove(&n.name);
            }
            moves
                .get(pool)
                .map(|(_, d)| (d.clone(), source))
                .ok_or_else(|| format!("pool {pool} has no built image to move onto"))
        }
        Err(e) => Err(e),
    };
    let plan = machineos_rollout::plan(&o, pool, api::now()).map_err(|e| e.to_string())?;
    Ok((plan, disruption))
}

/// The rollout's observation, as the controller makes it, from one list of each kind.
async fn observe_cluster(
    client: &Client,
    namespace: &str,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> Result<machineos_rollout::Observed, String> {
    observe_snapshot(client, namespace, controller_node, min_ready_seconds)
        .await
        .map(|(_, o)| o)
}

/// The snapshot (without MachineConfigs) and the rollout's observation of it.
async fn observe_snapshot(
    client: &Client,
    namespace: &str,
    controller_node: Option<&str>,
    min_ready_seconds: i64,
) -> Result<(Snapshot, machineos_rollout::Observed), String> {
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
    let o = super::observe::observe(&s, &lifecycle, controller_node, min_ready_seconds);
    Ok((s, o))
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

/// What moving each of `nodes` from the rendered MachineConfig it runs (its `currentConfig`
/// annotation) to `target` costs it, by the cluster's node disruption policies
/// ([`machineos_disruption::for_nodes`]), from the configs alone (whatever images the nodes
/// run); and where the policies came from.
pub async fn disruption_from_cluster(
    client: &Client,
    target: &str,
    nodes: &[String],
) -> Result<(machineos_disruption::Disruption, String), String> {
    use kube::api::Api;
    let mcs: Api<machineos_api::v1::MachineConfig> = Api::all(client.clone());
    let get_mc = |name: String| {
        let mcs = mcs.clone();
        async move {
            mcs.get_opt(&name)
                .await
                .map_err(|e| format!("reading MachineConfig {name}: {e}"))
        }
    };
    let target_mc = get_mc(target.to_owned())
        .await?
        .ok_or_else(|| format!("no MachineConfig {target}"))?;
    let (_, read) = super::disruption::Policies::read_strict(client).await?;
    let (policies, source) = (read.policies, read.source);
    // One list of the Nodes, not a read per moving node.
    let listed = kube::Api::<Node>::all(client.clone())
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| format!("listing Nodes: {e}"))?;
    let configs: std::collections::BTreeMap<String, String> = listed
        .items
        .iter()
        .filter_map(|n| {
            let c = n.annotations().get(machineos_vocab::node::CURRENT_CONFIG)?;
            Some((n.name_any(), c.clone()))
        })
        .collect();
    let current: Vec<(String, Result<String, String>)> = nodes
        .iter()
        .map(|name| {
            let config = configs
                .get(name)
                .filter(|c| !c.is_empty())
                .cloned()
                .ok_or_else(|| format!("Node {name} has no currentConfig"));
            (name.clone(), config)
        })
        .collect();
    let mut by_name: std::collections::BTreeMap<String, Option<machineos_api::v1::MachineConfig>> =
        std::collections::BTreeMap::new();
    for config in current.iter().filter_map(|(_, c)| c.as_ref().ok()) {
        if !by_name.contains_key(config) {
            by_name.insert(config.clone(), get_mc(config.clone()).await?);
        }
    }
    let moves: Vec<(String, Result<&machineos_api::v1::MachineConfig, String>)> = current
        .into_iter()
        .map(|(node, config)| {
            let mc = config.and_then(|c| {
                by_name
                    .get(&c)
                    .and_then(Option::as_ref)
                    .ok_or_else(|| format!("its MachineConfig {c} is gone"))
            });
            (node, mc)
        })
        .collect();
    Ok((
        machineos_disruption::for_nodes(&moves, &target_mc, &policies),
        source,
    ))
}
