//! Pool membership: a pool manifest's machineConfigSelector with Kubernetes label-selector
//! semantics, the role-label convention without one, and the errors of each.

use machineos_api::v1::{MachineConfig, MachineConfigPool};
use machineos_render::{SelectError, select_for_pool};
use serde_json::{Value, json};

fn mc(name: &str, labels: Value) -> MachineConfig {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {}}))
        .unwrap()
}

fn pool(name: &str, selector: Value) -> MachineConfigPool {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"machineConfigSelector": selector}}),
    )
    .unwrap()
}

fn configs() -> Vec<MachineConfig> {
    vec![
        mc(
            "00-master",
            json!({"machineconfiguration.openshift.io/role": "master"}),
        ),
        mc(
            "00-worker",
            json!({"machineconfiguration.openshift.io/role": "worker"}),
        ),
        mc(
            "50-infra",
            json!({"machineconfiguration.openshift.io/role": "infra", "tier": "gold"}),
        ),
        mc(
            "60-gpu",
            json!({"machineconfiguration.openshift.io/role": "gpu", "tier": "silver"}),
        ),
        mc("70-unlabelled", Value::Null),
    ]
}

fn names(mcs: &[&MachineConfig]) -> Vec<String> {
    mcs.iter().map(|m| m.name().to_owned()).collect()
}

#[test]
fn by_pool_selector() {
    let role = "machineconfiguration.openshift.io/role";
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "worker",
            json!({"matchLabels": {role: "worker"}}),
            &["00-worker"],
        ),
        (
            "infra",
            json!({"matchExpressions": [{"key": role, "operator": "In", "values": ["worker", "infra"]}]}),
            &["00-worker", "50-infra"],
        ),
        (
            "notmaster",
            json!({"matchExpressions": [{"key": role, "operator": "NotIn", "values": ["master"]}]}),
            &["00-worker", "50-infra", "60-gpu", "70-unlabelled"],
        ),
        (
            "tiered",
            json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
            &["50-infra", "60-gpu"],
        ),
        (
            "untiered",
            json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            &["00-master", "00-worker", "70-unlabelled"],
        ),
        (
            "both",
            json!({"matchLabels": {"tier": "silver"},
                   "matchExpressions": [{"key": role, "operator": "In", "values": ["gpu", "infra"]}]}),
            &["60-gpu"],
        ),
    ];
    let mcs = configs();
    for (name, selector, want) in cases {
        let p = pool(name, selector.clone());
        let got = select_for_pool(Some(&p), name, &mcs).unwrap();
        assert_eq!(names(&got), *want, "{name}: {selector}");
    }
}

#[test]
fn by_role_convention() {
    let cases: &[(&str, &[&str])] = &[
        ("worker", &["00-worker"]),
        ("master", &["00-master"]),
        ("infra", &["00-worker", "50-infra"]),
        ("gpu", &["00-worker", "60-gpu"]),
        ("edge", &["00-worker"]),
    ];
    let mcs = configs();
    for (pool_name, want) in cases {
        assert_eq!(
            names(&select_for_pool(None, pool_name, &mcs).unwrap()),
            *want,
            "{pool_name}"
        );
    }
}

#[test]
fn errors() {
    let role = "machineconfiguration.openshift.io/role";
    let cases: Vec<(Option<MachineConfigPool>, &str, &str)> = vec![
        (
            Some(pool(
                "p",
                json!({"matchExpressions": [{"key": role, "operator": "Equals", "values": ["x"]}]}),
            )),
            "p",
            "MachineConfigPool \"p\": error at $.spec.machineConfigSelector.matchExpressions.0.operator: \"Equals\" is not a valid label selector operator",
        ),
        (
            Some(pool(
                "p",
                json!({"matchExpressions": [{"key": "a", "operator": "Exists"},
                                                        {"key": role, "operator": "In", "values": []}]}),
            )),
            "p",
            "MachineConfigPool \"p\": error at $.spec.machineConfigSelector.matchExpressions.1.values: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            Some(pool(
                "p",
                json!({"matchExpressions": [{"key": role, "operator": "DoesNotExist", "values": ["x"]}]}),
            )),
            "p",
            "MachineConfigPool \"p\": error at $.spec.machineConfigSelector.matchExpressions.0.values: values set must be empty for exists and does not exist",
        ),
        (
            Some(pool("p", Value::Null)),
            "p",
            "MachineConfigPool \"p\": spec.machineConfigSelector is missing or empty, so it selects no MachineConfigs",
        ),
        (
            Some(pool("p", json!({}))),
            "p",
            "MachineConfigPool \"p\": spec.machineConfigSelector is missing or empty, so it selects no MachineConfigs",
        ),
        (
            Some(pool("p", json!({"matchLabels": {role: "nobody"}}))),
            "p",
            "couldn't find any MachineConfigs for pool: p (1 MachineConfig exists, none with labels matching the pool's selector machineconfiguration.openshift.io/role=nobody; 00-worker has machineconfiguration.openshift.io/role=worker)",
        ),
        (
            Some(pool("worker", json!({"matchLabels": {role: "worker"}}))),
            "infra",
            "MachineConfigPool manifest is named \"worker\", not \"infra\"",
        ),
        (
            None,
            "master",
            "couldn't find any MachineConfigs for pool: master (1 MachineConfig exists, none with labels matching the pool's selector machineconfiguration.openshift.io/role=master; 00-worker has machineconfiguration.openshift.io/role=worker)",
        ),
    ];
    let only_workers = vec![mc("00-worker", json!({role: "worker"}))];
    for (p, name, want) in cases {
        let err = select_for_pool(p.as_ref(), name, &only_workers).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
    assert!(matches!(
        select_for_pool(None, "worker", &[]),
        Err(SelectError::NoMachineConfigs { .. })
    ));
}
