//! The equality check: (a) and each buildah build ((c), (d)) must make the same changes to
//! the base's filesystem.
//!
//! The images and the base are unpacked with umoci and snapshotted
//! (`machineos_testkit::tree`: kind, mode with special bits, owner, size, content hash,
//! link target, device; no timestamps). Each image's *changes* are the paths whose snapshot
//! differs from the base's (added, modified or removed); the two change sets, minus what
//! buildah itself adds ([`buildah_artifact`]) and where the two builds deliberately differ on
//! an ostree-encapsulated base ([`ostree_deviation`]), must be equal path by path and entry
//! by entry.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use machineos_testkit::TreeEntry;
use sha2::{Digest, Sha256};

/// A snapshot: path (with a leading `/`) → entry.
pub type Tree = BTreeMap<String, TreeEntry>;

/// The preset file ignition-apply appends `enable`/`disable` lines to. Debian's 2.14 appends
/// them in Go map order (random from run to run), current Ignition and machineos sort them;
/// systemd does not care about the order, so the comparison sorts its lines on both sides.
pub const PRESET_FILE: &str = "/etc/systemd/system-preset/20-ignition.preset";

/// Why a path changed by buildah's build is not part of the comparison, or `None` if it is.
///
/// Each entry is something the MCO's build image gets from buildah or from the
/// Containerfile's plumbing, not from the configuration, so a native build does not produce
/// it. The list is exact paths (and what lies below the scratch directories), so anything
/// else buildah changed would show up as a difference.
pub fn buildah_artifact(path: &str) -> Option<&'static str> {
    let below = |dir: &str| path.starts_with(&format!("{dir}/"));
    // `RUN` bind-mounts the host's /etc/hosts, /etc/hostname and /etc/resolv.conf over the
    // image's, and the (empty) mount points it had to create stay in the committed layer
    // (observed: /etc/hostname and /etc/resolv.conf, which the base lacks).
    if matches!(path, "/etc/hosts" | "/etc/hostname" | "/etc/resolv.conf") {
        return Some("RUN's bind-mount targets for the host's name resolution files");
    }
    // `RUN` gives its process /run/.containerenv and /run/secrets (mounts.conf); should
    // they survive the commit, they are the runtime's, not the configuration's.
    if path == "/run/.containerenv" || path == "/run/secrets" || below("/run/secrets") {
        return Some("RUN's runtime files");
    }
    // /tmp/config.ign is how the Containerfile hands the config to ignition-apply, and
    // `rm -rf /tmp/* /var/tmp/*` (for `ostree container commit`) empties both; the
    // directories themselves are compared.
    if below("/tmp") || below("/var/tmp") {
        return Some("the Containerfile's hand-over of config.ign, removed by the commit clean-up");
    }
    None
}

/// Why a path changed by one of the builds is, on an ostree-encapsulated base, a known and
/// deliberate difference between them (README, "What reaches a node"), or `None`.
///
/// - The object store: ignition-apply appends through an inode, so under buildah on vfs
///   (case (c)) an append to a file whose contents equal another file's also rewrites their
///   shared ostree object (and that other file, which stays compared); machineos writes only
///   the named file. A node never deploys the object store itself. On overlay (case (d))
///   the append copies the file up first, which breaks the hard link, so (d) leaves the
///   object as it is (observed: the exception applies to (c) only).
/// - machineos's delivery of `/var` content to nodes that rebase: the factory copies and the
///   tmpfiles.d snippet.
pub fn ostree_deviation(path: &str) -> Option<&'static str> {
    if path.starts_with(machineos_layer::overlay::OSTREE_OBJECTS) {
        return Some("the ostree object store, written through by buildah's in-place append");
    }
    let factory = machineos_layer::plan::FACTORY;
    if path == machineos_layer::plan::VAR_TMPFILES
        || path == factory
        || path
            .strip_prefix(factory)
            .is_some_and(|r| r == "/var" || r.starts_with("/var/"))
    {
        return Some("machineos's factory copy of /var content and its tmpfiles.d snippet");
    }
    None
}

/// Snapshots `root`, with [`PRESET_FILE`]'s hash taken over its sorted lines.
pub fn snapshot(root: &Path) -> Result<Tree> {
    let mut tree = machineos_testkit::try_snapshot(root)
        .with_context(|| format!("snapshot of {}", root.display()))?;
    if let Some(entry) = tree.get_mut(PRESET_FILE) {
        let file = root.join(PRESET_FILE.trim_start_matches('/'));
        // Only a regular file is read (a symlink could point anywhere on the host).
        if entry.sha256.is_some() {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort_unstable();
            let sorted = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            entry.sha256 = Some(hex::encode(Sha256::digest(sorted.as_bytes())));
        }
    }
    Ok(tree)
}

/// The paths whose entries in `image` differ from `base` (added, changed or removed).
pub fn changes(base: &Tree, image: &Tree) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, entry) in image {
        if base.get(path) != Some(entry) {
            out.insert(path.clone());
        }
    }
    for path in base.keys() {
        if !image.contains_key(path) {
            out.insert(path.clone());
        }
    }
    out
}

/// The outcome of one comparison of (a) with a buildah build.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// The buildah build's case, `(c)` or `(d)`: the right side.
    pub other: &'static str,
    /// Paths (a) changed relative to the base.
    pub changed_a: usize,
    /// Paths the buildah build changed relative to the base, buildah's artefacts included.
    pub changed_other: usize,
    /// Paths left out of the comparison, with the reason (changed by either side).
    pub excluded: Vec<(String, &'static str)>,
    /// Paths both changed and compared.
    pub compared: usize,
    /// Differences, one line each, `(a)` being the left side; empty when equal.
    pub differences: Vec<String>,
}

impl Comparison {
    /// Whether (a) and the buildah build made the same changes.
    pub fn equal(&self) -> bool {
        self.differences.is_empty()
    }
}

/// Compares the changes (a) and the buildah build `other` (its case key, e.g. `(c)`), whose
/// tree is `c`, made to `base`.
pub fn compare(base: &Tree, a: &Tree, other: &'static str, c: &Tree) -> Comparison {
    let changed_a = changes(base, a);
    let changed_c = changes(base, c);
    let mut excluded = Vec::new();
    let mut paths = BTreeSet::new();
    for path in changed_a.union(&changed_c) {
        match buildah_artifact(path).or_else(|| ostree_deviation(path)) {
            Some(why) => excluded.push((path.clone(), why)),
            None => {
                paths.insert(path.clone());
            }
        }
    }
    let left: Tree = paths
        .iter()
        .filter_map(|p| a.get(p).map(|e| (p.clone(), e.clone())))
        .collect();
    let right: Tree = paths
        .iter()
        .filter_map(|p| c.get(p).map(|e| (p.clone(), e.clone())))
        .collect();
    let differences = machineos_testkit::diff(&left, &right)
        .into_iter()
        .map(|d| {
            d.replace("only in a", "only in (a)")
                .replace("only in b", &format!("only in {other}"))
        })
        .collect();
    Comparison {
        other,
        changed_a: changed_a.len(),
        changed_other: changed_c.len(),
        excluded,
        compared: paths.len(),
        differences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_testkit::EntryKind;

    fn file(sha: &str) -> TreeEntry {
        TreeEntry {
            kind: EntryKind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 1,
            link_target: None,
            sha256: Some(sha.to_owned()),
            rdev: None,
        }
    }

    fn tree(entries: &[(&str, &str)]) -> Tree {
        entries
            .iter()
            .map(|(p, s)| ((*p).to_owned(), file(s)))
            .collect()
    }

    #[test]
    fn equal_changes_ignore_buildah_artifacts() {
        let base = tree(&[("/etc/a", "1"), ("/etc/b", "1")]);
        let a = tree(&[("/etc/a", "2"), ("/etc/b", "1"), ("/etc/new", "3")]);
        let c = tree(&[
            ("/etc/a", "2"),
            ("/etc/b", "1"),
            ("/etc/new", "3"),
            ("/etc/hostname", "0"),
            ("/run/.containerenv", "0"),
        ]);
        let r = compare(&base, &a, "(c)", &c);
        assert!(r.equal(), "{r:?}");
        assert_eq!((r.changed_a, r.changed_other, r.compared), (2, 4, 2));
        assert_eq!(r.excluded.len(), 2);
    }

    #[test]
    fn ostree_deviations_are_left_out_and_nothing_else() {
        let obj = "/sysroot/ostree/repo/objects/34/b8.file";
        let base = tree(&[(obj, "1"), ("/etc/dup", "1"), ("/usr/dup", "1")]);
        let a = tree(&[
            (obj, "1"),
            ("/etc/dup", "2"),
            ("/usr/dup", "1"),
            ("/usr/lib/tmpfiles.d/machineos-var.conf", "4"),
            ("/usr/share/factory/var/lib/x", "5"),
        ]);
        let c = tree(&[(obj, "2"), ("/etc/dup", "2"), ("/usr/dup", "2")]);
        let r = compare(&base, &a, "(c)", &c);
        assert_eq!(r.excluded.len(), 3, "{r:?}");
        // The other file buildah's append reached through the object still counts.
        assert_eq!(r.differences, ["/usr/dup: content differs (same size)"]);
        assert_eq!(ostree_deviation("/usr/share/factory-x"), None);
        assert_eq!(ostree_deviation("/usr/share/factory/etc/x"), None);
    }

    #[test]
    fn different_changes_are_listed() {
        let base = tree(&[("/etc/a", "1"), ("/etc/gone", "1")]);
        let a = tree(&[("/etc/a", "2")]);
        let c = tree(&[("/etc/a", "3"), ("/etc/gone", "1"), ("/etc/extra", "1")]);
        let r = compare(&base, &a, "(c)", &c);
        assert_eq!(
            r.differences,
            [
                "/etc/a: content differs (same size)",
                "/etc/extra: only in (c) (file)",
                "/etc/gone: only in (c) (file)",
            ]
        );
        let r = compare(&base, &a, "(d)", &c);
        assert_eq!(r.other, "(d)");
        assert_eq!(r.differences[1], "/etc/extra: only in (d) (file)");
    }
}
