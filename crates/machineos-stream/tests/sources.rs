//! Each kind of stream source, from fixture files written in the real shapes: what is chosen
//! per architecture, and the errors for what is malformed or missing.

use std::path::PathBuf;

use machineos_diagnostics::{Retry, check_classified};
use machineos_stream::{Arch, ArchImages, Format, StreamError, StreamImages, Streams, parse};

fn fixture(name: &str) -> (Vec<u8>, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let bytes = std::fs::read(&path).unwrap();
    (bytes, name.to_owned())
}

fn read(name: &str) -> Streams {
    let (bytes, source) = fixture(name);
    parse(&bytes, &source).unwrap_or_else(|e| panic!("{e}"))
}

fn read_err(name: &str) -> StreamError {
    let (bytes, source) = fixture(name);
    parse(&bytes, &source).unwrap_err()
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

#[test]
fn fcos_stable_four_architectures_by_either_spelling() {
    let s = read("fcos-stable.json");
    assert_eq!(s.format, Format::CoreOsStreamMetadata);
    assert_eq!(s.names(), ["stable"]);
    let StreamImages::PerArch(map) = &s.streams[0].images else {
        panic!("per-arch")
    };
    let arches: Vec<&str> = map.keys().map(Arch::oci).collect();
    assert_eq!(arches, ["amd64", "arm64", "ppc64le", "s390x"]);
    for (arch, c) in [
        ("x86_64", 'a'),
        ("amd64", 'a'),
        ("aarch64", 'b'),
        ("arm64", 'b'),
        ("ppc64le", 'c'),
        ("s390x", 'd'),
    ] {
        let got = s.select(None, &Arch::new(arch)).unwrap();
        // digest-ref wins over the tag; the KubeVirt containerDisk is never taken.
        assert_eq!(
            got,
            ArchImages {
                os_image: format!("quay.io/fedora/fedora-coreos@{}", digest(c)),
                extensions_image: None,
            },
            "{arch}"
        );
    }
    let named = s.select(Some("stable"), &Arch::new("s390x")).unwrap();
    assert!(named.os_image.ends_with(&digest('d')));
}

#[test]
fn rhcos_with_extensions_and_an_arch_without_an_os_image() {
    let s = read("rhcos-4.18.json");
    assert_eq!(s.names(), ["rhcos-4.18"]);
    let x = s.select(None, &Arch::new("amd64")).unwrap();
    assert_eq!(
        x.os_image,
        format!(
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@{}",
            digest('1')
        )
    );
    assert_eq!(
        x.extensions_image.as_deref(),
        Some(
            format!(
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev@{}",
                digest('5')
            )
            .as_str()
        )
    );
    let a = s.select(None, &Arch::new("arm64")).unwrap();
    assert!(a.extensions_image.unwrap().ends_with(&digest('6')));

    // ppc64le is listed (disk images, PowerVS) but names no OS container image.
    let e = s.select(None, &Arch::new("ppc64le")).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("rhcos-4.18.json: stream \"rhcos-4.18\", architecture ppc64le")
            && text.contains("architectures.ppc64le.oci-image"),
        "{text}"
    );
    check_classified(&e, "NoOSImageInStream", Retry::Permanent).unwrap();

    // s390x is not in the stream at all.
    let e = s.select(None, &Arch::new("s390x")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "rhcos-4.18.json: stream \"rhcos-4.18\" has no architecture s390x; it offers amd64 (x86_64), arm64 (aarch64), ppc64le"
    );
    check_classified(&e, "ArchitectureNotInOSStream", Retry::Permanent).unwrap();
}

#[test]
fn os_image_stream_two_streams_and_a_default() {
    let s = read("osimagestream.yaml");
    assert_eq!(s.format, Format::OsImageStream);
    assert_eq!(s.names(), ["rhel-9", "rhel-10"]);
    assert_eq!(s.default_stream.as_deref(), Some("rhel-9"));
    // Multi-arch references: every architecture gets the same pair.
    for arch in ["amd64", "arm64", "s390x"] {
        let d = s.select(None, &Arch::new(arch)).unwrap();
        assert!(d.os_image.ends_with(&digest('9')), "{arch}");
    }
    let ten = s.select(Some("rhel-10"), &Arch::new("x86_64")).unwrap();
    assert!(ten.os_image.ends_with(&"10".repeat(32)));
    assert!(ten.extensions_image.unwrap().ends_with(&"1e".repeat(32)));

    let e = s.select(Some("rhel-8"), &Arch::new("amd64")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "osimagestream.yaml: no stream \"rhel-8\"; available: rhel-9, rhel-10"
    );
    check_classified(&e, "OSStreamNotFound", Retry::Permanent).unwrap();
}

#[test]
fn osimageurl_config_map_is_one_stream_for_any_arch() {
    let s = read("osimageurl-configmap.yaml");
    assert_eq!(s.format, Format::OsImageUrlConfigMap);
    assert_eq!(s.names(), ["machine-config-osimageurl"]);
    assert_eq!(
        s.source_name,
        "osimageurl-configmap.yaml (ConfigMap openshift-machine-config-operator/machine-config-osimageurl)"
    );
    for arch in ["amd64", "ppc64le"] {
        let got = s.select(None, &Arch::new(arch)).unwrap();
        assert!(got.os_image.ends_with(&digest('4')));
        assert!(got.extensions_image.unwrap().ends_with(&digest('5')));
    }
}

#[test]
fn malformed_json_names_the_file_and_the_json_path() {
    let e = read_err("wrong-type.json");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "wrong-type.json: CoreOS stream metadata: at $.architectures.aarch64.oci-image.image: invalid type: integer `42`"
        ),
        "{text}"
    );
    check_classified(&e, "InvalidOSStream", Retry::Permanent).unwrap();

    let e = read_err("truncated.json");
    let text = e.to_string();
    assert!(
        text.starts_with("truncated.json: JSON: at $: EOF while parsing")
            && text.contains("line 6"),
        "{text}"
    );
}

#[test]
fn every_fixture_is_detected_by_shape() {
    for (name, want) in [
        ("fcos-stable.json", Format::CoreOsStreamMetadata),
        ("rhcos-4.18.json", Format::CoreOsStreamMetadata),
        ("osimagestream.yaml", Format::OsImageStream),
        ("osimageurl-configmap.yaml", Format::OsImageUrlConfigMap),
    ] {
        assert_eq!(read(name).format, want, "{name}");
    }
}
