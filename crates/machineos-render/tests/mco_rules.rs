//! The MCO rules machineos used to get wrong (issue 11, "Rules that differ today"), one test
//! each, with the MCO's code they follow.

use machineos_api::v1::MachineConfig;
use machineos_diagnostics::Classify;
use machineos_render::{RenderDefaults, RenderError, Rendered, render};
use serde_json::{Value, json};

const GENERATED: &str = "machineconfiguration.openshift.io/generated-by-controller-version";

fn mc(name: &str, annotations: Value, spec: Value) -> MachineConfig {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations,
                     "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": spec,
    }))
    .expect("a MachineConfig")
}

fn defaults() -> RenderDefaults {
    RenderDefaults {
        os_image_url: "quay.io/openshift/rhcos@sha256:aaaa".into(),
        base_os_extensions_container_image: "quay.io/openshift/ext@sha256:bbbb".into(),
        os_image_stream: String::new(),
    }
}

fn run(mcs: &[MachineConfig], d: &RenderDefaults) -> Result<Rendered, RenderError> {
    render("worker", &mcs.iter().collect::<Vec<_>>(), d)
}

/// MergeMachineConfigs skips a MachineConfig's osImageURL only when
/// `cfg.Annotations[GeneratedByControllerVersionAnnotationKey] != ""`.
#[test]
fn an_empty_generated_by_annotation_is_a_user_machine_config() {
    let spec = json!({"osImageURL": "quay.io/me/custom@sha256:cccc",
                      "baseOSExtensionsContainerImage": "quay.io/me/ext@sha256:dddd"});
    for (annotations, overrides) in [
        (json!({GENERATED: ""}), true),
        (json!({}), true),
        (json!({GENERATED: "4.20.0-abc"}), false),
    ] {
        let r = run(
            &[mc("99-x", annotations.clone(), spec.clone())],
            &defaults(),
        )
        .expect("renders");
        let got = &r.machine_config.spec;
        let want = if overrides {
            (
                "quay.io/me/custom@sha256:cccc",
                "quay.io/me/ext@sha256:dddd",
            )
        } else {
            (
                "quay.io/openshift/rhcos@sha256:aaaa",
                "quay.io/openshift/ext@sha256:bbbb",
            )
        };
        assert_eq!(
            (
                got.os_image_url.as_str(),
                got.base_os_extensions_container_image.as_str()
            ),
            want,
            "{annotations}"
        );
    }
}

/// ValidateMachineConfig checks extensions inside `if cfg.Config.Raw != nil`.
#[test]
fn extensions_are_checked_only_with_a_config() {
    let r = run(
        &[
            mc(
                "10-x",
                json!({}),
                json!({"config": {"ignition": {"version": "3.4.0"}}}),
            ),
            mc(
                "20-x",
                json!({}),
                json!({"extensions": ["usbguard", "wasm"]}),
            ),
        ],
        &defaults(),
    )
    .expect("the MCO renders it");
    assert_eq!(r.machine_config.spec.extensions, ["usbguard", "wasm"]);
    assert_eq!(r.extensions, [machineos_render::Extension::Usbguard]);
    assert!(
        r.warnings.iter().any(|w| w.machine_config == "20-x"
            && w.warning.path == "$.spec.extensions"
            && w.warning.message.contains("\"wasm\" is not supported")),
        "{:?}",
        r.warnings
    );
    let e = run(
        &[mc(
            "20-x",
            json!({}),
            json!({"config": {"ignition": {"version": "3.4.0"}}, "extensions": ["wasm"]}),
        )],
        &defaults(),
    )
    .expect_err("with a config, the MCO refuses it");
    assert!(
        e.to_string().contains("invalid extensions found: [wasm]"),
        "{e}"
    );
}

/// The MCO parses into 3.5.0 Go types, where a mode is the integer written: special bits
/// stay in the rendered config (directories; files with them are refused).
#[test]
fn modes_are_kept_as_written() {
    let r = run(
        &[mc(
            "10-x",
            json!({}),
            json!({"config": {"ignition": {"version": "3.2.0"},
            "storage": {"directories": [{"path": "/var/shared", "mode": 0o1777}]}}}),
        )],
        &defaults(),
    )
    .expect("renders");
    let config = r.machine_config.spec.config.as_ref().expect("config");
    assert_eq!(config["storage"]["directories"][0]["mode"], json!(0o1777));
    assert_eq!(config["ignition"]["version"], "3.5.0");
}

/// A 3.6.0 input renders 3.6.0, so its special bits are applied (the MCO refuses 3.6.0).
#[test]
fn a_3_6_input_renders_3_6() {
    let r = run(
        &[
            mc(
                "10-x",
                json!({}),
                json!({"config": {"ignition": {"version": "3.4.0"}}}),
            ),
            mc(
                "20-x",
                json!({}),
                json!({"config": {"ignition": {"version": "3.6.0"},
                "storage": {"directories": [{"path": "/srv/drop", "mode": 0o3775}]}}}),
            ),
        ],
        &defaults(),
    )
    .expect("renders");
    let config = r.machine_config.spec.config.as_ref().expect("config");
    assert_eq!(config["ignition"]["version"], "3.6.0");
    assert_eq!(config["storage"]["directories"][0]["mode"], json!(0o3775));
}

/// generateRenderedMachineConfig: "cannot override MachineConfig osImageURL and set
/// MachineConfigPool spec.osImageStream.name simultaneously".
#[test]
fn an_os_image_override_is_refused_on_a_pool_with_a_stream() {
    let mut d = defaults();
    d.os_image_stream = "rhel-10".into();
    let custom = mc(
        "99-x",
        json!({}),
        json!({"osImageURL": "quay.io/me/custom@sha256:cccc"}),
    );
    let e = run(std::slice::from_ref(&custom), &d).expect_err("refused");
    assert_eq!(e.reason(), "OSImageURLWithStream");
    assert!(
        e.to_string().contains(
            "cannot override MachineConfig osImageURL and set MachineConfigPool spec.osImageStream.name simultaneously"
        ),
        "{e}"
    );
    // Without the override, the stream is fine.
    run(&[mc("99-x", json!({}), json!({}))], &d).expect("no override, no conflict");
    // And without the stream, the override is fine.
    run(&[custom], &defaults()).expect("no stream, no conflict");
}

/// ValidateMachineConfigSize: Go's JSON of the rendered MachineConfig over 1 572 864 bytes.
#[test]
fn a_rendered_config_over_the_size_limit_is_refused() {
    let files = |n: usize, size: usize| {
        (0..n)
            .map(|i| json!({"path": format!("/etc/big/{i}"), "contents": {"source": format!("data:,{}", "x".repeat(size))}}))
            .collect::<Vec<_>>()
    };
    let big = |n, size| {
        mc(
            "10-x",
            json!({}),
            json!({"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files(n, size)}}}),
        )
    };
    let e = run(&[big(4, 400_000)], &defaults()).expect_err("too large");
    assert_eq!(e.reason(), "RenderedConfigTooLarge");
    let text = e.to_string();
    assert!(
        text.starts_with("rendered MachineConfig rendered-worker-"),
        "{text}"
    );
    assert!(
        text.contains("bytes, max 1572864 bytes). This will exceed etcd's size limit."),
        "{text}"
    );
    run(&[big(3, 400_000)], &defaults()).expect("1.2 MB is under the limit");
}

/// A spec Go's YAML library cannot write (a raw DEL in a unit) fails the MCO's naming:
/// "error converting JSON to YAML: yaml: control characters are not allowed".
#[test]
fn control_characters_are_refused_naming_the_machine_config() {
    let e = run(
        &[
            mc(
                "10-x",
                json!({}),
                json!({"config": {"ignition": {"version": "3.4.0"}}}),
            ),
            mc(
                "20-x",
                json!({}),
                json!({"config": {"ignition": {"version": "3.4.0"},
                "systemd": {"units": [{"name": "a.service", "contents": "[Unit]\nDescription=a\u{7f}b\n"}]}}}),
            ),
        ],
        &defaults(),
    )
    .expect_err("refused");
    assert_eq!(e.reason(), "ControlCharacters", "{e}");
    let text = e.to_string();
    assert!(
        text.contains("error converting JSON to YAML: yaml: control characters are not allowed"),
        "{text}"
    );
    assert!(
        text.contains("$.config.systemd.units[0].contents"),
        "{text}"
    );
    assert!(text.contains("(from MachineConfig \"20-x\")"), "{text}");
}

/// A spec 2.2.0 config is taken as the MCO takes it (`IgnParseWrapper`,
/// `removeIgnDuplicateFilesUnitsUsers`, the converter to 3.5.0; machineos-ignition-spec2):
/// duplicate files last-wins and newest first, SSH keys of `core` merged once each, then it
/// merges with 3.x configs as usual.
#[test]
fn a_spec_2_2_config_is_converted_as_the_mco_converts_it() {
    let old = mc(
        "00-old",
        json!({}),
        json!({"config": {"ignition": {"version": "2.2.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a", "ssh-ed25519 AAAA a"]}]},
        "storage": {"files": [
            {"filesystem": "root", "path": "/etc/a", "mode": 420, "contents": {"source": "data:,first"}},
            {"filesystem": "root", "path": "/etc/b", "mode": 420, "contents": {"source": "data:,b"}},
            {"filesystem": "root", "path": "/etc/a", "mode": 384, "contents": {"source": "data:,second"}}
        ]}}}),
    );
    let new = mc(
        "10-new",
        json!({}),
        json!({"config": {"ignition": {"version": "3.2.0"},
            "storage": {"files": [{"path": "/etc/c", "contents": {"source": "data:,c"}}]}}}),
    );
    let r = run(&[old, new], &defaults()).expect("the MCO renders it");
    let config = r.machine_config.spec.config.as_ref().expect("config");
    assert_eq!(config["ignition"]["version"], "3.5.0");
    let files: Vec<(&str, &str, i64)> = config["storage"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or_default(),
                f["contents"]["source"].as_str().unwrap_or_default(),
                f["mode"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("/etc/a", "data:,second", 0o600),
            ("/etc/b", "data:,b", 0o644),
            ("/etc/c", "data:,c", 0)
        ]
    );
    assert_eq!(
        config["passwd"]["users"],
        json!([{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a"]}])
    );
}
