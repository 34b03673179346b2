//! Turning a planned tree into an image in an OCI layout: layer blobs (written in parallel,
//! one thread per layer at a time), the image config, the manifest, and for several
//! platforms an image index — OCI media types by default, Docker schema2 on request.

use std::collections::BTreeMap;
use std::thread;

use machineos_diagnostics::{Classify, Retry};
use machineos_image::{Descriptor, ImageIndex, ImageManifest, Layout, LayoutError, media_type};
use serde_json::{Map, Value, json};

use crate::layer::{LayerBlob, LayerError, write_layer};
use crate::ostree::encapsulate;
use crate::spec::{SpecError, SynthSpec, SynthVariant};
use crate::tree::{Kind, Tree, TreeError, plan};

/// The `created` time of the config, its history and the manifest annotation.
pub const CREATED: &str = "2024-10-27T00:00:00Z";
/// [`CREATED`] in seconds since the epoch: the ostree commit's timestamp.
const CREATED_EPOCH: u64 = 1_729_987_200;

/// Why a synthetic image could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The tree could not be planned for the spec.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// A layer could not be written.
    #[error(transparent)]
    Layer(#[from] LayerError),
    /// The config, manifest or index blob could not be stored.
    #[error("writing synthetic image {what}: {error}")]
    Blob {
        /// `config`, `manifest` or `index`.
        what: &'static str,
        /// The layout's error (part of the message, not [`std::error::Error::source`]).
        error: LayoutError,
    },
    /// The config, manifest or index could not be encoded.
    #[error("writing synthetic image {what}: encoding JSON: {error}")]
    Json {
        /// `config`, `manifest` or `index`.
        what: &'static str,
        /// The encoder's error (part of the message, not [`std::error::Error::source`]).
        error: serde_json::Error,
    },
    /// [`write_multi_arch`] was given no specs.
    #[error("writing multi-arch synthetic image: no specs given")]
    NoSpecs,
    /// Two specs of a multi-arch image have the same platform.
    #[error("writing multi-arch synthetic image: platform {0} given twice")]
    DuplicatePlatform(String),
    /// The specs of a multi-arch image disagree on `docker_media_types`.
    #[error("writing multi-arch synthetic image: all specs must agree on docker_media_types")]
    MixedMediaTypes,
}

impl Classify for SynthError {
    /// The cause's reason for spec, tree, layer and blob errors; `InvalidSynthSpec` for a
    /// multi-arch request that cannot be honoured (no specs, a platform twice, mixed media
    /// types); `InternalError` when the generator's own JSON cannot be encoded.
    fn reason(&self) -> &'static str {
        match self {
            SynthError::Spec(e) => e.reason(),
            SynthError::Tree(e) => e.reason(),
            SynthError::Layer(e) => e.reason(),
            SynthError::Blob { error, .. } => error.reason(),
            SynthError::Json { .. } => "InternalError",
            SynthError::NoSpecs
            | SynthError::DuplicatePlatform(_)
            | SynthError::MixedMediaTypes => "InvalidSynthSpec",
        }
    }

    /// The cause's classification for spec, tree, layer and blob errors (only I/O can be
    /// transient); permanent otherwise.
    fn retry(&self) -> Retry {
        match self {
            SynthError::Spec(e) => e.retry(),
            SynthError::Tree(e) => e.retry(),
            SynthError::Layer(e) => e.retry(),
            SynthError::Blob { error, .. } => error.retry(),
            SynthError::Json { .. }
            | SynthError::NoSpecs
            | SynthError::DuplicatePlatform(_)
            | SynthError::MixedMediaTypes => Retry::Permanent,
        }
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The manifest, with `platform` set.
    pub manifest: Descriptor,
    /// The image config blob.
    pub config: Descriptor,
    /// Number of layers.
    pub layers: usize,
    /// Regular files written, whiteouts excluded, extra files included (so
    /// `spec.files + spec.extra_files.len()`).
    pub files: u64,
    /// Tar entries of all kinds, directories repeated per layer included.
    pub entries: u64,
    /// Sum of the regular files' sizes (`spec.total_bytes` plus the extra files').
    pub content_bytes: u64,
    /// Sum of the uncompressed layer tars' sizes.
    pub uncompressed_bytes: u64,
    /// Sum of the layer blobs' sizes.
    pub compressed_bytes: u64,
    /// The kernel version of `/usr/lib/modules` (also label `ostree.linux`).
    pub kernel_version: String,
}

/// What [`generate_multi_arch`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedIndex {
    /// The index (OCI image index or Docker manifest list).
    pub index: Descriptor,
    /// One image per spec, in the order given.
    pub images: Vec<Generated>,
}

/// Write the image `spec` describes into `layout`; returns the manifest descriptor with its
/// `platform` set. Nothing is tagged: call [`Layout::set_tag`] with the result.
pub fn write_image(layout: &Layout, spec: &SynthSpec) -> Result<Descriptor, SynthError> {
    generate(layout, spec).map(|g| g.manifest)
}

/// Like [`write_image`], with statistics.
pub fn generate(layout: &Layout, spec: &SynthSpec) -> Result<Generated, SynthError> {
    spec.validate()?;
    let planned = plan(spec)?;
    let (files, content_bytes) = (planned.files(), planned.content_bytes());
    let (tree, commit) = if spec.ostree {
        let subject = format!(
            "{} (machineos-synth) {}",
            spec.variant.os_name(),
            spec.version
        );
        let (tree, enc) = encapsulate(planned, &spec.version, CREATED_EPOCH, &subject)
            .map_err(|error| LayerError::Io { index: 1, error })?;
        (tree, Some(enc.commit))
    } else {
        (planned, None)
    };
    let blobs = write_layers(layout, &tree, spec.gzip_level)?;
    let docker = spec.docker_media_types;

    let config_bytes = serde_json::to_vec(&config_json(spec, &tree, &blobs, commit.as_deref()))
        .map_err(|error| SynthError::Json {
            what: "config",
            error,
        })?;
    let (digest, size) = layout
        .write_blob(&config_bytes)
        .map_err(|error| SynthError::Blob {
            what: "config",
            error,
        })?;
    let config_type = if docker {
        media_type::DOCKER_CONFIG
    } else {
        media_type::OCI_CONFIG
    };
    let config = Descriptor::new(config_type, digest, size);
    let layer_type = if docker {
        media_type::DOCKER_LAYER_GZIP
    } else {
        media_type::OCI_LAYER_GZIP
    };
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(manifest_type(docker).to_owned()),
        config: config.clone(),
        layers: blobs
            .iter()
            .map(|b| Descriptor::new(layer_type, b.digest.clone(), b.size))
            .collect(),
        annotations: if docker {
            BTreeMap::new()
        } else {
            annotations(spec)
        },
    };
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(|error| SynthError::Json {
        what: "manifest",
        error,
    })?;
    let (digest, size) = layout
        .write_blob(&manifest_bytes)
        .map_err(|error| SynthError::Blob {
            what: "manifest",
            error,
        })?;
    let mut manifest = Descriptor::new(manifest_type(docker), digest, size);
    manifest.platform = Some(spec.platform.clone());

    let nodes = || tree.layers.iter().flat_map(|l| &l.nodes);
    Ok(Generated {
        manifest,
        config,
        layers: blobs.len(),
        files,
        entries: nodes().count() as u64,
        content_bytes,
        uncompressed_bytes: blobs.iter().map(|b| b.tar_size).sum(),
        compressed_bytes: blobs.iter().map(|b| b.size).sum(),
        kernel_version: tree.kernel_version.clone(),
    })
}

/// Write `spec` for each of the four architectures OpenShift ships CoreOS for
/// ([`SynthSpec::four_arch`]: amd64, arm64, ppc64le, s390x) and an index over them; returns
/// the index descriptor. Nothing is tagged.
pub fn write_four_arch(layout: &Layout, spec: &SynthSpec) -> Result<Descriptor, SynthError> {
    write_multi_arch(layout, &spec.four_arch())
}

/// Like [`write_four_arch`], with statistics.
pub fn generate_four_arch(layout: &Layout, spec: &SynthSpec) -> Result<GeneratedIndex, SynthError> {
    generate_multi_arch(layout, &spec.four_arch())
}

/// Write one image per spec and an index over them; returns the index descriptor. The specs
/// must have distinct platforms and the same `docker_media_types`. Nothing is tagged.
pub fn write_multi_arch(layout: &Layout, specs: &[SynthSpec]) -> Result<Descriptor, SynthError> {
    generate_multi_arch(layout, specs).map(|g| g.index)
}

/// Like [`write_multi_arch`], with statistics.
pub fn generate_multi_arch(
    layout: &Layout,
    specs: &[SynthSpec],
) -> Result<GeneratedIndex, SynthError> {
    let first = specs.first().ok_or(SynthError::NoSpecs)?;
    let docker = first.docker_media_types;
    for (i, s) in specs.iter().enumerate() {
        if s.docker_media_types != docker {
            return Err(SynthError::MixedMediaTypes);
        }
        if specs[..i].iter().any(|o| o.platform.matches(&s.platform)) {
            return Err(SynthError::DuplicatePlatform(s.platform.to_string()));
        }
    }
    let mut images = Vec::with_capacity(specs.len());
    for s in specs {
        images.push(generate(layout, s)?);
    }
    let index = ImageIndex {
        schema_version: 2,
        media_type: Some(index_type(docker).to_owned()),
        manifests: images.iter().map(|g| g.manifest.clone()).collect(),
        annotations: if docker {
            BTreeMap::new()
        } else {
            annotations(first)
        },
    };
    let bytes = serde_json::to_vec(&index).map_err(|error| SynthError::Json {
        what: "index",
        error,
    })?;
    let (digest, size) = layout
        .write_blob(&bytes)
        .map_err(|error| SynthError::Blob {
            what: "index",
            error,
        })?;
    Ok(GeneratedIndex {
        index: Descriptor::new(index_type(docker), digest, size),
        images,
    })
}

fn manifest_type(docker: bool) -> &'static str {
    if docker {
        media_type::DOCKER_MANIFEST
    } else {
        media_type::OCI_MANIFEST
    }
}

fn index_type(docker: bool) -> &'static str {
    if docker {
        media_type::DOCKER_MANIFEST_LIST
    } else {
        media_type::OCI_INDEX
    }
}

fn annotations(spec: &SynthSpec) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "org.opencontainers.image.created".to_owned(),
            CREATED.to_owned(),
        ),
        (
            "org.opencontainers.image.version".to_owned(),
            spec.version.clone(),
        ),
    ])
}

/// The OCI (and Docker-compatible) image config. `config.StopSignal` is a field machineos
/// does not model: derived images must carry it over untouched.
fn config_json(
    spec: &SynthSpec,
    tree: &Tree<'_>,
    blobs: &[LayerBlob],
    ostree_commit: Option<&str>,
) -> Value {
    let p = &spec.platform;
    let mut c = Map::new();
    c.insert("created".into(), json!(CREATED));
    c.insert("architecture".into(), json!(p.architecture));
    c.insert("os".into(), json!(p.os));
    if let Some(v) = &p.variant {
        c.insert("variant".into(), json!(v));
    }
    c.insert(
        "config".into(),
        json!({
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"],
            "Cmd": ["/sbin/init"],
            "Labels": {
                "containers.bootc": "1",
                "ostree.bootable": "true",
                "ostree.linux": tree.kernel_version,
                "org.opencontainers.image.title": format!("{} (machineos-synth)", spec.variant.os_name()),
                "org.opencontainers.image.version": spec.version,
                "io.machineos.synth.seed": spec.seed.to_string(),
            },
            "StopSignal": "SIGRTMIN+3",
        }),
    );
    if let (Some(commit), Some(last), Some(labels)) = (
        ostree_commit,
        blobs.last(),
        c.get_mut("config")
            .and_then(|c| c.get_mut("Labels"))
            .and_then(Value::as_object_mut),
    ) {
        labels.insert("ostree.commit".into(), json!(commit));
        labels.insert(
            "ostree.final-diffid".into(),
            json!(last.diff_id.to_string()),
        );
        labels.insert("version".into(), json!(spec.version));
    }
    // Fedora CoreOS's labels stay as they were before variants existed (pinned digests).
    if let Some(labels) = c
        .get_mut("config")
        .and_then(|c| c.get_mut("Labels"))
        .and_then(Value::as_object_mut)
    {
        match spec.variant {
            SynthVariant::Fcos => {}
            SynthVariant::Scos => {
                labels.insert("com.coreos.osname".into(), json!("scos"));
                labels.insert("com.coreos.stream".into(), json!("c9s"));
                labels.insert(
                    "io.openshift.build.version-display-names".into(),
                    json!("machine-os=CentOS Stream CoreOS"),
                );
            }
            SynthVariant::Rhcos => {
                labels.insert("com.coreos.osname".into(), json!("rhcos"));
                labels.insert(
                    "io.openshift.build.versions".into(),
                    json!(format!("machine-os={}", spec.version)),
                );
            }
        }
    }
    c.insert(
        "rootfs".into(),
        json!({
            "type": "layers",
            "diff_ids": blobs.iter().map(|b| b.diff_id.to_string()).collect::<Vec<_>>(),
        }),
    );
    c.insert(
        "history".into(),
        Value::Array(
            tree.layers
                .iter()
                .map(|l| json!({"created": CREATED, "created_by": l.description}))
                .collect(),
        ),
    );
    Value::Object(c)
}

/// Write every layer, largest first, on up to one thread per CPU.
fn write_layers(
    layout: &Layout,
    tree: &Tree<'_>,
    gzip_level: u32,
) -> Result<Vec<LayerBlob>, LayerError> {
    let n = tree.layers.len();
    let mut order: Vec<(u64, usize)> = tree
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let bytes = l
                .nodes
                .iter()
                .map(|n| match &n.kind {
                    Kind::File(b) => b.len(),
                    _ => 0,
                })
                .sum::<u64>();
            (bytes, i)
        })
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let threads = thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n)
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<LayerBlob, LayerError>>> = (0..n).map(|_| None).collect();
    thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(_, i)) = order.get(k) else { break };
                        let r = write_layer(layout, i, &tree.layers[i].nodes, gzip_level);
                        let failed = r.is_err();
                        done.push((i, r));
                        if failed {
                            // Make the other workers stop after their current layer.
                            next.store(n, std::sync::atomic::Ordering::Relaxed);
                            break;
                        }
                    }
                    done
                })
            })
            .collect();
        for w in workers {
            let done = w.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            for (i, r) in done {
                results[i] = Some(r);
            }
        }
    });
    let mut blobs = Vec::with_capacity(n);
    let mut first_error = None;
    for r in results {
        match r {
            Some(Ok(b)) => blobs.push(b),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {}
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(blobs),
    }
}
