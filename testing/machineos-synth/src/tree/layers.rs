//! How planned items become layers: which layer each package goes to (bin-packing by
//! weight), and each layer's nodes — its items plus the parent directories they need (with
//! the tree's directory metadata), sorted by path — with a history description naming the
//! packages it holds.

use std::collections::BTreeMap;

use super::TreeError;
use super::entry::{DIR, Kind, Node};
use super::packages::Package;
use super::planner::{Item, Planner};

/// What one layer holds before its nodes are placed.
#[derive(Debug, Default)]
pub(super) struct LayerContents<'s> {
    /// The items, in the order they were added.
    pub(super) items: Vec<Item<'s>>,
    /// What they belong to (package names), for the history description.
    pub(super) names: Vec<String>,
}

/// The contents of `count` (at least 2) layers: the skeleton in layer 0, the packages
/// bin-packed by weight over the middle layers — heaviest first into the lightest layer, as
/// rpm-ostree's chunking does — or into layer 0 when there is no middle layer. The last
/// layer is left empty for the final layer's own items.
pub(super) fn split<'s>(
    count: usize,
    skeleton: Vec<Item<'s>>,
    mut packages: Vec<Package<'s>>,
) -> Vec<LayerContents<'s>> {
    let middle = count.saturating_sub(2);
    let mut layers: Vec<LayerContents<'s>> = (0..count).map(|_| LayerContents::default()).collect();
    if let Some(first) = layers.first_mut() {
        first.items = skeleton;
        first
            .names
            .push("filesystem, setup, fedora-release".to_owned());
    }
    let mut order: Vec<(u64, usize)> = packages
        .iter()
        .enumerate()
        .map(|(i, pkg)| (pkg.weight(), i))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // (bytes weight, packages) per layer: an empty layer wins over one holding only
    // weightless packages, so every package layer gets at least one package.
    let mut loads = vec![(0u64, 0usize); count];
    for (weight, i) in order {
        let layer = if middle == 0 {
            0
        } else {
            (1..=middle).min_by_key(|&l| (loads[l], l)).unwrap_or(1)
        };
        loads[layer].0 += weight;
        loads[layer].1 += 1;
        layers[layer].items.append(&mut packages[i].items);
        layers[layer].names.push(packages[i].name.clone());
    }
    layers
}

impl<'s> Planner<'s> {
    /// The nodes of one layer holding `items`: the items and their parent directories,
    /// sorted by path. In the `last` layer an item may replace an earlier one (extra files
    /// over the layer's own files); elsewhere a path given twice is a collision.
    pub(super) fn place(
        &self,
        items: Vec<Item<'s>>,
        last: bool,
    ) -> Result<Vec<Node<'s>>, TreeError> {
        let mut nodes: BTreeMap<String, Node<'s>> = BTreeMap::new();
        for item in items {
            let mut end = 0;
            while let Some(i) = item.path[end..].find('/') {
                let dir = &item.path[..end + i];
                if !nodes.contains_key(dir) {
                    let node = Node {
                        path: dir.to_owned(),
                        kind: Kind::Dir,
                        meta: self.dirs.get(dir).copied().unwrap_or(DIR),
                    };
                    nodes.insert(dir.to_owned(), node);
                }
                end += i + 1;
            }
            let node = Node {
                path: item.path.clone(),
                kind: item.kind,
                meta: item.meta,
            };
            match nodes.get(&item.path) {
                Some(existing) if existing.kind == Kind::Dir && node.kind == Kind::Dir => {}
                // The final layer's extra files may replace its own generated files.
                Some(_) if last => {
                    nodes.insert(item.path, node);
                }
                Some(_) => return Err(TreeError::Collision(item.path)),
                None => {
                    nodes.insert(item.path, node);
                }
            }
        }
        Ok(nodes.into_values().collect())
    }
}

/// The history description of layer `index` of `count`, holding packages `names`.
pub(super) fn describe(index: usize, count: usize, names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(6).map(String::as_str).collect();
    let more = names.len().saturating_sub(shown.len());
    let mut s = format!(
        "machineos-synth layer {}/{}: {}",
        index + 1,
        count,
        shown.join(", ")
    );
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}
