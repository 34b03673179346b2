//! The machineos image, built as `scripts/image.sh` builds it and run: the Debian root
//! filesystem (made once by `scripts/test.sh` with mmdebstrap — the network step — and
//! passed in `MACHINEOS_IMAGE_ROOTFS`), this build's `machineos` binary, committed with
//! buildah into a private vfs store; then, in a container of the image (`buildah run`,
//! chroot isolation): `machineos --version`, `machineos agent --help` and `machineos
//! controller --help`, and the tools the agent and the build pods run — `nsenter` and
//! `buildah` — and the build pods' user (uid 1000, subordinate ids, newuidmap). The image's entrypoint and labels are what `deploy/` expects to run.
//!
//! Needs root and buildah; under `CI` their absence or a missing root filesystem fails the
//! test instead of skipping it.

use std::path::{Path, PathBuf};
use std::process::Command;

const TAG: &str = "localhost/machineos:test";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skip_or_fail(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "under CI the image test cannot be skipped: {why}"
    );
    eprintln!("SKIPPED: {why}");
}

fn buildah_args(store: &Path) -> Vec<String> {
    vec![
        "--root".into(),
        store.join("root").display().to_string(),
        "--runroot".into(),
        store.join("runroot").display().to_string(),
        "--storage-driver".into(),
        "vfs".into(),
    ]
}

fn buildah(store: &Path, args: &[&str]) -> String {
    let out = Command::new("buildah")
        .args(buildah_args(store))
        .args(args)
        .output()
        .expect("buildah runs");
    assert!(
        out.status.success(),
        "buildah {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_image_builds_from_debian_packages_and_runs_the_controller_agent_and_tools() {
    if !is_root() || Command::new("buildah").arg("--version").output().is_err() {
        return skip_or_fail("needs root and buildah");
    }
    let Some(rootfs) = std::env::var_os("MACHINEOS_IMAGE_ROOTFS").map(PathBuf::from) else {
        return skip_or_fail(
            "MACHINEOS_IMAGE_ROOTFS is not set (scripts/test.sh makes the root filesystem)",
        );
    };
    assert!(rootfs.is_file(), "{} is missing", rootfs.display());

    let store = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/image.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_machineos")])
        .arg("--rootfs")
        .arg(&rootfs)
        .args(["--tag", TAG])
        .env(
            "BUILDAH",
            format!("buildah {}", buildah_args(store.path()).join(" ")),
        )
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/image.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), TAG);

    // What deploy/ runs: the entrypoint is machineos, its arguments are the Deployment's.
    let inspect: serde_json::Value =
        serde_json::from_str(&buildah(store.path(), &["inspect", "--type", "image", TAG])).unwrap();
    let config = &inspect["OCIv1"]["config"];
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/machineos"])
    );
    assert_eq!(
        config["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        inspect["OCIv1"]["created"].as_str().unwrap_or_default(),
        "2023-11-14T22:13:20Z",
        "committed at SOURCE_DATE_EPOCH"
    );

    let ctr = buildah(store.path(), &["from", "--quiet", TAG]);
    let ctr = ctr.trim();
    let run = |args: &[&str]| -> String {
        let mut all = vec!["run", "--isolation", "chroot", ctr, "--"];
        all.extend_from_slice(args);
        buildah(store.path(), &all)
    };
    let version = run(&["machineos", "--version"]);
    assert!(
        version.contains(env!("CARGO_PKG_VERSION")),
        "machineos --version: {version}"
    );
    let agent = run(&["machineos", "agent", "--help"]);
    assert!(agent.contains("--host-root"), "{agent}");
    let controller = run(&["machineos", "controller", "--help"]);
    assert!(controller.contains("--no-render"), "{controller}");
    // The agent enters the host with nsenter; the build pods run buildah.
    let nsenter = run(&["nsenter", "--version"]);
    assert!(nsenter.contains("util-linux"), "{nsenter}");
    let inner = run(&["buildah", "--version"]);
    assert!(inner.starts_with("buildah version"), "{inner}");
    // The build Job's pod: uid 1000 `build`, with subordinate ids for rootless buildah and
    // the setuid/file-capability helpers that map them.
    let id = run(&["id", "build"]);
    assert!(id.starts_with("uid=1000(build) gid=1000(build)"), "{id}");
    for file in ["/etc/subuid", "/etc/subgid"] {
        let ranges = run(&["cat", file]);
        assert!(ranges.contains("build:100000:65536"), "{file}: {ranges}");
    }
    run(&["test", "-x", "/usr/bin/newuidmap"]);
    run(&["test", "-x", "/usr/bin/newgidmap"]);
    buildah(store.path(), &["rm", ctr]);
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
