//! A planned tree as ostree-ext encapsulates an ostree commit (the "chunked" images Fedora
//! CoreOS and RHEL CoreOS ship): the layers are flattened into one filesystem (whiteouts
//! and opaque directories applied, hard links become one content object, `/etc` moves to
//! `/usr/etc`), committed (content, `dirmeta`, `dirtree` and `commit` objects), and
//! written back as layers in ostree-ext's export format version 1:
//!
//! - every layer starts with the repository skeleton (`sysroot/ostree/repo`, `objects/00`
//!   … `objects/ff`, the standard subdirectories and a `config` declaring
//!   `bare-split-xattrs`);
//! - layer 1 (the *commit layer*) then holds the commit object, every `dirmeta` and
//!   `dirtree` object, a directory entry for every directory of the commit (with its
//!   owner and mode; `usr/etc` written as `etc`), `var/tmp`, and the content of the first
//!   planned layer;
//! - each later layer (a *chunk*) holds the content objects first planned in the
//!   corresponding layer, in checksum order: for each, an empty `.file-xattrs` object
//!   (once per layer), a `.file-xattrs-link` hard link to it, the `.file` object (the data,
//!   or the symlink), then one hard link per path of the commit that has this content (a
//!   regular file of size 0 where the content is empty, as ostree-ext writes them).
//!
//! The image's `ostree.final-diffid` label is the last layer's diff_id, `ostree.commit` the
//! commit checksum. Which layers are ostree's and how the importer reads them:
//! ostree-ext 0.15 `tar/export.rs`, `container/encapsulate.rs`, `tar/import.rs`.

use std::collections::BTreeMap;
use std::io::{self, Read};

use super::objects::{self, CommitMeta, ContentHasher, Csum};
use crate::content::{BLOCK, Content};
use crate::tree::{Body, DIR, Kind, LayerPlan, Meta, Node, REG, Tree, meta};

/// The repository configuration of an exported commit.
const REPO_CONFIG: &str = "[core]\nrepo_version=1\nmode=bare-split-xattrs\n";
/// Where the object store lives in every layer.
const REPO: &str = "sysroot/ostree/repo";

/// One path of the flattened commit.
#[derive(Debug, Clone)]
enum Flat<'s> {
    Dir(Meta),
    File(Body<'s>, Meta),
    Symlink(String, Meta),
}

/// The commit the layers were encapsulated from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Encapsulated {
    /// The commit checksum (label `ostree.commit`).
    pub(crate) commit: String,
}

/// Flatten `tree`, commit it and return the encapsulated layers in place of the planned
/// ones, with the commit's checksum. `version` and the tree's kernel version go into the
/// commit metadata; `timestamp` is the commit time.
pub(crate) fn encapsulate<'s>(
    tree: Tree<'s>,
    version: &str,
    timestamp: u64,
    subject: &str,
) -> io::Result<(Tree<'s>, Encapsulated)> {
    let (flat, first_layer) = flatten(&tree.layers);
    // Content checksums, and which planned layer first holds each object.
    let mut block = Box::new([0u8; BLOCK]);
    let mut buf = vec![0u8; 1 << 16];
    let mut csums: BTreeMap<&str, Csum> = BTreeMap::new();
    for (path, f) in &flat {
        let c = match f {
            Flat::Dir(_) => continue,
            Flat::File(body, m) => file_checksum(body, *m, &mut block, &mut buf)?,
            Flat::Symlink(t, m) => objects::symlink_checksum(m.uid, m.gid, t),
        };
        csums.insert(path.as_str(), c);
    }
    // Directory objects, bottom-up.
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for path in flat.keys() {
        if !path.is_empty() {
            let (parent, _) = split(path);
            children.entry(parent).or_default().push(path.as_str());
        }
    }
    let mut meta_objects: BTreeMap<Csum, Vec<u8>> = BTreeMap::new();
    let mut order = Vec::new();
    let (root_tree, root_meta) =
        dir_objects("", &flat, &children, &csums, &mut meta_objects, &mut order);
    let commit_bytes = objects::commit(
        &CommitMeta {
            version,
            linux: &tree.kernel_version,
        },
        subject,
        timestamp,
        &root_tree,
        &root_meta,
    );
    let commit = objects::checksum(&commit_bytes);

    // Layer 1: skeleton, commit, metadata objects, directories, var/tmp.
    let mut first = repo_skeleton();
    first.push(object_file(&commit, "commit", commit_bytes));
    for (kind, c) in &order {
        if let Some(bytes) = meta_objects.remove(c) {
            first.push(object_file(c, kind, bytes));
        }
    }
    for (path, f) in &flat {
        if let Flat::Dir(m) = f
            && !path.is_empty()
            && path != "sysroot"
        {
            first.push(Node {
                path: tar_path(path),
                kind: Kind::Dir,
                meta: *m,
            });
        }
    }
    if !flat.contains_key("var/tmp") {
        first.push(Node {
            path: "var/tmp".into(),
            kind: Kind::Dir,
            meta: meta(0o1777, 0, 0),
        });
    }

    // Content objects per layer, in checksum order, each with its paths.
    let n = tree.layers.len();
    let mut per_layer: Vec<BTreeMap<Csum, Vec<&str>>> = vec![BTreeMap::new(); n];
    let mut home: BTreeMap<Csum, usize> = BTreeMap::new();
    for (path, c) in &csums {
        let layer = *home
            .entry(*c)
            .or_insert_with(|| first_layer.get(*path).copied().unwrap_or(0));
        per_layer[layer].entry(*c).or_default().push(path);
    }
    let mut layers = Vec::with_capacity(n);
    for (i, objs) in per_layer.into_iter().enumerate() {
        let mut nodes = if i == 0 {
            std::mem::take(&mut first)
        } else {
            repo_skeleton()
        };
        if !objs.is_empty() {
            nodes.push(xattrs_object());
        }
        for (c, paths) in objs {
            content_nodes(&mut nodes, &c, &paths, &flat);
        }
        let description = if i == 0 {
            format!("ostree export of commit {}", hex::encode(commit))
        } else {
            tree.layers[i].description.clone()
        };
        layers.push(LayerPlan { nodes, description });
    }
    Ok((
        Tree {
            layers,
            kernel_version: tree.kernel_version,
        },
        Encapsulated {
            commit: hex::encode(commit),
        },
    ))
}

/// A flattened tree by path, and for each non-directory the planned layer that wrote it.
type Flattened<'s> = (BTreeMap<String, Flat<'s>>, BTreeMap<String, usize>);

/// The merged filesystem of `layers` (paths relative, `""` the root, `/etc` as
/// `usr/etc`), and for each non-directory the planned layer that last wrote it.
fn flatten<'s>(layers: &[LayerPlan<'s>]) -> Flattened<'s> {
    let mut fs: BTreeMap<String, Flat<'s>> = BTreeMap::new();
    let mut layer_of: BTreeMap<String, usize> = BTreeMap::new();
    fs.insert(String::new(), Flat::Dir(DIR));
    for (li, layer) in layers.iter().enumerate() {
        // Whiteouts apply to the layers below, before this layer's own entries.
        for n in &layer.nodes {
            if let Kind::Whiteout = n.kind {
                let (dir, name) = split(&n.path);
                let victim = if name == ".wh..wh..opq" {
                    None
                } else {
                    Some(join(dir, name.trim_start_matches(".wh.")))
                };
                match victim {
                    Some(v) => remove_tree(&mut fs, &mut layer_of, &v, true),
                    None => remove_tree(&mut fs, &mut layer_of, dir, false),
                }
            }
        }
        for n in &layer.nodes {
            let entry = match &n.kind {
                Kind::Whiteout => continue,
                Kind::Dir => Flat::Dir(n.meta),
                Kind::File(b) => Flat::File(b.clone(), n.meta),
                Kind::Symlink(t) => Flat::Symlink(t.clone(), n.meta),
                Kind::HardLink(t) => match fs.get(&commit_path(t)) {
                    Some(e) => e.clone(),
                    None => continue,
                },
            };
            let p = commit_path(&n.path);
            // Parents a layer leaves implicit are root-owned 0755 directories.
            let mut anc = p.as_str();
            while let Some((up, _)) = anc.rsplit_once('/') {
                fs.entry(up.to_owned()).or_insert(Flat::Dir(DIR));
                anc = up;
            }
            if !matches!(entry, Flat::Dir(_)) {
                layer_of.insert(p.clone(), li);
            }
            fs.insert(p, entry);
        }
    }
    (fs, layer_of)
}

/// Remove `path` (with `itself`) or only what is below it.
fn remove_tree(
    fs: &mut BTreeMap<String, Flat<'_>>,
    layer_of: &mut BTreeMap<String, usize>,
    path: &str,
    itself: bool,
) {
    let path = commit_path(path);
    let below = format!("{path}/");
    let doomed: Vec<String> = fs
        .range(path.clone()..)
        .take_while(|(k, _)| k.starts_with(&path))
        .filter(|(k, _)| (itself && **k == path) || k.starts_with(&below))
        .map(|(k, _)| k.clone())
        .collect();
    for k in doomed {
        fs.remove(&k);
        layer_of.remove(&k);
    }
}

/// The commit's path for a tar path: `etc/...` lives in `usr/etc/...`.
fn commit_path(p: &str) -> String {
    match p.strip_prefix("etc") {
        Some("") => "usr/etc".into(),
        Some(rest) if rest.starts_with('/') => format!("usr/etc{rest}"),
        _ => p.to_owned(),
    }
}

/// The tar path of a commit path: `usr/etc/...` is written as `etc/...`.
fn tar_path(p: &str) -> String {
    match p.strip_prefix("usr/etc") {
        Some("") => "etc".into(),
        Some(rest) if rest.starts_with('/') => format!("etc{rest}"),
        _ => p.to_owned(),
    }
}

fn split(p: &str) -> (&str, &str) {
    p.rsplit_once('/').unwrap_or(("", p))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// The ostree checksum of a regular file.
fn file_checksum(
    body: &Body<'_>,
    m: Meta,
    block: &mut [u8; BLOCK],
    buf: &mut [u8],
) -> io::Result<Csum> {
    let mut h = ContentHasher::regular(m.uid, m.gid, m.mode);
    match body {
        Body::Inline(b) => h.update(b),
        Body::Extra(b) => h.update(b),
        Body::Synth(s) => {
            let mut content = Content::new(s.seed, s.size, s.style, s.prefix, block);
            loop {
                let n = content.read(buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
        }
    }
    Ok(h.finish())
}

/// The `dirtree` and `dirmeta` checksums of directory `path`, storing every object met in
/// `out` and the (kind, checksum) order ostree-ext writes them in in `order`.
fn dir_objects(
    path: &str,
    flat: &BTreeMap<String, Flat<'_>>,
    children: &BTreeMap<&str, Vec<&str>>,
    csums: &BTreeMap<&str, Csum>,
    out: &mut BTreeMap<Csum, Vec<u8>>,
    order: &mut Vec<(&'static str, Csum)>,
) -> (Csum, Csum) {
    let mut files: Vec<(&str, Csum)> = Vec::new();
    let mut dirs: Vec<(&str, Csum, Csum)> = Vec::new();
    let mut kids: Vec<&str> = children.get(path).cloned().unwrap_or_default();
    kids.sort_by(|a, b| split(a).1.as_bytes().cmp(split(b).1.as_bytes()));
    let mut sub_order = Vec::new();
    for k in kids {
        let name = split(k).1;
        match flat.get(k) {
            Some(Flat::Dir(_)) => {
                let (t, m) = dir_objects(k, flat, children, csums, out, &mut sub_order);
                dirs.push((name, t, m));
            }
            Some(_) => {
                if let Some(c) = csums.get(k) {
                    files.push((name, *c));
                }
            }
            None => {}
        }
    }
    let tree = objects::dirtree(&files, &dirs);
    let tree_c = objects::checksum(&tree);
    let m = match flat.get(path) {
        Some(Flat::Dir(m)) => *m,
        _ => DIR,
    };
    let meta_bytes = objects::dirmeta(m.uid, m.gid, m.mode);
    let meta_c = objects::checksum(&meta_bytes);
    out.entry(tree_c).or_insert(tree);
    out.entry(meta_c).or_insert(meta_bytes);
    order.push(("dirmeta", meta_c));
    order.push(("dirtree", tree_c));
    order.append(&mut sub_order);
    (tree_c, meta_c)
}

/// The path of an object in the exported repository.
fn object_path(c: &Csum, suffix: &str) -> String {
    let h = hex::encode(c);
    format!("{REPO}/objects/{}/{}.{suffix}", &h[..2], &h[2..])
}

/// A metadata object (or the repo config): a regular 0644 root file.
fn object_file<'s>(c: &Csum, suffix: &str, bytes: Vec<u8>) -> Node<'s> {
    Node {
        path: object_path(c, suffix),
        kind: Kind::File(Body::Inline(bytes)),
        meta: REG,
    }
}

/// The empty extended-attributes object every content object of a layer links to.
fn xattrs_object<'s>() -> Node<'s> {
    object_file(&objects::checksum(&[]), "file-xattrs", Vec::new())
}

/// The repository skeleton at the start of every layer.
fn repo_skeleton<'s>() -> Vec<Node<'s>> {
    let mut v = Vec::new();
    let mut dir = |path: String| {
        v.push(Node {
            path,
            kind: Kind::Dir,
            meta: DIR,
        })
    };
    for d in [
        "sysroot",
        "sysroot/ostree",
        REPO,
        "sysroot/ostree/repo/objects",
    ] {
        dir(d.to_owned());
    }
    for i in 0..=0xffu32 {
        dir(format!("{REPO}/objects/{i:02x}"));
    }
    for d in [
        "extensions",
        "refs",
        "refs/heads",
        "refs/mirrors",
        "refs/remotes",
        "state",
        "tmp",
        "tmp/cache",
    ] {
        dir(format!("{REPO}/{d}"));
    }
    v.push(Node {
        path: format!("{REPO}/config"),
        kind: Kind::File(Body::Inline(REPO_CONFIG.as_bytes().to_vec())),
        meta: REG,
    });
    v
}

/// One content object and its paths (distinct and sorted, as the checksum map yields them).
fn content_nodes<'s>(
    nodes: &mut Vec<Node<'s>>,
    c: &Csum,
    paths: &[&str],
    flat: &BTreeMap<String, Flat<'s>>,
) {
    let Some(first) = paths.first().and_then(|p| flat.get(*p)) else {
        return;
    };
    let obj = object_path(c, "file");
    nodes.push(Node {
        path: object_path(c, "file-xattrs-link"),
        kind: Kind::HardLink(object_path(&objects::checksum(&[]), "file-xattrs")),
        meta: REG,
    });
    let (kind, m, empty) = match first {
        Flat::File(b, m) => (Kind::File(b.clone()), *m, b.len() == 0),
        Flat::Symlink(t, m) => (Kind::Symlink(t.clone()), meta(0o777, m.uid, m.gid), false),
        Flat::Dir(_) => return,
    };
    nodes.push(Node {
        path: obj.clone(),
        kind,
        meta: m,
    });
    for p in paths {
        nodes.push(Node {
            path: tar_path(p),
            kind: if empty {
                Kind::File(Body::Inline(Vec::new()))
            } else {
                Kind::HardLink(obj.clone())
            },
            meta: m,
        });
    }
}
