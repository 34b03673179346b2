//! The agent against the test API server (TLS, machineos' CRDs, the Eviction API with
//! PodDisruptionBudgets) and a [`FakeHost`]: full updates with the reboot done by the test
//! (stop the agent, `FakeHost::boot()`, start a new one), blocked and failed drains, admin
//! cordons, restarts past the drain, a boot into the wrong image, staging and pull retries.
//! Durations are short and configurable; nothing asserts wall-clock time.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_agent::{AgentOptions, run};
use machineos_api::v1::MachineConfigNode;
use machineos_host::FakeHost;
use machineos_kubetest::hooks::{PodPhase, ensure_node, set_pod_phase};
use machineos_kubetest::http::{Server, new_store};
use machineos_rollout::vocab::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NODE: &str = "worker-0";
const NS: &str = "machineos";
const A: &str =
    "quay.io/os/worker@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str =
    "quay.io/os/worker@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str =
    "quay.io/os/worker@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const EVENTUALLY: Duration = Duration::from_secs(30);

struct Cluster {
    server: Server,
    client: Client,
    host: FakeHost,
}

struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn client_of(server: &Server) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(machineos_agent::client_config(cfg)).unwrap()
}

fn options() -> AgentOptions {
    let mut o = AgentOptions::new(NODE, NS);
    o.drain_timeout = Duration::from_secs(20);
    o.drain_retry = Duration::from_millis(100);
    o.drain_backoff_max = Duration::from_millis(400);
    o.failure_backoff = Duration::from_millis(100);
    o.resync = Duration::from_millis(500);
    o
}

impl Cluster {
    async fn start() -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "machineos_agent=info".into()),
            )
            .try_init();
        let server = Server::start_tls(new_store(), 0).await.unwrap();
        let client = client_of(&server).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in machineos_api::crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let nss: Api<Namespace> = Api::all(client.clone());
        for ns in [NS, "default", "apps"] {
            let _ = nss
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
                )
                .await;
        }
        ensure_node(server.shared(), NODE).unwrap();
        let c = Cluster {
            server,
            client,
            host: FakeHost::booted(A),
        };
        c.annotate(&[
            (CURRENT_CONFIG, Some("rendered-worker-1")),
            (CURRENT_IMAGE, Some(A)),
            (STATE, Some("Done")),
        ])
        .await;
        c.machine_config("rendered-worker-1", &["old=1"]).await;
        c.machine_config("rendered-worker-2", &["nosmt"]).await;
        let mcns: Api<MachineConfigNode> = Api::all(c.client.clone());
        mcns.create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigNode",
                "metadata": {"name": NODE},
                "spec": {"node": {"name": NODE}, "pool": {"name": "worker"},
                         "configVersion": {"desired": "rendered-worker-1"}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
        c
    }

    fn start_agent(&self, opts: AgentOptions) -> Running {
        self.start_agent_as(self.client.clone(), opts)
    }

    /// The agent with `client`'s identity (a ServiceAccount's, for the RBAC test).
    fn start_agent_as(&self, client: Client, opts: AgentOptions) -> Running {
        let stop = CancellationToken::new();
        let (host, token) = (self.host.clone(), stop.clone());
        let task = tokio::spawn(async move {
            run(client, Arc::new(host), opts, token).await.unwrap();
        });
        Running { stop, task }
    }

    async fn machine_config(&self, name: &str, kargs: &[&str]) {
        let ar = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "machineconfiguration.openshift.io",
                "v1",
                "MachineConfig",
            ),
            "machineconfigs",
        );
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let mc: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name},
            "spec": {
                "config": {
                    "ignition": {"version": "3.4.0"},
                    "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [format!("ssh-ed25519 AAAA {name}")]}]},
                },
                "kernelArguments": kargs,
            }
        }))
        .unwrap();
        api.create(&PostParams::default(), &mc).await.unwrap();
    }

    async fn annotate(&self, kv: &[(&str, Option<&str>)]) {
        let ann: serde_json::Map<String, Value> = kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.map_or(Value::Null, |v| json!(v))))
            .collect();
        self.nodes()
            .patch(
                NODE,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"annotations": ann}})),
            )
            .await
            .unwrap();
    }

    /// What the controller does for the node's turn: desired config and image, one patch.
    async fn desire(&self, image: &str) {
        self.annotate(&[
            (DESIRED_CONFIG, Some("rendered-worker-2")),
            (DESIRED_IMAGE, Some(image)),
            (DRIVEN_BY, Some("MachineConfigPool/worker")),
        ])
        .await;
    }

    async fn set_unschedulable(&self, u: bool) {
        self.nodes()
            .patch(
                NODE,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"unschedulable": u}})),
            )
            .await
            .unwrap();
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    async fn node(&self) -> Node {
        self.nodes().get(NODE).await.unwrap()
    }

    /// A running, ready pod on the node.
    async fn pod(&self, ns: &str, name: &str, labels: Value, extra_meta: Value) {
        let mut meta = json!({"name": name, "labels": labels});
        if let (Some(m), Some(e)) = (meta.as_object_mut(), extra_meta.as_object()) {
            m.extend(e.clone());
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": meta,
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        set_pod_phase(self.server.shared(), ns, name, &PodPhase::Running).unwrap();
    }

    async fn pod_exists(&self, ns: &str, name: &str) -> bool {
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }

    async fn pdb(&self, min_available: i32) {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web-pdb"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
        }))
        .unwrap();
        Api::<PodDisruptionBudget>::namespaced(self.client.clone(), "apps")
            .create(&PostParams::default(), &pdb)
            .await
            .unwrap();
    }

    async fn mcn_condition(&self, t: &str) -> Option<(String, String)> {
        let mcn = Api::<MachineConfigNode>::all(self.client.clone())
            .get(NODE)
            .await
            .unwrap();
        mcn.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == t)
            .map(|c| (c.status, c.reason))
    }

    /// [`Self::mcn_condition`] once its status is `status`, or as it is after 30 s: the
    /// agent writes the MachineConfigNode after the node's annotations, so a test that saw
    /// the node's state waits for the conditions that go with it.
    async fn mcn_condition_when(&self, t: &str, status: &str) -> Option<(String, String)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let c = self.mcn_condition(t).await;
            if c.as_ref().is_some_and(|c| c.0 == status) || tokio::time::Instant::now() > deadline {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn events(&self, reason: &str) -> Vec<String> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter_map(|e| e.note)
            .collect()
    }

    async fn until<F: std::future::Future<Output = bool>>(
        &self,
        what: &str,
        mut f: impl FnMut() -> F,
    ) {
        let end = tokio::time::Instant::now() + EVENTUALLY;
        while !f().await {
            assert!(
                tokio::time::Instant::now() < end,
                "timed out waiting for {what}; node: {:?}; host: {:?}",
                self.node().await.metadata.annotations,
                self.host.lock()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn annotation(&self, k: &str) -> Option<String> {
        self.node().await.annotations().get(k).cloned()
    }

    async fn unschedulable(&self) -> bool {
        self.node()
            .await
            .spec
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
    }

    async fn until_reboot_requested(&self) {
        let h = self.host.clone();
        self.until("a reboot request", || {
            let h = h.clone();
            async move { h.lock().reboot_requested }
        })
        .await;
    }

    async fn until_state(&self, state: &str) {
        self.until(&format!("state {state}"), || async {
            self.annotation(STATE).await.as_deref() == Some(state)
        })
        .await;
    }

    /// Stop the agent, boot the host, start a new agent.
    async fn reboot(&self, agent: Running, opts: AgentOptions) -> Running {
        agent.stop().await;
        self.host.boot();
        self.start_agent(opts)
    }

    fn count_calls(&self, prefix: &str) -> usize {
        self.host
            .lock()
            .calls
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_update_cordons_drains_deploys_reboots_and_uncordons() {
    let c = Cluster::start().await;
    c.pod("apps", "web-0", json!({"app": "web"}), json!({}))
        .await;
    // (DaemonSet-owned pods are skipped too — `drainable`'s unit test: the test server
    // serves no DaemonSets, and its garbage collector removes pods whose owner is missing.)
    c.pod(
        "apps",
        "static-0",
        json!({}),
        json!({"annotations": {"kubernetes.io/config.mirror": "abc"}}),
    )
    .await;
    let agent = c.start_agent(options());
    c.desire(B).await;
    c.until_reboot_requested().await;

    // Before the reboot: cordoned by the agent, drained (but DaemonSet and mirror pods),
    // deployed, keys and kargs written, the progress recorded with the boot id.
    assert!(c.unschedulable().await);
    assert_eq!(c.annotation(CORDONED_BY_AGENT).await.as_deref(), Some(B));
    assert_eq!(c.annotation(STATE).await.as_deref(), Some("Rebooting"));
    assert!(!c.pod_exists("apps", "web-0").await);
    assert!(c.pod_exists("apps", "static-0").await);
    let progress = c.annotation(PROGRESS).await.unwrap();
    assert!(
        progress.contains("\"bootIdBeforeReboot\":\"boot-0\""),
        "{progress}"
    );
    {
        let h = c.host.lock();
        assert_eq!(h.status.staged.as_deref(), Some(B));
        assert_eq!(
            h.ssh_keys.get("core"),
            Some(&vec!["ssh-ed25519 AAAA rendered-worker-2".to_owned()])
        );
        assert!(h.status.kargs.contains(&"nosmt".to_owned()));
    }
    assert_eq!(
        c.mcn_condition_when("Drained", "True").await,
        Some(("True".into(), "Drained".into()))
    );

    let agent = c.reboot(agent, options()).await;
    c.until_state("Done").await;
    assert!(!c.unschedulable().await);
    assert_eq!(c.annotation(CURRENT_IMAGE).await.as_deref(), Some(B));
    assert_eq!(
        c.annotation(CURRENT_CONFIG).await.as_deref(),
        Some("rendered-worker-2")
    );
    assert_eq!(c.annotation(PROGRESS).await, None);
    assert_eq!(c.annotation(CORDONED_BY_AGENT).await, None);
    for t in ["Updated", "UpdateComplete", "RebootedNode", "Uncordoned"] {
        assert_eq!(
            c.mcn_condition_when(t, "True")
                .await
                .map(|c| c.0)
                .as_deref(),
            Some("True"),
            "{t}"
        );
    }
    let mcn = Api::<MachineConfigNode>::all(c.client.clone())
        .get(NODE)
        .await
        .unwrap();
    let status = serde_json::to_value(mcn.status).unwrap();
    assert_eq!(status["configImage"]["currentImage"], B);
    assert_eq!(status["configVersion"]["current"], "rendered-worker-2");
    assert_eq!(c.count_calls("reboot"), 1);
    assert!(!c.events("UpdateComplete").await.is_empty());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_blocking_the_drain_fails_it_without_a_reboot_until_relaxed() {
    let c = Cluster::start().await;
    c.pod("apps", "web-0", json!({"app": "web"}), json!({}))
        .await;
    c.pdb(1).await;
    let mut opts = options();
    opts.drain_timeout = Duration::from_millis(600);
    let agent = c.start_agent(opts.clone());
    c.desire(B).await;
    c.until("Drained=False DrainFailed", || async {
        c.mcn_condition("Drained").await == Some(("False".into(), "DrainFailed".into()))
    })
    .await;
    let blocked = c.events("DrainBlocked").await;
    assert!(
        blocked
            .iter()
            .any(|n| n.contains("apps/web-0") && n.contains("web-pdb")),
        "{blocked:?}"
    );
    c.until("a DrainFailed Event", || async {
        !c.events("DrainFailed").await.is_empty()
    })
    .await;
    assert!(c.unschedulable().await, "stays cordoned");
    assert_eq!(c.annotation(STATE).await.as_deref(), Some("Working"));
    assert_eq!(c.count_calls("deploy"), 0);
    assert_eq!(c.count_calls("reboot"), 0);
    assert!(c.pod_exists("apps", "web-0").await);

    // Relax the budget: the next window drains and the update goes on.
    Api::<PodDisruptionBudget>::namespaced(c.client.clone(), "apps")
        .delete("web-pdb", &DeleteParams::default())
        .await
        .unwrap();
    c.until_reboot_requested().await;
    assert!(!c.pod_exists("apps", "web-0").await);
    let agent = c.reboot(agent, opts).await;
    c.until_state("Done").await;
    assert!(!c.unschedulable().await);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cordoned_by_an_admin_stays_cordoned() {
    let c = Cluster::start().await;
    c.set_unschedulable(true).await;
    let agent = c.start_agent(options());
    c.desire(B).await;
    c.until_reboot_requested().await;
    assert_eq!(c.annotation(CORDONED_BY_AGENT).await, None);
    let agent = c.reboot(agent, options()).await;
    c.until_state("Done").await;
    assert!(c.unschedulable().await, "the admin's cordon stays");
    assert_eq!(
        c.mcn_condition_when("Uncordoned", "False").await,
        Some(("False".into(), "CordonedByOthers".into()))
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncordon_during_the_drain_is_undone() {
    let c = Cluster::start().await;
    c.pod("apps", "web-0", json!({"app": "web"}), json!({}))
        .await;
    c.pdb(1).await;
    let agent = c.start_agent(options());
    c.desire(B).await;
    c.until("a blocked drain", || async {
        !c.events("DrainBlocked").await.is_empty()
    })
    .await;
    c.set_unschedulable(false).await;
    c.until("a re-cordon", || async {
        !c.events("Recordoned").await.is_empty() && c.unschedulable().await
    })
    .await;
    assert_eq!(c.count_calls("reboot"), 0);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_after_the_drain_neither_drains_nor_reboots_again() {
    let c = Cluster::start().await;
    c.pod("apps", "web-0", json!({"app": "web"}), json!({}))
        .await;
    // The pull secret is missing: the agent stops at the deploy, past the drain.
    let mut opts = options();
    opts.pull_secret = Some((NS.into(), "pull".into()));
    let agent = c.start_agent(opts.clone());
    c.desire(B).await;
    c.until("the deploy step", || async {
        c.annotation(PROGRESS)
            .await
            .is_some_and(|p| p.contains("\"step\":\"deploying\""))
    })
    .await;
    c.until("a retried host step", || async {
        !c.events("HostRetry").await.is_empty()
    })
    .await;
    agent.stop().await;
    assert!(!c.pod_exists("apps", "web-0").await);

    // A pod scheduled after the drain (the node is cordoned, but a pod with a nodeName):
    // a second drain would evict it.
    c.pod("apps", "late-0", json!({"app": "late"}), json!({}))
        .await;
    // Written as users write it: the server folds stringData into data.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "pull"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": "{\"auths\":{}}"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let agent = c.start_agent(opts.clone());
    c.until_reboot_requested().await;
    // Restart again while the reboot is pending: no second request.
    agent.stop().await;
    let agent = c.start_agent(opts.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.count_calls("reboot"), 1);
    let agent = c.reboot(agent, opts).await;
    c.until_state("Done").await;
    assert!(c.pod_exists("apps", "late-0").await, "no second drain");
    assert_eq!(c.count_calls("reboot"), 1);
    assert_eq!(c.host.lock().boots, 1);
    assert_eq!(
        c.host.lock().pull_secret.as_deref(),
        Some(&b"{\"auths\":{}}"[..])
    );
    // The release is the finishing pass's last host action, after its node patch (`Done`):
    // wait for it a little rather than race it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while c.host.lock().pull_secret_releases == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        c.host.lock().pull_secret_releases >= 1,
        "the pull secret is released once the update is done"
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boot_into_the_wrong_image_is_degraded() {
    let c = Cluster::start().await;
    let agent = c.start_agent(options());
    c.desire(B).await;
    c.until_reboot_requested().await;
    c.host.lock().boot_into = Some(C.into());
    let agent = c.reboot(agent, options()).await;
    c.until_state("Degraded").await;
    let reason = c.annotation(REASON).await.unwrap_or_default();
    assert!(reason.contains(B) && reason.contains(C), "{reason}");
    assert!(c.unschedulable().await, "stays cordoned");
    assert_eq!(c.annotation(CURRENT_IMAGE).await.as_deref(), Some(A));
    assert_eq!(
        c.mcn_condition_when("NodeDegraded", "True")
            .await
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staging_pulls_without_cordoning_and_retries_transient_failures() {
    let c = Cluster::start().await;
    c.host.lock().fail_pulls = 2;
    let agent = c.start_agent(options());
    c.annotate(&[(STAGE_IMAGE, Some(B))]).await;
    c.until("staged", || async {
        c.annotation(STAGED_IMAGE).await.as_deref() == Some(B)
    })
    .await;
    assert_eq!(
        c.count_calls("pull "),
        3,
        "two transient failures, then the pull"
    );
    assert!(!c.events("PullFailed").await.is_empty());
    assert!(!c.unschedulable().await);
    assert_eq!(c.annotation(STATE).await.as_deref(), Some("Done"));
    assert_eq!(c.annotation(CORDONED_BY_AGENT).await, None);
    assert_eq!(c.count_calls("deploy"), 0);
    assert_eq!(
        c.mcn_condition_when("ImagePulledFromRegistry", "True")
            .await,
        Some(("True".into(), "Staged".into()))
    );
    agent.stop().await;
}

/// A Secret of registry credentials (`config.json` bytes under `key`).
fn creds_secret(name: &str, type_: &str, key: &str, bytes: &[u8]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some([(key.to_owned(), k8s_openapi::ByteString(bytes.to_vec()))].into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_updates_with_the_rbac_of_deploy_and_cannot_read_the_push_secret() {
    let c = Cluster::start().await;
    // deploy/agent.yaml's RBAC objects, as `kubectl apply` would create them.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/agent.yaml");
    let yaml = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        c.server.apply_rbac_yaml(&yaml),
        Ok(4),
        "ClusterRole, ClusterRoleBinding, Role, RoleBinding"
    );
    // The namespace's Secrets: the registry push Secret, and the controller's copy of a
    // MachineImage's pull Secret.
    let pull = br#"{"auths":{"quay.io":{"auth":"bWk6cHVsbA=="}}}"#;
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), NS);
    for s in [
        creds_secret(
            "push-secret",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            b"{}",
        ),
        creds_secret(
            "mi-pull",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            pull,
        ),
        creds_secret(NODE_PULL_SECRETS, "Opaque", "mi-pull", pull),
    ] {
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }

    // The agent's ServiceAccount, as its pod runs.
    let kc = c
        .server
        .service_account_kubeconfig(NS, "machineos-agent")
        .unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&kc).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    let agent_client = Client::try_from(machineos_agent::client_config(cfg)).unwrap();
    let as_agent: Api<Secret> = Api::namespaced(agent_client.clone(), NS);
    let code = |r: Result<Secret, kube::Error>| match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(code(as_agent.get("push-secret").await), 403);
    assert_eq!(code(as_agent.get("mi-pull").await), 403);
    assert_eq!(code(as_agent.get(NODE_PULL_SECRETS).await), 200);
    assert!(matches!(
        as_agent.list(&Default::default()).await,
        Err(kube::Error::Api(s)) if s.code == 403
    ));

    // A full update with those permissions, pulling with the MachineImage's credentials.
    c.pod("apps", "web-0", json!({"app": "web"}), json!({}))
        .await;
    c.annotate(&[(PULL_SECRET, Some("machineos/mi-pull"))])
        .await;
    let agent = c.start_agent_as(agent_client.clone(), options());
    c.desire(B).await;
    c.until_reboot_requested().await;
    assert!(!c.pod_exists("apps", "web-0").await, "evicted");
    agent.stop().await;
    c.host.boot();
    let agent = c.start_agent_as(agent_client, options());
    c.until_state("Done").await;
    assert_eq!(c.annotation(CURRENT_IMAGE).await.as_deref(), Some(B));
    assert_eq!(c.host.lock().pull_secret.as_deref(), Some(&pull[..]));
    agent.stop().await;
    // Nothing the agent asked for was refused: only the test's own probes.
    let denied = c.server.denied();
    assert_eq!(denied.len(), 3, "{denied:#?}");
    assert!(
        denied.iter().all(|d| d.contains(" secrets.")),
        "{denied:#?}"
    );
    // Every grant of deploy's agent roles was used by this update, but one: a repeated
    // Event's series is patched (machineos-kube events.rs), and nothing repeated here.
    assert_eq!(
        c.server.unused_grants(NS, "machineos-agent"),
        ["ClusterRole machineos-agent: patch events.events.k8s.io"]
    );
}

/// A move applied live, with the agent killed while the apply keeps failing and a new one
/// started: no cordon, no drain, no reboot at any point; the new agent applies again and
/// finishes, the restart action run once (by the apply that succeeded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_live_apply_applies_again_without_drain_or_reboot() {
    let c = Cluster::start().await;
    c.pod("apps", "web-0", json!({"app": "web"}), json!({}))
        .await;
    // The same kernel arguments on both sides: a live move changes none.
    c.host.lock().status.kargs = vec!["nosmt".into()];
    c.host.lock().fail_live = 1_000;
    let plan = machineos_disruption::NodePlan {
        config: "rendered-worker-2".into(),
        image: B.into(),
        class: machineos_disruption::Class::Restart,
        actions: vec![machineos_disruption::Action::Restart(
            "chronyd.service".into(),
        )],
    };
    c.annotate(&[(NODE_DISRUPTION, Some(&plan.to_annotation()))])
        .await;
    let agent = c.start_agent(options());
    c.desire(B).await;
    c.until("the apply step", || async {
        c.annotation(PROGRESS)
            .await
            .is_some_and(|p| p.contains("\"step\":\"applying\""))
    })
    .await;
    c.until("a retried apply", || async {
        !c.events("HostRetry").await.is_empty()
    })
    .await;
    agent.stop().await;
    c.host.lock().fail_live = 0;
    let agent = c.start_agent(options());
    c.until_state("Done").await;
    assert_eq!(c.annotation(REBOOT_PENDING).await.as_deref(), Some(B));
    assert_eq!(c.annotation(CURRENT_IMAGE).await.as_deref(), Some(B));
    assert!(c.pod_exists("apps", "web-0").await, "no drain");
    assert!(c.events("Drained").await.is_empty());
    let node = c.nodes().get(NODE).await.unwrap();
    assert!(!node.spec.and_then(|s| s.unschedulable).unwrap_or(false));
    {
        let s = c.host.lock();
        assert_eq!(s.boots, 0);
        assert!(!s.reboot_requested && !s.soft_reboot_requested);
        assert_eq!(s.systemctl, ["restart chronyd.service"], "{:?}", s.calls);
        assert_eq!(s.live_config.as_deref(), Some(B));
        assert_eq!(s.status.staged.as_deref(), Some(B));
    }
    agent.stop().await;
}
