//! `machineos controller` as a user runs it, judged by the real `kubectl`: the test API
//! server (TLS, token) and a TLS + htpasswd registry; the CRDs, the namespace, the push
//! Secret and the base-image ConfigMap created with `kubectl`; a pool, a MachineConfig and a
//! MachineOSConfig applied with `kubectl apply`; the controller binary started with
//! `KUBECONFIG` (leader election on, endpoints on a free port); `kubectl wait
//! machineosbuild/… --for=condition=Succeeded`; the printer columns; the MachineOSConfig's
//! image; SIGTERM → a clean exit with the Lease released.
//!
//! Prints a transcript (run with `--nocapture` to see it).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use machineos_image::Platform;
use machineos_image::layout::Layout;
use machineos_kubetest::kubectl::{self, Kubectl};
use machineos_testkit::{CopyOptions, RegistryOptions, TestRegistry, skopeo_copy};

const MANIFESTS: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 00-worker-motd
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/motd
        mode: 420
        contents:
          source: data:,hello%20from%20machineos%0A
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
spec:
  machineConfigPool:
    name: worker
  imageBuilder:
    imageBuilderType: Native
  renderedImagePushSecret:
    name: push-secret
  renderedImagePushSpec: PUSH
"#;

fn say(line: &str) {
    println!("{line}");
}

fn run(k: &Kubectl, args: &[&str]) -> String {
    say(&format!("$ kubectl {}", args.join(" ")));
    let out = k
        .ok(args)
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
    print!("{out}");
    out
}

/// A plain HTTP/1.1 GET on 127.0.0.1, the whole answer as text.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn base_layout(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("base-layout");
    let layout = Layout::create(&path).expect("layout");
    let spec = machineos_synth::SynthSpec::example()
        .with_platform("linux/amd64".parse::<Platform>().expect("platform"));
    let desc = machineos_synth::write_image(&layout, &spec).expect("synth");
    layout.set_tag("base", &desc).expect("tag");
    path
}

#[test]
fn kubectl_apply_then_wait_for_the_build_to_succeed() {
    if !common::kubectl_or_skip("the controller as a user runs it") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let common::ApiServer {
        rt: _rt,
        server,
        kubeconfig,
        kubectl: k,
    } = common::start(tmp.path(), Duration::from_secs(120));

    let reg = TestRegistry::start(RegistryOptions::new().with_tls().with_auth("builder", "pw"))
        .expect("registry");
    let base = format!("{}/base/os:1", reg.host());
    skopeo_copy(
        &format!("oci:{}:base", base_layout(tmp.path()).display()),
        &format!("docker://{base}"),
        &CopyOptions::new().dest_registry(&reg),
    )
    .expect("push base");

    let crds = tmp.path().join("crds.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .arg("crds")
        .output()
        .unwrap();
    std::fs::write(&crds, &out.stdout).unwrap();
    run(&k, &["apply", "-f", crds.to_str().unwrap()]);
    run(&k, &["create", "namespace", "machineos"]);
    run(
        &k,
        &[
            "create",
            "secret",
            "docker-registry",
            "push-secret",
            "-n",
            "machineos",
            &format!("--docker-server={}", reg.host()),
            "--docker-username=builder",
            "--docker-password=pw",
        ],
    );
    run(
        &k,
        &[
            "create",
            "configmap",
            "machine-config-osimageurl",
            "-n",
            "machineos",
            &format!("--from-literal=baseOSContainerImage={base}"),
        ],
    );
    let manifests = tmp.path().join("worker.yaml");
    let push = format!("{}/machineos/worker:latest", reg.host());
    std::fs::write(&manifests, MANIFESTS.replace("PUSH", &push)).unwrap();
    run(&k, &["apply", "-f", manifests.to_str().unwrap()]);

    // A free port for the endpoints.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    say(&format!(
        "$ machineos controller --namespace machineos --listen {listen} --cache-dir … --ca-file … &"
    ));
    let mut ctl = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .args([
            "controller",
            "--namespace",
            "machineos",
            "--listen",
            &listen,
        ])
        .arg("--cache-dir")
        .arg(tmp.path().join("cache"))
        .arg("--ca-file")
        .arg(reg.ca_path().expect("CA"))
        .args(["--identity", "replica-a"])
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", tmp.path().join("home"))
        .env_remove("POD_NAMESPACE")
        .env_remove("POD_NAME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let started = Instant::now();
    let name = loop {
        let names = k
            .ok(&["get", "machineosbuilds", "-o", "name"])
            .unwrap_or_default();
        if let Some(n) = names.lines().next() {
            break n.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no MachineOSBuild"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    run(&k, &["get", "machineosbuilds"]);
    run(
        &k,
        &["wait", &name, "--for=condition=Succeeded", "--timeout=90s"],
    );
    run(&k, &["get", "machineosbuilds"]);
    let image = run(
        &k,
        &[
            "get",
            "machineosconfig",
            "worker",
            "-o",
            "jsonpath={.status.currentImagePullSpec}",
        ],
    );
    println!();
    assert!(
        image.starts_with(&format!("{}/machineos/worker@sha256:", reg.host())),
        "{image}"
    );
    run(&k, &["get", "machineosimages"]);
    let holder = run(&k, &common::LEASE_HOLDER);
    println!();
    assert_eq!(holder, "replica-a");

    // The endpoints: ready, alive, and the build counted.
    for (path, want) in [("/readyz", "200"), ("/healthz", "200")] {
        let got = http_get(&listen, path);
        assert!(
            got.starts_with(&format!("HTTP/1.1 {want}")),
            "{path}: {got}"
        );
    }
    let metrics = http_get(&listen, "/metrics");
    say(&format!(
        "$ curl -s http://{listen}/metrics | grep -E '^(ocl_build_total|ocl_active_builds|machineos_leader) '"
    ));
    for line in metrics.lines().filter(|l| {
        l.starts_with("ocl_build_total")
            || l.starts_with("ocl_active_builds ")
            || l.starts_with("machineos_leader ")
    }) {
        say(line);
    }
    assert!(
        metrics.contains("ocl_build_total{pool=\"worker\",state=\"succeeded\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("machineos_leader 1"), "{metrics}");

    // SIGTERM: a clean exit, the Lease released.
    let pid = ctl.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = kubectl::wait(&mut ctl, "machineos controller", Duration::from_secs(30))
        .expect("the controller exits on SIGTERM");
    let mut log = String::new();
    if let Some(mut e) = ctl.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut log);
    }
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(log.contains("MachineOSBuild created"), "{log}");
    let holder = k.ok(&common::LEASE_HOLDER).unwrap();
    assert_eq!(holder, "", "the Lease is released on shutdown");
    let _ = std::io::stdout().flush();
    drop(server);
}
