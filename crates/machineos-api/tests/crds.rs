//! The generated CRDs: a snapshot of the whole YAML (tests/snapshots/crds.yaml; regenerate with
//! `MACHINEOS_UPDATE_SNAPSHOTS=1 cargo test -p machineos-api --test crds`), that the YAML reads
//! back as the same objects, and the schema properties MCO compatibility depends on.

use std::path::PathBuf;

use machineos_api::{crds, crds_yaml};
use serde_json::{Value, json};

#[test]
fn crds_yaml_matches_snapshot() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/crds.yaml");
    machineos_testkit::golden::assert_golden(&path, &crds_yaml());
}

#[test]
fn crds_yaml_is_deterministic_and_reads_back() {
    let yaml = crds_yaml();
    assert_eq!(yaml, crds_yaml());
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let want: Vec<Value> = crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(docs, want);
}

/// A JSON pointer into openAPIV3Schema, and the value expected there.
type SchemaCheck = (&'static str, fn() -> Value);

/// One CRD's expected shape.
struct Expect {
    name: &'static str,
    version: &'static str,
    short_names: &'static [&'static str],
    status_subresource: bool,
    columns: &'static [&'static str],
    schema: &'static [SchemaCheck],
}

const EXPECT: &[Expect] = &[
    Expect {
        name: "machineconfignodes.machineconfiguration.openshift.io",
        version: "v1",
        short_names: &[],
        status_subresource: true,
        columns: &[
            "PoolName",
            "DesiredConfig",
            "CurrentConfig",
            "Updated",
            "Age",
            "UpdatePrepared",
            "UpdateExecuted",
            "UpdatePostActionComplete",
            "UpdateComplete",
            "Resumed",
            "UpdatedFilesAndOS",
            "CordonedNode",
            "DrainedNode",
            "RebootedNode",
            "UncordonedNode",
        ],
        schema: &[("/x-kubernetes-validations/0/rule", || {
            json!("self.metadata.name == self.spec.node.name")
        })],
    },
    Expect {
        name: "machineconfigpools.machineconfiguration.openshift.io",
        version: "v1",
        short_names: &["mcp"],
        status_subresource: true,
        columns: &[
            "Config",
            "Updated",
            "Updating",
            "Degraded",
            "MachineCount",
            "ReadyMachineCount",
            "UpdatedMachineCount",
            "DegradedMachineCount",
            "Age",
        ],
        schema: &[
            (
                "/properties/spec/properties/maxUnavailable/x-kubernetes-int-or-string",
                || json!(true),
            ),
            (
                "/properties/spec/properties/machineConfigSelector/properties/matchLabels/type",
                || json!("object"),
            ),
            (
                "/properties/status/properties/conditions/items/properties/lastTransitionTime/nullable",
                || json!(true),
            ),
        ],
    },
    Expect {
        name: "machineconfigs.machineconfiguration.openshift.io",
        version: "v1",
        short_names: &["mc"],
        status_subresource: false,
        columns: &["GeneratedByController", "IgnitionVersion", "Age"],
        schema: &[
            ("/properties/spec/properties/config", || {
                json!({"description": "config is a Ignition Config object.",
                       "type": "object", "x-kubernetes-preserve-unknown-fields": true})
            }),
            (
                "/properties/spec/properties/kernelArguments/nullable",
                || json!(true),
            ),
            ("/properties/spec/properties/osImageURL/type", || {
                json!("string")
            }),
            (
                "/properties/spec/properties/baseOSExtensionsContainerImage/type",
                || json!("string"),
            ),
            ("/properties/spec/properties/fips/type", || json!("boolean")),
            ("/properties/spec/properties/kernelType/type", || {
                json!("string")
            }),
            ("/properties/spec/properties/extensions/items/type", || {
                json!("string")
            }),
        ],
    },
    Expect {
        name: "machineconfigurations.operator.openshift.io",
        version: "v1",
        short_names: &[],
        status_subresource: true,
        columns: &[],
        schema: &[
            (
                "/properties/spec/properties/nodeDisruptionPolicy/properties/files/x-kubernetes-list-map-keys",
                || json!(["path"]),
            ),
            (
                "/properties/spec/properties/nodeDisruptionPolicy/properties/files/items/properties/actions/items/properties/type/enum",
                || {
                    json!([
                        "Reboot",
                        "Drain",
                        "Reload",
                        "Restart",
                        "DaemonReload",
                        "None"
                    ])
                },
            ),
            (
                "/properties/status/properties/nodeDisruptionPolicyStatus/properties/clusterPolicies/properties/files/items/properties/actions/items/properties/type/enum",
                || {
                    json!([
                        "Reboot",
                        "Drain",
                        "Reload",
                        "Restart",
                        "DaemonReload",
                        "None",
                        "Special"
                    ])
                },
            ),
            ("/properties/spec/properties/logLevel/default", || {
                json!("Normal")
            }),
        ],
    },
    Expect {
        name: "machineimages.machineconfiguration.openshift.io",
        version: "v1alpha1",
        short_names: &[],
        status_subresource: true,
        columns: &["Image", "Node", "Updated", "Age"],
        schema: &[
            ("/properties/spec/required", || json!(["image"])),
            ("/properties/spec/x-kubernetes-validations/0/rule", || {
                json!("has(self.nodeName) != has(self.nodeSelector)")
            }),
        ],
    },
    Expect {
        name: "machineosbuilds.machineconfiguration.openshift.io",
        version: "v1",
        short_names: &[],
        status_subresource: true,
        columns: &[
            "Prepared",
            "Building",
            "Succeeded",
            "Interrupted",
            "Failed",
            "Age",
        ],
        schema: &[
            ("/properties/spec/x-kubernetes-validations/0/rule", || {
                json!("self == oldSelf")
            }),
            (
                "/properties/status/properties/conditions/x-kubernetes-list-map-keys",
                || json!(["type"]),
            ),
            ("/properties/status/properties/conditions/maxItems", || {
                json!(8)
            }),
        ],
    },
    Expect {
        name: "machineosconfigs.machineconfiguration.openshift.io",
        version: "v1",
        short_names: &[],
        status_subresource: true,
        columns: &[],
        schema: &[
            (
                "/properties/spec/properties/imageBuilder/properties/imageBuilderType/enum",
                // The MCO's Job, then machineos's own Native and OpenShiftBuild.
                || json!(["Job", "Native", "OpenShiftBuild"]),
            ),
            (
                "/properties/spec/properties/containerFile/items/properties/containerfileArch/enum",
                || json!(["ARM64", "AMD64", "PPC64LE", "S390X", "NoArch"]),
            ),
            (
                "/properties/spec/properties/containerFile/items/properties/containerfileArch/default",
                || json!("NoArch"),
            ),
            ("/x-kubernetes-validations/0/optionalOldSelf", || {
                json!(true)
            }),
        ],
    },
    Expect {
        name: "machineosimages.machineconfiguration.openshift.io",
        version: "v1alpha1",
        short_names: &[],
        status_subresource: true,
        columns: &["Pool", "Config", "Image", "RolledOut", "Age"],
        schema: &[
            ("/properties/spec/properties/architectures/minItems", || {
                json!(1)
            }),
            (
                "/properties/spec/properties/architectures/items/properties/digest/pattern",
                || json!("^sha256:[a-f0-9]{64}$"),
            ),
            ("/properties/spec/x-kubernetes-validations/0/rule", || {
                json!("self == oldSelf")
            }),
        ],
    },
];

#[test]
fn crds_have_the_mco_shapes() {
    let all: Vec<Value> = crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let names: Vec<&str> = all
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = EXPECT.iter().map(|e| e.name).collect();
    assert_eq!(names, expected, "every kind, sorted by name");
    for (crd, want) in all.iter().zip(EXPECT) {
        let spec = &crd["spec"];
        let group = want
            .name
            .split_once('.')
            .map(|(_, g)| g)
            .unwrap_or_default();
        assert_eq!(spec["group"], group, "{}", want.name);
        assert_eq!(spec["scope"], "Cluster", "{}", want.name);
        let short: Vec<&str> = spec["names"]["shortNames"]
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(short, want.short_names, "{}", want.name);
        let version = &spec["versions"][0];
        assert_eq!(version["name"], want.version, "{}", want.name);
        assert_eq!(
            version["subresources"]["status"] == json!({}),
            want.status_subresource,
            "{}: status subresource",
            want.name
        );
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .map(|a| a.iter().map(|c| c["name"].as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(columns, want.columns, "{}", want.name);
        let schema = &version["schema"]["openAPIV3Schema"];
        for (pointer, value) in want.schema {
            assert_eq!(
                schema.pointer(pointer),
                Some(&value()),
                "{}: {pointer}",
                want.name
            );
        }
    }
}

#[test]
fn mosb_columns_read_conditions() {
    let crd = crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "MachineOSBuild")
        .unwrap();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap();
    for c in columns.iter().filter(|c| c.name != "Age") {
        assert_eq!(
            c.json_path,
            format!(".status.conditions[?(@.type==\"{}\")].status", c.name),
        );
        assert_eq!(c.type_, "string");
    }
    assert_eq!(
        columns.last().unwrap().json_path,
        ".metadata.creationTimestamp"
    );
}

/// What `crd.rs`'s post-processing fixes, checked without openshift/api's CRDs at hand (the
/// full comparison is tests/upstream_crds.rs): root `apiVersion`/`kind`/`metadata`, root
/// `status` not nullable, MachineConfig's `spec` optional, int-or-string without `nullable`
/// and with `anyOf`; and MachineOSBuild's recorded builder type without an enum.
#[test]
fn post_processing_matches_openshift_api() {
    for crd in crds() {
        let kind = crd.spec.names.kind.clone();
        let crd = serde_json::to_value(&crd).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        for (name, ty) in [
            ("apiVersion", "string"),
            ("kind", "string"),
            ("metadata", "object"),
        ] {
            assert_eq!(schema["properties"][name]["type"], ty, "{kind}: {name}");
        }
        assert_eq!(
            schema.pointer("/properties/status/nullable"),
            None,
            "{kind}: status"
        );
        let required = schema.get("required").cloned().unwrap_or(json!([]));
        let want = if kind == "MachineConfig" {
            json!([])
        } else {
            json!(["spec"])
        };
        assert_eq!(required, want, "{kind}: required");
    }
    let all: Vec<Value> = crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let schema_of = |kind: &str| {
        all.iter()
            .find(|c| c["spec"]["names"]["kind"] == kind)
            .map(|c| c["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone())
            .unwrap()
    };
    let int_or_string = json!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": true
    });
    for (kind, pointer) in [
        (
            "MachineConfigPool",
            "/properties/spec/properties/maxUnavailable",
        ),
        ("MachineImage", "/properties/spec/properties/maxUnavailable"),
    ] {
        let mut got = schema_of(kind).pointer(pointer).unwrap().clone();
        got.as_object_mut().unwrap().remove("description");
        assert_eq!(got, int_or_string, "{kind} {pointer}");
    }
    assert_eq!(
        schema_of("MachineOSBuild")
            .pointer("/properties/status/properties/builder/properties/imageBuilderType/enum"),
        None
    );
}
