//! A base's bytes are checked against every name the image gives them, whatever the
//! digest algorithm: layer blobs against their digest and size when indexed, copied or
//! linked, and their uncompressed contents against the config's `rootfs.diff_ids`.

mod support;

use std::path::Path;

use machineos_image::auth::Credentials;
use machineos_image::{Digest, Layout};
use support::*;

/// Rewrites the `base` image of the layout at `dir`: `edit` gets its manifest and config as
/// JSON (and the layout, for blobs), then both are stored again and `base` points at them.
fn rewrite_base(
    dir: &Path,
    edit: impl FnOnce(&Layout, &mut serde_json::Value, &mut serde_json::Value),
) {
    let layout = Layout::open(dir).unwrap();
    let desc = layout.resolve(Some("base")).unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&layout.read_blob(&desc.digest).unwrap()).unwrap();
    let config_digest = Digest::parse(manifest["config"]["digest"].as_str().unwrap()).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_slice(&layout.read_blob(&config_digest).unwrap()).unwrap();
    edit(&layout, &mut manifest, &mut config);
    let config = serde_json::to_vec(&config).unwrap();
    let (d, n) = layout.write_blob(&config).unwrap();
    manifest["config"]["digest"] = d.to_string().into();
    manifest["config"]["size"] = n.into();
    let (d, n) = layout
        .write_blob(&serde_json::to_vec(&manifest).unwrap())
        .unwrap();
    let new = machineos_image::Descriptor {
        platform: desc.platform.clone(),
        ..machineos_image::Descriptor::new(&desc.media_type, d, n)
    };
    layout.set_tag("base", &new).unwrap();
}

/// Stores every layer again under its SHA-512 digest and names it so in the manifest.
fn layers_to_sha512(layout: &Layout, manifest: &mut serde_json::Value) -> Vec<Digest> {
    let mut out = Vec::new();
    for layer in manifest["layers"].as_array_mut().unwrap() {
        let d = Digest::parse(layer["digest"].as_str().unwrap()).unwrap();
        let bytes = layout.read_blob(&d).unwrap();
        let d512 = Digest::parse(&format!("sha512:{}", "0".repeat(128)))
            .unwrap()
            .same_algorithm_of(&bytes);
        layout
            .copy_blob(bytes.as_slice(), &d512, bytes.len() as u64)
            .unwrap();
        layer["digest"] = d512.to_string().into();
        out.push(d512);
    }
    out
}

fn build_from(base: &Path, out: &Path, cache: Option<&Path>) -> Result<(), String> {
    build(
        spec(
            &format!("oci:{}:base", base.display()),
            &format!("oci:{}:v1", out.display()),
            CONFIG,
        ),
        env(registry_options(None, Credentials::default()), cache),
    )
    .map(drop)
    .map_err(|e| e.to_string())
}

#[test]
fn sha512_layers_are_indexed_copied_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_layout(tmp.path(), &["linux/amd64"], false);
    let mut digests = Vec::new();
    rewrite_base(&base, |layout, manifest, _| {
        digests = layers_to_sha512(layout, manifest)
    });
    // Another filesystem would copy; here the blob is linked once checked. Both paths run:
    // the layout-to-layout link, and a copy into a layout the base's blobs cannot reach.
    let out = tmp.path().join("out");
    build_from(&base, &out, None).unwrap();
    let out_layout = Layout::open(&out).unwrap();
    for d in &digests {
        assert!(out_layout.has_blob(d), "{d} not in the output");
    }

    // Tampered bytes of the same length under a sha512 name — in the gzip header's mtime,
    // which every decoder ignores, so only the digest can tell: refused, nothing tagged.
    let victim = Layout::open(&base).unwrap().blob_path(&digests[1]);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[5] ^= 0x55;
    std::fs::write(&victim, &bytes).unwrap();
    let out2 = tmp.path().join("out2");
    let e = build_from(&base, &out2, None).unwrap_err();
    assert!(
        e.contains(digests[1].as_str()) && e.contains("digest"),
        "{e}"
    );
    assert!(
        Layout::open(&out2)
            .map(|l| l.resolve(Some("v1")).is_err())
            .unwrap_or(true)
    );
}

#[test]
fn a_layer_whose_contents_are_not_its_diff_id_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_layout(tmp.path(), &["linux/amd64"], false);
    rewrite_base(&base, |_, _, config| {
        config["rootfs"]["diff_ids"][2] = Digest::sha256(b"something else").to_string().into();
    });
    let e = build_from(&base, &tmp.path().join("out"), None).unwrap_err();
    assert!(
        e.contains("applying layer 2") && e.contains("rootfs.diff_ids"),
        "{e}"
    );
}

#[test]
fn a_blob_whose_size_is_not_its_descriptors_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_layout(tmp.path(), &["linux/amd64"], false);
    rewrite_base(&base, |_, manifest, _| {
        let size = manifest["layers"][0]["size"].as_u64().unwrap();
        manifest["layers"][0]["size"] = (size + 1).into();
    });
    let e = build_from(&base, &tmp.path().join("out"), None).unwrap_err();
    assert!(e.contains("its descriptor says"), "{e}");
}

/// With the base index cached, no base layer is read while building: the blobs that go
/// into a new output layout are checked when they are linked or copied there.
#[test]
fn a_tampered_base_blob_is_not_linked_into_a_new_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let base = base_layout(tmp.path(), &["linux/amd64"], false);
    let cache = tmp.path().join("cache");
    build_from(&base, &tmp.path().join("out1"), Some(&cache)).unwrap();
    let layout = Layout::open(&base).unwrap();
    let desc = layout.resolve(Some("base")).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&layout.read_blob(&desc.digest).unwrap()).unwrap();
    let layer = Digest::parse(manifest["layers"][0]["digest"].as_str().unwrap()).unwrap();
    let path = layout.blob_path(&layer);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 1;
    // A new inode: the first output layout's hard link keeps the good bytes.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let e = build_from(&base, &tmp.path().join("out2"), Some(&cache)).unwrap_err();
    assert!(e.contains(layer.as_str()) && e.contains("digest"), "{e}");
}
