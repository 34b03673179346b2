//! The cluster's sources, as the API serves them (JSON, or `kubectl get -o yaml`):
//!
//! - **`OSImageStream`** (`machineconfiguration.openshift.io/v1alpha1`, the singleton
//!   `cluster`, FeatureGate `OSStreams`): `status.availableStreams[{name, osImage,
//!   osExtensionsImage}]`, each image by digest and, in a multi-arch payload, a manifest
//!   list — so every stream is [`StreamImages::AnyArch`]. The earlier API spellings
//!   `osImageUrl`/`osExtensionsImageUrl` (and `…URL`) are read too. The default stream is
//!   `status.defaultStream` (what the MCO resolved), else `spec.defaultStream`, else the only
//!   stream.
//! - **the `machine-config-osimageurl` ConfigMap** (`openshift-machine-config-operator`):
//!   `data.baseOSContainerImage` (the payload's `rhel-coreos`), else the legacy
//!   `data.osImageURL`; `data.baseOSExtensionsContainerImage` (`rhel-coreos-extensions`,
//!   absent for FCOS-based builds). One stream, named after the ConfigMap, valid for every
//!   architecture the image's index covers.
//! - a ConfigMap whose `data.stream` holds CoreOS stream metadata (`coreos-bootimages`) is
//!   read as that metadata.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{StreamError, typed};
use crate::{ArchImages, Format, Stream, StreamImages, Streams};

/// The ConfigMap the MCO's payload images are published in.
pub const OSIMAGEURL_CONFIG_MAP: &str = "machine-config-osimageurl";

/// `data` keys of [`OSIMAGEURL_CONFIG_MAP`].
pub mod keys {
    /// The base OS container image (payload tag `rhel-coreos`).
    pub const BASE_OS_CONTAINER_IMAGE: &str = "baseOSContainerImage";
    /// The extensions container image (payload tag `rhel-coreos-extensions`).
    pub const BASE_OS_EXTENSIONS_CONTAINER_IMAGE: &str = "baseOSExtensionsContainerImage";
    /// The legacy (≤ 4.10 machine-os-content) OS image slot, usually empty.
    pub const OS_IMAGE_URL: &str = "osImageURL";
    /// The release version the images belong to.
    pub const RELEASE_VERSION: &str = "releaseVersion";
}

const OSIS: &str = "OSImageStream";
const CM: &str = "ConfigMap";

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
struct OsImageStreamDoc {
    #[serde(default)]
    spec: Option<DefaultOnly>,
    #[serde(default)]
    status: Option<OsImageStreamStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefaultOnly {
    #[serde(default)]
    default_stream: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OsImageStreamStatus {
    #[serde(default)]
    available_streams: Vec<StreamSet>,
    #[serde(default)]
    default_stream: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamSet {
    name: String,
    #[serde(default, alias = "osImageUrl", alias = "osImageURL")]
    os_image: Option<String>,
    #[serde(
        default,
        alias = "osExtensionsImageUrl",
        alias = "osExtensionsImageURL"
    )]
    os_extensions_image: Option<String>,
}

#[derive(Deserialize)]
struct ConfigMapDoc {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    data: BTreeMap<String, String>,
}

fn non_empty(s: Option<&String>) -> Option<String> {
    s.map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// An `OSImageStream` object (JSON value) as streams. `source_name` names it in errors
/// (`OSImageStream cluster`, a file).
pub fn from_os_image_stream(source_name: &str, value: &Value) -> Result<Streams, StreamError> {
    let doc: OsImageStreamDoc = typed(source_name, OSIS, "$", value)?;
    let status = doc.status.ok_or_else(|| StreamError::Empty {
        source_name: source_name.to_owned(),
        message: "no status.availableStreams (the MCO has not reconciled the OSImageStream yet)"
            .to_owned(),
    })?;
    if status.available_streams.is_empty() {
        return Err(StreamError::Empty {
            source_name: source_name.to_owned(),
            message: "status.availableStreams is empty".to_owned(),
        });
    }
    let mut streams: Vec<Stream> = Vec::new();
    for (i, s) in status.available_streams.iter().enumerate() {
        let at = format!("$.status.availableStreams[{i}]");
        let malformed = |path: String, message: String| StreamError::Malformed {
            source_name: source_name.to_owned(),
            format: OSIS,
            path,
            message,
        };
        if s.name.trim().is_empty() {
            return Err(malformed(format!("{at}.name"), "empty".to_owned()));
        }
        if streams.iter().any(|o| o.name == s.name) {
            return Err(malformed(
                format!("{at}.name"),
                format!("stream {:?} is listed twice", s.name),
            ));
        }
        let os_image = non_empty(s.os_image.as_ref())
            .ok_or_else(|| malformed(format!("{at}.osImage"), "missing or empty".to_owned()))?;
        streams.push(Stream {
            name: s.name.clone(),
            images: StreamImages::AnyArch(ArchImages {
                os_image,
                extensions_image: non_empty(s.os_extensions_image.as_ref()),
            }),
        });
    }
    let default_stream = non_empty(status.default_stream.as_ref())
        .or_else(|| doc.spec.and_then(|s| non_empty(s.default_stream.as_ref())));
    Ok(Streams {
        source_name: source_name.to_owned(),
        format: Format::OsImageStream,
        streams,
        default_stream,
    })
}

/// The `machine-config-osimageurl` ConfigMap's `data` as one stream named
/// [`OSIMAGEURL_CONFIG_MAP`], valid for any architecture. `source_name` names it in errors
/// (`ConfigMap openshift-machine-config-operator/machine-config-osimageurl`).
pub fn from_config_map(
    source_name: &str,
    data: &BTreeMap<String, String>,
) -> Result<Streams, StreamError> {
    config_map_stream(source_name, OSIMAGEURL_CONFIG_MAP, data)
}

fn config_map_stream(
    source_name: &str,
    name: &str,
    data: &BTreeMap<String, String>,
) -> Result<Streams, StreamError> {
    let os_image = non_empty(data.get(keys::BASE_OS_CONTAINER_IMAGE))
        .or_else(|| non_empty(data.get(keys::OS_IMAGE_URL)))
        .ok_or_else(|| StreamError::NoOsImage {
            source_name: source_name.to_owned(),
            stream: name.to_owned(),
            arch: "any".to_owned(),
            looked_for: format!(
                "looked for data.{} and data.{}: both absent or empty",
                keys::BASE_OS_CONTAINER_IMAGE,
                keys::OS_IMAGE_URL
            ),
        })?;
    Ok(Streams {
        source_name: source_name.to_owned(),
        format: Format::OsImageUrlConfigMap,
        default_stream: Some(name.to_owned()),
        streams: vec![Stream {
            name: name.to_owned(),
            images: StreamImages::AnyArch(ArchImages {
                os_image,
                extensions_image: non_empty(data.get(keys::BASE_OS_EXTENSIONS_CONTAINER_IMAGE)),
            }),
        }],
    })
}

/// A whole ConfigMap object: the osimageurl kind, or `data.stream` stream metadata.
pub(crate) fn read_config_map(source_name: &str, value: &Value) -> Result<Streams, StreamError> {
    let doc: ConfigMapDoc = typed(source_name, CM, "$", value)?;
    let shown = match (&doc.metadata.namespace, &doc.metadata.name) {
        (Some(ns), Some(n)) => format!("{source_name} (ConfigMap {ns}/{n})"),
        (None, Some(n)) => format!("{source_name} (ConfigMap {n})"),
        _ => source_name.to_owned(),
    };
    let has_images = [keys::BASE_OS_CONTAINER_IMAGE, keys::OS_IMAGE_URL]
        .iter()
        .any(|k| doc.data.contains_key(*k));
    if let (false, Some(stream)) = (has_images, doc.data.get("stream")) {
        let inner: Value = serde_json::from_str(stream).map_err(|e| StreamError::Malformed {
            source_name: shown.clone(),
            format: "CoreOS stream metadata",
            path: "$.data.stream".to_owned(),
            message: format!("not JSON: {e}"),
        })?;
        return crate::coreos::read(&shown, "$.data.stream", &inner);
    }
    let name = doc
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| OSIMAGEURL_CONFIG_MAP.to_owned());
    config_map_stream(&shown, &name, &doc.data)
}

/// A bare `data` map (`kubectl get cm … -o jsonpath='{.data}'`).
pub(crate) fn read_data(source_name: &str, value: &Value) -> Result<Streams, StreamError> {
    let data: BTreeMap<String, String> = typed(source_name, CM, "$", value)?;
    from_config_map(source_name, &data)
}
