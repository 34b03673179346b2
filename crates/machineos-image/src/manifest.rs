//! Image manifests and indexes (OCI and Docker schema2): parsing a registry response into the
//! right kind, choosing a platform out of an index, and deriving a layered image's manifest from
//! its base without losing fields machineos does not model.

use std::collections::BTreeMap;

use machineos_diagnostics::{Classify, Retry};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::descriptor::{Descriptor, LayerCompression, media_type};
use crate::platform::Platform;

/// Why a manifest or index could not be parsed, selected from or derived.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The body is not JSON of the expected shape; `path` is the JSON path of the problem.
    #[error("parsing {what}: at {path}: {error}")]
    Json {
        /// What was being parsed (`image manifest`, `image index`, `manifest`).
        what: &'static str,
        /// JSON path of the offending value.
        path: String,
        /// The underlying error.
        error: serde_json::Error,
    },
    /// A Docker schema1 manifest, which machineos does not support.
    #[error(
        "parsing manifest: Docker schema1 manifests are not supported (media type {0:?}); push the base image with a schema2 or OCI manifest"
    )]
    Schema1(String),
    /// The body's `mediaType` (or the Content-Type) is neither a manifest nor an index.
    #[error("parsing manifest: media type {0:?} is not an image manifest or index")]
    UnsupportedMediaType(String),
    /// No `mediaType`, no decisive Content-Type, and neither `manifests` nor `layers`.
    #[error(
        "parsing manifest: cannot tell whether it is an image manifest or an index (no mediaType, no recognised Content-Type, neither $.manifests nor $.layers)"
    )]
    UnknownKind,
    /// A layer descriptor's media type is not a known layer type.
    #[error("reading layer media type {0:?}: not a known OCI or Docker layer type")]
    UnknownLayerMediaType(String),
    /// A manifest media type cannot carry a layer with this compression.
    #[error(
        "choosing a layer media type for a {manifest:?} manifest: {compression:?} layers are not supported"
    )]
    UnsupportedLayerCompression {
        /// The manifest media type.
        manifest: String,
        /// The requested compression.
        compression: LayerCompression,
    },
    /// No index entry matches the wanted platform.
    #[error("selecting platform {want} from image index: no match; available: {available}")]
    NoMatchingPlatform {
        /// The wanted platform.
        want: Platform,
        /// The platforms present, comma separated (`none` when empty).
        available: String,
    },
    /// The base manifest is missing a field or has one of the wrong type.
    #[error("deriving manifest from base: {path}: {problem}")]
    BadBase {
        /// JSON path in the base manifest.
        path: &'static str,
        /// What is wrong there.
        problem: &'static str,
    },
}

impl Classify for ManifestError {
    /// `InvalidManifest` for a manifest that is malformed, `UnsupportedMediaType` for one
    /// (or a layer) of a kind machineos does not handle, `NoMatchingPlatform` for an index
    /// without the wanted platform.
    fn reason(&self) -> &'static str {
        match self {
            ManifestError::Json { .. }
            | ManifestError::UnknownKind
            | ManifestError::BadBase { .. } => "InvalidManifest",
            ManifestError::Schema1(_)
            | ManifestError::UnsupportedMediaType(_)
            | ManifestError::UnknownLayerMediaType(_)
            | ManifestError::UnsupportedLayerCompression { .. } => "UnsupportedMediaType",
            ManifestError::NoMatchingPlatform { .. } => "NoMatchingPlatform",
        }
    }

    /// Always permanent: the image (or the wanted platform) must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// An image manifest (OCI or Docker schema2), as on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest's own media type, if stated in the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The image config blob.
    pub config: Descriptor,
    /// The layers, base first.
    pub layers: Vec<Descriptor>,
    /// Manifest annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An image index (OCI) or manifest list (Docker), as on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageIndex {
    /// Always 2.
    pub schema_version: u32,
    /// The index's own media type, if stated in the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The referenced manifests.
    pub manifests: Vec<Descriptor>,
    /// Index annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ImageIndex {
    /// An empty OCI index.
    pub fn empty() -> ImageIndex {
        ImageIndex {
            schema_version: 2,
            media_type: Some(media_type::OCI_INDEX.to_owned()),
            manifests: Vec::new(),
            annotations: BTreeMap::new(),
        }
    }

    /// The first entry whose platform matches `want` (containerd normalisation).
    pub fn select(&self, want: &Platform) -> Result<&Descriptor, ManifestError> {
        if let Some(d) = self
            .manifests
            .iter()
            .find(|d| d.platform.as_ref().is_some_and(|p| p.matches(want)))
        {
            return Ok(d);
        }
        let available: Vec<String> = self
            .manifests
            .iter()
            .filter_map(|d| d.platform.as_ref().map(|p| p.to_string()))
            .collect();
        Err(ManifestError::NoMatchingPlatform {
            want: want.clone(),
            available: if available.is_empty() {
                "none".to_owned()
            } else {
                available.join(", ")
            },
        })
    }
}

/// A parsed manifest: either a single image or an index of images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    /// A single-platform image manifest.
    Image(ImageManifest),
    /// A multi-platform index or manifest list.
    Index(ImageIndex),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    schema_version: Option<u64>,
    media_type: Option<String>,
    manifests: Option<IgnoredAny>,
    layers: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Image,
    Index,
}

fn kind_of_media_type(mt: &str) -> Result<Option<Kind>, ManifestError> {
    if media_type::is_index(mt) {
        Ok(Some(Kind::Index))
    } else if media_type::is_image_manifest(mt) {
        Ok(Some(Kind::Image))
    } else if media_type::is_schema1(mt) {
        Err(ManifestError::Schema1(mt.to_owned()))
    } else {
        Ok(None)
    }
}

fn from_json<'a, T: Deserialize<'a>>(
    what: &'static str,
    bytes: &'a [u8],
) -> Result<T, ManifestError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| ManifestError::Json {
        what,
        path: json_path(e.path()),
        error: e.into_inner(),
    })
}

/// Render a serde_path_to_error path as `$`, `$.a.b[0]`.
pub(crate) fn json_path(path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." {
        "$".to_owned()
    } else {
        format!("$.{p}")
    }
}

/// Parse a manifest or index. The kind is decided by the body's `mediaType`, else by
/// `content_type` (parameters such as `; charset=utf-8` are ignored, unrecognised types fall
/// through), else by whether the body has `manifests` (index) or `layers` (image).
/// Docker schema1 is rejected with a clear error.
pub fn parse_manifest(bytes: &[u8], content_type: Option<&str>) -> Result<Manifest, ManifestError> {
    let probe: Probe = from_json("manifest", bytes)?;
    if probe.schema_version == Some(1) {
        return Err(ManifestError::Schema1(
            probe
                .media_type
                .unwrap_or_else(|| media_type::DOCKER_SCHEMA1.to_owned()),
        ));
    }
    let kind = if let Some(mt) = probe.media_type.as_deref() {
        kind_of_media_type(mt)?.ok_or_else(|| ManifestError::UnsupportedMediaType(mt.to_owned()))?
    } else {
        let from_header = match content_type {
            Some(ct) => kind_of_media_type(ct.split(';').next().unwrap_or("").trim())?,
            None => None,
        };
        match (
            from_header,
            probe.manifests.is_some(),
            probe.layers.is_some(),
        ) {
            (Some(k), _, _) => k,
            (None, true, false) => Kind::Index,
            (None, false, true) => Kind::Image,
            _ => return Err(ManifestError::UnknownKind),
        }
    };
    Ok(match kind {
        Kind::Image => Manifest::Image(from_json("image manifest", bytes)?),
        Kind::Index => Manifest::Index(from_json("image index", bytes)?),
    })
}

/// The layer media type to use for a layer with `compression` in a manifest of type
/// `manifest_media_type`: Docker schema2 manifests get
/// `application/vnd.docker.image.rootfs.diff.tar.gzip` (and support only gzip), OCI manifests
/// get `application/vnd.oci.image.layer.v1.tar[+gzip|+zstd]`.
pub fn layer_media_type_for(
    manifest_media_type: &str,
    compression: LayerCompression,
) -> Result<&'static str, ManifestError> {
    let unsupported = || ManifestError::UnsupportedLayerCompression {
        manifest: manifest_media_type.to_owned(),
        compression,
    };
    match manifest_media_type {
        media_type::DOCKER_MANIFEST => match compression {
            LayerCompression::Gzip => Ok(media_type::DOCKER_LAYER_GZIP),
            LayerCompression::None | LayerCompression::Zstd => Err(unsupported()),
        },
        media_type::OCI_MANIFEST => Ok(match compression {
            LayerCompression::None => media_type::OCI_LAYER_TAR,
            LayerCompression::Gzip => media_type::OCI_LAYER_GZIP,
            LayerCompression::Zstd => media_type::OCI_LAYER_ZSTD,
        }),
        _ => Err(unsupported()),
    }
}

fn descriptor_value(d: &Descriptor) -> Value {
    // A Descriptor always serialises (strings, numbers and maps of strings only).
    serde_json::to_value(d).unwrap_or(Value::Null)
}

/// Derive the manifest of a layered image from its base image manifest: `config` replaces the
/// base's config descriptor (the base config's `mediaType` is kept, so a Docker image keeps a
/// Docker config type), and `added_layer` is appended to `layers`. Everything else — the
/// manifest's `mediaType`, annotations, unknown fields, field order — is kept as is. The output
/// is compact JSON and deterministic for the same inputs.
pub fn derive_manifest(
    base_manifest: &[u8],
    config: &Descriptor,
    added_layer: &Descriptor,
) -> Result<Vec<u8>, ManifestError> {
    let mut root: Value = from_json("base image manifest", base_manifest)?;
    let obj = root.as_object_mut().ok_or(ManifestError::BadBase {
        path: "$",
        problem: "not a JSON object",
    })?;
    if obj.contains_key("manifests") {
        return Err(ManifestError::BadBase {
            path: "$.manifests",
            problem: "base is an image index, not an image manifest; select a platform first",
        });
    }

    let base_config = obj.get("config").ok_or(ManifestError::BadBase {
        path: "$.config",
        problem: "missing",
    })?;
    let base_config = base_config.as_object().ok_or(ManifestError::BadBase {
        path: "$.config",
        problem: "not an object",
    })?;
    let base_config_type = match base_config.get("mediaType") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(ManifestError::BadBase {
                path: "$.config.mediaType",
                problem: "not a string",
            });
        }
    };
    let mut new_config = descriptor_value(config);
    if let (Some(mt), Some(o)) = (base_config_type, new_config.as_object_mut()) {
        o.insert("mediaType".to_owned(), Value::String(mt));
    }
    obj.insert("config".to_owned(), new_config);

    let layers = obj
        .get_mut("layers")
        .ok_or(ManifestError::BadBase {
            path: "$.layers",
            problem: "missing",
        })?
        .as_array_mut()
        .ok_or(ManifestError::BadBase {
            path: "$.layers",
            problem: "not an array",
        })?;
    layers.push(descriptor_value(added_layer));

    serde_json::to_vec(&root).map_err(|error| ManifestError::Json {
        what: "derived image manifest",
        path: "$".to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    fn d(n: u8) -> Digest {
        Digest::from_sha256_bytes([n; 32])
    }

    fn oci_manifest() -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{}","config":{{"mediaType":"{}","digest":"{}","size":10}},"layers":[{{"mediaType":"{}","digest":"{}","size":20}}],"annotations":{{"org.opencontainers.image.base.name":"x"}},"x-unknown":{{"keep":true}}}}"#,
            media_type::OCI_MANIFEST,
            media_type::OCI_CONFIG,
            d(1),
            media_type::OCI_LAYER_GZIP,
            d(2)
        )
    }

    fn docker_manifest() -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{}","config":{{"mediaType":"{}","digest":"{}","size":10}},"layers":[{{"mediaType":"{}","digest":"{}","size":20}}]}}"#,
            media_type::DOCKER_MANIFEST,
            media_type::DOCKER_CONFIG,
            d(1),
            media_type::DOCKER_LAYER_GZIP,
            d(2)
        )
    }

    fn index_no_media_type() -> String {
        format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"{m}","digest":"{}","size":1,"platform":{{"os":"linux","architecture":"amd64"}}}},{{"mediaType":"{m}","digest":"{}","size":1,"platform":{{"os":"linux","architecture":"arm64","variant":"v8"}}}}]}}"#,
            d(3),
            d(4),
            m = media_type::OCI_MANIFEST,
        )
    }

    #[test]
    fn parse_kind_table() {
        let layers_only = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{}","digest":"{}","size":1}},"layers":[]}}"#,
            media_type::OCI_CONFIG,
            d(1)
        );
        let cases: Vec<(String, Option<&str>, Result<Kind, &str>)> = vec![
            (oci_manifest(), None, Ok(Kind::Image)),
            (oci_manifest(), Some(media_type::OCI_INDEX), Ok(Kind::Image)),
            (docker_manifest(), None, Ok(Kind::Image)),
            (index_no_media_type(), None, Ok(Kind::Index)),
            (
                index_no_media_type(),
                Some("application/vnd.oci.image.index.v1+json; charset=utf-8"),
                Ok(Kind::Index),
            ),
            (layers_only.clone(), None, Ok(Kind::Image)),
            (layers_only, Some("application/json"), Ok(Kind::Image)),
            (
                r#"{"schemaVersion":1,"name":"x","fsLayers":[]}"#.to_owned(),
                None,
                Err("schema1"),
            ),
            (
                r#"{"schemaVersion":2}"#.to_owned(),
                Some(media_type::DOCKER_SCHEMA1_SIGNED),
                Err("schema1"),
            ),
            (
                r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.artifact.manifest.v1+json"}"#
                    .to_owned(),
                None,
                Err("is not an image manifest or index"),
            ),
            (r#"{"schemaVersion":2}"#.to_owned(), None, Err("cannot tell")),
            ("[1]".to_owned(), None, Err("parsing manifest")),
            (
                format!(r#"{{"schemaVersion":2,"mediaType":"{}","manifests":[{{"mediaType":"x","digest":"sha256:bad","size":1}}]}}"#, media_type::OCI_INDEX),
                None,
                Err("$.manifests[0].digest"),
            ),
        ];
        for (body, ct, want) in cases {
            let got = parse_manifest(body.as_bytes(), ct);
            match (got, want) {
                (Ok(Manifest::Image(_)), Ok(Kind::Image))
                | (Ok(Manifest::Index(_)), Ok(Kind::Index)) => {}
                (Err(e), Err(needle)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(needle), "{body}: {msg}");
                }
                (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn select_platform() {
        let Manifest::Index(idx) = parse_manifest(index_no_media_type().as_bytes(), None).unwrap()
        else {
            panic!("not an index")
        };
        let cases = [
            ("linux/amd64", Ok(d(3))),
            ("linux/arm64", Ok(d(4))),
            ("linux/aarch64/v8", Ok(d(4))),
            ("linux/s390x", Err("linux/amd64, linux/arm64/v8")),
        ];
        for (want, expect) in cases {
            let got = idx.select(&want.parse().unwrap());
            match expect {
                Ok(digest) => assert_eq!(got.unwrap().digest, digest, "{want}"),
                Err(needle) => {
                    let msg = got.unwrap_err().to_string();
                    assert!(msg.contains(needle) && msg.contains(want), "{msg}");
                }
            }
        }
    }

    #[test]
    fn derive_keeps_unknowns_and_family() {
        let cfg = Descriptor::new(media_type::OCI_CONFIG, d(9), 99);
        let layer = Descriptor::new(media_type::OCI_LAYER_GZIP, d(8), 88);
        let out = derive_manifest(oci_manifest().as_bytes(), &cfg, &layer).unwrap();
        let again = derive_manifest(oci_manifest().as_bytes(), &cfg, &layer).unwrap();
        assert_eq!(out, again);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["x-unknown"]["keep"], true);
        assert_eq!(v["annotations"]["org.opencontainers.image.base.name"], "x");
        assert_eq!(v["config"]["digest"], d(9).as_str());
        assert_eq!(v["config"]["size"], 99);
        assert_eq!(v["layers"].as_array().unwrap().len(), 2);
        assert_eq!(v["layers"][1]["digest"], d(8).as_str());
        assert!(!String::from_utf8(out).unwrap().contains(' '));

        // A Docker base keeps its Docker config media type.
        let docker_layer = Descriptor::new(
            layer_media_type_for(media_type::DOCKER_MANIFEST, LayerCompression::Gzip).unwrap(),
            d(8),
            88,
        );
        let out = derive_manifest(docker_manifest().as_bytes(), &cfg, &docker_layer).unwrap();
        let parsed = parse_manifest(&out, None).unwrap();
        let Manifest::Image(m) = parsed else {
            panic!("not an image")
        };
        assert_eq!(m.config.media_type, media_type::DOCKER_CONFIG);
        assert_eq!(m.layers[1].media_type, media_type::DOCKER_LAYER_GZIP);
    }

    #[test]
    fn derive_errors_table() {
        let cfg = Descriptor::new(media_type::OCI_CONFIG, d(9), 99);
        let cases = [
            ("[]", "$: not a JSON object"),
            (r#"{"layers":[]}"#, "$.config: missing"),
            (r#"{"config":1,"layers":[]}"#, "$.config: not an object"),
            (r#"{"config":{}}"#, "$.layers: missing"),
            (r#"{"config":{},"layers":{}}"#, "$.layers: not an array"),
            (r#"{"manifests":[]}"#, "$.manifests"),
            ("{", "parsing base image manifest"),
        ];
        for (base, needle) in cases {
            let msg = derive_manifest(base.as_bytes(), &cfg, &cfg)
                .unwrap_err()
                .to_string();
            assert!(msg.contains(needle), "{base}: {msg}");
        }
    }

    #[test]
    fn layer_media_type_table() {
        use LayerCompression::*;
        let cases = [
            (
                media_type::DOCKER_MANIFEST,
                Gzip,
                Some(media_type::DOCKER_LAYER_GZIP),
            ),
            (media_type::DOCKER_MANIFEST, Zstd, Option::None),
            (
                media_type::OCI_MANIFEST,
                Gzip,
                Some(media_type::OCI_LAYER_GZIP),
            ),
            (
                media_type::OCI_MANIFEST,
                Zstd,
                Some(media_type::OCI_LAYER_ZSTD),
            ),
            (
                media_type::OCI_MANIFEST,
                None,
                Some(media_type::OCI_LAYER_TAR),
            ),
            (media_type::OCI_INDEX, Gzip, Option::None),
        ];
        for (mt, c, want) in cases {
            match (layer_media_type_for(mt, c), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{mt} {c:?}"),
                (
                    Err(ManifestError::UnsupportedLayerCompression {
                        manifest,
                        compression,
                    }),
                    Option::None,
                ) => assert_eq!((manifest.as_str(), compression), (mt, c)),
                (got, want) => panic!("{mt} {c:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
