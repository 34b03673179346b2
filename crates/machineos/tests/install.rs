//! The install steps a newcomer follows, run as written: the one `sh` block that README.md,
//! deploy/README.md and docs/cluster.md each carry after the `<!-- install steps … -->`
//! marker must be the same in all three, and this test runs it, command by command, with
//! the real `kubectl` against the test API server (TLS, admin token), from a copy of the
//! repository's `deploy/` and `examples/` directories.
//!
//! What stands in for the cluster and the internet, and nothing else:
//! * **The registry**: one TLS + htpasswd registry on loopback in place of both
//!   `registry.example.com` and `quay.io` (the names substituted in the commands, and in the
//!   copied sample MachineOSConfig — the "edit its renderedImagePushSpec first" step);
//!   `USER`/`PASSWORD` its credentials; `quay.io/fedora/fedora-coreos:stable` a synthetic
//!   Fedora CoreOS-shaped base pushed to that path. `NODE` is the cluster's one worker.
//! * **The Deployment controller and kubelet**: once `kubectl apply -k deploy/` has stored
//!   the Deployment, its two replicas run as `machineos controller` processes with the pod
//!   spec's own arguments and environment, under the ServiceAccount token of the pod spec's
//!   `serviceAccountName` (the API server authorizes it by the Roles `deploy/` just
//!   installed), only `--cache-dir`, `--listen` (free ports) and `--ca-file` (the test
//!   registry's CA) changed; when both answer `/readyz` the Deployment's status says so,
//!   as the Deployment controller would, and `kubectl rollout status` returns.
//!
//! * **The DaemonSet controller and kubelet**: the agent's pod runs on the labelled node (its
//!   required node affinity checked) as a `machineos agent` process with the pod spec's own
//!   arguments and environment, under its ServiceAccount's token, on the simulated machine
//!   (`--host fake`) in place of the node's host.
//!
//! Then what the newcomer should see: `kubectl wait` returns, the MachineOSConfig records the
//! image by digest in the test registry, the build Succeeded, the labelled node is targeted
//! at that image and its agent moves it there (`currentImage` the image, state `Done`,
//! schedulable), one replica holds the Lease, and no request of the three ServiceAccounts
//! was refused.
//!
//! Prints a transcript (run with `--nocapture` to see it).

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use machineos_image::Platform;
use machineos_image::layout::Layout;
use machineos_kubetest::hooks;
use machineos_kubetest::http::Server;
use machineos_kubetest::kubectl::{self, Kubectl};
use machineos_testkit::{CopyOptions, RegistryOptions, TestRegistry, skopeo_copy};
use serde_json::Value;

/// The line before the block in each document.
const MARKER: &str = "<!-- install steps:";

/// The documents that carry the block.
const DOCUMENTS: [&str; 3] = ["README.md", "deploy/README.md", "docs/cluster.md"];

/// The node the cluster has.
const NODE: &str = "worker-0";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `sh` block after the marker in `doc` (the text between its fences).
fn steps_in(doc: &str, name: &str) -> String {
    let at = doc
        .find(MARKER)
        .unwrap_or_else(|| panic!("{name}: no `{MARKER}` marker"));
    let rest = &doc[at..];
    let open = rest
        .find("\n```sh\n")
        .unwrap_or_else(|| panic!("{name}: no ```sh block after the marker"));
    assert!(
        !rest[..open].trim_end().contains('\n'),
        "{name}: the block must follow the marker line directly"
    );
    let body = &rest[open + "\n```sh\n".len()..];
    let close = body
        .find("\n```")
        .unwrap_or_else(|| panic!("{name}: the block is not closed"));
    body[..close + 1].to_owned()
}

/// The block's commands: backslash continuations joined, blank lines dropped.
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            continue;
        }
        current.push_str(line);
        if !current.trim().is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.clear();
    }
    assert!(current.trim().is_empty(), "a continuation ends the block");
    out
}

/// The stand-ins: what the test puts where the steps name the world.
fn substitute(command: &str, reg: &str) -> String {
    command
        .replace("registry.example.com", reg)
        .replace("quay.io", reg)
        .replace("=USER", "=builder")
        .replace("=PASSWORD", "=pw")
        .replace(" NODE ", &format!(" {NODE} "))
}

fn say(line: &str) {
    println!("{line}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.1 GET's status line, or empty when nothing answers.
fn http_status(addr: &str, path: &str) -> String {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or_default().to_owned()
}

/// One replica of the Deployment, running.
struct Replica {
    name: String,
    listen: String,
    child: Child,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `$(VAR)` references expanded as the kubelet expands them in a container's arguments.
fn expand(arg: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = arg.to_owned();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    out
}

/// A container's environment as the kubelet gives it to pod `pod_name` on `NODE`: values,
/// and the downward API fields the manifests use.
fn container_env(container: &Value, pod_name: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for e in container["env"].as_array().into_iter().flatten() {
        let key = e["name"].as_str().unwrap().to_owned();
        let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.name") => pod_name.to_owned(),
            Some("metadata.namespace") => "machineos".to_owned(),
            Some("spec.nodeName") => NODE.to_owned(),
            Some(other) => panic!("a fieldRef this test does not fill: {other}"),
            None => e["value"].as_str().unwrap_or_default().to_owned(),
        };
        env.insert(key, value);
    }
    env
}

/// A kubeconfig with ServiceAccount `sa`'s token (of namespace `machineos`).
fn service_account_kubeconfig(server: &Server, tmp: &Path, sa: &str) -> PathBuf {
    let path = tmp.join(format!("{sa}.kubeconfig"));
    std::fs::write(
        &path,
        server
            .service_account_kubeconfig("machineos", sa)
            .expect("a ServiceAccount kubeconfig"),
    )
    .unwrap();
    path
}

/// Pod `name`'s container, run as `machineos ARGV` with `env` and `kubeconfig`, its log in
/// `<tmp>/<name>.log`.
fn spawn_pod(
    tmp: &Path,
    name: &str,
    argv: &[String],
    env: &BTreeMap<String, String>,
    kubeconfig: &Path,
) -> Child {
    say(&format!("[pod {name}] machineos {}", argv.join(" ")));
    let log = std::fs::File::create(tmp.join(format!("{name}.log"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_machineos"))
        .args(argv)
        .envs(env)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", tmp.join("home"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Act as the Deployment controller and the kubelet for `deployment/machineos-controller`:
/// run its replicas as processes with its pod spec, mark it available when they are ready.
fn run_deployment(k: &Kubectl, server: &Server, tmp: &Path, ca: &Path) -> Vec<Replica> {
    let d: Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "deployment",
            "machineos-controller",
            "-n",
            "machineos",
            "-o",
            "json",
        ])
        .expect("the Deployment is stored"),
    )
    .unwrap();
    let replicas = d["spec"]["replicas"].as_u64().expect("spec.replicas");
    let pod = &d["spec"]["template"]["spec"];
    let sa = pod["serviceAccountName"]
        .as_str()
        .expect("serviceAccountName");
    let container = &pod["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("controller"));

    let kubeconfig = service_account_kubeconfig(server, tmp, sa);

    let mut running = Vec::new();
    for i in 0..replicas {
        let name = format!("machineos-controller-7d4b9c-{i}");
        let env = container_env(container, &name);
        let listen = format!("127.0.0.1:{}", free_port());
        let mut argv: Vec<String> = args.iter().map(|a| expand(a, &env)).collect();
        for (flag, value) in [
            (
                "--cache-dir",
                tmp.join(format!("cache-{i}")).display().to_string(),
            ),
            ("--listen", listen.clone()),
        ] {
            let at = argv
                .iter()
                .position(|a| a == flag)
                .unwrap_or_else(|| panic!("the Deployment passes {flag}"));
            argv[at + 1] = value;
        }
        argv.push("--ca-file".to_owned());
        argv.push(ca.display().to_string());
        let child = spawn_pod(tmp, &name, &argv, &env, &kubeconfig);
        running.push(Replica {
            name,
            listen,
            child,
        });
    }

    // The readiness probe, then the status the Deployment controller would write.
    let started = Instant::now();
    for r in &running {
        while !http_status(&r.listen, "/readyz").contains(" 200") {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{} never became ready; its log:\n{}",
                r.name,
                std::fs::read_to_string(tmp.join(format!("{}.log", r.name))).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let generation = d["metadata"]["generation"].as_u64().unwrap_or(1);
    let status = serde_json::json!({"status": {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [{
            "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability."
        }, {
            "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
            "message": "ReplicaSet \"machineos-controller-7d4b9c\" has successfully progressed."
        }]
    }});
    k.ok(&[
        "patch",
        "deployment",
        "machineos-controller",
        "-n",
        "machineos",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ])
    .expect("the Deployment's status");
    running
}

/// Act as the DaemonSet controller and the kubelet for `daemonset/machineos-agent` on
/// `NODE`: the node must match the pod template's required node affinity; the agent runs as
/// a process with the pod spec's own arguments and environment, under the ServiceAccount
/// token of its `serviceAccountName`, on the simulated machine (`--host fake`: its reboots
/// happen in process) instead of the node's real host.
fn run_agent(k: &Kubectl, server: &Server, tmp: &Path) -> Replica {
    let ds: Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "daemonset",
            "machineos-agent",
            "-n",
            "machineos",
            "-o",
            "json",
        ])
        .expect("the DaemonSet is stored"),
    )
    .unwrap();
    let pod = &ds["spec"]["template"]["spec"];
    let node: Value =
        serde_json::from_str(&k.ok(&["get", "node", NODE, "-o", "json"]).unwrap()).unwrap();
    let labels = &node["metadata"]["labels"];
    let terms = pod
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
        .expect("the agent's required node affinity");
    let matches = terms.iter().any(|t| {
        t["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| {
                assert_eq!(
                    e["operator"], "In",
                    "an operator this test does not evaluate"
                );
                let have = labels[e["key"].as_str().unwrap()].as_str();
                e["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v.as_str() == have)
            })
    });
    assert!(matches, "{NODE} (labels {labels}) gets no agent pod");
    let sa = pod["serviceAccountName"]
        .as_str()
        .expect("serviceAccountName");
    let container = &pod["containers"][0];
    let name = format!("machineos-agent-{NODE}");
    let env = container_env(container, &name);
    let mut argv: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| expand(a.as_str().unwrap(), &env))
        .collect();
    assert_eq!(argv.first().map(String::as_str), Some("agent"));
    argv.push("--host".to_owned());
    argv.push("fake".to_owned());
    let kubeconfig = service_account_kubeconfig(server, tmp, sa);
    let child = spawn_pod(tmp, &name, &argv, &env, &kubeconfig);
    Replica {
        name,
        listen: String::new(),
        child,
    }
}

#[test]
fn the_install_steps_are_one_block_and_work_as_written() {
    let root = repo_root();
    let blocks: Vec<(&str, String)> = DOCUMENTS
        .iter()
        .map(|d| {
            let text = std::fs::read_to_string(root.join(d)).unwrap();
            (*d, steps_in(&text, d))
        })
        .collect();
    for (name, block) in &blocks[1..] {
        assert_eq!(
            block, &blocks[0].1,
            "{name}'s install steps differ from {}'s: keep the three identical",
            blocks[0].0
        );
    }
    let steps = commands(&blocks[0].1);
    assert!(
        steps[0].starts_with("kubectl apply -k deploy/"),
        "{steps:?}"
    );

    if !common::kubectl_or_skip("running the install steps") {
        return;
    }

    let tmp = tempfile::tempdir().unwrap();
    let common::ApiServer {
        rt: _rt,
        server,
        kubeconfig,
        kubectl: k,
    } = common::start(tmp.path(), Duration::from_secs(60));
    let home = tmp.path().join("home");

    // The world the steps name.
    let reg = TestRegistry::start(RegistryOptions::new().with_tls().with_auth("builder", "pw"))
        .expect("registry");
    let layout = tmp.path().join("base-layout");
    let l = Layout::create(&layout).expect("layout");
    let spec = machineos_synth::SynthSpec::example()
        .with_platform("linux/amd64".parse::<Platform>().expect("platform"));
    let desc = machineos_synth::write_image(&l, &spec).expect("synth");
    l.set_tag("base", &desc).expect("tag");
    skopeo_copy(
        &format!("oci:{}:base", layout.display()),
        &format!("docker://{}/fedora/fedora-coreos:stable", reg.host()),
        &CopyOptions::new().dest_registry(&reg),
    )
    .expect("push base");

    // The cluster's one worker node, Ready.
    let node = tmp.path().join("node.yaml");
    std::fs::write(
        &node,
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n  labels:\n    \
             node-role.kubernetes.io/worker: \"\"\n    kubernetes.io/arch: amd64\n    \
             kubernetes.io/os: linux\n"
        ),
    )
    .unwrap();
    k.ok(&["apply", "-f", node.to_str().unwrap()])
        .expect("node");
    hooks::set_node_ready(server.shared(), NODE, true).expect("node Ready");

    // The repository's directories the steps read, the push spec edited as told.
    let work = tmp.path().join("repo");
    copy_dir(&root.join("deploy"), &work.join("deploy"));
    copy_dir(&root.join("examples"), &work.join("examples"));
    let sample = work.join("deploy/samples/machineosconfig.yaml");
    let text = std::fs::read_to_string(&sample).unwrap();
    assert!(text.contains("registry.example.com/"), "{text}");
    std::fs::write(&sample, substitute(&text, &reg.host())).unwrap();

    let ca = reg.ca_path().expect("CA").to_path_buf();
    let mut replicas = Vec::new();
    for step in &steps {
        let command = substitute(step, &reg.host());
        say(&format!("$ {command}"));
        let mut cmd = Command::new("bash");
        cmd.args(["-euo", "pipefail", "-c", &command])
            .current_dir(&work)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", &home)
            .env("PATH", {
                // `kubectl` is the one the tests are written against.
                let bin = kubectl::path();
                let dir = bin.parent().unwrap_or(Path::new("/usr/bin")).to_path_buf();
                let mut paths = vec![dir];
                paths.extend(std::env::split_paths(
                    &std::env::var_os("PATH").unwrap_or_default(),
                ));
                std::env::join_paths(paths).unwrap()
            });
        let out = kubectl::run(&mut cmd, Duration::from_secs(180))
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        print!("{}", out.stdout);
        eprint!("{}", out.stderr);
        assert!(
            out.success,
            "the step failed: {command}\n{}{}",
            out.stdout, out.stderr
        );
        if step.starts_with("kubectl apply -k deploy/") {
            replicas = run_deployment(&k, &server, tmp.path(), &ca);
        }
    }
    assert_eq!(replicas.len(), 2, "the Deployment's two replicas ran");

    // What the newcomer should now see.
    let image = k
        .ok(&[
            "get",
            "machineosconfig",
            "worker",
            "-o",
            "jsonpath={.status.currentImagePullSpec}",
        ])
        .unwrap();
    assert!(
        image.starts_with(&format!("{}/machineos/worker@sha256:", reg.host())),
        "{image}"
    );
    let phases = k
        .ok(&[
            "get",
            "machineosbuilds",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Succeeded\")].status}{\"\\n\"}{end}",
        ])
        .unwrap();
    assert_eq!(phases.trim(), "True", "one build, Succeeded");
    let started = Instant::now();
    loop {
        let desired = k
            .ok(&[
                "get",
                "node",
                NODE,
                "-o",
                "jsonpath={.metadata.annotations.machineconfiguration\\.openshift\\.io/desiredImage}",
            ])
            .unwrap();
        if desired == image {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{NODE} is not targeted at {image} (desiredImage {desired:?})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The agent, as its DaemonSet runs it, moves the node onto the image.
    let agent = run_agent(&k, &server, tmp.path());
    let started = Instant::now();
    loop {
        let current = k
            .ok(&[
                "get",
                "node",
                NODE,
                "-o",
                "jsonpath={.metadata.annotations.machineconfiguration\\.openshift\\.io/currentImage} {.metadata.annotations.machineconfiguration\\.openshift\\.io/state} {.spec.unschedulable}",
            ])
            .unwrap();
        if current.trim() == format!("{image} Done")
            || current.trim() == format!("{image} Done false")
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{NODE} did not reach {image} (currentImage, state, unschedulable: {current:?}); the agent's log:\n{}",
            std::fs::read_to_string(tmp.path().join(format!("{}.log", agent.name)))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The image's changes against its base, recorded by the leader as its ServiceAccount.
    let started = Instant::now();
    loop {
        let changes = k
            .ok(&[
                "get",
                "machineosimages",
                "-o",
                "jsonpath={.items[0].status.changes.pathClass} {.items[0].status.changes.from}",
            ])
            .unwrap_or_default();
        if changes.contains("@sha256:") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no status.changes on the MachineOSImage: {changes:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let holder = k.ok(&common::LEASE_HOLDER).unwrap();
    assert!(
        replicas.iter().any(|r| r.name == holder),
        "the Lease holder {holder:?} is one of the replicas"
    );
    // The simulated machine plays the kubelet too (the Node's Ready condition around its
    // reboot) with the agent's credentials; RBAC rightly refuses that write, which a real
    // agent never makes. Nothing else may be refused.
    let denied: Vec<String> = server
        .denied()
        .into_iter()
        .filter(|d| {
            !(d.contains("system:serviceaccount:machineos:machineos-agent")
                && d.contains("nodes/status"))
        })
        .collect();
    assert_eq!(denied, Vec::<String>::new(), "no request was refused");
    let _ = std::io::stdout().flush();
    drop(agent);
    drop(replicas);
    drop(server);
}
