//! A configuration change applied to the running system: the staged image's `/etc` and
//! `/var` contents copied into the live `/etc` and `/var`, so the node runs the new
//! configuration without booting the new image, and boots exactly that image later.
//!
//! Why this is exact on an ostree host (ostree's `deploy.c`, `merge_configuration_from` and
//! `copy_modified_config_file`; ostree-ext's container import): an image's `/etc` is
//! checked out as the deployment's `usr/etc` (the "default" configuration), and the `/var`
//! content machineos's layer carries is in `usr/share/factory/var` (systemd-tmpfiles `C`
//! lines copy it where missing). A staged deployment's checkout exists as soon as it is
//! staged; its `/etc` is made at shutdown by a three-way merge: every file of the live
//! `/etc` that differs from the *booted* deployment's `usr/etc` is a local change and wins,
//! everything else comes from the new `usr/etc`. So a file the change wrote into the live
//! `/etc` with the new image's contents, mode, owner and extended attributes survives the
//! merge as exactly the new image's file, and a file it removed stays removed. After that
//! boot the file equals the booted default again: later images update it as usual.
//!
//! Contract of [`apply`]:
//! * **Only configuration.** The booted and staged deployments' `usr` trees are compared
//!   first (unchanged files are hard links to one ostree object, so equal inodes end the
//!   comparison; else kind, mode, owner, size, contents, link target). A difference outside
//!   `usr/etc`, `usr/share/factory/var` and the layer's tmpfiles snippet
//!   (`usr/lib/tmpfiles.d/machineos-var.conf`) refuses the apply
//!   ([`HostError::Unsupported`], naming up to five paths): that change needs the image
//!   booted, and nothing was written.
//! * **What is written:** every path that differs between the booted and the staged
//!   deployment's `usr/etc` (→ `/etc`) and `usr/share/factory/var` (→ `/var`), plus every
//!   path an earlier live apply of this boot wrote (the [`AppliedRecord`]: a change the next
//!   image reverts is reverted live too). Each is made equal to the staged image's entry:
//!   files and symbolic links written to a temporary name beside it and renamed over it
//!   (never half-written, synced to disk first), directories created or their metadata
//!   set; owner, then mode, and extended attributes copied (in `/etc` the SELinux label
//!   ostree gave the checkout; in `/var` the live path keeps its own label). Parents before
//!   children. In `/etc` an entry the staged image lacks is removed — a file or link; a
//!   directory only once empty, so what the node keeps there stays. **`/var` is data:
//!   nothing there is ever removed or replaced by a file** (a reboot would not either: the
//!   layer's tmpfiles lines only create). A path whose directory on the running system is a
//!   link or a file is refused: a write never follows a link out of the host root.
//! * [`sync_recorded`]: the recorded `/etc` paths made the next image's (or, going back,
//!   the booted one's) again, with no `/usr` check — before a reboot into another image, so
//!   its `/etc` merge keeps none of them as a local change. `/var` paths are written only by
//!   the apply whose image changes them; never re-synced (what an app changed there since
//!   is its own, as a reboot would leave it).
//! * **Idempotent:** applying again changes nothing more; an apply cut short is finished by
//!   the next one (the record is written before the first change and again after the last).
//!
//! Hand-written: a tree comparison and copy with these rules is what `ostree admin
//! config-diff` and `cp -a` do in parts; no crate does both with ostree's semantics.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::HostError;

/// The image's trees that are applied live, and where each goes on the running system.
pub const LIVE_TREES: [(&str, &str); 2] = [("usr/etc", "etc"), ("usr/share/factory/var", "var")];

/// Files outside [`LIVE_TREES`] that change with the `/var` content and need no boot.
const BOOKKEEPING: [&str; 1] = ["usr/lib/tmpfiles.d/machineos-var.conf"];

/// How many differing paths a refusal names.
const NAMED: usize = 5;

/// One ostree deployment, as bootc's and rpm-ostree's status name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    /// The stateroot (`osname`: `fedora-coreos`, `default`).
    pub stateroot: String,
    /// The commit checksum.
    pub checksum: String,
    /// The deployment serial.
    pub serial: u32,
}

impl Deployment {
    /// Its checkout under the host root `root`:
    /// `sysroot/ostree/deploy/<stateroot>/deploy/<checksum>.<serial>`.
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join("sysroot/ostree/deploy")
            .join(&self.stateroot)
            .join("deploy")
            .join(format!("{}.{}", self.checksum, self.serial))
    }
}

/// What an apply wrote and removed (paths on the running system, `/etc/…`, `/var/…`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Written or updated.
    pub written: Vec<String>,
    /// Removed.
    pub removed: Vec<String>,
}

/// The paths live applies wrote since the last boot, one per line (`etc/chrony.conf`), in a
/// file on the host's `/run`: cleared by a reboot (the booted image then holds them); a soft
/// reboot may keep it, which costs nothing — the paths then equal the booted image's, and a
/// later apply or sync writes only what differs.
#[derive(Debug, Clone)]
pub struct AppliedRecord {
    path: PathBuf,
}

impl AppliedRecord {
    /// The record in `state_dir`.
    pub fn new(state_dir: &Path) -> AppliedRecord {
        AppliedRecord {
            path: state_dir.join("live-applied"),
        }
    }

    fn read(&self) -> BTreeSet<String> {
        fs::read_to_string(&self.path)
            .map(|t| {
                t.lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn write(&self, paths: &BTreeSet<String>) -> Result<(), HostError> {
        let text: String = paths.iter().map(|p| format!("{p}\n")).collect();
        crate::files::write_atomic(&self.path, text.as_bytes(), 0o644)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HostError + '_ {
    move |source| HostError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn lstat(path: &Path) -> Result<Option<Metadata>, HostError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        // A parent that is not a directory (any more): the path does not exist.
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

fn entries(dir: &Path) -> Result<BTreeSet<OsString>, HostError> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.file_name()).map_err(io(dir)))
            .collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(BTreeSet::new()),
        Err(e) => Err(io(dir)(e)),
    }
}

/// Which extended attributes a tree's entries carry over: all of them in `/etc` (ostree
/// labels `usr/etc` with the labels of `/etc`), all but the SELinux label for `/var` (the
/// factory copy is labelled as `/usr` content; the live path keeps the label of its place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Labels {
    Copied,
    Kept,
}

fn wanted(name: &[u8], labels: Labels) -> bool {
    labels == Labels::Copied || name != b"security.selinux"
}

/// Whether two entries (both present) are equal in what a checkout carries.
fn same(
    a: &Path,
    ma: &Metadata,
    b: &Path,
    mb: &Metadata,
    labels: Labels,
) -> Result<bool, HostError> {
    if ma.dev() == mb.dev() && ma.ino() == mb.ino() {
        return Ok(true);
    }
    let (ta, tb) = (ma.file_type(), mb.file_type());
    if ta.is_dir() != tb.is_dir()
        || ta.is_symlink() != tb.is_symlink()
        || ta.is_file() != tb.is_file()
    {
        return Ok(false);
    }
    if ma.mode() != mb.mode() || ma.uid() != mb.uid() || ma.gid() != mb.gid() {
        return Ok(false);
    }
    let attrs = |p: &Path| -> Result<Xattrs, HostError> {
        let mut x = xattrs(p)?;
        x.retain(|(n, _)| wanted(n, labels));
        Ok(x)
    };
    if attrs(a)? != attrs(b)? {
        return Ok(false);
    }
    if ta.is_symlink() {
        return Ok(fs::read_link(a).map_err(io(a))? == fs::read_link(b).map_err(io(b))?);
    }
    if ta.is_file() {
        return Ok(
            ma.len() == mb.len() && fs::read(a).map_err(io(a))? == fs::read(b).map_err(io(b))?
        );
    }
    // Directories (their entries are compared one by one) and special files by metadata.
    Ok(true)
}

/// The paths (relative, `/`-joined) under `old` and `new` that differ; `skip` (relative
/// paths) are not entered; stop after `limit`. An entry only in `new` that is a directory
/// brings all its descendants (each must be created).
fn differences(
    old: &Path,
    new: &Path,
    rel: &str,
    skip: &[&str],
    limit: usize,
    labels: Labels,
    out: &mut Vec<String>,
) -> Result<(), HostError> {
    let names: BTreeSet<OsString> = entries(&old.join(rel))?
        .into_iter()
        .chain(entries(&new.join(rel))?)
        .collect();
    for name in names {
        if out.len() >= limit {
            return Ok(());
        }
        let Some(name) = name.to_str() else {
            return Err(HostError::Output {
                tool: "live apply".into(),
                path: format!("{rel}/{}", name.to_string_lossy()),
                message: "not a UTF-8 file name".into(),
            });
        };
        let r = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        if skip.contains(&r.as_str()) {
            continue;
        }
        if skip.iter().any(|k| k.starts_with(&format!("{r}/"))) {
            // Above a skipped tree: only what it holds besides that tree counts.
            differences(old, new, &r, skip, limit, labels, out)?;
            continue;
        }
        let (a, b) = (old.join(&r), new.join(&r));
        match (lstat(&a)?, lstat(&b)?) {
            (Some(ma), Some(mb)) => {
                if !same(&a, &ma, &b, &mb, labels)? {
                    out.push(r.clone());
                }
                if ma.is_dir() && mb.is_dir() {
                    differences(old, new, &r, skip, limit, labels, out)?;
                } else if mb.is_dir() {
                    descendants(new, &r, limit, out)?;
                } else if ma.is_dir() {
                    descendants(old, &r, limit, out)?;
                }
            }
            (None, Some(mb)) => {
                out.push(r.clone());
                if mb.is_dir() {
                    descendants(new, &r, limit, out)?;
                }
            }
            (Some(ma), None) => {
                // Removed: each entry it had, so each is removed alone (a directory only
                // once empty: what the node put there stays).
                out.push(r.clone());
                if ma.is_dir() {
                    descendants(old, &r, limit, out)?;
                }
            }
            (None, None) => {}
        }
    }
    Ok(())
}

fn descendants(
    tree: &Path,
    rel: &str,
    limit: usize,
    out: &mut Vec<String>,
) -> Result<(), HostError> {
    for name in entries(&tree.join(rel))? {
        if out.len() >= limit {
            return Ok(());
        }
        let r = format!("{rel}/{}", name.to_string_lossy());
        out.push(r.clone());
        if lstat(&tree.join(&r))?.is_some_and(|m| m.is_dir()) {
            descendants(tree, &r, limit, out)?;
        }
    }
    Ok(())
}

/// Extended attributes, name and value, sorted by name.
type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

fn xattrs(path: &Path) -> Result<Xattrs, HostError> {
    let mut names = vec![0u8; 4096];
    let n = match rustix::fs::llistxattr(path, &mut names) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(io(path)(e.into())),
    };
    let mut out = Vec::new();
    for name in names[..n].split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let mut value = vec![0u8; 65536];
        let cname = std::ffi::CString::new(name).map_err(|e| io(path)(std::io::Error::other(e)))?;
        let len = rustix::fs::lgetxattr(path, cname.as_c_str(), &mut value)
            .map_err(|e| io(path)(e.into()))?;
        value.truncate(len);
        out.push((name.to_vec(), value));
    }
    out.sort();
    Ok(out)
}

/// Make `dst` carry `src`'s owner, mode (not for links; after the owner, which clears the
/// set-id bits) and extended attributes.
fn copy_metadata(src: &Path, m: &Metadata, dst: &Path, labels: Labels) -> Result<(), HostError> {
    std::os::unix::fs::lchown(dst, Some(m.uid()), Some(m.gid())).map_err(io(dst))?;
    if !m.file_type().is_symlink() {
        fs::set_permissions(dst, fs::Permissions::from_mode(m.mode() & 0o7777)).map_err(io(dst))?;
    }
    for (name, value) in xattrs(src)? {
        if !wanted(&name, labels) {
            continue;
        }
        let cname = std::ffi::CString::new(name).map_err(|e| io(dst)(std::io::Error::other(e)))?;
        match rustix::fs::lsetxattr(
            dst,
            cname.as_c_str(),
            &value,
            rustix::fs::XattrFlags::empty(),
        ) {
            Ok(()) | Err(rustix::io::Errno::NOTSUP) => {}
            Err(e) => return Err(io(dst)(e.into())),
        }
    }
    Ok(())
}

/// How a tree is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tree {
    labels: Labels,
    /// Whether what the image no longer has is removed (`/etc`) or kept (`/var`: data).
    removes: bool,
}

/// Make `dst` equal to `src`, which is present; `true` when something was written. A
/// directory where the image has a file or link is replaced only where the tree removes.
fn write(src: &Path, m: &Metadata, dst: &Path, tree: Tree) -> Result<bool, HostError> {
    let d = lstat(dst)?;
    if let Some(d) = &d
        && same(src, m, dst, d, tree.labels)?
    {
        return Ok(false);
    }
    if m.is_dir() {
        if !d.as_ref().is_some_and(Metadata::is_dir) {
            if d.is_some() {
                if !tree.removes {
                    // A node's file where the image has a directory: data, kept.
                    return Ok(false);
                }
                fs::remove_file(dst).map_err(io(dst))?;
            }
            fs::create_dir(dst).map_err(io(dst))?;
        }
        copy_metadata(src, m, dst, tree.labels)?;
        return Ok(true);
    }
    if d.as_ref().is_some_and(Metadata::is_dir) && !tree.removes {
        return Ok(false);
    }
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dst.with_file_name(format!(".{name}.machineos-live"));
    if lstat(&tmp)?.is_some() {
        fs::remove_file(&tmp).map_err(io(&tmp))?;
    }
    if m.file_type().is_symlink() {
        let target = fs::read_link(src).map_err(io(src))?;
        std::os::unix::fs::symlink(&target, &tmp).map_err(io(&tmp))?;
    } else if m.is_file() {
        fs::copy(src, &tmp).map_err(io(&tmp))?;
        fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io(&tmp))?;
    } else {
        return Err(HostError::Unsupported {
            tool: "live apply".into(),
            operation: format!("copy {}", src.display()),
            reason: "not a file, directory or symbolic link".into(),
        });
    }
    copy_metadata(src, m, &tmp, tree.labels)?;
    if d.as_ref().is_some_and(Metadata::is_dir) {
        fs::remove_dir_all(dst).map_err(io(dst))?;
    }
    fs::rename(&tmp, dst).map_err(io(dst))?;
    Ok(true)
}

/// Remove `dst` (the image no longer has it): a file or link; a directory only when empty
/// (what the node keeps there stays). `true` when something was removed.
fn remove_entry(dst: &Path) -> Result<bool, HostError> {
    match lstat(dst)? {
        None => Ok(false),
        Some(m) if m.is_dir() => match fs::remove_dir(dst) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => Ok(false),
            Err(e) => Err(io(dst)(e)),
        },
        Some(_) => fs::remove_file(dst).map(|()| true).map_err(io(dst)),
    }
}

/// Every directory between `base` and `dst` (exclusive) is a real directory, not a link:
/// a write never follows a link out of the host root.
fn inside(base: &Path, dst: &Path) -> Result<bool, HostError> {
    let Ok(rel) = dst.strip_prefix(base) else {
        return Ok(false);
    };
    let mut at = base.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(c);
        match lstat(&at)? {
            Some(m) if m.is_dir() => {}
            Some(_) => return Ok(false),
            None => return Ok(true),
        }
    }
    Ok(true)
}

/// Apply the configuration the deployment at `staged` has over the one at `booted` to the
/// running system under `root` (see the module documentation).
pub fn apply(
    root: &Path,
    booted: &Path,
    staged: &Path,
    record: &AppliedRecord,
) -> Result<Applied, HostError> {
    let mut skip: Vec<&str> = LIVE_TREES.iter().map(|(tree, _)| *tree).collect();
    skip.extend(BOOKKEEPING);
    let mut outside = Vec::new();
    differences(
        booted,
        staged,
        "usr",
        &skip,
        NAMED,
        Labels::Copied,
        &mut outside,
    )?;
    if !outside.is_empty() {
        return Err(HostError::Unsupported {
            tool: "live apply".into(),
            operation: "apply the staged image's configuration to the running system".into(),
            reason: format!(
                "the staged image differs from the booted one outside /etc and /var (/{}): it must be booted",
                outside.join(", /")
            ),
        });
    }
    // What earlier applies wrote in /etc is made this image's again; in /var only what this
    // image changes is written (what an app changed there since is its own).
    let mut paths: BTreeSet<String> = record
        .read()
        .into_iter()
        .filter(|p| p.starts_with("etc/"))
        .collect();
    for (tree, live) in LIVE_TREES {
        let mut changed = Vec::new();
        differences(
            &booted.join(tree),
            &staged.join(tree),
            "",
            &[],
            usize::MAX,
            tree_of(live).labels,
            &mut changed,
        )?;
        paths.extend(changed.into_iter().map(|p| format!("{live}/{p}")));
    }
    record.write(&paths)?;
    let done = sync_paths(root, staged, &paths)?;
    record.write(&paths)?;
    Ok(done)
}

/// Make the paths an earlier live apply of this boot wrote (the record) equal to the
/// deployment at `next`'s again — the image about to boot (staged), or the booted one when
/// the node goes back to it — with no `/usr` check: before a reboot into another image, so
/// that its `/etc` merge keeps none of them as a local change, and when the live change is
/// undone. Nothing recorded: nothing to do.
pub fn sync_recorded(
    root: &Path,
    next: &Path,
    record: &AppliedRecord,
) -> Result<Applied, HostError> {
    let paths: BTreeSet<String> = record
        .read()
        .into_iter()
        .filter(|p| p.starts_with("etc/"))
        .collect();
    sync_paths(root, next, &paths)
}

fn tree_of(live: &str) -> Tree {
    if live == "var" {
        Tree {
            labels: Labels::Kept,
            removes: false,
        }
    } else {
        Tree {
            labels: Labels::Copied,
            removes: true,
        }
    }
}

/// Make each of `paths` (`etc/…`, `var/…`) under `root` what it is in the deployment at
/// `source`: writes parents first, then removals children first.
fn sync_paths(root: &Path, source: &Path, paths: &BTreeSet<String>) -> Result<Applied, HostError> {
    let mut done = Applied::default();
    let mut absent = Vec::new();
    for p in paths {
        let Some((tree, live)) = LIVE_TREES
            .iter()
            .find(|(_, live)| p.strip_prefix(live).is_some_and(|r| r.starts_with('/')))
        else {
            continue;
        };
        let rel = &p[live.len() + 1..];
        let src = source.join(tree).join(rel);
        let base = root.join(live);
        let dst = base.join(rel);
        if !inside(&base, &dst)? {
            return Err(HostError::Unsupported {
                tool: "live apply".into(),
                operation: format!("write /{p}"),
                reason: "a directory on its path is a link or a file on the running system".into(),
            });
        }
        match lstat(&src)? {
            Some(m) => {
                if dst.parent().is_some_and(|d| !d.exists()) {
                    // Its directory is gone on the node (and the image has it): made first,
                    // parents sort before children, so only a node-side removal gets here.
                    continue;
                }
                if write(&src, &m, &dst, tree_of(live))? {
                    done.written.push(format!("/{p}"));
                }
            }
            None => absent.push((p, dst, tree_of(live))),
        }
    }
    for (p, dst, tree) in absent.into_iter().rev() {
        if tree.removes && remove_entry(&dst)? {
            done.removed.push(format!("/{p}"));
        }
    }
    done.removed.sort();
    Ok(done)
}

#[cfg(test)]
mod tests;
