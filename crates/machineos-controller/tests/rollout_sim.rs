//! A simulated cluster: the test API server, the real loopback registry, the controller and
//! one `machineos agent` per node, each on its own fake host, where a "reboot" stops that
//! agent, boots the fake host into its staged image (NotReady, then Ready, as a kubelet would
//! report) and starts a new agent. Told an image index's manifest for its architecture, a
//! host reports that manifest for the index (pulled, staged, booted), as bootc and rpm-ostree
//! do ([`PlatformHost`]). The API server's state is sampled every 100 ms: the
//! number of unavailable nodes never exceeds the pool's limit, and the timeline (which
//! nodes were updating when) is printed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_agent::simulate::{self, Broken};
use machineos_agent::{AgentOptions, run as run_agent};
use machineos_controller::kinds;
use machineos_host::{FakeHost, Host};
use machineos_kubetest::hooks::{self, PodPhase};
use machineos_rollout::vocab;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// How long a simulated reboot keeps a machine down.
const DOWN: Duration = Duration::from_millis(300);
const OLD: &str =
    "quay.io/fedora/os@sha256:0000000000000000000000000000000000000000000000000000000000000000";
const CANARY: &str =
    "quay.io/fedora/os@sha256:cafecafecafecafecafecafecafecafecafecafecafecafecafecafecafecafe";

/// One simulated machine: its fake host, what its platform reports for image indexes, and
/// its running agent.
struct Machine {
    host: FakeHost,
    platform: Manifests,
    agent: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
    /// Images it comes up broken on, and how (`machineos agent --host fake`'s rule: built
    /// from a rendered MachineConfig that writes `/etc/machineos-fake/never-ready`, or
    /// `/etc/machineos-fake/kubelet-broken`).
    bad: BTreeMap<String, Broken>,
}

/// Image index → the manifest of one machine's architecture.
type Manifests = Arc<std::sync::Mutex<BTreeMap<String, String>>>;

/// The fake host as the agent sees it on a real platform: bootc and rpm-ostree report the
/// manifest of the host's architecture for an index they pulled, deployed or booted
/// (`platform`: index → that manifest; empty: the fake host's report as it is).
struct PlatformHost {
    host: FakeHost,
    platform: Manifests,
}

impl PlatformHost {
    fn resolve(&self, image: &mut Option<String>) {
        let platform = self.platform.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = image.as_ref().and_then(|i| platform.get(i)) {
            *image = Some(m.clone());
        }
    }
}

impl Host for PlatformHost {
    fn kind(&self) -> machineos_host::HostKind {
        self.host.kind()
    }
    fn status(&self) -> Result<machineos_host::HostStatus, machineos_host::HostError> {
        let mut s = self.host.status()?;
        self.resolve(&mut s.booted);
        self.resolve(&mut s.staged);
        self.resolve(&mut s.rollback);
        for p in &mut s.pulled {
            let mut one = Some(std::mem::take(p));
            self.resolve(&mut one);
            *p = one.unwrap_or_default();
        }
        Ok(s)
    }
    fn pull(
        &self,
        image: &str,
        auth: Option<&std::path::Path>,
    ) -> Result<(), machineos_host::HostError> {
        self.host.pull(image, auth)
    }
    fn deploy(
        &self,
        image: &str,
        auth: Option<&std::path::Path>,
    ) -> Result<(), machineos_host::HostError> {
        self.host.deploy(image, auth)
    }
    fn kargs(&self, add: &[String], remove: &[String]) -> Result<(), machineos_host::HostError> {
        self.host.kargs(add, remove)
    }
    fn reboot(&self) -> Result<(), machineos_host::HostError> {
        self.host.reboot()
    }
    fn soft_reboot(&self) -> Result<(), machineos_host::HostError> {
        self.host.soft_reboot()
    }
    fn apply_live(&self) -> Result<machineos_host::live::Applied, machineos_host::HostError> {
        self.host.apply_live()
    }
    fn sync_live(&self) -> Result<machineos_host::live::Applied, machineos_host::HostError> {
        self.host.sync_live()
    }
    fn systemctl(&self, op: &machineos_host::Systemctl) -> Result<(), machineos_host::HostError> {
        self.host.systemctl(op)
    }
    fn write_pull_secret(
        &self,
        dockerconfigjson: &[u8],
    ) -> Result<std::path::PathBuf, machineos_host::HostError> {
        self.host.write_pull_secret(dockerconfigjson)
    }
    fn write_ssh_keys(&self, user: &str, keys: &[String]) -> Result<(), machineos_host::HostError> {
        self.host.write_ssh_keys(user, keys)
    }
    fn release_pull_secret(&self) -> Result<(), machineos_host::HostError> {
        self.host.release_pull_secret()
    }
    fn rollback(&self, to: &str) -> Result<(), machineos_host::HostError> {
        // The agent may name the manifest the host reported: the fake host keeps the index.
        let index = {
            let platform = self.platform.lock().unwrap_or_else(|e| e.into_inner());
            platform
                .iter()
                .find(|(_, m)| m.as_str() == to)
                .map(|(i, _)| i.clone())
        };
        self.host.rollback(index.as_deref().unwrap_or(to))
    }

    fn boot_guard_record(&self) -> Result<Option<String>, machineos_host::HostError> {
        self.host.boot_guard_record()
    }

    fn clear_boot_guard_record(&self) -> Result<(), machineos_host::HostError> {
        self.host.clear_boot_guard_record()
    }
}

/// The simulated machines and the "power supply" that reboots them.
struct Fleet {
    machines: Arc<Mutex<BTreeMap<String, Machine>>>,
    client: Client,
    stop: CancellationToken,
}

fn agent_options(node: &str) -> AgentOptions {
    let mut o = AgentOptions::new(node, NS);
    o.drain_retry = Duration::from_millis(300);
    o.drain_timeout = Duration::from_secs(120);
    o.failure_backoff = Duration::from_millis(300);
    o.resync = Duration::from_secs(2);
    o
}

fn start_agent(
    client: &Client,
    node: &str,
    host: &FakeHost,
    platform: &Manifests,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let token = CancellationToken::new();
    let (client, host, opts, t) = (
        client.clone(),
        PlatformHost {
            host: host.clone(),
            platform: platform.clone(),
        },
        agent_options(node),
        token.clone(),
    );
    let handle = tokio::spawn(async move {
        let host: Arc<dyn Host> = Arc::new(host);
        if let Err(e) = run_agent(client, host, opts, t).await {
            tracing::warn!(error = %e, "agent ended");
        }
    });
    (token, handle)
}

impl Fleet {
    /// Nodes `names` (labels as given), each booted into `OLD`, with an agent.
    async fn start(c: &Cluster, nodes: &[(String, BTreeMap<String, String>)]) -> Fleet {
        // The agents' client, as `machineos agent` builds it: no automatic retry of 429s (a
        // PodDisruptionBudget's refusal is the drain's to report and retry).
        let kc = kube::config::Kubeconfig::from_yaml(&c.server.kubeconfig()).unwrap();
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        let client = Client::try_from(machineos_agent::client_config(cfg)).unwrap();
        let api: Api<Node> = Api::all(client.clone());
        let mut machines = BTreeMap::new();
        for (name, labels) in nodes {
            hooks::ensure_node(c.server.shared(), name).unwrap();
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {
                    "labels": labels,
                    "annotations": {
                        vocab::CURRENT_IMAGE: OLD, vocab::DESIRED_IMAGE: OLD,
                        vocab::STATE: "Done",
                    },
                }})),
            )
            .await
            .unwrap();
            let host = FakeHost::booted(OLD);
            let platform = Manifests::default();
            let agent = Some(start_agent(&client, name, &host, &platform));
            machines.insert(
                name.clone(),
                Machine {
                    host,
                    platform,
                    agent,
                    bad: BTreeMap::new(),
                },
            );
        }
        let fleet = Fleet {
            machines: Arc::new(Mutex::new(machines)),
            client,
            stop: CancellationToken::new(),
        };
        fleet.power_supply(c);
        fleet
    }

    /// Reboot every machine whose agent asked for it: stop the agent, NotReady, boot the
    /// staged image, Ready, a new agent.
    fn power_supply(&self, c: &Cluster) {
        let (machines, client, stop) = (
            self.machines.clone(),
            self.client.clone(),
            self.stop.clone(),
        );
        let shared = c.server.shared().clone();
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                // Taken once: the request is consumed when the power supply acts on it.
                let due: Vec<(String, bool)> = machines
                    .lock()
                    .await
                    .iter()
                    .filter_map(|(n, m)| {
                        let mut h = m.host.lock();
                        if std::mem::take(&mut h.reboot_requested) {
                            Some((n.clone(), false))
                        } else if std::mem::take(&mut h.soft_reboot_requested) {
                            Some((n.clone(), true))
                        } else {
                            None
                        }
                    })
                    .collect();
                for (name, soft) in due {
                    let (client, machines, shared) =
                        (client.clone(), machines.clone(), shared.clone());
                    tokio::spawn(async move {
                        let agent = machines
                            .lock()
                            .await
                            .get_mut(&name)
                            .and_then(|m| m.agent.take());
                        if let Some((t, h)) = agent {
                            t.cancel();
                            let _ = h.await;
                        }
                        let bad = simulate::broken_image(&client, &name).await;
                        let _ = hooks::set_node_ready(&shared, &name, false);
                        tokio::time::sleep(DOWN).await;
                        let host = {
                            let mut ms = machines.lock().await;
                            let Some(m) = ms.get_mut(&name) else { return };
                            m.bad.extend(bad);
                            if soft {
                                m.host.soft_boot();
                            } else {
                                m.host.boot();
                            }
                            m.host.clone()
                        };
                        let how = |m: &Machine| {
                            let booted = m.host.lock().status.booted.clone();
                            booted.and_then(|b| m.bad.get(&b).copied())
                        };
                        // No kubelet, no agent: the image's boot guard, as the simulated
                        // machine of `machineos agent --host fake` runs it.
                        while how(&machines.lock().await[&name]) == Some(Broken::Kubelet) {
                            if !simulate::guard_boot(&host, DOWN).await {
                                return; // down for good
                            }
                        }
                        let mut ms = machines.lock().await;
                        let Some(m) = ms.get_mut(&name) else { return };
                        let ready = how(m).is_none();
                        let _ = hooks::set_node_ready(&shared, &name, ready);
                        m.agent = Some(start_agent(&client, &name, &m.host, &m.platform));
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }

    /// Kill node `name`'s agent (abort, mid-whatever) and start a new one.
    async fn restart_agent(&self, name: &str) {
        let mut ms = self.machines.lock().await;
        let Some(m) = ms.get_mut(name) else { return };
        if let Some((_, h)) = m.agent.take() {
            h.abort();
            let _ = h.await;
        }
        m.agent = Some(start_agent(&self.client, name, &m.host, &m.platform));
    }

    /// From now on, node `name`'s host reports `manifest` for the image index `index`.
    async fn reports(&self, name: &str, index: &str, manifest: &str) {
        let ms = self.machines.lock().await;
        if let Some(m) = ms.get(name) {
            m.platform
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(index.to_owned(), manifest.to_owned());
        }
    }

    async fn host(&self, name: &str) -> FakeHost {
        self.machines.lock().await[name].host.clone()
    }

    async fn shutdown(&self) {
        self.stop.cancel();
        for m in self.machines.lock().await.values_mut() {
            if let Some((t, h)) = m.agent.take() {
                t.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
            }
        }
    }
}

/// A node's state as the sampler reads it.
fn updating(n: &Node) -> bool {
    let a = n.annotations();
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let cordoned = n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    !ready
        || cordoned
        || a.get(vocab::STATE).map(String::as_str) != Some("Done")
        || a.get(vocab::DESIRED_IMAGE) != a.get(vocab::CURRENT_IMAGE)
        || a.get(vocab::DESIRED_CONFIG) != a.get(vocab::CURRENT_CONFIG)
}

/// (ms since the start, the nodes unavailable then).
type Sample = (u128, BTreeSet<String>);

/// Samples the nodes every 100 ms: the timeline of which nodes were unavailable.
struct Sampler {
    timeline: Arc<Mutex<Vec<Sample>>>,
    /// When each node was first seen desired onto an image other than `OLD`.
    targeted: Arc<Mutex<BTreeMap<String, u128>>>,
    stop: CancellationToken,
}

impl Sampler {
    fn start(client: Client) -> Sampler {
        let timeline = Arc::new(Mutex::new(Vec::new()));
        let targeted = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = CancellationToken::new();
        let (t, s, tg) = (timeline.clone(), stop.clone(), targeted.clone());
        tokio::spawn(async move {
            let api: Api<Node> = Api::all(client);
            let start = std::time::Instant::now();
            while !s.is_cancelled() {
                if let Ok(list) = api.list(&ListParams::default()).await {
                    let now = start.elapsed().as_millis();
                    let down: BTreeSet<String> = list
                        .items
                        .iter()
                        .filter(|n| updating(n))
                        .map(|n| n.name_any())
                        .collect();
                    t.lock().await.push((now, down));
                    let mut tg = tg.lock().await;
                    for n in &list.items {
                        if n.annotations()
                            .get(vocab::DESIRED_IMAGE)
                            .is_some_and(|i| i != OLD)
                        {
                            tg.entry(n.name_any()).or_insert(now);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Sampler {
            timeline,
            targeted,
            stop,
        }
    }

    /// The timeline, compressed to its changes.
    async fn changes(&self) -> Vec<Sample> {
        let mut out: Vec<Sample> = Vec::new();
        for (t, set) in self.timeline.lock().await.iter() {
            if out.last().is_none_or(|(_, s)| s != set) {
                out.push((*t, set.clone()));
            }
        }
        out
    }
}

fn worker_labels(zone: &str) -> BTreeMap<String, String> {
    [
        ("node-role.kubernetes.io/worker".to_owned(), String::new()),
        (vocab::ZONE_LABEL.to_owned(), zone.to_owned()),
    ]
    .into()
}

async fn pool_with(c: &Cluster, max_unavailable: Value, min_ready: &str) {
    let mut pool = worker_pool();
    pool["spec"]["maxUnavailable"] = max_unavailable;
    pool["metadata"]["annotations"] = json!({"machineos.io/min-ready-seconds": min_ready});
    c.apply(&kinds::pool(), pool).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    c.apply(
        &kinds::machine_os_config(),
        machine_os_config(&format!("{}/machineos/worker:latest", c.registry.host())),
    )
    .await;
}

/// A running pod on `node` with `labels`, as the kubelet reports it.
async fn pod_on(c: &Cluster, name: &str, node: &str, labels: Value) {
    let api: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app:1"}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    hooks::set_pod_phase(c.server.shared(), "default", name, &PodPhase::Running).unwrap();
}

async fn nodes(c: &Cluster) -> Vec<Node> {
    let api: Api<Node> = Api::all(c.client.clone());
    api.list(&ListParams::default()).await.unwrap().items
}

/// Poll until `f` holds over the nodes (generous bound), or panic with `what`.
async fn until_nodes(c: &Cluster, what: &str, limit: Duration, f: impl Fn(&[Node]) -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let list = nodes(c).await;
        if f(&list) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let dump: Vec<String> = list
                .iter()
                .map(|n| {
                    format!(
                        "{} {:?} unsched={:?}",
                        n.name_any(),
                        n.annotations(),
                        n.spec.as_ref().and_then(|s| s.unschedulable)
                    )
                })
                .collect();
            panic!("timed out waiting for {what}:\n{}", dump.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn current_image(n: &Node) -> Option<&str> {
    n.annotations()
        .get(vocab::CURRENT_IMAGE)
        .map(String::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_nodes_in_three_zones_move_in_zone_then_age_batches() {
    let c = Cluster::start().await;
    let names: Vec<(String, BTreeMap<String, String>)> = (0..50)
        .map(|i| {
            (
                format!("node-{i:02}"),
                worker_labels(["zone-a", "zone-b", "zone-c"][i % 3]),
            )
        })
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    // A PDB that blocks the drain of the first node of zone-a until it is relaxed.
    pod_on(&c, "db-0", "node-00", json!({"app": "db"})).await;
    for (i, n) in ["node-03", "node-06"].iter().enumerate() {
        pod_on(&c, &format!("web-{i}"), n, json!({"app": "web"})).await;
    }
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(c.client.clone(), "default");
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    // A canary MachineImage pins one node of zone-c to another image, pulled with a legacy
    // dockercfg Secret: its node's agent gets the controller's copy, converted.
    let canary_auths = json!({"quay.io": {"auth": "Y2FuYXJ5OnB1bGw="}});
    let legacy: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "canary-pull"},
        "type": "kubernetes.io/dockercfg",
        "data": {".dockercfg": base64_encode(canary_auths.to_string().as_bytes())},
    }))
    .unwrap();
    Api::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &legacy)
        .await
        .unwrap();
    c.apply(
        &kinds::machine_image(),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1alpha1",
            "kind": "MachineImage",
            "metadata": {"name": "canary"},
            "spec": {"image": CANARY, "nodeName": "node-47", "pullSecret": {"name": "canary-pull"}},
        }),
    )
    .await;
    let sampler = Sampler::start(c.client.clone());
    let mut controller = Some(c.controller().await);
    pool_with(&c, json!("10%"), "1").await;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let built = loop {
        assert!(tokio::time::Instant::now() < deadline, "no image recorded");
        let m = c
            .get(&kinds::machine_os_config())
            .get("worker")
            .await
            .unwrap();
        if let Some(i) = m
            .data
            .pointer("/status/currentImagePullSpec")
            .and_then(Value::as_str)
        {
            break i.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The first batch is under way (one of them blocked by the PDB).
    until_nodes(&c, "the first batch", EVENTUALLY, |ns| {
        ns.iter()
            .filter(|n| n.annotations().get(vocab::DESIRED_IMAGE) == Some(&built))
            .count()
            >= 5
    })
    .await;
    // The controller is killed mid-rollout and comes back.
    if let Some(r) = controller.take() {
        r.kill();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    controller = Some(c.controller().await);
    // node-00's drain is blocked: it stays cordoned, its host untouched.
    until_nodes(&c, "node-03 done", EVENTUALLY, |ns| {
        ns.iter()
            .any(|n| n.name_any() == "node-03" && current_image(n) == Some(built.as_str()))
    })
    .await;
    let h0 = fleet.host("node-00").await;
    assert!(
        h0.lock()
            .calls
            .iter()
            .all(|c| !c.starts_with("deploy") && c != "reboot"),
        "{:?}",
        h0.lock().calls
    );
    // An agent killed mid-update (node-09, whichever step) resumes.
    fleet.restart_agent("node-09").await;
    // The agent says why: a DrainBlocked Event on node-00 naming the pod.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(c.client.clone());
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let blocked = list.iter().any(|e| {
            e.reason.as_deref() == Some("DrainBlocked")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("node-00")
                && e.note.as_deref().is_some_and(|n| n.contains("db-0"))
        });
        if blocked {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let seen: Vec<String> = list
                .iter()
                .map(|e| {
                    format!(
                        "{:?} {:?} {:?}",
                        e.reason,
                        e.regarding.as_ref().and_then(|r| r.name.clone()),
                        e.note
                    )
                })
                .collect();
            panic!("no DrainBlocked Event for node-00: {seen:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Relax the PDB: node-00 drains and updates.
    pdbs.delete("db", &DeleteParams::default()).await.unwrap();
    until_nodes(
        &c,
        "every node on its image",
        Duration::from_secs(300),
        |ns| {
            ns.len() == 50
                && ns.iter().all(|n| {
                    let want = if n.name_any() == "node-47" {
                        CANARY
                    } else {
                        built.as_str()
                    };
                    current_image(n) == Some(want)
                        && n.annotations().get(vocab::STATE).map(String::as_str) == Some("Done")
                        && !n
                            .spec
                            .as_ref()
                            .and_then(|s| s.unschedulable)
                            .unwrap_or(false)
                })
        },
    )
    .await;
    sampler.stop.cancel();
    let changes = sampler.changes().await;
    let max = changes.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    println!("timeline (ms since start: nodes unavailable):");
    for (t, s) in &changes {
        println!(
            "{t:>7} {:>2} {}",
            s.len(),
            s.iter().cloned().collect::<Vec<_>>().join(" ")
        );
    }
    assert!(max <= 5, "{max} nodes unavailable at once (limit 5)");
    // Zone then age (creation order = name order here): the pool's nodes were targeted in
    // that order (a batch's patches go out concurrently, so a sample may catch half of one:
    // 250 ms of slack; batches are a soak apart).
    let targeted = sampler.targeted.lock().await.clone();
    let mut order: Vec<(&str, &str, u128)> = names
        .iter()
        .filter(|(n, _)| n != "node-47")
        .map(|(n, l)| (l[vocab::ZONE_LABEL].as_str(), n.as_str(), targeted[n]))
        .collect();
    order.sort();
    assert!(
        order
            .iter()
            .enumerate()
            .all(|(i, a)| order[i..].iter().all(|b| a.2 <= b.2 + 250)),
        "not targeted in zone-then-age order: {order:?}"
    );
    // The first batch: the first four targeted are the four oldest of zone-a. (By order,
    // not by a time window: a node patch is conditional on the resourceVersion it was decided
    // from, and an agent writing its node meanwhile makes that node's patch conflict and go
    // out a pass later, so one batch may reach the nodes in two steps.)
    let mut by_time = order.clone();
    by_time.sort_by_key(|o| (o.2, o.1));
    let first: BTreeSet<&str> = by_time.iter().take(4).map(|o| o.1).collect();
    let four = BTreeSet::from(["node-00", "node-03", "node-06", "node-09"]);
    assert_eq!(first, four, "first batch: {order:?}");
    println!("targeted at (ms): {order:?}");
    // Exactly once: one deploy and one boot per node.
    for (name, _) in &names {
        let h = fleet.host(name).await;
        let s = h.lock();
        let deploys = s.calls.iter().filter(|c| c.starts_with("deploy")).count();
        assert_eq!((deploys, s.boots), (1, 1), "{name}: {:?}", s.calls);
    }
    // The pool and the MachineImage say so, once the last nodes have soaked.
    let updated = |o: &kube::api::DynamicObject| {
        o.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Updated" && c["status"] == "True")
        })
    };
    c.until(&kinds::pool(), "the pool Updated", |l| {
        l.iter().any(updated)
    })
    .await;
    c.until(&kinds::machine_image(), "the canary Updated", |l| {
        l.iter().any(updated)
    })
    .await;
    let pool = c.get(&kinds::pool()).get("worker").await.unwrap();
    let st = &pool.data["status"];
    assert_eq!(st["machineCount"], 50, "{st}");
    assert_eq!(st["readyMachineCount"], 50, "{st}");
    assert_eq!(st["unavailableMachineCount"], 0, "{st}");
    assert_eq!(st["updatedMachineCount"], 50, "{st}");
    assert_eq!(st["degradedMachineCount"], 0, "{st}");
    let mi = c.get(&kinds::machine_image()).get("canary").await.unwrap();
    assert_eq!(mi.data["status"]["updatedMachineCount"], 1, "{}", mi.data);
    let pulled_with = fleet.host("node-47").await.lock().pull_secret.clone();
    let pulled_with: Value = serde_json::from_slice(&pulled_with.unwrap_or_default()).unwrap();
    assert_eq!(pulled_with, json!({"auths": canary_auths}));
    fleet.shutdown().await;
    if let Some(r) = controller.take() {
        r.stop().await;
    }
}

/// Twelve nodes, two at a time: pausing the pool stops new nodes from moving; a node that
/// boots the wrong image goes Degraded, holds its slot, and halts the pool (`NodeDegraded`,
/// a Warning Event, the MachineOSImage `RolloutFailed`) without spreading.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_stops_the_rollout_and_a_failed_node_halts_it() {
    let c = Cluster::start().await;
    let names: Vec<(String, BTreeMap<String, String>)> = (0..12)
        .map(|i| (format!("node-{i:02}"), worker_labels("zone-a")))
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    // node-05 will come up on the wrong image.
    fleet.host("node-05").await.lock().boot_into = Some(CANARY.into());
    let controller = c.controller().await;
    pool_with(&c, json!(2), "1").await;
    // Pause as soon as the first batch is targeted.
    until_nodes(&c, "the first batch", EVENTUALLY, |ns| {
        ns.iter().any(|n| {
            n.annotations()
                .get(vocab::DESIRED_IMAGE)
                .is_some_and(|i| i != OLD)
        })
    })
    .await;
    let pools = c.get(&kinds::pool());
    pools
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let moving = |ns: &[Node]| {
        ns.iter()
            .filter(|n| {
                n.annotations()
                    .get(vocab::DESIRED_IMAGE)
                    .is_some_and(|i| i != OLD)
            })
            .count()
    };
    let paused_at = moving(&nodes(&c).await);
    assert!(paused_at <= 2, "{paused_at}");
    // `machineos rollout plan` while paused: blocked, and the rest in order, two at a time.
    let plan = machineos_controller::rollout::plan_from_cluster(&c.client, NS, "worker", None, 0)
        .await
        .unwrap();
    assert_eq!(
        plan.blocked.as_deref(),
        Some("the pool is paused"),
        "{plan:?}"
    );
    assert_eq!(plan.members, 12);
    assert_eq!(plan.max_unavailable, 2);
    let planned: Vec<&str> = plan
        .batches
        .iter()
        .flatten()
        .map(|n| n.name.as_str())
        .collect();
    let mut sorted = planned.clone();
    sorted.sort();
    assert_eq!(planned, sorted, "one zone: oldest (= first created) first");
    assert!(plan.batches.iter().all(|b| b.len() <= 2), "{plan:?}");
    assert_eq!(
        planned.len() + plan.in_flight.len() + plan.updated.len(),
        12,
        "{plan:?}"
    );
    // The MachineOSImage says what moving the rest onto it costs, node by node (by the MCO's
    // default policies: the cluster serves no MachineConfiguration).
    let left = 12 - plan.updated.len();
    let images = c
        .until(&kinds::image(), "the image's disruption", |l| {
            l.iter().any(|i| {
                i.data["status"]["disruption"]["nodes"]
                    .as_array()
                    .is_some_and(|n| {
                        n.iter()
                            .map(|c| c["count"].as_i64().unwrap_or(0))
                            .sum::<i64>()
                            == left as i64
                    })
            })
        })
        .await;
    let d = images
        .iter()
        .map(|i| &i.data["status"]["disruption"])
        .find(|d| d.is_object())
        .unwrap();
    assert_eq!(d["policies"], "the MCO's defaults", "{d}");
    assert_eq!(d["actedOn"], true, "{d}");
    let classes = [
        "None",
        "Reload",
        "Restart",
        "DaemonReload",
        "Drain",
        "SoftReboot",
        "Reboot",
    ];
    assert!(classes.contains(&d["class"].as_str().unwrap()), "{d}");
    // `machineos rollout status` while paused: not done, not halted, paused.
    let st = machineos_controller::rollout::status_from_cluster(&c.client, NS, "worker", 0)
        .await
        .unwrap();
    assert!(st.paused && !st.done && !st.halted, "{st:?}");
    assert_eq!(st.total, 12);
    // The batch finishes; nothing else moves while paused.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(moving(&nodes(&c).await), paused_at, "moved while paused");
    let pool = pools.get("worker").await.unwrap();
    let updating = pool.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Updating").cloned())
        .unwrap_or_default();
    assert!(
        updating["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("the pool is paused"),
        "{updating}"
    );
    pools
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    // node-05 fails on its boot; the pool halts with it degraded.
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let pool = loop {
        let p = pools.get("worker").await.unwrap();
        let nd = p.data["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "NodeDegraded").cloned())
            .unwrap_or_default();
        if nd["status"] == "True" {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no NodeDegraded: {}",
            p.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let st = &pool.data["status"];
    let nd = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "NodeDegraded")
        .unwrap();
    assert!(
        nd["message"]
            .as_str()
            .unwrap()
            .starts_with("Node node-05 is reporting:"),
        "{nd}"
    );
    assert_eq!(st["degradedMachineCount"], 1, "{st}");
    // What an admin reads on the pool and on the node.
    c.describe_until(
        "machineconfigpool",
        "worker",
        &["NodeDegraded", "Node node-05 is reporting:"],
    )
    .await;
    c.describe_until("node", "node-05", &["Warning  UpdateFailed"])
        .await;
    // It does not spread: after a while, no node beyond those already moving is targeted.
    let at_halt = moving(&nodes(&c).await);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let ns = nodes(&c).await;
    assert_eq!(moving(&ns), at_halt, "the failure spread");
    assert!(at_halt < 12, "{at_halt}");
    let n5 = ns.iter().find(|n| n.name_any() == "node-05").unwrap();
    assert_eq!(
        n5.annotations().get(vocab::STATE).map(String::as_str),
        Some("Degraded")
    );
    assert!(
        n5.spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        "a failed node stays cordoned"
    );
    let halted: Api<k8s_openapi::api::events::v1::Event> = Api::all(c.client.clone());
    let evs = halted.list(&ListParams::default()).await.unwrap().items;
    assert!(
        evs.iter()
            .any(|e| e.reason.as_deref() == Some("RolloutHalted")),
        "no RolloutHalted Event"
    );
    let images = c
        .get(&kinds::image())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let failed = images.iter().any(|m| {
        m.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "RolloutFailed" && c["status"] == "True")
        })
    });
    assert!(failed, "no MachineOSImage RolloutFailed");
    // `machineos rollout status`: halted, node-05 held as Degraded with its reason.
    let st = machineos_controller::rollout::status_from_cluster(&c.client, NS, "worker", 0)
        .await
        .unwrap();
    assert!(st.halted && !st.done, "{st:?}");
    assert!(
        st.held
            .iter()
            .any(|h| h.node == "node-05" && h.reason.starts_with("Degraded: ")),
        "{st:?}"
    );
    // The condition says the way out, naming the node that holds the pool.
    let nd_message = nd["message"].as_str().unwrap_or_default();
    assert!(nd_message.ends_with("re-targets node-05"), "{nd_message}");
    // The way out: the cause is gone (the fake host's wrong boot was one-shot) and a new
    // MachineConfig is applied. Its image is built although a node is degraded (the MCO
    // would hold the build back until the node recovers, which it cannot without one),
    // re-targets node-05, and the pool finishes on it.
    let halted_on = n5
        .annotations()
        .get(vocab::DESIRED_IMAGE)
        .cloned()
        .unwrap_or_default();
    c.apply(
        &kinds::machine_config(),
        machine_config("10-worker-fix", "fix", "fixed"),
    )
    .await;
    until_nodes(&c, "every node on the fixed image", EVENTUALLY, |ns| {
        ns.iter().all(|n| {
            let a = n.annotations();
            let on = current_image(n);
            on.is_some()
                && on != Some(OLD)
                && on != Some(halted_on.as_str())
                && a.get(vocab::DESIRED_IMAGE).map(String::as_str) == on
                && a.get(vocab::STATE).map(String::as_str) == Some("Done")
        })
    })
    .await;
    c.until(&kinds::pool(), "the pool Updated and not degraded", |ps| {
        ps.iter().any(|p| {
            let cs = p.data["status"]["conditions"].as_array();
            let is = |t: &str, s: &str| {
                cs.is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == s))
            };
            p.name_any() == "worker" && is("Updated", "True") && is("NodeDegraded", "False")
        })
    })
    .await;
    // `machineos rollout status`: done, 12 of 12.
    let st = machineos_controller::rollout::status_from_cluster(&c.client, NS, "worker", 0)
        .await
        .unwrap();
    assert!(st.done && !st.halted, "{st:?}");
    assert_eq!((st.updated, st.total), (12, 12));
    fleet.shutdown().await;
    controller.stop().await;
}

/// Two amd64 and two arm64 nodes get one image index with both architectures; their hosts
/// report, as bootc and rpm-ostree do, the manifest of their own architecture for it (pulled,
/// staged and booted). Every node ends Updated on the index — none Degraded — and each booted
/// its own architecture's manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_multi_arch_image_rolls_onto_amd64_and_arm64_hosts_that_report_their_manifest() {
    let c = Cluster::start_with_base(
        machineos_testkit::RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret-pw"),
        &["linux/amd64", "linux/arm64"],
    )
    .await;
    let arch_of = |i: usize| {
        if i.is_multiple_of(2) {
            "amd64"
        } else {
            "arm64"
        }
    };
    let names: Vec<(String, BTreeMap<String, String>)> = (0..4)
        .map(|i| {
            let mut labels = worker_labels("zone-a");
            labels.insert(vocab::ARCH_LABEL.into(), arch_of(i).into());
            (format!("node-{i:02}"), labels)
        })
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    // Paused until the image is recorded and the hosts know its manifests (a pool's build
    // runs while it is paused).
    pool_with(&c, json!(2), "1").await;
    let pools = c.get(&kinds::pool());
    pools
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let controller = c.controller().await;
    let images = c
        .until(&kinds::image(), "a MachineOSImage", |l| l.len() == 1)
        .await;
    let spec = &images[0].data["spec"];
    let index = spec["image"].as_str().unwrap().to_owned();
    let repo = index.rsplit_once('@').unwrap().0.to_owned();
    let manifest: BTreeMap<String, String> = spec["architectures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["architecture"].as_str().unwrap().to_owned(),
                format!("{repo}@{}", a["digest"].as_str().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        manifest.keys().map(String::as_str).collect::<Vec<_>>(),
        ["amd64", "arm64"],
        "{spec}"
    );
    assert!(
        manifest.values().all(|m| *m != index),
        "an index, not a manifest"
    );
    for (i, (name, _)) in names.iter().enumerate() {
        fleet.reports(name, &index, &manifest[arch_of(i)]).await;
    }
    pools
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    until_nodes(&c, "every node on the index", EVENTUALLY, |ns| {
        ns.len() == 4
            && ns.iter().all(|n| {
                let a = n.annotations();
                current_image(n) == Some(index.as_str())
                    && a.get(vocab::DESIRED_IMAGE) == Some(&index)
                    && a.get(vocab::STATE).map(String::as_str) == Some("Done")
                    && !n
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false)
            })
    })
    .await;
    c.until(&kinds::pool(), "the pool Updated", |ps| {
        ps.iter().any(|p| {
            p.data["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Updated" && c["status"] == "True")
            })
        })
    })
    .await;
    let pool = pools.get("worker").await.unwrap();
    assert_eq!(
        pool.data["status"]["updatedMachineCount"], 4,
        "{}",
        pool.data
    );
    assert_eq!(
        pool.data["status"]["degradedMachineCount"], 0,
        "{}",
        pool.data
    );
    // The rollout passed the manifests with the desired image; each host booted its own
    // architecture's manifest, once, through one deploy of the index.
    let want = machineos_rollout::ImageManifests([(index.clone(), manifest.clone())].into());
    for n in nodes(&c).await {
        let name = n.name_any();
        let arch = n.labels()[vocab::ARCH_LABEL].as_str();
        assert_eq!(
            n.annotations()
                .get(vocab::IMAGE_MANIFESTS)
                .and_then(|v| machineos_rollout::ImageManifests::parse(v)),
            Some(want.clone()),
            "{name}"
        );
        let m = fleet.machines.lock().await;
        let host = PlatformHost {
            host: m[&name].host.clone(),
            platform: m[&name].platform.clone(),
        };
        assert_eq!(
            host.status().unwrap().booted.as_deref(),
            Some(manifest[arch].as_str()),
            "{name} ({arch})"
        );
        let s = m[&name].host.lock();
        let deploys: Vec<&String> = s.calls.iter().filter(|c| c.starts_with("deploy")).collect();
        assert_eq!(
            deploys,
            [&format!("deploy {index}")],
            "{name}: {:?}",
            s.calls
        );
        assert_eq!(s.boots, 1, "{name}: {:?}", s.calls);
    }
    // No node was ever Degraded.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(c.client.clone());
    let failed: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("UpdateFailed"))
        .map(|e| format!("{:?}", e.note))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    // Every node runs the image: nothing is left to cost, the record goes.
    c.until(&kinds::image(), "no disruption left on the image", |l| {
        !l.is_empty() && l.iter().all(|i| i.data["status"]["disruption"].is_null())
    })
    .await;
    fleet.shutdown().await;
    controller.stop().await;
}

fn cordoned(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Every node on `image`, Done, uncordoned.
fn all_on(ns: &[Node], count: usize, image: &str) -> bool {
    ns.len() == count
        && ns.iter().all(|n| {
            let a = n.annotations();
            current_image(n) == Some(image)
                && a.get(vocab::DESIRED_IMAGE).map(String::as_str) == Some(image)
                && a.get(vocab::STATE).map(String::as_str) == Some("Done")
                && !cordoned(n)
        })
}

/// The image the pool's current build produced, once its MachineOSImage for `config`
/// exists.
async fn image_for(c: &Cluster, config: &str) -> String {
    let images = c
        .until(&kinds::image(), "the MachineOSImage of the config", |l| {
            l.iter()
                .any(|i| i.data["spec"]["machineConfig"]["name"] == config)
        })
        .await;
    images
        .iter()
        .find(|i| i.data["spec"]["machineConfig"]["name"] == config)
        .and_then(|i| i.data["spec"]["image"].as_str())
        .unwrap()
        .to_owned()
}

/// Pause or unpause the pool `worker`.
async fn set_paused(c: &Cluster, paused: bool) {
    c.get(&kinds::pool())
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": paused}})),
        )
        .await
        .unwrap();
}

async fn pool_config(c: &Cluster) -> String {
    let pools = c.get(&kinds::pool());
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let p = pools.get("worker").await.unwrap();
        if let Some(name) = p.data["spec"]["configuration"]["name"].as_str()
            && !name.is_empty()
        {
            return name.to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool was never rendered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 30's measure on the simulated cluster: a change to one `/etc` file whose policy is
/// `None` (the cluster's `MachineConfiguration`) moves every node at once, none cordoned,
/// none rebooted (boot ids unchanged); the image is staged and its configuration applied
/// live. A file no policy covers still reboots each node once, within `maxUnavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_etc_change_whose_policy_is_none_moves_every_node_live_and_an_uncovered_one_reboots() {
    let c = Cluster::start().await;
    let names: Vec<(String, BTreeMap<String, String>)> = (0..6)
        .map(|i| (format!("node-{i:02}"), worker_labels("zone-a")))
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    machine_configuration(
        &c,
        json!({"nodeDisruptionPolicy": {"files": [
            {"path": "/etc/motd", "actions": [{"type": "None"}]},
            {"path": "/etc/chrony.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]},
        ]}}),
    )
    .await;
    pool_with(&c, json!(1), "0").await;
    let controller = c.controller().await;
    // The first image: every node reboots onto it (nothing says what it runs).
    let first = image_for(&c, &pool_config(&c).await).await;
    until_nodes(&c, "every node on the first image", EVENTUALLY, |ns| {
        all_on(ns, 6, &first)
    })
    .await;
    // The hosts' boot ids (this fleet's power supply reports none on the Node).
    let mut boots_before: BTreeMap<String, String> = BTreeMap::new();
    for (name, _) in &names {
        boots_before.insert(
            name.clone(),
            fleet.host(name).await.lock().status.boot_id.clone(),
        );
    }
    for (name, _) in &names {
        assert_eq!(fleet.host(name).await.lock().boots, 1, "{name}");
    }

    // /etc/motd changes: policy None. Paused first, to read the plan before anything moves.
    let pause = |paused: bool| set_paused(&c, paused);
    pause(true).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello again"),
    )
    .await;
    let config = {
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let cfg = pool_config(&c).await;
            let old = nodes(&c).await[0]
                .annotations()
                .get(vocab::CURRENT_CONFIG)
                .cloned();
            if Some(&cfg) != old.as_ref() {
                break cfg;
            }
            assert!(tokio::time::Instant::now() < deadline, "never re-rendered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let second = image_for(&c, &config).await;
    assert_ne!(second, first);
    // `machineos rollout plan`: every node in one batch (no slot taken), each a None.
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let (plan, disruption) = loop {
        let (plan, d) =
            machineos_controller::rollout::plan_with_disruption(&c.client, NS, "worker", None, 0)
                .await
                .unwrap();
        if plan.image.as_deref() == Some(second.as_str()) {
            break (plan, d);
        }
        assert!(tokio::time::Instant::now() < deadline, "{plan:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(plan.batches.len(), 1, "{plan:?}");
    assert_eq!(plan.batches[0].len(), 6, "{plan:?}");
    let (d, source) = disruption.unwrap();
    assert_eq!(source, "MachineConfiguration cluster");
    assert_eq!(d.class, machineos_disruption::Class::None, "{d:?}");
    assert_eq!(d.nodes.len(), 6);
    pause(false).await;
    until_nodes(
        &c,
        "every node on the second image, live",
        EVENTUALLY,
        |ns| all_on(ns, 6, &second),
    )
    .await;
    let api: Api<Node> = Api::all(c.client.clone());
    for n in api.list(&ListParams::default()).await.unwrap().items {
        let name = n.name_any();
        assert_eq!(
            fleet.host(&name).await.lock().status.boot_id,
            boots_before[&name],
            "{name}: no reboot"
        );
        let a = n.annotations();
        assert_eq!(
            a.get(vocab::REBOOT_PENDING),
            Some(&second),
            "{name}: the image boots next"
        );
        let plan = a
            .get(vocab::NODE_DISRUPTION)
            .and_then(|p| machineos_disruption::NodePlan::parse(p))
            .unwrap();
        assert_eq!(plan.class, machineos_disruption::Class::None, "{name}");
        let h = fleet.host(&name).await;
        let s = h.lock();
        assert_eq!(s.boots, 1, "{name}: {:?}", s.calls);
        assert_eq!(s.status.staged.as_deref(), Some(second.as_str()), "{name}");
        assert_eq!(s.live_config.as_deref(), Some(second.as_str()), "{name}");
        assert!(s.systemctl.is_empty(), "{name}: None runs nothing");
    }
    // The merged policies on the MachineConfiguration's status, as the MCO writes them:
    // the defaults with the user's entries appended.
    let configs = c
        .until(
            &kinds::machine_configuration(),
            "the merged policies",
            |l| {
                l.iter().any(|m| {
                    m.data
                        .pointer("/status/nodeDisruptionPolicyStatus/clusterPolicies/files")
                        .is_some()
                })
            },
        )
        .await;
    let merged = &configs[0].data["status"]["nodeDisruptionPolicyStatus"]["clusterPolicies"];
    let files = merged["files"].as_array().unwrap();
    assert_eq!(files.len(), 15, "13 defaults and 2 of the user's: {merged}");
    assert_eq!(files[13]["path"], "/etc/motd", "{merged}");
    assert_eq!(files[13]["actions"], json!([{"type": "None"}]), "{merged}");
    assert_eq!(
        merged["sshkey"]["actions"],
        json!([{"type": "None"}]),
        "{merged}"
    );
    // Each MachineConfigNode carries the plan its node was handed.
    let mcns = c
        .until(
            &kinds::machine_config_node(),
            "the plans on the MachineConfigNodes",
            |l| {
                l.len() == 6
                    && l.iter().all(|m| {
                        m.annotations()
                            .get(vocab::NODE_DISRUPTION)
                            .and_then(|p| machineos_disruption::NodePlan::parse(p))
                            .is_some_and(|p| p.image == second)
                    })
            },
        )
        .await;
    for m in &mcns {
        let plan = machineos_disruption::NodePlan::parse(&m.annotations()[vocab::NODE_DISRUPTION])
            .unwrap();
        assert_eq!(
            plan.class,
            machineos_disruption::Class::None,
            "{}",
            m.name_any()
        );
    }
    // Nobody was drained for it: the Events count one drain per node, the first rollout's.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(c.client.clone());
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    let since_first = reasons
        .iter()
        .filter(|r| *r == "Cordoned" || *r == "Drained")
        .count();
    // The first rollout drained each node once; the live one added none.
    assert_eq!(since_first, 6, "{reasons:?}");
    assert!(
        !reasons.iter().any(|r| r == "LiveApplyRefused"),
        "{reasons:?}"
    );

    // /etc/hostname: no policy covers it — a reboot per node, one at a time.
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "hostname", "w"),
    )
    .await;
    let third_config = {
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let cfg = pool_config(&c).await;
            if cfg != config {
                break cfg;
            }
            assert!(tokio::time::Instant::now() < deadline, "never re-rendered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let third = image_for(&c, &third_config).await;
    until_nodes(&c, "every node on the third image", EVENTUALLY, |ns| {
        all_on(ns, 6, &third)
    })
    .await;
    for n in nodes(&c).await {
        let name = n.name_any();
        assert_ne!(
            fleet.host(&name).await.lock().status.boot_id,
            boots_before[&name],
            "{name}: rebooted"
        );
        assert_eq!(n.annotations().get(vocab::REBOOT_PENDING), None, "{name}");
        assert_eq!(fleet.host(&name).await.lock().boots, 2, "{name}");
    }
    fleet.shutdown().await;
    controller.stop().await;
}

/// Issue 30, item 2: a move whose images differ by more than the configs — a new base whose
/// kernel is the same — is decided with the two images' filesystem difference (the target
/// MachineOSImage's `status.changes`, measured from exactly the nodes' image): each node
/// soft-reboots (its boot count unchanged, systemd's soft reboot count up by one), where the
/// configs alone (`osImageURL` changed) would reboot it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_base_with_the_same_kernel_is_a_soft_reboot_by_the_images_difference() {
    let c = Cluster::start().await;
    let names: Vec<(String, BTreeMap<String, String>)> = (0..3)
        .map(|i| (format!("node-{i:02}"), worker_labels("zone-a")))
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    pool_with(&c, json!(1), "0").await;
    let mut opts = c.options();
    opts.image_changes = true;
    let controller = c.controller_with(opts).await;
    let first = image_for(&c, &pool_config(&c).await).await;
    until_nodes(&c, "every node on the first image", EVENTUALLY, |ns| {
        all_on(ns, 3, &first)
    })
    .await;
    for (name, _) in &names {
        assert_eq!(fleet.host(name).await.lock().boots, 1, "{name}");
    }

    // A new base: the same kernel and initrd (the same spec), and one more file under /usr.
    // The pool is not paused: its rollout waits for the new image's comparison with the
    // nodes' image, which makes every move a soft reboot — the first batch's too.
    let pause = |paused: bool| set_paused(&c, paused);
    let mut spec = machineos_synth::SynthSpec::example();
    spec.extra_files.push(machineos_synth::ExtraFile {
        path: "/usr/bin/new-tool".into(),
        contents: b"#!/bin/sh\n".to_vec(),
        mode: 0o755,
    });
    let base2 = c.push_base("2", spec).await;
    c.config_map(
        "machine-config-osimageurl",
        &[("baseOSContainerImage", base2.as_str())],
    )
    .await;
    let second = {
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let images = c
                .get(&kinds::image())
                .list(&ListParams::default())
                .await
                .unwrap();
            if let Some(i) = images.items.iter().find(|i| {
                i.data["spec"]["image"] != first.as_str()
                    && i.data["spec"]["baseImage"]
                        .as_str()
                        .is_some_and(|b| b.starts_with(&format!("{}/base/os", c.registry.host())))
            }) {
                break i.data["spec"]["image"].as_str().unwrap().to_owned();
            }
            assert!(tokio::time::Instant::now() < deadline, "no second image");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    until_nodes(&c, "every node on the second image", EVENTUALLY, |ns| {
        all_on(ns, 3, &second)
    })
    .await;
    let api: Api<Node> = Api::all(c.client.clone());
    for n in api.list(&ListParams::default()).await.unwrap().items {
        let name = n.name_any();
        let plan = n
            .annotations()
            .get(vocab::NODE_DISRUPTION)
            .and_then(|p| machineos_disruption::NodePlan::parse(p))
            .unwrap();
        assert_eq!(
            plan.class,
            machineos_disruption::Class::SoftReboot,
            "{name}"
        );
        let h = fleet.host(&name).await;
        let s = h.lock();
        assert_eq!(s.boots, 1, "{name}: no reboot: {:?}", s.calls);
        assert_eq!(s.status.soft_reboots, 1, "{name}: one soft reboot");
        assert_eq!(s.status.booted.as_deref(), Some(second.as_str()), "{name}");
    }

    // A base whose kernel differs (another version: the synthetic kernel carries it): a
    // reboot, by the same difference.
    pause(true).await;
    let mut spec = machineos_synth::SynthSpec::example();
    spec.version = "3".into();
    let base3 = c.push_base("3", spec).await;
    c.config_map(
        "machine-config-osimageurl",
        &[("baseOSContainerImage", base3.as_str())],
    )
    .await;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let d = loop {
        let (plan, d) =
            machineos_controller::rollout::plan_with_disruption(&c.client, NS, "worker", None, 0)
                .await
                .unwrap();
        if let Ok((d, _)) = &d
            && plan
                .image
                .as_deref()
                .is_some_and(|i| i != second && i != first)
            && d.nodes.iter().all(|n| {
                n.reasons
                    .last()
                    .is_some_and(|r| r.change.contains("paths differ from the node's image"))
            })
        {
            break d.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{plan:?} {d:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(d.class, machineos_disruption::Class::Reboot, "{d:?}");
    for n in &d.nodes {
        let why = &n.reasons.last().unwrap().change;
        assert!(
            why.starts_with("the base image changes")
                && why.contains(&second)
                && why.contains("the kernel or initrd differs"),
            "{why}"
        );
    }
    fleet.shutdown().await;
    controller.stop().await;
}

/// A node's rollback record, if its agent left one.
fn rolled_back(n: &Node) -> Option<machineos_rollout::health::RolledBack> {
    n.annotations()
        .get(vocab::ROLLED_BACK)
        .and_then(|v| machineos_rollout::health::RolledBack::parse(v))
}

/// Delete the MachineConfig `99-worker-broken` and wait for the pool's config to move off
/// `bad_config`; the image built for the fixed config.
async fn fix_broken_config(c: &Cluster, bad_config: &str) -> String {
    c.get(&kinds::machine_config())
        .delete("99-worker-broken", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let fixed_config = loop {
        let cfg = pool_config(c).await;
        if cfg != bad_config {
            break cfg;
        }
        assert!(tokio::time::Instant::now() < deadline, "never re-rendered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    image_for(c, &fixed_config).await
}

/// The boot guard's loop on the simulated cluster: 6 nodes, `maxUnavailable: 2`. The pool's
/// config writes the file that makes a fake machine start no kubelet on an image built from
/// it: the first batch boots it, no agent runs, and after its deadline each machine's boot
/// guard rolls back and reboots (once, its record left); the agent, running again, reports
/// the rollback as its own (`bootGuard`), removes the record, and the image is quarantined —
/// no other node targeted. The config fixed, all 6 move to the new image.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kubelet_that_never_starts_is_rolled_back_by_the_boot_guard_and_the_agent_reports_it() {
    let c = Cluster::start().await;
    let names: Vec<(String, BTreeMap<String, String>)> = (0..6)
        .map(|i| (format!("node-{i:02}"), worker_labels("zone-a")))
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    let sampler = Sampler::start(c.client.clone());
    c.apply(
        &kinds::machine_config(),
        machine_config("99-worker-broken", "machineos-fake/kubelet-broken", "1"),
    )
    .await;
    let controller = c.controller().await;
    let mut pool = worker_pool();
    pool["spec"]["maxUnavailable"] = json!(2);
    pool["metadata"]["annotations"] = json!({"machineos.io/min-ready-seconds": "0"});
    c.apply(&kinds::pool(), pool).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    c.apply(
        &kinds::machine_os_config(),
        machine_os_config(&format!("{}/machineos/worker:latest", c.registry.host())),
    )
    .await;
    let bad_config = pool_config(&c).await;
    let bad = image_for(&c, &bad_config).await;
    // The first batch boots it, no kubelet, no agent; each machine's boot guard rolls it
    // back and reboots; the agent, running again, reports it as its own rollback.
    until_nodes(
        &c,
        "the first batch rolled back by its boot guard",
        EVENTUALLY,
        |ns| {
            let back: Vec<&Node> = ns.iter().filter(|n| rolled_back(n).is_some()).collect();
            back.len() == 2
                && back.iter().all(|n| {
                    current_image(n) == Some(OLD)
                        && n.annotations().get(vocab::STATE).map(String::as_str) == Some("Done")
                        && !cordoned(n)
                })
        },
    )
    .await;
    let mut first = BTreeSet::new();
    for n in nodes(&c).await {
        let Some(r) = rolled_back(&n) else { continue };
        assert_eq!(r.image, bad);
        assert_eq!(r.check, machineos_rollout::health::Check::BootGuard);
        assert!(
            r.evidence.contains("kubelet never started"),
            "{}",
            r.evidence
        );
        let h = fleet.host(&n.name_any()).await;
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        while h.lock().boot_guard_record.is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the record never removed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(h.lock().status.booted.as_deref(), Some(OLD));
        assert_eq!(h.lock().boots, 2, "the update's boot and the guard's");
        first.insert(n.name_any());
    }
    c.until(&kinds::image(), "the image quarantined", |l| {
        l.iter().any(|i| {
            i.data["spec"]["image"] == bad.as_str()
                && i.data["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Quarantined" && c["status"] == "True")
                })
        })
    })
    .await;
    c.describe_until("node", first.iter().next().unwrap(), &["NodeRolledBack"])
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ever: BTreeSet<String> = sampler.targeted.lock().await.keys().cloned().collect();
    assert_eq!(
        ever, first,
        "only the first batch was ever targeted at the bad image"
    );
    // The config fixed: a new build rolls out to all 6, the guarded nodes included.
    let fixed = fix_broken_config(&c, &bad_config).await;
    until_nodes(&c, "all 6 on the fixed image", EVENTUALLY, |ns| {
        all_on(ns, 6, &fixed)
    })
    .await;
    sampler.stop.cancel();
    fleet.shutdown().await;
    controller.stop().await;
}

/// Issue 31's loop on the simulated cluster: 12 nodes, `maxUnavailable: 3`, a health gate
/// of 3 s. The pool's config writes the file that makes a fake machine never Ready on an
/// image built from it: the first batch boots that image, stays NotReady, fails the gate
/// and is rolled back by its agents (booted into the image it ran before, uncordoned, the
/// record left); the image is quarantined (its MachineOSImage `Quarantined=True`, the pool
/// `NodeDegraded` naming it) and no other node is ever targeted at it. The quarantine lifted
/// (an annotation on the MachineOSImage), the first batch tries it again and rolls back
/// again. The config fixed, a new image is built and rolls out to all 12, the rolled-back
/// ones included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_image_is_rolled_back_by_its_first_batch_quarantined_and_a_fixed_config_rolls_out() {
    let c = Cluster::start().await;
    let names: Vec<(String, BTreeMap<String, String>)> = (0..12)
        .map(|i| (format!("node-{i:02}"), worker_labels("zone-a")))
        .collect();
    let fleet = Fleet::start(&c, &names).await;
    let sampler = Sampler::start(c.client.clone());
    c.apply(
        &kinds::machine_config(),
        machine_config("99-worker-broken", "machineos-fake/never-ready", "1"),
    )
    .await;
    let metrics = machineos_controller::metrics::Metrics::new();
    let controller = c
        .controller_metered(client_of(&c.server).await, c.options(), metrics.clone())
        .await;
    let mut pool = worker_pool();
    pool["spec"]["maxUnavailable"] = json!(3);
    pool["metadata"]["annotations"] = json!({
        "machineos.io/min-ready-seconds": "0",
        vocab::HEALTH_TIMEOUT: "3s",
    });
    c.apply(&kinds::pool(), pool).await;
    c.apply(
        &kinds::machine_config(),
        machine_config("00-worker", "motd", "hello"),
    )
    .await;
    c.apply(
        &kinds::machine_os_config(),
        machine_os_config(&format!("{}/machineos/worker:latest", c.registry.host())),
    )
    .await;
    let bad_config = pool_config(&c).await;
    let bad = image_for(&c, &bad_config).await;
    // The first batch rolls back on its own: on OLD again, Done, uncordoned, the record.
    until_nodes(&c, "the first batch rolled back", EVENTUALLY, |ns| {
        let back: Vec<&Node> = ns.iter().filter(|n| rolled_back(n).is_some()).collect();
        back.len() == 3
            && back.iter().all(|n| {
                current_image(n) == Some(OLD)
                    && n.annotations()
                        .get(vocab::DESIRED_IMAGE)
                        .map(String::as_str)
                        == Some(OLD)
                    && n.annotations().get(vocab::STATE).map(String::as_str) == Some("Done")
                    && !cordoned(n)
            })
    })
    .await;
    let first: BTreeSet<String> = nodes(&c)
        .await
        .iter()
        .filter_map(|n| {
            let r = rolled_back(n)?;
            assert_eq!(r.image, bad);
            assert_eq!(r.to, OLD);
            assert_eq!(r.check, machineos_rollout::health::Check::NodeReady);
            Some(n.name_any())
        })
        .collect();
    for n in &first {
        let h = fleet.host(n).await;
        let s = h.lock().status.clone();
        assert_eq!(
            s.booted.as_deref(),
            Some(OLD),
            "{n} booted the previous image"
        );
        assert_eq!(
            h.lock().boots,
            2,
            "{n}: the update's boot and the rollback's"
        );
    }
    // Quarantined: the MachineOSImage, the pool.
    c.until(&kinds::image(), "the image quarantined", |l| {
        l.iter().any(|i| {
            i.data["spec"]["image"] == bad.as_str()
                && i.data["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Quarantined" && c["status"] == "True")
                })
        })
    })
    .await;
    let pools = c
        .until(&kinds::pool(), "the pool says why", |l| {
            l.iter().any(|p| {
                p.data["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "NodeDegraded"
                            && c["reason"] == "ImageQuarantined"
                            && c["message"].as_str().is_some_and(|m| m.contains(&bad))
                    })
                })
            })
        })
        .await;
    assert!(
        pools[0].data["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Degraded" && c["status"] == "True"),
        "{:?}",
        pools[0].data["status"]
    );
    // What an admin sees, with the real kubectl: the Node's Event, the pool's condition.
    let one = first.iter().next().unwrap().clone();
    c.describe_until("node", &one, &["NodeRolledBack", "rolled back from"])
        .await;
    c.describe_until("machineconfigpool", "worker", &["ImageQuarantined"])
        .await;
    assert!(
        metrics
            .encode()
            .contains("machineos_rollback_total{pool=\"worker\"} 3"),
        "{}",
        metrics.encode()
    );
    // No other node is targeted, however long we wait (well past a gate's deadline).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ever: BTreeSet<String> = sampler.targeted.lock().await.keys().cloned().collect();
    assert_eq!(
        ever, first,
        "only the first batch was ever targeted at the bad image"
    );
    assert!(
        nodes(&c)
            .await
            .iter()
            .all(|n| n.annotations().get(vocab::STAGE_IMAGE) != Some(&bad)),
        "nobody pulls a quarantined image"
    );
    // The quarantine lifted (the annotation): the records go, the first batch tries the
    // image again, rolls back again, and it is quarantined again.
    let bad_mosi = c
        .get(&kinds::image())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|i| i.data["spec"]["image"] == bad.as_str())
        .map(|i| i.name_any())
        .unwrap();
    c.get(&kinds::image())
        .patch(
            &bad_mosi,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {vocab::LIFT_QUARANTINE: "true"}}})),
        )
        .await
        .unwrap();
    c.until(&kinds::image(), "the lift annotation removed", |l| {
        l.iter().any(|i| {
            i.name_any() == bad_mosi && !i.annotations().contains_key(vocab::LIFT_QUARANTINE)
        })
    })
    .await;
    let mut again = false;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while !again {
        let mut all = true;
        for n in &first {
            all &= fleet.host(n).await.lock().boots == 4;
        }
        let ns = nodes(&c).await;
        again = all
            && ns
                .iter()
                .filter(|n| first.contains(&n.name_any()))
                .all(|n| rolled_back(n).is_some() && !cordoned(n) && current_image(n) == Some(OLD));
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first batch never tried the image again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ever: BTreeSet<String> = sampler.targeted.lock().await.keys().cloned().collect();
    assert_eq!(ever, first, "after the lift too, only the first batch");
    // The config fixed: a new build, not quarantined, rolls out to all 12.
    let fixed = fix_broken_config(&c, &bad_config).await;
    assert_ne!(fixed, bad);
    until_nodes(&c, "all 12 on the fixed image", EVENTUALLY, |ns| {
        all_on(ns, 12, &fixed)
    })
    .await;
    assert!(
        nodes(&c).await.iter().all(|n| rolled_back(n).is_none()),
        "the records went with the next update"
    );
    for (t, down) in sampler.changes().await {
        assert!(down.len() <= 3, "at {t} ms: {down:?}");
    }
    sampler.stop.cancel();
    fleet.shutdown().await;
    controller.stop().await;
}
