//! End-to-end checks of the `machineos` binary on the repository's examples: the README's
//! main job works, is deterministic, and bad input fails with the file and JSON path.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example_base(dir: &Path) -> PathBuf {
    let base = dir.join("base");
    let st = Command::new("bash")
        .arg(repo().join("scripts/example-base.sh"))
        .arg(&base)
        .status()
        .expect("bash runs");
    assert!(st.success());
    base
}

fn machineos(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_machineos"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("binary runs")
}

#[test]
fn build_is_deterministic_and_summarised() {
    let tmp = tempfile::tempdir().unwrap();
    let base = example_base(tmp.path());
    let mut layers = Vec::new();
    for i in 0..2 {
        let out = tmp.path().join(format!("layer{i}.tar"));
        let o = machineos(&[
            "build",
            "--base-dir",
            base.to_str().unwrap(),
            "--layer-out",
            out.to_str().unwrap(),
            "-o",
            "json",
            "examples/machineconfigs",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            summary["layerDigest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        assert!(
            summary["input"]
                .as_str()
                .unwrap()
                .starts_with("MachineConfig rendered-worker-")
        );
        layers.push(std::fs::read(out).unwrap());
    }
    assert_eq!(layers[0], layers[1]);
    let mut archive = tar::Archive::new(layers[0].as_slice());
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(
        names.contains(&"etc/machine-config-daemon/currentconfig".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"etc/chrony.conf".to_string()), "{names:?}");
}

#[test]
fn bad_input_names_file_and_path_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = example_base(tmp.path());
    let cfg = tmp.path().join("bad.ign");
    std::fs::write(
        &cfg,
        r#"{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"etc/x"}]}}"#,
    )
    .unwrap();
    let out = tmp.path().join("layer.tar");
    let o = machineos(&[
        "build",
        "--base-dir",
        base.to_str().unwrap(),
        "--layer-out",
        out.to_str().unwrap(),
        cfg.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.ign: error at $.storage.files.0.path: path not absolute"),
        "{err}"
    );
    assert!(!out.exists());
}
