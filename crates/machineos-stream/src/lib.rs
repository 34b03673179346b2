//! Which base OS image (and extensions image) to build on, per architecture, from the
//! sources CoreOS variants and OpenShift publish — variant-neutral: Fedora CoreOS, RHEL
//! CoreOS, CentOS Stream CoreOS and any derivative that writes the same shapes.
//!
//! **Sources** (each read from bytes or an API object's JSON value; see the modules):
//! - CoreOS stream (and release) metadata — `stream`, `architectures.<arch>.oci-image` —
//!   per architecture ([`coreos`]);
//! - the MCO's `OSImageStream` — several named streams, a default — and the
//!   `machine-config-osimageurl` ConfigMap — one stream — whose images are multi-arch
//!   references, valid for every architecture their index covers ([`k8s`]).
//!
//! [`parse`] tells the kinds apart by shape ([`detect`]): JSON or YAML (`kubectl get -o
//! yaml`), a `kind` of `OSImageStream` or `ConfigMap`, a top-level `architectures`, a
//! `status.availableStreams`, or a bare ConfigMap `data` map. All of them land in one model,
//! [`Streams`]: named [`Stream`]s whose images are [`StreamImages::PerArch`] or
//! [`StreamImages::AnyArch`]; [`Streams::select`] picks a stream (by name, else the default)
//! and an [`Arch`] and answers [`ArchImages`], or a [`StreamError`] that names the source
//! and says what is available (stream names, architectures) or which key was looked for.
//!
//! **Architecture names** are mapped in one place, [`arch`]: stream metadata's `x86_64`,
//! `aarch64` ↔ OCI's `amd64`, `arm64` (`ppc64le`, `s390x` alike both ways).
//!
//! Image references are returned as the source spells them, unparsed: the caller parses
//! them with its own reference rules (the CLI also accepts `oci:` layouts).
//!
//! Pure: no I/O. The CLI (`machineos build --stream`) and the controller call it.

pub mod arch;
pub mod coreos;
pub mod error;
pub mod k8s;

use std::collections::BTreeMap;

use serde_json::Value;

pub use arch::Arch;
pub use error::StreamError;
pub use k8s::{OSIMAGEURL_CONFIG_MAP, from_config_map, from_os_image_stream};

/// The kind of source a [`Streams`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CoreOS stream or release metadata (`stream`, `architectures`), possibly inside a
    /// ConfigMap's `data.stream`.
    CoreOsStreamMetadata,
    /// An `OSImageStream` object.
    OsImageStream,
    /// The `machine-config-osimageurl` ConfigMap (or its `data`).
    OsImageUrlConfigMap,
}

impl Format {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::CoreOsStreamMetadata => "CoreOS stream metadata",
            Format::OsImageStream => "OSImageStream",
            Format::OsImageUrlConfigMap => "machine-config-osimageurl ConfigMap",
        }
    }
}

/// The images to build from for one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchImages {
    /// The base OS container image, as the source spells it.
    pub os_image: String,
    /// The extensions container image, when the source names one.
    pub extensions_image: Option<String>,
}

/// One architecture's entry in a per-architecture stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchEntry {
    /// Its images.
    Images(ArchImages),
    /// The architecture is listed but names no OS container image.
    Missing {
        /// Which keys were looked for, and what was found instead, for the message.
        looked_for: String,
    },
}

/// A stream's images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamImages {
    /// One entry per architecture (CoreOS stream metadata).
    PerArch(BTreeMap<Arch, ArchEntry>),
    /// One pair of references for every architecture: multi-arch images whose index
    /// decides (OSImageStream, the osimageurl ConfigMap).
    AnyArch(ArchImages),
}

/// A named stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// Its name (`stable`, `rhcos-4.18`, `rhel-9`, `machine-config-osimageurl`).
    pub name: String,
    /// Its images.
    pub images: StreamImages,
}

/// The streams of one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streams {
    /// The source, for messages (a file, `OSImageStream cluster`).
    pub source_name: String,
    /// What kind of source it was.
    pub format: Format,
    /// Its streams, in the source's order.
    pub streams: Vec<Stream>,
    /// The stream used when none is named, if the source says (or has only one).
    pub default_stream: Option<String>,
}

impl Streams {
    /// The names of the streams, in order.
    pub fn names(&self) -> Vec<String> {
        self.streams.iter().map(|s| s.name.clone()).collect()
    }

    /// The stream named `name`, else the default one, else the only one.
    pub fn stream(&self, name: Option<&str>) -> Result<&Stream, StreamError> {
        let find = |wanted: &str| {
            self.streams
                .iter()
                .find(|s| s.name == wanted)
                .ok_or_else(|| StreamError::UnknownStream {
                    source_name: self.source_name.clone(),
                    wanted: wanted.to_owned(),
                    available: self.names(),
                })
        };
        match (name, &self.default_stream, self.streams.as_slice()) {
            (Some(n), _, _) => find(n),
            (None, Some(d), _) => find(d),
            (None, None, [only]) => Ok(only),
            (None, None, _) => Err(StreamError::NoDefaultStream {
                source_name: self.source_name.clone(),
                available: self.names(),
            }),
        }
    }

    /// The images of stream `name` (else the default stream) for `arch`.
    pub fn select(&self, name: Option<&str>, arch: &Arch) -> Result<ArchImages, StreamError> {
        let stream = self.stream(name)?;
        match &stream.images {
            StreamImages::AnyArch(images) => Ok(images.clone()),
            StreamImages::PerArch(map) => match map.get(arch) {
                Some(ArchEntry::Images(images)) => Ok(images.clone()),
                Some(ArchEntry::Missing { looked_for }) => Err(StreamError::NoOsImage {
                    source_name: self.source_name.clone(),
                    stream: stream.name.clone(),
                    arch: arch.describe(),
                    looked_for: looked_for.clone(),
                }),
                None => Err(StreamError::MissingArchitecture {
                    source_name: self.source_name.clone(),
                    stream: stream.name.clone(),
                    arch: arch.describe(),
                    offered: map.keys().map(Arch::describe).collect(),
                }),
            },
        }
    }
}

/// What kind of source `value` is, by its shape; `None` when it is none of them.
pub fn detect(value: &Value) -> Option<Format> {
    let obj = value.as_object()?;
    match obj.get("kind").and_then(Value::as_str) {
        Some("OSImageStream") => return Some(Format::OsImageStream),
        Some("ConfigMap") => {
            let data = obj.get("data").and_then(Value::as_object);
            return match data {
                Some(d) if d.contains_key("stream") && !has_image_keys(d) => {
                    Some(Format::CoreOsStreamMetadata)
                }
                _ => Some(Format::OsImageUrlConfigMap),
            };
        }
        Some(_) => return None,
        None => {}
    }
    if obj.contains_key("architectures") {
        Some(Format::CoreOsStreamMetadata)
    } else if obj
        .get("status")
        .and_then(Value::as_object)
        .is_some_and(|s| s.contains_key("availableStreams"))
    {
        Some(Format::OsImageStream)
    } else if has_image_keys(obj) {
        Some(Format::OsImageUrlConfigMap)
    } else {
        None
    }
}

fn has_image_keys(m: &serde_json::Map<String, Value>) -> bool {
    m.contains_key(k8s::keys::BASE_OS_CONTAINER_IMAGE) || m.contains_key(k8s::keys::OS_IMAGE_URL)
}

/// Read a stream source from a JSON value (an API object, a parsed file).
pub fn from_value(source_name: &str, value: &Value) -> Result<Streams, StreamError> {
    let is_config_map = value.get("kind").and_then(Value::as_str) == Some("ConfigMap");
    match detect(value) {
        Some(_) if is_config_map => k8s::read_config_map(source_name, value),
        Some(Format::CoreOsStreamMetadata) => coreos::read(source_name, "$", value),
        Some(Format::OsImageStream) => from_os_image_stream(source_name, value),
        Some(Format::OsImageUrlConfigMap) => k8s::read_data(source_name, value),
        None => Err(StreamError::UnknownFormat {
            source_name: source_name.to_owned(),
            found: describe(value),
        }),
    }
}

/// Read a stream source from a file's bytes, JSON or YAML; `source_name` names it in errors.
pub fn parse(bytes: &[u8], source_name: &str) -> Result<Streams, StreamError> {
    let syntax = |format: &'static str, message: String| StreamError::Malformed {
        source_name: source_name.to_owned(),
        format,
        path: "$".to_owned(),
        message,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| syntax("JSON", format!("not UTF-8: {e}")))?;
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.is_empty() {
        return Err(syntax("JSON", "empty".to_owned()));
    }
    let value: Value = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(trimmed).map_err(|e| syntax("JSON", e.to_string()))?
    } else {
        serde_saphyr::from_str(trimmed).map_err(|e| syntax("YAML", e.to_string()))?
    };
    from_value(source_name, &value)
}

/// What a value that is no stream source looks like, for [`StreamError::UnknownFormat`].
fn describe(value: &Value) -> String {
    match value {
        Value::Object(m) => match m.get("kind").and_then(Value::as_str) {
            Some(kind) => format!("kind {kind}"),
            None => {
                let keys: Vec<&str> = m.keys().map(String::as_str).take(8).collect();
                format!("an object with keys [{}]", keys.join(", "))
            }
        },
        Value::Array(_) => "a list".to_owned(),
        Value::String(_) => "a string".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Null => "null".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use machineos_diagnostics::{Retry, check_classified};
    use serde_json::json;

    use super::*;

    #[test]
    fn detect_by_shape() {
        let cases = [
            (
                json!({"stream": "s", "architectures": {}}),
                Some(Format::CoreOsStreamMetadata),
            ),
            (
                json!({"kind": "OSImageStream"}),
                Some(Format::OsImageStream),
            ),
            (
                json!({"status": {"availableStreams": []}}),
                Some(Format::OsImageStream),
            ),
            (
                json!({"kind": "ConfigMap", "data": {}}),
                Some(Format::OsImageUrlConfigMap),
            ),
            (
                json!({"kind": "ConfigMap", "data": {"stream": "{}"}}),
                Some(Format::CoreOsStreamMetadata),
            ),
            (
                json!({"baseOSContainerImage": "q.io/a@sha256:0"}),
                Some(Format::OsImageUrlConfigMap),
            ),
            (json!({"kind": "Secret", "architectures": {}}), None),
            (json!({"spec": {}}), None),
            (json!([1]), None),
        ];
        for (v, want) in cases {
            assert_eq!(detect(&v), want, "{v}");
        }
    }

    #[test]
    fn an_unknown_document_says_what_was_found() {
        let e = parse(b"kind: Secret\ndata: {}\n", "s.yaml").unwrap_err();
        assert!(e.to_string().contains("found kind Secret"), "{e}");
        check_classified(&e, "UnknownOSStreamFormat", Retry::Permanent).unwrap();
        let e = parse(b"{\"a\": 1, \"b\": 2}", "x.json").unwrap_err();
        assert!(
            e.to_string().ends_with("found an object with keys [a, b]"),
            "{e}"
        );
        let e = parse(b"", "empty.json").unwrap_err();
        assert_eq!(e.to_string(), "empty.json: JSON: at $: empty");
        let e = parse(b"a: [b\n", "bad.yaml").unwrap_err();
        assert!(e.to_string().starts_with("bad.yaml: YAML: at $: "), "{e}");
    }

    #[test]
    fn kubevirt_is_not_the_host_os() {
        let v = json!({"stream": "stable", "architectures": {"x86_64": {
            "artifacts": {},
            "images": {"kubevirt": {"release": "1", "image": "quay.io/fedora/fedora-coreos-kubevirt:stable",
                                    "digest-ref": "quay.io/fedora/fedora-coreos-kubevirt@sha256:00"}}}}});
        let s = from_value("stable.json", &v).unwrap();
        let e = s.select(None, &Arch::new("amd64")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stable.json: stream \"stable\", architecture amd64 (x86_64): no OS container image: looked for architectures.x86_64.oci-image (digest-ref or image), which is absent; architectures.x86_64.images.kubevirt is a KubeVirt disk image, not the host OS"
        );
    }

    #[test]
    fn stream_metadata_shape_errors_have_paths() {
        let cases = [
            (json!({"architectures": {}}), "at $: missing field `stream`"),
            (
                json!({"stream": "s", "architectures": {}}),
                "at $.architectures: no architectures",
            ),
            (
                json!({"stream": "s", "architectures": {"x86_64": {"oci-image": {"release": "1"}}}}),
                "at $.architectures.x86_64.oci-image: neither digest-ref nor image is set",
            ),
            (
                json!({"stream": "s", "architectures": {"x86_64": {}, "amd64": {}}}),
                "architecture amd64 (x86_64) is listed twice",
            ),
        ];
        for (v, want) in cases {
            let e = from_value("f.json", &v).unwrap_err();
            assert!(e.to_string().contains(want), "{e} ∌ {want}");
            check_classified(&e, "InvalidOSStream", Retry::Permanent).unwrap();
        }
    }

    #[test]
    fn os_image_stream_defaults_and_old_spellings() {
        let set = |name: &str| json!({"name": name, "osImageUrl": format!("q.io/{name}@sha256:0")});
        // No status default: spec's; neither: the only stream, else an error.
        let v = json!({"kind": "OSImageStream", "spec": {"defaultStream": "b"},
                       "status": {"availableStreams": [set("a"), set("b")]}});
        let s = from_os_image_stream("OSImageStream cluster", &v).unwrap();
        let b = s.select(None, &Arch::new("arm64")).unwrap();
        assert_eq!(
            (b.os_image.as_str(), b.extensions_image),
            ("q.io/b@sha256:0", None)
        );

        let v = json!({"status": {"availableStreams": [set("a"), set("b")]}});
        let e = from_value("o.json", &v).unwrap().stream(None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "o.json: several streams and no default stream: name one of a, b"
        );
        check_classified(&e, "NoDefaultOSStream", Retry::Permanent).unwrap();
        let v = json!({"status": {"availableStreams": [set("only")]}});
        assert_eq!(
            from_value("o.json", &v).unwrap().stream(None).unwrap().name,
            "only"
        );

        let v = json!({"kind": "OSImageStream", "metadata": {"name": "cluster"}});
        let e = from_value("OSImageStream cluster", &v).unwrap_err();
        assert!(e.to_string().contains("has not reconciled"), "{e}");
        check_classified(&e, "EmptyOSStream", Retry::Permanent).unwrap();

        let v = json!({"kind": "OSImageStream", "status": {"availableStreams": [{"name": "a"}]}});
        let e = from_value("o.json", &v).unwrap_err();
        assert_eq!(
            e.to_string(),
            "o.json: OSImageStream: at $.status.availableStreams[0].osImage: missing or empty"
        );
        let v =
            json!({"kind": "OSImageStream", "status": {"availableStreams": [set("a"), set("a")]}});
        let e = from_value("o.json", &v).unwrap_err();
        assert!(
            e.to_string()
                .contains("[1].name: stream \"a\" is listed twice"),
            "{e}"
        );
    }

    #[test]
    fn config_maps() {
        let mut data = BTreeMap::new();
        data.insert("osImageURL".to_owned(), "q.io/legacy@sha256:0".to_owned());
        data.insert("baseOSContainerImage".to_owned(), String::new());
        let s = from_config_map("ConfigMap ns/machine-config-osimageurl", &data).unwrap();
        let got = s.select(None, &Arch::new("s390x")).unwrap();
        assert_eq!(
            (got.os_image.as_str(), got.extensions_image),
            ("q.io/legacy@sha256:0", None)
        );

        let e = from_config_map("cm", &BTreeMap::new()).unwrap_err();
        assert!(
            e.to_string()
                .contains("data.baseOSContainerImage and data.osImageURL"),
            "{e}"
        );
        check_classified(&e, "NoOSImageInStream", Retry::Permanent).unwrap();

        // coreos-bootimages: the stream metadata inside data.stream.
        let inner = json!({"stream": "rhcos-4.18", "architectures": {"aarch64": {
            "oci-image": {"image": "q.io/rhcos@sha256:1"}}}});
        let v = json!({"kind": "ConfigMap",
                       "metadata": {"name": "coreos-bootimages", "namespace": "openshift-machine-config-operator"},
                       "data": {"releaseVersion": "4.18.0", "stream": inner.to_string()}});
        let s = from_value("cm.json", &v).unwrap();
        assert_eq!(s.format, Format::CoreOsStreamMetadata);
        assert_eq!(
            s.select(None, &Arch::new("arm64")).unwrap().os_image,
            "q.io/rhcos@sha256:1"
        );
        let v = json!({"kind": "ConfigMap", "data": {"stream": "{\"stream\": 1}"}});
        let e = from_value("cm.json", &v).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "cm.json: CoreOS stream metadata: at $.data.stream.stream: invalid type"
            ),
            "{e}"
        );
    }
}
