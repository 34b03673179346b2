//! OCI content descriptors and the media types machineos reads and writes, so blob references
//! in manifests, indexes and layouts share one typed representation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::manifest::ManifestError;
use crate::platform::Platform;

/// Media type strings for OCI and Docker schema2 manifests, indexes, configs and layers.
pub mod media_type {
    /// OCI image manifest.
    pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// OCI image index.
    pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
    /// OCI image config.
    pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
    /// OCI uncompressed layer tarball.
    pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
    /// OCI gzip-compressed layer tarball.
    pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
    /// OCI zstd-compressed layer tarball.
    pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
    /// Docker schema2 image manifest.
    pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
    /// Docker schema2 manifest list.
    pub const DOCKER_MANIFEST_LIST: &str =
        "application/vnd.docker.distribution.manifest.list.v2+json";
    /// Docker schema2 image config.
    pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
    /// Docker schema2 gzip-compressed layer tarball.
    pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
    /// Docker schema2 "foreign" (non-distributable) gzip layer.
    pub const DOCKER_FOREIGN_LAYER_GZIP: &str =
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
    /// Docker schema1 manifest (unsupported; recognised to give a clear error).
    pub const DOCKER_SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1+json";
    /// Signed Docker schema1 manifest (unsupported; recognised to give a clear error).
    pub const DOCKER_SCHEMA1_SIGNED: &str =
        "application/vnd.docker.distribution.manifest.v1+prettyjws";

    /// Whether `media_type` is an OCI index or a Docker manifest list.
    pub fn is_index(media_type: &str) -> bool {
        matches!(media_type, OCI_INDEX | DOCKER_MANIFEST_LIST)
    }

    /// Whether `media_type` is an OCI or Docker schema2 image manifest.
    pub fn is_image_manifest(media_type: &str) -> bool {
        matches!(media_type, OCI_MANIFEST | DOCKER_MANIFEST)
    }

    /// Whether `media_type` is a Docker schema1 manifest.
    pub fn is_schema1(media_type: &str) -> bool {
        matches!(media_type, DOCKER_SCHEMA1 | DOCKER_SCHEMA1_SIGNED)
    }

    /// Whether `media_type` belongs to the Docker family (as opposed to OCI).
    pub fn is_docker(media_type: &str) -> bool {
        media_type.starts_with("application/vnd.docker.")
    }
}

/// How a layer blob is compressed, as told by its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerCompression {
    /// A plain tarball.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

impl LayerCompression {
    /// The compression of a layer with media type `media_type`; an error for anything that
    /// is not a known layer media type.
    pub fn from_media_type(media_type: &str) -> Result<LayerCompression, ManifestError> {
        use media_type::*;
        match media_type {
            OCI_LAYER_TAR | "application/vnd.oci.image.layer.nondistributable.v1.tar" => {
                Ok(LayerCompression::None)
            }
            OCI_LAYER_GZIP
            | DOCKER_LAYER_GZIP
            | DOCKER_FOREIGN_LAYER_GZIP
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip" => {
                Ok(LayerCompression::Gzip)
            }
            OCI_LAYER_ZSTD | "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd" => {
                Ok(LayerCompression::Zstd)
            }
            other => Err(ManifestError::UnknownLayerMediaType(other.to_owned())),
        }
    }
}

/// An OCI content descriptor: what a blob is, its digest and size, and optional metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The referenced content's media type.
    pub media_type: String,
    /// The referenced content's digest.
    pub digest: Digest,
    /// The referenced content's size in bytes.
    pub size: u64,
    /// The platform an index entry is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Arbitrary annotations (for example `org.opencontainers.image.ref.name`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Alternate download locations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
}

impl Descriptor {
    /// A descriptor with no platform, annotations or URLs.
    pub fn new(media_type: &str, digest: Digest, size: u64) -> Descriptor {
        Descriptor {
            media_type: media_type.to_owned(),
            digest,
            size,
            platform: None,
            annotations: BTreeMap::new(),
            urls: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_table() {
        let cases = [
            (media_type::OCI_LAYER_TAR, Some(LayerCompression::None)),
            (media_type::OCI_LAYER_GZIP, Some(LayerCompression::Gzip)),
            (media_type::OCI_LAYER_ZSTD, Some(LayerCompression::Zstd)),
            (media_type::DOCKER_LAYER_GZIP, Some(LayerCompression::Gzip)),
            (media_type::OCI_CONFIG, None),
            ("text/plain", None),
        ];
        for (mt, want) in cases {
            match (LayerCompression::from_media_type(mt), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{mt}"),
                (Err(ManifestError::UnknownLayerMediaType(got)), None) => assert_eq!(got, mt),
                (got, want) => panic!("{mt}: got {got:?}, want {want:?}"),
            }
        }
        let err = LayerCompression::from_media_type("text/plain")
            .unwrap_err()
            .to_string();
        assert!(err.contains("text/plain"), "{err}");
    }

    #[test]
    fn kind_helpers() {
        assert!(media_type::is_index(media_type::OCI_INDEX));
        assert!(media_type::is_index(media_type::DOCKER_MANIFEST_LIST));
        assert!(!media_type::is_index(media_type::OCI_MANIFEST));
        assert!(media_type::is_image_manifest(media_type::DOCKER_MANIFEST));
        assert!(media_type::is_image_manifest(media_type::OCI_MANIFEST));
        assert!(!media_type::is_image_manifest(media_type::OCI_INDEX));
    }

    #[test]
    fn serde_round_trip() {
        let json = r#"{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":7,"platform":{"os":"linux","architecture":"amd64"},"annotations":{"a":"b"}}"#;
        let d: Descriptor = serde_json::from_str(json).unwrap();
        assert_eq!(d.size, 7);
        assert_eq!(serde_json::to_string(&d).unwrap(), json);
        let bare = Descriptor::new(media_type::OCI_CONFIG, Digest::sha256(b""), 0);
        let s = serde_json::to_string(&bare).unwrap();
        assert!(!s.contains("annotations") && !s.contains("urls") && !s.contains("platform"));
    }
}
