//! `machineos build --stream`: the base for the build's platform taken from a stream file
//! (CoreOS stream metadata whose amd64 entry names a synthetic `oci:` layout, and an
//! osimageurl ConfigMap in YAML), and the errors for an architecture the stream lacks, an
//! unknown stream name and `--base` given too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn machineos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_machineos"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("binary runs")
}

/// The example synthetic base as an OCI layout tagged `base`; its `oci:` reference.
fn example_base_image(dir: &Path) -> String {
    let path = dir.join("base-image");
    let layout = machineos_image::Layout::create(&path).unwrap();
    let desc =
        machineos_synth::write_image(&layout, &machineos_synth::SynthSpec::example()).unwrap();
    layout.set_tag("base", &desc).unwrap();
    format!("oci:{}:base", path.display())
}

/// Stream metadata: x86_64 names `base`, aarch64 a registry image; no s390x.
fn stream_file(dir: &Path, base: &str) -> PathBuf {
    let stream = serde_json::json!({
        "stream": "testing",
        "metadata": {"last-modified": "2025-01-01T00:00:00Z"},
        "architectures": {
            "x86_64": {
                "artifacts": {},
                "oci-image": {"release": "42.1", "image": base},
            },
            "aarch64": {
                "artifacts": {},
                "oci-image": {"release": "42.1", "image": "quay.io/fedora/fedora-coreos:testing"},
            },
        },
    });
    let path = dir.join("testing.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&stream).unwrap()).unwrap();
    path
}

fn build(stream: &Path, extra: &[&str], out: &Path, cache: &Path, platform: &str) -> Output {
    let (out, cache) = (
        format!("oci:{}:worker", out.display()),
        cache.display().to_string(),
    );
    let mut args = vec![
        "build",
        "--stream",
        stream.to_str().unwrap(),
        "--output",
        &out,
        "--cache-dir",
        &cache,
        "--platform",
        platform,
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    args.push("examples/machineconfigs");
    machineos(&args)
}

fn summary(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout.clone()).unwrap();
    let (json, _last) = stdout.trim_end().rsplit_once('\n').unwrap();
    serde_json::from_str(json).unwrap()
}

#[test]
fn the_amd64_base_comes_from_the_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let base = example_base_image(tmp.path());
    let stream = stream_file(tmp.path(), &base);
    let (out, cache) = (tmp.path().join("out"), tmp.path().join("cache"));

    let o = build(&stream, &[], &out, &cache, "linux/amd64");
    let s = summary(&o);
    let base_dir = tmp.path().join("base-image").display().to_string();
    assert!(
        s["base"]
            .as_str()
            .unwrap()
            .starts_with(&format!("oci:{base_dir}")),
        "{s}"
    );
    assert_eq!(s["platform"], "linux/amd64");
    assert_eq!(s["stream"]["name"], "testing");
    assert_eq!(s["stream"]["platform"], "linux/amd64");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("CoreOS stream metadata stream \"testing\" for linux/amd64: base oci:"),
        "{err}"
    );

    // The same build from --base gives the same image.
    let o = machineos(&[
        "build",
        "--base",
        &base,
        "--output",
        &format!("oci:{}:direct", out.display()),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--platform",
        "linux/amd64",
        "-o",
        "json",
        "examples/machineconfigs",
    ]);
    assert_eq!(summary(&o)["digest"], s["digest"]);

    // The osimageurl ConfigMap, as kubectl prints it: one image for any architecture.
    let cm = tmp.path().join("osimageurl.yaml");
    std::fs::write(
        &cm,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: machine-config-osimageurl\n  namespace: openshift-machine-config-operator\ndata:\n  baseOSContainerImage: \"{base}\"\n  baseOSExtensionsContainerImage: \"\"\n  osImageURL: \"\"\n  releaseVersion: 4.18.0\n"
        ),
    )
    .unwrap();
    let o = build(&cm, &[], &out, &cache, "linux/amd64");
    assert_eq!(summary(&o)["digest"], s["digest"]);
}

#[test]
fn a_missing_architecture_or_stream_is_named_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let stream = stream_file(tmp.path(), "oci:/nonexistent:base");
    let (out, cache) = (tmp.path().join("out"), tmp.path().join("cache"));
    let shown = stream.display().to_string();

    let o = build(&stream, &[], &out, &cache, "linux/s390x");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "{shown}: stream \"testing\" has no architecture s390x; it offers amd64 (x86_64), arm64 (aarch64)"
        )),
        "{err}"
    );

    let o = build(
        &stream,
        &["--stream-name", "stable"],
        &out,
        &cache,
        "linux/amd64",
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "{shown}: no stream \"stable\"; available: testing"
        )),
        "{err}"
    );
    assert!(!out.exists(), "nothing was written");

    let o = machineos(&[
        "build",
        "--stream",
        &shown,
        "--base",
        "quay.io/a/b:c",
        "examples/machineconfigs",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--stream") && err.contains("--base"), "{err}");

    let bad = tmp.path().join("bad.json");
    std::fs::write(
        &bad,
        b"{\"stream\": \"s\", \"architectures\": {\"x86_64\": {\"oci-image\": 1}}}",
    )
    .unwrap();
    let o = build(&bad, &[], &out, &cache, "linux/amd64");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("CoreOS stream metadata: at $.architectures.x86_64.oci-image: invalid type"),
        "{err}"
    );
}
