//! The MCO's own tests of its spec 2 path, ported as tables. Each names the Go test it
//! ports (`pkg/controller/common/helpers_test.go` unless said otherwise); inputs and
//! expectations are re-expressed here, the expectations checked against the MCO's code (see
//! `tests/oracle/`).

use machineos_ignition_spec2::{
    ParseError, SUPPORTED_VERSIONS, Spec2Error, ValidateError, convert, convert_value, is_spec2,
    validate,
};
use serde_json::{Value, json};

fn converted(input: &Value) -> Value {
    match convert(input.to_string().as_bytes()) {
        Ok(c) => c.config,
        Err(e) => panic!("{input}: {e}"),
    }
}

fn refused(input: &Value) -> String {
    match convert(input.to_string().as_bytes()) {
        Ok(c) => panic!("{input}: converted to {}", c.config),
        Err(e) => e.to_string(),
    }
}

/// Compares key for key, in order (the MCO's marshalling order).
fn same(got: &Value, want: &Value) -> bool {
    serde_json::to_string(got).ok() == serde_json::to_string(want).ok()
}

#[test]
fn parse_and_convert() {
    // TestParseAndConvert: a 2.2 config with a duplicated SSH key converts to 3.5 with the
    // key once; a config of an unknown version is refused.
    let cases: &[(Value, Result<Value, &str>)] = &[
        (
            json!({"ignition": {"version": "2.2.0"},
                   "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["5678", "5678", "abc"]}]}}),
            Ok(json!({"ignition": {"version": "3.5.0"},
                      "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["5678", "abc"]}]}})),
        ),
        (
            json!({"ignition": {"version": "21.0.0"},
                   "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["5678", "abc"]}]}}),
            Err(
                "failed to parse Ignition config: parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5",
            ),
        ),
    ];
    for (input, want) in cases {
        match want {
            Ok(want) => assert!(same(&converted(input), want), "{input}"),
            Err(want) => assert_eq!(refused(input), *want, "{input}"),
        }
    }
}

#[test]
fn remove_duplicate_files_and_units() {
    // TestRemoveIgnDuplicateFilesAndUnits, through the whole conversion (with unit and
    // drop-in names that Ignition accepts): the newest file wins; the newest unit wins and
    // keeps the drop-ins of older entries it does not have, newest first.
    let input = json!({
        "ignition": {"version": "2.2.0"},
        "storage": {"files": [
            {"filesystem": "root", "path": "/etc/testfileconfig", "mode": 420, "contents": {"source": "data:,old"}},
            {"filesystem": "root", "path": "/etc/testfileconfig", "mode": 420, "contents": {"source": "data:,new"}}
        ]},
        "systemd": {"units": [
            {"name": "test.service", "contents": "[Unit]\nDescription=old\n",
             "dropins": [{"name": "one.conf", "contents": "[Unit]\nDescription=old\n"}]},
            {"name": "test.service",
             "dropins": [{"name": "one.conf", "contents": "[Unit]\nDescription=new\n"}]},
            {"name": "test.service", "contents": "[Unit]\nDescription=new\n",
             "dropins": [{"name": "two.conf", "contents": "[Unit]\nDescription=new\n"}]}
        ]}
    });
    let want = json!({
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [
            {"overwrite": true, "path": "/etc/testfileconfig", "contents": {"source": "data:,new"}, "mode": 420}
        ]},
        "systemd": {"units": [
            {"contents": "[Unit]\nDescription=new\n",
             "dropins": [
                {"contents": "[Unit]\nDescription=new\n", "name": "two.conf"},
                {"contents": "[Unit]\nDescription=new\n", "name": "one.conf"}
             ],
             "name": "test.service"}
        ]}
    });
    let got = converted(&input);
    assert!(same(&got, &want), "{got}");
}

#[test]
fn dedupe_order_and_users() {
    // removeIgnDuplicateFilesUnitsUsers and dedupePasswdUserSSHKeys: kept files and units
    // come out newest first; the last core user is kept, with the keys of the earlier ones
    // appended newest first and then de-duplicated; any other user is refused.
    let cases: &[(Value, Result<Value, &str>)] = &[
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [
                {"filesystem": "root", "path": "/a", "mode": 420, "contents": {"source": "data:,a1"}},
                {"filesystem": "root", "path": "/b", "mode": 420, "contents": {"source": "data:,b"}},
                {"filesystem": "root", "path": "/a", "mode": 384, "contents": {"source": "data:,a2"}}
            ]}}),
            Ok(
                json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
                    {"overwrite": true, "path": "/a", "contents": {"source": "data:,a2"}, "mode": 384},
                    {"overwrite": true, "path": "/b", "contents": {"source": "data:,b"}, "mode": 420}
                ]}}),
            ),
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "passwd": {"users": [
                {"name": "core", "sshAuthorizedKeys": ["k1", "k2"], "passwordHash": "old"},
                {"name": "core", "sshAuthorizedKeys": ["k3", "k1"]},
                {"name": "core", "sshAuthorizedKeys": ["k4", "k3"], "passwordHash": "new"}
            ]}}),
            Ok(
                json!({"ignition": {"version": "3.5.0"}, "passwd": {"users": [
                    {"name": "core", "passwordHash": "new", "sshAuthorizedKeys": ["k4", "k3", "k1", "k2"]}
                ]}}),
            ),
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "passwd": {"users": [
                {"name": "alice"}, {"name": "bob"}, {"name": "core"}
            ]}}),
            Err("unexpected user with name: bob. Only core user is supported"),
        ),
    ];
    for (input, want) in cases {
        match want {
            Ok(want) => {
                let got = converted(input);
                assert!(same(&got, want), "{input}: {got}");
            }
            Err(want) => assert_eq!(refused(input), *want, "{input}"),
        }
    }
}

#[test]
fn ignition_converter_supported_versions() {
    // TestIgnitionConverterGetSupportedMinorVersions: the list the refusals quote.
    assert_eq!(SUPPORTED_VERSIONS, "2.2,3.0,3.1,3.2,3.3,3.4,3.5");
}

#[test]
fn ignition_converter_convert_2_2_to_3_5() {
    // TestIgnitionConverterConvert, "Conversion from 2.2 to 3.5": the result is a 3.5.0
    // config (here: one that machineos-ignition parses as such).
    let input = json!({"ignition": {"version": "2.2.0"},
                       "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["5678", "abc"]}]}});
    let got = converted(&input);
    let bytes = serde_json::to_vec(&got).unwrap_or_default();
    match machineos_ignition::parse(&bytes) {
        Ok(parsed) => assert_eq!(parsed.version.as_str(), "3.5.0"),
        Err(e) => panic!("{got}: {e}"),
    }
}

#[test]
fn validate_ignition() {
    // TestValidateIgnition, spec 2 parts, as ValidateMachineConfig meets them (raw bytes
    // through IgnParseWrapper, then ValidateIgnition): no version is refused; a valid file is
    // fine; a mode with the sticky bit is refused by validateIgn2FileModes.
    let file = |mode: i64| {
        json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [
            {"filesystem": "root", "path": "/etc/testfileconfig", "mode": mode,
             "contents": {"source": "data:,helloworld"}}
        ]}})
    };
    let cases: &[(Value, Result<(), &str>)] = &[
        (
            json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["5678", "abc"]}]}}),
            Err(
                "parsing Ignition config failed: invalid version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5",
            ),
        ),
        (file(0o644), Ok(())),
        (
            file(0o1777),
            Err("invalid mode 01777 for /etc/testfileconfig, cannot exceed 0777"),
        ),
        (
            file(0o4755),
            Err("invalid mode 04755 for /etc/testfileconfig, cannot exceed 0777"),
        ),
    ];
    for (input, want) in cases {
        let got = validate(input.to_string().as_bytes());
        match (got, want) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(want)) => assert_eq!(e.to_string(), *want, "{input}"),
            (got, want) => panic!("{input}: {got:?}, want {want:?}"),
        }
    }
    // The conversion itself keeps such a mode, as ParseAndConvertConfig does.
    let got = converted(&file(0o1777));
    assert_eq!(got.pointer("/storage/files/0/mode"), Some(&json!(0o1777)));
    assert!(matches!(
        validate(file(0o1777).to_string().as_bytes()),
        Err(ValidateError::FileMode { ref path, .. }) if path == "$.storage.files.0.mode"
    ));
}

#[test]
fn merge_machine_configs_v2() {
    // TestMergeMachineConfigs, "make sure we didn't break the v2 path": an empty 2.2 config
    // merges as an empty 3.5.0 config.
    let got = converted(&json!({"ignition": {"version": "2.2.0"}}));
    assert!(
        same(&got, &json!({"ignition": {"version": "3.5.0"}})),
        "{got}"
    );
}

#[test]
fn encapsulated_test_config() {
    // pkg/server/server_test.go TestEncapsulated on pkg/server/testdata/machine-configs/
    // test-config.yaml (a spec 2.2 MachineConfig, also in the MCO fixtures), re-expressed
    // with shortened unit contents: it converts, with its one file at
    // /etc/coreos/update.conf; units and drop-ins keep their text; `verification: {}` is
    // dropped; the unit enabled without an [Install] section is only a warning.
    let input = json!({
        "ignition": {"version": "2.2.0"},
        "storage": {"files": [{
            "contents": {"source": "data:,GROUP%3Dstable%0ASERVER%3Dhttp%3A%2F%2Flocalhost%3A32003%2Fv1%2Fupdate%0A",
                         "verification": {}},
            "filesystem": "root", "mode": 420, "path": "/etc/coreos/update.conf"
        }]},
        "systemd": {"units": [
            {"dropins": [{"contents": "[Service]\nEnvironment=\"DOCKER_OPTS=--log-opt max-size=50m --log-opt max-file=3\n",
                          "name": "10-dockeropts.conf"}],
             "enabled": true, "name": "docker.service"},
            {"contents": "[Unit]\nDescription=etcd TLS assets\n[Service]\nType=oneshot\nExecStart=/usr/bin/docker \\\n  run \\\n    --ipaddrs=127.0.0.1 \\\nExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/x.crt\n",
             "enabled": true, "name": "etcd-member-tls.service"},
            {"contents": "[Unit]\nDescription=etcd\n[Install]\nWantedBy=multi-user.target\n",
             "enabled": true, "name": "etcd-member.service"},
            {"mask": true, "name": "locksmith.service"}
        ]}
    });
    let got = match convert(input.to_string().as_bytes()) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let want = json!({
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [{
            "overwrite": true, "path": "/etc/coreos/update.conf",
            "contents": {"source": "data:,GROUP%3Dstable%0ASERVER%3Dhttp%3A%2F%2Flocalhost%3A32003%2Fv1%2Fupdate%0A"},
            "mode": 420
        }]},
        "systemd": {"units": [
            {"mask": true, "name": "locksmith.service"},
            {"contents": "[Unit]\nDescription=etcd\n[Install]\nWantedBy=multi-user.target\n",
             "enabled": true, "name": "etcd-member.service"},
            {"contents": "[Unit]\nDescription=etcd TLS assets\n[Service]\nType=oneshot\nExecStart=/usr/bin/docker \\\n  run \\\n    --ipaddrs=127.0.0.1 \\\nExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/x.crt\n",
             "enabled": true, "name": "etcd-member-tls.service"},
            {"dropins": [{"contents": "[Service]\nEnvironment=\"DOCKER_OPTS=--log-opt max-size=50m --log-opt max-file=3\n",
                          "name": "10-dockeropts.conf"}],
             "enabled": true, "name": "docker.service"}
        ]}
    });
    assert!(same(&got.config, &want), "{}", got.config);
    assert_eq!(got.version, "2.2.0");
    assert_eq!(
        got.warnings
            .iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>(),
        [
            "warning at $.systemd.units.1.contents: unit \"etcd-member-tls.service\" is enabled, but has no install section so enable does nothing"
        ]
    );
}

#[test]
fn converter_refusals() {
    // ign-converter's v23tov30.Check2_3 and Translate, with the MCO's filesystem map
    // {"root": "/"} (ignition_converter.go), wrapped as ParseAndConvertConfig wraps them.
    const PREFIX: &str = "failed to convert Ignition config spec v2 to v3: unable to convert Ignition spec v2 config to v3: ";
    let cases: &[(Value, &str, &str)] = &[
        (
            json!({"ignition": {"version": "2.2.0"}, "networkd": {"units": [{"name": "a.network"}]}}),
            "config includes deprecated networkd section - use Files instead",
            "$.networkd.units",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"filesystems": [
                {"name": "var", "mount": {"device": "/dev/sdb", "format": "xfs"}}]}}),
            "Config defined filesystem \"var\" but no mapping was defined.Please specify a path to be used as the filesystem mountpoint.",
            "$.storage.filesystems.0",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"disks": [
                {"device": "/dev/sda", "partitions": [{"label": "data", "number": 1}]}]}}),
            "Invalid input config:\ndeprecated: size is deprecated; use sizeMB instead\ndeprecated: start is deprecated; use startMB instead",
            "$.storage.disks.0.partitions.0.size",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {
                "files": [{"filesystem": "root", "path": "/a", "mode": 420}],
                "directories": [{"filesystem": "root", "path": "/a/", "mode": 493}]}}),
            "Config has conflicting inodes: \"File: /a\" and \"Directory: /a\".  All files, directories and links must specify a unique `path`.",
            "$.storage.directories.0.path",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {
                "files": [{"filesystem": "root", "path": "/l/f", "mode": 420}],
                "links": [{"filesystem": "root", "path": "/l", "target": "/x"}]}}),
            "File: /l/f uses link defined in config \"/l\". Please use a link not defined in Storage:Links",
            "$.storage.files.0.path",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "systemd": {"units": [
                {"name": "a.service", "dropins": [{"name": "x.conf"}, {"name": "x.conf"}]}]}}),
            "Config has duplicate dropin name \"x.conf\" in unit \"a.service\".  All dropins must specify a unique `name`.",
            "$.systemd.units.0.dropins.1",
        ),
        (
            json!({"ignition": {"version": "2.2.0"},
                   "storage": {"files": [{"filesystem": "root", "path": "/etc/systemd/system/a.service", "mode": 420}]},
                   "systemd": {"units": [{"name": "a.service", "contents": "[Unit]\n"}]}}),
            "error at $.storage.files.0.path: path conflicts with systemd unit or dropin\n",
            "$.storage.files.0.path",
        ),
        (
            json!({"ignition": {"version": "2.2.0", "config": {"append": [
                {"source": "data:,a"}, {"source": "data:,b"}]}}}),
            "error at $.ignition.config.merge.1: duplicate entry defined\n",
            "$.ignition.config.merge.1",
        ),
    ];
    for (input, reason, path) in cases {
        match convert(input.to_string().as_bytes()) {
            Err(e @ Spec2Error::Unconvertible { .. }) => {
                assert_eq!(e.to_string(), format!("{PREFIX}{reason}"), "{input}");
                assert_eq!(e.path(), Some(*path), "{input}");
            }
            other => panic!("{input}: {other:?}"),
        }
    }
}

#[test]
fn versions_and_routing() {
    // IgnParseWrapper: which versions the spec 2 parser takes, and how it refuses the rest.
    let invalid = "failed to parse Ignition config: parsing Ignition config failed: invalid version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5";
    let unknown = "failed to parse Ignition config: parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5";
    let cases: &[(Value, bool, Result<&str, &str>)] = &[
        (json!("2.2.0"), true, Ok("2.2.0")),
        (json!("2.1.0"), true, Ok("2.1.0")),
        (json!("2.0.0"), true, Ok("2.0.0")),
        (json!("2.2.0-"), true, Ok("2.2.0-")),
        (json!("2.3.0"), true, Err(unknown)),
        (json!("2.2.0-rc1"), true, Err(unknown)),
        (json!("2.2"), true, Err(invalid)),
        (json!(""), false, Err(invalid)),
        (json!("1.0.0"), false, Err(unknown)),
        (json!("3.6.0"), false, Err(unknown)),
    ];
    for (version, spec2, want) in cases {
        let input = json!({"ignition": {"version": version}});
        assert_eq!(is_spec2(&input), *spec2, "{version}");
        match (convert_value(&input), want) {
            (Ok(c), Ok(v)) => assert_eq!(c.version, *v),
            (Err(e), Err(m)) => assert_eq!(e.to_string(), *m, "{version}"),
            (got, want) => panic!("{version}: {got:?}, want {want:?}"),
        }
    }
    assert!(matches!(
        convert_value(&json!({"ignition": {"version": "3.1.0"}})),
        Err(Spec2Error::Parse(ParseError::NotSpec2 { .. }))
    ));
    assert!(!is_spec2(&json!({"ignition": {"version": "3.4.0"}})));
    assert!(is_spec2(&json!({"Ignition": {"VERSION": "2.2.0"}})));
}
