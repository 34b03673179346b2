//! `machineos build --platform all` and `--platform LIST` on a four-architecture synthetic
//! base in an OCI layout: one index, one image per platform, `inspect` reads each back; a
//! platform the base lacks and a multi-platform build with RUN steps are refused before
//! anything is written.

use std::path::{Path, PathBuf};

mod common;
use common::machineos;

const ARCHES: [&str; 4] = ["amd64", "arm64", "ppc64le", "s390x"];

/// The example synthetic base for four architectures, as an OCI layout tagged `base`.
fn four_arch_base(dir: &Path) -> PathBuf {
    let path = dir.join("base-image");
    let layout = machineos_image::Layout::create(&path).unwrap();
    let specs: Vec<_> = ARCHES
        .iter()
        .map(|a| {
            machineos_synth::SynthSpec::example()
                .with_platform(machineos_image::Platform::new("linux", a, None))
        })
        .collect();
    let desc = machineos_synth::write_multi_arch(&layout, &specs).unwrap();
    layout.set_tag("base", &desc).unwrap();
    path
}

#[test]
fn platform_all_builds_an_index_of_every_platform_and_inspect_reads_each() {
    let tmp = tempfile::tempdir().unwrap();
    let base = format!("oci:{}:base", four_arch_base(tmp.path()).display());
    let out = tmp.path().join("out");
    let output = format!("oci:{}:worker", out.display());
    let cache = tmp.path().join("cache");
    let o = machineos(&[
        "build",
        "--base",
        &base,
        "--output",
        &output,
        "--cache-dir",
        cache.to_str().unwrap(),
        "--platform",
        "all",
        "-o",
        "json",
        "examples/machineconfigs",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let (json, last) = stdout.trim_end().rsplit_once('\n').unwrap();
    let summary: serde_json::Value = serde_json::from_str(json).unwrap();
    let digest = summary["digest"].as_str().unwrap();
    assert_eq!(last, format!("oci:{}@{digest}", out.display()));
    assert_eq!(
        summary["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let platforms: Vec<&str> = summary["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["platform"].as_str().unwrap())
        .collect();
    assert_eq!(
        platforms,
        ["linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"]
    );

    for (arch, entry) in ARCHES.iter().zip(summary["platforms"].as_array().unwrap()) {
        let o = machineos(&["inspect", "--platform", &format!("linux/{arch}"), &output]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let inspection: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(inspection["digest"], entry["digest"]);
        assert_eq!(inspection["platform"], format!("linux/{arch}"));
        assert_eq!(inspection["labels"]["baseOSContainerImage"], entry["base"]);
        assert_eq!(inspection["indexPlatforms"].as_array().unwrap().len(), 4);
    }

    // A list builds those platforms, in that order; the same inputs give the same images.
    let o = machineos(&[
        "build",
        "--base",
        &base,
        "--output",
        &format!("oci:{}:two", out.display()),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--platform",
        "linux/s390x,linux/amd64",
        "-o",
        "json",
        "examples/machineconfigs",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let (json, _) = stdout.trim_end().rsplit_once('\n').unwrap();
    let two: serde_json::Value = serde_json::from_str(json).unwrap();
    let two = two["platforms"].as_array().unwrap();
    assert_eq!(two[0]["platform"], "linux/s390x");
    assert_eq!(two[0]["digest"], summary["platforms"][3]["digest"]);
    assert_eq!(two[1]["digest"], summary["platforms"][0]["digest"]);
    assert!(two.iter().all(|p| p["baseIndexCache"] == "hit"));
}

#[test]
fn a_missing_platform_and_run_steps_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("base-image");
    let layout = machineos_image::Layout::create(&path).unwrap();
    let specs: Vec<_> = ["amd64", "arm64"]
        .iter()
        .map(|a| {
            machineos_synth::SynthSpec::example()
                .with_platform(machineos_image::Platform::new("linux", a, None))
        })
        .collect();
    let desc = machineos_synth::write_multi_arch(&layout, &specs).unwrap();
    layout.set_tag("base", &desc).unwrap();
    let base = format!("oci:{}:base", path.display());
    let out = tmp.path().join("out");
    let o = machineos(&[
        "build",
        "--base",
        &base,
        "--output",
        &format!("oci:{}:worker", out.display()),
        "--no-cache",
        "--platform",
        "linux/amd64,linux/s390x",
        "examples/machineconfigs",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no base for linux/s390x") && err.contains("offers linux/amd64, linux/arm64"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");

    let cf = tmp.path().join("Containerfile");
    std::fs::write(&cf, "FROM configs AS final\nRUN true\n").unwrap();
    let o = machineos(&[
        "build",
        "--base",
        &base,
        "--output",
        "127.0.0.1:5999/x/y:z",
        "--no-cache",
        "--platform",
        "all",
        "--containerfile",
        cf.to_str().unwrap(),
        "examples/machineconfigs",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("multi-platform build cannot apply them"),
        "{err}"
    );
}

#[test]
fn platform_all_from_a_stream_builds_each_architecture_from_its_own_base() {
    let tmp = tempfile::tempdir().unwrap();
    // Two single-platform bases, one per architecture, as stream metadata names them.
    let mut refs = Vec::new();
    for arch in ["amd64", "arm64"] {
        let path = tmp.path().join(format!("base-{arch}"));
        let layout = machineos_image::Layout::create(&path).unwrap();
        let spec = machineos_synth::SynthSpec::example()
            .with_platform(machineos_image::Platform::new("linux", arch, None));
        let desc = machineos_synth::write_image(&layout, &spec).unwrap();
        layout.set_tag("base", &desc).unwrap();
        refs.push(format!("oci:{}:base", path.display()));
    }
    let stream = serde_json::json!({
        "stream": "stable",
        "metadata": {"last-modified": "2026-11-30T00:00:00Z"},
        "architectures": {
            "x86_64": {"artifacts": {}, "oci-image": {"release": "43.1", "image": refs[0]}},
            "aarch64": {"artifacts": {}, "oci-image": {"release": "43.1", "image": refs[1]}},
        },
    });
    let file = tmp.path().join("stable.json");
    std::fs::write(&file, serde_json::to_vec(&stream).unwrap()).unwrap();
    let out = tmp.path().join("out");
    let o = machineos(&[
        "build",
        "--stream",
        file.to_str().unwrap(),
        "--output",
        &format!("oci:{}:worker", out.display()),
        "--no-cache",
        "--platform",
        "all",
        "-o",
        "json",
        "examples/machineconfigs",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let (json, _) = stdout.trim_end().rsplit_once('\n').unwrap();
    let summary: serde_json::Value = serde_json::from_str(json).unwrap();
    let platforms = summary["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 2);
    for (p, (arch, base)) in platforms.iter().zip(
        ["linux/amd64", "linux/arm64"]
            .iter()
            .zip([&refs[0], &refs[1]]),
    ) {
        // The stream's architectures, in order.
        assert_eq!(p["platform"], *arch);
        let dir = base.trim_start_matches("oci:").trim_end_matches(":base");
        assert!(
            p["base"]
                .as_str()
                .unwrap()
                .starts_with(&format!("oci:{dir}@")),
            "{p}"
        );
    }
}
