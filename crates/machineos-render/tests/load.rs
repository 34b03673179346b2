//! Loading manifests from bytes: YAML (multi-document), JSON, `kind: List`, pools beside
//! MachineConfigs — and errors that name the file, the document and the JSON path. Ends with
//! the documented-style fixtures of machineos-api loaded and rendered end to end.

use std::path::PathBuf;

use machineos_render::{
    LoadError, RenderDefaults, load_machine_configs, load_manifests, render, select_for_pool,
};

const MC: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n";

#[test]
fn accepted_forms() {
    let cases: Vec<(&str, String, &[&str], &[&str])> = vec![
        (
            "one YAML document",
            format!("{MC}metadata:\n  name: a\nspec: {{}}\n"),
            &["a"],
            &[],
        ),
        (
            "several documents, empty ones skipped",
            format!("---\n{MC}metadata: {{name: a}}\nspec: {{}}\n---\n---\n{MC}metadata: {{name: b}}\nspec: {{fips: true}}\n---\n"),
            &["a", "b"],
            &[],
        ),
        (
            "a List, nested",
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: machineconfiguration.openshift.io/v1, kind: MachineConfig, metadata: {name: a}, spec: {}}\n\
                 - apiVersion: v1\n  kind: List\n  items:\n  - {apiVersion: machineconfiguration.openshift.io/v1, kind: MachineConfigPool, metadata: {name: infra}, spec: {}}\n"
                .to_owned(),
            &["a"],
            &["infra"],
        ),
        (
            "a MachineConfigList",
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigList\nitems: []\n".to_owned(),
            &[],
            &[],
        ),
        (
            "JSON object",
            r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"j"},"spec":{"kernelArguments":null}}"#.to_owned(),
            &["j"],
            &[],
        ),
        (
            "JSON array",
            r#" [{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigPool","metadata":{"name":"p"},"spec":{}},
                 {"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"q"},"spec":{}}]"#.to_owned(),
            &["q"],
            &["p"],
        ),
    ];
    for (what, text, mcs, pools) in cases {
        let m =
            load_manifests("in.yaml", text.as_bytes()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let got: Vec<&str> = m.machine_configs.iter().map(|m| m.name()).collect();
        assert_eq!(got, mcs, "{what}");
        let got: Vec<&str> = m
            .pools
            .iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(got, pools, "{what}");
    }
}

#[test]
fn errors_name_file_document_and_path() {
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{MC}metadata: {{name: a}}\nspec: {{}}\n---\n{MC}metadata: {{name: b}}\nspec:\n  kernelArguments: [a, {{x: y}}]\n"),
            "m.yaml: document 2: MachineConfig \"b\": error at $.spec.kernelArguments.1: invalid type: map, expected a string",
        ),
        (
            format!("{MC}metadata: {{name: c}}\nspec: {{config: [not, an, object]}}\n"),
            "m.yaml: document 1: MachineConfig \"c\": error at $.spec.config: invalid type: sequence, expected a map",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm}\n".to_owned(),
            "m.yaml: document 1: error at $.items.0: unsupported object apiVersion=\"v1\" kind=\"ConfigMap\" (expected machineconfiguration.openshift.io/v1 MachineConfig or MachineConfigPool, or a List of them)",
        ),
        (
            "kind: MachineConfig\nmetadata: {name: x}\nspec: {}\n".to_owned(),
            "m.yaml: document 1: error at $: unsupported object apiVersion=\"\" kind=\"MachineConfig\" (expected machineconfiguration.openshift.io/v1 MachineConfig or MachineConfigPool, or a List of them)",
        ),
        ("---\n- a\n- b\n".to_owned(), "m.yaml: document 1: error at $: not an object"),
        (
            "apiVersion: v1\nkind: List\nitems: {a: b}\n".to_owned(),
            "m.yaml: document 1: List \"\": error at $.items: not a list",
        ),
        (
            format!("{MC}metadata: {{name: p}}\nspec:\n  machineConfigSelector: {{matchLabels: {{a: [b]}}}}\n").replace("kind: MachineConfig\n", "kind: MachineConfigPool\n"),
            "m.yaml: document 1: MachineConfigPool \"p\": error at $.spec.machineConfigSelector.matchLabels.a: invalid type: sequence, expected a string",
        ),
    ];
    for (text, want) in cases {
        let err = load_manifests("m.yaml", text.as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), want, "{text}");
    }
}

#[test]
fn syntax_errors_name_the_file() {
    for (text, starts) in [
        ("a: [unclosed\n", "bad.yaml: invalid YAML: "),
        ("{\"a\": }", "bad.yaml: invalid JSON: "),
    ] {
        let err = load_manifests("bad.yaml", text.as_bytes()).unwrap_err();
        assert!(matches!(err, LoadError::Syntax { .. }), "{err}");
        assert!(err.to_string().starts_with(starts), "{err}");
    }
    let err = load_manifests("bin", &[0xff, 0xfe, 0x00]).unwrap_err();
    assert_eq!(err.to_string(), "bin: not UTF-8 text");
}

#[test]
fn machine_configs_only() {
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: worker}\nspec: {}\n";
    let err = load_machine_configs("pool.yaml", text.as_bytes()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pool.yaml: MachineConfigPool \"worker\": expected only MachineConfigs"
    );
}

fn fixture(name: &str) -> (String, Vec<u8>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../machineos-api/tests/fixtures")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path.display().to_string(), bytes)
}

#[test]
fn documented_fixtures_render() {
    let files = [
        "chrony.yaml",
        "ssh-authorized-keys.yaml",
        "kernel-arguments.yaml",
        "systemd-unit.yaml",
        "registries-conf.yaml",
        "multi-document.yaml",
    ];
    let mut all = Vec::new();
    for f in files {
        let (source, bytes) = fixture(f);
        all.extend(load_machine_configs(&source, &bytes).unwrap());
    }
    let defaults = RenderDefaults {
        os_image_url: "quay.io/openshift-release-dev/rhcos@sha256:1111111111111111111111111111111111111111111111111111111111111111".into(),
        ..RenderDefaults::default()
    };

    let workers = select_for_pool(None, "worker", &all).unwrap();
    assert_eq!(workers.len(), 8);
    let r = render("worker", &workers, &defaults).unwrap();
    let spec = &r.machine_config.spec;
    assert_eq!(spec.kernel_type, "realtime");
    assert!(spec.fips);
    assert_eq!(spec.extensions, ["usbguard", "sysstat"]);
    assert_eq!(
        spec.kernel_arguments,
        [
            "enforcing=0",
            "systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=\"all\""
        ]
    );
    assert!(spec.os_image_url.starts_with("quay.io/example/custom-os@"));
    let config = spec.config.as_ref().unwrap();
    let paths: Vec<&str> = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["/etc/chrony.conf", "/etc/containers/registries.conf"],
        "merge order by name: 99-worker-chrony, then 99-worker-registries"
    );
    assert_eq!(config["systemd"]["units"][0]["name"], "boot-report.service");
    assert_eq!(
        config["passwd"]["users"][0]["sshAuthorizedKeys"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let masters = select_for_pool(None, "master", &all).unwrap();
    let r = render("master", &masters, &defaults).unwrap();
    assert_eq!(r.machine_config.spec.os_image_url, defaults.os_image_url);
    assert_eq!(r.machine_config.spec.kernel_type, "default");
    assert!(
        r.machine_config
            .metadata
            .name
            .unwrap()
            .starts_with("rendered-master-")
    );
}
