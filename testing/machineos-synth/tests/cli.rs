//! The `machineos-synth` binary: flags, tagging, stdout/stderr contract, and that the
//! layouts it writes pass umoci, an independent OCI implementation.

use std::path::Path;
use std::process::{Command, Output};

use machineos_image::{Layout, media_type};

fn synth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_machineos-synth"))
        .args(args)
        .output()
        .expect("running machineos-synth")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "machineos-synth failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .trim()
        .to_owned()
}

/// Run umoci; a missing umoci is a clear failure, not a skip.
fn umoci(args: &[&str]) -> Output {
    match Command::new("umoci").args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "umoci is not installed (needed to check the OCI layout independently): install it, e.g. `apt-get install umoci` (scripts/test.sh does)"
        ),
        Err(e) => panic!("running umoci: {e}"),
    }
}

#[test]
fn writes_tags_and_prints_the_digest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("layout");
    let o = out.to_str().unwrap();
    let first = synth(&["--out", o, "--tag", "base"]);
    let digest = ok(&first);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(stderr.contains("5 layers, 400 files"), "{stderr}");
    let layout = Layout::open(&out).unwrap();
    let tagged = layout.resolve(Some("base")).unwrap();
    assert_eq!(tagged.digest.to_string(), digest);
    assert_eq!(tagged.media_type, media_type::OCI_MANIFEST);
    // Deterministic across processes; other tags are kept.
    assert_eq!(ok(&synth(&["--out", o, "--tag", "again"])), digest);
    let kept = layout.resolve(Some("base")).unwrap();
    assert_eq!(kept.digest.to_string(), digest);
    assert_eq!(layout.resolve(Some("again")).unwrap().digest, kept.digest);
}

#[test]
fn multi_platform_docker_and_extra_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("layout");
    let tool = dir.path().join("tool");
    std::fs::write(&tool, b"#!/bin/sh\necho hi\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o750)).unwrap();
    }
    let extra = format!("{}:/usr/bin/bench-tool", tool.display());
    let digest = ok(&synth(&[
        "--out",
        out.to_str().unwrap(),
        "--platform",
        "linux/amd64",
        "--platform",
        "linux/arm64",
        "--docker",
        "--extra-file",
        &extra,
    ]));
    let layout = Layout::open(&out).unwrap();
    let index = layout.resolve(Some("latest")).unwrap();
    assert_eq!(index.digest.to_string(), digest);
    assert_eq!(index.media_type, media_type::DOCKER_MANIFEST_LIST);
    let body: serde_json::Value =
        serde_json::from_slice(&layout.read_blob(&index.digest).unwrap()).unwrap();
    assert_eq!(body["manifests"][1]["platform"]["architecture"], "arm64");
}

#[test]
fn bad_arguments_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().to_str().unwrap();
    for (args, want) in [
        (vec!["--out", o, "--profile", "huge"], "unknown profile"),
        (vec!["--out", o, "--platform", "amd64"], "os/architecture"),
        (vec!["--out", o, "--extra-file", "nocolon"], "SRC:DEST"),
        (
            vec!["--out", o, "--extra-file", "/nonexistent/x:/usr/bin/x"],
            "reading /nonexistent/x",
        ),
    ] {
        let out = synth(&args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[test]
fn umoci_reads_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("layout");
    let o = out.to_str().unwrap();
    ok(&synth(&["--out", o, "--tag", "example"]));
    let stat = umoci(&["stat", "--image", &format!("{o}:example")]);
    assert!(
        stat.status.success(),
        "umoci stat: {}",
        String::from_utf8_lossy(&stat.stderr)
    );
    let listing = String::from_utf8_lossy(&stat.stdout);
    assert!(listing.contains("machineos-synth layer 5/5"), "{listing}");

    // Unpack (rootless: ownership is recorded, not applied) and check the whiteouts.
    let bundle = dir.path().join("bundle");
    let unpack = umoci(&[
        "unpack",
        "--rootless",
        "--image",
        &format!("{o}:example"),
        bundle.to_str().unwrap(),
    ]);
    assert!(
        unpack.status.success(),
        "umoci unpack: {}",
        String::from_utf8_lossy(&unpack.stderr)
    );
    let root = bundle.join("rootfs");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let missing = |p: &str| root.join(p).symlink_metadata().map_err(|e| e.kind()).err();
    assert!(read("usr/lib/os-release").contains("VARIANT_ID=coreos"));
    assert_eq!(read("usr/lib/machineos-synth-arch"), "amd64\n");
    for gone in [
        "usr/share/doc/fedora-release/README.obsolete",
        "usr/share/fedora-release/legacy",
        "usr/share/fedora-release/channels/testing",
    ] {
        assert_eq!(missing(gone), Some(std::io::ErrorKind::NotFound), "{gone}");
    }
    assert_eq!(
        read("usr/share/fedora-release/channels/next"),
        "stream=next\nrevision=2\n"
    );
    assert_eq!(
        std::fs::read_link(root.join("usr/local")).unwrap(),
        Path::new("../var/usrlocal")
    );
}
