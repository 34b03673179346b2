//! The controller's own check of `spec.nodeDisruptionPolicy` (`PolicyConfig::validate`, used
//! where the object reaches it without the API server's rules) agrees with the API server
//! running the `MachineConfiguration` CRD machineos ships (its schema and CEL rules, as
//! openshift/api declares them): for every policy, both accept it or both refuse it, and
//! a refusal names the same field. A table of the rules' edges, then generated policies.

use machineos_crd_validation::Validator;
use machineos_disruption::ClusterPolicies;
use proptest::prelude::*;
use serde_json::{Value, json};

/// The validator of machineos's MachineConfiguration CRD, built once.
fn validator() -> &'static Validator {
    static V: std::sync::OnceLock<Validator> = std::sync::OnceLock::new();
    V.get_or_init(build_validator)
}

fn build_validator() -> Validator {
    let crd = machineos_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "MachineConfiguration")
        .expect("machineos crds include MachineConfiguration");
    Validator::from_crd(&serde_json::to_value(&crd).unwrap(), "v1").unwrap()
}

/// The API server's verdict: `Ok` or the field paths of its errors.
fn api_server(v: &Validator, policy: &Value) -> Result<(), String> {
    let obj = json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"}, "spec": {"nodeDisruptionPolicy": policy},
    });
    v.validate_create(&obj)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The controller's verdict: `Ok` or its error (path: message).
fn controller(policy: &Value) -> Result<(), String> {
    let obj = json!({"spec": {"nodeDisruptionPolicy": policy}});
    ClusterPolicies::of_machine_configuration(Some(&obj))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Both verdicts agree; a refusal by the controller names a path the API server's errors
/// name too — unless the API server stopped before its CEL rules (a schema error first:
/// "some validation rules were not checked"), where the controller may report a rule's
/// field instead.
fn agree(v: &Validator, policy: &Value) -> Result<(), String> {
    match (api_server(v, policy), controller(policy)) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(a), Err(c)) => {
            let path = c.split(": ").next().unwrap_or_default();
            // The controller names the list (`…actions`) or the entry; the API server the
            // same node or one below it.
            let stem = path.split('[').next().unwrap_or_default();
            if a.contains(stem) || a.contains("some validation rules were not checked") {
                Ok(())
            } else {
                Err(format!(
                    "different fields: API server {a:?}, controller {c:?}"
                ))
            }
        }
        (a, c) => Err(format!("API server {a:?}, controller {c:?} for {policy}")),
    }
}

#[test]
fn the_rules_edges() {
    let v = validator();
    let act = |t: &str| json!({"type": t});
    let reload = |s: &str| json!({"type": "Reload", "reload": {"serviceName": s}});
    let restart = |s: &str| json!({"type": "Restart", "restart": {"serviceName": s}});
    let files = |actions: Value| json!({"files": [{"path": "/etc/a", "actions": actions}]});
    let many = |n: usize| json!({"files": (0..n).map(|i| json!({"path": format!("/etc/f{i}"), "actions": [{"type": "None"}]})).collect::<Vec<_>>()});
    let cases: Vec<Value> = vec![
        json!({}),
        files(json!([act("None")])),
        files(json!([act("Reboot")])),
        files(json!([act("Reboot"), act("Drain")])),
        files(json!([act("None"), act("DaemonReload")])),
        files(json!([
            act("Drain"),
            act("DaemonReload"),
            reload("crio.service")
        ])),
        files(json!([act("Special")])),
        files(json!([act("Bogus")])),
        files(json!([])),
        files(json!((0..10).map(|_| act("Drain")).collect::<Vec<_>>())),
        files(json!((0..11).map(|_| act("Drain")).collect::<Vec<_>>())),
        files(json!([act("Reload")])),
        files(json!([{"type": "Drain", "reload": {"serviceName": "a.service"}}])),
        files(json!([restart("a.service")])),
        files(json!([restart("a.bogus")])),
        files(json!([restart(".service")])),
        files(json!([restart("a b.service")])),
        files(json!([restart("a\\x2d:_.b.service")])),
        files(json!([restart(&format!("{}.service", "a".repeat(247)))])),
        files(json!([restart(&format!("{}.service", "a".repeat(248)))])),
        many(50),
        many(51),
        json!({"files": [
            {"path": "/etc/a", "actions": [act("None")]},
            {"path": "/etc/a", "actions": [act("Reboot")]}]}),
        json!({"units": [{"name": "a.service", "actions": [act("None")]}]}),
        json!({"units": [{"name": "a", "actions": [act("None")]}]}),
        json!({"units": [
            {"name": "a.service", "actions": [act("None")]},
            {"name": "a.service", "actions": [act("None")]}]}),
        json!({"sshkey": {"actions": [act("None")]}}),
        json!({"sshkey": {"actions": [act("Reboot"), act("Drain")]}}),
        json!({"sshkey": {"actions": []}}),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| agree(v, c).err().map(|e| format!("{c}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn action() -> impl Strategy<Value = Value> {
    let service = prop_oneof![
        Just("crio.service".to_owned()),
        Just("a.socket".to_owned()),
        Just("no-suffix".to_owned()),
        Just(".service".to_owned()),
        Just("sp ace.timer".to_owned()),
    ];
    (
        prop_oneof![
            Just("Reboot"),
            Just("Drain"),
            Just("Reload"),
            Just("Restart"),
            Just("DaemonReload"),
            Just("None"),
            Just("Special"),
        ],
        any::<bool>(),
        service,
    )
        .prop_map(|(t, with_service, s)| {
            let mut a = json!({"type": t});
            if with_service {
                match t {
                    "Reload" | "Drain" => a["reload"] = json!({"serviceName": s}),
                    _ => a["restart"] = json!({"serviceName": s}),
                }
            }
            a
        })
}

fn actions() -> impl Strategy<Value = Value> {
    prop::collection::vec(action(), 0..4).prop_map(Value::from)
}

fn policy() -> impl Strategy<Value = Value> {
    let path = prop_oneof![Just("/etc/a"), Just("/etc/b"), Just("/var/c")];
    let unit = prop_oneof![Just("a.service"), Just("b.path"), Just("nope")];
    (
        prop::collection::vec((path, actions()), 0..3),
        prop::collection::vec((unit, actions()), 0..3),
        prop::option::of(actions()),
    )
        .prop_map(|(files, units, ssh)| {
            let mut p = json!({
                "files": files.into_iter().map(|(p, a)| json!({"path": p, "actions": a})).collect::<Vec<_>>(),
                "units": units.into_iter().map(|(n, a)| json!({"name": n, "actions": a})).collect::<Vec<_>>(),
            });
            if let Some(a) = ssh {
                p["sshkey"] = json!({"actions": a});
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn generated_policies(p in policy()) {
        let v = validator();
        prop_assert!(agree(v, &p).is_ok(), "{}", agree(v, &p).unwrap_err());
    }
}
