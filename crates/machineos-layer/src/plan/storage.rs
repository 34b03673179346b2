//! Ignition's storage steps over the overlay: which directories, files (contents, appends,
//! owners, modes) and symbolic and hard links the config creates or changes, in Ignition's
//! order, and when an existing node of the base makes an entry fail.

use std::collections::HashMap;

use machineos_ignition::model::{Config, Directory, File, Link, NodeGroup, NodeUser};

use machineos_diagnostics::Warning;

use super::error::{At, perr};
use super::{PlanError, Planner};
use crate::contents::Contents;
use crate::overlay::{Change, Kind, LayerKind, Overlay, Stat, parent};
use crate::passwd::lookup_id;

/// A storage entry of the config, by kind.
enum NodeRef<'c> {
    File(&'c File),
    Dir(&'c Directory),
    Link(&'c Link),
}

impl Planner<'_> {
    pub(super) fn storage(&mut self, c: &Config) -> Result<(), PlanError> {
        let s = &c.storage;
        // Resolve every path first and reject two entries landing on one place.
        let mut resolved: Vec<(String, String, NodeRef<'_>)> = Vec::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        let mut add = |jp: String,
                       cfg_path: &str,
                       what: &str,
                       n,
                       fs: &Overlay<'_>|
         -> Result<(String, String, NodeRef<'_>), PlanError> {
            let r = fs.resolve_parent(cfg_path).at(&jp, "resolving path")?;
            if let Some(other) = seen.get(&r) {
                return Err(perr(
                    &jp,
                    format!(
                        "{what} at {cfg_path} resolved to {r} after symlink chasing, but another entry with path {other} also resolves there"
                    ),
                ));
            }
            seen.insert(r.clone(), cfg_path.to_string());
            Ok((jp, r, n))
        };
        let mut hard = Vec::new();
        for (i, d) in s.directories.iter().enumerate() {
            resolved.push(add(
                format!("$.storage.directories.{i}"),
                &d.path,
                "directory",
                NodeRef::Dir(d),
                &self.fs,
            )?);
        }
        for (i, f) in s.files.iter().enumerate() {
            resolved.push(add(
                format!("$.storage.files.{i}"),
                &f.path,
                "file",
                NodeRef::File(f),
                &self.fs,
            )?);
        }
        for (i, l) in s.links.iter().enumerate() {
            let e = add(
                format!("$.storage.links.{i}"),
                &l.path,
                "link",
                NodeRef::Link(l),
                &self.fs,
            )?;
            if l.hard == Some(true) {
                hard.push(e)
            } else {
                resolved.push(e)
            }
        }
        // Shallowest first. Ignition's sort is unstable, but one entry per path makes the
        // result independent of the order within a depth.
        resolved.sort_by_key(|(_, r, _)| r.split('/').filter(|c| !c.is_empty()).count());
        for (jp, r, n) in resolved.into_iter().chain(hard) {
            match n {
                NodeRef::File(f) => self.file(&jp, &r, f)?,
                NodeRef::Dir(d) => self.directory(&jp, &r, d)?,
                NodeRef::Link(l) => self.link(&jp, &r, l)?,
            }
        }
        Ok(())
    }

    fn owner(
        &self,
        jp: &str,
        u: &NodeUser,
        g: &NodeGroup,
        path: &str,
        default: (u32, u32),
    ) -> Result<(u32, u32), PlanError> {
        let uid = self.id_of(jp, path, u.id, u.name.as_deref(), &USERS, default.0)?;
        let gid = self.id_of(jp, path, g.id, g.name.as_deref(), &GROUPS, default.1)?;
        Ok((uid, gid))
    }

    /// An id given directly, or a name looked up in the image's own databases (first
    /// match wins), or `default` when neither is set.
    fn id_of(
        &self,
        jp: &str,
        path: &str,
        id: Option<i64>,
        name: Option<&str>,
        db: &IdDatabases,
        default: u32,
    ) -> Result<u32, PlanError> {
        let name = match (id, name.filter(|n| !n.is_empty())) {
            (Some(id), _) => return Ok(id as u32),
            (None, None) => return Ok(default),
            (None, Some(name)) => name,
        };
        let dbs = db
            .files
            .iter()
            .map(|n| {
                self.fs
                    .read(n)
                    .map(Option::unwrap_or_default)
                    .at(jp, &format!("reading {n}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&[u8]> = dbs.iter().map(Vec::as_slice).collect();
        lookup_id(&refs, name).ok_or_else(|| {
            perr(
                jp,
                format!(
                    "error setting permissions of {path}: no such {} {name:?} in {} or {}",
                    db.what, db.files[0], db.files[1]
                ),
            )
        })
    }

    fn file(&mut self, jp: &str, r: &str, f: &File) -> Result<(), PlanError> {
        if f.overwrite == Some(true) {
            self.fs.remove_all(r).at(jp, "removing existing path")?;
        }
        let existing = self.lstat(jp, r)?;
        // Measured and verified now, decoded again as the layer is written.
        let contents = Contents::resource(&f.contents).at(
            &format!("{jp}.contents"),
            &format!("failed to create file {:?}", f.path),
        )?;
        let (mut data, mode, owner) = match (&existing, contents) {
            (None, c) => (c.unwrap_or_default(), 0o644, (0, 0)),
            (Some(st), _) if st.kind != Kind::File => {
                return Err(perr(
                    jp,
                    format!(
                        "error creating file {:?}: A non regular file exists there already and overwrite is false",
                        f.path
                    ),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(perr(
                    jp,
                    format!(
                        "error creating file {:?}: A file exists there already and overwrite is false",
                        f.path
                    ),
                ));
            }
            (Some(st), None) => {
                let data = self
                    .fs
                    .contents(r)
                    .at(jp, "reading existing file")?
                    .unwrap_or_default();
                (data, st.mode, (st.uid, st.gid))
            }
        };
        let had_append = !f.append.is_empty();
        for (i, a) in f.append.iter().enumerate() {
            let frag = Contents::resource(a).at(
                &format!("{jp}.append.{i}"),
                &format!("failed to create file {:?}", f.path),
            )?;
            data.append(frag.unwrap_or_default());
        }
        let (uid, gid) = self.owner(jp, &f.user, &f.group, &f.path, owner)?;
        // Ignition always chowns; on a regular file the kernel then drops setuid, and
        // setgid when group-execute is set. An explicit mode is applied after the chown
        // (current Ignition): its special bits were masked out below spec 3.6.0 when the
        // config was parsed, and from 3.6.0 on are applied as written.
        let mode = f.mode.map_or_else(|| clear_suid(mode), |m| m as u32);
        if existing.is_none() {
            self.fs
                .mkdir_all(parent(r))
                .at(jp, &format!("failed to create file {:?}", f.path))?;
            self.fs
                .put(r, LayerKind::File(data), mode, uid, gid)
                .at(jp, "writing file")?;
        } else if had_append {
            // Appending writes to the existing inode, so its other names change too.
            self.fs
                .rewrite(r, data, mode, uid, gid)
                .at(jp, "appending to file")?;
        } else {
            self.fs
                .set_meta(r, Some(mode), uid, gid)
                .at(jp, "setting permissions")?;
        }
        Ok(())
    }

    fn directory(&mut self, jp: &str, r: &str, d: &Directory) -> Result<(), PlanError> {
        if d.overwrite == Some(true) {
            self.fs.remove_all(r).at(jp, "removing existing path")?;
        }
        let mode = d.mode.map(|m| m as u32);
        match self.lstat(jp, r)? {
            None => {
                self.fs
                    .mkdir_all(r)
                    .at(jp, &format!("failed to create directory {}", d.path))?;
                let (uid, gid) = self.owner(jp, &d.user, &d.group, &d.path, (0, 0))?;
                self.fs
                    .set_meta(r, mode, uid, gid)
                    .at(jp, "setting permissions")?;
            }
            Some(st) if st.kind == Kind::Dir => {
                let (uid, gid) = self.owner(jp, &d.user, &d.group, &d.path, (st.uid, st.gid))?;
                let changes = mode.is_some_and(|m| m != st.mode) || (uid, gid) != (st.uid, st.gid);
                if changes
                    && self.ostree
                    && self.fs.base_visible(r).at(jp, "reading base")?.is_some()
                {
                    self.warnings.push(Warning::new(
                        jp,
                        format!(
                            "directory {} exists in the ostree base image: ostree keeps its mode {:04o} and owner {}:{} on import (libostree applies a directory's metadata only when it creates it), so nodes will not see the mode {:04o} and owner {}:{} set here",
                            d.path,
                            st.mode,
                            st.uid,
                            st.gid,
                            mode.unwrap_or(st.mode),
                            uid,
                            gid
                        ),
                    ));
                }
                self.fs
                    .set_meta(r, mode, uid, gid)
                    .at(jp, "setting permissions")?;
            }
            Some(_) => {
                return Err(perr(
                    jp,
                    format!(
                        "error creating directory {}: A non-directory already exists and overwrite is false",
                        d.path
                    ),
                ));
            }
        }
        Ok(())
    }

    fn link(&mut self, jp: &str, r: &str, l: &Link) -> Result<(), PlanError> {
        let target = l.target.clone().unwrap_or_default();
        let hard = l.hard == Some(true);
        if l.overwrite == Some(true) {
            self.fs.remove_all(r).at(jp, "removing existing path")?;
        }
        // A hard link's target is a path from the root, its intermediate symlinks resolved;
        // a relative target is taken relative to `/` (Ignition splits it as a root path).
        let hard_target = |fs: &Overlay<'_>| -> Result<String, PlanError> {
            let t = if target.starts_with('/') {
                target.clone()
            } else {
                format!("/{target}")
            };
            fs.resolve_parent(&machineos_ignition::validate::clean(&t))
                .at(jp, "error resolving target path of hard link")
        };
        match self.lstat(jp, r)? {
            None => {}
            Some(st) if hard => {
                let t = hard_target(&self.fs)?;
                let Some(tst) = self.lstat(jp, &t)? else {
                    return Err(perr(
                        jp,
                        format!(
                            "error creating hard link {}: target does not exist or stat() returned an err",
                            l.path
                        ),
                    ));
                };
                if tst.inode != st.inode {
                    return Err(perr(
                        jp,
                        format!(
                            "error creating hard link {}: a file already exists at that path but is not the target and overwrite is false",
                            l.path
                        ),
                    ));
                }
                return Ok(());
            }
            Some(Stat {
                kind: Kind::Symlink(existing),
                ..
            }) => {
                let clean = machineos_ignition::validate::clean;
                if clean(&existing) != clean(&target) {
                    return Err(perr(
                        jp,
                        format!(
                            "error creating symlink {}: a symlink exists at that path but points to {existing}, not {target} and overwrite is false",
                            l.path
                        ),
                    ));
                }
                // Ignition returns early: no chown either.
                return Ok(());
            }
            Some(_) => {
                return Err(perr(
                    jp,
                    format!(
                        "error creating symlink {}: a non-symlink already exists at that path and overwrite is false",
                        l.path
                    ),
                ));
            }
        }
        let fail = format!("failed to create link {:?}", l.path);
        self.fs.mkdir_all(parent(r)).at(jp, &fail)?;
        if hard {
            let t = hard_target(&self.fs)?;
            match self.lstat(jp, &t)? {
                None => {
                    return Err(perr(
                        jp,
                        format!("{fail}: link {t}: no such file or directory"),
                    ));
                }
                Some(st) if st.kind == Kind::Dir => {
                    return Err(perr(
                        jp,
                        format!("{fail}: link {t}: operation not permitted"),
                    ));
                }
                Some(_) => {}
            }
            // The target must be in this layer for a tar hard link to reach it.
            self.fs.copy_up(&t).at(jp, &fail)?;
            let owner = match self.fs.changes().get(&t) {
                Some(Change::Node(n)) => match &n.kind {
                    LayerKind::HardLink(o) => o.clone(),
                    _ => t.clone(),
                },
                _ => t.clone(),
            };
            self.fs
                .put(r, LayerKind::HardLink(owner), 0, 0, 0)
                .at(jp, &fail)?;
            return Ok(());
        }
        // Symlink owner quirk: without an explicit owner, Ignition chowns the link to the
        // owner of what it points to (stat follows links), or 0:0 when it dangles. We
        // resolve the target inside the image root (2.14 with --root resolves an absolute
        // target on the host).
        let followed = {
            let abs = if target.starts_with('/') {
                target.clone()
            } else {
                format!("{}/{target}", parent(r))
            };
            let full = self.fs.resolve_all(&abs).ok();
            match full {
                Some(p) => self
                    .lstat(jp, &p)?
                    .filter(|s| !matches!(s.kind, Kind::Symlink(_))),
                None => None,
            }
        };
        let default = followed.map_or((0, 0), |s| (s.uid, s.gid));
        let (uid, gid) = self.owner(jp, &l.user, &l.group, &l.path, default)?;
        self.fs
            .put(r, LayerKind::Symlink(target), 0o777, uid, gid)
            .at(jp, &fail)?;
        Ok(())
    }
}

/// Where names of one kind are looked up, in order: `/etc` first, then `/usr/lib` (RHCOS's
/// `altfiles`).
struct IdDatabases {
    what: &'static str,
    files: [&'static str; 2],
}

const USERS: IdDatabases = IdDatabases {
    what: "user",
    files: ["/etc/passwd", "/usr/lib/passwd"],
};
const GROUPS: IdDatabases = IdDatabases {
    what: "group",
    files: ["/etc/group", "/usr/lib/group"],
};

/// What `chown` does to the mode of a regular file.
fn clear_suid(mode: u32) -> u32 {
    let mut m = mode & !0o4000;
    if m & 0o010 != 0 {
        m &= !0o2000;
    }
    m
}
