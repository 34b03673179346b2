//! Every public error of machineos-render classified for a controller: a stable reason valid
//! as a Kubernetes condition reason, permanent (rendering is pure), and a message that tells
//! its whole story without also exposing the cause as `source()`.

use machineos_api::v1::{MachineConfig, MachineConfigPool};
use machineos_diagnostics::{Classify, Retry, check_chain, is_valid_reason};
use machineos_render::{
    DecodeError, KernelType, LoadError, RenderDefaults, RenderError, SelectError, SelectorError,
    ValidateError, load_machine_configs, load_manifests, render, select_for_pool,
    validate_machine_config,
};
use serde_json::{Value, json};

/// Asserts the convention for causes and the reason format, then returns the classification.
fn classified<E: Classify + std::error::Error + 'static>(e: &E) -> (&'static str, Retry) {
    assert_eq!(check_chain(e), Ok(()), "{e}");
    assert!(is_valid_reason(e.reason()), "{:?} for {e}", e.reason());
    (e.reason(), e.retry())
}

fn mc(name: &str, labels: Value, spec: Value) -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .unwrap()
}

fn worker(name: &str, spec: Value) -> MachineConfig {
    mc(
        name,
        json!({"machineconfiguration.openshift.io/role": "worker"}),
        spec,
    )
}

fn pool(name: &str, selector: Value) -> MachineConfigPool {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"machineConfigSelector": selector}}),
    )
    .unwrap()
}

#[test]
fn load_errors() {
    const MC: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n";
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0xff, 0xfe], "InvalidManifest"),
        (b"a: [unclosed\n".to_vec(), "InvalidManifest"),
        (b"{\"a\": }".to_vec(), "InvalidManifest"),
        (b"- a\n- b\n".to_vec(), "InvalidManifest"),
        (
            format!("{MC}metadata: {{name: c}}\nspec: {{config: [not, an, object]}}\n").into(),
            "InvalidManifest",
        ),
        (
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n".to_vec(),
            "UnsupportedObjectKind",
        ),
    ];
    for (bytes, reason) in cases {
        let e = load_manifests("m.yaml", &bytes).unwrap_err();
        assert_eq!(classified(&e), (reason, Retry::Permanent), "{e}");
    }
    let pool_yaml = b"apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec: {}\n";
    let e = load_machine_configs("pool.yaml", pool_yaml).unwrap_err();
    assert_eq!(
        e,
        LoadError::UnexpectedPool {
            file: "pool.yaml".into(),
            name: "worker".into()
        }
    );
    assert_eq!(
        classified(&e),
        ("UnexpectedMachineConfigPool", Retry::Permanent)
    );
    let decode = DecodeError {
        file: "m.yaml".into(),
        document: 1,
        kind: "MachineConfig".into(),
        name: "c".into(),
        path: "$.spec.config".into(),
        message: "invalid type".into(),
    };
    assert_eq!(classified(&decode), ("InvalidManifest", Retry::Permanent));
    assert_eq!(
        classified(&LoadError::Decode(Box::new(decode))),
        ("InvalidManifest", Retry::Permanent)
    );
}

#[test]
fn select_errors() {
    let role = "machineconfiguration.openshift.io/role";
    let only_workers = vec![worker("00-worker", json!({}))];
    let cases: Vec<(Option<MachineConfigPool>, &str, &str)> = vec![
        (
            Some(pool(
                "p",
                json!({"matchExpressions": [{"key": role, "operator": "Equals", "values": ["x"]}]}),
            )),
            "p",
            "InvalidLabelSelector",
        ),
        (
            Some(pool("p", Value::Null)),
            "p",
            "EmptyMachineConfigSelector",
        ),
        (
            Some(pool("worker", json!({"matchLabels": {role: "worker"}}))),
            "infra",
            "PoolNameMismatch",
        ),
        (
            Some(pool("p", json!({"matchLabels": {role: "nobody"}}))),
            "p",
            "NoMachineConfigSelected",
        ),
        (None, "master", "NoMachineConfigSelected"),
    ];
    for (p, name, reason) in cases {
        let e = select_for_pool(p.as_ref(), name, &only_workers).unwrap_err();
        assert_eq!(classified(&e), (reason, Retry::Permanent), "{e}");
    }
    // The selector's error is in the message, and not also the source().
    let p = pool(
        "p",
        json!({"matchExpressions": [{"key": role, "operator": "Equals", "values": ["x"]}]}),
    );
    let e = select_for_pool(Some(&p), "p", &only_workers).unwrap_err();
    let inner = SelectorError {
        path: "matchExpressions.0.operator".into(),
        message: "\"Equals\" is not a valid label selector operator".into(),
    };
    assert_eq!(
        e,
        SelectError::InvalidSelector {
            pool: "p".into(),
            error: inner.clone()
        }
    );
    assert!(std::error::Error::source(&e).is_none());
    assert_eq!(
        classified(&inner),
        ("InvalidLabelSelector", Retry::Permanent)
    );
}

#[test]
fn validate_errors() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"kernelType": "rt"}), "InvalidKernelType"),
        (
            json!({"config": {"ignition": {"version": "2.3.0"}}}),
            "UnsupportedSpecVersion",
        ),
        (
            json!({"config": {"ignition": {"version": "3.7.0"}}}),
            "UnsupportedSpecVersion",
        ),
        (json!({"config": {}}), "InvalidConfig"),
        (
            json!({"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "a"}]}}}),
            "InvalidConfig",
        ),
        (
            json!({"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/a", "mode": "0644"}]}}}),
            "InvalidConfig",
        ),
        (
            json!({"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/a", "mode": 0o4755}]}}}),
            "InvalidFileMode",
        ),
        // Checked only when the MachineConfig carries a config, as the MCO does.
        (
            json!({"config": {"ignition": {"version": "3.4.0"}}, "extensions": ["wasm"]}),
            "UnsupportedExtension",
        ),
    ];
    for (spec, reason) in cases {
        let m = worker("99-test", spec.clone());
        let e = validate_machine_config(&m).unwrap_err();
        assert_eq!(classified(&e), (reason, Retry::Permanent), "{spec}: {e}");
    }
    let m = worker("v", json!({"config": {"ignition": {"version": "3.7.0"}}}));
    assert_eq!(
        validate_machine_config(&m).unwrap_err(),
        ValidateError::Ignition {
            name: "v".into(),
            path: "$.spec.config.ignition.version".into(),
            message: "unsupported config version \"3.7.0\" (supported: 3.0.0 to 3.6.0)".into(),
            reason: "UnsupportedSpecVersion",
        }
    );
    // A spec 2 version the MCO's converter does not know: its IgnParseWrapper's refusal.
    let m = worker("v", json!({"config": {"ignition": {"version": "2.3.0"}}}));
    let e = validate_machine_config(&m).unwrap_err();
    let ValidateError::Ignition { path, message, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(path, "$.spec.config.ignition.version", "{e}");
    assert_eq!(
        message,
        "parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5"
    );
}

#[test]
fn render_errors() {
    let defaults = RenderDefaults::default();
    let run = |pool: &str, mcs: &[MachineConfig]| {
        let refs: Vec<&MachineConfig> = mcs.iter().collect();
        render(pool, &refs, &defaults).unwrap_err()
    };
    let ok = worker("00-worker", json!({}));
    let cases: Vec<(&str, Vec<MachineConfig>, &str)> = vec![
        ("Worker", vec![ok.clone()], "InvalidPoolName"),
        ("worker", vec![], "NoMachineConfigSelected"),
        (
            "worker",
            vec![ok.clone(), worker("", json!({}))],
            "InvalidMachineConfig",
        ),
        (
            "worker",
            vec![ok.clone(), mc("99-bare", Value::Null, json!({}))],
            "InvalidMachineConfig",
        ),
        (
            "worker",
            vec![ok.clone(), ok.clone()],
            "DuplicateMachineConfig",
        ),
        (
            "worker",
            vec![
                ok.clone(),
                worker("50-bad", json!({"kernelType": "lowlatency"})),
            ],
            "InvalidKernelType",
        ),
        (
            "worker",
            vec![
                ok.clone(),
                worker(
                    "50-old",
                    json!({"config": {"ignition": {"version": "2.3.0"}}}),
                ),
            ],
            "UnsupportedSpecVersion",
        ),
        (
            "worker",
            vec![
                worker("10-worker", json!({"extensions": ["kernel-devel"]})),
                worker("20-worker", json!({"kernelType": "realtime"})),
            ],
            "IncompatibleExtension",
        ),
    ];
    for (pool, mcs, reason) in cases {
        let e = run(pool, &mcs);
        assert_eq!(classified(&e), (reason, Retry::Permanent), "{e}");
    }
    let e = run(
        "worker",
        &[
            worker("10-worker", json!({"extensions": ["kernel-devel"]})),
            worker("20-worker", json!({"kernelType": "64k-pages"})),
        ],
    );
    assert_eq!(
        e,
        RenderError::KernelDevel {
            kernel_type: KernelType::SixtyFourKPages,
            extension_from: "10-worker".into(),
            kernel_type_from: "20-worker".into(),
        }
    );
}
