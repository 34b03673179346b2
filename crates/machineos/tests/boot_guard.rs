//! `machineos build --boot-guard`: the image carries the boot guard — the script executable,
//! the unit, the `multi-user.target.wants` link — and the unit passes `systemd-analyze
//! verify` against the built image's root, unpacked by umoci as a runtime would. The
//! synthetic base has no systemd of its own, so the targets a real base ships (the ones the
//! unit's default dependencies name) are copied in from this machine's systemd first. Without
//! the flag nothing of the guard is in the image; with a plain Ignition config the flag is
//! refused.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use machineos_boot_guard::{SCRIPT, SCRIPT_PATH, UNIT, UNIT_NAME, UNIT_PATH, WANTS_PATH};

mod common;
use common::{example_base_image, machineos};

fn in_root(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Build the example MachineConfigs rendered for `worker` over the synthetic base, with
/// `extra` flags, into `out:tag`; unpack it; the root.
fn build_and_unpack(tmp: &Path, tag: &str, extra: &[&str]) -> PathBuf {
    let layout = example_base_image(tmp);
    let out = tmp.join("out");
    let mut args = vec![
        "build".to_owned(),
        "--base".into(),
        format!("oci:{}:base", layout.display()),
        "--output".into(),
        format!("oci:{}:{tag}", out.display()),
        "--no-cache".into(),
        "--platform".into(),
        "linux/amd64".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push("examples/machineconfigs".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = machineos(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dest = tmp.join(format!("unpacked-{tag}"));
    machineos_testkit::tools::umoci_unpack(&out, tag, &dest).unwrap();
    dest.join("rootfs")
}

#[test]
fn the_boot_guard_is_in_the_image_and_its_unit_verifies_against_the_images_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = build_and_unpack(tmp.path(), "guarded", &["--boot-guard"]);
    let script = in_root(&root, SCRIPT_PATH);
    assert_eq!(std::fs::read_to_string(&script).unwrap(), SCRIPT);
    assert_eq!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    assert_eq!(
        std::fs::read_to_string(in_root(&root, UNIT_PATH)).unwrap(),
        UNIT
    );
    let link = in_root(&root, WANTS_PATH);
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("../machineos-boot-guard.service")
    );
    assert_eq!(
        std::fs::read_to_string(&link).unwrap(),
        UNIT,
        "the link resolves in the image"
    );
    // The MachineConfigs still apply on top (the guard is written before Ignition runs).
    assert!(in_root(&root, "/etc/machine-config-daemon/currentconfig").is_file());

    // What a real base has of systemd and the synthetic one lacks: the targets.
    let units = in_root(&root, "/usr/lib/systemd/system");
    for t in [
        "sysinit.target",
        "basic.target",
        "shutdown.target",
        "multi-user.target",
    ] {
        std::fs::copy(Path::new("/usr/lib/systemd/system").join(t), units.join(t)).unwrap();
    }
    let verify = |root: &Path| {
        Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", root.display()))
            .arg(UNIT_NAME)
            .output()
            .expect("systemd-analyze runs (the systemd package)")
    };
    let o = verify(&root);
    assert!(
        o.status.success(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // The check has teeth: without the script the unit does not verify.
    std::fs::remove_file(&script).unwrap();
    let o = verify(&root);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(SCRIPT_PATH),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Without the flag, nothing of the guard.
    let plain = build_and_unpack(tmp.path(), "plain", &[]);
    for p in [SCRIPT_PATH, UNIT_PATH, WANTS_PATH] {
        assert!(
            std::fs::symlink_metadata(in_root(&plain, p)).is_err(),
            "{p} in an image built without --boot-guard"
        );
    }
}

#[test]
fn the_boot_guard_is_refused_for_a_plain_ignition_config() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("config.ign");
    std::fs::write(&cfg, r#"{"ignition":{"version":"3.4.0"}}"#).unwrap();
    let o = machineos(&[
        "build",
        "--base-dir",
        tmp.path().to_str().unwrap(),
        "--layer-out",
        tmp.path().join("layer.tar").to_str().unwrap(),
        "--boot-guard",
        cfg.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--boot-guard is for MachineConfig inputs"),
        "{err}"
    );
    assert!(!tmp.path().join("layer.tar").exists(), "nothing written");
}
