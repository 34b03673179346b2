//! The native image builder: a base image and a [`Recipe`] → a layered image, published by
//! digest, with no container runtime — [`build`]. Also [`inspect::inspect`], which reads
//! back what an image records, and [`output::OutputFile`], how the CLI writes
//! `--layer-out`/`--blob-out`.
//!
//! The flow: resolve the base to one platform's manifest and config (`store`); get its
//! filesystem index — from the cache by manifest digest, else by streaming each layer once
//! (`base_index`); plan the layer against the index (pure, on a blocking thread, with the
//! few base contents the index does not keep fetched beforehand); derive layer, config and
//! manifest (pure, `derive`, spooled by `spool`); then publish (`sink`) — base blobs
//! present/mounted/copied, new blobs uploaded, and the manifest with its tag last, so a
//! failure before that leaves no manifest and no tag behind. Nothing blocks a runtime
//! thread: file work runs on blocking threads, network reads are awaited, and [`build`] is
//! `Send`, so many builds share one runtime and one [`Registry`] client.

mod base_index;
mod derive;
pub mod diff;
pub mod inspect;
mod multi;
pub mod output;
mod progress;
mod sink;
mod spool;
mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use derive::Metadata;
use machineos_baseindex::{Cache, IndexMemory};
use machineos_diagnostics::{Classify, Retry, Warning, io_retry};
use machineos_image::{Digest, ImageRef, Platform};
use machineos_layer::Plan;
use machineos_layer::write::{LayerDigests, LayerOptions};
use machineos_layering::Recipe;
use machineos_registry::{Registry, RegistryError};

pub use base_index::CacheUse;
pub use multi::{MultiOutcome, MultiSpec, PlatformBase, base_platforms, build_platforms};
pub use progress::{Event, Progress, Quiet};
pub use sink::BlobCounts;

/// Why a build failed. Each names the image (and where applicable the blob) involved.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A registry operation failed.
    #[error(transparent)]
    Registry(Box<RegistryError>),
    /// An OCI layout could not be read or written.
    #[error("{image}: {error}")]
    Layout {
        /// The layout reference.
        image: String,
        /// The error.
        error: machineos_image::layout::LayoutError,
    },
    /// A manifest or index is unusable.
    #[error("{image}: {error}")]
    Manifest {
        /// The image.
        image: String,
        /// The error.
        error: machineos_image::manifest::ManifestError,
    },
    /// The base's config is unusable.
    #[error("{image}: config: {error}")]
    Config {
        /// The image.
        image: String,
        /// The error.
        error: machineos_image::config::ConfigError,
    },
    /// The base's filesystem index could not be built, loaded or stored.
    #[error("{image}: base index: {error}")]
    Index {
        /// The image (and layer).
        image: String,
        /// The error.
        error: machineos_baseindex::IndexError,
    },
    /// A blob's bytes do not match its digest.
    #[error("{image}: blob {want} has digest {got}")]
    BlobDigest {
        /// The image.
        image: String,
        /// The digest it was named by.
        want: Digest,
        /// The digest of its bytes.
        got: Digest,
    },
    /// A single-platform base is for another platform than the one asked for.
    #[error(
        "{image}: the image is for {found}, not {wanted} (use --platform {found}, or a multi-platform base)"
    )]
    PlatformMismatch {
        /// The image.
        image: String,
        /// The platform asked for.
        wanted: String,
        /// The image's platform.
        found: String,
    },
    /// A multi-platform build asked for platforms its bases do not offer.
    #[error("no base for {}: {available}", missing.join(", "))]
    MissingPlatforms {
        /// The platforms asked for and not offered.
        missing: Vec<String>,
        /// What the bases offer (`BASE offers P, Q; …`).
        available: String,
    },
    /// Planning the layer failed (bad config for this base).
    #[error(transparent)]
    Plan(#[from] machineos_layer::LayerError),
    /// The image is malformed (its manifest, config or a layer's contents contradict each
    /// other or the spec).
    #[error("{image}: {problem}")]
    InvalidImage {
        /// The image (and blob).
        image: String,
        /// What is wrong.
        problem: String,
    },
    /// Reading a layer's contents failed.
    #[error("{image}: reading layer {digest}: {error}")]
    LayerRead {
        /// The image.
        image: String,
        /// The layer.
        digest: Digest,
        /// The error.
        error: std::io::Error,
    },
    /// The output reference cannot be published to.
    #[error("{output}: {problem}")]
    InvalidOutput {
        /// The output reference.
        output: String,
        /// Why.
        problem: String,
    },
    /// The uncompressed layer could not be written to `--layer-out`.
    #[error("writing the layer tar {path}: {error}")]
    LayerOut {
        /// The path.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// The layer could not be written (its options are out of range, or writing failed).
    #[error(transparent)]
    Layer(#[from] machineos_layer::write::WriteError),
    /// An invariant of ours did not hold (a bug, or a task that panicked).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<RegistryError> for BuildError {
    fn from(e: RegistryError) -> Self {
        BuildError::Registry(Box::new(e))
    }
}

impl Classify for BuildError {
    fn reason(&self) -> &'static str {
        match self {
            BuildError::Registry(e) => e.reason(),
            BuildError::Layout { error, .. } => error.reason(),
            BuildError::Manifest { error, .. } => error.reason(),
            BuildError::Config { error, .. } => error.reason(),
            BuildError::Index { error, .. } => error.reason(),
            BuildError::Plan(e) => e.reason(),
            BuildError::Layer(e) => e.reason(),
            BuildError::BlobDigest { .. } => "DigestMismatch",
            BuildError::PlatformMismatch { .. } | BuildError::MissingPlatforms { .. } => {
                "NoMatchingPlatform"
            }
            BuildError::InvalidImage { .. } => "InvalidImage",
            BuildError::LayerRead { .. } => "BaseLayerUnreadable",
            BuildError::InvalidOutput { .. } => "InvalidOutput",
            BuildError::LayerOut { .. } => "LayerOutFailed",
            BuildError::Internal(_) => "InternalError",
        }
    }

    fn retry(&self) -> Retry {
        match self {
            BuildError::Registry(e) => e.retry(),
            BuildError::Layout { error, .. } => error.retry(),
            BuildError::Manifest { error, .. } => error.retry(),
            BuildError::Config { error, .. } => error.retry(),
            BuildError::Index { error, .. } => error.retry(),
            BuildError::Plan(e) => e.retry(),
            BuildError::Layer(e) => e.retry(),
            BuildError::LayerRead { error, .. } | BuildError::LayerOut { error, .. } => {
                io_retry(error)
            }
            // A task that panicked or was cancelled (a runtime shutting down) may well
            // succeed when run again.
            BuildError::Internal(_) => Retry::Transient,
            BuildError::BlobDigest { .. }
            | BuildError::PlatformMismatch { .. }
            | BuildError::MissingPlatforms { .. }
            | BuildError::InvalidImage { .. }
            | BuildError::InvalidOutput { .. } => Retry::Permanent,
        }
    }
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildSpec {
    /// The base image.
    pub base: ImageRef,
    /// Where to publish; its tag (if any) is set last.
    pub output: ImageRef,
    /// The platform to take from a multi-platform base.
    pub platform: Platform,
    /// The config to apply, what the build adds around it, and the image's labels (see
    /// [`machineos_layering`]).
    pub recipe: Recipe,
    /// The history entry's `created_by` (the tool and its version).
    pub created_by: String,
    /// Layer timestamps and compression.
    pub layer: LayerOptions,
    /// Also write the added layer as an uncompressed tar here: checked before the build
    /// starts, in place only if the build succeeds (see [`output`]).
    pub layer_out: Option<PathBuf>,
}

/// How to reach things.
pub struct Environment {
    /// The registry client, shared by every build of the process: needed when the base or
    /// the output is in a registry.
    pub registry: Option<Registry>,
    /// The base index cache, if any.
    pub cache: Option<Cache>,
    /// Indexes kept in memory across the builds of this process (a long-running one: the
    /// controller), in front of `cache`; `None` for a one-shot build.
    pub memory: Option<IndexMemory>,
    /// Where events go.
    pub progress: Arc<dyn Progress>,
}

/// Time spent per stage.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// Resolving the base's manifest and config.
    pub resolve_ms: f64,
    /// Loading or building the base index.
    pub index_ms: f64,
    /// Planning the layer.
    pub plan_ms: f64,
    /// Writing the layer, config and manifest.
    pub derive_ms: f64,
    /// Publishing blobs and manifest.
    pub publish_ms: f64,
    /// All of it.
    pub total_ms: f64,
}

/// What a build did and produced.
#[derive(Debug)]
pub struct Outcome {
    /// The published image by digest: `host/repo@sha256:…` or `oci:DIR@sha256:…`.
    pub pullspec: String,
    /// The manifest digest.
    pub manifest_digest: Digest,
    /// The manifest's media type.
    pub manifest_media_type: String,
    /// The manifest's size in bytes.
    pub manifest_size: u64,
    /// The config digest.
    pub config_digest: Digest,
    /// The new layer's digests and sizes.
    pub layer: LayerDigests,
    /// The base by digest.
    pub base_pullspec: String,
    /// The base platform used.
    pub platform: Platform,
    /// Number of base layers.
    pub base_layers: usize,
    /// What the base is (`base_index::variant`: its os-release and labels).
    pub variant: machineos_variant::Variant,
    /// The plan (for `--layer-out` and counts).
    pub plan: Plan,
    /// How the base index was obtained.
    pub cache: CacheUse,
    /// Base layer reads (indexing streams and on-demand content reads).
    pub base_layer_reads: u64,
    /// How base blobs reached the destination.
    pub blobs: BlobCounts,
    /// Stage timings.
    pub timings: Timings,
    /// What went wrong without failing the build (an unusable cache, say).
    pub warnings: Vec<Warning>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Writes the plan's uncompressed layer tar to `out` (a temporary file beside a regular
/// file, or the device itself).
fn write_layer_tar(
    out: &mut output::OutputFile,
    plan: &Plan,
    opts: &LayerOptions,
) -> Result<(), BuildError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::LayerOut {
            path,
            error: source,
        }
    };
    let path = out.path().to_path_buf();
    let file = machineos_layer::write::write_tar(plan, opts, std::io::BufWriter::new(out.file()))
        .map_err(err(&path))?;
    file.into_inner().map_err(|e| err(&path)(e.into_error()))?;
    Ok(())
}

/// The tag an output is published under (`latest` when it names none).
fn output_tag(output: &ImageRef) -> String {
    match output {
        ImageRef::Registry(r) => r.tag_or_latest().to_string(),
        ImageRef::Layout(l) => l.tag.clone().unwrap_or_else(|| "latest".to_string()),
    }
}

/// An output must name where to publish, not what: a digest is the result of the build.
fn check_output(output: &ImageRef) -> Result<(), BuildError> {
    let digest = match output {
        ImageRef::Registry(r) => r.digest().is_some(),
        ImageRef::Layout(l) => l.digest.is_some(),
    };
    if digest {
        return Err(BuildError::InvalidOutput {
            output: output.to_string(),
            problem:
                "an output cannot name a digest (the digest is what the build produces); give a tag"
                    .into(),
        });
    }
    Ok(())
}

/// Builds and publishes one image.
pub async fn build(spec: BuildSpec, env: Environment) -> Result<Outcome, BuildError> {
    build_one(spec, &env, true, &sink::BlobOnce::default()).await
}

/// Builds and publishes one image; its manifest is tagged with the output's tag when
/// `tagged`, else published by digest only (in a layout: a blob an index will reference).
async fn build_one(
    spec: BuildSpec,
    env: &Environment,
    tagged: bool,
    once: &sink::BlobOnce,
) -> Result<Outcome, BuildError> {
    let started = Instant::now();
    check_output(&spec.output)?;
    // Every output is checked before anything is done, so a failed build changes nothing.
    let layer_out = match spec.layer_out.clone() {
        Some(path) => Some(
            store::blocking("preparing --layer-out", move || {
                output::OutputFile::prepare(&path).map_err(|e| BuildError::LayerOut {
                    path: e.path,
                    error: e.source,
                })
            })
            .await?,
        ),
        None => None,
    };
    let progress = env.progress.clone();
    progress.event(Event::Stage("resolving base"));
    let uses_registry = [&spec.base, &spec.output]
        .into_iter()
        .any(|r| matches!(r, ImageRef::Registry(_)));
    let client = match (&env.registry, uses_registry) {
        (Some(r), true) => Some(r.for_operation()),
        (None, true) => {
            return Err(BuildError::Internal(
                "a registry image without a registry client".into(),
            ));
        }
        (_, false) => None,
    };
    let base_store = store::open_store(&spec.base, client.as_ref(), false).await?;
    let known = store::Known {
        memory: env.memory.as_ref(),
        cache: env.cache.as_ref(),
    };
    let base = store::resolve_with(base_store, &spec.platform, known).await?;
    let resolved = started.elapsed();

    let reads = Arc::new(base_index::LayerReads::default());
    let mut warnings = Vec::new();
    let (index, cache) = base_index::base_index(
        &base,
        env.memory.as_ref(),
        env.cache.as_ref(),
        &progress,
        &reads,
        &mut warnings,
    )
    .await?;
    let variant = base_index::variant(&base, &index, &reads).await?;
    let indexed = started.elapsed();

    progress.event(Event::Stage("planning"));
    let plan = base_index::plan(
        &base,
        Arc::new(index),
        Arc::new(spec.recipe.config.clone()),
        Arc::new(spec.recipe.plan_options.clone()),
        &spec.recipe.source_name,
        &reads,
    )
    .await?;
    let planned = started.elapsed();

    let metadata = Metadata {
        labels: spec.recipe.image_labels(&base.pullspec()),
        created_by: spec.created_by.clone(),
        comment: Some(spec.recipe.source_name.clone()),
    };
    let (derived, plan, staged) = {
        let base = base.clone();
        let layer = spec.layer.clone();
        tokio::task::spawn_blocking(move || {
            let derived = derive::derive(&base, &plan, &layer, &metadata)?;
            // The uncompressed layer is written now — beside its destination, moved there only
            // once the image is published, so a failure on either side leaves neither; or
            // into a device or pipe, where a failure (ENOSPC) stops the build unpublished.
            let staged = layer_out
                .map(|mut out| write_layer_tar(&mut out, &plan, &layer).map(|()| out))
                .transpose()?;
            Ok::<_, BuildError>((derived, plan, staged))
        })
        .await
        .map_err(|e| BuildError::Internal(format!("derive task: {e}")))??
    };
    let derived_at = started.elapsed();

    progress.event(Event::Stage("publishing"));
    let dest = store::open_store(&spec.output, client.as_ref(), true).await?;
    let tag = tagged.then(|| output_tag(&spec.output));
    let (digest, blobs) =
        sink::publish(&base, &derived, &dest, tag.as_deref(), &progress, once).await?;
    if digest != derived.manifest_digest {
        return Err(BuildError::BlobDigest {
            image: dest.name(),
            want: derived.manifest_digest.clone(),
            got: digest,
        });
    }
    if let Some(out) = staged {
        store::blocking("committing --layer-out", move || {
            out.commit().map_err(|e| BuildError::LayerOut {
                path: e.path,
                error: e.source,
            })
        })
        .await?;
    }
    let done = started.elapsed();
    Ok(Outcome {
        pullspec: dest.pullspec(&digest),
        manifest_digest: digest,
        manifest_media_type: derived.manifest_media_type.clone(),
        manifest_size: derived.manifest.len() as u64,
        config_digest: derived.config_descriptor.digest.clone(),
        layer: derived.layer_digests.clone(),
        base_pullspec: base.pullspec(),
        platform: base.platform.clone(),
        base_layers: base.manifest.layers.len(),
        variant,
        plan,
        cache,
        base_layer_reads: reads.get(),
        blobs,
        timings: Timings {
            resolve_ms: ms(resolved),
            index_ms: ms(indexed - resolved),
            plan_ms: ms(planned - indexed),
            derive_ms: ms(derived_at - planned),
            publish_ms: ms(done - derived_at),
            total_ms: ms(done),
        },
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_diagnostics::{check_chain, is_valid_reason};

    #[test]
    fn build_errors_say_how_to_act_and_print_their_cause_once() {
        let io = |k| std::io::Error::new(k, "boom");
        let cases = [
            (
                BuildError::LayerRead {
                    image: "b".into(),
                    digest: Digest::sha256(b"x"),
                    error: io(std::io::ErrorKind::ConnectionReset),
                },
                "BaseLayerUnreadable",
                Retry::Transient,
            ),
            (
                BuildError::LayerOut {
                    path: "/x".into(),
                    error: io(std::io::ErrorKind::PermissionDenied),
                },
                "LayerOutFailed",
                Retry::Permanent,
            ),
            (
                BuildError::PlatformMismatch {
                    image: "b".into(),
                    wanted: "linux/s390x".into(),
                    found: "linux/amd64".into(),
                },
                "NoMatchingPlatform",
                Retry::Permanent,
            ),
            (
                BuildError::Layout {
                    image: "oci:x".into(),
                    error: machineos_image::layout::LayoutError::Io {
                        path: "/x/index.json".into(),
                        dir: "/x".into(),
                        op: "writing",
                        error: io(std::io::ErrorKind::StorageFull),
                    },
                },
                "LayoutIOError",
                Retry::Transient,
            ),
            (
                BuildError::Internal("a task panicked".into()),
                "InternalError",
                Retry::Transient,
            ),
        ];
        for (e, reason, retry) in cases {
            assert_eq!((e.reason(), e.retry()), (reason, retry), "{e}");
            assert!(is_valid_reason(e.reason()), "{e}");
            assert_eq!(check_chain(&e), Ok(()), "{e}");
        }
    }
}
