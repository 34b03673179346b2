//! The FCOS-, SCOS- and RHCOS-shaped images as an independent OCI implementation (umoci)
//! unpacks them, and as variant detection sees them; the four-architecture index.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use machineos_image::{Descriptor, Layout, media_type};
use machineos_synth::{FOUR_ARCHES, SynthSpec, SynthVariant, write_four_arch, write_image};
use machineos_variant::{VariantKind, detect};
use serde_json::Value;

/// Run umoci; a missing umoci is a clear failure, not a skip.
fn umoci(args: &[&str]) -> String {
    let out = match Command::new("umoci").args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "umoci is not installed (needed to check the OCI layout independently): install it, e.g. `apt-get install umoci` (scripts/test.sh does)"
        ),
        Err(e) => panic!("running umoci: {e}"),
    };
    assert!(
        out.status.success(),
        "umoci {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(layout: &Layout, desc: &Descriptor) -> Value {
    serde_json::from_slice(&layout.read_blob(&desc.digest).unwrap()).unwrap()
}

fn labels(layout: &Layout, manifest: &Descriptor) -> BTreeMap<String, String> {
    let m = json(layout, manifest);
    let config: Descriptor = serde_json::from_value(m["config"].clone()).unwrap();
    let c = json(layout, &config);
    serde_json::from_value(c["config"]["Labels"].clone()).unwrap()
}

#[test]
fn each_variant_unpacks_and_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            SynthSpec::example(),
            VariantKind::FedoraCoreOS,
            "fedora",
            "fedora-release",
            "zincati.service",
            "zincati",
        ),
        (
            SynthSpec::scos(),
            VariantKind::CentOSStreamCoreOS,
            "centos",
            "centos-release",
            "crio.service",
            "containers",
        ),
        (
            SynthSpec::rhcos(),
            VariantKind::RHELCoreOS,
            "rhcos",
            "redhat-release",
            "crio.service",
            "containers",
        ),
    ];
    for (spec, kind, id, release, unit, user) in cases {
        for spec in [spec.clone(), spec.plain()] {
            let name = format!("{}-{}", spec.variant.name(), spec.ostree);
            let out = dir.path().join(&name);
            let layout = Layout::create(&out).unwrap();
            let manifest = write_image(&layout, &spec).unwrap();
            layout.set_tag("t", &manifest).unwrap();
            let bundle = dir.path().join(format!("{name}-bundle"));
            umoci(&[
                "unpack",
                "--rootless",
                "--image",
                &format!("{}:t", out.display()),
                bundle.to_str().unwrap(),
            ]);
            let root = bundle.join("rootfs");
            let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
            let os_release = read("usr/lib/os-release");
            let labels = labels(&layout, &manifest);
            let v = detect(Some(&os_release), &labels);
            assert_eq!(v.kind, kind, "{name}: {v:?}");
            assert_eq!(v.id.as_deref(), Some(id), "{name}");
            assert_eq!(v.warnings, vec![], "{name}");
            assert!(v.bootable, "{name}");
            assert_eq!(v.ostree, spec.ostree, "{name}");
            // Without os-release, the labels still say which CoreOS (FCOS's predate them).
            if spec.variant != SynthVariant::Fcos {
                assert_eq!(detect(None, &labels).kind, kind, "{name}");
            }
            let etc = "etc";
            assert_eq!(
                std::fs::read_link(root.join(format!("{etc}/{release}"))).unwrap(),
                Path::new(&format!("../usr/lib/{release}"))
            );
            assert!(read(&format!("usr/lib/{release}")).contains("release"));
            assert!(
                std::fs::symlink_metadata(root.join(format!(
                    "{etc}/systemd/system/multi-user.target.wants/{unit}"
                )))
                .is_ok(),
                "{name}: {unit} enabled"
            );
            assert!(
                root.join(format!("usr/lib/systemd/system/{unit}"))
                    .is_file(),
                "{name}"
            );
            assert!(
                read("usr/lib/passwd").contains(&format!("\n{user}:x:995:993:")),
                "{name}"
            );
            let title = &labels["org.opencontainers.image.title"];
            assert!(title.starts_with(spec.variant.os_name()), "{title}");
        }
    }
}

#[test]
fn rhcos_and_scos_os_release_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(&dir.path().join("l")).unwrap();
    let m = write_image(&layout, &SynthSpec::rhcos()).unwrap();
    let l = labels(&layout, &m);
    assert_eq!(l["com.coreos.osname"], "rhcos");
    assert_eq!(l["version"], machineos_synth::RHCOS_VERSION);
    let m = write_image(&layout, &SynthSpec::scos()).unwrap();
    let l = labels(&layout, &m);
    assert_eq!(l["com.coreos.osname"], "scos");
    assert_eq!(
        l["io.openshift.build.version-display-names"],
        "machine-os=CentOS Stream CoreOS"
    );
    let m = write_image(&layout, &SynthSpec::example()).unwrap();
    assert!(!labels(&layout, &m).contains_key("com.coreos.osname"));
}

#[test]
fn four_arch_index() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("four");
    let layout = Layout::create(&out).unwrap();
    let index = write_four_arch(&layout, &SynthSpec::scos()).unwrap();
    assert_eq!(index.media_type, media_type::OCI_INDEX);
    let idx = json(&layout, &index);
    let manifests: Vec<Descriptor> = serde_json::from_value(idx["manifests"].clone()).unwrap();
    let arches: Vec<String> = manifests
        .iter()
        .map(|d| d.platform.as_ref().unwrap().architecture.clone())
        .collect();
    assert_eq!(arches, FOUR_ARCHES);
    for (d, arch) in manifests.iter().zip(FOUR_ARCHES) {
        assert_eq!(d.platform.as_ref().unwrap().os, "linux");
        layout.set_tag(arch, d).unwrap();
        let stat = umoci(&["stat", "--image", &format!("{}:{arch}", out.display())]);
        assert!(stat.contains("machineos-synth layer 5/5"), "{stat}");
        let labels = labels(&layout, d);
        assert!(labels["ostree.linux"].ends_with(match arch {
            "amd64" => ".x86_64",
            "arm64" => ".aarch64",
            other => other,
        }));
        assert_eq!(labels["com.coreos.osname"], "scos");
    }
    // Deterministic: the same spec gives the same index.
    let again = Layout::create(&dir.path().join("again")).unwrap();
    assert_eq!(
        write_four_arch(&again, &SynthSpec::scos()).unwrap().digest,
        index.digest
    );
}
