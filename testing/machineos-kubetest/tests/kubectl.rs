//! The test API server judged by the real `kubectl` (v1.32, `/usr/bin/kubectl`): each test
//! starts a server, writes a kubeconfig into a temporary directory and drives kubectl
//! against it — apply of machineos's CRDs and example MachineConfigs, printer columns,
//! labels, annotations, the three patch types, cascading deletes, `wait`, `get -w`,
//! `cordon`/`drain` with a PodDisruptionBudget, schema/CEL/unknown-field rejections.
//! kubectl runs with its default `--validate=strict`: it finds `fieldValidation` in
//! `/openapi/v3` and leaves validation to the server. Each test prints `SKIPPED` and
//! passes when kubectl is not installed.
//!
//! A few raw-HTTP checks at the end cover what kubectl does not send (YAML bodies,
//! `deletecollection`, `includeObject`).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::kubectl::{self, Kubectl};
use machineos_kubetest::{GroupResource, Store, WriteOptions};
use serde_json::{Value, json};

const W: WriteOptions = WriteOptions { dry_run: false };
const GROUP: &str = "machineconfiguration.openshift.io";

/// A running server and a kubeconfig for it.
struct Cluster {
    rt: tokio::runtime::Runtime,
    server: Option<Server>,
    dir: tempfile::TempDir,
    kubectl: Kubectl,
}

impl Cluster {
    /// `None` (after printing why) when kubectl is absent.
    fn start(test: &str) -> Option<Cluster> {
        if !kubectl::judge_or_skip(test) {
            return None;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(Server::start(new_store(), 0)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kc = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n\
contexts:\n- name: t\n  context:\n    cluster: t\n    user: t\n    namespace: default\n\
current-context: t\nusers:\n- name: t\n  user: {{}}\n",
            server.url()
        );
        std::fs::write(dir.path().join("kubeconfig"), kc).unwrap();
        let kubectl = Kubectl::with_kubeconfig(dir.path().join("kubeconfig"), dir.path());
        Some(Cluster {
            rt,
            server: Some(server),
            dir,
            kubectl,
        })
    }

    fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, content: &str) -> String {
        let p = self.path(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// kubectl with `args`, to spawn (stdin null, outputs piped).
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.kubectl.command(args);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs kubectl to completion (killed after a minute): (success, stdout, stderr).
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.kubectl.run(args).unwrap_or_else(|e| panic!("{e}"));
        (out.success, out.stdout, out.stderr)
    }

    /// Runs kubectl, asserting success; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }

    /// Runs kubectl, asserting failure; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(!ok, "kubectl {args:?} succeeded:\n{out}\n{err}");
        err
    }

    /// A store operation through the library API (then watchers are signalled).
    fn store<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let st = self.server().store();
        let out = f(&mut st.lock().unwrap());
        self.server().notify();
        out
    }

    fn install_crds(&self) {
        let crd_gr = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
        self.store(|s| {
            for crd in machineos_api::crds() {
                let crd = serde_json::to_value(&crd).unwrap();
                s.create(&crd_gr, None, &crd, W).unwrap();
            }
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _g = self.rt.enter();
        self.server.take();
    }
}

/// Lines of a child's pipe, read on a thread.
fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits (at most a minute) for a line containing `want`; all lines read so far.
fn wait_for_line(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.iter().any(|l| l.contains(want)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => seen.push(l),
            Err(_) => panic!("no line with {want:?} in {seen:#?}"),
        }
    }
}

fn wait_exit(child: &mut Child) -> bool {
    match kubectl::wait(child, "kubectl", Duration::from_secs(90)) {
        Ok(st) => st.success(),
        Err(e) => panic!("kubectl did not exit: {e}"),
    }
}

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
        .split_whitespace()
        .collect()
}

#[test]
fn apply_crds_and_machine_configs_then_printer_columns() {
    let Some(k) = Cluster::start("apply_crds_and_machine_configs_then_printer_columns") else {
        return;
    };
    for crd in machineos_api::crds() {
        let v = serde_json::to_value(&crd).unwrap();
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        k.write(
            &format!("crds/{name}.json"),
            &serde_json::to_string_pretty(&v).unwrap(),
        );
    }
    let crds = k.path("crds").to_string_lossy().into_owned();
    let ncrds = machineos_api::crds().len();
    let out = k.ok(&["apply", "-f", &crds]);
    assert_eq!(out.matches(" created").count(), ncrds, "{out}");
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/machineconfigs.machineconfiguration.openshift.io created"
        ),
        "{out}"
    );
    let out = k.ok(&["apply", "-f", &crds]);
    assert_eq!(out.matches(" unchanged").count(), ncrds, "{out}");

    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/machineconfigs");
    let n = std::fs::read_dir(examples).unwrap().count();
    let out = k.ok(&["apply", "-f", examples]);
    assert_eq!(out.matches(" created").count(), n, "{out}");
    // Client-side apply a second time: nothing to patch.
    let out = k.ok(&["apply", "-f", examples]);
    assert_eq!(out.matches(" unchanged").count(), n, "{out}");
    // A change: a JSON merge patch (kubectl knows no patch metadata for a custom kind).
    let chrony = std::fs::read_to_string(format!("{examples}/chrony.yaml")).unwrap();
    let changed = k.write(
        "chrony.yaml",
        &chrony.replace(
            "machineconfiguration.openshift.io/role: worker",
            "machineconfiguration.openshift.io/role: worker\n    extra: label",
        ),
    );
    let out = k.ok(&["apply", "-f", &changed]);
    assert_eq!(
        out.trim(),
        "machineconfig.machineconfiguration.openshift.io/99-worker-chrony configured"
    );
    let y = k.ok(&["get", "mc", "99-worker-chrony", "-o", "yaml"]);
    assert!(
        y.contains("extra: label") && y.contains("kind: MachineConfig"),
        "{y}"
    );
    assert!(
        y.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{y}"
    );

    // Printer columns: Name, then the CRD's columns.
    let t = k.ok(&["get", "machineconfigs"]);
    assert_eq!(
        header(&t),
        ["NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"],
        "{t}"
    );
    let r = row(&t, "99-worker-chrony");
    assert_eq!(r[1], "3.2.0", "{t}");
    assert!(r[2].ends_with('s'), "an age: {t}");

    // A pool whose status is written through the library API (as a controller would).
    k.write(
        "pool.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\n\
metadata:\n  name: worker\nspec:\n  machineConfigSelector:\n    matchLabels:\n      \
machineconfiguration.openshift.io/role: worker\n",
    );
    k.ok(&["apply", "-f", &k.path("pool.yaml").to_string_lossy()]);
    let gr = GroupResource::new(GROUP, "machineconfigpools");
    k.store(|s| {
        let mut p = s.get(&gr, None, "worker").unwrap();
        p["status"] = json!({
            "machineCount": 3, "readyMachineCount": 3, "updatedMachineCount": 2,
            "degradedMachineCount": 0, "unavailableMachineCount": 1,
            "configuration": {"name": "rendered-worker-1"},
            "conditions": [
                {"type": "Updated", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "", "message": ""},
                {"type": "Updating", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "", "message": ""},
            ],
        });
        s.update_status(&gr, None, "worker", &p, W).unwrap();
    });
    let t = k.ok(&["get", "mcp"]);
    assert_eq!(
        header(&t),
        [
            "NAME",
            "CONFIG",
            "UPDATED",
            "UPDATING",
            "DEGRADED",
            "MACHINECOUNT",
            "READYMACHINECOUNT",
            "UPDATEDMACHINECOUNT",
            "DEGRADEDMACHINECOUNT",
            "AGE"
        ],
        "{t}"
    );
    // DEGRADED has no condition: the real server sends null, kubectl prints nothing there.
    let r = row(&t, "worker");
    assert_eq!(
        r[..8],
        [
            "worker",
            "rendered-worker-1",
            "False",
            "True",
            "3",
            "3",
            "2",
            "0"
        ],
        "{t}"
    );
    let t = k.ok(&["get", "mcp", "worker", "-o", "wide"]);
    assert!(t.contains("rendered-worker-1"), "{t}");

    let r = k.ok(&["api-resources", "--api-group", GROUP]);
    assert!(r.contains("machineconfigpools") && r.contains("mcp"), "{r}");
    let e = k.ok(&["explain", "machineconfigpools"]);
    assert!(e.contains("MachineConfigPool"), "{e}");
}

#[test]
fn schema_cel_and_unknown_field_rejections_carry_the_servers_message() {
    let Some(k) = Cluster::start("schema_cel_and_unknown_field_rejections") else {
        return;
    };
    k.install_crds();
    let mosc = k.write(
        "mosc.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSConfig\n\
metadata:\n  name: infra\nspec:\n  machineConfigPool:\n    name: worker\n  imageBuilder:\n    \
imageBuilderType: Job\n  renderedImagePushSecret:\n    name: push\n  \
renderedImagePushSpec: quay.io/example/os:latest\n",
    );
    let err = k.fails(&["create", "-f", &mosc]);
    assert!(
        err.contains("The MachineOSConfig \"infra\" is invalid")
            && err
                .contains("MachineOSConfig name must match the referenced MachineConfigPool name"),
        "{err}"
    );
    let pool = k.write(
        "pool.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\n\
metadata:\n  name: bad\nspec:\n  osImageStream:\n    name: \"\"\n",
    );
    let err = k.fails(&["create", "-f", &pool]);
    assert!(
        err.contains("spec.osImageStream.name in body should be at least 1 chars long"),
        "{err}"
    );
    // Unknown fields: kubectl asks for fieldValidation=Strict, or Warn with --validate=warn.
    let mc = k.write(
        "mc.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n\
metadata:\n  name: x\nspec:\n  bogus: 1\n  config:\n    ignition:\n      version: 3.2.0\n",
    );
    let err = k.fails(&["create", "-f", &mc]);
    assert!(
        err.contains(r#"MachineConfig in version "v1" cannot be handled as a MachineConfig: strict decoding error: unknown field "spec.bogus""#),
        "{err}"
    );
    let (ok, out, err) = k.run(&["create", "-f", &mc, "--validate=warn"]);
    assert!(ok, "{out}{err}");
    assert!(
        err.contains(r#"Warning: unknown field "spec.bogus""#),
        "{err}"
    );
    let y = k.ok(&["get", "mc", "x", "-o", "yaml"]);
    assert!(!y.contains("bogus"), "pruned: {y}");
}

#[test]
fn label_annotate_patch_get_and_watch() {
    let Some(k) = Cluster::start("label_annotate_patch_get_and_watch") else {
        return;
    };
    // `create configmap` sends protobuf; no --validate=false needed any more.
    k.ok(&["create", "configmap", "c", "--from-literal=a=b"]);
    k.ok(&["label", "cm", "c", "app=web"]);
    k.ok(&["annotate", "cm", "c", "note=hello"]);
    assert_eq!(
        k.ok(&["get", "cm", "-l", "app=web", "-o", "name"]).trim(),
        "configmap/c"
    );
    k.ok(&[
        "patch",
        "cm",
        "c",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"m":"1"}}"#,
    ]);
    k.ok(&[
        "patch",
        "cm",
        "c",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"}]"#,
    ]);
    k.ok(&[
        "patch",
        "cm",
        "c",
        "--type",
        "strategic",
        "-p",
        r#"{"data":{"s":"3"}}"#,
    ]);
    let v: Value = serde_json::from_str(&k.ok(&["get", "cm", "c", "-o", "json"])).unwrap();
    assert_eq!(v["data"], json!({"a": "b", "m": "1", "j": "2", "s": "3"}));
    assert_eq!(v["metadata"]["annotations"]["note"], "hello");
    let t = k.ok(&["get", "cm", "c"]);
    assert_eq!(header(&t), ["NAME", "DATA", "AGE"]);
    assert_eq!(row(&t, "c")[1], "4");

    // A strategic merge patch on a pod's containers merges by name.
    let pod = k.write(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  \
- name: a\n    image: busybox\n  - name: b\n    image: busybox\n",
    );
    k.ok(&["apply", "-f", &pod]);
    k.ok(&[
        "patch",
        "pod",
        "p",
        "-p",
        r#"{"spec":{"containers":[{"name":"b","image":"nginx"}]}}"#,
    ]);
    let v: Value = serde_json::from_str(&k.ok(&["get", "pod", "p", "-o", "json"])).unwrap();
    assert_eq!(
        v["spec"]["containers"],
        json!([{"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx"}])
    );
    let t = k.ok(&["get", "pods"]);
    assert_eq!(header(&t), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(row(&t, "p")[1..4], ["0/2", "Pending", "0"]);

    // get -w: the current state, then changes as they happen.
    let mut child = k.command(&["get", "cm", "-w"]).spawn().unwrap();
    let rx = lines(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    wait_for_line(&rx, &mut seen, "c      4");
    let gr = GroupResource::new("", "configmaps");
    k.store(|s| {
        s.create(
            &gr,
            Some("default"),
            &json!({"metadata": {"name": "watched"}}),
            W,
        )
        .unwrap()
    });
    wait_for_line(&rx, &mut seen, "watched");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        seen.iter().filter(|l| l.starts_with("NAME")).count(),
        1,
        "one header: {seen:#?}"
    );
}

#[test]
fn delete_cascades_foreground_and_background() {
    let Some(k) = Cluster::start("delete_cascades_foreground_and_background") else {
        return;
    };
    let gr = GroupResource::new("", "configmaps");
    for policy in ["foreground", "background"] {
        let owner = format!("owner-{policy}");
        let dep = format!("dep-{policy}");
        k.store(|s| {
            let o = s
                .create(
                    &gr,
                    Some("default"),
                    &json!({"metadata": {"name": owner}}),
                    W,
                )
                .unwrap();
            s.create(
                &gr,
                Some("default"),
                &json!({"metadata": {"name": dep, "ownerReferences": [{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": owner,
                    "uid": o["metadata"]["uid"], "blockOwnerDeletion": true}]}}),
                W,
            )
            .unwrap();
        });
        let out = k.ok(&["delete", "cm", &owner, &format!("--cascade={policy}")]);
        assert!(
            out.contains(&format!("configmap \"{owner}\" deleted")),
            "{out}"
        );
        let err = k.fails(&["get", "cm", &dep]);
        assert!(
            err.contains("NotFound") || err.contains("not found"),
            "{err}"
        );
    }
    // --cascade=orphan keeps the dependent.
    k.store(|s| {
        let o = s
            .create(&gr, Some("default"), &json!({"metadata": {"name": "o"}}), W)
            .unwrap();
        s.create(
            &gr,
            Some("default"),
            &json!({"metadata": {"name": "d", "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": o["metadata"]["uid"]}]}}),
            W,
        )
        .unwrap();
    });
    k.ok(&["delete", "cm", "o", "--cascade=orphan"]);
    let v: Value = serde_json::from_str(&k.ok(&["get", "cm", "d", "-o", "json"])).unwrap();
    assert!(v["metadata"].get("ownerReferences").is_none(), "{v}");
    // delete --all and -l.
    k.ok(&["label", "cm", "d", "x=y"]);
    k.ok(&["delete", "cm", "-l", "x=y"]);
    k.fails(&["get", "cm", "d"]);
    k.ok(&["delete", "cm", "--all"]);
    assert_eq!(k.ok(&["get", "cm", "-o", "name"]).trim(), "");
}

#[test]
fn wait_for_a_condition_set_while_kubectl_waits() {
    let Some(k) = Cluster::start("wait_for_a_condition_set_while_kubectl_waits") else {
        return;
    };
    k.install_crds();
    let gr = GroupResource::new(GROUP, "machineconfigpools");
    k.store(|s| {
        s.create(
            &gr,
            None,
            &json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineConfigPool",
                "metadata": {"name": "worker"}, "spec": {}}),
            W,
        )
        .unwrap()
    });
    let mut child = k
        .command(&[
            "wait",
            "mcp/worker",
            "--for=condition=Updated",
            "--timeout=60s",
        ])
        .spawn()
        .unwrap();
    let rx = lines(child.stdout.take().unwrap());
    // kubectl is waiting (it cannot have seen the condition: it is not set yet).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "kubectl wait returned early"
    );
    k.store(|s| {
        let mut p = s.get(&gr, None, "worker").unwrap();
        p["status"] = json!({"conditions": [{"type": "Updated", "status": "True",
            "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "", "message": ""}]});
        s.update_status(&gr, None, "worker", &p, W).unwrap();
    });
    assert!(wait_exit(&mut child), "kubectl wait failed");
    let mut seen = Vec::new();
    wait_for_line(&rx, &mut seen, "condition met");
}

fn ready_pod(name: &str, node: &str, ip: &str) -> (Value, Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}});
    let status = json!({"phase": "Running", "podIP": ip,
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "busybox",
            "imageID": "", "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}]});
    (pod, status)
}

#[test]
fn cordon_and_drain_with_a_disruption_budget() {
    let Some(k) = Cluster::start("cordon_and_drain_with_a_disruption_budget") else {
        return;
    };
    let nodes = GroupResource::new("", "nodes");
    let pods = GroupResource::new("", "pods");
    let pdbs = GroupResource::new("policy", "poddisruptionbudgets");
    k.store(|s| {
        s.create(
            &nodes,
            None,
            &json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                    "nodeInfo": {"kubeletVersion": "v1.32.0"}}}),
            W,
        )
        .unwrap();
        for (name, ip) in [("p1", "10.1.0.1"), ("p2", "10.1.0.2")] {
            let (pod, status) = ready_pod(name, "n1", ip);
            let mut p = s.create(&pods, Some("default"), &pod, W).unwrap();
            p["status"] = status;
            s.update_status(&pods, Some("default"), name, &p, W)
                .unwrap();
        }
        s.create(
            &pdbs,
            Some("default"),
            &json!({"metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
            W,
        )
        .unwrap();
    });
    let t = k.ok(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        header(&t),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ],
        "{t}"
    );
    let r = row(&t, "p1");
    assert_eq!(
        (r[1], r[2], r[5], r[6]),
        ("1/1", "Running", "10.1.0.1", "n1"),
        "{t}"
    );

    k.ok(&["cordon", "n1"]);
    let t = k.ok(&["get", "nodes", "-o", "wide"]);
    assert_eq!(
        header(&t)[..7],
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP"
        ],
        "{t}"
    );
    let r = row(&t, "n1");
    assert_eq!(
        (r[1], r[2], r[4], r[5]),
        ("Ready,SchedulingDisabled", "worker", "v1.32.0", "10.0.0.1"),
        "{t}"
    );

    // drain: one eviction fits the budget, the other is refused (429) until the budget
    // is relaxed while kubectl retries.
    let mut child = k
        .command(&[
            "drain",
            "n1",
            "--force",
            "--ignore-daemonsets",
            "--timeout=80s",
        ])
        .spawn()
        .unwrap();
    let err_rx = lines(child.stderr.take().unwrap());
    let out_rx = lines(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    wait_for_line(
        &err_rx,
        &mut seen,
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    let pdb = k.store(|s| s.get(&pdbs, Some("default"), "web").unwrap());
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
    assert_eq!(pdb["status"]["desiredHealthy"], 1, "{pdb}");
    let t = k.ok(&["get", "pdb"]);
    assert_eq!(
        header(&t),
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ],
        "{t}"
    );
    assert_eq!(row(&t, "web")[1..4], ["1", "N/A", "0"], "{t}");
    let remaining = k.ok(&["get", "pods", "-o", "name"]);
    assert_eq!(remaining.lines().count(), 1, "one pod evicted: {remaining}");
    k.ok(&[
        "patch",
        "pdb",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"minAvailable":0}}"#,
    ]);
    assert!(wait_exit(&mut child), "drain failed: {seen:#?}");
    let mut out = Vec::new();
    wait_for_line(&out_rx, &mut out, "node/n1 drained");
    assert_eq!(k.ok(&["get", "pods", "-o", "name"]).trim(), "");
    k.ok(&["uncordon", "n1"]);
    let t = k.ok(&["get", "nodes"]);
    assert_eq!(row(&t, "n1")[1], "Ready", "{t}");
}

// ---- Raw HTTP: what kubectl does not send.

async fn send(rb: reqwest::RequestBuilder) -> (u16, Value, reqwest::header::HeaderMap) {
    let r = rb.send().await.unwrap();
    let code = r.status().as_u16();
    let h = r.headers().clone();
    let b = r.bytes().await.unwrap();
    (code, serde_json::from_slice(&b).unwrap_or(Value::Null), h)
}

#[tokio::test(flavor = "multi_thread")]
async fn yaml_bodies_tables_deletecollection_and_eviction_over_http() {
    let s = Server::start(new_store(), 0).await.unwrap();
    let c = reqwest::Client::new();
    let base = format!("{}/api/v1/namespaces/default/configmaps", s.url());
    let yaml = |b: &str| {
        c.post(&base)
            .header("content-type", "application/yaml")
            .body(b.to_string())
    };
    for n in ["a", "b", "c"] {
        let (code, v, _) = send(yaml(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\n  labels:\n    grp: {}\ndata:\n  k: v\n",
            if n == "c" { "two" } else { "one" }
        )))
        .await;
        assert_eq!(code, 201, "{v}");
    }
    // Malformed YAML and JSON: 400 in the decoders' words.
    let (code, v, _) = send(yaml("a: b: c\n")).await;
    assert_eq!(code, 400);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("error converting YAML to JSON: yaml: "),
        "{v}"
    );
    let (code, v, _) = send(
        c.post(&base)
            .header("content-type", "application/json")
            .body("{x"),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("couldn't get version/kind; json parse error: "),
        "{v}"
    );
    // The wrong apiVersion/kind for the URL.
    let (code, v, _) = send(yaml(
        "apiVersion: batch/v1\nkind: ConfigMap\nmetadata:\n  name: z\n",
    ))
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        v["message"],
        "the API version in the data (batch/v1) does not match the expected API version (v1)"
    );
    let (code, v, _) = send(yaml("apiVersion: v1\nkind: Secret\nmetadata:\n  name: z\n")).await;
    assert_eq!(code, 400, "{v}");
    // A name that is not a DNS subdomain: 422.
    let (code, v, _) = send(yaml("metadata:\n  name: Not_A_Name\n")).await;
    assert_eq!((code, v["reason"].as_str()), (422, Some("Invalid")));

    // Table with each includeObject.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    for (inc, want) in [
        ("", Some("PartialObjectMetadata")),
        ("&includeObject=Object", Some("ConfigMap")),
        ("&includeObject=None", None),
    ] {
        let (code, v, _) = send(
            c.get(format!("{base}?labelSelector=grp%3Done{inc}"))
                .header("accept", table),
        )
        .await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["kind"], "Table");
        assert_eq!(v["rows"].as_array().unwrap().len(), 2);
        assert_eq!(v["rows"][0]["cells"][0], "a");
        assert_eq!(v["rows"][0]["object"]["kind"].as_str(), want, "{v}");
    }
    let (_, v, _) = send(c.get(format!("{base}/a")).header("accept", table)).await;
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    assert_eq!(v["columnDefinitions"][1]["name"], "Data");

    // deletecollection with a label selector.
    let (code, v, _) = send(c.delete(format!("{base}?labelSelector=grp%3Done"))).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["kind"], "ConfigMapList");
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    let (_, v, _) = send(c.get(&base)).await;
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c"]);

    // Eviction in JSON: a pod without budget goes; a wrong name is a 400.
    let pods = format!("{}/api/v1/namespaces/default/pods", s.url());
    let (code, _, _) = send(
        c.post(&pods)
            .header("content-type", "application/json")
            .body(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}).to_string()),
    )
    .await;
    assert_eq!(code, 201);
    let ev = |name: &str| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})
            .to_string()
    };
    let (code, _, _) = send(
        c.post(format!("{pods}/p/eviction"))
            .header("content-type", "application/json")
            .body(ev("q")),
    )
    .await;
    assert_eq!(code, 400);
    let (code, v, _) = send(
        c.post(format!("{pods}/p/eviction"))
            .header("content-type", "application/json")
            .body(ev("p")),
    )
    .await;
    assert_eq!((code, v["status"].as_str()), (201, Some("Success")), "{v}");
    let (code, _, _) = send(c.get(format!("{pods}/p"))).await;
    assert_eq!(code, 404);

    // /openapi/v2 is not served; v3 is.
    let (code, _, _) = send(c.get(format!("{}/openapi/v2", s.url()))).await;
    assert_eq!(code, 404);
    let (code, v, _) = send(c.get(format!("{}/openapi/v3", s.url()))).await;
    assert_eq!(code, 200);
    let url = v["paths"]["apis/policy/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, v, _) = send(c.get(format!("{}{url}", s.url()))).await;
    assert_eq!(code, 200);
    assert!(
        v["paths"]["/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"]["patch"]
            .is_object()
    );
}
