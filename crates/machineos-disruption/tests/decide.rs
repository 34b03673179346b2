//! The disruption decision against the MCO's own table: every default policy path (and a
//! file under each directory one), unit and SSH key, the combination rules, the user's
//! policies merged over the defaults, and what always reboots — each row with the actions
//! the MCO's daemon would run for it.

use machineos_api::v1::MachineConfig;
use machineos_disruption::policy::PolicyConfig;
use machineos_disruption::{Action, Class, ClusterPolicies, ConfigChanges, OsChange, decide};
use serde_json::json;

fn reload(s: &str) -> Action {
    Action::Reload(s.into())
}

fn restart(s: &str) -> Action {
    Action::Restart(s.into())
}

fn files(paths: &[&str]) -> ConfigChanges {
    ConfigChanges {
        files: paths.iter().map(|p| p.to_string()).collect(),
        ..ConfigChanges::default()
    }
}

#[test]
fn every_default_path_takes_its_actions_as_the_mco_defines_them() {
    let d = ClusterPolicies::defaults();
    let crio = "crio.service";
    let rows: Vec<(&str, Vec<Action>, bool, Class)> = vec![
        (
            "/var/lib/kubelet/config.json",
            vec![Action::None],
            false,
            Class::None,
        ),
        (
            "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
            vec![reload(crio)],
            false,
            Class::Reload,
        ),
        (
            "/etc/containers/policy.json",
            vec![reload(crio)],
            false,
            Class::Reload,
        ),
        (
            "/etc/containers/registries.conf",
            vec![Action::Special],
            true,
            Class::Drain,
        ),
        (
            "/etc/containers/registries.d",
            vec![reload(crio)],
            false,
            Class::Reload,
        ),
        (
            "/etc/containers/registries.d/quay.yaml",
            vec![reload(crio)],
            false,
            Class::Reload,
        ),
        (
            "/etc/crio/policies/a/b.json",
            vec![reload(crio)],
            false,
            Class::Reload,
        ),
        (
            "/etc/nmstate/openshift/br-ex.yml",
            vec![Action::None],
            false,
            Class::None,
        ),
        (
            "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
            vec![restart("coreos-update-ca-trust.service"), restart(crio)],
            false,
            Class::Restart,
        ),
        (
            "/etc/kubernetes/credential-providers/ecr.yaml",
            vec![restart("kubelet.service")],
            false,
            Class::Restart,
        ),
        (
            "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
            vec![Action::DaemonReload, restart("kubelet.service")],
            false,
            Class::DaemonReload,
        ),
        (
            "/etc/iri-registry/config.yml",
            vec![restart("iri-registry.service")],
            false,
            Class::Restart,
        ),
        (
            "/usr/local/bin/load-registry-image.sh",
            vec![restart("iri-registry.service")],
            false,
            Class::Restart,
        ),
        (
            "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
            vec![restart("coreos-update-ca-trust.service")],
            false,
            Class::Restart,
        ),
    ];
    assert_eq!(d.files.len(), 13, "the MCO's 13 default paths");
    for (path, actions, drain, class) in rows {
        let o = decide(&files(&[path]), &d);
        assert_eq!(
            (o.actions, o.drain, o.class),
            (actions, drain, class),
            "{path}"
        );
    }
}

#[test]
fn a_path_no_policy_covers_reboots_and_siblings_are_not_children() {
    let d = ClusterPolicies::defaults();
    for path in [
        "/etc/chrony.conf",
        "/etc/containers/registries.conf.d/001-mirror.conf",
        "/etc/containers/policy.json.bak",
        "/var/lib/kubelet/config.json.d/x",
    ] {
        let o = decide(&files(&[path]), &d);
        assert_eq!(o.actions, vec![Action::Reboot], "{path}");
        assert!(o.drain);
        assert_eq!(o.class, Class::Reboot);
        assert_eq!(o.reasons[0].change, format!("file {path}"));
        assert_eq!(o.reasons[0].policy, None);
    }
    // Cleaned paths still match: a trailing slash, a dot, a doubled slash.
    for path in [
        "/etc/containers//registries.d/./x.yaml",
        "/etc/crio/policies/",
    ] {
        assert_eq!(
            decide(&files(&[path]), &d).actions,
            vec![reload("crio.service")],
            "{path}"
        );
    }
}

#[test]
fn units_match_by_exact_name_and_ssh_keys_take_the_sshkey_actions() {
    let d = ClusterPolicies::defaults();
    let unit = |n: &str| ConfigChanges {
        units: vec![n.into()],
        ..ConfigChanges::default()
    };
    let o = decide(&unit("iri-registry.service"), &d);
    assert_eq!(
        o.actions,
        vec![Action::DaemonReload, restart("iri-registry.service")]
    );
    assert_eq!(o.class, Class::DaemonReload);
    assert_eq!(
        decide(&unit("chronyd.service"), &d).actions,
        vec![Action::Reboot]
    );
    let ssh = ConfigChanges {
        passwd: true,
        ..ConfigChanges::default()
    };
    let o = decide(&ssh, &d);
    assert_eq!(
        (o.actions, o.drain, o.class),
        (vec![Action::None], false, Class::None)
    );
}

#[test]
fn actions_combine_in_order_none_drops_out_and_reboot_wins() {
    let d = ClusterPolicies::defaults();
    // files, then units, then the SSH key; None dropped beside others; duplicates kept.
    let c = ConfigChanges {
        files: vec![
            "/etc/containers/policy.json".into(),
            "/var/lib/kubelet/config.json".into(),
            "/etc/containers/registries.d/a.yaml".into(),
        ],
        units: vec!["iri-registry.service".into()],
        passwd: true,
        ..ConfigChanges::default()
    };
    let o = decide(&c, &d);
    assert_eq!(
        o.actions,
        vec![
            reload("crio.service"),
            reload("crio.service"),
            Action::DaemonReload,
            restart("iri-registry.service"),
        ]
    );
    assert_eq!(o.class, Class::DaemonReload);
    assert_eq!(o.reasons.len(), 5, "one reason per change");
    // One uncovered file among them: a reboot, whatever the others say.
    let mut c2 = c.clone();
    c2.files.push("/etc/motd".into());
    assert_eq!(decide(&c2, &d).actions, vec![Action::Reboot]);
    // Nothing changed: nothing to do.
    let o = decide(&ConfigChanges::default(), &d);
    assert_eq!((o.actions, o.class), (vec![Action::None], Class::None));
}

#[test]
fn os_fields_always_reboot_and_what_cannot_be_applied_live_soft_reboots() {
    let d = ClusterPolicies::defaults();
    for os in [
        OsChange::OsImageUrl,
        OsChange::KernelArguments,
        OsChange::Fips,
        OsChange::KernelType,
        OsChange::Extensions,
    ] {
        let c = ConfigChanges {
            files: vec!["/var/lib/kubelet/config.json".into()],
            os: vec![os],
            ..ConfigChanges::default()
        };
        let o = decide(&c, &d);
        assert_eq!(
            (o.actions, o.class),
            (vec![Action::Reboot], Class::Reboot),
            "{os:?}"
        );
    }
    // Another Ignition section, or a file outside /etc, /var and /usr/local, needs the new
    // image booted; the kernel is the running one, so a soft reboot, drained.
    let c = ConfigChanges {
        other: vec!["storage.links".into()],
        ..ConfigChanges::default()
    };
    let o = decide(&c, &d);
    assert_eq!((o.class, o.drain), (Class::SoftReboot, true));
    assert_eq!(o.reasons[0].change, "Ignition storage.links");
    assert_eq!(o.reasons[0].policy.as_deref(), Some("live apply"));
    let user = ClusterPolicies::merge(
        &serde_json::from_value::<PolicyConfig>(json!({
            "files": [{"path": "/usr/share/app", "actions": [{"type": "None"}]}]
        }))
        .unwrap()
        .validate()
        .unwrap(),
    );
    let o = decide(&files(&["/usr/share/app/x.conf"]), &user);
    assert_eq!((o.class, o.drain), (Class::SoftReboot, true));
    // The policies' Reboot stays a Reboot.
    let o = decide(
        &ConfigChanges {
            files: vec!["/usr/share/app/x.conf".into(), "/etc/chrony.conf".into()],
            ..ConfigChanges::default()
        },
        &user,
    );
    assert_eq!(o.class, Class::Reboot);
    for (path, live) in [
        ("/etc/chrony.conf", true),
        ("/var/lib/kubelet/config.json", true),
        ("/usr/local/bin/x.sh", true),
        ("/etc", false),
        ("/etcetera/x", false),
        ("/usr/lib/x", false),
        ("/opt/x", false),
        ("/etc/../usr/lib/x", false),
        ("//etc/./x", true),
    ] {
        assert_eq!(machineos_disruption::is_live_path(path), live, "{path}");
    }
}

#[test]
fn the_users_policies_replace_defaults_in_place_and_come_after_them() {
    let spec: PolicyConfig = serde_json::from_value(json!({
        "files": [
            {"path": "/etc/chrony.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]},
            {"path": "/etc/containers/registries.conf", "actions": [{"type": "None"}]},
            {"path": "/etc", "actions": [{"type": "Drain"}]},
        ],
        "units": [{"name": "chronyd.service", "actions": [{"type": "None"}]}],
        "sshkey": {"actions": [{"type": "Reboot"}]},
    }))
    .unwrap();
    let p = ClusterPolicies::merge(&spec.validate().unwrap());
    assert_eq!(p.files.len(), 15);
    assert_eq!(
        p.files[3].path, "/etc/containers/registries.conf",
        "replaced in place"
    );
    assert_eq!(p.files[3].actions, vec![Action::None]);
    assert_eq!(
        p.files[13].path, "/etc/chrony.conf",
        "appended in the user's order"
    );
    assert_eq!(p.files[14].path, "/etc");
    assert_eq!(p.units.len(), 2);
    assert_eq!(p.sshkey, vec![Action::Reboot]);
    // The longest path wins: chrony.conf's own entry, not /etc's.
    let o = decide(&files(&["/etc/chrony.conf"]), &p);
    assert_eq!(
        (o.actions, o.class),
        (vec![restart("chronyd.service")], Class::Restart)
    );
    assert_eq!(
        o.reasons[0].policy.as_deref(),
        Some("file /etc/chrony.conf")
    );
    // Any other file under /etc now drains instead of rebooting.
    let o = decide(&files(&["/etc/motd"]), &p);
    assert_eq!(
        (o.actions, o.drain, o.class),
        (vec![Action::Drain], true, Class::Drain)
    );
    // An empty user SSH key list keeps the default.
    let spec: PolicyConfig = serde_json::from_value(json!({"sshkey": {"actions": []}})).unwrap();
    assert_eq!(
        ClusterPolicies::merge(&spec.validate().unwrap()).sshkey,
        vec![Action::None]
    );
}

#[test]
fn a_machine_configuration_object_gives_the_merged_policies_and_json_as_the_api_writes_it() {
    assert_eq!(
        ClusterPolicies::of_machine_configuration(None).unwrap(),
        ClusterPolicies::defaults()
    );
    let object = json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {"files": [
            {"path": "/etc/chrony.conf", "actions": [{"type": "None"}]}]}},
    });
    let p = ClusterPolicies::of_machine_configuration(Some(&object)).unwrap();
    assert_eq!(p.files.last().unwrap().path, "/etc/chrony.conf");
    let v = serde_json::to_value(&p.files[7]).unwrap();
    assert_eq!(
        v,
        json!({"path": "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
            "actions": [
                {"type": "Restart", "restart": {"serviceName": "coreos-update-ca-trust.service"}},
                {"type": "Restart", "restart": {"serviceName": "crio.service"}}]})
    );
}

#[test]
fn the_api_servers_rules_refuse_what_it_would_refuse_naming_the_field() {
    let cases = [
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "Reboot"}, {"type": "Drain"}]}]}),
            "spec.nodeDisruptionPolicy.files[0].actions",
            "Reboot action can only be specified standalone",
        ),
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "None"}, {"type": "DaemonReload"}]}]}),
            "spec.nodeDisruptionPolicy.files[0].actions",
            "None action can only be specified standalone",
        ),
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "Reload"}]}]}),
            "spec.nodeDisruptionPolicy.files[0].actions[0]",
            "reload is required",
        ),
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "Drain", "restart": {"serviceName": "a.service"}}]}]}),
            "spec.nodeDisruptionPolicy.files[0].actions[0]",
            "restart is forbidden",
        ),
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "Special"}]}]}),
            "spec.nodeDisruptionPolicy.files[0].actions[0]",
            "must be one of",
        ),
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "Restart", "restart": {"serviceName": "crio"}}]}]}),
            "spec.nodeDisruptionPolicy.files[0].actions[0]",
            "not a unit name",
        ),
        (
            json!({"files": [{"path": "/a", "actions": [{"type": "None"}]}, {"path": "/a", "actions": [{"type": "None"}]}]}),
            "spec.nodeDisruptionPolicy.files[1].path",
            "duplicate",
        ),
        (
            json!({"units": [{"name": "chronyd", "actions": [{"type": "None"}]}]}),
            "spec.nodeDisruptionPolicy.units[0].name",
            "not a unit name",
        ),
        (
            json!({"sshkey": {"actions": [{"type": "Drain"}, {"type": "Reboot"}]}}),
            "spec.nodeDisruptionPolicy.sshkey.actions",
            "standalone",
        ),
    ];
    for (spec, path, message) in cases {
        let config: PolicyConfig = serde_json::from_value(spec.clone()).unwrap();
        let e = config.validate().expect_err(&spec.to_string());
        assert_eq!(e.path, path, "{spec}");
        assert!(e.message.contains(message), "{spec}: {e}");
    }
    let many: Vec<_> = (0..11).map(|_| json!({"type": "DaemonReload"})).collect();
    let config: PolicyConfig =
        serde_json::from_value(json!({"files": [{"path": "/a", "actions": many}]})).unwrap();
    assert!(
        config
            .validate()
            .unwrap_err()
            .message
            .contains("at most 10")
    );
    // An empty list is what the CRD allows too: the entry adds no action.
    let config: PolicyConfig =
        serde_json::from_value(json!({"files": [{"path": "/a", "actions": []}]})).unwrap();
    assert!(config.validate().is_ok());
    for ok in ["chronyd.service", "a:b_c-d.e.timer", "x.mount"] {
        assert!(machineos_disruption::policy::is_unit_name(ok), "{ok}");
    }
    for bad in ["service", ".service", "a.conf", "a b.service"] {
        assert!(!machineos_disruption::policy::is_unit_name(bad), "{bad}");
    }
}

fn mc(config: serde_json::Value, extra: serde_json::Value) -> MachineConfig {
    let mut v = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-x"},
        "spec": {"config": config},
    });
    for (k, x) in extra.as_object().unwrap() {
        v["spec"][k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn changes_between_two_rendered_machine_configs_are_what_the_daemon_diffs() {
    let file = |path: &str, data: &str| json!({"path": path, "contents": {"source": format!("data:,{data}")}, "mode": 420});
    let old = mc(
        json!({"ignition": {"version": "3.5.0"},
            "storage": {"files": [file("/etc/a", "1"), file("/etc/b", "1"), file("/etc/gone", "1")]},
            "systemd": {"units": [{"name": "a.service", "enabled": true}, {"name": "b.service", "contents": "x"}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1"]}]}}),
        json!({"kernelType": ""}),
    );
    let new = mc(
        json!({"ignition": {"version": "3.5.0"},
            "storage": {"files": [file("/etc/a", "1"), file("/etc/b", "2"), file("/etc/new", "1")]},
            "systemd": {"units": [{"name": "a.service", "enabled": true},
                {"name": "b.service", "contents": "x", "dropins": [{"name": "10.conf", "contents": "y"}]}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}]}}),
        json!({"kernelType": "default"}),
    );
    let c = ConfigChanges::between(&old, &new);
    assert_eq!(c.files, ["/etc/b", "/etc/gone", "/etc/new"]);
    assert_eq!(c.units, ["b.service"], "a drop-in is its unit's change");
    assert!(c.passwd);
    assert!(c.os.is_empty(), "empty and default kernelType are one");
    assert!(c.other.is_empty());
    assert!(ConfigChanges::between(&old, &old).is_empty());
    let karg = mc(
        json!({"ignition": {"version": "3.5.0"}}),
        json!({"kernelArguments": ["nosmt"]}),
    );
    let base = mc(json!({"ignition": {"version": "3.5.0"}}), json!({}));
    assert_eq!(
        ConfigChanges::between(&base, &karg).os,
        [OsChange::KernelArguments]
    );
    let link = mc(
        json!({"ignition": {"version": "3.5.0"}, "storage": {"links": [{"path": "/etc/l", "target": "/x"}]}}),
        json!({}),
    );
    assert_eq!(
        ConfigChanges::between(&base, &link).other,
        ["storage.links"]
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn paths() -> impl Strategy<Value = Vec<String>> {
        let known: Vec<String> = ClusterPolicies::defaults()
            .files
            .into_iter()
            .map(|f| f.path)
            .chain([
                "/etc/motd".to_owned(),
                "/etc/containers/registries.d/x".to_owned(),
            ])
            .collect();
        proptest::collection::vec(proptest::sample::select(known), 0..6)
    }

    proptest! {
        /// Whatever changed: a non-empty list; Reboot and None only alone; a reboot drains;
        /// and a change whose policy is None adds nothing.
        #[test]
        fn the_combination_rules_hold(files in paths(), passwd in any::<bool>()) {
            let d = ClusterPolicies::defaults();
            let c = ConfigChanges { files, passwd, ..ConfigChanges::default() };
            let o = decide(&c, &d);
            prop_assert!(!o.actions.is_empty());
            for alone in [Action::Reboot, Action::None] {
                if o.actions.contains(&alone) {
                    prop_assert_eq!(&o.actions, &vec![alone]);
                }
            }
            if o.class == Class::Reboot {
                prop_assert!(o.drain);
            }
            let mut more = c.clone();
            more.files.push("/var/lib/kubelet/config.json".into());
            let o2 = decide(&more, &d);
            prop_assert_eq!(o2.actions, o.actions);
            prop_assert_eq!(o2.class, o.class);
        }
    }
}

const REG_BASE: &str = r#"unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]

[[registry]]
prefix = ""
location = "quay.io/openshift-release-dev"
mirror-by-digest-only = true

[[registry.mirror]]
location = "mirror.example.com/ocp"
"#;

#[test]
fn a_registries_conf_change_is_safe_only_as_the_mco_says() {
    use machineos_disruption::registries::is_safe_change;
    let safe = |new: &str| is_safe_change(Some(REG_BASE.as_bytes()), Some(new.as_bytes()));
    assert!(safe(REG_BASE), "unchanged");
    // Safe: a search registry appended; a mirror added to a digest-only registry; a new
    // registry whose mirrors are all digest-only; an existing mirror turned digest-only.
    assert!(safe(
        &REG_BASE.replace(r#""docker.io"]"#, r#""docker.io", "quay.io"]"#)
    ));
    assert!(safe(&format!(
        "{REG_BASE}\n[[registry.mirror]]\nlocation = \"mirror2.example.com/ocp\"\n"
    )));
    assert!(safe(&format!(
        "{REG_BASE}\n[[registry]]\nlocation = \"registry.example.com/apps\"\n\n[[registry.mirror]]\nlocation = \"m.example.com/apps\"\npull-from-mirror = \"digest-only\"\n"
    )));
    assert!(safe(&REG_BASE.replace(
        "location = \"mirror.example.com/ocp\"\n",
        "location = \"mirror.example.com/ocp\"\npull-from-mirror = \"digest-only\"\n"
    )));
    // Unsafe: a search registry removed or reordered; a registry or mirror removed; a
    // registry blocked or insecure; a new registry pulling from a mirror by tag.
    assert!(!safe(&REG_BASE.replace(r#", "docker.io""#, "")));
    assert!(!safe(&REG_BASE.replace(
        r#"["registry.access.redhat.com", "docker.io"]"#,
        r#"["docker.io", "registry.access.redhat.com"]"#
    )));
    assert!(!safe(
        r#"unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]"#
    ));
    assert!(!safe(&REG_BASE.replace(
        "\n[[registry.mirror]]\nlocation = \"mirror.example.com/ocp\"\n",
        ""
    )));
    assert!(!safe(&REG_BASE.replace(
        "mirror-by-digest-only = true",
        "mirror-by-digest-only = true\nblocked = true"
    )));
    assert!(!safe(&REG_BASE.replace(
        "mirror-by-digest-only = true",
        "mirror-by-digest-only = true\ninsecure = true"
    )));
    assert!(!safe(&format!(
        "{REG_BASE}\n[[registry]]\nlocation = \"registry.example.com/apps\"\n\n[[registry.mirror]]\nlocation = \"m.example.com/apps\"\n"
    )));
    // Unreadable or missing: not safe.
    assert!(!safe("not = [toml"));
    assert!(!is_safe_change(None, Some(REG_BASE.as_bytes())));
}

#[test]
fn a_safe_registries_conf_change_reloads_crio_without_a_drain() {
    use base64::Engine;
    let data = |text: &str| {
        format!(
            "data:text/plain;charset=utf-8;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    };
    let with = |text: &str| {
        mc(
            json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/etc/containers/registries.conf", "contents": {"source": data(text)}, "mode": 420}]}}),
            json!({}),
        )
    };
    let d = ClusterPolicies::defaults();
    let appended = REG_BASE.replace(r#""docker.io"]"#, r#""docker.io", "quay.io"]"#);
    let o = decide(
        &ConfigChanges::between(&with(REG_BASE), &with(&appended)),
        &d,
    );
    assert_eq!(
        (o.actions, o.drain, o.class),
        (vec![Action::Special], false, Class::Reload)
    );
    let removed = REG_BASE.replace(r#", "docker.io""#, "");
    let o = decide(
        &ConfigChanges::between(&with(REG_BASE), &with(&removed)),
        &d,
    );
    assert_eq!(
        (o.actions, o.drain, o.class),
        (vec![Action::Special], true, Class::Drain)
    );
}

// ---- image::image_class: what the paths two images differ in need ----

#[test]
fn image_paths_decide_reboot_soft_reboot_or_nothing() {
    use machineos_disruption::{Class, image_class, is_kernel_path};
    for (path, kernel) in [
        ("/usr/lib/modules/6.11.4-301.fc41.x86_64/vmlinuz", true),
        (
            "/usr/lib/modules/6.11.4-301.fc41.x86_64/initramfs.img",
            true,
        ),
        ("/usr/lib/modules/6.11.4/kernel/fs/xfs.ko.xz", false),
        ("/usr/lib/modules//vmlinuz", false),
        ("/boot/vmlinuz-6.11.4", true),
        ("/boot/initramfs-6.11.4.img", true),
        ("/boot/loader/entries/a.conf", false),
        ("/usr/bin/vmlinuz", false),
    ] {
        assert_eq!(is_kernel_path(path), kernel, "{path}");
    }
    let table: &[(&[&str], Class)] = &[
        (&[], Class::None),
        (
            &["/etc/chrony.conf", "/var/lib/x", "/usr/local/bin/y", "/etc"],
            Class::None,
        ),
        (&["/etc/chrony.conf", "/usr/bin/tool"], Class::SoftReboot),
        (
            &["/usr/share/doc/x", "/usr/lib/modules/6.1/vmlinuz"],
            Class::Reboot,
        ),
        (&["/opt/app"], Class::SoftReboot),
        // The image's copies of live content: what a file under /usr/local or /var adds.
        (
            &[
                "/usr/etc/motd",
                "/usr/share/factory",
                "/usr/share/factory/var/usrlocal/bin/tool",
                "/usr/lib/tmpfiles.d/machineos-var.conf",
                "/var/usrlocal/bin/tool",
            ],
            Class::None,
        ),
        (&["/usr/share/factory/etc/x"], Class::SoftReboot),
    ];
    for (paths, want) in table {
        let got = image_class(paths.iter().copied());
        assert_eq!(got.class, *want, "{paths:?}: {:?}", got.reasons);
        assert_eq!(got.reasons.is_empty(), *want == Class::None, "{paths:?}");
    }
    let many: Vec<String> = (0..8).map(|i| format!("/usr/bin/t{i}")).collect();
    let got = image_class(many.iter().map(String::as_str));
    assert_eq!(got.reasons.len(), 6);
    assert_eq!(got.reasons[5], "and 3 more such paths");
    assert_eq!(
        got.reasons[0],
        "/usr/bin/t0 differs: not applied to a running node"
    );
}

#[test]
fn across_images_the_configs_and_the_filesystem_decide_together() {
    use machineos_disruption::{ImageEvidence, decide_across_images};
    let mut p = ClusterPolicies::defaults();
    p.files.push(machineos_disruption::policy::FilePolicy {
        path: "/etc/motd".into(),
        actions: vec![Action::None],
    });
    let evidence = |changed: u64, kernel: bool, class: Class| ImageEvidence {
        from: "reg/os@sha256:old".into(),
        changed,
        kernel_changed: kernel,
        path_class: class,
    };
    let with_os = |os: Vec<OsChange>, paths: &[&str]| ConfigChanges { os, ..files(paths) };
    // (configs' changes, images' difference, class, drain, actions)
    let rows: Vec<(ConfigChanges, ImageEvidence, Class, bool, Vec<Action>)> = vec![
        // A new base whose kernel is the same: a soft reboot, not the osImageURL's reboot.
        (
            with_os(vec![OsChange::OsImageUrl], &[]),
            evidence(120, false, Class::SoftReboot),
            Class::SoftReboot,
            true,
            vec![Action::None],
        ),
        // Its kernel differs: a reboot.
        (
            with_os(vec![OsChange::OsImageUrl], &[]),
            evidence(900, true, Class::Reboot),
            Class::Reboot,
            true,
            vec![Action::Reboot],
        ),
        // Kernel arguments still reboot, whatever the filesystem says.
        (
            with_os(vec![OsChange::OsImageUrl, OsChange::KernelArguments], &[]),
            evidence(3, false, Class::SoftReboot),
            Class::Reboot,
            true,
            vec![Action::Reboot],
        ),
        // An extensions change is in the filesystem difference too.
        (
            with_os(vec![OsChange::Extensions], &[]),
            evidence(40, false, Class::SoftReboot),
            Class::SoftReboot,
            true,
            vec![Action::None],
        ),
        // Only live paths differ, but not as the configs explain them (a rebuild, a base's
        // own /etc): the userspace restart applies them.
        (
            ConfigChanges::default(),
            evidence(2, false, Class::None),
            Class::SoftReboot,
            true,
            vec![Action::None],
        ),
        // A rebuild whose filesystem is identical (another digest, same files): nothing.
        (
            ConfigChanges::default(),
            evidence(0, false, Class::None),
            Class::None,
            false,
            vec![Action::None],
        ),
        // A config change no policy covers still reboots.
        (
            with_os(vec![OsChange::OsImageUrl], &["/etc/chrony.conf"]),
            evidence(50, false, Class::SoftReboot),
            Class::Reboot,
            true,
            vec![Action::Reboot],
        ),
        // A covered one rides along with the soft reboot.
        (
            with_os(vec![OsChange::OsImageUrl], &["/etc/motd"]),
            evidence(50, false, Class::SoftReboot),
            Class::SoftReboot,
            true,
            vec![Action::None],
        ),
    ];
    for (changes, image, class, drain, actions) in rows {
        let o = decide_across_images(&changes, &p, &image, "the base image changes (a → b)");
        assert_eq!(
            (o.class, o.drain, &o.actions),
            (class, drain, &actions),
            "{changes:?} {image:?}: {:?}",
            o.reasons
        );
        let last = o.reasons.last().unwrap();
        assert!(
            last.change.starts_with("the base image changes (a → b): ")
                && last.change.contains("reg/os@sha256:old"),
            "{last:?}"
        );
    }
}

#[test]
fn between_builds_of_one_base_the_measured_paths_raise_the_configs_decision() {
    use machineos_disruption::{ImageEvidence, is_kargs_path, raise_by_paths};
    let mut p = ClusterPolicies::defaults();
    p.files.push(machineos_disruption::policy::FilePolicy {
        path: "/etc/motd".into(),
        actions: vec![Action::None],
    });
    let evidence = |kernel: bool, class: Class| ImageEvidence {
        from: "reg/os@sha256:old".into(),
        changed: 3,
        kernel_changed: kernel,
        path_class: class,
    };
    let motd = decide(&files(&["/etc/motd"]), &p);
    assert_eq!(motd.class, Class::None);
    // Only the config's own /etc file: the live apply stands.
    let o = raise_by_paths(motd.clone(), &evidence(false, Class::None));
    assert_eq!(
        (o.class, o.drain, &o.actions),
        (Class::None, false, &vec![Action::None])
    );
    // A RUN step changed /usr: the new deployment is booted.
    let o = raise_by_paths(motd.clone(), &evidence(false, Class::SoftReboot));
    assert_eq!((o.class, o.drain), (Class::SoftReboot, true));
    assert!(
        o.reasons
            .last()
            .unwrap()
            .change
            .contains("reg/os@sha256:old")
    );
    // ... or the kernel: a reboot.
    let o = raise_by_paths(motd, &evidence(true, Class::Reboot));
    assert_eq!(
        (o.class, &o.actions),
        (Class::Reboot, &vec![Action::Reboot])
    );
    // Never lowered.
    let chrony = decide(&files(&["/etc/chrony.conf"]), &p);
    assert_eq!(
        raise_by_paths(chrony.clone(), &evidence(false, Class::None)),
        chrony
    );
    // The kernel arguments an image ships are kernel state.
    assert!(is_kargs_path("/usr/lib/bootc/kargs.d/10-fips.toml"));
    assert!(!is_kargs_path("/usr/lib/bootc/kargs.d"));
    assert!(!is_kargs_path("/usr/lib/bootc/kargs.d/sub/x.toml"));
    let got = machineos_disruption::image_class(["/usr/lib/bootc/kargs.d/10-fips.toml"]);
    assert_eq!(got.class, Class::Reboot);
    assert!(
        got.reasons[0].contains("kernel arguments"),
        "{:?}",
        got.reasons
    );
}
