//! One build, many platforms: [`build_platforms`] builds the same recipe over each platform's
//! base and publishes one image per platform plus an OCI image index over them.
//!
//! Each platform is a build of its own ([`crate::build`]'s pipeline): its base resolved to that
//! platform's manifest, its own base index, its own plan — passwd databases, units and
//! symlinks can differ between architectures, so nothing planned for one platform is reused
//! for another. The native engine only reads and writes files, so no emulation and no node
//! of the target architecture is needed. The platforms run concurrently on the caller's
//! runtime (their indexing and planning on blocking threads, in parallel).
//!
//! All or nothing: every wanted platform is first checked against what its base offers (a
//! missing one is [`BuildError::MissingPlatforms`], listing the base's platforms, before any
//! work); the per-platform images are published by digest only (a registry keeps them
//! untagged, a layout as blobs not listed in `index.json`); the index is published — and
//! the output's tag moved to it — only once every platform's image is. A failure on any
//! platform cancels the others and leaves no index and no tag.
//!
//! The index is an OCI image index; each entry carries its platform and the annotations
//! `org.opencontainers.image.base.digest` / `org.opencontainers.image.base.name` (the OCI
//! annotations for "built on"), so the base each image came from is readable from the index
//! alone. Entries are in the order the platforms were asked for, so equal inputs give the
//! same index digest.

use std::collections::BTreeMap;
use std::time::Instant;

use machineos_image::manifest::{ImageIndex, Manifest, parse_manifest};
use machineos_image::{Descriptor, Digest, ImageRef, Platform, media_type};
use machineos_layer::write::LayerOptions;
use machineos_layering::Recipe;

use crate::store::{self, Store, blocking};
use crate::{BuildError, BuildSpec, Environment, Outcome, check_output, ms, output_tag};

/// OCI annotation: the digest of the image an image was built on.
pub const ANNOTATION_BASE_DIGEST: &str = "org.opencontainers.image.base.digest";
/// OCI annotation: the reference of the image an image was built on.
pub const ANNOTATION_BASE_NAME: &str = "org.opencontainers.image.base.name";

/// One platform of a multi-platform build and the base it is built on (one multi-platform
/// base for all, or a per-platform base, as stream metadata names them).
#[derive(Debug, Clone)]
pub struct PlatformBase {
    /// The platform.
    pub platform: Platform,
    /// Its base image (a single manifest for that platform, or an index that has it).
    pub base: ImageRef,
}

/// What to build for several platforms.
#[derive(Debug, Clone)]
pub struct MultiSpec {
    /// The platforms, each with its base, in the order the index lists them.
    pub bases: Vec<PlatformBase>,
    /// Where to publish the index; its tag (if any) is set last.
    pub output: ImageRef,
    /// The config to apply (the same for every platform).
    pub recipe: Recipe,
    /// The history entry's `created_by`.
    pub created_by: String,
    /// Layer timestamps and compression.
    pub layer: LayerOptions,
}

/// What a multi-platform build published.
#[derive(Debug)]
pub struct MultiOutcome {
    /// The index by digest: `host/repo@sha256:…` or `oci:DIR@sha256:…`.
    pub pullspec: String,
    /// The index digest.
    pub index_digest: Digest,
    /// The index's bytes, as published.
    pub index: Vec<u8>,
    /// Each platform's build, in the index's order.
    pub images: Vec<Outcome>,
    /// Wall time of the whole build, in milliseconds.
    pub total_ms: f64,
}

/// The platforms a base offers: an index's entries (attestation entries such as
/// `unknown/unknown` left out), or a single manifest's own platform.
pub async fn base_platforms(
    base: &ImageRef,
    env: &Environment,
) -> Result<Vec<Platform>, BuildError> {
    let client = client_for(&[base], env)?;
    let store = store::open_store(base, client.as_ref(), false).await?;
    listed_platforms(&store).await
}

/// Builds `spec` for each platform and publishes the images and their index (see the module
/// documentation).
pub async fn build_platforms(
    spec: MultiSpec,
    env: Environment,
) -> Result<MultiOutcome, BuildError> {
    let started = Instant::now();
    check_output(&spec.output)?;
    if spec.bases.is_empty() {
        return Err(BuildError::InvalidOutput {
            output: spec.output.to_string(),
            problem: "a multi-platform build needs at least one platform".into(),
        });
    }
    for (i, b) in spec.bases.iter().enumerate() {
        if let Some(dup) = spec.bases[..i]
            .iter()
            .find(|o| o.platform.matches(&b.platform))
        {
            return Err(BuildError::InvalidOutput {
                output: spec.output.to_string(),
                problem: format!(
                    "platform {} is asked for twice (as {} and {})",
                    b.platform, dup.platform, b.platform
                ),
            });
        }
    }
    let refs: Vec<&ImageRef> = spec
        .bases
        .iter()
        .map(|b| &b.base)
        .chain([&spec.output])
        .collect();
    let client = client_for(&refs, &env)?;
    check_platforms(&spec.bases, client.as_ref()).await?;

    // Every platform's image, by digest only; the first failure drops (cancels) the rest.
    let once = crate::sink::BlobOnce::default();
    let builds = spec.bases.iter().map(|b| {
        let one = BuildSpec {
            base: b.base.clone(),
            output: spec.output.clone(),
            platform: b.platform.clone(),
            recipe: spec.recipe.clone(),
            created_by: spec.created_by.clone(),
            layer: spec.layer.clone(),
            layer_out: None,
        };
        let (env, once) = (&env, &once);
        async move { crate::build_one(one, env, false, once).await }
    });
    let images = futures_util::future::try_join_all(builds).await?;

    let (index, bytes) = index_of(&spec.bases, &images)?;
    let dest = store::open_store(&spec.output, client.as_ref(), true).await?;
    let tag = output_tag(&spec.output);
    let digest = publish_index(&dest, &bytes, &tag).await?;
    debug_assert_eq!(index.manifests.len(), images.len());
    Ok(MultiOutcome {
        pullspec: dest.pullspec(&digest),
        index_digest: digest,
        index: bytes,
        images,
        total_ms: ms(started.elapsed()),
    })
}

/// The operation's registry client when any reference is in a registry.
fn client_for(
    refs: &[&ImageRef],
    env: &Environment,
) -> Result<Option<machineos_registry::Registry>, BuildError> {
    let uses_registry = refs.iter().any(|r| matches!(r, ImageRef::Registry(_)));
    match (&env.registry, uses_registry) {
        (Some(r), true) => Ok(Some(r.for_operation())),
        (None, true) => Err(BuildError::Internal(
            "a registry image without a registry client".into(),
        )),
        (_, false) => Ok(None),
    }
}

/// What a store's top manifest lists (see [`base_platforms`]).
async fn listed_platforms(store: &Store) -> Result<Vec<Platform>, BuildError> {
    let (bytes, _) = store::top_manifest(store).await?;
    let parsed = parse_manifest(&bytes, None).map_err(|error| BuildError::Manifest {
        image: store.name(),
        error,
    })?;
    match parsed {
        Manifest::Index(index) => {
            let mut out: Vec<Platform> = Vec::new();
            for p in index.manifests.iter().filter_map(|d| d.platform.clone()) {
                if p.os != "unknown" && !out.iter().any(|q| q.matches(&p)) {
                    out.push(p);
                }
            }
            Ok(out)
        }
        Manifest::Image(_) => single_platform(store).await,
    }
}

/// A single-manifest base's own platform (from its config).
async fn single_platform(store: &Store) -> Result<Vec<Platform>, BuildError> {
    let any = Platform::new("linux", "amd64", None);
    match store::resolve(store.clone(), &any).await {
        Ok(r) => Ok(vec![r.platform]),
        Err(BuildError::PlatformMismatch { found, .. }) => {
            Ok(vec![found.parse().map_err(|e| {
                BuildError::Internal(format!("platform {found:?}: {e}"))
            })?])
        }
        Err(e) => Err(e),
    }
}

/// Checks, before anything is built, that each base offers its platform; the error names
/// every missing platform and what each base offers.
async fn check_platforms(
    bases: &[PlatformBase],
    client: Option<&machineos_registry::Registry>,
) -> Result<(), BuildError> {
    let mut offered: BTreeMap<String, Vec<Platform>> = BTreeMap::new();
    for b in bases {
        let key = b.base.to_string();
        if let std::collections::btree_map::Entry::Vacant(e) = offered.entry(key) {
            let store = store::open_store(&b.base, client, false).await?;
            e.insert(listed_platforms(&store).await?);
        }
    }
    let mut missing = Vec::new();
    for b in bases {
        let have = &offered[&b.base.to_string()];
        if !have.iter().any(|p| p.matches(&b.platform)) {
            missing.push((b.platform.to_string(), b.base.to_string()));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let available = missing
        .iter()
        .map(|(_, base)| base)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|base| {
            let list: Vec<String> = offered[base].iter().map(Platform::to_string).collect();
            format!("{base} offers {}", list.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(BuildError::MissingPlatforms {
        missing: missing.into_iter().map(|(p, _)| p).collect(),
        available,
    })
}

/// The OCI index over the built images, and its bytes.
fn index_of(
    bases: &[PlatformBase],
    images: &[Outcome],
) -> Result<(ImageIndex, Vec<u8>), BuildError> {
    let mut index = ImageIndex::empty();
    for (b, img) in bases.iter().zip(images) {
        let mut d = Descriptor::new(
            &img.manifest_media_type,
            img.manifest_digest.clone(),
            img.manifest_size,
        );
        d.platform = Some(img.platform.clone());
        d.annotations.insert(
            ANNOTATION_BASE_DIGEST.into(),
            base_digest(&img.base_pullspec),
        );
        d.annotations
            .insert(ANNOTATION_BASE_NAME.into(), b.base.to_string());
        index.manifests.push(d);
    }
    let bytes = serde_json::to_vec(&index)
        .map_err(|e| BuildError::Internal(format!("serialising the index: {e}")))?;
    Ok((index, bytes))
}

/// The digest part of `…@sha256:…`.
fn base_digest(pullspec: &str) -> String {
    pullspec
        .rsplit_once('@')
        .map(|(_, d)| d.to_string())
        .unwrap_or_default()
}

/// Puts the index, by digest first and then under `tag`; returns the digest the destination
/// stored it under (checked against the bytes' own).
async fn publish_index(dest: &Store, bytes: &[u8], tag: &str) -> Result<Digest, BuildError> {
    let want = Digest::sha256(bytes);
    match dest {
        Store::Registry { client, reference } => {
            let got = client
                .push_manifest(reference, bytes, media_type::OCI_INDEX, Some(tag))
                .await?;
            if got != want {
                return Err(BuildError::BlobDigest {
                    image: dest.name(),
                    want,
                    got,
                });
            }
            Ok(got)
        }
        Store::Layout { layout, reference } => {
            let (layout, reference) = (layout.clone(), reference.clone());
            let (bytes, tag) = (bytes.to_vec(), tag.to_string());
            blocking("writing the index", move || {
                let err = |source| BuildError::Layout {
                    image: reference.to_string(),
                    error: source,
                };
                let (digest, size) = layout.write_blob(&bytes).map_err(err)?;
                if digest != want {
                    return Err(BuildError::BlobDigest {
                        image: reference.to_string(),
                        want,
                        got: digest,
                    });
                }
                let desc = Descriptor::new(media_type::OCI_INDEX, digest.clone(), size);
                layout.set_tag(&tag, &desc).map_err(err)?;
                Ok(digest)
            })
            .await
        }
    }
}
