//! `deploy/` — the kustomize installation of `machineos controller` — kept true:
//!
//! * `deploy/crds.yaml` is byte for byte what `machineos crds` prints (the failure says how
//!   to regenerate it);
//! * `kubectl kustomize deploy/` renders, and every rendered document deserializes into its
//!   k8s-openapi type with no unknown field and re-serializes to the same value, so a
//!   misspelt or misplaced field fails here rather than on a cluster;
//! * the RBAC grants exactly the table below — no wildcard, nothing extra — bound to the
//!   controller's ServiceAccount;
//! * the Deployment: two leader-elected replicas, probes, the cache volume at `--cache-dir`,
//!   the downward-API env the flags use, the hardened securityContext; every namespaced
//!   object is in `machineos`; the PDB and Service select its pods;
//! * `components/pvc-cache` swaps the cache's emptyDir for its PVC, and an `images:`
//!   override changes the image (what deploy/README.md tells users to do);
//! * the samples parse into their types, the MachineOSConfig validates against its CRD with
//!   nothing pruned, and both resolve with the controller's own configuration logic
//!   (`machineos_build_lifecycle::config::resolve`) to the native builder.
//!
//! Simplification: the kustomize checks need `kubectl` (kustomize built in) on `PATH`, and
//! the Component check kubectl 1.21+ (kustomize v4+); without them they print `SKIPPED` and
//! why, and pass — except under `CI` (which has kubectl 1.32), where they fail. The CRD and
//! sample checks need no kubectl.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, PodSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use machineos_build_lifecycle::config::resolve;
use machineos_build_lifecycle::{
    Backend, LegacyOptIn, MachineOSConfigObserved, Observed, OptIn, Pool, PoolObserved,
    SecretState, vocab,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const NS: &str = "machineos";
const NAME: &str = "machineos-controller";
const MCO: &str = "machineconfiguration.openshift.io";
const IMAGE: &str = "ghcr.io/machineos/machineos:latest";
const REGENERATE: &str = "cargo run -p machineos -- crds > deploy/crds.yaml";

/// The ClusterRole's grants: (apiGroup, resource, verbs). Each verb is one the controller
/// uses (the RBAC-enforced controller test lists the grants it never used).
const CLUSTER_RULES: &[(&str, &str, &[&str])] = &[
    (MCO, "machineconfigs", &["list", "watch", "create"]),
    (
        MCO,
        "machineconfigpools",
        &["get", "list", "watch", "patch"],
    ),
    (MCO, "machineosconfigs", &["get", "list", "watch", "patch"]),
    (
        MCO,
        "machineosbuilds",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        MCO,
        "machineosimages",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (MCO, "machineimages", &["get", "list", "watch"]),
    (MCO, "machineconfigpools/status", &["update"]),
    (MCO, "machineosconfigs/status", &["update"]),
    (MCO, "machineosbuilds/status", &["update"]),
    (MCO, "machineosimages/status", &["update"]),
    (MCO, "machineimages/status", &["update"]),
    // OwnerReferencesPermissionEnforcement: blockOwnerDeletion on the owner's finalizers.
    (MCO, "machineconfigpools/finalizers", &["update"]),
    (MCO, "machineosconfigs/finalizers", &["update"]),
    (MCO, "machineosbuilds/finalizers", &["update"]),
    (
        MCO,
        "machineconfignodes",
        &["list", "watch", "create", "patch"],
    ),
    ("", "nodes", &["list", "watch", "patch"]),
    (
        "operator.openshift.io",
        "machineconfigurations:cluster",
        &["get"],
    ),
    (
        "operator.openshift.io",
        "machineconfigurations/status:cluster",
        &["patch"],
    ),
    ("events.k8s.io", "events", &["create", "patch"]),
];

/// The agent's ClusterRole (deploy/agent.yaml): (apiGroup, resource, verbs).
const AGENT_CLUSTER_RULES: &[(&str, &str, &[&str])] = &[
    ("", "nodes", &["get", "list", "watch", "patch"]),
    ("", "pods", &["list"]),
    ("", "pods/eviction", &["create"]),
    ("events.k8s.io", "events", &["create", "patch"]),
    (MCO, "machineconfignodes", &["get"]),
    (MCO, "machineconfignodes/status", &["patch"]),
    (MCO, "machineconfigs", &["get"]),
];

/// The agent's Role in the controller's namespace: the default pull Secret and the
/// controller's copy of the MachineImages' pull Secrets, by name (`resource:name` is a rule
/// with `resourceNames`) — never the push Secret.
const AGENT_NAMESPACED_RULES: &[(&str, &str, &[&str])] = &[
    ("", "secrets:pull-secret", &["get"]),
    ("", "secrets:machineos-node-pull-secrets", &["get"]),
];

/// The Role's grants in the controller's namespace: (apiGroup, resource, verbs).
const NAMESPACED_RULES: &[(&str, &str, &[&str])] = &[
    ("", "configmaps", &["list", "watch", "create", "delete"]),
    ("", "secrets", &["list", "watch", "create", "delete"]),
    // The agents' copy of the MachineImages' pull Secrets, kept current.
    ("", "secrets:machineos-node-pull-secrets", &["update"]),
    ("", "pods", &["list", "watch"]),
    ("batch", "jobs", &["list", "watch", "create", "delete"]),
    (
        "build.openshift.io",
        "builds",
        &["list", "watch", "create", "delete"],
    ),
    (
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    ),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

fn deploy_dir() -> PathBuf {
    repo_root().join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------
// Strict typed parsing

/// `doc` as a `T`, or why not: a field `T` does not know (serde_ignored reports every value
/// the deserializer skipped), or a value that does not survive `T` (re-serializing gives
/// something else, e.g. a `null` dropped or a number turned string).
fn strict<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<T, String> {
    strict_but(doc, &[])
}

/// [`strict`], except that the top-level fields `skipped` may be skipped by the
/// deserializer: kube-derive's root types skip `apiVersion` and `kind` when reading and
/// write their own when serializing, so the round trip still checks them.
fn strict_but<T: DeserializeOwned + Serialize>(doc: &Value, skipped: &[&str]) -> Result<T, String> {
    let mut ignored = Vec::new();
    // serde_ignored writes an `Option`'s level as `?`.
    let t: T = serde_ignored::deserialize(doc.clone(), |path| {
        ignored.push(path.to_string().replace(".?", ""))
    })
    .map_err(|e| e.to_string())?;
    ignored.retain(|p| !skipped.contains(&p.as_str()));
    if !ignored.is_empty() {
        return Err(format!("unknown field(s): {}", ignored.join(", ")));
    }
    let back = serde_json::to_value(&t).map_err(|e| e.to_string())?;
    match first_difference(doc, &back, "") {
        None => Ok(t),
        Some(path) => Err(format!(
            "{path} does not survive deserialization (written {}, read back as {})",
            at(doc, &path),
            at(&back, &path)
        )),
    }
}

/// The JSON pointer of the first place `a` and `b` differ.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => first_difference(v, w, &p),
                    _ => Some(p),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(v, w, &format!("{path}/{i}"))),
        // JSON numbers by value: a schema's `minimum: 0` is an f64, `0.0`, once typed.
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(path.to_owned()),
    }
}

fn at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .map_or_else(|| "nothing".to_owned(), Value::to_string)
}

fn describe(doc: &Value) -> String {
    format!(
        "{} {}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The rendered installation, each document in its type.
#[derive(Default)]
struct Render {
    docs: Vec<Value>,
    namespaces: Vec<Namespace>,
    crds: Vec<CustomResourceDefinition>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    deployments: Vec<Deployment>,
    daemon_sets: Vec<DaemonSet>,
    pdbs: Vec<PodDisruptionBudget>,
    services: Vec<Service>,
    pvcs: Vec<PersistentVolumeClaim>,
    config_maps: Vec<ConfigMap>,
    /// OpenShift's SecurityContextConstraints (no k8s-openapi type: kept as JSON).
    sccs: Vec<Value>,
}

/// Kinds with no namespace.
const CLUSTER_SCOPED: [&str; 5] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "SecurityContextConstraints",
];

impl Render {
    fn parse(yaml: &str) -> Result<Render, String> {
        let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| e.to_string())?;
        let mut r = Render::default();
        for doc in &docs {
            let api = doc["apiVersion"].as_str().unwrap_or("");
            let kind = doc["kind"].as_str().unwrap_or("");
            let bad = |e: String| format!("{}: {e}", describe(doc));
            match (api, kind) {
                ("v1", "Namespace") => r.namespaces.push(strict(doc).map_err(bad)?),
                ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                    r.crds.push(strict(doc).map_err(bad)?)
                }
                ("v1", "ServiceAccount") => r.service_accounts.push(strict(doc).map_err(bad)?),
                ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                    r.cluster_roles.push(strict(doc).map_err(bad)?)
                }
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                    r.cluster_role_bindings.push(strict(doc).map_err(bad)?)
                }
                ("rbac.authorization.k8s.io/v1", "Role") => r.roles.push(strict(doc).map_err(bad)?),
                ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                    r.role_bindings.push(strict(doc).map_err(bad)?)
                }
                ("apps/v1", "Deployment") => r.deployments.push(strict(doc).map_err(bad)?),
                ("apps/v1", "DaemonSet") => r.daemon_sets.push(strict(doc).map_err(bad)?),
                ("policy/v1", "PodDisruptionBudget") => r.pdbs.push(strict(doc).map_err(bad)?),
                ("v1", "Service") => r.services.push(strict(doc).map_err(bad)?),
                ("v1", "PersistentVolumeClaim") => r.pvcs.push(strict(doc).map_err(bad)?),
                ("v1", "ConfigMap") => r.config_maps.push(strict(doc).map_err(bad)?),
                ("security.openshift.io/v1", "SecurityContextConstraints") => {
                    r.sccs.push(doc.clone())
                }
                _ => {
                    return Err(format!(
                        "{}: {api} {kind} is not a kind this test checks; add it here",
                        describe(doc)
                    ));
                }
            }
        }
        r.docs = docs;
        Ok(r)
    }

    fn deployment(&self) -> &Deployment {
        assert_eq!(self.deployments.len(), 1, "one Deployment");
        &self.deployments[0]
    }
}

// ---------------------------------------------------------------------------------------
// kubectl kustomize

/// `kubectl kustomize DIR`'s output; `None` (with a note) when kubectl is not installed.
fn kustomize(dir: &Path) -> Option<String> {
    let out = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var_os("CI").is_none(),
                "kubectl is required under CI: `kubectl kustomize {}` must be checked",
                dir.display()
            );
            eprintln!(
                "SKIPPED: kubectl is not on PATH; `kubectl kustomize {}` was not checked",
                dir.display()
            );
            return None;
        }
        Err(e) => panic!("running kubectl: {e}"),
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("kustomize prints UTF-8"))
}

/// The major version of kubectl's built-in kustomize (`Kustomize Version: v5.5.0`, printed
/// since kubectl 1.21; older ones embed kustomize v2, which has no Components).
fn kustomize_major() -> Option<u32> {
    let out = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("Kustomize Version: v"))?;
    v.split('.').next()?.parse().ok()
}

fn render_deploy() -> Option<Render> {
    let yaml = kustomize(&deploy_dir())?;
    Some(Render::parse(&yaml).unwrap_or_else(|e| panic!("deploy/: {e}")))
}

/// `to` relative to `from` (kustomize refuses absolute paths to bases and components).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut p = PathBuf::new();
    for _ in common..from.len() {
        p.push("..");
    }
    for c in &to[common..] {
        p.push(c);
    }
    p
}

// ---------------------------------------------------------------------------------------
// (a) crds.yaml

#[test]
fn crds_yaml_is_what_machineos_crds_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .arg("crds")
        .output()
        .expect("run machineos crds");
    assert!(out.status.success(), "machineos crds failed");
    let printed = String::from_utf8(out.stdout).expect("UTF-8");
    let path = deploy_dir().join("crds.yaml");
    let file = std::fs::read_to_string(&path).unwrap_or_default();
    if file != printed {
        let line = file
            .lines()
            .zip(printed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| file.lines().count().min(printed.lines().count()));
        panic!(
            "deploy/crds.yaml is not the output of `machineos crds` (first difference at line \
             {}: file {:?}, printed {:?}); regenerate it from the workspace root with\n    {REGENERATE}",
            line + 1,
            file.lines().nth(line).unwrap_or("<end>"),
            printed.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

// ---------------------------------------------------------------------------------------
// (b) the render, typed

#[test]
fn the_strict_parse_rejects_a_misspelt_or_misplaced_field() {
    let good = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    });
    strict::<Deployment>(&good).expect("a valid Deployment");
    let mut typo = good.clone();
    typo["spec"]["replica"] = 2.into();
    let e = strict::<Deployment>(&typo).unwrap_err();
    assert!(e.contains("spec.replica"), "{e}");
    let mut nested = good.clone();
    nested["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] =
        serde_json::json!({"httpGet": {"path": "/readyz", "port": 8080}});
    let e = strict::<Deployment>(&nested).unwrap_err();
    assert!(e.contains("readinesProbe"), "{e}");
    let mut misplaced = good.clone();
    misplaced["spec"]["serviceAccountName"] = NAME.into();
    assert!(strict::<Deployment>(&misplaced).is_err());
    let mut null = good;
    null["spec"]["paused"] = Value::Null;
    let e = strict::<Deployment>(&null).unwrap_err();
    assert!(e.contains("/spec/paused"), "{e}");
    assert!(
        Render::parse("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n").is_err(),
        "an unchecked kind is refused"
    );
}

#[test]
fn the_installation_renders_and_every_document_is_its_type() {
    let Some(r) = render_deploy() else { return };
    assert_eq!(r.namespaces.len(), 1);
    assert_eq!(r.namespaces[0].metadata.name.as_deref(), Some(NS));
    // The controller's and the agent's.
    assert_eq!(r.service_accounts.len(), 2);
    assert_eq!(r.deployments.len(), 1);
    assert_eq!(r.daemon_sets.len(), 1, "the agent");
    assert_eq!(r.pdbs.len(), 1);
    assert_eq!(r.services.len(), 1);
    assert!(r.pvcs.is_empty(), "the cache is an emptyDir by default");
    assert!(r.config_maps.is_empty(), "the samples are not installed");
    // The CRDs went through kustomize unchanged (no namespace or label added).
    let crds: Vec<Value> = machineos_api::crds()
        .iter()
        .map(|c| serde_json::to_value(c).expect("a CRD serializes"))
        .collect();
    let rendered: Vec<Value> = r
        .docs
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .cloned()
        .collect();
    assert_eq!(rendered.len(), crds.len(), "every CRD is installed");
    for crd in &crds {
        let name = &crd["metadata"]["name"];
        let got = rendered
            .iter()
            .find(|d| &d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("CRD {name} missing from the render"));
        assert_eq!(
            first_difference(crd, got, ""),
            None,
            "CRD {name} differs in the render"
        );
    }
}

#[test]
fn every_namespaced_object_is_in_the_controller_namespace() {
    let Some(r) = render_deploy() else { return };
    for doc in &r.docs {
        let kind = doc["kind"].as_str().unwrap_or("");
        let ns = doc["metadata"]["namespace"].as_str();
        if CLUSTER_SCOPED.contains(&kind) {
            assert_eq!(ns, None, "{} is cluster-scoped", describe(doc));
        } else {
            assert_eq!(ns, Some(NS), "{}", describe(doc));
        }
    }
}

// ---------------------------------------------------------------------------------------
// (c) RBAC

type Grants = BTreeSet<(String, String, String)>;

fn table(rules: &[(&str, &str, &[&str])]) -> Grants {
    rules
        .iter()
        .flat_map(|(g, r, verbs)| {
            verbs
                .iter()
                .map(move |v| (g.to_string(), r.to_string(), v.to_string()))
        })
        .collect()
}

/// What `rules` grant, expanded to (apiGroup, resource, verb) — a rule with
/// `resourceNames` as `resource:name` per name; refuses wildcards and nonResourceURLs
/// (nothing here needs them).
fn grants(what: &str, rules: &[PolicyRule]) -> Grants {
    let mut out = Grants::new();
    for (i, rule) in rules.iter().enumerate() {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let mut resources = rule.resources.clone().unwrap_or_default();
        if let Some(names) = rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
            resources = resources
                .iter()
                .flat_map(|r| names.iter().map(move |n| format!("{r}:{n}")))
                .collect();
        }
        assert!(
            rule.non_resource_urls.is_none(),
            "{what} rule {i}: nonResourceURLs are not expected"
        );
        assert!(
            !groups.is_empty() && !resources.is_empty() && !rule.verbs.is_empty(),
            "{what} rule {i}: empty apiGroups, resources or verbs"
        );
        for s in groups.iter().chain(&resources).chain(&rule.verbs) {
            assert!(!s.contains('*'), "{what} rule {i}: wildcard {s:?}");
        }
        for g in &groups {
            for res in &resources {
                for v in &rule.verbs {
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

fn assert_grants(what: &str, got: &Grants, want: &Grants) {
    let extra: Vec<_> = got.difference(want).collect();
    let missing: Vec<_> = want.difference(got).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{what}: grants beyond the table: {extra:?}; table entries not granted: {missing:?}"
    );
}

#[test]
fn rbac_grants_exactly_the_table_to_the_service_account() {
    let Some(mut r) = render_deploy() else { return };
    // The controller's (the agent's, in agent.yaml, have their own test below).
    let mine = |name: Option<&String>| name.map(String::as_str) == Some(NAME);
    r.cluster_roles.retain(|x| mine(x.metadata.name.as_ref()));
    r.roles.retain(|x| mine(x.metadata.name.as_ref()));
    r.cluster_role_bindings
        .retain(|x| mine(x.metadata.name.as_ref()));
    r.role_bindings.retain(|x| mine(x.metadata.name.as_ref()));
    r.service_accounts
        .retain(|x| mine(x.metadata.name.as_ref()));
    assert_eq!(r.cluster_roles.len(), 1, "one ClusterRole");
    assert_eq!(r.roles.len(), 1, "one Role");
    assert_eq!(r.cluster_role_bindings.len(), 1, "one ClusterRoleBinding");
    assert_eq!(r.role_bindings.len(), 1, "one RoleBinding");

    let cr = &r.cluster_roles[0];
    assert_eq!(cr.metadata.name.as_deref(), Some(NAME));
    assert!(cr.aggregation_rule.is_none(), "no aggregated permissions");
    let got = grants("ClusterRole", cr.rules.as_deref().unwrap_or_default());
    assert_grants("ClusterRole", &got, &table(CLUSTER_RULES));

    let role = &r.roles[0];
    assert_eq!(role.metadata.name.as_deref(), Some(NAME));
    assert_eq!(role.metadata.namespace.as_deref(), Some(NS));
    let got = grants("Role", role.rules.as_deref().unwrap_or_default());
    assert_grants("Role", &got, &table(NAMESPACED_RULES));

    // Both bound to the ServiceAccount the Deployment runs as, and to nothing else.
    let sa = &r.service_accounts[0];
    assert_eq!(sa.metadata.name.as_deref(), Some(NAME));
    assert_eq!(sa.metadata.namespace.as_deref(), Some(NS));
    let subject = |s: &[k8s_openapi::api::rbac::v1::Subject]| {
        assert_eq!(s.len(), 1, "one subject");
        assert_eq!(
            (
                s[0].kind.as_str(),
                s[0].name.as_str(),
                s[0].namespace.as_deref()
            ),
            ("ServiceAccount", NAME, Some(NS))
        );
    };
    let crb = &r.cluster_role_bindings[0];
    assert_eq!(
        (
            crb.role_ref.api_group.as_deref(),
            crb.role_ref.kind.as_str(),
            crb.role_ref.name.as_str()
        ),
        (Some("rbac.authorization.k8s.io"), "ClusterRole", NAME)
    );
    subject(crb.subjects.as_deref().unwrap_or_default());
    let rb = &r.role_bindings[0];
    assert_eq!(rb.metadata.namespace.as_deref(), Some(NS));
    assert_eq!(
        (
            rb.role_ref.api_group.as_deref(),
            rb.role_ref.kind.as_str(),
            rb.role_ref.name.as_str()
        ),
        (Some("rbac.authorization.k8s.io"), "Role", NAME)
    );
    subject(rb.subjects.as_deref().unwrap_or_default());
    assert_eq!(
        pod(r.deployment()).service_account_name.as_deref(),
        Some(NAME)
    );
}

#[test]
fn every_resource_the_rbac_names_is_served() {
    // A resource misspelt in the table and the manifest alike would grant nothing: the MCO
    // groups' resources must be the plurals (and status subresources) of machineos's CRDs,
    // each in its CRD's group.
    let mut served = BTreeSet::new();
    for crd in machineos_api::crds() {
        let plural = format!("{}:{}", crd.spec.group, crd.spec.names.plural);
        served.insert(plural.clone());
        // Not served, but what the owner-reference admission authorizes against.
        served.insert(format!("{plural}/finalizers"));
        if crd
            .spec
            .versions
            .iter()
            .any(|v| v.subresources.as_ref().is_some_and(|s| s.status.is_some()))
        {
            served.insert(format!("{plural}/status"));
        }
        assert!(
            [MCO, "operator.openshift.io"].contains(&crd.spec.group.as_str()),
            "{}",
            crd.spec.group
        );
    }
    for (group, resource, _) in CLUSTER_RULES {
        if [MCO, "operator.openshift.io"].contains(group) {
            // `machineconfigurations:cluster`: the resource before the object name.
            let resource = resource.split(':').next().unwrap_or_default();
            assert!(
                served.contains(&format!("{group}:{resource}")),
                "{group} {resource} is not served"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// (d) the Deployment

fn pod_labels(d: &Deployment) -> BTreeMap<String, String> {
    d.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec.template.spec.as_ref().expect("a pod template")
}

/// The value after `flag` in `args`.
/// The image the controller gives build Jobs (`MACHINEOS_BUILDER_IMAGE`).
fn builder_image(c: &k8s_openapi::api::core::v1::Container) -> Option<&str> {
    c.env
        .as_deref()?
        .iter()
        .find(|e| e.name == "MACHINEOS_BUILDER_IMAGE")?
        .value
        .as_deref()
}

fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

#[test]
fn the_deployment_runs_two_hardened_leader_elected_replicas() {
    let Some(r) = render_deploy() else { return };
    let d = r.deployment();
    assert_eq!(d.metadata.name.as_deref(), Some(NAME));
    let spec = &d.spec;
    assert_eq!(spec.replicas, Some(2), "two replicas, one leader");
    let labels = pod_labels(d);
    assert!(
        selects(
            spec.selector.match_labels.as_ref().expect("matchLabels"),
            &labels
        ),
        "the selector matches the pod template"
    );
    let pod = pod(d);
    assert_eq!(pod.termination_grace_period_seconds, Some(60));
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some(IMAGE));
    assert_eq!(builder_image(c), Some(IMAGE), "build Jobs run this image");

    // Flags: the namespace from the downward API, the cache dir, the listen address.
    let args = c.args.clone().unwrap_or_default();
    assert_eq!(args.first().map(String::as_str), Some("controller"));
    assert_eq!(flag(&args, "--namespace"), Some("$(POD_NAMESPACE)"));
    assert_eq!(flag(&args, "--listen"), Some("0.0.0.0:8080"));
    let cache_dir = flag(&args, "--cache-dir").expect("--cache-dir");
    let env: BTreeMap<&str, &str> = c
        .env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|e| e.name != "MACHINEOS_BUILDER_IMAGE")
        .map(|e| {
            let field = e
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str())
                .unwrap_or_else(|| panic!("env {} is not from the downward API", e.name));
            (e.name.as_str(), field)
        })
        .collect();
    assert_eq!(
        env,
        BTreeMap::from([
            ("NODE_NAME", "spec.nodeName"),
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace")
        ])
    );

    // Port `http` 8080, probes on it.
    let ports = c.ports.as_deref().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].container_port),
        (Some("http"), 8080)
    );
    for (probe, path) in [
        (&c.liveness_probe, "/healthz"),
        (&c.readiness_probe, "/readyz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("an HTTP probe on {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.port, IntOrString::String("http".into()));
    }

    // Resources.
    let res = c.resources.as_ref().expect("resources");
    let q = |m: &Option<BTreeMap<String, _>>, k: &str| {
        m.as_ref()
            .and_then(|m| m.get(k))
            .map(|q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| q.0.clone())
    };
    assert_eq!(q(&res.requests, "cpu").as_deref(), Some("100m"));
    assert_eq!(q(&res.requests, "memory").as_deref(), Some("128Mi"));
    assert_eq!(q(&res.limits, "memory").as_deref(), Some("512Mi"));
    assert_eq!(q(&res.limits, "cpu"), None, "no CPU limit (throttling)");

    // Security.
    let psc = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(
        psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault")
    );
    let sc = c
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.privileged, None);
    assert_eq!(
        sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
        Some(vec!["ALL".to_owned()])
    );
    assert_eq!(sc.capabilities.as_ref().and_then(|c| c.add.as_ref()), None);
    assert_eq!(
        sc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault")
    );

    // Volumes: the cache at --cache-dir (an emptyDir here), and a writable /tmp since the
    // root filesystem is read-only (builds spool to temporary files).
    let volumes = pod.volumes.as_deref().unwrap_or_default();
    let mount = |path: &str| {
        let m = c
            .volume_mounts
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"));
        assert_ne!(m.read_only, Some(true), "{path} is writable");
        volumes
            .iter()
            .find(|v| v.name == m.name)
            .unwrap_or_else(|| panic!("volume {} of {path} is not defined", m.name))
    };
    assert!(
        mount(cache_dir).empty_dir.is_some(),
        "the cache is an emptyDir"
    );
    assert!(mount("/tmp").empty_dir.is_some(), "/tmp is an emptyDir");

    // The replicas prefer different nodes, without requiring it.
    let anti = pod
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .expect("podAntiAffinity");
    assert!(
        anti.required_during_scheduling_ignored_during_execution
            .is_none()
    );
    let preferred = anti
        .preferred_during_scheduling_ignored_during_execution
        .as_deref()
        .unwrap_or_default();
    assert!(
        preferred.iter().any(|w| {
            w.pod_affinity_term.topology_key == "kubernetes.io/hostname"
                && w.pod_affinity_term
                    .label_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref())
                    .is_some_and(|s| selects(s, &labels))
        }),
        "a preferred anti-affinity on hostname against its own pods"
    );

    // The PDB keeps one replica through drains; the Service reaches the pods' `http` port.
    let pdb = r.pdbs[0].spec.as_ref().expect("PDB spec");
    assert_eq!(pdb.min_available, Some(IntOrString::Int(1)));
    assert!(selects(
        pdb.selector
            .as_ref()
            .and_then(|s| s.match_labels.as_ref())
            .expect("PDB selector"),
        &labels
    ));
    let svc = r.services[0].spec.as_ref().expect("Service spec");
    assert!(selects(svc.selector.as_ref().expect("selector"), &labels));
    let sp = svc.ports.as_deref().unwrap_or_default();
    assert_eq!(sp.len(), 1);
    assert_eq!(
        (sp[0].name.as_deref(), sp[0].port, sp[0].target_port.clone()),
        (Some("http"), 8080, Some(IntOrString::String("http".into())))
    );
}

#[test]
fn the_pvc_component_and_an_image_override_apply() {
    match kustomize_major() {
        Some(major) if major >= 4 => {}
        found => {
            assert!(
                std::env::var_os("CI").is_none(),
                "kubectl 1.21+ (kustomize v4+) is required under CI; found {found:?}"
            );
            eprintln!(
                "SKIPPED: kustomize Components need kubectl's kustomize v4+ (kubectl 1.21+); \
                 found {found:?}"
            );
            return;
        }
    }
    let root = deploy_dir();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let rel = relative(dir.path(), &root);
    let overlay = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n  - {base}\n\
         components:\n  - {base}/components/pvc-cache\n\
         images:\n  - name: ghcr.io/machineos/machineos\n    newName: registry.example.com/mirror/machineos\n    newTag: v1.2.3\n\
         replacements:\n  - source:\n      kind: Deployment\n      name: machineos-controller\n      \
         fieldPath: spec.template.spec.containers.[name=controller].image\n    targets:\n      \
         - select:\n          kind: Deployment\n          name: machineos-controller\n        \
         fieldPaths:\n          - spec.template.spec.containers.[name=controller].env.[name=MACHINEOS_BUILDER_IMAGE].value\n",
        base = rel.display()
    );
    std::fs::write(dir.path().join("kustomization.yaml"), overlay).expect("write overlay");
    let Some(yaml) = kustomize(dir.path()) else {
        return;
    };
    let r = Render::parse(&yaml).unwrap_or_else(|e| panic!("deploy/ + pvc-cache: {e}"));
    assert_eq!(r.pvcs.len(), 1, "the component adds its PVC");
    let pvc = &r.pvcs[0];
    assert_eq!(pvc.metadata.namespace.as_deref(), Some(NS));
    let d = r.deployment();
    let pod = pod(d);
    let c = &pod.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some("registry.example.com/mirror/machineos:v1.2.3")
    );
    assert_eq!(
        builder_image(c),
        c.image.as_deref(),
        "the build Jobs run the overlay's image too (deploy/README.md's overlay)"
    );
    let cache_dir = flag(c.args.as_deref().unwrap_or_default(), "--cache-dir").expect("flag");
    let m = c
        .volume_mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|m| m.mount_path == cache_dir)
        .expect("the cache mount");
    let v = pod
        .volumes
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|v| v.name == m.name)
        .expect("the cache volume");
    assert!(v.empty_dir.is_none(), "the emptyDir is gone: {v:?}");
    assert_eq!(
        v.persistent_volume_claim.as_ref().map(|p| &p.claim_name),
        pvc.metadata.name.as_ref()
    );
}

// ---------------------------------------------------------------------------------------
// (e) samples

fn sample(name: &str) -> Value {
    let path = deploy_dir().join("samples").join(name);
    serde_saphyr::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn usable_secrets() -> BTreeMap<String, SecretState> {
    ["push-secret", "pull-secret"]
        .into_iter()
        .map(|s| (s.to_owned(), SecretState::Usable))
        .collect()
}

#[test]
fn the_machineosconfig_sample_is_valid_and_selects_the_native_builder() {
    let doc = sample("machineosconfig.yaml");
    let mosc: machineos_api::v1::MachineOSConfig = strict_but(&doc, &["apiVersion", "kind"])
        .unwrap_or_else(|e| panic!("machineosconfig.yaml: {e}"));
    assert_eq!(mosc.metadata.name.as_deref(), Some("worker"));
    assert_eq!(mosc.spec.machine_config_pool.name, "worker");

    // What the API server would store: nothing pruned, defaulted or refused.
    let crd = machineos_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "MachineOSConfig")
        .expect("the MachineOSConfig CRD");
    let crd = serde_json::to_value(&crd).expect("a CRD serializes");
    let validator =
        machineos_crd_validation::Validator::from_crd(&crd, "v1").expect("the v1 schema");
    let stored = validator
        .validate_create(&doc)
        .unwrap_or_else(|e| panic!("machineosconfig.yaml is refused: {e}"));
    assert_eq!(
        first_difference(&doc, &stored, ""),
        None,
        "the API server would change the sample"
    );

    // And how the controller reads it.
    let m = MachineOSConfigObserved {
        name: mosc.metadata.name.clone().unwrap_or_default(),
        image_builder_type: doc["spec"]["imageBuilder"]["imageBuilderType"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        rendered_image_push_spec: mosc.spec.rendered_image_push_spec.clone(),
        rendered_image_push_secret: mosc.spec.rendered_image_push_secret.name.clone(),
        base_image_pull_secret: mosc
            .spec
            .base_image_pull_secret
            .as_ref()
            .map(|s| s.name.clone()),
        ..Default::default()
    };
    let mut observed = Observed::new(NS);
    observed.secrets = usable_secrets();
    let pool = PoolObserved {
        pool: Pool {
            name: "worker".into(),
            ..Default::default()
        },
        opt_in: Some(OptIn::MachineOSConfig(Box::new(m))),
        ..Default::default()
    };
    let eff = resolve(&observed, &pool)
        .unwrap_or_else(|e| panic!("the controller refuses the sample: {e:?}"))
        .expect("an opt-in");
    assert_eq!(eff.backend, Backend::Native);
    assert!(!eff.legacy);
    assert_eq!(eff.push_repository, "registry.example.com/machineos/worker");
    assert_eq!(eff.push_secret, "push-secret");
    // The install steps create the push Secret only: the sample needs no other.
    assert_eq!(eff.base_image_pull_secret, None);
}

#[test]
fn the_legacy_config_map_sample_is_read_by_the_controller() {
    let doc = sample("legacy-on-cluster-build-config.yaml");
    let cm: ConfigMap =
        strict(&doc).unwrap_or_else(|e| panic!("legacy-on-cluster-build-config.yaml: {e}"));
    assert_eq!(
        cm.metadata.name.as_deref(),
        Some(vocab::ON_CLUSTER_BUILD_CONFIG)
    );
    assert_eq!(cm.metadata.namespace.as_deref(), Some(NS));
    let data = cm.data.clone().unwrap_or_default();
    let known = [
        vocab::KEY_BASE_IMAGE_PULL_SECRET,
        vocab::KEY_FINAL_IMAGE_PUSH_SECRET,
        vocab::KEY_FINAL_IMAGE_PULLSPEC,
        vocab::KEY_IMAGE_BUILDER_TYPE,
    ];
    for k in data.keys() {
        assert!(known.contains(&k.as_str()), "unknown key {k:?}");
    }
    let text = read(&deploy_dir().join("samples/legacy-on-cluster-build-config.yaml"));
    assert!(
        text.contains(vocab::LAYERING_ENABLED_LABEL),
        "the sample says which pool label opts in"
    );

    let mut observed = Observed::new(NS);
    observed.secrets = usable_secrets();
    let pool = PoolObserved {
        pool: Pool {
            name: "worker".into(),
            labels: BTreeMap::from([(vocab::LAYERING_ENABLED_LABEL.to_owned(), String::new())]),
            ..Default::default()
        },
        opt_in: Some(OptIn::Legacy(LegacyOptIn {
            config_map: Some(data),
        })),
        ..Default::default()
    };
    let eff = resolve(&observed, &pool)
        .unwrap_or_else(|e| panic!("the controller refuses the sample: {e:?}"))
        .expect("an opt-in");
    assert!(eff.legacy);
    assert_eq!(eff.backend, Backend::Native);
    assert_eq!(eff.push_secret, "push-secret");
    assert_eq!(eff.base_image_pull_secret.as_deref(), Some("pull-secret"));
}

#[test]
fn the_pool_sample_is_valid_and_selects_the_worker_machine_configs() {
    let doc = sample("machineconfigpool-worker.yaml");
    let pool: machineos_api::v1::MachineConfigPool = strict_but(&doc, &["apiVersion", "kind"])
        .unwrap_or_else(|e| panic!("machineconfigpool-worker.yaml: {e}"));
    assert_eq!(pool.metadata.name.as_deref(), Some("worker"));
    let crd = machineos_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "MachineConfigPool")
        .expect("the MachineConfigPool CRD");
    let crd = serde_json::to_value(&crd).expect("a CRD serializes");
    let validator =
        machineos_crd_validation::Validator::from_crd(&crd, "v1").expect("the v1 schema");
    validator
        .validate_create(&doc)
        .unwrap_or_else(|e| panic!("machineconfigpool-worker.yaml is refused: {e}"));
    // It selects the role-labelled MachineConfigs, as the README's steps expect.
    let mc = |name: &str, role: &str| -> machineos_api::v1::MachineConfig {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}}},
        }))
        .expect("a MachineConfig")
    };
    let mcs = [mc("50-motd", "worker"), mc("50-master", "master")];
    let selected =
        machineos_render::select_for_pool(Some(&pool), "worker", &mcs).expect("the pool selects");
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0].metadata.name.as_deref(), Some("50-motd"));
}

#[test]
fn the_samples_kustomization_lists_both_samples() {
    let Some(yaml) = kustomize(&deploy_dir().join("samples")) else {
        return;
    };
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("YAML");
    let kinds: BTreeSet<String> = docs.iter().map(describe).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ConfigMap on-cluster-build-config".to_owned(),
            "MachineOSConfig worker".to_owned()
        ])
    );
}

// ---------------------------------------------------------------------------------------
// (f) the node agent (deploy/agent.yaml, in the kustomization)

#[test]
fn the_agent_manifest_is_typed_and_grants_exactly_its_table() {
    const AGENT: &str = "machineos-agent";
    let r = Render::parse(&read(&deploy_dir().join("agent.yaml")))
        .unwrap_or_else(|e| panic!("deploy/agent.yaml: {e}"));
    assert_eq!(r.service_accounts.len(), 1);
    assert_eq!(r.daemon_sets.len(), 1);
    assert_eq!(r.cluster_roles.len(), 1);
    assert_eq!(r.roles.len(), 1);
    for doc in &r.docs {
        let kind = doc["kind"].as_str().unwrap_or("");
        let ns = doc["metadata"]["namespace"].as_str();
        assert_eq!(doc["metadata"]["name"], AGENT, "{}", describe(doc));
        if CLUSTER_SCOPED.contains(&kind) {
            assert_eq!(ns, None, "{} is cluster-scoped", describe(doc));
        } else {
            assert_eq!(ns, Some(NS), "{}", describe(doc));
        }
    }
    let got = grants(
        "agent ClusterRole",
        r.cluster_roles[0].rules.as_deref().unwrap_or_default(),
    );
    assert_grants("agent ClusterRole", &got, &table(AGENT_CLUSTER_RULES));
    let got = grants(
        "agent Role",
        r.roles[0].rules.as_deref().unwrap_or_default(),
    );
    assert_grants("agent Role", &got, &table(AGENT_NAMESPACED_RULES));
    for b in r
        .cluster_role_bindings
        .iter()
        .map(|b| (&b.role_ref, b.subjects.as_deref().unwrap_or_default()))
        .chain(
            r.role_bindings
                .iter()
                .map(|b| (&b.role_ref, b.subjects.as_deref().unwrap_or_default())),
        )
    {
        assert_eq!(b.0.name, AGENT);
        assert_eq!(b.1.len(), 1);
        assert_eq!(
            (
                b.1[0].kind.as_str(),
                b.1[0].name.as_str(),
                b.1[0].namespace.as_deref()
            ),
            ("ServiceAccount", AGENT, Some(NS))
        );
    }

    // The DaemonSet: its service account, the host's PID namespace, privileged, the host's
    // root mounted where --host-root says, the node name from the downward API.
    let ds = &r.daemon_sets[0];
    let spec = &ds.spec;
    let pod = spec.template.spec.as_ref().expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some(AGENT));
    assert_eq!(pod.host_pid, Some(true));
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert!(selects(
        spec.selector.match_labels.as_ref().expect("selector"),
        &labels
    ));
    assert!(
        pod.tolerations
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|t| t.operator.as_deref() == Some("Exists") && t.key.is_none()),
        "runs on cordoned and tainted nodes"
    );
    // Only on image-based nodes: an RHCOS/SCOS node, or one labelled for it — and never on
    // a plain node.
    let terms = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .expect("a required node affinity");
    let schedules_on = |labels: &[(&str, &str)]| {
        terms.iter().any(|t| {
            t.match_expressions.iter().flatten().all(|e| {
                e.operator == "In"
                    && labels
                        .iter()
                        .any(|(k, v)| *k == e.key && e.values.iter().flatten().any(|x| x == v))
            })
        })
    };
    assert!(schedules_on(&[("node.openshift.io/os_id", "rhcos")]));
    assert!(schedules_on(&[("node.openshift.io/os_id", "scos")]));
    assert!(schedules_on(&[("machineos.io/image-based", "true")]));
    assert!(!schedules_on(&[("node.openshift.io/os_id", "rhel")]));
    assert!(!schedules_on(&[("kubernetes.io/os", "linux")]));
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some(IMAGE));
    let args = c.args.clone().unwrap_or_default();
    assert_eq!(args.first().map(String::as_str), Some("agent"));
    assert!(args.contains(&"--node=$(NODE_NAME)".to_owned()), "{args:?}");
    let host_root = args
        .iter()
        .find_map(|a| a.strip_prefix("--host-root="))
        .expect("--host-root");
    assert_eq!(
        c.security_context.as_ref().and_then(|s| s.privileged),
        Some(true)
    );
    let env: BTreeMap<&str, &str> = c
        .env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter_map(|e| {
            Some((
                e.name.as_str(),
                e.value_from
                    .as_ref()?
                    .field_ref
                    .as_ref()?
                    .field_path
                    .as_str(),
            ))
        })
        .collect();
    assert_eq!(env.get("NODE_NAME"), Some(&"spec.nodeName"));
    let mount = c
        .volume_mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|m| m.mount_path == host_root)
        .expect("the host root is mounted at --host-root");
    let vol = pod
        .volumes
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|v| v.name == mount.name)
        .expect("its volume");
    assert_eq!(vol.host_path.as_ref().map(|h| h.path.as_str()), Some("/"));
}

#[test]
fn the_openshift_component_keeps_the_clusters_crds_and_turns_the_render_off() {
    match kustomize_major() {
        Some(major) if major >= 4 => {}
        found => {
            assert!(
                std::env::var_os("CI").is_none(),
                "kubectl 1.21+ (kustomize v4+) is required under CI; found {found:?}"
            );
            eprintln!("SKIPPED: kustomize Components need kubectl 1.21+; found {found:?}");
            return;
        }
    }
    let root = deploy_dir();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let rel = relative(dir.path(), &root);
    let overlay = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n  - {base}\n\
         components:\n  - {base}/components/openshift\n",
        base = rel.display()
    );
    std::fs::write(dir.path().join("kustomization.yaml"), overlay).expect("write overlay");
    let Some(yaml) = kustomize(dir.path()) else {
        return;
    };
    let r = Render::parse(&yaml).unwrap_or_else(|e| panic!("deploy/ + openshift: {e}"));
    // Only machineos's own CRDs: none the Machine Config Operator ships is applied.
    let mut names: Vec<String> = r
        .crds
        .iter()
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "machineimages.machineconfiguration.openshift.io",
            "machineosimages.machineconfiguration.openshift.io"
        ]
    );
    let args = pod(r.deployment()).containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(args.contains(&"--no-render".to_owned()), "{args:?}");
    // Everything else is still there: the agent, the RBAC.
    assert_eq!(r.daemon_sets.len(), 1);

    // The SCCs: the agent may use the cluster's `privileged`; the build pods run as
    // machineos-builder, which may use `machineos-builder`, and that SCC admits the Job pod
    // the controller really creates.
    let bound = |sa: &str, role: &str| {
        r.role_bindings.iter().any(|b| {
            b.role_ref.kind == "ClusterRole"
                && b.role_ref.name == role
                && b.subjects.iter().flatten().any(|s| {
                    s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(NS)
                })
        })
    };
    assert!(bound("machineos-agent", "system:openshift:scc:privileged"));
    assert!(bound("machineos-builder", "machineos-builder-scc"));
    let uses = r
        .cluster_roles
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some("machineos-builder-scc"))
        .expect("ClusterRole machineos-builder-scc");
    assert_eq!(
        grants(
            "machineos-builder-scc",
            uses.rules.as_deref().unwrap_or_default()
        ),
        table(&[(
            "security.openshift.io",
            "securitycontextconstraints:machineos-builder",
            &["use"]
        )])
    );
    assert!(
        r.service_accounts
            .iter()
            .any(|a| a.metadata.name.as_deref() == Some("machineos-builder"))
    );
    let flag = "--build-service-account=machineos-builder".to_owned();
    assert!(args.contains(&flag), "{args:?}");

    let scc = r
        .sccs
        .iter()
        .find(|s| s["metadata"]["name"] == "machineos-builder")
        .expect("SCC machineos-builder");
    let job = example_job(Some("machineos-builder"));
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "machineos-builder");
    for host in ["hostPID", "hostIPC", "hostNetwork"] {
        assert!(pod[host] != true, "{host}");
    }
    assert_eq!(scc["allowHostPID"], false);
    let strings = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect()
    };
    let volumes = strings(&scc["volumes"]);
    for v in pod["volumes"].as_array().expect("volumes") {
        let kind = [
            "configMap",
            "secret",
            "emptyDir",
            "projected",
            "downwardAPI",
        ]
        .into_iter()
        .find(|k| v.get(*k).is_some())
        .unwrap_or_else(|| panic!("a volume kind the SCC does not name: {v}"));
        assert!(volumes.contains(kind), "{kind} not in {volumes:?}");
    }
    assert!(pod["securityContext"]["runAsNonRoot"] == true);
    assert_eq!(scc["runAsUser"]["type"], "MustRunAsNonRoot");
    for c in pod["containers"].as_array().expect("containers") {
        let sc = &c["securityContext"];
        let added = strings(&sc["capabilities"]["add"]);
        assert!(
            added.is_subset(&strings(&scc["allowedCapabilities"])),
            "{added:?}"
        );
        let dropped = strings(&sc["capabilities"]["drop"]);
        assert!(
            dropped.contains("ALL")
                || strings(&scc["requiredDropCapabilities"]).is_subset(&dropped),
            "{dropped:?}"
        );
        if sc["allowPrivilegeEscalation"] == true {
            assert_eq!(scc["allowPrivilegeEscalation"], true);
        }
        assert!(sc["privileged"] != true);
        assert_eq!(scc["allowPrivilegedContainer"], false);
    }
}

/// The buildah Job the controller creates for a build (as `ServiceAccount` `account`).
fn example_job(account: Option<&str>) -> Value {
    let mut inputs = machineos_buildrequest::objects::JobInputs::new(
        machineos_buildrequest::objects::BuildMeta {
            build: "worker-0123".into(),
            build_uid: "uid".into(),
            machine_os_config: "worker".into(),
            pool: "worker".into(),
            rendered_machine_config: "rendered-worker-1".into(),
        },
        NS,
        "registry.example.com/os/worker:worker-0123",
        "registry.example.com/os/base@sha256:0000000000000000000000000000000000000000000000000000000000000000",
    );
    inputs.service_account = account.map(str::to_owned);
    machineos_buildrequest::objects::build_job(&inputs)
}

#[test]
fn the_namespace_admits_the_privileged_agent_and_audits_the_rest_at_baseline() {
    let Some(r) = render_deploy() else {
        return;
    };
    let ns = &r.namespaces[0];
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/audit")
            .map(String::as_str),
        Some("baseline")
    );
    // Why privileged: the agent needs it (no lower level admits hostPID or privileged).
    let agent = r.daemon_sets[0]
        .spec
        .template
        .spec
        .as_ref()
        .expect("the agent's pod spec");
    assert_eq!(agent.host_pid, Some(true));
    // The build pods pass baseline: no host namespaces, no privileged, only capabilities
    // from baseline's list.
    let baseline_caps: BTreeSet<&str> = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ]
    .into_iter()
    .collect();
    let job = example_job(None);
    let pod = &job["spec"]["template"]["spec"];
    for c in pod["containers"].as_array().expect("containers") {
        for cap in c["securityContext"]["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let cap = cap.as_str().unwrap_or_default();
            assert!(baseline_caps.contains(cap), "{cap} is beyond baseline");
        }
        assert!(c["securityContext"]["privileged"] != true);
    }
    for host in ["hostPID", "hostIPC", "hostNetwork"] {
        assert!(pod[host] != true, "{host}");
    }
}

// ---------------------------------------------------------------------------------------
// (g) monitoring: deploy/monitoring/prometheusrule.yaml

fn prometheus_rules() -> Value {
    let path = deploy_dir().join("monitoring/prometheusrule.yaml");
    serde_saphyr::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_alert_names_only_metrics_the_controller_exports() {
    let rules = prometheus_rules();
    // A family is printed once it has a sample: one of each, as a running controller has.
    let metrics = machineos_controller::metrics::Metrics::new();
    metrics.build_state("worker", machineos_build_lifecycle::Phase::Failed);
    metrics.reconcile(
        machineos_controller::metrics::ReconcileResult::Requeue,
        "RegistryUnavailable",
        0.0,
    );
    metrics.rollout("worker", true, 0, 1, 1, 1);
    metrics.set_leader(false);
    let exported = metrics.encode();
    let mut named = BTreeSet::new();
    for group in rules["spec"]["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let expr = rule["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("ocl_") || word.starts_with("machineos_") {
                    named.insert(word.to_owned());
                }
            }
            assert!(rule["labels"]["severity"].is_string(), "{rule}");
            assert!(rule["annotations"]["summary"].is_string(), "{rule}");
        }
    }
    assert!(named.len() >= 5, "{named:?}");
    for name in named {
        // A counter's samples are `<family>_total`.
        let family = name.strip_suffix("_total").unwrap_or(&name);
        assert!(
            exported.contains(&format!("# TYPE {family} ")),
            "{name} is not a metric the controller exports:\n{exported}"
        );
    }
}

#[test]
fn the_alerts_pass_promtool_check_and_their_unit_tests() {
    if Command::new("promtool").arg("--version").output().is_err() {
        // .ci/run installs it: under CI a missing promtool fails, it does not skip.
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is required under CI"
        );
        eprintln!("SKIPPED: no promtool (Debian package prometheus)");
        return;
    }
    let rules = prometheus_rules();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let groups = serde_json::json!({"groups": rules["spec"]["groups"]});
    // JSON is YAML: the PrometheusRule's groups as a plain rule file.
    std::fs::write(dir.path().join("rules.yaml"), groups.to_string()).expect("rules.yaml");
    std::fs::copy(
        deploy_dir().join("monitoring/rules_test.yaml"),
        dir.path().join("rules_test.yaml"),
    )
    .expect("rules_test.yaml");
    for args in [
        ["check", "rules", "rules.yaml"],
        ["test", "rules", "rules_test.yaml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
