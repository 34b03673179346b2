//! `machineos inspect` and `machineos build -o json` say which OS a base is, read from the
//! base itself: the synthetic Fedora, CentOS Stream and RHEL CoreOS bases.

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
        .expect("running machineos")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn base(dir: &Path, spec: &machineos_synth::SynthSpec) -> String {
    let path = dir.join(spec.variant.name());
    let layout = machineos_image::Layout::create(&path).unwrap();
    let desc = machineos_synth::write_image(&layout, spec).unwrap();
    layout.set_tag("base", &desc).unwrap();
    format!("oci:{}:base", path.display())
}

#[test]
fn inspect_and_build_report_the_variant() {
    let tmp = tempfile::tempdir().unwrap();
    for (spec, kind, text) in [
        (
            machineos_synth::SynthSpec::example(),
            "FedoraCoreOS",
            "os:       Fedora CoreOS (fedora 41, VARIANT_ID=coreos; bootable: containers.bootc=1, ostree.bootable=true; ostree)",
        ),
        (
            machineos_synth::SynthSpec::scos(),
            "CentOSStreamCoreOS",
            "os:       CentOS Stream CoreOS (centos 9, VARIANT_ID=coreos;",
        ),
        (
            machineos_synth::SynthSpec::rhcos(),
            "RHELCoreOS",
            "os:       RHEL CoreOS (rhcos 4.16, VARIANT_ID=coreos;",
        ),
    ] {
        let image = base(tmp.path(), &spec);
        let json: serde_json::Value = serde_json::from_str(&ok(&machineos(&[
            "inspect",
            "--platform",
            "linux/amd64",
            &image,
        ])))
        .unwrap();
        assert_eq!(json["variant"]["kind"], kind, "{json}");
        let out = ok(&machineos(&[
            "inspect",
            "--platform",
            "linux/amd64",
            "-o",
            "text",
            &image,
        ]));
        assert!(out.contains(text), "{out}");
        assert!(out.contains("machineconfig: none"), "{out}");

        let built = ok(&machineos(&[
            "build",
            "--base",
            &image,
            "--output",
            &format!(
                "oci:{}:{}",
                tmp.path().join("out").display(),
                spec.variant.name()
            ),
            "--platform",
            "linux/amd64",
            "-o",
            "json",
            "examples/machineconfigs",
        ]));
        let (summary, _) = built.trim_end().rsplit_once('\n').unwrap();
        let summary: serde_json::Value = serde_json::from_str(summary).unwrap();
        assert_eq!(summary["variant"]["kind"], kind, "{summary}");
        assert_eq!(summary["variant"], json["variant"]);
    }
}
