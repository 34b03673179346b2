//! A simulated machine: the agent on a [`FakeHost`] whose reboots are carried out in
//! process — the agent is stopped, the Node reported NotReady (as its kubelet would while the
//! machine is down), the fake host booted into its staged image, the Node Ready again, and a
//! new agent started, which resumes from the node's annotations exactly as after a real
//! reboot. For demos (`machineos agent --host fake`, `scripts/cluster-demo.sh`) and tests:
//! nothing on the machine running it is touched.
//!
//! Contract: the fake host starts booted into the node's `currentImage` annotation (none:
//! an unknown image); it writes the Node's `Ready` condition and its boot id
//! (`status.nodeInfo.bootID`: at start, and the new one when it is Ready after each reboot,
//! as a kubelet reports the machine's `/proc/sys/kernel/random/boot_id`; a soft reboot —
//! a quarter of the downtime — keeps it, as the kernel keeps running, and counts in the
//! host's soft reboot count; a live apply changes neither) through the status
//! subresource, which a real agent never does (the kubelet owns it) — and, like a kubelet
//! that keeps reporting, tries again after a failed write (a 409 from a concurrent writer, a
//! 5xx), so a machine never stays NotReady because one status write lost a race.
//!
//! **A broken image, on purpose**: a reboot into the node's desired image whose rendered
//! MachineConfig (`desiredConfig`) writes [`NEVER_READY`] marks that image bad; a machine
//! booted into a bad image comes up and stays NotReady (as a broken kubelet or CNI would
//! leave it), so the health gate fails and the agent rolls it back; booted into any other
//! image, it is Ready. An image whose config writes [`KUBELET_BROKEN`] is worse: its kubelet
//! never starts, so no agent runs on it and the Node stays NotReady; after
//! [`GUARD_DEADLINES`] times the reboot's downtime the image's boot guard acts as the real
//! one does ([`guard_rollback`]: once, with its record, only with a previous deployment) and
//! reboots into the previous deployment, where the kubelet and the agent run again.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use machineos_host::{FakeHost, Host};
use machineos_rollout::vocab;
use tokio_util::sync::CancellationToken;

use crate::{AgentError, AgentOptions, run};

/// The file whose presence in a rendered MachineConfig makes a simulated machine that boots
/// an image built from it never Ready.
pub const NEVER_READY: &str = "/etc/machineos-fake/never-ready";

/// The file whose presence in a rendered MachineConfig makes a simulated machine that boots
/// an image built from it start no kubelet (so no agent) until its boot guard rolls it back.
pub const KUBELET_BROKEN: &str = "/etc/machineos-fake/kubelet-broken";

/// How many reboot downtimes the simulated boot guard waits for a kubelet that never starts.
pub const GUARD_DEADLINES: u32 = 3;

/// Whether the rendered MachineConfig `mc` (its JSON) writes [`NEVER_READY`].
pub fn writes_never_ready(mc: &serde_json::Value) -> bool {
    writes(mc, NEVER_READY)
}

/// Whether the rendered MachineConfig `mc` (its JSON) writes `path`.
fn writes(mc: &serde_json::Value, path: &str) -> bool {
    mc.pointer("/spec/config/storage/files")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|files| {
            files
                .iter()
                .any(|f| f.get("path").and_then(serde_json::Value::as_str) == Some(path))
        })
}

/// How an image of the simulation is broken on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// [`NEVER_READY`]: up, the agent running, the Node never Ready.
    NeverReady,
    /// [`KUBELET_BROKEN`]: no kubelet, so no agent; the boot guard's case.
    Kubelet,
}

/// What the image's boot guard does on the fake host when the kubelet never got healthy, as
/// `machineos-boot-guard`'s script does: nothing when its record is there already (once) or
/// there is no previous deployment; else the previous deployment made the next boot, the
/// record written. Returns whether it rolled back (the caller reboots the machine).
pub fn guard_rollback(host: &FakeHost) -> bool {
    let (booted, previous, recorded) = {
        let s = host.lock();
        (
            s.status.booted.clone().unwrap_or_default(),
            s.status.rollback.clone(),
            s.boot_guard_record.is_some(),
        )
    };
    let Some(previous) = previous.filter(|_| !recorded) else {
        return false;
    };
    if host.rollback(&previous).is_err() {
        return false;
    }
    host.lock().boot_guard_record = Some(format!(
        "from={booted}\ntool=fake\ncheck={}\nevidence=the kubelet never started (simulated: the image's config writes {KUBELET_BROKEN})\ndeadline=0\nat=simulated\n",
        machineos_boot_guard::CHECK
    ));
    true
}

/// The boot guard's turn on a machine whose kubelet never started: its deadline
/// ([`GUARD_DEADLINES`] × `down`), then, if it rolls back ([`guard_rollback`]), the reboot
/// into the previous deployment (`down` long). Returns whether the machine rebooted.
pub async fn guard_boot(host: &FakeHost, down: Duration) -> bool {
    tokio::time::sleep(down * GUARD_DEADLINES).await;
    if !guard_rollback(host) {
        return false;
    }
    tokio::time::sleep(down).await;
    host.boot();
    true
}

/// The node's desired image, when its desired rendered MachineConfig writes [`NEVER_READY`]
/// (read at a reboot: the image it is about to boot is then bad). `None` when it does not,
/// or when the node or config cannot be read.
pub async fn never_ready_image(client: &Client, node: &str) -> Option<String> {
    broken_image(client, node)
        .await
        .filter(|(_, b)| *b == Broken::NeverReady)
        .map(|(i, _)| i)
}

/// The node's desired image and how it is broken, when its desired rendered MachineConfig
/// writes [`NEVER_READY`] or [`KUBELET_BROKEN`] (the latter wins). `None` when it writes
/// neither, or when the node or config cannot be read.
pub async fn broken_image(client: &Client, node: &str) -> Option<(String, Broken)> {
    let nodes: Api<Node> = Api::all(client.clone());
    let n = nodes.get(node).await.ok()?;
    let a = n.annotations();
    let image = a.get(vocab::DESIRED_IMAGE)?.clone();
    let config = a.get(vocab::DESIRED_CONFIG)?;
    let mcs: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "machineconfiguration.openshift.io",
                "v1",
                "MachineConfig",
            ),
            "machineconfigs",
        ),
    );
    let mc = mcs.get(config).await.ok()?;
    if writes(&mc.data, KUBELET_BROKEN) {
        Some((image, Broken::Kubelet))
    } else {
        writes(&mc.data, NEVER_READY).then_some((image, Broken::NeverReady))
    }
}

/// Run a simulated machine for `opts.node` until `shutdown`; each reboot keeps the Node
/// NotReady for `down`.
pub async fn run_simulated(
    client: Client,
    opts: AgentOptions,
    down: Duration,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(&opts.node)
        .await
        .map_err(machineos_kube::api_err(
            "reading",
            format!("Node/{}", opts.node),
        ))?;
    let host = match node.annotations().get(vocab::CURRENT_IMAGE) {
        Some(image) => FakeHost::booted(image),
        None => {
            let h = FakeHost::default();
            h.lock().status.boot_id = "boot-0".into();
            h
        }
    };
    let boot_id = || host.lock().status.boot_id.clone();
    // Images this machine comes up NotReady on, and how.
    let mut bad = std::collections::BTreeMap::new();
    set_status(&nodes, &opts.node, None, Some(&boot_id()), &shutdown).await;
    loop {
        let stop = shutdown.child_token();
        let agent = tokio::spawn(run(
            client.clone(),
            Arc::new(host.clone()) as Arc<dyn Host>,
            opts.clone(),
            stop.clone(),
        ));
        // Wait for a reboot request, soft or not (or the end).
        let soft = loop {
            if shutdown.is_cancelled() {
                stop.cancel();
                return agent.await.unwrap_or(Ok(()));
            }
            {
                let mut h = host.lock();
                if std::mem::take(&mut h.reboot_requested) {
                    break false;
                }
                if std::mem::take(&mut h.soft_reboot_requested) {
                    break true;
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        };
        stop.cancel();
        let _ = agent.await;
        if let Some((image, how)) = broken_image(&client, &opts.node).await {
            bad.insert(image, how);
        }
        tracing::info!(node = %opts.node, soft, "simulated reboot");
        set_status(&nodes, &opts.node, Some(false), None, &shutdown).await;
        if soft {
            // Userspace only: no firmware, no kernel start; the boot id stays.
            tokio::time::sleep(down / 4).await;
            host.soft_boot();
        } else {
            tokio::time::sleep(down).await;
            host.boot();
        }
        let mut booted = host.lock().status.booted.clone();
        let mut how = booted.as_ref().and_then(|b| bad.get(b).copied());
        // No kubelet, no agent: the boot guard's turn, then its reboot (or none: parked).
        while how == Some(Broken::Kubelet) {
            tracing::info!(node = %opts.node, image = ?booted, "booted an image whose config writes {KUBELET_BROKEN}: no kubelet");
            set_status(&nodes, &opts.node, Some(false), Some(&boot_id()), &shutdown).await;
            let rebooted = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                r = guard_boot(&host, down) => r,
            };
            if !rebooted {
                tracing::info!(node = %opts.node, "the boot guard cannot roll back (done once already, or no previous deployment): the machine stays down");
                shutdown.cancelled().await;
                return Ok(());
            }
            tracing::info!(node = %opts.node, "the boot guard rolled back and rebooted");
            booted = host.lock().status.booted.clone();
            how = booted.as_ref().and_then(|b| bad.get(b).copied());
        }
        let ready = how.is_none();
        if !ready {
            tracing::info!(node = %opts.node, image = ?booted, "booted an image whose config writes {NEVER_READY}: staying NotReady");
        }
        set_status(&nodes, &opts.node, Some(ready), Some(&boot_id()), &shutdown).await;
    }
}

/// How a failed `Ready` write is repeated: 100 ms doubling to 2 s.
const READY_RETRY: machineos_diagnostics::Backoff =
    machineos_diagnostics::Backoff::doubling(Duration::from_millis(100), Duration::from_secs(2));

/// Set the Node's `Ready` condition and/or boot id, trying again (read, modify, write) until
/// it is written, the error is permanent (logged; the simulation goes on), or `shutdown`.
async fn set_status(
    nodes: &Api<Node>,
    name: &str,
    ready: Option<bool>,
    boot_id: Option<&str>,
    shutdown: &CancellationToken,
) {
    use machineos_diagnostics::Classify as _;
    let mut failures = 0;
    loop {
        let Err(e) = write_status(nodes, name, ready, boot_id).await else {
            return;
        };
        let e = machineos_kube::api_err("setting Ready on", format!("Node/{name}"))(e);
        failures += 1;
        if e.retry() == machineos_diagnostics::Retry::Permanent {
            tracing::warn!(node = name, ready, error = %e, "setting the simulated Node's Ready condition");
            return;
        }
        tracing::debug!(node = name, ready, error = %e, failures, "setting Ready again");
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(READY_RETRY.delay(failures)) => {}
        }
    }
}

/// One read-modify-write of the Node's `Ready` condition (when `ready` is given) and its
/// `nodeInfo.bootID` (when `boot_id` is).
async fn write_status(
    nodes: &Api<Node>,
    name: &str,
    ready: Option<bool>,
    boot_id: Option<&str>,
) -> Result<(), kube::Error> {
    async {
        let mut node = nodes.get_status(name).await?;
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let status = node.status.get_or_insert_with(Default::default);
        if let Some(id) = boot_id {
            status
                .node_info
                .get_or_insert_with(Default::default)
                .boot_id = id.to_owned();
        }
        let Some(ready) = ready else {
            node.metadata.managed_fields = None;
            return nodes
                .replace_status(name, &PostParams::default(), &node)
                .await
                .map(|_| ());
        };
        let conds = status.conditions.get_or_insert_with(Vec::new);
        let want = if ready { "True" } else { "False" };
        match conds.iter_mut().find(|c| c.type_ == "Ready") {
            Some(c) => {
                if c.status != want {
                    c.last_transition_time = Some(now.clone());
                }
                c.status = want.into();
                c.last_heartbeat_time = Some(now);
            }
            None => conds.push(k8s_openapi::api::core::v1::NodeCondition {
                type_: "Ready".into(),
                status: want.into(),
                last_transition_time: Some(now.clone()),
                last_heartbeat_time: Some(now),
                reason: Some(
                    if ready {
                        "KubeletReady"
                    } else {
                        "KubeletNotReady"
                    }
                    .into(),
                ),
                ..Default::default()
            }),
        }
        node.metadata.managed_fields = None;
        nodes
            .replace_status(name, &PostParams::default(), &node)
            .await
            .map(|_| ())
    }
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_kubetest::control::{Fault, RequestMatch};
    use machineos_kubetest::hooks::ensure_node;
    use machineos_kubetest::http::{Server, new_store};

    /// The test API server and an agent's client of it.
    async fn server_and_client() -> (Server, Client) {
        let server = Server::start_tls(new_store(), 0).await.unwrap();
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        let client = Client::try_from(crate::client_config(cfg)).unwrap();
        (server, client)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ready_write_that_conflicts_is_made_again() {
        let (server, client) = server_and_client().await;
        ensure_node(server.shared(), "n1").unwrap();
        // The next two status writes lose to a concurrent writer.
        server.controls().fail_next(
            RequestMatch::path("/api/v1/nodes/n1/status").method("PUT"),
            2,
            Fault {
                code: 409,
                retry_after: None,
            },
        );
        let nodes: Api<Node> = Api::all(client);
        set_status(&nodes, "n1", Some(false), None, &CancellationToken::new()).await;
        let node = nodes.get_status("n1").await.unwrap();
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status);
        assert_eq!(ready.as_deref(), Some("False"));
        assert_eq!(server.controls().counts().get("update", "nodes/status"), 3);
    }

    /// A whole update on the simulated machine: the boot id the Node reports is the fake
    /// host's at start, and a new one after the reboot, as a kubelet reports it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_node_reports_a_new_boot_id_after_each_simulated_reboot() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let (server, client) = server_and_client().await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in machineos_api::crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let mcs: Api<machineos_api::v1::MachineConfig> = Api::all(client.clone());
        let mc = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rendered-worker-1"},
            "spec": {"config": {"ignition": {"version": "3.5.0"}}},
        }))
        .unwrap();
        mcs.create(&PostParams::default(), &mc).await.unwrap();
        ensure_node(server.shared(), "n1").unwrap();
        let image = format!("registry.example.com/os@sha256:{}", "1".repeat(64));
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .patch(
                "n1",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                    vocab::DESIRED_CONFIG: "rendered-worker-1",
                    vocab::DESIRED_IMAGE: image,
                }}})),
            )
            .await
            .unwrap();
        let mut opts = AgentOptions::new("n1", "machineos");
        opts.resync = Duration::from_millis(200);
        let shutdown = CancellationToken::new();
        let machine = tokio::spawn(run_simulated(
            client.clone(),
            opts,
            Duration::from_millis(100),
            shutdown.clone(),
        ));
        let boot_id = |n: &Node| {
            n.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.boot_id.clone())
                .unwrap_or_default()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut seen: Vec<String> = Vec::new();
        loop {
            let n = nodes.get_status("n1").await.unwrap();
            let id = boot_id(&n);
            if !id.is_empty() && seen.last() != Some(&id) {
                seen.push(id.clone());
            }
            let done = n.annotations().get(vocab::CURRENT_IMAGE) == Some(&image);
            if done && id == "boot-1" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "boot ids seen {seen:?}, annotations {:?}",
                n.annotations()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen.first().map(String::as_str), Some("boot-0"), "{seen:?}");
        shutdown.cancel();
        let _ = machine.await;
    }
}
