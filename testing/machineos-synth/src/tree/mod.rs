//! The synthetic root filesystem: which paths exist, with what metadata and contents, and in
//! which layer — a Fedora CoreOS-shaped tree split into layers the way rpm-ostree's chunked
//! images are, planned entirely in memory (metadata only) before any byte is written.
//!
//! Shape: layer 0 is the skeleton (top-level and `/var` directories, ostree compat symlinks,
//! passwd/group in `/etc` and `/usr/lib`, os-release, presets, one enabled unit); the middle
//! layers hold packages (a named set with the files node configuration cares about — units,
//! setuid binaries, hard links, non-root owners — plus generated ones), bin-packed by size so
//! the kernel tends to get a layer of its own; the last layer holds the rpm database, the
//! per-architecture marker, two whiteouts, an opaque directory and the caller's extra files.
//! Within a layer every non-directory path is owned by exactly one layer (except the final
//! layer's deliberate overrides); parent directories are repeated in each layer that needs
//! them, always with the same metadata. Nodes are sorted by path.
//!
//! The parts, in the order [`plan`] uses them:
//!
//! - [`planner`]: path claims and the helpers that add one item;
//! - [`skeleton`]: layer 0;
//! - [`named`]: the packages whose important files are spelled out;
//! - [`final_layer`]: the rpm database, marker, whiteouts and extra files of the last layer;
//! - [`packages`]: invented packages up to the requested file count, and [`fill`]: the
//!   generated files of each package;
//! - [`layers`]: packages bin-packed into layers, and each layer's items to sorted nodes
//!   with their parent directories;
//! - [`sizes`]: the byte budget spread over the generated files;
//! - [`entry`] and [`error`]: the planned entries and why planning fails.

mod entry;
mod error;
mod fill;
mod final_layer;
mod layers;
mod named;
mod packages;
mod planner;
mod sizes;
mod skeleton;
#[cfg(test)]
mod tests;

pub(crate) use entry::{Body, DIR, Kind, Meta, Node, REG, meta};
pub use error::TreeError;

use crate::spec::SynthSpec;
use layers::{describe, split};
use named::named_packages;
use packages::{count_files, file_counts, invented_count};
use planner::Planner;
use sizes::assign_sizes;

/// One layer's entries and a description for the image history.
#[derive(Debug, Clone)]
pub(crate) struct LayerPlan<'s> {
    /// Entries sorted by path.
    pub(crate) nodes: Vec<Node<'s>>,
    /// What the layer holds (`created_by` of its history entry).
    pub(crate) description: String,
}

/// The planned image.
#[derive(Debug, Clone)]
pub(crate) struct Tree<'s> {
    /// Layers, base first.
    pub(crate) layers: Vec<LayerPlan<'s>>,
    /// The kernel version (`uname -r`), e.g. `6.11.5-300.fc41.x86_64`.
    pub(crate) kernel_version: String,
}

impl Tree<'_> {
    /// Regular files excluding whiteouts.
    pub(crate) fn files(&self) -> u64 {
        self.layers
            .iter()
            .flat_map(|l| &l.nodes)
            .filter(|n| matches!(n.kind, Kind::File(_)))
            .count() as u64
    }

    /// Sum of regular file sizes.
    pub(crate) fn content_bytes(&self) -> u64 {
        self.layers
            .iter()
            .flat_map(|l| &l.nodes)
            .map(|n| match &n.kind {
                Kind::File(b) => b.len(),
                _ => 0,
            })
            .sum()
    }
}

/// Plan the tree for `spec` (which must be valid): the skeleton, the named packages and
/// the final layer's own items first, then invented packages filled up to the requested file
/// count, the packages split over the layers, the extra files checked and added last, the
/// nodes placed and the byte budget spread.
pub(crate) fn plan(spec: &SynthSpec) -> Result<Tree<'_>, TreeError> {
    let mut p = Planner::new(
        spec,
        named_packages(spec.variant)
            .map(|n| n.name.to_owned())
            .collect(),
    );
    let skeleton = p.skeleton()?;
    let mut packages = Vec::new();
    for def in named_packages(spec.variant) {
        packages.push(p.named(def)?);
    }
    let last = p.last_fixed()?;

    let fixed = count_files(&skeleton)
        + packages.iter().map(|p| count_files(&p.items)).sum::<u64>()
        + count_files(&last);
    for i in 0..invented_count(spec, fixed, packages.len() as u64)? {
        packages.push(p.invented(i));
    }
    let counts = file_counts(&packages, u64::from(spec.files).saturating_sub(fixed));
    for (pkg, n) in packages.iter_mut().zip(counts) {
        p.fill(pkg, n);
    }

    let n_layers = spec.layers as usize;
    let mut contents = split(n_layers, skeleton, packages);
    let extras = p.extras()?;
    if let Some(final_layer) = contents.last_mut() {
        final_layer.names.push(format!(
            "rpmdb, whiteouts, architecture marker{}",
            if extras.is_empty() {
                String::new()
            } else {
                format!(", {} extra files", extras.len())
            }
        ));
        final_layer.items.extend(last);
        final_layer.items.extend(extras);
    }

    let mut layers = Vec::with_capacity(n_layers);
    for (i, layer) in contents.into_iter().enumerate() {
        layers.push(LayerPlan {
            nodes: p.place(layer.items, i + 1 == n_layers)?,
            description: describe(i, n_layers, &layer.names),
        });
    }
    let mut tree = Tree {
        layers,
        kernel_version: p.kver.clone(),
    };
    assign_sizes(&mut tree, spec.total_bytes)?;
    Ok(tree)
}
