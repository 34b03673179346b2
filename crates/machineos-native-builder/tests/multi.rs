//! One build, every architecture: a four-architecture synthetic base built with
//! `build_platforms` into a TLS + basic-auth registry on loopback. The index is read back with
//! `skopeo inspect --raw`, copied whole with `skopeo copy --all`, and each platform's image
//! unpacked with umoci and compared with that platform's own base plus its own plan. A push
//! failure on one platform leaves no index and no tag; a missing platform is refused before
//! any work, naming what the base offers.

mod support;

use machineos_image::auth::Credentials;
use machineos_image::manifest::{Manifest, parse_manifest};
use machineos_image::{ImageRef, Layout, Platform};
use machineos_native_builder::{
    BuildError, MultiOutcome, MultiSpec, PlatformBase, base_platforms, build_platforms,
};
use machineos_testkit::{
    CopyOptions, FaultAction, FaultProxy, FaultRule, RegistryOptions, TestRegistry, diff, skopeo,
    skopeo_copy, snapshot, umoci_unpack,
};
use support::*;

const ARCHES: [&str; 4] = ["amd64", "arm64", "ppc64le", "s390x"];

fn platforms() -> Vec<String> {
    ARCHES.iter().map(|a| format!("linux/{a}")).collect()
}

/// A multi-platform spec of [`CONFIG`] over `base` for `platforms`.
fn multi_spec(base: &str, output: &str, platforms: &[Platform]) -> MultiSpec {
    let one = spec(base, output, CONFIG);
    MultiSpec {
        bases: platforms
            .iter()
            .map(|p| PlatformBase {
                platform: p.clone(),
                base: one.base.clone(),
            })
            .collect(),
        output: one.output,
        recipe: one.recipe,
        created_by: one.created_by,
        layer: one.layer,
    }
}

#[allow(clippy::result_large_err)]
fn build_multi(
    spec: MultiSpec,
    env: machineos_native_builder::Environment,
) -> Result<MultiOutcome, BuildError> {
    runtime().block_on(build_platforms(spec, env))
}

/// Tags each entry of the index tagged `index_tag` in `layout` with its architecture.
fn tag_entries(layout: &std::path::Path, index_tag: &str) {
    let l = Layout::open(layout).expect("layout");
    let desc = l.resolve(Some(index_tag)).expect("index tag");
    let bytes = l.read_blob(&desc.digest).expect("index blob");
    let Manifest::Index(index) = parse_manifest(&bytes, None).expect("index") else {
        panic!("{index_tag} is not an index");
    };
    for m in &index.manifests {
        let arch = m.platform.as_ref().expect("platform").architecture.clone();
        l.set_tag(&arch, m).expect("tag entry");
    }
}

#[test]
fn four_architectures_one_index_each_image_its_own_base_plus_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start(
        RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret-pw"),
    )
    .expect("registry");
    let plats = platforms();
    let plats: Vec<&str> = plats.iter().map(String::as_str).collect();
    let layout = base_layout(tmp.path(), &plats, false);
    let base = format!("{}/base/os:multi", reg.host());
    push_base(&layout, &reg, &base);
    let creds = credentials_file(tmp.path(), &reg.host(), "builder", "s3cret-pw");
    let options = || registry_options(Some(&reg), creds.clone());

    // `--platform all`: what the base offers, in its order.
    let offered = runtime()
        .block_on(base_platforms(
            &ImageRef::parse(&base).unwrap(),
            &env(options(), None),
        ))
        .expect("platforms");
    assert_eq!(
        offered.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        plats
    );

    let out = format!("{}/layered/worker:v1", reg.host());
    let cache = tmp.path().join("cache");
    let outcome = build_multi(
        multi_spec(&base, &out, &offered),
        env(options(), Some(&cache)),
    )
    .expect("multi-platform build");
    assert_eq!(
        outcome.pullspec,
        format!("{}/layered/worker@{}", reg.host(), outcome.index_digest)
    );
    assert_eq!(outcome.images.len(), 4);
    let manifests: std::collections::BTreeSet<_> = outcome
        .images
        .iter()
        .map(|i| i.manifest_digest.clone())
        .collect();
    assert_eq!(manifests.len(), 4, "one image per platform");

    // The registry serves the index under the tag; skopeo reads it raw.
    let cert_dir = reg.cert_dir().unwrap().display().to_string();
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--cert-dir",
        &cert_dir,
        "--creds",
        "builder:s3cret-pw",
        &format!("docker://{out}"),
    ])
    .expect("skopeo inspect --raw");
    assert_eq!(raw.trim_end().as_bytes(), outcome.index.as_slice());
    let index: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let entries = index["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    for (entry, img) in entries.iter().zip(&outcome.images) {
        assert_eq!(entry["digest"], img.manifest_digest.to_string());
        assert_eq!(entry["platform"]["architecture"], img.platform.architecture);
        let base_digest = img.base_pullspec.rsplit_once('@').unwrap().1;
        assert_eq!(
            entry["annotations"]["org.opencontainers.image.base.digest"],
            base_digest
        );
        assert_eq!(
            entry["annotations"]["org.opencontainers.image.base.name"],
            base
        );
    }

    // `skopeo copy --all` takes the whole index; each image unpacks to its own base + plan.
    let pulled = tmp.path().join("pulled");
    skopeo_copy(
        &format!("docker://{out}"),
        &format!("oci:{}:t", pulled.display()),
        &CopyOptions::new().src_registry(&reg).arg("--all"),
    )
    .expect("skopeo copy --all");
    tag_entries(&pulled, "t");
    tag_entries(&layout, "base");
    for img in &outcome.images {
        let arch = &img.platform.architecture;
        let got_dir = tmp.path().join(format!("got-{arch}"));
        let base_dir = tmp.path().join(format!("base-{arch}"));
        umoci_unpack(&pulled, arch, &got_dir).expect("unpack result");
        umoci_unpack(&layout, arch, &base_dir).expect("unpack base");
        let got = snapshot(&got_dir.join("rootfs"));
        let want = expected_tree(&snapshot(&base_dir.join("rootfs")), &img.plan);
        let differences = diff(&want, &got);
        assert!(
            differences.is_empty(),
            "{arch}: unpacked image differs from its base + plan:\n{}",
            differences.join("\n")
        );
        let marker = std::fs::read_to_string(got_dir.join("rootfs/usr/lib/machineos-synth-arch"))
            .expect("arch marker");
        assert_eq!(marker.trim(), arch);
    }

    // Warm: the same build again reads no base layer and gives the same index.
    let warm = build_multi(
        multi_spec(&base, &out, &offered),
        env(options(), Some(&cache)),
    )
    .expect("warm multi-platform build");
    assert_eq!(warm.index_digest, outcome.index_digest);
    assert!(warm.images.iter().all(|i| i.base_layer_reads == 0));
}

#[test]
fn a_push_failure_on_one_platform_leaves_no_index_and_no_tag() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let plats = platforms();
    let plats: Vec<&str> = plats.iter().map(String::as_str).collect();
    let layout = base_layout(tmp.path(), &plats, false);
    let base = format!("{}/base/os:multi", reg.host());
    push_base(&layout, &reg, &base);
    let wanted: Vec<Platform> = plats.iter().map(|p| p.parse().unwrap()).collect();
    let plain = || env(registry_options(None, Credentials::default()), None);

    // Digests are deterministic: a first build elsewhere (through the same proxy, since the
    // base's pullspec is in the image's labels) tells the third platform's.
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let base_via_proxy = format!("{}/base/os:multi", proxy.host());
    let ok = build_multi(
        multi_spec(
            &base_via_proxy,
            &format!("{}/out/ok:v1", proxy.host()),
            &wanted,
        ),
        plain(),
    )
    .expect("reference build");
    let third = ok.images[2].manifest_digest.to_string();
    proxy
        .set_rules(vec![
            FaultRule::new(
                format!("/out/failing/manifests/{third}"),
                FaultAction::Status(400),
            )
            .method("PUT"),
        ])
        .expect("rules");
    proxy.clear_requests();
    let Err(err) = build_multi(
        multi_spec(
            &base_via_proxy,
            &format!("{}/out/failing:v1", proxy.host()),
            &wanted,
        ),
        plain(),
    ) else {
        panic!("the third platform's manifest push should fail");
    };
    assert!(format!("{err:#}").contains("failing"), "{err:#}");
    assert_eq!(proxy.count("PUT", &format!("/manifests/{third}")), 1);
    // No index was put, by digest or by tag.
    assert_eq!(proxy.count("PUT", "/manifests/v1"), 0);
    assert_eq!(
        proxy.count("PUT", &format!("/manifests/{}", ok.index_digest)),
        0
    );
    let tags = skopeo(&[
        "list-tags",
        "--tls-verify=false",
        &format!("docker://{}/out/failing", reg.host()),
    ]);
    match tags {
        Ok(out) => {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert!(
                v["Tags"].as_array().is_none_or(|t| t.is_empty()),
                "a tag was left: {out}"
            );
        }
        Err(e) => assert!(
            ["NAME_UNKNOWN", "name unknown", "404"]
                .iter()
                .any(|m| format!("{e:#}").contains(m)),
            "{e:#}"
        ),
    }
}

#[test]
fn a_platform_the_base_lacks_is_refused_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64", "linux/arm64"], false);
    let base = format!("{}/base/os:two", reg.host());
    push_base(&layout, &reg, &base);
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let wanted: Vec<Platform> = ["linux/amd64", "linux/s390x", "linux/ppc64le"]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    let Err(err) = build_multi(
        multi_spec(
            &format!("{}/base/os:two", proxy.host()),
            &format!("{}/out/x:v1", proxy.host()),
            &wanted,
        ),
        env(registry_options(None, Credentials::default()), None),
    ) else {
        panic!("s390x and ppc64le are missing");
    };
    let msg = format!("{err:#}");
    assert!(matches!(err, BuildError::MissingPlatforms { .. }), "{msg}");
    assert!(msg.contains("linux/s390x, linux/ppc64le"), "{msg}");
    assert!(msg.contains("offers linux/amd64, linux/arm64"), "{msg}");
    // Nothing was read beyond the base's index, nothing written.
    assert_eq!(proxy.count("GET", "/blobs/"), 0);
    assert_eq!(proxy.count("POST", "/blobs/uploads/"), 0);
    assert_eq!(proxy.count("PUT", "/manifests/"), 0);
}

#[test]
fn a_layout_output_lists_only_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = base_layout(tmp.path(), &["linux/amd64", "linux/arm64"], false);
    let base = format!("oci:{}:base", layout.display());
    let out_dir = tmp.path().join("out");
    let out = format!("oci:{}:v1", out_dir.display());
    let wanted: Vec<Platform> = ["linux/arm64", "linux/amd64"]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    let outcome = build_multi(
        multi_spec(&base, &out, &wanted),
        machineos_native_builder::Environment {
            registry: None,
            cache: None,
            memory: None,
            progress: std::sync::Arc::new(machineos_native_builder::Quiet),
        },
    )
    .expect("layout build");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("index.json")).unwrap()).unwrap();
    let listed = index["manifests"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{index}");
    assert_eq!(listed[0]["digest"], outcome.index_digest.to_string());
    // Entries in the order asked for.
    assert_eq!(outcome.images[0].platform.architecture, "arm64");
    tag_entries(&out_dir, "v1");
    umoci_unpack(&out_dir, "arm64", &tmp.path().join("arm")).expect("unpack arm64");
}
