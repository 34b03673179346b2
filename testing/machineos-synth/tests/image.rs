//! End-to-end checks of generated images: determinism, the example profile's shape, the
//! config and manifest, multi-arch indexes, Docker media types and extra files, read back
//! from the OCI layout the way a consumer would.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use machineos_image::{Descriptor, Digest, Layout, Platform, media_type};
use machineos_synth::{
    ExtraFile, Profile, SpecError, SynthError, SynthSpec, TreeError, generate, generate_multi_arch,
    write_image, write_multi_arch,
};
use serde_json::Value;

/// One tar member as read back.
#[derive(Debug, Clone)]
struct Member {
    path: String,
    kind: tar::EntryType,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
    link: Option<String>,
    data: Vec<u8>,
    names_empty: bool,
}

fn json(layout: &Layout, digest: &Digest) -> Value {
    serde_json::from_slice(&layout.read_blob(digest).unwrap()).unwrap()
}

fn digest_of(v: &Value) -> Digest {
    Digest::parse(v.as_str().unwrap()).unwrap()
}

/// The uncompressed tar of a layer blob and its members.
fn layer(layout: &Layout, digest: &Digest) -> (Vec<u8>, Vec<Member>) {
    let blob = layout.read_blob(digest).unwrap();
    let mut tar_bytes = Vec::new();
    flate2::read::GzDecoder::new(blob.as_slice())
        .read_to_end(&mut tar_bytes)
        .unwrap();
    let mut members = Vec::new();
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        members.push(Member {
            path: e
                .path()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches('/')
                .to_owned(),
            kind: h.entry_type(),
            mode: h.mode().unwrap(),
            uid: h.uid().unwrap(),
            gid: h.gid().unwrap(),
            mtime: h.mtime().unwrap(),
            link: e
                .link_name()
                .unwrap()
                .map(|l| l.to_string_lossy().into_owned()),
            data,
            names_empty: h.username().unwrap().unwrap_or("").is_empty()
                && h.groupname().unwrap().unwrap_or("").is_empty(),
        });
    }
    (tar_bytes, members)
}

fn blob_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn small_spec() -> SynthSpec {
    SynthSpec {
        layers: 3,
        files: 250,
        total_bytes: 256 << 10,
        ..SynthSpec::example().plain()
    }
}

#[test]
fn two_runs_give_identical_layouts() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let la = Layout::create(a.path()).unwrap();
    let lb = Layout::create(b.path()).unwrap();
    let da = write_image(&la, &SynthSpec::example().plain()).unwrap();
    let db = write_image(&lb, &SynthSpec::example().plain()).unwrap();
    assert_eq!(da, db);
    assert_eq!(blob_names(a.path()), blob_names(b.path()));
    for name in blob_names(a.path()) {
        let pa = a.path().join("blobs/sha256").join(&name);
        let pb = b.path().join("blobs/sha256").join(&name);
        assert_eq!(std::fs::read(pa).unwrap(), std::fs::read(pb).unwrap());
    }
    // A different seed is a different image.
    let other = SynthSpec {
        seed: 1,
        ..SynthSpec::example().plain()
    };
    assert_ne!(write_image(&la, &other).unwrap().digest, da.digest);
}

#[test]
fn example_profile_shape() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let g = generate(&layout, &SynthSpec::example().plain()).unwrap();
    assert_eq!(g.layers, 5);
    assert_eq!(g.files, 400);
    assert_eq!(g.content_bytes, 2 << 20);
    assert!(
        (2 << 20..4 << 20).contains(&g.uncompressed_bytes),
        "{}",
        g.uncompressed_bytes
    );
    assert!(g.compressed_bytes < g.uncompressed_bytes);
    assert!((500..1000).contains(&g.entries), "{}", g.entries);
    assert_eq!(g.kernel_version, "6.11.5-300.fc41.x86_64");
    assert_eq!(
        g.manifest.platform,
        Some(Platform::new("linux", "amd64", None))
    );
    assert_eq!(g.manifest.media_type, media_type::OCI_MANIFEST);
}

#[test]
fn bench_profiles_declare_the_benchmark_shape() {
    let big = SynthSpec::bench_1g();
    assert!(
        big.ostree,
        "the benchmark models nodes: an encapsulated base"
    );
    assert!(big.layers >= 30, "{}", big.layers);
    assert!(big.files >= 50_000, "{}", big.files);
    assert!(big.total_bytes >= 1_000_000_000, "{}", big.total_bytes);
    assert_eq!(big.gzip_level, 1);
    let small = SynthSpec::bench_100m();
    assert_eq!(
        (small.seed, small.layers, small.files),
        (big.seed, big.layers, big.files)
    );
    assert_eq!(small.total_bytes, 100 << 20);
    assert_eq!(Profile::Bench1g.spec(big.platform.clone()), big);
}

#[test]
fn config_manifest_and_layers_are_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let g = generate(&layout, &SynthSpec::example().plain()).unwrap();
    let manifest = json(&layout, &g.manifest.digest);
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["mediaType"], media_type::OCI_MANIFEST);
    assert_eq!(manifest["config"]["mediaType"], media_type::OCI_CONFIG);
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.version"],
        "41.20241027.3.0"
    );
    let config = json(&layout, &digest_of(&manifest["config"]["digest"]));
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(config.get("variant"), None);
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["containers.bootc"], "1");
    assert_eq!(labels["ostree.bootable"], "true");
    assert_eq!(labels["ostree.linux"], "6.11.5-300.fc41.x86_64");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        "41.20241027.3.0"
    );
    assert_eq!(config["config"]["StopSignal"], "SIGRTMIN+3");
    assert_eq!(config["created"], machineos_synth::CREATED);

    let layers = manifest["layers"].as_array().unwrap();
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(layers.len(), 5);
    assert_eq!(diff_ids.len(), 5);
    assert_eq!(config["history"].as_array().unwrap().len(), 5);

    let mut all: Vec<Vec<Member>> = Vec::new();
    let mut tar_total = 0;
    for (l, diff_id) in layers.iter().zip(diff_ids) {
        assert_eq!(l["mediaType"], media_type::OCI_LAYER_GZIP);
        let (tar_bytes, members) = layer(&layout, &digest_of(&l["digest"]));
        tar_total += tar_bytes.len() as u64;
        assert_eq!(Digest::sha256(&tar_bytes), digest_of(diff_id));
        let paths: Vec<&str> = members.iter().map(|m| m.path.as_str()).collect();
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(paths, sorted, "members sorted");
        for m in &members {
            assert_eq!(m.mtime, 0, "{}", m.path);
            assert!(m.names_empty, "{} has user/group names", m.path);
            assert!(!m.path.starts_with('/') && !m.path.starts_with("./"));
        }
        all.push(members);
    }
    assert_eq!(tar_total, g.uncompressed_bytes);

    // The merged view, last layer winning, whiteouts applied.
    let mut fs: BTreeMap<String, Member> = BTreeMap::new();
    for members in &all {
        for m in members {
            let name = m.path.rsplit('/').next().unwrap();
            let parent = m.path.rsplit_once('/').map_or("", |p| p.0);
            if name == ".wh..wh..opq" {
                let prefix = format!("{parent}/");
                fs.retain(|k, _| !k.starts_with(&prefix));
            } else if let Some(hidden) = name.strip_prefix(".wh.") {
                let gone = format!("{parent}/{hidden}");
                fs.retain(|k, _| *k != gone && !k.starts_with(&format!("{gone}/")));
            } else {
                fs.insert(m.path.clone(), m.clone());
            }
        }
    }
    let get = |p: &str| fs.get(p).unwrap_or_else(|| panic!("{p} missing"));
    let text = |p: &str| String::from_utf8(get(p).data.clone()).unwrap();
    let symlink = |p: &str| {
        let m = get(p);
        assert_eq!(m.kind, tar::EntryType::Symlink, "{p}");
        m.link.clone().unwrap()
    };
    for (p, t) in [
        ("usr/local", "../var/usrlocal"),
        ("home", "var/home"),
        ("root", "var/roothome"),
        ("opt", "var/opt"),
        ("srv", "var/srv"),
        ("mnt", "var/mnt"),
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("sbin", "usr/sbin"),
        ("etc/os-release", "../usr/lib/os-release"),
        (
            "etc/systemd/system/multi-user.target.wants/zincati.service",
            "/usr/lib/systemd/system/zincati.service",
        ),
    ] {
        assert_eq!(symlink(p), t, "{p}");
    }
    assert!(text("etc/passwd").starts_with("root:x:0:0:"));
    assert!(text("etc/passwd").contains("core:x:1000:1000:"));
    assert!(text("etc/group").contains("core:x:1000:"));
    assert_eq!(get("etc/shadow").mode, 0);
    assert!(text("usr/lib/passwd").contains("systemd-network:x:192:"));
    assert!(text("usr/lib/passwd").contains("chrony:x:994:992:"));
    assert!(text("usr/lib/group").contains("chrony:x:992:"));
    assert!(text("usr/lib/os-release").contains("VARIANT_ID=coreos"));
    assert!(text("usr/lib/os-release").contains("OSTREE_VERSION='41.20241027.3.0'"));
    assert!(!text("etc/systemd/system-preset/20-ignition.preset").is_empty());
    assert!(text("usr/lib/systemd/system-preset/90-default.preset").contains("enable "));
    assert!(text("usr/lib/systemd/system/zincati.service").contains("WantedBy=multi-user.target"));
    assert!(!fs.keys().any(|k| k.starts_with("usr/etc")));
    assert_eq!(text("usr/lib/machineos-synth-arch"), "amd64\n");
    assert_eq!(get("usr/bin/sudo").mode, 0o4111);
    assert_eq!(get("var/roothome").mode, 0o700);
    assert_eq!(get("tmp").mode, 0o1777);
    assert_eq!(
        (get("var/lib/chrony").uid, get("var/lib/chrony").gid),
        (994, 992)
    );
    assert_eq!(get("etc/chrony.keys").gid, 992);
    assert!(fs.values().any(|m| m.uid != 0));
    let vmlinuz = get("usr/lib/modules/6.11.5-300.fc41.x86_64/vmlinuz");
    assert!(vmlinuz.data.len() > 50_000, "{}", vmlinuz.data.len());
    // Hard links in /usr/bin: links point at an earlier member of the same layer.
    let links: Vec<&Member> = fs
        .values()
        .filter(|m| m.kind == tar::EntryType::Link && m.path.starts_with("usr/bin/"))
        .collect();
    assert!(links.len() >= 2, "{links:?}");
    // The final layer's whiteouts and opaque directory took effect.
    assert!(!fs.contains_key("usr/share/doc/fedora-release/README.obsolete"));
    assert!(!fs.contains_key("usr/share/fedora-release/legacy"));
    assert!(!fs.contains_key("usr/share/fedora-release/legacy/notes.txt"));
    assert!(!fs.contains_key("usr/share/fedora-release/channels/testing"));
    assert!(text("usr/share/fedora-release/channels/stable").contains("revision=2"));
    assert!(fs.contains_key("usr/share/fedora-release/channels/next"));
    let last = all.last().unwrap();
    assert!(last.iter().any(|m| m.path.ends_with("/.wh..wh..opq")));
    assert_eq!(
        all.iter()
            .flatten()
            .filter(|m| m.path.contains("/.wh."))
            .count(),
        3
    );
}

#[test]
fn multi_arch_index() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let amd = small_spec();
    let arm = amd.with_platform(Platform::new("linux", "arm64", Some("v8")));
    let g = generate_multi_arch(&layout, &[amd.clone(), arm.clone()]).unwrap();
    assert_eq!(g.index.media_type, media_type::OCI_INDEX);
    assert_eq!(g.images.len(), 2);
    assert_eq!(g.images[1].kernel_version, "6.11.5-300.fc41.aarch64");
    let index = json(&layout, &g.index.digest);
    assert_eq!(index["mediaType"], media_type::OCI_INDEX);
    let manifests: Vec<Descriptor> = serde_json::from_value(index["manifests"].clone()).unwrap();
    assert_eq!(manifests.len(), 2);
    assert_eq!(
        manifests[0].platform,
        Some(Platform::new("linux", "amd64", None))
    );
    assert_eq!(
        manifests[1].platform,
        Some(Platform::new("linux", "arm64", Some("v8")))
    );
    assert_ne!(manifests[0].digest, manifests[1].digest);
    for (d, arch) in manifests.iter().zip(["amd64", "arm64"]) {
        let m = json(&layout, &d.digest);
        let config = json(&layout, &digest_of(&m["config"]["digest"]));
        assert_eq!(config["architecture"], arch);
        let last = m["layers"].as_array().unwrap().last().unwrap();
        let (_, members) = layer(&layout, &digest_of(&last["digest"]));
        let marker = members
            .iter()
            .find(|m| m.path == "usr/lib/machineos-synth-arch")
            .unwrap();
        assert_eq!(marker.data, format!("{arch}\n").as_bytes());
        if arch == "arm64" {
            assert_eq!(config["variant"], "v8");
        }
    }
    // Same inputs, same index; the descriptor-only form agrees.
    assert_eq!(
        write_multi_arch(&layout, &[amd.clone(), arm]).unwrap(),
        g.index
    );

    let err = |specs: &[SynthSpec]| write_multi_arch(&layout, specs).unwrap_err();
    let e = err(&[]);
    assert!(matches!(e, SynthError::NoSpecs), "{e:?}");
    assert!(e.to_string().contains("no specs"), "{e}");
    // x86_64 is amd64 under another name.
    let e = err(&[
        amd.clone(),
        amd.with_platform(Platform::new("linux", "x86_64", None)),
    ]);
    assert!(matches!(e, SynthError::DuplicatePlatform(_)), "{e:?}");
    assert!(e.to_string().contains("given twice"), "{e}");
    let docker = SynthSpec {
        docker_media_types: true,
        ..amd.with_platform(Platform::new("linux", "arm64", None))
    };
    let e = err(&[amd, docker]);
    assert!(matches!(e, SynthError::MixedMediaTypes), "{e:?}");
    assert!(e.to_string().contains("docker_media_types"), "{e}");
}

#[test]
fn docker_media_types() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let spec = SynthSpec {
        docker_media_types: true,
        ..small_spec()
    };
    let d = write_image(&layout, &spec).unwrap();
    assert_eq!(d.media_type, media_type::DOCKER_MANIFEST);
    let m = json(&layout, &d.digest);
    assert_eq!(m["mediaType"], media_type::DOCKER_MANIFEST);
    assert_eq!(m["config"]["mediaType"], media_type::DOCKER_CONFIG);
    assert_eq!(m.get("annotations"), None);
    for l in m["layers"].as_array().unwrap() {
        assert_eq!(l["mediaType"], media_type::DOCKER_LAYER_GZIP);
    }
    // The same tree as the OCI flavour: same layer blobs, different manifest.
    let oci = write_image(&layout, &small_spec()).unwrap();
    let om = json(&layout, &oci.digest);
    let digests = |m: &Value| -> Vec<Value> {
        m["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["digest"].clone())
            .collect()
    };
    assert_eq!(digests(&m), digests(&om));
    assert_ne!(oci.digest, d.digest);

    let arm = spec.with_platform(Platform::new("linux", "arm64", None));
    let list = write_multi_arch(&layout, &[spec, arm]).unwrap();
    assert_eq!(list.media_type, media_type::DOCKER_MANIFEST_LIST);
    let l = json(&layout, &list.digest);
    assert_eq!(l["mediaType"], media_type::DOCKER_MANIFEST_LIST);
    assert_eq!(l["manifests"][0]["mediaType"], media_type::DOCKER_MANIFEST);
}

#[test]
fn extra_files_are_shipped_in_the_last_layer() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let spec = SynthSpec {
        extra_files: vec![ExtraFile {
            path: "/usr/libexec/machineos/bench-tool".into(),
            contents: b"\x7fELF tool".to_vec(),
            mode: 0o755,
        }],
        ..small_spec()
    };
    let g = generate(&layout, &spec).unwrap();
    assert_eq!(g.files, 251);
    let m = json(&layout, &g.manifest.digest);
    let last = m["layers"].as_array().unwrap().last().unwrap();
    let (_, members) = layer(&layout, &digest_of(&last["digest"]));
    let tool = members
        .iter()
        .find(|m| m.path == "usr/libexec/machineos/bench-tool")
        .unwrap();
    assert_eq!(
        (tool.mode, tool.data.as_slice()),
        (0o755, &b"\x7fELF tool"[..])
    );
    assert!(members.iter().any(|m| m.path == "usr/libexec/machineos"));

    let bad = SynthSpec {
        extra_files: vec![ExtraFile {
            path: "/usr/local/bin/tool".into(),
            contents: vec![],
            mode: 0o755,
        }],
        ..small_spec()
    };
    let e = write_image(&layout, &bad).unwrap_err();
    assert!(
        matches!(&e, SynthError::Tree(TreeError::ExtraBelowNonDir { ancestor, .. }) if ancestor == "usr/local"),
        "{e:?}"
    );
    assert!(e.to_string().contains("symlink"), "{e}");
}

#[test]
fn invalid_specs_are_rejected_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let before = blob_names(dir.path());
    let e = write_image(
        &layout,
        &SynthSpec {
            layers: 1,
            ..SynthSpec::example().plain()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, SynthError::Spec(SpecError::TooFewLayers(1))),
        "{e:?}"
    );
    assert!(e.to_string().contains("layers = 1"), "{e}");
    assert_eq!(blob_names(dir.path()), before);
}
