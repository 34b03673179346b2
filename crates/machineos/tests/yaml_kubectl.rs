//! YAML read as kubectl reads it, judged by kubectl itself: a corpus of YAML 1.1 edge cases
//! (octal modes, `yes`/`on`/`y`, underscores, big numbers, timestamps, merge keys, anchors,
//! tags, non-string keys) in MachineConfigs, each sent through
//! `kubectl create --dry-run=client -o json` against the test API server (for discovery
//! only) and through `machineos_goyaml::from_str_documents`; the objects must be equal. Then
//! `machineos render` on a MachineConfig with `mode: 0644` gives the file mode 420, as the
//! cluster does.

mod common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// Values placed under `spec.config.x` (the schema keeps unknown fields there), one
/// MachineConfig each.
const CASES: &[&str] = &[
    "mode: 0644",
    "mode: 0o644",
    "mode: 0x1A4",
    "mode: 0b110100100",
    "mode: -0644",
    "mode: +420",
    // `n` and `y` as keys are booleans too.
    "n: 1_000",
    "v: 08",
    "v: 012345678",
    "v: 99999999999999999999",
    "v: 9223372036854775807",
    "v: 9223372036854775808",
    "v: -9223372036854775808",
    "v: 1e3",
    "v: 1.5e3",
    "v: 0.5",
    "v: .5",
    "v: -.5",
    "v: 1e21",
    "v: 1.0",
    "v: 1:20",
    "y: 0x",
    "b: [yes, no, on, off, y, n, Y, N, YES, Off, True, FALSE, yEs]",
    "z: [~, null, Null, NULL, '', \"\"]",
    "z:",
    "t: [2024-01-02, 2024-01-02T03:04:05Z, 2001-12-14 21:59:43.10 -5]",
    "s: ['0644', \"yes\", !!str 0644, !!str yes, !!int '0644', !!float '1', !!bool 'on']",
    "s: [a b, 'it''s', \"tab\\there\", 中文, -dash, .dot, +plus, 1.2.3, 0.5.1]",
    "k: {yes: 1, 1: 2, 0x10: 3, 1.5: 4, true: 5, on: 6, '07': 7, 07: 8}",
    "lit: |\n  line one\n  line two\nfold: >\n  folded\n  text\n",
    "base: &b {a: 1, b: 2}\nmerged: {<<: *b, b: 3, c: 4}",
    "ms: {<<: [{a: 1, b: 1}, {b: 2, c: 2}], c: 3}",
    "alias: &x [1, 2]\ncopy: *x",
    "bin: !!binary aGVsbG8=",
    "dup: {a: 1, a: 2}",
];

fn document(case: &str, name: &str) -> String {
    let indented: String = case.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  \
         name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  \
         config:\n    ignition:\n      version: 3.4.0\n    x:\n{indented}"
    )
}

#[test]
fn yaml_is_read_as_kubectl_reads_it() {
    if !common::kubectl_or_skip("YAML as kubectl reads it") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let common::ApiServer {
        rt: _rt,
        server: _server,
        kubectl: k,
        ..
    } = common::start(tmp.path(), Duration::from_secs(60));
    let crds = tmp.path().join("crds.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .arg("crds")
        .output()
        .unwrap();
    std::fs::write(&crds, &out.stdout).unwrap();
    k.ok(&["apply", "-f", crds.to_str().unwrap()]).unwrap();

    // One file, one document per case.
    let text: Vec<String> = CASES
        .iter()
        .enumerate()
        .map(|(i, c)| document(c, &format!("case-{i}")))
        .collect();
    let file = tmp.path().join("cases.yaml");
    std::fs::write(&file, text.join("---\n")).unwrap();
    let printed = k
        .ok(&[
            "create",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "json",
            "-f",
            file.to_str().unwrap(),
        ])
        .unwrap();
    // One JSON object per document, one after another.
    let theirs: Vec<Value> = serde_json::Deserializer::from_str(&printed)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(theirs.len(), CASES.len());
    // kubectl sends an integer past i64 exactly, but prints it through a float64: such
    // numbers are compared as floats.
    fn wide_as_float(v: &Value) -> Value {
        match v {
            Value::Number(n) if n.as_i64().is_none() => {
                serde_json::Number::from_f64(n.as_f64().unwrap_or_default())
                    .map_or(Value::Null, Value::Number)
            }
            Value::Array(a) => Value::Array(a.iter().map(wide_as_float).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), wide_as_float(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let mut differ = Vec::new();
    for (i, (case, theirs)) in CASES.iter().zip(&theirs).enumerate() {
        let ours = machineos_goyaml::from_str_documents(&text[i]).unwrap();
        let ours = &wide_as_float(&ours[0]["spec"]["config"]["x"]);
        let theirs = &wide_as_float(&theirs["spec"]["config"]["x"]);
        if ours != theirs {
            differ.push(format!(
                "{case:?}:\n  kubectl:  {theirs}\n  machineos: {ours}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn render_reads_an_octal_mode_as_the_cluster_stores_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mc = tmp.path().join("mc.yaml");
    let yaml = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n\
                metadata:\n  name: 50-motd\n  labels:\n    machineconfiguration.openshift.io/role: worker\n\
                spec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n\
                \x20     - path: /etc/motd\n        mode: 0644\n        overwrite: yes\n        \
                contents:\n          source: data:,hi\n";
    std::fs::write(&mc, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_machineos"))
        .args(["render", "--pool", "worker"])
        .arg(&mc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = &rendered["spec"]["config"]["storage"]["files"][0];
    assert_eq!(file["mode"], 420, "{rendered}");
    assert_eq!(file["overwrite"], true, "{rendered}");
}
