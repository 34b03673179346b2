//! A cluster for the controller's tests: the test API server (TLS, bearer token) with
//! machineos' CRDs, the namespaces, a real loopback registry (TLS + htpasswd) holding a
//! synthetic bootable base image, the push Secret, and the controller running in-process.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_controller::controller::{ControllerOptions, run};
use machineos_controller::health::Health;
use machineos_controller::kinds;
use machineos_controller::leader::Leadership;
use machineos_controller::metrics::Metrics;
use machineos_controller::registry_ops::RegistrySettings;
use machineos_image::{Platform, layout::Layout};
use machineos_kubetest::http::{Server, new_store};
use machineos_testkit::{CopyOptions, RegistryOptions, TestRegistry, skopeo_copy};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The controller's namespace.
pub const NS: &str = "machineos";
/// A generous bound for "eventually".
pub const EVENTUALLY: Duration = Duration::from_secs(90);

pub struct Cluster {
    pub server: Server,
    pub client: Client,
    pub registry: TestRegistry,
    pub tmp: tempfile::TempDir,
    /// `host/base/os:1`.
    pub base: String,
}

pub async fn client_of(server: &Server) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    // As the controller builds its client in production: nothing retried inside a request.
    Client::try_from(machineos_kube::client_config(cfg)).unwrap()
}

fn base_layout(dir: &Path, platforms: &[&str]) -> std::path::PathBuf {
    let specs: Vec<_> = platforms
        .iter()
        .map(|p| {
            machineos_synth::SynthSpec::example()
                .with_platform(p.parse::<Platform>().expect("platform"))
        })
        .collect();
    layout_of(&dir.join("base-layout"), &specs)
}

/// An OCI layout at `path` holding `specs` (one image, or an index of them) as tag `base`.
fn layout_of(path: &Path, specs: &[machineos_synth::SynthSpec]) -> std::path::PathBuf {
    let path = path.to_owned();
    let layout = Layout::create(&path).expect("layout");
    let desc = if specs.len() == 1 {
        machineos_synth::write_image(&layout, &specs[0]).expect("synth")
    } else {
        machineos_synth::write_multi_arch(&layout, specs).expect("synth")
    };
    layout.set_tag("base", &desc).expect("tag");
    path
}

pub fn dockerconfig(host: &str, user: &str, pass: &str) -> Vec<u8> {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    json!({"auths": {host: {"auth": auth}}})
        .to_string()
        .into_bytes()
}

impl Cluster {
    /// Everything but the controller.
    pub async fn start() -> Cluster {
        Self::start_with(
            RegistryOptions::new()
                .with_tls()
                .with_auth("builder", "s3cret-pw"),
        )
        .await
    }

    pub async fn start_with(reg_opts: RegistryOptions) -> Cluster {
        Self::start_with_base(reg_opts, &["linux/amd64"]).await
    }

    /// A cluster whose base image is an index of `platforms`.
    pub async fn start_with_base(reg_opts: RegistryOptions, platforms: &[&str]) -> Cluster {
        let platforms: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "machineos_controller=info".into()),
            )
            .try_init();
        let server = Server::start_tls(new_store(), 0).await.unwrap();
        let client = client_of(&server).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in machineos_api::crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let nss: Api<Namespace> = Api::all(client.clone());
        for ns in [NS, "default"] {
            let _ = nss
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
                )
                .await;
        }
        let tmp = tempfile::tempdir().unwrap();
        let (registry, base) = {
            let dir = tmp.path().to_owned();
            tokio::task::spawn_blocking(move || {
                let registry = TestRegistry::start(reg_opts).expect("registry");
                let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
                let layout = base_layout(&dir, &platforms);
                let base = format!("{}/base/os:1", registry.host());
                skopeo_copy(
                    &format!("oci:{}:base", layout.display()),
                    &format!("docker://{base}"),
                    &CopyOptions::new().dest_registry(&registry).arg("--all"),
                )
                .expect("push base");
                (registry, base)
            })
            .await
            .unwrap()
        };
        let c = Cluster {
            server,
            client,
            registry,
            tmp,
            base,
        };
        let (user, pass) = c.registry.credentials().unwrap_or(("anonymous", "none"));
        c.secret("push-secret", &dockerconfig(&c.registry.host(), user, pass))
            .await;
        c.config_map(
            "machine-config-osimageurl",
            &[("baseOSContainerImage", c.base.as_str())],
        )
        .await;
        c
    }

    /// Push another base image, `spec`, as `base/os:<tag>`; its reference.
    pub async fn push_base(&self, tag: &str, spec: machineos_synth::SynthSpec) -> String {
        let dir = self.tmp.path().join(format!("base-{tag}"));
        let reference = format!("{}/base/os:{tag}", self.registry.host());
        let options = CopyOptions::new().dest_registry(&self.registry);
        let to = reference.clone();
        tokio::task::spawn_blocking(move || {
            let layout = layout_of(&dir, &[spec]);
            skopeo_copy(
                &format!("oci:{}:base", layout.display()),
                &format!("docker://{to}"),
                &options,
            )
            .expect("push base");
        })
        .await
        .unwrap();
        reference
    }

    pub async fn secret(&self, name: &str, dockerconfigjson: &[u8]) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64_encode(dockerconfigjson)},
        }))
        .unwrap();
        api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&s))
            .await
            .unwrap();
    }

    pub async fn config_map(&self, name: &str, data: &[(&str, &str)]) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), NS);
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let cm: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": data,
        }))
        .unwrap();
        api.patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap();
    }

    /// Server-side apply of a cluster-scoped custom object.
    pub async fn apply(&self, ar: &kube::api::ApiResource, obj: Value) {
        let api = kinds::all(&self.client, ar);
        let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
        api.patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {name}: {e}"));
    }

    /// The manifest (or index) `image` names, as the registry serves it (`skopeo inspect
    /// --raw` with the registry's CA and credentials).
    pub async fn raw_manifest(&self, image: &str) -> Value {
        let mut args = vec!["inspect".to_owned(), "--raw".to_owned()];
        if let Some(dir) = self.registry.cert_dir() {
            args.extend(["--cert-dir".to_owned(), dir.display().to_string()]);
        }
        if let Some((user, pass)) = self.registry.credentials() {
            args.extend(["--creds".to_owned(), format!("{user}:{pass}")]);
        }
        args.push(format!("docker://{image}"));
        let raw = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            machineos_testkit::skopeo(&args)
        })
        .await
        .unwrap()
        .expect("skopeo inspect --raw");
        serde_json::from_str(&raw).unwrap()
    }

    pub fn registry_settings(&self) -> RegistrySettings {
        RegistrySettings::new(
            if self.registry.is_tls() {
                vec![self.registry.ca_pem().to_vec()]
            } else {
                Vec::new()
            },
            Vec::new(),
        )
    }

    pub fn options(&self) -> ControllerOptions {
        let mut o = ControllerOptions::new(NS);
        o.registry = self.registry_settings();
        o.cache_dir = Some(self.tmp.path().join("cache"));
        o.platform = "linux/amd64".parse().unwrap();
        o.leader_election = false;
        o
    }

    /// The controller, in-process, as the only replica.
    pub async fn controller(&self) -> Running {
        self.controller_with(self.options()).await
    }

    pub async fn controller_with(&self, opts: ControllerOptions) -> Running {
        let client = client_of(&self.server).await;
        self.controller_as(client, opts).await
    }

    /// The controller with `client`'s identity (a ServiceAccount's, for the RBAC test).
    pub async fn controller_as(&self, client: Client, opts: ControllerOptions) -> Running {
        self.controller_metered(client, opts, Metrics::new()).await
    }

    /// The controller, reporting to `metrics` (a clone the test reads).
    pub async fn controller_metered(
        &self,
        client: Client,
        opts: ControllerOptions,
        metrics: Metrics,
    ) -> Running {
        let shutdown = CancellationToken::new();
        let (leadership, leader) = Leadership::manual(true);
        let task = tokio::spawn(run(
            client,
            opts,
            metrics,
            Health::default(),
            leadership,
            shutdown.clone(),
        ));
        Running {
            shutdown,
            task,
            _leader: leader,
        }
    }

    /// What an admin reads: `kubectl describe <what> <name>` against this cluster, polled
    /// until it contains every string of `want` (its last output in the panic otherwise).
    /// `None` when kubectl is not installed — which fails under `CI`, where it is.
    pub async fn describe_until(&self, what: &str, name: &str, want: &[&str]) -> Option<String> {
        if !machineos_kubetest::kubectl::judge_or_skip(&format!("kubectl describe {what} {name}")) {
            return None;
        }
        let (k, _) =
            machineos_kubetest::kubectl::Kubectl::for_server(&self.server, self.tmp.path())
                .unwrap();
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let (k2, what2, name2) = (k.clone(), what.to_owned(), name.to_owned());
            let out = tokio::task::spawn_blocking(move || k2.ok(&["describe", &what2, &name2]))
                .await
                .unwrap()
                .unwrap_or_else(|e| format!("{e}"));
            if want.iter().all(|w| out.contains(w)) {
                return Some(out);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "kubectl describe {what} {name} lacks one of {want:?}:\n{out}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn get(&self, ar: &kube::api::ApiResource) -> Api<DynamicObject> {
        kinds::all(&self.client, ar)
    }

    /// Poll until `f` holds over the objects of `ar`, or panic with what was seen.
    pub async fn until<F>(
        &self,
        ar: &kube::api::ApiResource,
        what: &str,
        f: F,
    ) -> Vec<DynamicObject>
    where
        F: Fn(&[DynamicObject]) -> bool,
    {
        let api = self.get(ar);
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let list = api.list(&Default::default()).await.unwrap().items;
            if f(&list) {
                return list;
            }
            if tokio::time::Instant::now() > deadline {
                let dump: Vec<Value> = list
                    .iter()
                    .map(|o| json!({"name": o.name_any(), "data": o.data}))
                    .collect();
                panic!(
                    "timed out waiting for {what}: {}",
                    serde_json::to_string_pretty(&dump).unwrap()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Cluster {
    /// Pool `worker`, its MachineConfig `00-worker` writing `/etc/motd`, and a
    /// MachineOSConfig pushing to `push`.
    pub async fn setup(&self, push: &str, motd: &str) {
        self.apply(&kinds::pool(), worker_pool()).await;
        self.apply(
            &kinds::machine_config(),
            machine_config("00-worker", "motd", motd),
        )
        .await;
        self.apply(&kinds::machine_os_config(), machine_os_config(push))
            .await;
    }

    /// Wait until the MachineOSConfig `worker`'s `status.<field>` (`currentImagePullSpec`,
    /// `machineOSBuild/name`) is `want`.
    pub async fn until_recorded(&self, what: &str, field: &str, want: &str) -> DynamicObject {
        let pointer = format!("/status/{field}");
        self.until(&kinds::machine_os_config(), what, |l| {
            l.iter().any(|m| {
                m.name_any() == "worker"
                    && m.data.pointer(&pointer).and_then(Value::as_str) == Some(want)
            })
        })
        .await
        .into_iter()
        .find(|m| m.name_any() == "worker")
        .expect("the MachineOSConfig")
    }
}

pub struct Running {
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), String>>,
    /// Keeps the manual leadership alive (a dropped sender reads as "not leader").
    _leader: tokio::sync::watch::Sender<bool>,
}

impl Running {
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.task).await;
    }
    /// A kill: the task is aborted at whatever await point it is.
    pub fn kill(self) {
        self.task.abort();
    }
}

pub fn base64_encode(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// The phase a build's conditions say.
/// The message of a build's condition `type_` (empty when it has none).
pub fn condition_message(b: &DynamicObject, type_: &str) -> String {
    b.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["type"] == type_)
        .and_then(|x| x["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}

pub fn phase(b: &DynamicObject) -> &'static str {
    let conds = b
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array);
    let on = |t: &str| {
        conds.is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    for t in ["Succeeded", "Failed", "Interrupted", "Building", "Prepared"] {
        if on(t) {
            return match t {
                "Succeeded" => "Succeeded",
                "Failed" => "Failed",
                "Interrupted" => "Interrupted",
                "Building" => "Building",
                _ => "Prepared",
            };
        }
    }
    "Initial"
}

pub fn worker_pool() -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
        }
    })
}

/// A MachineConfig for role `worker` writing `/etc/<file>` with `content`.
pub fn machine_config(name: &str, file: &str, content: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [{
                "path": format!("/etc/{file}"),
                "mode": 420,
                "contents": {"source": format!("data:,{}", urlencode(content))},
            }]},
        }}
    })
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn machine_os_config(push_spec: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSConfig",
        "metadata": {"name": "worker"},
        "spec": {
            "machineConfigPool": {"name": "worker"},
            "imageBuilder": {"imageBuilderType": "Native"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": push_spec,
        }
    })
}

pub type Shared<T> = Arc<T>;

/// Create the `MachineConfiguration` `cluster` with `spec` (its CRD is among
/// `machineos_api::crds()`, which every test cluster serves, validation rules included).
pub async fn machine_configuration(c: &Cluster, spec: serde_json::Value) {
    use kube::api::PostParams;
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    let api = kinds::all(&c.client, &kinds::machine_configuration());
    loop {
        let obj = serde_json::from_value(json!({
            "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"}, "spec": spec,
        }))
        .unwrap();
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => return,
            // The API server's verdict on the object: no retry makes it valid.
            Err(kube::Error::Api(e)) if e.code == 422 => {
                panic!("MachineConfiguration cluster: {e}")
            }
            Err(_) => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CRD never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
