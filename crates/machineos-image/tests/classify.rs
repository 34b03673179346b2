//! How a controller acts on this crate's errors: for representative values of every public
//! error type, triggered through the public API where possible, the reason and the retry
//! decision, and that each value follows the convention for causes (its Display tells the
//! whole story; no cause is shown twice).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use machineos_diagnostics::{Retry, check_classified};
use machineos_image::{
    AuthError, ConfigError, ConfigPatch, Credentials, Descriptor, Digest, DigestError, ImageIndex,
    ImageRef, LayerCompression, Layout, LayoutError, ManifestError, Platform, RefError,
    derive_manifest, layer_media_type_for, media_type, parse_config, parse_manifest, patch_config,
};

use machineos_diagnostics::ClassifiedError as Checked;

/// One row: what the error is, its value, the reason and retry it must have.
struct Case {
    what: &'static str,
    error: Box<dyn Checked>,
    reason: &'static str,
    retry: Retry,
}

fn case(what: &'static str, error: impl Checked, reason: &'static str, retry: Retry) -> Case {
    Case {
        what,
        error: Box::new(error),
        reason,
        retry,
    }
}

fn check(cases: Vec<Case>) {
    for c in cases {
        assert_eq!(
            check_classified(&*c.error, c.reason, c.retry),
            Ok(()),
            "{}",
            c.what
        );
    }
}

fn err<T: std::fmt::Debug, E>(r: Result<T, E>) -> E {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    }
}

use Retry::{Permanent, Transient};

#[test]
fn parse_errors() {
    let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let digest = err(Digest::parse("sha256:abc"));
    assert!(matches!(digest, DigestError::BadLength { found: 3, .. }));
    let nested = err(ImageRef::parse("quay.io/a@sha256:abc"));
    assert!(matches!(nested, RefError::Digest { .. }), "{nested}");
    check(vec![
        case("digest", digest, "InvalidDigest", Permanent),
        case(
            "digest algorithm",
            err(Digest::parse(&format!("md5:{hex}"))),
            "InvalidDigest",
            Permanent,
        ),
        case(
            "reference digest",
            nested,
            "InvalidImageReference",
            Permanent,
        ),
        case(
            "reference case",
            err(ImageRef::parse("Foo/bar")),
            "InvalidImageReference",
            Permanent,
        ),
        case(
            "reference transport",
            err(ImageRef::parse("containers-storage:foo")),
            "InvalidImageReference",
            Permanent,
        ),
        case(
            "platform",
            err("linux".parse::<Platform>()),
            "InvalidPlatform",
            Permanent,
        ),
    ]);
}

fn index_of(platforms: &[&str]) -> ImageIndex {
    let mut index = ImageIndex::empty();
    for (i, p) in platforms.iter().enumerate() {
        let mut d = Descriptor::new(
            media_type::OCI_MANIFEST,
            Digest::from_sha256_bytes([i as u8; 32]),
            1,
        );
        d.platform = Some(p.parse().unwrap());
        index.manifests.push(d);
    }
    index
}

#[test]
fn manifest_and_config_errors() {
    let json = err(parse_manifest(b"[1]", None));
    assert!(matches!(json, ManifestError::Json { .. }), "{json}");
    let schema1 = err(parse_manifest(br#"{"schemaVersion":1}"#, None));
    assert!(matches!(schema1, ManifestError::Schema1(_)), "{schema1}");
    let cfg = Descriptor::new(media_type::OCI_CONFIG, Digest::sha256(b"{}"), 2);
    let patch = ConfigPatch {
        diff_id: Digest::sha256(b""),
        labels: BTreeMap::new(),
        created: None,
        history_created_by: "test".to_owned(),
        history_comment: None,
    };
    let parse = err(parse_config(b"{}"));
    assert!(matches!(parse, ConfigError::Json { .. }), "{parse}");
    let shape = err(patch_config(b"{}", &patch));
    assert!(matches!(shape, ConfigError::Shape { .. }), "{shape}");
    check(vec![
        case("manifest json", json, "InvalidManifest", Permanent),
        case(
            "manifest kind",
            err(parse_manifest(br#"{"schemaVersion":2}"#, None)),
            "InvalidManifest",
            Permanent,
        ),
        case(
            "base manifest",
            err(derive_manifest(b"[]", &cfg, &cfg)),
            "InvalidManifest",
            Permanent,
        ),
        case("schema1", schema1, "UnsupportedMediaType", Permanent),
        case(
            "manifest media type",
            err(parse_manifest(
                br#"{"schemaVersion":2,"mediaType":"text/plain"}"#,
                None,
            )),
            "UnsupportedMediaType",
            Permanent,
        ),
        case(
            "layer media type",
            err(LayerCompression::from_media_type("text/plain")),
            "UnsupportedMediaType",
            Permanent,
        ),
        case(
            "layer compression",
            err(layer_media_type_for(
                media_type::DOCKER_MANIFEST,
                LayerCompression::Zstd,
            )),
            "UnsupportedMediaType",
            Permanent,
        ),
        case(
            "platform",
            err(index_of(&["linux/amd64"]).select(&"linux/s390x".parse().unwrap())),
            "NoMatchingPlatform",
            Permanent,
        ),
        case("config json", parse, "InvalidImageConfig", Permanent),
        case("config shape", shape, "InvalidImageConfig", Permanent),
    ]);
}

fn io_error(dir: &Path, kind: io::ErrorKind) -> LayoutError {
    LayoutError::Io {
        dir: dir.to_path_buf(),
        op: "writing blob",
        path: dir.join("blobs"),
        error: io::Error::from(kind),
    }
}

#[test]
fn layout_errors() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let subdir = |name: &str| -> PathBuf {
        let p = root.join(name);
        std::fs::create_dir(&p).unwrap();
        p
    };
    let empty = subdir("empty");
    let bad = subdir("bad");
    std::fs::write(bad.join("oci-layout"), r#"{"imageLayoutVersion":"2.0.0"}"#).unwrap();
    let file = root.join("file");
    std::fs::write(&file, b"x").unwrap();

    let l = Layout::create(&root.join("layout")).unwrap();
    let ambiguous_none = err(l.resolve(None));
    let (d, n) = l.write_blob(b"blob").unwrap();
    let desc = Descriptor::new(media_type::OCI_MANIFEST, d.clone(), n);
    l.set_tag("a", &desc).unwrap();
    l.set_tag("b", &desc).unwrap();
    let ambiguous_two = err(l.resolve(None));
    assert!(
        matches!(ambiguous_two, LayoutError::Ambiguous { count: 2, .. }),
        "{ambiguous_two}"
    );
    let size = err(l.verify_blob(&d, n + 1));
    let missing_blob = err(l.read_blob(&Digest::sha256(b"absent")));
    std::fs::write(l.blob_path(&d), b"tampered").unwrap();
    let mismatch = err(l.read_blob(&d));
    let not_a_dir = err(Layout::open(&file));
    assert!(
        matches!(&not_a_dir, LayoutError::Io { error, .. } if error.kind() == io::ErrorKind::NotADirectory),
        "{not_a_dir}"
    );
    let bad_index = Layout::create(&root.join("bad-index")).unwrap();
    std::fs::write(bad_index.dir().join("index.json"), b"{}").unwrap();

    check(vec![
        case(
            "missing",
            err(Layout::open(&root.join("none"))),
            "LayoutNotFound",
            Permanent,
        ),
        case(
            "no oci-layout",
            err(Layout::open(&empty)),
            "InvalidLayout",
            Permanent,
        ),
        case(
            "bad oci-layout",
            err(Layout::open(&bad)),
            "InvalidLayout",
            Permanent,
        ),
        case(
            "bad index",
            err(bad_index.index()),
            "InvalidLayout",
            Permanent,
        ),
        case("blob", missing_blob, "BlobNotFound", Permanent),
        case("digest", mismatch, "DigestMismatch", Permanent),
        case("size", size, "SizeMismatch", Permanent),
        case("tag", err(l.resolve(Some("c"))), "ImageNotFound", Permanent),
        case("empty index", ambiguous_none, "ImageNotFound", Permanent),
        case(
            "two manifests",
            ambiguous_two,
            "AmbiguousImageReference",
            Permanent,
        ),
        case(
            "empty tag",
            err(l.set_tag("", &desc)),
            "InvalidImageReference",
            Permanent,
        ),
        case("not a directory", not_a_dir, "LayoutIOError", Permanent),
        case(
            "disk full",
            io_error(root, io::ErrorKind::StorageFull),
            "LayoutIOError",
            Transient,
        ),
        case(
            "interrupted",
            io_error(root, io::ErrorKind::Interrupted),
            "LayoutIOError",
            Transient,
        ),
        case(
            "permission",
            io_error(root, io::ErrorKind::PermissionDenied),
            "LayoutIOError",
            Permanent,
        ),
    ]);
}

#[test]
fn auth_errors() {
    let t = tempfile::tempdir().unwrap();
    let bad = t.path().join("bad.json");
    std::fs::write(&bad, br#"{"auths": {"quay.io": {"auth": "!"}}}"#).unwrap();
    let in_file = err(Credentials::load(std::slice::from_ref(&bad)));
    assert!(matches!(in_file, AuthError::File { .. }), "{in_file}");
    let not_a_file = err(Credentials::load(&[t.path().to_path_buf()]));
    assert!(matches!(not_a_file, AuthError::Read { .. }), "{not_a_file}");
    let syntax = err(machineos_image::AuthFile::parse(b"{"));
    assert!(matches!(syntax, AuthError::Syntax(_)), "{syntax}");
    check(vec![
        case("syntax", syntax, "InvalidAuthFile", Permanent),
        case(
            "invalid",
            err(machineos_image::AuthFile::parse(b"[]")),
            "InvalidAuthFile",
            Permanent,
        ),
        case("in a file", in_file, "InvalidAuthFile", Permanent),
        case("not a file", not_a_file, "AuthFileIOError", Permanent),
        case(
            "timed out",
            AuthError::Read {
                path: bad.clone(),
                error: io::Error::from(io::ErrorKind::TimedOut),
            },
            "AuthFileIOError",
            Transient,
        ),
    ]);
}
