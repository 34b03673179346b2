//! Which OS a base is, as `inspect` and a build's outcome report it, on the synthetic Fedora,
//! CentOS Stream and RHEL CoreOS bases (ostree-encapsulated and plain), and a plain
//! container: detection reads the base's own os-release and labels, and a build costs no
//! extra base layer read for it (the index keeps os-release).

mod support;

use machineos_image::auth::Credentials;
use machineos_image::{ImageRef, Layout, Platform};
use machineos_native_builder::CacheUse;
use machineos_synth::SynthSpec;
use machineos_variant::{Source, VariantKind};
use support::*;

fn write(dir: &std::path::Path, spec: &SynthSpec) -> std::path::PathBuf {
    let path = dir.join("base");
    let layout = Layout::create(&path).unwrap();
    let desc = machineos_synth::write_image(&layout, spec).unwrap();
    layout.set_tag("base", &desc).unwrap();
    path
}

fn inspect(image: &str) -> machineos_native_builder::inspect::Inspection {
    runtime()
        .block_on(machineos_native_builder::inspect::inspect(
            &ImageRef::parse(image).unwrap(),
            &Platform::new("linux", "amd64", None),
            None,
        ))
        .unwrap()
}

#[test]
fn inspect_and_build_report_each_synthetic_variant() {
    let cases = [
        (SynthSpec::example(), VariantKind::FedoraCoreOS, "fedora"),
        (SynthSpec::scos(), VariantKind::CentOSStreamCoreOS, "centos"),
        (SynthSpec::rhcos(), VariantKind::RHELCoreOS, "rhcos"),
    ];
    for (spec, kind, id) in cases {
        for spec in [spec.clone(), spec.plain()] {
            let name = format!("{} ostree={}", spec.variant.name(), spec.ostree);
            let tmp = tempfile::tempdir().unwrap();
            let base = write(tmp.path(), &spec);
            let base_ref = format!("oci:{}:base", base.display());

            let i = inspect(&base_ref);
            assert_eq!(i.variant.kind, kind, "{name}: {:?}", i.variant);
            assert_eq!(i.variant.source, Source::OsRelease, "{name}");
            assert_eq!(i.variant.id.as_deref(), Some(id), "{name}");
            assert_eq!(i.variant.ostree, spec.ostree, "{name}");
            assert!(i.variant.bootable, "{name}");
            let json = serde_json::to_value(&i).unwrap();
            assert_eq!(json["variant"]["kind"], format!("{kind:?}"), "{name}");

            // A build detects the same from the index it already has: no extra layer read.
            let cache = tmp.path().join("cache");
            let out = tmp.path().join("out");
            let cold = build(
                spec_for(&base_ref, &format!("oci:{}:v1", out.display())),
                env(registry_options(None, Credentials::default()), Some(&cache)),
            )
            .expect("build");
            assert_eq!(cold.variant, i.variant, "{name}");
            assert_eq!(cold.base_layer_reads as usize, cold.base_layers, "{name}");
            let warm = build(
                spec_for(&base_ref, &format!("oci:{}:v2", out.display())),
                env(registry_options(None, Credentials::default()), Some(&cache)),
            )
            .expect("warm build");
            assert_eq!(warm.cache, CacheUse::Hit);
            assert_eq!(warm.base_layer_reads, 0, "{name}");
            assert_eq!(warm.variant, i.variant, "{name}");

            // The built image is still that OS: its os-release is the base's.
            let built = inspect(&format!("oci:{}:v1", out.display()));
            assert_eq!(built.variant.kind, kind, "{name}");
        }
    }
}

fn spec_for(base: &str, output: &str) -> machineos_native_builder::BuildSpec {
    spec(base, output, CONFIG)
}

#[test]
fn a_bootable_image_with_another_os_release_is_bootc() {
    // A synthetic tree whose os-release (replaced in the newest layer) is not CoreOS's, with
    // the bootable labels: a bootc image of another OS; detection never guesses CoreOS.
    let tmp = tempfile::tempdir().unwrap();
    let spec = SynthSpec {
        extra_files: vec![machineos_synth::ExtraFile {
            path: "/usr/lib/os-release".into(),
            contents: b"NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=41\nVARIANT_ID=container\n"
                .to_vec(),
            mode: 0o644,
        }],
        ..SynthSpec::example().plain()
    };
    let base = write(tmp.path(), &spec);
    let i = inspect(&format!("oci:{}:base", base.display()));
    assert_eq!(i.variant.kind, VariantKind::Bootc, "{:?}", i.variant);
    assert_eq!(i.variant.variant_id.as_deref(), Some("container"));
}
