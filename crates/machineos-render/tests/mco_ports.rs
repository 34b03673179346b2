//! The Machine Config Operator's own render and merge unit tests, ported as tables against
//! machineos's renderer, rendered names included.
//!
//! Sources (openshift/machine-config-operator 7ff337a4):
//! `pkg/controller/common/helpers_test.go` (`TestMergeMachineConfigs`,
//! `TestSetDefaultFileOverwrite`, `TestIgnitionMergeCompressed`, `TestValidateIgnition`,
//! `TestValidateMachineConfigExtensions`) and `pkg/controller/render/render_controller_test.go`
//! (`TestIgnValidationGenerateRenderedMachineConfig`,
//! `TestGenerateMachineConfigOverrideOSImageURL`,
//! `TestGenerateMachineConfigCannotOverrideOSImageURLWhenOSImageStreamSet`,
//! `TestGenerateMachineConfigValidation`, `TestGetMachineConfigsForPool`,
//! `TestCreatesGeneratedMachineConfig`, `TestUpdatesGeneratedMachineConfig`), with the
//! fixtures of `test/helpers` (`NewMachineConfig`, `CreateUncompressedIgn3File`, …) written
//! out as JSON. Each port names its Go test in a comment above its table.
//!
//! Mapping: the ControllerConfig's `baseOSContainerImage` is [`RenderDefaults::os_image_url`]
//! (`GetBaseImageContainer` reads only that field, not `osImageURL`; the render controller
//! tests' `newControllerConfig` sets only `osImageURL`, so they render on `""`), its
//! `baseOSExtensionsContainerImage` is [`RenderDefaults::base_os_extensions_container_image`],
//! a pool's `spec.osImageStream.name` is [`RenderDefaults::os_image_stream`].
//! `MergeMachineConfigs` names nothing; its cases are rendered for pool `worker` (`infra` for
//! the custom-pool case) to get a name.
//!
//! Names. The MCO names a rendered MachineConfig `rendered-<pool>-<md5>` over `hash.go`'s salt
//! and `yaml.Marshal` of its spec, whose `config` is the raw JSON `MergeMachineConfigs`
//! stored — marshalled with `github.com/clarketm/json`, which also leaves out `omitempty`
//! structs whose fields are all empty (the MCO's own `TestMergeMachineConfigs` expects
//! `{"ignition":{"version":"3.5.0"}}` for an empty config). Each case's `mco_spec` and
//! `mco_name` come from the Go oracle of machineos-goyaml's `tests/golden` (built against the
//! MCO's vendored yaml.v2, ghodss/yaml, clarketm/json and Ignition's v3_5 types): `mco_spec`
//! is, verbatim, the `spec` of its input line `{"typed":true,"spec":<mco_spec>}` (the
//! comments give it abbreviated), its `config` the oracle's `config` output, and `mco_name`
//! the oracle's hash. `mco_stored_configs_and_names` checks machineos stores that config and
//! gives that name; `check` checks every other field.
//!
//! Adapted: `TestMergeMachineConfigs` gives two MachineConfigs the name `ssh` (possible only
//! in memory, never in a cluster; machineos refuses duplicates), so the second is `ssh-2`,
//! which keeps the MCO's stable-sort order. `TestIgnitionMergeCompressed` calls `ign3.Merge`
//! and `TestValidateMachineConfigExtensions` `ValidateMachineConfigExtensions` directly;
//! their inputs go through `render` and `validate_machine_config` here (the latter with a
//! config, the only case in which `ValidateMachineConfig` checks extensions).
//!
//! Skipped, and why:
//! * Kubernetes clients, listers, informers, events, owner references, pool status updates
//!   (`f.run`, `expect*Action`): machineos renders values, it talks to no API server — what
//!   those tests check of the result (the name, the pool's `spec.configuration.source` and
//!   `.name`) is ported.
//! * ControllerConfig version annotations and controller-version skew (`TestVersionSkew`,
//!   `TestGenerateRenderedConfigOnLatestControllerVersionOnly`, the `release-image-version`
//!   annotation): machineos has no ControllerConfig.
//! * OSImageStream objects (`TestGetOSImageStreamNameForPool*`, stream inheritance by custom
//!   pools): machineos takes the stream name as a value.
//! * runc on RHEL 10 (`TestValidateNoRuncOnRHEL10*`, `TestRunBootstrapBlocksRuncOnRHEL10`).
//! * Ignition spec 2.x: the `v2` MachineConfig of `TestMergeMachineConfigs` (an empty 2.2.0
//!   config, which adds nothing to the merge) is left out, and `TestValidateIgnition`'s
//!   `ign2types` cases; spec 2.2 is ported separately.
//! * `TestValidateIgnition`'s typed-struct cases other than file modes (a Go value, not a
//!   MachineConfig: an empty `ign3types.Config{}` has no version, which a MachineConfig's
//!   raw config cannot omit).
//! * The reconciliation half of `TestGenerateMachineConfigValidation`
//!   (`generateAndValidateRenderedMachineConfig` refusing a FIPS change against the pool's
//!   current rendered MachineConfig): `render` takes no current MachineConfig; the render
//!   half is ported.

use machineos_api::v1::{MachineConfig, MachineConfigPool, MachineConfigSpec};
use machineos_diagnostics::Classify;
use machineos_render::go_json::spec_json;
use machineos_render::{
    RenderDefaults, RenderError, Rendered, ValidateError, render, rendered_name, select_for_pool,
    validate_machine_config,
};
use serde_json::{Value, json};

const ROLE: &str = "machineconfiguration.openshift.io/role";
const OVERRIDDEN: &str = "machineconfiguration.openshift.io/os-image-url-overridden";

fn mc(name: &str, labels: Value, spec: Value) -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .expect("a MachineConfig")
}

fn role(r: &str) -> Value {
    json!({ROLE: r})
}

/// The labels the render controller tests give their MachineConfigs (no role label).
fn node_role_master() -> Value {
    json!({"node-role/master": ""})
}

/// `helpers.CreateMachineConfigFromIgnitionWithMetadata`: a role label and a config.
fn from_ignition(name: &str, r: &str, config: Value) -> MachineConfig {
    mc(name, role(r), json!({"config": config}))
}

/// `helpers.NewMachineConfig(name, labels, osurl, files)`: a 3.5.0 config with those files
/// (`storage` absent when there are none, as the MCO's JSON writes it).
fn new_machine_config(name: &str, labels: Value, osurl: &str, files: Value) -> MachineConfig {
    let mut config = json!({"ignition": {"version": "3.5.0"}});
    if files.as_array().is_some_and(|f| !f.is_empty()) {
        config["storage"] = json!({ "files": files });
    }
    mc(name, labels, json!({"osImageURL": osurl, "config": config}))
}

fn defaults(os_image_url: &str) -> RenderDefaults {
    RenderDefaults {
        os_image_url: os_image_url.to_owned(),
        ..RenderDefaults::default()
    }
}

fn run(pool: &str, mcs: &[MachineConfig], d: &RenderDefaults) -> Result<Rendered, RenderError> {
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    render(pool, &refs, d)
}

fn source_names(r: &Rendered) -> Vec<&str> {
    r.source
        .iter()
        .map(|s| s.name.as_deref().unwrap_or(""))
        .collect()
}

/// One rendered MachineConfig the MCO's tests produce.
struct Case {
    /// The Go test and step.
    what: &'static str,
    pool: &'static str,
    mcs: Vec<MachineConfig>,
    defaults: RenderDefaults,
    /// The spec `MergeMachineConfigs` returns, its config as the MCO stores it (clarketm/json);
    /// also the `spec` of both oracles' input line.
    mco_spec: Value,
    /// The MCO's name: the clarketm/json oracle's hash.
    mco_name: &'static str,
}

/// Every spec field but the stored config, the merged Ignition content (typed), and the
/// name machineos gives the spec the MCO stores. The stored config and the rendered name
/// themselves are checked over all cases by `mco_stored_configs_and_names`.
fn check(case: &Case) -> Rendered {
    let what = case.what;
    let r = run(case.pool, &case.mcs, &case.defaults)
        .unwrap_or_else(|e| panic!("{what}: want a rendered MachineConfig, got {e}"));
    let spec = spec_json(&r.machine_config.spec);
    for field in [
        "osImageURL",
        "baseOSExtensionsContainerImage",
        "kernelArguments",
        "extensions",
        "fips",
        "kernelType",
    ] {
        assert_eq!(spec[field], case.mco_spec[field], "{what}: spec.{field}");
    }
    assert_eq!(
        serde_json::to_value(&r.ignition).expect("typed config"),
        case.mco_spec["config"],
        "{what}: the merged Ignition content (typed, empty fields left out)"
    );
    // Naming on its own: machineos gives the spec the MCO stores the MCO's name.
    let stored: MachineConfigSpec =
        serde_json::from_value(case.mco_spec.clone()).expect("a MachineConfigSpec");
    assert_eq!(
        rendered_name(case.pool, &stored).as_deref(),
        Some(case.mco_name),
        "{what}: the name of the spec the MCO stores (clarketm/json oracle)"
    );
    r
}

// ---------------------------------------------------------------------------------------
// helpers_test.go: TestMergeMachineConfigs
// ---------------------------------------------------------------------------------------

fn merge_machine_configs_cases() -> Vec<Case> {
    // cconfig.Spec.OSImageURL = "testURL" is not read: GetBaseImageContainer returns
    // BaseOSContainerImage.
    let cconfig = defaults("newformatURL");
    let worker = || role("worker");
    let fips = mc("fips", worker(), json!({"fips": true}));
    let ign = |passwd: Value| json!({"ignition": {"version": "3.5.0"}, "passwd": passwd});
    // helpers.CreateUncompressedIgn3File(path, source, 420).
    let file = |path: &str, source: &str| {
        json!({"path": path, "user": {"name": "root"},
               "contents": {"source": source}, "mode": 420})
    };
    // helpers.CreateGzippedIgn3File("/etc/test2", "data:,old", 420): gzip of the text
    // "data:,old", as dataurl.EncodeBytes writes it.
    let gzipped = json!({"path": "/etc/test2", "user": {"name": "root"}, "mode": 420,
        "contents": {"source": "data:application/x-gzip;base64,H4sIAAAAAAAA/0pJLEm00snPSQEEAAD//7LxIeEJAAAA",
                     "compression": "gzip"}});
    let storage =
        |files: Value| json!({"ignition": {"version": "3.5.0"}, "storage": {"files": files}});
    vec![
        Case {
            what: "TestMergeMachineConfigs: a single FIPS MachineConfig sets the other defaults",
            pool: "worker",
            mcs: vec![fips.clone()],
            defaults: cconfig.clone(),
            // oracle input: {"typed":true,"spec":{"osImageURL":"newformatURL",
            // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"}},
            // "kernelArguments":[],"extensions":[],"fips":true,"kernelType":"default"}}
            mco_spec: json!({
                "osImageURL": "newformatURL", "baseOSExtensionsContainerImage": "",
                "config": {"ignition": {"version": "3.5.0"}},
                "kernelArguments": [], "extensions": [], "fips": true, "kernelType": "default"
            }),
            mco_name: "rendered-worker-552a0f58ccdcced4c68ca23fe3db7b58",
        },
        Case {
            what: "TestMergeMachineConfigs: every field merged",
            pool: "worker",
            mcs: vec![
                mc(
                    "osimageurl",
                    worker(),
                    json!({"osImageURL": "overriddenURL"}),
                ),
                mc(
                    "kargs",
                    worker(),
                    json!({"kernelArguments": ["testKarg", "kargFromIgnitionDowngrade"]}),
                ),
                mc("kerneltype", worker(), json!({"kernelType": "realtime"})),
                // Not checked: ValidateMachineConfig checks extensions only with a config.
                mc(
                    "extension",
                    worker(),
                    json!({"extensions": ["testExtensions"]}),
                ),
                from_ignition(
                    "ssh",
                    "worker",
                    ign(json!({"users": [{"name": "core", "sshAuthorizedKeys": ["5678"]}]})),
                ),
                fips,
                from_ignition(
                    "passwd",
                    "worker",
                    ign(json!({"users": [{"name": "core", "passwordHash": "testpass"}]})),
                ),
                from_ignition(
                    "ssh-2",
                    "worker",
                    ign(json!({"users": [{"name": "core", "sshAuthorizedKeys": ["1234"]}]})),
                ),
            ],
            defaults: cconfig,
            // oracle input: {"typed":true,"spec":{"osImageURL":"overriddenURL",…,"config":
            // {"ignition":{"version":"3.5.0"},"passwd":{"users":[{"name":"core","passwordHash":
            // "testpass","sshAuthorizedKeys":["5678","1234"]}]}},"kernelArguments":["testKarg",
            // "kargFromIgnitionDowngrade"],"extensions":["testExtensions"],"fips":true,
            // "kernelType":"realtime"}}
            mco_spec: json!({
                "osImageURL": "overriddenURL", "baseOSExtensionsContainerImage": "",
                "config": {"ignition": {"version": "3.5.0"},
                           "passwd": {"users": [{"name": "core", "passwordHash": "testpass",
                                                 "sshAuthorizedKeys": ["5678", "1234"]}]}},
                "kernelArguments": ["testKarg", "kargFromIgnitionDowngrade"],
                "extensions": ["testExtensions"], "fips": true, "kernelType": "realtime"
            }),
            mco_name: "rendered-worker-98362bc5ab15da4f22ced78cb5bbaf9d",
        },
        Case {
            what: "TestMergeMachineConfigs: a custom pool's MachineConfig overrides the worker ones; \
                   names order the rest",
            pool: "infra",
            mcs: vec![
                from_ignition(
                    "ccc",
                    "infra",
                    storage(json!([file("/etc/test2", "data:,new")])),
                ),
                from_ignition(
                    "aaa",
                    "worker",
                    storage(json!([file("/etc/test1", "data:,old")])),
                ),
                from_ignition(
                    "bbb",
                    "worker",
                    storage(json!([file("/etc/test1", "data:,new")])),
                ),
                from_ignition("ddd", "worker", storage(json!([gzipped]))),
            ],
            defaults: RenderDefaults::default(),
            // oracle input: {"typed":true,"spec":{"osImageURL":"",
            // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"},
            // "storage":{"files":[{"overwrite":true,"path":"/etc/test1","user":{"name":"root"},
            // "contents":{"source":"data:,new"},"mode":420},{…"/etc/test2"…}]}},
            // "kernelArguments":[],"extensions":[],"fips":false,"kernelType":"default"}}
            mco_spec: json!({
                "osImageURL": "", "baseOSExtensionsContainerImage": "",
                "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                    {"overwrite": true, "path": "/etc/test1", "user": {"name": "root"},
                     "contents": {"source": "data:,new"}, "mode": 420},
                    {"overwrite": true, "path": "/etc/test2", "user": {"name": "root"},
                     "contents": {"source": "data:,new"}, "mode": 420}
                ]}},
                "kernelArguments": [], "extensions": [], "fips": false, "kernelType": "default"
            }),
            mco_name: "rendered-infra-56351990a1aab21a79fa9047e56318f3",
        },
    ]
}

#[test]
fn merge_machine_configs() {
    let cases = merge_machine_configs_cases();
    let fips_only = check(&cases[0]);
    assert_eq!(fips_only.warnings, [], "{}", cases[0].what);
    assert_eq!(
        fips_only.machine_config.annotation(OVERRIDDEN),
        None,
        "{}: the default image is no override",
        cases[0].what
    );

    let all = check(&cases[1]);
    assert_eq!(
        all.machine_config.annotation(OVERRIDDEN),
        Some("true"),
        "{}",
        cases[1].what
    );
    // The unknown extension renders (the MCO checks extensions only next to a config);
    // machineos says so in a warning.
    let warned: Vec<&str> = all
        .warnings
        .iter()
        .map(|w| w.machine_config.as_str())
        .collect();
    assert_eq!(warned, ["extension"], "{}", cases[1].what);

    // The pool's source list for these is `pool_source_is_in_merge_order`.
    check(&cases[2]);
}

// ---------------------------------------------------------------------------------------
// helpers_test.go: TestSetDefaultFileOverwrite
// ---------------------------------------------------------------------------------------

fn set_default_file_overwrite_cases() -> Vec<Case> {
    let file =
        |path: &str| json!({"path": path, "contents": {"source": "data:,test"}, "mode": 420});
    let mut overwrite_false = file("/etc/testfileconfig2");
    overwrite_false["overwrite"] = json!(false);
    vec![Case {
        what: "TestSetDefaultFileOverwrite: unset overwrite becomes true, false stays",
        pool: "worker",
        mcs: vec![from_ignition(
            "overwrite",
            "worker",
            json!({"ignition": {"version": "3.5.0"},
                   "storage": {"files": [file("/etc/testfileconfig1"), overwrite_false]}}),
        )],
        defaults: RenderDefaults::default(),
        // oracle input: {"typed":true,"spec":{"osImageURL":"","baseOSExtensionsContainerImage":
        // "","config":{"ignition":{"version":"3.5.0"},"storage":{"files":[{"overwrite":true,
        // "path":"/etc/testfileconfig1","contents":{"source":"data:,test"},"mode":420},
        // {"overwrite":false,"path":"/etc/testfileconfig2",…}]}},"kernelArguments":[],
        // "extensions":[],"fips":false,"kernelType":"default"}}
        mco_spec: json!({
            "osImageURL": "", "baseOSExtensionsContainerImage": "",
            "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"overwrite": true, "path": "/etc/testfileconfig1",
                 "contents": {"source": "data:,test"}, "mode": 420},
                {"overwrite": false, "path": "/etc/testfileconfig2",
                 "contents": {"source": "data:,test"}, "mode": 420}
            ]}},
            "kernelArguments": [], "extensions": [], "fips": false, "kernelType": "default"
        }),
        mco_name: "rendered-worker-735a6e5168c30b1ab0c17fe1e5ef234e",
    }]
}

#[test]
fn set_default_file_overwrite() {
    for case in set_default_file_overwrite_cases() {
        check(&case);
    }
}

// ---------------------------------------------------------------------------------------
// helpers_test.go: TestIgnitionMergeCompressed (butane#332). The Go test merges with
// ign3.Merge directly; here both configs go through the whole render.
// ---------------------------------------------------------------------------------------

/// `NewIgnFile("/etc/testfileconfig", "hello world")`'s source (`dataurl.EncodeBytes`).
const HELLO_WORLD: &str = "data:text/plain;charset=utf-8;base64,aGVsbG8gd29ybGQ=";

fn ignition_merge_compressed_cases() -> Vec<Case> {
    let config =
        |file: Value| json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [file]}});
    vec![Case {
        what: "TestIgnitionMergeCompressed: plain contents over gzip ones lose the gzip",
        pool: "worker",
        mcs: vec![
            from_ignition(
                "00-gzip",
                "worker",
                config(json!({"path": "/etc/testfileconfig", "mode": 420,
                              "contents": {"source": "data:;base64,H4sIAAAAAAAAA0vLz+cCAKhlMn4EAAAA",
                                           "compression": "gzip"}})),
            ),
            // NewIgnFile: mode 0644 and an explicit empty compression.
            from_ignition(
                "01-plain",
                "worker",
                config(json!({"path": "/etc/testfileconfig", "mode": 420,
                              "contents": {"source": HELLO_WORLD, "compression": ""}})),
            ),
        ],
        defaults: RenderDefaults::default(),
        // oracle input: {"typed":true,"spec":{"osImageURL":"","baseOSExtensionsContainerImage":
        // "","config":{"ignition":{"version":"3.5.0"},"storage":{"files":[{"overwrite":true,
        // "path":"/etc/testfileconfig","contents":{"source":"data:text/plain;charset=utf-8;
        // base64,aGVsbG8gd29ybGQ="},"mode":420}]}},"kernelArguments":[],"extensions":[],
        // "fips":false,"kernelType":"default"}}
        mco_spec: json!({
            "osImageURL": "", "baseOSExtensionsContainerImage": "",
            "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"overwrite": true, "path": "/etc/testfileconfig",
                 "contents": {"source": HELLO_WORLD}, "mode": 420}
            ]}},
            "kernelArguments": [], "extensions": [], "fips": false, "kernelType": "default"
        }),
        mco_name: "rendered-worker-2e9aba9626016cf87a3bbb530306e038",
    }]
}

#[test]
fn ignition_merge_compressed() {
    for case in ignition_merge_compressed_cases() {
        let r = check(&case);
        let file = &serde_json::to_value(&r.ignition).expect("typed config")["storage"]["files"][0];
        assert_eq!(file["contents"].get("compression"), None, "{}", case.what);
        let source = file["contents"]["source"].as_str().expect("a source");
        let contents = machineos_ignition::dataurl::decode(source).expect("a data URL");
        assert_eq!(
            String::from_utf8(contents).as_deref(),
            Ok("hello world"),
            "{}",
            case.what
        );
    }
}

// ---------------------------------------------------------------------------------------
// helpers_test.go: TestValidateIgnition (the spec 3 file-mode cases; bugzilla 2038240)
// ---------------------------------------------------------------------------------------

#[test]
fn validate_ignition_file_modes() {
    // (mode, Ok(mode kept) or Err(ValidateIgnition's message))
    let cases: &[(i64, Result<i64, &str>)] = &[
        (420, Ok(420)),
        (
            0o1777,
            Err("invalid mode 01777 for /etc/testfileconfig, cannot exceed 0777"),
        ),
    ];
    for (mode, want) in cases {
        let m = mc(
            "99-modes",
            role("worker"),
            json!({"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/etc/testfileconfig", "contents": {"source": "data:,greatconfigstuff"},
                 "mode": mode}
            ]}}}),
        );
        match (validate_machine_config(&m), want) {
            (Ok(v), Ok(kept)) => {
                let typed = serde_json::to_value(v.ignition.as_ref().expect("a config"))
                    .expect("typed config");
                assert_eq!(
                    typed["storage"]["files"][0]["mode"],
                    json!(kept),
                    "{mode:#o}"
                );
            }
            (Err(e), Err(mco)) => {
                assert_eq!(
                    e,
                    ValidateError::FileMode {
                        name: "99-modes".into(),
                        index: 0,
                        path: "/etc/testfileconfig".into(),
                        mode: *mode,
                    },
                    "{mode:#o}"
                );
                assert_eq!(
                    e.to_string(),
                    format!(
                        "MachineConfig \"99-modes\": error at $.spec.config.storage.files.0.mode: {mco}"
                    ),
                    "{mode:#o}: the MCO's message, located"
                );
            }
            (got, want) => panic!("mode {mode:#o}: want {want:?}, got {got:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// helpers_test.go: TestValidateMachineConfigExtensions. The Go test calls
// ValidateMachineConfigExtensions directly; ValidateMachineConfig calls it only when the
// MachineConfig has a config, so each case carries one.
// ---------------------------------------------------------------------------------------

#[test]
fn validate_machine_config_extensions() {
    let cases: &[(&str, &[&str], Result<(), &str>)] = &[
        ("Supported", &["sysstat", "sandboxed-containers"], Ok(())),
        (
            "Unsupported",
            &["unsupported1", "unsupported2"],
            Err("invalid extensions found: [unsupported1 unsupported2]"),
        ),
    ];
    for (name, extensions, want) in cases {
        let m = mc(
            "99-extensions",
            role("worker"),
            json!({"config": {"ignition": {"version": "3.5.0"}}, "extensions": extensions}),
        );
        match (validate_machine_config(&m), want) {
            (Ok(v), Ok(())) => {
                let parsed: Vec<&str> = v.extensions.iter().map(|e| e.as_str()).collect();
                assert_eq!(parsed, *extensions, "{name}");
                assert_eq!(v.unchecked_extensions, Vec::<String>::new(), "{name}");
            }
            (Err(e), Err(mco)) => {
                assert_eq!(e.reason(), "UnsupportedExtension", "{name}");
                assert_eq!(
                    e.to_string(),
                    format!("MachineConfig \"99-extensions\": error at $.spec.extensions: {mco}"),
                    "{name}"
                );
                for ext in *extensions {
                    assert!(e.to_string().contains(ext), "{name}: names {ext}");
                }
            }
            (got, want) => panic!("{name}: want {want:?}, got {got:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// render_controller_test.go: TestIgnValidationGenerateRenderedMachineConfig
// ---------------------------------------------------------------------------------------

/// The two MachineConfigs of the render controller tests, files without `overwrite` or
/// with `overwrite: false`.
fn dummy_master_configs(overwrite: Option<bool>) -> Vec<MachineConfig> {
    let file = |path: &str| match overwrite {
        Some(o) => json!({"path": path, "overwrite": o}),
        None => json!({"path": path}),
    };
    vec![
        new_machine_config(
            "00-test-cluster-master",
            node_role_master(),
            "dummy://",
            json!([file("/dummy/0")]),
        ),
        new_machine_config(
            "05-extra-master",
            node_role_master(),
            "dummy://1",
            json!([file("/dummy/1")]),
        ),
    ]
}

/// The rendered MachineConfig of `dummy_master_configs(None)` (TestCreatesGeneratedMachineConfig
/// and the first step of TestIgnValidationGenerateRenderedMachineConfig).
fn dummy_master_case(what: &'static str) -> Case {
    Case {
        what,
        pool: "test-cluster-master",
        mcs: dummy_master_configs(None),
        // newControllerConfig sets osImageURL "dummy" but no baseOSContainerImage.
        defaults: RenderDefaults::default(),
        // oracle input: {"typed":true,"spec":{"osImageURL":"dummy://1",
        // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"},
        // "storage":{"files":[{"overwrite":true,"path":"/dummy/0"},{"overwrite":true,
        // "path":"/dummy/1"}]}},"kernelArguments":[],"extensions":[],"fips":false,
        // "kernelType":"default"}}
        mco_spec: json!({
            "osImageURL": "dummy://1", "baseOSExtensionsContainerImage": "",
            "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"overwrite": true, "path": "/dummy/0"}, {"overwrite": true, "path": "/dummy/1"}
            ]}},
            "kernelArguments": [], "extensions": [], "fips": false, "kernelType": "default"
        }),
        mco_name: "rendered-test-cluster-master-1113deb232f839eb5e31b8a7ae59cd6d",
    }
}

fn ign_validation_cases() -> Vec<Case> {
    let mut mcs = dummy_master_configs(None);
    // Step 3: mcs[1] gets NewIgnConfig() (an empty 3.5.0 config) and kernel argument test1.
    mcs[1].spec.config = Some(
        json!({"ignition": {"version": "3.5.0"}})
            .as_object()
            .cloned()
            .expect("an object"),
    );
    mcs[1].spec.kernel_arguments.push("test1".into());
    vec![
        dummy_master_case("TestIgnValidationGenerateRenderedMachineConfig: valid configs render"),
        Case {
            what: "TestIgnValidationGenerateRenderedMachineConfig: an empty config does not fail",
            pool: "test-cluster-master",
            mcs,
            defaults: RenderDefaults::default(),
            // oracle input: {"typed":true,"spec":{"osImageURL":"dummy://1",
            // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"},
            // "storage":{"files":[{"overwrite":true,"path":"/dummy/0"}]}},
            // "kernelArguments":["test1"],"extensions":[],"fips":false,"kernelType":"default"}}
            mco_spec: json!({
                "osImageURL": "dummy://1", "baseOSExtensionsContainerImage": "",
                "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                    {"overwrite": true, "path": "/dummy/0"}
                ]}},
                "kernelArguments": ["test1"], "extensions": [], "fips": false,
                "kernelType": "default"
            }),
            mco_name: "rendered-test-cluster-master-933f10dcf6c9ddef7cae1859b3361d45",
        },
    ]
}

#[test]
fn ign_validation_generate_rendered_machine_config() {
    let cases = ign_validation_cases();
    check(&cases[0]);

    // Step 2: mcs[1]'s config re-marshalled with an empty version fails validation.
    let mut mcs = dummy_master_configs(None);
    mcs[1].spec.config = Some(
        json!({"ignition": {"version": ""}, "storage": {"files": [{"path": "/dummy/1"}]}})
            .as_object()
            .cloned()
            .expect("an object"),
    );
    let e = run("test-cluster-master", &mcs, &RenderDefaults::default())
        .expect_err("an empty Ignition version is invalid");
    assert_eq!(e.reason(), "InvalidConfig", "{e}");
    assert_eq!(
        e.to_string(),
        "MachineConfig \"05-extra-master\": error at $.spec.config.ignition.version: invalid config version (couldn't parse)"
    );

    check(&cases[1]);
}

// ---------------------------------------------------------------------------------------
// render_controller_test.go: TestGenerateMachineConfigOverrideOSImageURL,
// TestGenerateMachineConfigValidation (its render; see the header)
// ---------------------------------------------------------------------------------------

/// `helpers.NewMachineConfig(name, {"node-role/master": ""}, osurl, [])`.
fn image_only(name: &str, osurl: &str) -> MachineConfig {
    new_machine_config(name, node_role_master(), osurl, json!([]))
}

fn image_case(
    what: &'static str,
    mcs: Vec<MachineConfig>,
    os_image_url: &str,
    fips: bool,
    mco_name: &'static str,
) -> Case {
    Case {
        what,
        pool: "test-cluster-master",
        mcs,
        defaults: RenderDefaults::default(),
        mco_spec: json!({
            "osImageURL": os_image_url, "baseOSExtensionsContainerImage": "",
            "config": {"ignition": {"version": "3.5.0"}},
            "kernelArguments": [], "extensions": [], "fips": fips, "kernelType": "default"
        }),
        mco_name,
    }
}

fn override_os_image_url_cases() -> Vec<Case> {
    let two = vec![
        image_only("00-test-cluster-master", "dummy-test-1"),
        image_only("00-test-cluster-master-0", "dummy-change"),
    ];
    let mut three = two.clone();
    three.push(image_only("00-test-cluster-master-1", "dummy-change-2"));
    vec![
        image_case(
            "TestGenerateMachineConfigOverrideOSImageURL: the last MachineConfig's image wins",
            two,
            "dummy-change",
            false,
            // oracle input: {"typed":true,"spec":{"osImageURL":"dummy-change",
            // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"}},
            // "kernelArguments":[],"extensions":[],"fips":false,"kernelType":"default"}}
            "rendered-test-cluster-master-23c161b4e8f92642e7a43d7fec350e1c",
        ),
        image_case(
            "TestGenerateMachineConfigOverrideOSImageURL: a new MachineConfig overrides again",
            three,
            "dummy-change-2",
            false,
            // oracle input: {"typed":true,"spec":{"osImageURL":"dummy-change-2",…same…}}
            "rendered-test-cluster-master-a68e23f7267ab421e727a250bc3ece0c",
        ),
    ]
}

#[test]
fn generate_machine_config_override_os_image_url() {
    for case in override_os_image_url_cases() {
        let r = check(&case);
        assert_eq!(
            r.machine_config.annotation(OVERRIDDEN),
            Some("true"),
            "{}",
            case.what
        );
    }
}

fn generate_machine_config_validation_cases() -> Vec<Case> {
    let mut mcs = vec![
        image_only("00-test-cluster-master", "dummy-test-1"),
        image_only("00-test-cluster-master-0", "dummy-change"),
    ];
    mcs[1].spec.fips = true;
    vec![image_case(
        "TestGenerateMachineConfigValidation: the rendered config turns FIPS on",
        mcs,
        "dummy-change",
        true,
        // oracle input: {"typed":true,"spec":{"osImageURL":"dummy-change",
        // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"}},
        // "kernelArguments":[],"extensions":[],"fips":true,"kernelType":"default"}}
        "rendered-test-cluster-master-ae72894e5db193353d12663c5e399e88",
    )]
}

#[test]
fn generate_machine_config_validation() {
    // The MCO then refuses this rendered config against the pool's current one (FIPS off):
    // that reconciliation has no machineos counterpart. The render itself is the MCO's.
    for case in generate_machine_config_validation_cases() {
        let r = check(&case);
        assert!(r.machine_config.spec.fips, "{}", case.what);
    }
}

// ---------------------------------------------------------------------------------------
// render_controller_test.go: TestGenerateMachineConfigCannotOverrideOSImageURLWhenOSImageStreamSet
// ---------------------------------------------------------------------------------------

#[test]
fn generate_machine_config_cannot_override_os_image_url_when_os_image_stream_set() {
    let mcs = vec![
        image_only("00-test-cluster-master", "dummy-test-1"),
        image_only("00-test-cluster-master-0", "dummy-change"),
    ];
    let d = RenderDefaults {
        os_image_stream: "populated-value".into(),
        ..RenderDefaults::default()
    };
    let e = run("test-cluster-master", &mcs, &d).expect_err("override with a stream");
    assert_eq!(
        e,
        RenderError::OsImageStream {
            pool: "test-cluster-master".into(),
            os_image_url: "dummy-change".into(),
            from: "00-test-cluster-master-0".into(),
            stream: "populated-value".into(),
        }
    );
    assert!(
        e.to_string().contains(
            "cannot override MachineConfig osImageURL and set MachineConfigPool spec.osImageStream.name simultaneously"
        ),
        "the MCO's message: {e}"
    );
}

// ---------------------------------------------------------------------------------------
// render_controller_test.go: TestGetMachineConfigsForPool (getMachineConfigsForPool →
// select_for_pool)
// ---------------------------------------------------------------------------------------

/// `helpers.NewMachineConfigPool(name, selector, nil, "")`'s selector: one matchLabels entry.
fn pool_selecting(name: &str, node_role_label: &str) -> MachineConfigPool {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"machineConfigSelector": {"matchLabels": {node_role_label: ""}}},
    }))
    .expect("a MachineConfigPool")
}

#[test]
fn get_machine_configs_for_pool() {
    let mcs = vec![
        new_machine_config(
            "00-test-cluster-master",
            node_role_master(),
            "dummy://",
            json!([{"path": "/dummy/0"}]),
        ),
        new_machine_config(
            "05-extra-master",
            node_role_master(),
            "dummy://1",
            json!([{"path": "/dummy/1"}]),
        ),
        new_machine_config(
            "00-test-cluster-worker",
            json!({"node-role/worker": ""}),
            "dummy://2",
            json!([{"path": "/dummy/2"}]),
        ),
    ];
    /// The selected names, or the error's message.
    type Want<'a> = Result<&'a [&'a str], &'a str>;
    // (pool, its selector's label, the MachineConfigs offered, what it selects)
    let cases: &[(&str, &str, &[MachineConfig], Want<'_>)] = &[
        (
            "test-cluster-master",
            "node-role/master",
            &mcs,
            Ok(&["00-test-cluster-master", "05-extra-master"]),
        ),
        (
            "test-cluster-worker",
            "node-role/worker",
            &mcs[..2],
            Err("couldn't find any MachineConfigs for pool: test-cluster-worker"),
        ),
    ];
    for (name, label, offered, want) in cases {
        let pool = pool_selecting(name, label);
        match (select_for_pool(Some(&pool), name, offered), want) {
            (Ok(got), Ok(want)) => {
                let got: Vec<&str> = got.iter().map(|m| m.name()).collect();
                assert_eq!(got, *want, "{name}");
            }
            // The MCO's message, then machineos' hint (how many exist, the selector).
            (Err(e), Err(want)) => {
                let e = e.to_string();
                assert!(e.starts_with(*want), "{name}: {e}");
                assert!(e.contains("selector node-role/worker="), "{name}: {e}");
            }
            (got, want) => panic!("{name}: want {want:?}, got {got:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// render_controller_test.go: TestCreatesGeneratedMachineConfig, TestUpdatesGeneratedMachineConfig
// (the rendered MachineConfig the controller creates or restores, and the pool's
// spec.configuration: name and source = getMachineConfigRefs)
// ---------------------------------------------------------------------------------------

fn updates_case() -> Case {
    Case {
        what: "TestUpdatesGeneratedMachineConfig: files with overwrite false",
        pool: "test-cluster-master",
        mcs: dummy_master_configs(Some(false)),
        defaults: RenderDefaults::default(),
        // oracle input: {"typed":true,"spec":{"osImageURL":"dummy://1",
        // "baseOSExtensionsContainerImage":"","config":{"ignition":{"version":"3.5.0"},
        // "storage":{"files":[{"overwrite":false,"path":"/dummy/0"},{"overwrite":false,
        // "path":"/dummy/1"}]}},"kernelArguments":[],"extensions":[],"fips":false,
        // "kernelType":"default"}}
        mco_spec: json!({
            "osImageURL": "dummy://1", "baseOSExtensionsContainerImage": "",
            "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"overwrite": false, "path": "/dummy/0"}, {"overwrite": false, "path": "/dummy/1"}
            ]}},
            "kernelArguments": [], "extensions": [], "fips": false, "kernelType": "default"
        }),
        mco_name: "rendered-test-cluster-master-046bd4eb4d1faaaaac9bc4fe72652755",
    }
}

fn creates_and_updates_cases() -> Vec<Case> {
    vec![
        dummy_master_case("TestCreatesGeneratedMachineConfig: the created rendered MachineConfig"),
        updates_case(),
    ]
}

#[test]
fn creates_and_updates_generated_machine_config() {
    for case in creates_and_updates_cases() {
        let r = check(&case);
        // mcpNew.Spec.Configuration.Source = getMachineConfigRefs(mcs): both MachineConfigs are
        // "other" (no worker role), so merge order is name order.
        let refs: Vec<(Option<&str>, Option<&str>, Option<&str>)> = r
            .source
            .iter()
            .map(|s| {
                (
                    s.api_version.as_deref(),
                    s.kind.as_deref(),
                    s.name.as_deref(),
                )
            })
            .collect();
        let v1 = Some("machineconfiguration.openshift.io/v1");
        assert_eq!(
            refs,
            [
                (v1, Some("MachineConfig"), Some("00-test-cluster-master")),
                (v1, Some("MachineConfig"), Some("05-extra-master")),
            ],
            "{}",
            case.what
        );
        assert_eq!(
            r.machine_config.annotation(OVERRIDDEN),
            Some("true"),
            "{}: dummy://1 is not the ControllerConfig's (empty) base image",
            case.what
        );
        // TestUpdatesGeneratedMachineConfig: a rendered MachineConfig edited in the cluster
        // (osImageURL "why-did-you-change-it") is restored to the same name and spec, which
        // come from the inputs alone.
        let again = run(case.pool, &case.mcs, &case.defaults).expect("renders again");
        assert_eq!(again.machine_config, r.machine_config, "{}", case.what);
    }
}

// ---------------------------------------------------------------------------------------
// Where machineos differs from the MCO.
// ---------------------------------------------------------------------------------------

fn all_cases() -> Vec<Case> {
    [
        merge_machine_configs_cases(),
        set_default_file_overwrite_cases(),
        ignition_merge_compressed_cases(),
        ign_validation_cases(),
        override_os_image_url_cases(),
        generate_machine_config_validation_cases(),
        creates_and_updates_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Every case above, with the config the MCO stores and the name it gives: the config as
/// clarketm/json writes it (empty structs left out), and that config's hash.
#[test]
fn mco_stored_configs_and_names() {
    for case in all_cases() {
        let r = run(case.pool, &case.mcs, &case.defaults)
            .unwrap_or_else(|e| panic!("{}: {e}", case.what));
        assert_eq!(
            spec_json(&r.machine_config.spec)["config"],
            case.mco_spec["config"],
            "{}: spec.config as the MCO stores it",
            case.what
        );
        assert_eq!(
            r.machine_config.metadata.name.as_deref(),
            Some(case.mco_name),
            "{}: the MCO's name",
            case.what
        );
    }
}

/// The pool's `spec.configuration.source` as the MCO's controller sets it: `MergeMachineConfigs`
/// reorders the (name-sorted) slice it is given in place (`append(configs[:0], …)`), and
/// `syncGeneratedMachineConfig` calls `getMachineConfigRefs` on that slice afterwards — so the
/// source is in merge order: worker MachineConfigs by name, then the others by name.
/// (`RunBootstrap` instead lists every MachineConfig it was given, of all pools, in input
/// order.)
#[test]
fn pool_source_is_in_merge_order() {
    // TestMergeMachineConfigs' custom-pool MachineConfigs, in the controller's flow.
    let case = merge_machine_configs_cases().remove(2);
    let r = run(case.pool, &case.mcs, &case.defaults).expect("renders");
    assert_eq!(
        source_names(&r),
        ["aaa", "bbb", "ddd", "ccc"],
        "{}",
        case.what
    );
}
