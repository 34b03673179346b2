//! `cargo bench -p machineos --bench controller`: `machineos controller` (the binary, as
//! deployed) against the test API server and a real TLS + htpasswd registry on loopback.
//!
//! 1. **Reaction time**: from the `apply` of a MachineConfig change to the MachineOSBuild
//!    Succeeded *and* the MachineOSConfig pointing at the pushed digest, with the base index
//!    warm; median, p90 and max over `EDITS` edits (the MCO: 6–15 minutes).
//! 2. **20 pools at once**: 20 pools' MachineConfigs edited in one burst; all finish, and no
//!    build is pushed twice (the registry's access log: one tag PUT per build).
//! 3. **Scale**: 50 pools (all opted in), 2 000 MachineConfigs, 5 000 Nodes in the API
//!    server; every pool built; the controller process's peak and final RSS
//!    (`/proc/PID/status` `VmHWM`/`VmRSS`).
//!
//! Figures, not assertions: timings here are noisy. Prints a table.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use machineos_image::Platform;
use machineos_image::layout::Layout;
use machineos_kubetest::http::{Server, new_store};
use machineos_testkit::{CopyOptions, RegistryOptions, TestRegistry, skopeo_copy};
use serde_json::{Value, json};

const EDITS: usize = 15;
const GROUP: &str = "machineconfiguration.openshift.io";

fn ar(kind: &str, plural: &str, version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

struct Env {
    client: Client,
    registry: TestRegistry,
    _server: Server,
    tmp: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

async fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_tls(new_store(), 0).await.unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).await.unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(cfg).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in machineos_api::crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "machineos"}})).unwrap(),
    )
    .await
    .unwrap();
    let dir = tmp.path().to_owned();
    let registry = tokio::task::spawn_blocking(move || {
        let registry =
            TestRegistry::start(RegistryOptions::new().with_tls().with_auth("builder", "pw"))
                .unwrap();
        let path = dir.join("base-layout");
        let layout = Layout::create(&path).unwrap();
        let spec = machineos_synth::SynthSpec::example()
            .with_platform("linux/amd64".parse::<Platform>().unwrap());
        let desc = machineos_synth::write_image(&layout, &spec).unwrap();
        layout.set_tag("base", &desc).unwrap();
        skopeo_copy(
            &format!("oci:{}:base", path.display()),
            &format!("docker://{}/base/os:1", registry.host()),
            &CopyOptions::new().dest_registry(&registry),
        )
        .unwrap();
        registry
    })
    .await
    .unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("builder:pw");
    let cfg = json!({"auths": {registry.host(): {"auth": auth}}}).to_string();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "machineos");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "push-secret"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(cfg)},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "machineos");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "machine-config-osimageurl"},
            "data": {"baseOSContainerImage": format!("{}/base/os:1", registry.host())},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    Env {
        client,
        registry,
        _server: server,
        tmp,
        kubeconfig,
    }
}

fn free_port() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// `GET /metrics` of the controller.
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn controller(e: &Env, listen: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_machineos"))
        .args(["controller", "--namespace", "machineos", "--listen", listen])
        .args(["--no-leader-election", "--max-concurrent-builds", "4"])
        .arg("--cache-dir")
        .arg(e.tmp.path().join("cache"))
        .arg("--ca-file")
        .arg(e.registry.ca_path().unwrap())
        .env("KUBECONFIG", &e.kubeconfig)
        .env(
            "MACHINEOS_LOG",
            std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

async fn apply(client: &Client, r: &ApiResource, obj: Value) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), r);
    let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
    api.patch(
        &name,
        &PatchParams::apply("bench").force(),
        &Patch::Apply(&obj),
    )
    .await
    .unwrap();
}

fn pool(name: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
        }
    })
}

fn mc(name: &str, role: &str, content: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{
            "path": format!("/etc/machineos-bench/{name}"), "mode": 420,
            "contents": {"source": format!("data:,{content}")},
        }]}}}
    })
}

fn mosc(pool: &str, registry: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig",
        "metadata": {"name": pool},
        "spec": {
            "machineConfigPool": {"name": pool},
            "imageBuilder": {"imageBuilderType": "Native"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": format!("{registry}/machineos/{pool}:latest"),
        }
    })
}

/// Pool → (current build name, its image), for MachineOSConfigs whose status points at a
/// Succeeded build.
async fn current(client: &Client) -> BTreeMap<String, String> {
    let moscs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar("MachineOSConfig", "machineosconfigs", "v1"),
    );
    moscs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|m| {
            Some((
                m.name_any(),
                m.data
                    .pointer("/status/machineOSBuild/name")?
                    .as_str()?
                    .to_owned(),
            ))
        })
        .collect()
}

/// Wait until every pool in `pools` has a current build other than `before`'s.
async fn wait_moved(client: &Client, pools: &[String], before: &BTreeMap<String, String>) {
    // Polling costs the API server (and the 2 cores) a list per poll: fine-grained for one
    // pool, coarser for many.
    let every = Duration::from_millis(if pools.len() == 1 { 5 } else { 50 });
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let now = current(client).await;
        if pools
            .iter()
            .all(|p| now.get(p).is_some_and(|b| before.get(p) != Some(b)))
        {
            return;
        }
        assert!(Instant::now() < deadline, "timed out: {now:?}");
        tokio::time::sleep(every).await;
    }
}

fn rss_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) a process has used.
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command name: state is field 0, utime 11, stime 12 (clock ticks, 100/s).
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn reaction_time() {
    let e = env().await;
    let (pools_r, mcs_r, moscs_r) = (
        ar("MachineConfigPool", "machineconfigpools", "v1"),
        ar("MachineConfig", "machineconfigs", "v1"),
        ar("MachineOSConfig", "machineosconfigs", "v1"),
    );
    let host = e.registry.host();
    apply(&e.client, &pools_r, pool("worker")).await;
    apply(&e.client, &mcs_r, mc("00-worker", "worker", "v0")).await;
    apply(&e.client, &moscs_r, mosc("worker", &host)).await;
    let mut ctl = controller(&e, &free_port());
    let pools = vec!["worker".to_string()];
    let t = Instant::now();
    wait_moved(&e.client, &pools, &BTreeMap::new()).await;
    let cold = t.elapsed();
    let mut samples = Vec::new();
    for i in 1..=EDITS {
        let before = current(&e.client).await;
        let t = Instant::now();
        apply(
            &e.client,
            &mcs_r,
            mc("00-worker", "worker", &format!("v{i}")),
        )
        .await;
        wait_moved(&e.client, &pools, &before).await;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = ctl.kill();
    let _ = ctl.wait();
    samples.sort_by(f64::total_cmp);
    println!(
        "| reaction time, kubectl apply → Succeeded + MachineOSConfig recorded (warm, {EDITS} edits) | median {:.0} ms, p90 {:.0} ms, max {:.0} ms (first, cold index: {:.0} ms) |",
        percentile(&samples, 0.5),
        percentile(&samples, 0.9),
        samples[samples.len() - 1],
        cold.as_secs_f64() * 1000.0
    );
}

async fn many_pools(n_pools: usize, mcs_per_pool: usize, nodes: usize, burst: usize) {
    let e = env().await;
    let (pools_r, mcs_r, moscs_r) = (
        ar("MachineConfigPool", "machineconfigpools", "v1"),
        ar("MachineConfig", "machineconfigs", "v1"),
        ar("MachineOSConfig", "machineosconfigs", "v1"),
    );
    let host = e.registry.host();
    let names: Vec<String> = (0..n_pools).map(|i| format!("pool-{i:02}")).collect();
    let t = Instant::now();
    for p in &names {
        apply(&e.client, &pools_r, pool(p)).await;
        for j in 0..mcs_per_pool {
            apply(
                &e.client,
                &mcs_r,
                mc(&format!("{j:02}-{p}"), p, &format!("{p}-{j}")),
            )
            .await;
        }
        apply(&e.client, &moscs_r, mosc(p, &host)).await;
    }
    let node_api: Api<Node> = Api::all(e.client.clone());
    for i in 0..nodes {
        let p = &names[i % n_pools];
        node_api
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {
                    "name": format!("node-{i:05}"),
                    "labels": {format!("node-role.kubernetes.io/{p}"): "", "kubernetes.io/arch": "amd64"},
                    "annotations": {"machineconfiguration.openshift.io/currentConfig": "rendered-x"},
                }}))
                .unwrap(),
            )
            .await
            .unwrap();
    }
    let populate = t.elapsed();
    let listen = free_port();
    let ctl = controller(&e, &listen);
    let pid = ctl.id();
    let api_cpu0 = cpu_secs("self");
    let t = Instant::now();
    wait_moved(&e.client, &names, &BTreeMap::new()).await;
    let all_built = t.elapsed();
    // A burst: `burst` pools edited at once.
    let before = current(&e.client).await;
    let edited: Vec<String> = names.iter().take(burst).cloned().collect();
    let t = Instant::now();
    futures_util::future::join_all(edited.iter().map(|p| {
        let client = e.client.clone();
        let mcs_r = mcs_r.clone();
        async move { apply(&client, &mcs_r, mc(&format!("00-{p}"), p, "edited")).await }
    }))
    .await;
    wait_moved(&e.client, &edited, &before).await;
    let burst_time = t.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ctl_cpu = cpu_secs(&pid.to_string());
    let api_cpu = cpu_secs("self") - api_cpu0;
    let hwm = rss_kib(pid, "VmHWM:");
    let rss = rss_kib(pid, "VmRSS:");
    // No build pushed twice: the controller's own count of pushes per pool against the
    // MachineOSBuilds that exist.
    let metrics = scrape(&listen);
    let mut ctl = ctl;
    let _ = ctl.kill();
    let _ = ctl.wait();
    let pushes: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("ocl_image_push_total{") && l.contains("state=\"succeeded\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    let builds: Api<DynamicObject> = Api::all_with(
        e.client.clone(),
        &ar("MachineOSBuild", "machineosbuilds", "v1"),
    );
    let n_builds = builds.list(&Default::default()).await.unwrap().items.len();
    println!(
        "| {n_pools} pools, {} MachineConfigs, {nodes} Nodes: all pools built | {:.1} s (populating the API server: {:.1} s) |",
        n_pools * mcs_per_pool,
        all_built.as_secs_f64(),
        populate.as_secs_f64()
    );
    println!(
        "| {burst} pools edited at once: all rebuilt and recorded | {:.2} s; {n_builds} MachineOSBuilds for {} pool configs, {pushes} pushes (ocl_image_push_total) |",
        burst_time.as_secs_f64(),
        n_pools + burst,
    );
    println!(
        "| CPU during the builds and the burst: controller process / test API server + bench | {ctl_cpu:.1} s / {api_cpu:.1} s |"
    );
    println!(
        "| controller RSS ({n_pools} pools, {} MachineConfigs, {nodes} Nodes) | peak {:.1} MiB, after {:.1} MiB |",
        n_pools * mcs_per_pool,
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once, small.
    let quick = std::env::args().any(|a| a == "--test") || std::env::var_os("QUICK").is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| `machineos controller` | figure |\n| --- | --- |");
    rt.block_on(async {
        reaction_time().await;
        if quick {
            many_pools(4, 3, 20, 2).await;
        } else {
            many_pools(50, 40, 5000, 20).await;
        }
    });
}
