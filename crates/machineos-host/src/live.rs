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
//!   (never half-written), directories created or their metadata set; mode, owner and
//!   extended attributes (the SELinux label ostree gave the checkout) copied; an entry the
//!   staged image lacks is removed. Parents before children.
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

/// The paths live applies wrote during this boot, one per line (`etc/chrony.conf`), in a
/// file on the host's `/run` (cleared at boot, when the booted image holds them).
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
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
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

/// Whether two entries (both present) are equal in what a checkout carries.
fn same(a: &Path, ma: &Metadata, b: &Path, mb: &Metadata) -> Result<bool, HostError> {
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
    if xattrs(a)? != xattrs(b)? {
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
        let (a, b) = (old.join(&r), new.join(&r));
        match (lstat(&a)?, lstat(&b)?) {
            (Some(ma), Some(mb)) => {
                if !same(&a, &ma, &b, &mb)? {
                    out.push(r.clone());
                }
                if ma.is_dir() && mb.is_dir() {
                    differences(old, new, &r, skip, limit, out)?;
                } else if mb.is_dir() {
                    descendants(new, &r, limit, out)?;
                }
            }
            (None, Some(mb)) => {
                out.push(r.clone());
                if mb.is_dir() {
                    descendants(new, &r, limit, out)?;
                }
            }
            (Some(_), None) => out.push(r),
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

/// Make `dst` carry `src`'s mode (not for links), owner and extended attributes.
fn copy_metadata(src: &Path, m: &Metadata, dst: &Path) -> Result<(), HostError> {
    if !m.file_type().is_symlink() {
        fs::set_permissions(dst, fs::Permissions::from_mode(m.mode() & 0o7777)).map_err(io(dst))?;
    }
    std::os::unix::fs::lchown(dst, Some(m.uid()), Some(m.gid())).map_err(io(dst))?;
    for (name, value) in xattrs(src)? {
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

fn remove(path: &Path) -> Result<bool, HostError> {
    match lstat(path)? {
        None => Ok(false),
        Some(m) if m.is_dir() => fs::remove_dir_all(path).map(|()| true).map_err(io(path)),
        Some(_) => fs::remove_file(path).map(|()| true).map_err(io(path)),
    }
}

/// Make `dst` equal to `src` (present or not); `true` when something was written.
fn sync(src: &Path, dst: &Path) -> Result<Option<bool>, HostError> {
    let Some(m) = lstat(src)? else {
        return Ok(remove(dst)?.then_some(false));
    };
    if let Some(d) = lstat(dst)?
        && same(src, &m, dst, &d)?
    {
        return Ok(None);
    }
    if m.is_dir() {
        if !lstat(dst)?.is_some_and(|d| d.is_dir()) {
            remove(dst)?;
            fs::create_dir(dst).map_err(io(dst))?;
        }
        copy_metadata(src, &m, dst)?;
        return Ok(Some(true));
    }
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dst.with_file_name(format!(".{name}.machineos-live"));
    remove(&tmp)?;
    if m.file_type().is_symlink() {
        let target = fs::read_link(src).map_err(io(src))?;
        std::os::unix::fs::symlink(&target, &tmp).map_err(io(&tmp))?;
    } else if m.is_file() {
        fs::copy(src, &tmp).map_err(io(&tmp))?;
    } else {
        return Err(HostError::Unsupported {
            tool: "live apply".into(),
            operation: format!("copy {}", src.display()),
            reason: "not a file, directory or symbolic link".into(),
        });
    }
    copy_metadata(src, &m, &tmp)?;
    if lstat(dst)?.is_some_and(|d| d.is_dir()) {
        remove(dst)?;
    }
    fs::rename(&tmp, dst).map_err(io(dst))?;
    Ok(Some(true))
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
    differences(booted, staged, "usr", &skip, NAMED, &mut outside)?;
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
    let mut paths: BTreeSet<String> = record.read();
    for (tree, live) in LIVE_TREES {
        let mut changed = Vec::new();
        differences(
            &booted.join(tree),
            &staged.join(tree),
            "",
            &[],
            usize::MAX,
            &mut changed,
        )?;
        paths.extend(changed.into_iter().map(|p| format!("{live}/{p}")));
    }
    record.write(&paths)?;
    let mut done = Applied::default();
    // Parents sort before their children.
    for p in &paths {
        let Some((tree, _)) = LIVE_TREES
            .iter()
            .find(|(_, live)| p.strip_prefix(live).is_some_and(|r| r.starts_with('/')))
        else {
            continue;
        };
        let (live, rel) = p.split_once('/').unwrap_or((p, ""));
        let src = staged.join(tree).join(rel);
        let dst = root.join(live).join(rel);
        if let Some(parent) = dst.parent()
            && lstat(parent)?.is_none()
        {
            // An earlier step removed it (the staged image lacks the directory).
            continue;
        }
        match sync(&src, &dst)? {
            Some(true) => done.written.push(format!("/{p}")),
            Some(false) => done.removed.push(format!("/{p}")),
            None => {}
        }
    }
    record.write(&paths)?;
    Ok(done)
}

#[cfg(test)]
mod tests;
