//! The MCO's merge rules (its `MergeMachineConfigs`), one table per rule: order, labels,
//! Ignition merge (with the compression and overwrite fix-ups), fips, kernelType,
//! kernelArguments, extensions, kernel-devel, osImageURL and the extensions image, and the
//! content-hash name.

use machineos_api::v1::MachineConfig;
use machineos_render::{Extension, KernelType, RenderDefaults, RenderError, Rendered, render};
use serde_json::{Value, json};

const GENERATED: &str = "machineconfiguration.openshift.io/generated-by-controller-version";

fn mc(name: &str, role: Option<&str>, spec: Value) -> MachineConfig {
    let labels = match role {
        Some(r) => json!({"machineconfiguration.openshift.io/role": r}),
        None => Value::Null,
    };
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .unwrap()
}

fn generated(mut m: MachineConfig) -> MachineConfig {
    m.metadata.annotations = Some([(GENERATED.to_owned(), "abc123".to_owned())].into());
    m
}

fn team_labelled(mut m: MachineConfig) -> MachineConfig {
    m.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    m
}

fn defaults() -> RenderDefaults {
    RenderDefaults {
        os_image_url: "quay.io/fedora/fedora-coreos:stable".into(),
        base_os_extensions_container_image: "quay.io/example/extensions:1".into(),
        os_image_stream: String::new(),
    }
}

fn run(pool: &str, mcs: &[MachineConfig]) -> Result<Rendered, RenderError> {
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    render(pool, &refs, &defaults())
}

fn karg(name: &str, role: Option<&str>) -> MachineConfig {
    mc(name, role, json!({"kernelArguments": [name]}))
}

#[test]
fn merge_order_is_workers_by_name_then_others_by_name() {
    let cases: &[(&str, Vec<MachineConfig>, &[&str])] = &[
        (
            "worker",
            vec![
                karg("99-worker-b", Some("worker")),
                karg("00-worker", Some("worker")),
                karg("50-worker-a", Some("worker")),
            ],
            &["00-worker", "50-worker-a", "99-worker-b"],
        ),
        (
            // A custom pool: its own MachineConfigs come after every worker one, whatever the names.
            "infra",
            vec![
                karg("99-infra-a", Some("infra")),
                karg("00-worker", Some("worker")),
                karg("50-infra-b", Some("infra")),
                karg("99-worker-z", Some("worker")),
                karg("05-other", Some("other")),
            ],
            &[
                "00-worker",
                "99-worker-z",
                "05-other",
                "50-infra-b",
                "99-infra-a",
            ],
        ),
        (
            "master",
            vec![
                karg("99-master-x", Some("master")),
                karg("00-master", Some("master")),
            ],
            &["00-master", "99-master-x"],
        ),
        (
            // Labels without a role count as "other".
            "infra",
            vec![
                team_labelled(karg("01-unroled", None)),
                karg("00-worker", Some("worker")),
            ],
            &["00-worker", "01-unroled"],
        ),
    ];
    for (pool, mcs, want) in cases {
        let r = run(pool, mcs).unwrap();
        assert_eq!(r.machine_config.spec.kernel_arguments, *want, "pool {pool}");
        let source: Vec<&str> = r
            .source
            .iter()
            .map(|s| s.name.as_deref().unwrap())
            .collect();
        // The MCO writes the pool's source list after its merge reordered the slice.
        assert_eq!(source, *want, "source is in merge order");
        assert!(
            r.source
                .iter()
                .all(|s| s.kind.as_deref() == Some("MachineConfig")
                    && s.api_version.as_deref() == Some("machineconfiguration.openshift.io/v1"))
        );
    }
}

#[test]
fn input_errors() {
    let cases: Vec<(&str, Vec<MachineConfig>, &str)> = vec![
        (
            "worker",
            vec![],
            "couldn't find any MachineConfigs for pool: worker",
        ),
        (
            "worker",
            vec![
                karg("00-worker", Some("worker")),
                mc("99-bare", None, json!({})),
            ],
            "cannot find label in MachineConfig 99-bare",
        ),
        (
            "worker",
            vec![
                karg("00-worker", Some("worker")),
                karg("00-worker", Some("worker")),
            ],
            "MachineConfig \"00-worker\" is given more than once",
        ),
        (
            "Worker",
            vec![karg("00-worker", Some("worker"))],
            "pool name \"Worker\" is not a lowercase RFC 1123 subdomain",
        ),
        (
            "",
            vec![karg("00-worker", Some("worker"))],
            "pool name \"\" is not a lowercase RFC 1123 subdomain",
        ),
        (
            "worker",
            vec![
                karg("00-worker", Some("worker")),
                mc("", Some("worker"), json!({})),
            ],
            "MachineConfig number 1 (0-based) of pool \"worker\" has no metadata.name",
        ),
        (
            // Validation runs over every MachineConfig before merging.
            "worker",
            vec![
                karg("00-worker", Some("worker")),
                mc(
                    "50-bad",
                    Some("worker"),
                    json!({"kernelType": "lowlatency"}),
                ),
            ],
            "MachineConfig \"50-bad\": error at $.spec.kernelType: kernelType=lowlatency is invalid",
        ),
    ];
    for (pool, mcs, want) in cases {
        let err = run(pool, &mcs).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn fips_is_an_or() {
    let cases: &[(&[bool], bool)] = &[
        (&[false, false], false),
        (&[true, false], true),
        (&[false, true], true),
    ];
    for (flags, want) in cases {
        let mcs: Vec<MachineConfig> = flags
            .iter()
            .enumerate()
            .map(|(i, f)| {
                mc(
                    &format!("{i:02}-worker"),
                    Some("worker"),
                    json!({"fips": f}),
                )
            })
            .collect();
        assert_eq!(
            run("worker", &mcs).unwrap().machine_config.spec.fips,
            *want,
            "{flags:?}"
        );
    }
}

#[test]
fn kernel_type_is_the_last_non_default() {
    let cases: &[(&[&str], KernelType)] = &[
        (&["", ""], KernelType::Default),
        (&["default"], KernelType::Default),
        (&["realtime", ""], KernelType::Realtime),
        (&["realtime", "default"], KernelType::Realtime),
        (&["realtime", "64k-pages"], KernelType::SixtyFourKPages),
        (&["64k-pages", "realtime", "default"], KernelType::Realtime),
    ];
    for (types, want) in cases {
        let mcs: Vec<MachineConfig> = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                mc(
                    &format!("{i:02}-worker"),
                    Some("worker"),
                    json!({"kernelType": t}),
                )
            })
            .collect();
        let r = run("worker", &mcs).unwrap();
        assert_eq!(r.kernel_type, *want, "{types:?}");
        assert_eq!(
            r.machine_config.spec.kernel_type,
            want.as_str(),
            "{types:?}"
        );
    }
}

#[test]
fn kernel_arguments_and_extensions_concatenate() {
    let mcs = vec![
        mc(
            "10-worker",
            Some("worker"),
            json!({"kernelArguments": ["a=1", "b"], "extensions": ["usbguard"]}),
        ),
        mc(
            "20-worker",
            Some("worker"),
            json!({"kernelArguments": ["b", "c d"], "extensions": ["usbguard", "sysstat"]}),
        ),
        mc("30-worker", Some("worker"), json!({})),
    ];
    let r = run("worker", &mcs).unwrap();
    assert_eq!(
        r.machine_config.spec.kernel_arguments,
        ["a=1", "b", "b", "c d"]
    );
    assert_eq!(
        r.machine_config.spec.extensions,
        ["usbguard", "usbguard", "sysstat"]
    );
}

#[test]
fn kernel_devel_needs_the_default_kernel() {
    let cases: &[(&str, Result<(), &str>)] = &[
        ("", Ok(())),
        ("default", Ok(())),
        (
            "realtime",
            Err(
                "installing kernel-devel extension is not supported with kernelType: realtime (kernel-devel from MachineConfig \"10-worker\", kernelType from MachineConfig \"20-worker\")",
            ),
        ),
        (
            "64k-pages",
            Err(
                "installing kernel-devel extension is not supported with kernelType: 64k-pages (kernel-devel from MachineConfig \"10-worker\", kernelType from MachineConfig \"20-worker\")",
            ),
        ),
    ];
    for (kernel, want) in cases {
        let mcs = vec![
            mc(
                "10-worker",
                Some("worker"),
                json!({"extensions": ["kernel-devel"]}),
            ),
            mc("20-worker", Some("worker"), json!({"kernelType": kernel})),
        ];
        match (run("worker", &mcs), want) {
            (Ok(r), Ok(())) => {
                assert_eq!(r.kernel_type, KernelType::Default, "{kernel}");
                assert_eq!(r.extensions, [Extension::KernelDevel], "{kernel}");
            }
            (Err(e), Err(msg)) => assert_eq!(e.to_string(), *msg),
            (got, want) => panic!("{kernel}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn os_images_default_and_user_overrides() {
    let d = defaults();
    let cases: Vec<(&str, Vec<MachineConfig>, &str, &str, bool)> = vec![
        (
            "defaults",
            vec![mc("00-worker", Some("worker"), json!({}))],
            &d.os_image_url,
            &d.base_os_extensions_container_image,
            false,
        ),
        (
            "last non-empty user value wins",
            vec![
                mc(
                    "10-worker",
                    Some("worker"),
                    json!({"osImageURL": "quay.io/a/os:1", "baseOSExtensionsContainerImage": "quay.io/a/ext:1"}),
                ),
                mc(
                    "20-worker",
                    Some("worker"),
                    json!({"osImageURL": "quay.io/b/os:2"}),
                ),
                mc("30-worker", Some("worker"), json!({})),
            ],
            "quay.io/b/os:2",
            "quay.io/a/ext:1",
            true,
        ),
        (
            "generated MachineConfigs do not override",
            vec![
                mc(
                    "10-worker",
                    Some("worker"),
                    json!({"osImageURL": "quay.io/a/os:1"}),
                ),
                generated(mc(
                    "99-generated",
                    Some("worker"),
                    json!({"osImageURL": "quay.io/release/os:9",
                    "baseOSExtensionsContainerImage": "quay.io/release/ext:9"}),
                )),
            ],
            "quay.io/a/os:1",
            &d.base_os_extensions_container_image,
            true,
        ),
        (
            "merge order decides, not name order: custom role after worker",
            vec![
                mc(
                    "99-worker",
                    Some("worker"),
                    json!({"osImageURL": "quay.io/w/os:1"}),
                ),
                mc(
                    "00-infra",
                    Some("infra"),
                    json!({"osImageURL": "quay.io/i/os:1"}),
                ),
            ],
            "quay.io/i/os:1",
            &d.base_os_extensions_container_image,
            true,
        ),
        (
            "override equal to the default is no override",
            vec![mc(
                "10-worker",
                Some("worker"),
                json!({"osImageURL": d.os_image_url}),
            )],
            &d.os_image_url,
            &d.base_os_extensions_container_image,
            false,
        ),
    ];
    for (what, mcs, os, ext, overridden) in cases {
        let pool = if mcs.iter().any(|m| m.role() == Some("infra")) {
            "infra"
        } else {
            "worker"
        };
        let r = run(pool, &mcs).unwrap();
        assert_eq!(r.machine_config.spec.os_image_url, os, "{what}");
        assert_eq!(
            r.machine_config.spec.base_os_extensions_container_image, ext,
            "{what}"
        );
        let annotation = r
            .machine_config
            .annotation("machineconfiguration.openshift.io/os-image-url-overridden");
        assert_eq!(annotation == Some("true"), overridden, "{what}");
        assert!(
            r.machine_config.is_generated_by_controller(),
            "{what}: rendered MCs are marked generated"
        );
    }
}

fn ign(files: Value) -> Value {
    json!({"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": files}}})
}

/// The rendered files in machineos's model (the spec holds them as Go's types encode them,
/// checked in `ignition_merge_and_fixups`).
fn rendered_files(r: &Rendered) -> Value {
    serde_json::to_value(&r.ignition).unwrap()["storage"]["files"].clone()
}

#[test]
fn ignition_merge_and_fixups() {
    const OLD_GZ: &str = "data:;base64,H4sIAAAAAAAC/8vPSeECALBNiOIEAAAA";
    let cases: Vec<(&str, Vec<MachineConfig>, Value)> = vec![
        (
            "a later file replaces an earlier one field-wise; overwrite defaults to true",
            vec![
                mc(
                    "10-worker",
                    Some("worker"),
                    ign(
                        json!([{"path": "/etc/a", "mode": 0o600, "contents": {"source": "data:,one"}}]),
                    ),
                ),
                mc(
                    "20-worker",
                    Some("worker"),
                    ign(json!([{"path": "/etc/a", "contents": {"source": "data:,two"}}])),
                ),
            ],
            json!([{"path": "/etc/a", "overwrite": true, "contents": {"source": "data:,two"}, "mode": 0o600}]),
        ),
        (
            "a parent's gzip does not survive a child's plain contents (butane#332)",
            vec![
                mc(
                    "10-worker",
                    Some("worker"),
                    ign(
                        json!([{"path": "/etc/b", "contents": {"source": OLD_GZ, "compression": "gzip"}}]),
                    ),
                ),
                mc(
                    "20-worker",
                    Some("worker"),
                    ign(json!([{"path": "/etc/b", "contents": {"source": "data:,new"}}])),
                ),
            ],
            json!([{"path": "/etc/b", "overwrite": true, "contents": {"source": "data:,new"}}]),
        ),
        (
            "an explicit empty compression stays when no merge happens (the MCO clears it only after a merge)",
            vec![mc(
                "10-worker",
                Some("worker"),
                ign(
                    json!([{"path": "/etc/c", "contents": {"source": "data:,c", "compression": ""}}]),
                ),
            )],
            json!([{"path": "/etc/c", "overwrite": true, "contents": {"source": "data:,c", "compression": ""}}]),
        ),
        (
            "an explicit empty compression is cleared by a merge, even when the merge is about another file",
            vec![
                mc(
                    "10-worker",
                    Some("worker"),
                    ign(
                        json!([{"path": "/etc/c", "contents": {"source": "data:,c", "compression": ""}}]),
                    ),
                ),
                mc("20-worker", Some("worker"), ign(json!([]))),
            ],
            json!([{"path": "/etc/c", "overwrite": true, "contents": {"source": "data:,c"}}]),
        ),
        (
            "an explicit overwrite: false is kept",
            vec![mc(
                "10-worker",
                Some("worker"),
                ign(
                    json!([{"path": "/etc/d", "overwrite": false, "append": [{"source": "data:,x"}]}]),
                ),
            )],
            json!([{"path": "/etc/d", "overwrite": false, "append": [{"source": "data:,x"}]}]),
        ),
        (
            "files of different MachineConfigs accumulate in order; a config-less first MC is an empty base",
            vec![
                mc(
                    "00-worker",
                    Some("worker"),
                    json!({"kernelArguments": ["x"]}),
                ),
                mc(
                    "10-worker",
                    Some("worker"),
                    ign(json!([{"path": "/etc/z", "contents": {"source": "data:,z"}}])),
                ),
                mc(
                    "20-worker",
                    Some("worker"),
                    ign(json!([{"path": "/etc/y", "contents": {"source": "data:,y"}}])),
                ),
            ],
            json!([{"path": "/etc/z", "overwrite": true, "contents": {"source": "data:,z"}},
                   {"path": "/etc/y", "overwrite": true, "contents": {"source": "data:,y"}}]),
        ),
    ];
    for (what, mcs, want) in cases {
        let r = run("worker", &mcs).unwrap();
        assert_eq!(rendered_files(&r), want, "{what}");
        assert_eq!(
            r.machine_config.spec.config.as_ref().unwrap()["ignition"]["version"],
            "3.5.0",
            "{what}"
        );
        // The spec holds the typed view as the MCO's Go types encode it.
        let Value::Object(typed) = serde_json::to_value(&r.ignition).unwrap() else {
            panic!("{what}: not an object")
        };
        assert_eq!(
            machineos_render::go_json::shape_config(&typed),
            r.machine_config.spec.config.clone().unwrap(),
            "{what}"
        );
    }
}

#[test]
fn units_users_and_directories_merge() {
    let mcs = vec![
        mc(
            "10-worker",
            Some("worker"),
            json!({"config": {"ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a"]}]},
            "storage": {"directories": [{"path": "/etc/app", "mode": 0o750}]},
            "systemd": {"units": [{"name": "a.service", "contents": "[Unit]\n", "enabled": false}]}}}),
        ),
        mc(
            "20-worker",
            Some("worker"),
            json!({"config": {"ignition": {"version": "3.4.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 BBBB b", "ssh-ed25519 AAAA a"]}]},
            "systemd": {"units": [{"name": "a.service", "enabled": true}]}}}),
        ),
    ];
    let r = run("worker", &mcs).unwrap();
    let config = serde_json::to_value(&r.ignition).unwrap();
    assert_eq!(
        config["passwd"]["users"],
        json!([{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a", "ssh-ed25519 BBBB b"]}])
    );
    assert_eq!(
        config["systemd"]["units"],
        json!([{"name": "a.service", "enabled": true, "contents": "[Unit]\n"}])
    );
    assert_eq!(
        config["storage"]["directories"],
        json!([{"path": "/etc/app", "mode": 0o750}]),
        "directories get no overwrite"
    );
}

#[test]
fn rendered_output_parses_as_ignition() {
    let mcs = vec![mc(
        "10-worker",
        Some("worker"),
        ign(json!([{"path": "/etc/a", "contents": {"source": "data:,a"}}])),
    )];
    let r = run("worker", &mcs).unwrap();
    let bytes = serde_json::to_vec(r.machine_config.spec.config.as_ref().unwrap()).unwrap();
    let parsed = machineos_ignition::parse(&bytes).unwrap();
    assert_eq!(parsed.config, r.ignition);
    assert_eq!(machineos_ignition::validate(&parsed.config), Ok(vec![]));
    assert_eq!(parsed.warnings, []);
}

#[test]
fn name_is_the_mcos_content_hash() {
    let a = mc(
        "10-worker",
        Some("worker"),
        json!({"kernelArguments": ["a"], "fips": true}),
    );
    let b = mc(
        "20-worker",
        Some("worker"),
        ign(json!([{"path": "/etc/b", "contents": {"source": "data:,b"}}])),
    );
    let name = |mcs: &[MachineConfig]| {
        run("worker", mcs)
            .unwrap()
            .machine_config
            .metadata
            .name
            .unwrap()
    };

    let n = name(&[a.clone(), b.clone()]);
    let hash = n.strip_prefix("rendered-worker-").expect(&n);
    assert_eq!(hash.len(), 32, "{n}");
    assert!(
        hash.bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{n}"
    );

    assert_eq!(
        n,
        name(&[b.clone(), a.clone()]),
        "input order does not matter"
    );
    let mut renamed = a.clone();
    renamed.metadata.name = Some("15-worker".into());
    assert_eq!(
        n,
        name(&[renamed, b.clone()]),
        "only content counts, not names"
    );
    let mut changed = a.clone();
    changed.spec.kernel_arguments.push("z".into());
    assert_ne!(n, name(&[changed, b.clone()]), "content changes the name");
    let r = run("infra", &[a.clone(), b.clone()]).unwrap();
    assert_eq!(
        r.machine_config.metadata.name.unwrap(),
        format!("rendered-infra-{hash}"),
        "pool is only a prefix"
    );

    // Pinned to the MCO's name: Go's sigs.k8s.io/yaml + yaml.v2 over this spec (its config
    // as Ignition's v3_5 Go types and clarketm/json encode it), MD5 with hash.go's salt,
    // computed by the oracle of machineos-goyaml/tests/golden (input line:
    // {"typed":true,"spec":{"osImageURL":"quay.io/fedora/fedora-coreos:stable",
    // "baseOSExtensionsContainerImage":"quay.io/example/extensions:1","config":{"ignition":
    // {"version":"3.5.0"}},"kernelArguments":["quiet"],"extensions":[],"fips":false,
    // "kernelType":"default"}}).
    let fixed = [mc(
        "00-worker",
        Some("worker"),
        json!({"kernelArguments": ["quiet"]}),
    )];
    assert_eq!(
        name(&fixed),
        "rendered-worker-89f72515f296f9865b4857dd9bc62233"
    );
}
