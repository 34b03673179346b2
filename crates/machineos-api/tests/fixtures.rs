//! MachineConfig manifests in the style openshift-docs publishes (tests/fixtures/*.yaml)
//! deserialize into [`MachineConfig`] and serialize back to the same JSON value: nothing the
//! manifest says is lost, nothing is invented.

use std::path::PathBuf;

use machineos_api::v1::MachineConfig;
use serde_json::Value;

fn read(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What each fixture must contain, beyond round-tripping.
struct Fixture {
    file: &'static str,
    /// (name, role) per document.
    objects: &'static [(&'static str, &'static str)],
    check: fn(&[MachineConfig]),
}

fn file_paths(mc: &MachineConfig) -> Vec<String> {
    let config = mc.spec.config.as_ref().expect("config");
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect()
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        file: "chrony.yaml",
        objects: &[("99-worker-chrony", "worker")],
        check: |mcs| {
            assert_eq!(file_paths(&mcs[0]), ["/etc/chrony.conf"]);
            let file = &mcs[0].spec.config.as_ref().unwrap()["storage"]["files"][0];
            assert_eq!(file["mode"], 420);
            assert!(
                file["contents"]["source"]
                    .as_str()
                    .unwrap()
                    .starts_with("data:text/plain;charset=utf-8;base64,")
            );
        },
    },
    Fixture {
        file: "ssh-authorized-keys.yaml",
        objects: &[("99-worker-ssh", "worker")],
        check: |mcs| {
            let user = &mcs[0].spec.config.as_ref().unwrap()["passwd"]["users"][0];
            assert_eq!(user["name"], "core");
            assert_eq!(user["sshAuthorizedKeys"].as_array().unwrap().len(), 2);
        },
    },
    Fixture {
        file: "kernel-arguments.yaml",
        objects: &[("05-worker-kernelarg-selinuxpermissive", "worker")],
        check: |mcs| {
            assert_eq!(mcs[0].spec.config, None);
            assert_eq!(
                mcs[0].spec.kernel_arguments,
                [
                    "enforcing=0",
                    "systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=\"all\""
                ]
            );
        },
    },
    Fixture {
        file: "systemd-unit.yaml",
        objects: &[("99-worker-boot-report", "worker")],
        check: |mcs| {
            let units = &mcs[0].spec.config.as_ref().unwrap()["systemd"]["units"];
            assert_eq!(units[0]["name"], "boot-report.service");
            assert_eq!(units[0]["enabled"], true);
            assert!(
                units[0]["contents"]
                    .as_str()
                    .unwrap()
                    .contains("\n\n[Service]\n")
            );
            assert_eq!(units[1]["dropins"][0]["name"], "10-log-level.conf");
        },
    },
    Fixture {
        file: "registries-conf.yaml",
        objects: &[("99-worker-registries", "worker")],
        check: |mcs| {
            assert_eq!(file_paths(&mcs[0]), ["/etc/containers/registries.conf"]);
            assert_eq!(
                mcs[0].annotation("description"),
                Some("Mirror the release repository")
            );
            let file = &mcs[0].spec.config.as_ref().unwrap()["storage"]["files"][0];
            assert_eq!(
                file["contents"]["compression"], "",
                "explicit empty value kept"
            );
        },
    },
    Fixture {
        file: "multi-document.yaml",
        objects: &[
            ("99-master-chrony", "master"),
            ("99-worker-realtime", "worker"),
            ("80-worker-extensions", "worker"),
            ("99-worker-fips", "worker"),
        ],
        check: |mcs| {
            assert_eq!(file_paths(&mcs[0]), ["/etc/chrony.conf"]);
            assert_eq!(mcs[1].spec.kernel_type, "realtime");
            assert_eq!(mcs[2].spec.extensions, ["usbguard", "sysstat"]);
            assert!(mcs[3].spec.fips);
            assert!(
                mcs[3]
                    .spec
                    .os_image_url
                    .starts_with("quay.io/example/custom-os@sha256:")
            );
        },
    },
];

#[test]
fn fixtures_round_trip_without_loss() {
    for fixture in FIXTURES {
        let text = read(fixture.file);
        let values: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: not YAML: {e}", fixture.file));
        let mcs: Vec<MachineConfig> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: not MachineConfigs: {e}", fixture.file));
        assert_eq!(
            mcs.len(),
            fixture.objects.len(),
            "{}: document count",
            fixture.file
        );
        assert_eq!(values.len(), mcs.len(), "{}", fixture.file);
        for ((value, mc), (name, role)) in values.iter().zip(&mcs).zip(fixture.objects) {
            assert_eq!(mc.name(), *name, "{}", fixture.file);
            assert_eq!(mc.role(), Some(*role), "{}: {name}", fixture.file);
            let back = serde_json::to_value(mc).unwrap();
            assert_eq!(&back, value, "{}: {name} does not round-trip", fixture.file);
        }
        (fixture.check)(&mcs);
    }
}

#[test]
fn every_fixture_file_is_covered() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<&str> = FIXTURES.iter().map(|f| f.file).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn unknown_ignition_fields_survive() {
    // `spec.config` is preserve-unknown in the MCO's schema: whatever is in it comes back out.
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n\
                metadata: {name: x, labels: {machineconfiguration.openshift.io/role: worker}}\n\
                spec:\n  config:\n    ignition: {version: 3.5.0}\n    futureSection: {a: [1, 2, {b: null}]}\n";
    let value: Value = serde_saphyr::from_str(text).unwrap();
    let mc: MachineConfig = serde_saphyr::from_str(text).unwrap();
    assert_eq!(serde_json::to_value(&mc).unwrap(), value);
}
