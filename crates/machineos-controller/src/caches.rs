//! The controller's caches: one kube-runtime reflector per kind it reads (cluster-wide for
//! the MCO kinds and Nodes, the controller's namespace for ConfigMaps and Secrets, the
//! ephemeral build objects by label), each waking the loop on every change, and the
//! [`Snapshot`] a pass decides on — taken once per pass, in a deterministic order.

use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Notify;

use crate::kinds;
use crate::observe::Snapshot;

/// The reflectors' stores.
pub(crate) struct Caches {
    pools: Store<DynamicObject>,
    machine_configs: Store<DynamicObject>,
    machine_os_configs: Store<DynamicObject>,
    builds: Store<DynamicObject>,
    images: Store<DynamicObject>,
    machine_images: Store<DynamicObject>,
    config_maps: Store<ConfigMap>,
    secrets: Store<Secret>,
    nodes: Store<Node>,
    machine_config_nodes: Store<DynamicObject>,
    jobs: Store<DynamicObject>,
    pods: Store<DynamicObject>,
    openshift_builds: Option<Store<DynamicObject>>,
}

/// Run a reflector's stream on its own task, waking the loop on every change (errors are
/// logged; kube-runtime's backoff retries them).
fn drive<K, S>(stream: S, wake: &Arc<Notify>, tasks: &mut Vec<tokio::task::JoinHandle<()>>)
where
    S: futures_util::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
{
    let wake = wake.clone();
    tasks.push(tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Err(e) = item {
                tracing::warn!(error = %e, "watch error (retrying)");
            }
            wake.notify_one();
        }
    }));
}

/// A cluster-wide cache of the objects of `ar`.
fn watch_dynamic(
    client: &Client,
    ar: ApiResource,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    watch_api(api, ar, watcher::Config::default(), wake, tasks)
}

/// A cache of the ephemeral build objects of kind `ar` in namespace `ns`.
fn watch_ephemeral(
    client: &Client,
    ar: ApiResource,
    ns: &str,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let config = watcher::Config::default()
        .labels(machineos_buildrequest::objects::names::EPHEMERAL_BUILD_OBJECT_LABEL);
    watch_api(api, ar, config, wake, tasks)
}

/// A reflector over `api` (objects of `ar`) with `config`.
fn watch_api(
    api: Api<DynamicObject>,
    ar: ApiResource,
    config: watcher::Config,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let writer = reflector::store::Writer::new(ar);
    let reader = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .touched_objects();
    drive(stream, wake, tasks);
    reader
}

/// A typed cache; `Api<PartialObjectMeta<K>>` watches metadata only (Nodes).
fn watch_typed<K>(
    api: Api<K>,
    wake: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    drive(stream, wake, tasks);
    reader
}

impl Caches {
    pub(crate) fn start(
        client: &Client,
        ns: &str,
        openshift_builds: bool,
        wake: &Arc<Notify>,
        tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    ) -> Caches {
        Caches {
            pools: watch_dynamic(client, kinds::pool(), wake, tasks),
            machine_configs: watch_dynamic(client, kinds::machine_config(), wake, tasks),
            machine_os_configs: watch_dynamic(client, kinds::machine_os_config(), wake, tasks),
            builds: watch_dynamic(client, kinds::build(), wake, tasks),
            images: watch_dynamic(client, kinds::image(), wake, tasks),
            machine_images: watch_dynamic(client, kinds::machine_image(), wake, tasks),
            config_maps: watch_typed(Api::namespaced(client.clone(), ns), wake, tasks),
            secrets: watch_typed(Api::namespaced(client.clone(), ns), wake, tasks),
            nodes: watch_typed(Api::<Node>::all(client.clone()), wake, tasks),
            machine_config_nodes: watch_dynamic(client, kinds::machine_config_node(), wake, tasks),
            jobs: watch_ephemeral(client, kinds::job(), ns, wake, tasks),
            pods: watch_ephemeral(client, kinds::pod(), ns, wake, tasks),
            openshift_builds: openshift_builds
                .then(|| watch_ephemeral(client, kinds::openshift_build(), ns, wake, tasks)),
        }
    }

    pub(crate) async fn wait_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.pools.wait_until_ready().await?;
        self.machine_configs.wait_until_ready().await?;
        self.machine_os_configs.wait_until_ready().await?;
        self.builds.wait_until_ready().await?;
        self.images.wait_until_ready().await?;
        self.machine_images.wait_until_ready().await?;
        self.config_maps.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        self.jobs.wait_until_ready().await?;
        self.machine_config_nodes.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        if let Some(b) = &self.openshift_builds {
            b.wait_until_ready().await?;
        }
        self.nodes.wait_until_ready().await
    }

    pub(crate) fn snapshot(&self, ns: &str) -> Snapshot {
        let mut s = Snapshot {
            namespace: ns.to_owned(),
            pools: self.pools.state(),
            machine_configs: self.machine_configs.state(),
            machine_os_configs: self.machine_os_configs.state(),
            builds: self.builds.state(),
            images: self.images.state(),
            machine_images: self.machine_images.state(),
            config_maps: self.config_maps.state(),
            secrets: self.secrets.state(),
            nodes: self.nodes.state(),
            machine_config_nodes: self.machine_config_nodes.state(),
            jobs: self.jobs.state(),
            pods: self.pods.state(),
            openshift_builds: self
                .openshift_builds
                .as_ref()
                .map(|b| b.state())
                .unwrap_or_default(),
        };
        // Deterministic order: the stores are hash maps.
        s.pools.sort_by_key(|o| o.name_any());
        s.machine_configs.sort_by_key(|o| o.name_any());
        s.builds.sort_by_key(|o| o.name_any());
        s.nodes.sort_by_key(|o| o.name_any());
        s.machine_images.sort_by_key(|o| o.name_any());
        s
    }
}
