//! The MCO's per-MachineConfig validation rules, one table each: kernelType, extensions,
//! file modes, Ignition parse and validation — with the MCO's messages and JSON paths.

use machineos_api::v1::MachineConfig;
use machineos_ignition::Warning;
use machineos_render::{Extension, KernelType, ValidateError, validate_machine_config};
use serde_json::{Value, json};

fn mc(name: &str, spec: Value) -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": spec,
    }))
    .unwrap()
}

fn check(cases: &[(Value, Result<(), &str>)]) {
    for (spec, want) in cases {
        let m = mc("99-test", spec.clone());
        match (validate_machine_config(&m), want) {
            (Ok(v), Ok(())) => {
                assert_eq!(v.source.name(), "99-test", "{spec}");
                assert_eq!(v.warnings, [], "{spec}");
                assert_eq!(
                    v.ignition.is_some(),
                    spec.get("config").is_some(),
                    "{spec}: the typed config is there when spec.config is"
                );
            }
            (Err(e), Err(msg)) => assert_eq!(e.to_string(), *msg, "{spec}"),
            (got, want) => panic!("{spec}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn kernel_type() {
    check(&[
        (json!({}), Ok(())),
        (json!({"kernelType": ""}), Ok(())),
        (json!({"kernelType": "default"}), Ok(())),
        (json!({"kernelType": "realtime"}), Ok(())),
        (json!({"kernelType": "64k-pages"}), Ok(())),
        (
            json!({"kernelType": "rt"}),
            Err("MachineConfig \"99-test\": error at $.spec.kernelType: kernelType=rt is invalid"),
        ),
        (
            json!({"kernelType": "Realtime"}),
            Err(
                "MachineConfig \"99-test\": error at $.spec.kernelType: kernelType=Realtime is invalid",
            ),
        ),
    ]);
    let m = mc("x", json!({"kernelType": "64k-pages"}));
    let parsed = validate_machine_config(&m).unwrap();
    assert_eq!(parsed.kernel_type, KernelType::SixtyFourKPages);
}

#[test]
fn extensions() {
    check(&[
        (
            json!({"extensions": ["two-node-ha", "ipsec", "usbguard", "kerberos", "kernel-devel",
                                  "sandboxed-containers", "sysstat"]}),
            Ok(()),
        ),
        (json!({"extensions": ["usbguard", "usbguard"]}), Ok(())),
        (
            json!({"config": {"ignition": {"version": "3.4.0"}},
                   "extensions": ["foo", "usbguard", "wasm"]}),
            Err(
                "MachineConfig \"99-test\": error at $.spec.extensions: invalid extensions found: [foo wasm]",
            ),
        ),
        // ValidateMachineConfig checks extensions only when the MachineConfig has a config.
        (json!({"extensions": ["foo", "usbguard", "wasm"]}), Ok(())),
    ]);
    let m = mc("x", json!({"extensions": ["sysstat", "ipsec"]}));
    let parsed = validate_machine_config(&m).unwrap();
    assert_eq!(parsed.extensions, [Extension::Sysstat, Extension::Ipsec]);
    let m = mc("x", json!({"extensions": ["foo", "usbguard"]}));
    let parsed = validate_machine_config(&m).unwrap();
    assert_eq!(
        (parsed.extensions, parsed.unchecked_extensions),
        (vec![Extension::Usbguard], vec!["foo".to_owned()])
    );
}

fn files(files: Value) -> Value {
    json!({"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}})
}

#[test]
fn file_modes() {
    let data = "data:,x";
    check(&[
        (
            files(json!([{"path": "/etc/a", "mode": 0o644, "contents": {"source": data}}])),
            Ok(()),
        ),
        (
            files(json!([{"path": "/etc/a", "mode": 0o777, "contents": {"source": data}}])),
            Ok(()),
        ),
        (
            files(json!([{"path": "/etc/a", "contents": {"source": data}}])),
            Ok(()),
        ),
        (
            files(json!([{"path": "/etc/a", "mode": 0o644},
                         {"path": "/usr/local/bin/suid", "mode": 0o1755, "contents": {"source": data}}])),
            Err(
                "MachineConfig \"99-test\": error at $.spec.config.storage.files.1.mode: invalid mode 01755 for /usr/local/bin/suid, cannot exceed 0777",
            ),
        ),
        (
            files(json!([{"path": "/etc/a", "mode": 0o4755, "contents": {"source": data}}])),
            Err(
                "MachineConfig \"99-test\": error at $.spec.config.storage.files.0.mode: invalid mode 04755 for /etc/a, cannot exceed 0777",
            ),
        ),
        (
            // Beyond 07777 Ignition's own validation rejects it first.
            files(json!([{"path": "/etc/a", "mode": 0o10000, "contents": {"source": data}}])),
            Err(
                "MachineConfig \"99-test\": error at $.spec.config.storage.files.0.mode: illegal file mode",
            ),
        ),
    ]);
    // Directories may carry special bits (the MCO checks files only); they stay as written
    // in the rendered config — masking them below spec 3.6.0 is for the layer that applies
    // it — and Ignition's validator warns about them.
    let m = mc(
        "99-test",
        json!({"config": {"ignition": {"version": "3.4.0"},
                          "storage": {"directories": [{"path": "/var/shared", "mode": 0o1777}]}}}),
    );
    let v = validate_machine_config(&m).unwrap();
    assert_eq!(
        v.warnings,
        [Warning::new(
            "$.spec.config.storage.directories.0.mode",
            "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0"
        )]
    );
    let dir = &v.ignition.unwrap().storage.directories[0];
    assert_eq!((dir.path.as_str(), dir.mode), ("/var/shared", Some(0o1777)));
}

#[test]
fn ignition_must_parse_and_validate() {
    check(&[
        (
            json!({"config": {"ignition": {"version": "3.0.0"}}}),
            Ok(()),
        ),
        (
            json!({"config": {"ignition": {"version": "3.5.0"}}}),
            Ok(()),
        ),
        (
            json!({"config": {"ignition": {"version": "3.4.0"},
                              "storage": {"files": [{"path": "etc/relative"}]}}}),
            Err(
                "MachineConfig \"99-test\": error at $.spec.config.storage.files.0.path: path not absolute",
            ),
        ),
        (
            json!({"config": {"ignition": {"version": "3.4.0"},
                              "systemd": {"units": [{"name": "foo.service", "contents": "[Unit]\n", "enabled": true,
                                                     "dropins": [{"name": "bad"}]}]}}}),
            Err(
                "MachineConfig \"99-test\": error at $.spec.config.systemd.units.0.dropins.0.name: invalid systemd drop-in extension",
            ),
        ),
    ]);
    // Version problems are located at $.spec.config.ignition.version.
    for version in [json!("2.3.0"), json!("3.7.0"), json!("three")] {
        let m = mc("v", json!({"config": {"ignition": {"version": version}}}));
        let err = validate_machine_config(&m).unwrap_err();
        let ValidateError::Ignition { name, path, .. } = &err else {
            panic!("{version}: {err}")
        };
        assert_eq!(
            (name.as_str(), path.as_str()),
            ("v", "$.spec.config.ignition.version"),
            "{err}"
        );
    }
    let err = validate_machine_config(&mc("v", json!({"config": {}}))).unwrap_err();
    assert!(
        matches!(err, ValidateError::Ignition { .. }),
        "an empty config has no version: {err}"
    );
}

#[test]
fn warnings_are_located_from_the_object_root() {
    let m = mc(
        "w",
        json!({"config": {"ignition": {"version": "3.4.0"},
                          "storage": {"files": [{"path": "/etc/a", "contnets": {"source": "data:,x"}}]}}}),
    );
    let parsed = validate_machine_config(&m).unwrap();
    let paths: Vec<&str> = parsed.warnings.iter().map(|w| w.path.as_str()).collect();
    assert!(
        paths.contains(&"$.spec.config.storage.files.0.contnets"),
        "{:?}",
        parsed.warnings
    );
}

#[test]
fn kernel_type_is_checked_before_ignition() {
    // The MCO's order: an MC wrong in both places reports the kernelType.
    let m = mc(
        "both",
        json!({"kernelType": "bogus", "config": {"ignition": {"version": "1.0.0"}}, "extensions": ["nope"]}),
    );
    assert!(matches!(
        validate_machine_config(&m),
        Err(ValidateError::KernelType { .. })
    ));
    let m = mc(
        "both",
        json!({"config": {"ignition": {"version": "1.0.0"}}, "extensions": ["nope"]}),
    );
    assert!(matches!(
        validate_machine_config(&m),
        Err(ValidateError::Ignition { .. })
    ));
}
