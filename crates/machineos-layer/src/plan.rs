//! The plan: what `ignition-apply --ignore-unsupported` would do to an image root, computed
//! as data against a [`BaseView`] — pure, no filesystem writes.
//!
//! The steps follow Ignition's files stage in its order: files, directories and symbolic
//! links sorted by the depth of their resolved path; then hard links in config order; then
//! units (drop-ins, contents, mask/unmask) in config order; then the preset file. Where
//! Ignition 2.14 (Debian) and current Ignition differ, current Ignition is followed and the
//! spot says so.

use std::collections::{BTreeMap, HashMap};

use machineos_ignition::model::{Config, Directory, File, Link, NodeGroup, NodeUser, Unit};
use machineos_ignition::resource::FetchError;
use machineos_ignition::unit::{UnitOption, parse_unit};

use crate::base::BaseView;
use crate::contents::Contents;
use crate::overlay::{Change, Kind, LayerKind, Overlay, OverlayError, Stat, parent};
use crate::passwd::lookup_id;

/// Where systemd units are written.
pub const UNITS_DIR: &str = "/etc/systemd/system";
/// The preset file Ignition appends to.
pub const PRESET_PATH: &str = "/etc/systemd/system-preset/20-ignition.preset";

/// Why the plan could not be made; `path` is the JSON path of the config entry.
#[derive(Debug, thiserror::Error)]
#[error("error at {path}: {message}")]
pub struct PlanError {
    /// JSON path such as `$.storage.files.2`.
    pub path: String,
    /// What failed, in Ignition's words where it has them.
    pub message: String,
}

fn perr(path: &str, message: impl Into<String>) -> PlanError {
    PlanError {
        path: path.to_string(),
        message: message.into(),
    }
}

trait At<T> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError>;
}

impl<T> At<T> for Result<T, OverlayError> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError> {
        self.map_err(|e| perr(path, format!("{what}: {e}")))
    }
}

impl<T> At<T> for Result<T, FetchError> {
    fn at(self, path: &str, what: &str) -> Result<T, PlanError> {
        self.map_err(|e| perr(path, format!("{what}: {e}")))
    }
}

/// One entry of the layer, in tar terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the image root, no leading `/`.
    pub path: String,
    /// What the entry is.
    pub kind: EntryKind,
    /// Permission bits (including setuid/setgid/sticky).
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
}

/// Entry types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file and its contents.
    File(Contents),
    /// A symbolic link and its target, verbatim.
    Symlink(String),
    /// A hard link to another entry of this layer (relative path).
    HardLink(String),
    /// `.wh.<name>`: the lower layers' node at `path` is deleted (`path` is the deleted one).
    Whiteout,
    /// `.wh..wh..opq` in `path`: the lower layers' contents of directory `path` are hidden.
    Opaque,
}

/// The ordered entries of a layer: parents before children, hard links after their
/// targets, one entry per path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The entries, in tar order.
    pub entries: Vec<Entry>,
    /// Non-fatal findings.
    pub warnings: Vec<String>,
}

impl Plan {
    /// The tar member name of an entry (whiteouts get their `.wh.` names).
    pub fn member_name(e: &Entry) -> String {
        match e.kind {
            EntryKind::Whiteout => match e.path.rsplit_once('/') {
                Some((dir, name)) => format!("{dir}/.wh.{name}"),
                None => format!(".wh.{}", e.path),
            },
            EntryKind::Opaque => format!("{}/.wh..wh..opq", e.path),
            _ => e.path.clone(),
        }
    }
}

/// Compute the layer `config` produces over `base`. `config` must be parsed, validated
/// and have its child configs resolved.
pub fn plan(config: &Config, base: &dyn BaseView) -> Result<Plan, PlanError> {
    plan_with(config, base, &PlanOptions::default())
}

/// A file the build itself adds, before Ignition runs (as the MCO's Containerfile writes
/// `/etc/machine-config-daemon/currentconfig` before `ignition-apply`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraFile {
    /// Absolute path in the image.
    pub path: String,
    /// Contents; written 0644 root:root, parents 0755.
    pub contents: Vec<u8>,
}

/// What a full image build adds around Ignition's own effects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Files written before Ignition runs.
    pub extra_files: Vec<ExtraFile>,
    /// Drop what `ostree container commit` empties: everything below `/tmp`, `/var/tmp`,
    /// `/run` and `/var/cache` (the directories themselves stay).
    pub commit_cleanup: bool,
}

/// Directories whose contents `ostree container commit` removes.
pub const COMMIT_EMPTIED: [&str; 4] = ["tmp", "var/tmp", "run", "var/cache"];

/// [`plan`] with the build's own additions.
pub fn plan_with(
    config: &Config,
    base: &dyn BaseView,
    opts: &PlanOptions,
) -> Result<Plan, PlanError> {
    let mut p = Planner {
        fs: Overlay::new(base),
        warnings: Vec::new(),
    };
    for f in &opts.extra_files {
        let jp = "$";
        let r = p.fs.resolve_parent(&f.path).at(jp, "resolving path")?;
        p.fs.mkdir_all(parent(&r))
            .at(jp, &format!("creating parents of {}", f.path))?;
        p.fs.remove_all(&r)
            .at(jp, &format!("replacing {}", f.path))?;
        p.fs.put(
            &r,
            LayerKind::File(Contents::bytes(f.contents.clone())),
            0o644,
            0,
            0,
        )
        .at(jp, &format!("writing {}", f.path))?;
    }
    p.warnings.extend(ignored_sections(config));
    p.storage(config)?;
    p.units(config)?;
    let mut entries = emit(&p.fs).map_err(|e| perr("$", e.to_string()))?;
    if opts.commit_cleanup {
        let before = entries.len();
        entries.retain(|e| {
            !COMMIT_EMPTIED
                .iter()
                .any(|d| e.path.starts_with(&format!("{d}/")))
        });
        if entries.len() != before {
            p.warnings.push(format!(
                "{} entries below /tmp, /var/tmp, /run or /var/cache dropped: ostree container commit empties them",
                before - entries.len()
            ));
        }
    }
    Ok(Plan {
        entries,
        warnings: p.warnings,
    })
}

struct Planner<'a> {
    fs: Overlay<'a>,
    warnings: Vec<String>,
}

enum NodeRef<'c> {
    File(&'c File),
    Dir(&'c Directory),
    Link(&'c Link),
}

impl<'a> Planner<'a> {
    fn storage(&mut self, c: &Config) -> Result<(), PlanError> {
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

    fn lstat(&self, jp: &str, path: &str) -> Result<Option<Stat>, PlanError> {
        self.fs.lstat(path).at(jp, "reading base")
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
        // (current Ignition), and has no special bits before spec 3.6.0 anyway.
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

    fn write_unit_file(&mut self, jp: &str, path: &str, contents: &str) -> Result<(), PlanError> {
        let r = self.fs.resolve_parent(path).at(jp, "resolving path")?;
        let fail = format!("failed to write {path}");
        self.fs.mkdir_all(parent(&r)).at(jp, &fail)?;
        if let Some(Stat {
            kind: Kind::Dir, ..
        }) = self.lstat(jp, &r)?
        {
            return Err(perr(
                jp,
                format!("{fail}: rename: file exists and is a directory"),
            ));
        }
        self.fs.remove_all(&r).at(jp, &fail)?;
        self.fs
            .put(
                &r,
                LayerKind::File(Contents::bytes(contents.as_bytes())),
                0o644,
                0,
                0,
            )
            .at(jp, &fail)
    }

    fn units(&mut self, c: &Config) -> Result<(), PlanError> {
        // Preset lines keyed as Ignition keys them: `<unit>-enabled|disabled`, instances
        // of a template gathered under `<tmpl>@.service`.
        let mut presets: BTreeMap<String, (String, bool, Vec<String>)> = BTreeMap::new();
        for (i, u) in c.systemd.units.iter().enumerate() {
            let jp = format!("$.systemd.units.{i}");
            for (j, d) in u.dropins.iter().enumerate() {
                if let Some(contents) = &d.contents {
                    let path = format!("{UNITS_DIR}/{}.d/{}", u.name, d.name);
                    self.write_unit_file(&format!("{jp}.dropins.{j}"), &path, contents)?;
                }
            }
            if let Some(contents) = u.contents.as_deref().filter(|c| !c.is_empty()) {
                self.write_unit_file(&jp, &format!("{UNITS_DIR}/{}", u.name), contents)?;
            }
            if let Some(enabled) = u.enabled {
                let id = if enabled { "enabled" } else { "disabled" };
                match u.name.find('@') {
                    Some(at) => {
                        let (tmpl, rest) = u.name.split_at(at);
                        let (inst, ext) = rest[1..].rsplit_once('.').unwrap_or((&rest[1..], ""));
                        let unit = format!("{tmpl}@.{ext}");
                        let e = presets.entry(format!("{unit}-{id}")).or_insert((
                            unit,
                            enabled,
                            Vec::new(),
                        ));
                        e.2.push(inst.to_string());
                    }
                    None => {
                        presets.insert(
                            format!("{}-{id}", u.name),
                            (u.name.clone(), enabled, Vec::new()),
                        );
                    }
                }
            }
            match u.mask {
                Some(true) => self.mask(&jp, u)?,
                Some(false) => self.unmask(&jp, u)?,
                None => {}
            }
        }
        // Current Ignition writes presets sorted by key; 2.14 used Go map order (random).
        // Instantiated units: current Ignition then asks systemd's version over D-Bus and
        // fails in a build container; we do not reproduce that failure (see
        // crates/machineos-layer/tests/differential/cases/README.md).
        for (_, (unit, enabled, instances)) in presets {
            let unit_string = if instances.is_empty() {
                unit.clone()
            } else {
                format!("{unit} {}", instances.join(" "))
            };
            if enabled {
                self.append_preset(&format!("enable {unit_string}\n"))?;
            } else if instances.is_empty() && self.disable(&unit)? {
                self.append_preset(&format!("disable {unit_string}\n"))?;
            }
            // A disabled template with instances is not a valid name for `systemctl
            // is-enabled`, so current Ignition writes nothing for it.
        }
        Ok(())
    }

    fn mask(&mut self, jp: &str, u: &Unit) -> Result<(), PlanError> {
        let r = self
            .fs
            .resolve_parent(&format!("{UNITS_DIR}/{}", u.name))
            .at(jp, "resolving path")?;
        let fail = format!("masking unit {:?}", u.name);
        self.fs.mkdir_all(parent(&r)).at(jp, &fail)?;
        self.fs.remove_all(&r).at(jp, &fail)?;
        // Created by root with the process's owner; no chown.
        self.fs
            .put(&r, LayerKind::Symlink("/dev/null".into()), 0o777, 0, 0)
            .at(jp, &fail)
    }

    fn unmask(&mut self, jp: &str, u: &Unit) -> Result<(), PlanError> {
        let r = self
            .fs
            .resolve_parent(&format!("{UNITS_DIR}/{}", u.name))
            .at(jp, "resolving path")?;
        if let Some(Stat {
            kind: Kind::Symlink(t),
            ..
        }) = self.lstat(jp, &r)?
            && t == "/dev/null"
        {
            self.fs
                .remove_all(&r)
                .at(jp, &format!("unmasking unit {:?}", u.name))?;
        }
        Ok(())
    }

    fn append_preset(&mut self, line: &str) -> Result<(), PlanError> {
        let jp = "$.systemd.units";
        let r = self
            .fs
            .resolve_parent(PRESET_PATH)
            .at(jp, "resolving preset path")?;
        self.fs
            .mkdir_all(parent(&r))
            .at(jp, "creating preset directory")?;
        let (mut data, mode, uid, gid) = match self.lstat(jp, &r)? {
            Some(st) if st.kind == Kind::File => (
                self.fs
                    .read(&r)
                    .at(jp, "reading preset")?
                    .unwrap_or_default(),
                st.mode,
                st.uid,
                st.gid,
            ),
            Some(_) => {
                return Err(perr(
                    jp,
                    format!("appending to {PRESET_PATH}: not a regular file"),
                ));
            }
            None => (Vec::new(), 0o644, 0, 0),
        };
        data.extend_from_slice(line.as_bytes());
        self.fs
            .put(&r, LayerKind::File(Contents::bytes(data)), mode, uid, gid)
            .at(jp, "writing preset")
    }

    /// `systemctl --root … is-enabled` then `disable`, emulated. Returns whether the unit
    /// was enabled (current Ignition writes a `disable` line only then; 2.14 always did).
    fn disable(&mut self, unit: &str) -> Result<bool, PlanError> {
        let jp = "$.systemd.units";
        let links = self.unit_links()?;
        let state = self.unit_state(unit, &links)?;
        if !state.enabled_like() {
            return Ok(false);
        }
        // Remove every symlink under /etc/systemd/system (one level of .wants/.requires
        // directories deep, as `systemctl disable` scans) that names or points at the unit
        // or one of its aliases, then remove directories that became empty.
        let mut names = vec![unit.to_string()];
        names.extend(state.aliases);
        let is_ours = |link_name: &str, target: &str| {
            let tbase = target.rsplit('/').next().unwrap_or(target);
            target != "/dev/null"
                && (names.iter().any(|n| n == link_name) || names.iter().any(|n| n == tbase))
        };
        let mut touched_dirs = Vec::new();
        for link in links {
            if is_ours(&link.name, &link.target) {
                self.fs.remove_all(&link.path).at(jp, "disabling")?;
                if let Some(dir) = link.dir {
                    touched_dirs.push(dir);
                }
            }
        }
        touched_dirs.dedup();
        for dir in touched_dirs {
            if self.fs.children(&dir).at(jp, "listing units")?.is_empty() {
                self.fs.remove_all(&dir).at(jp, "disabling")?;
            }
        }
        Ok(true)
    }

    /// The symlinks `systemctl` considers: those directly in /etc/systemd/system and those
    /// one directory below it (`*.wants`, `*.requires`, …).
    fn unit_links(&self) -> Result<Vec<UnitLink>, PlanError> {
        let jp = "$.systemd.units";
        let mut links = Vec::new();
        for name in self.fs.children(UNITS_DIR).at(jp, "listing units")? {
            let p = format!("{UNITS_DIR}/{name}");
            match self.lstat(jp, &p)?.map(|s| s.kind) {
                Some(Kind::Symlink(target)) => links.push(UnitLink {
                    path: p,
                    name,
                    target,
                    dir: None,
                }),
                Some(Kind::Dir) => {
                    for child in self.fs.children(&p).at(jp, "listing units")? {
                        let cp = format!("{p}/{child}");
                        if let Some(Kind::Symlink(target)) = self.lstat(jp, &cp)?.map(|s| s.kind) {
                            links.push(UnitLink {
                                path: cp,
                                name: child,
                                target,
                                dir: Some(p.clone()),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(links)
    }

    fn unit_state(&self, unit: &str, links: &[UnitLink]) -> Result<UnitState, PlanError> {
        let jp = "$.systemd.units";
        const PATHS: [&str; 4] = [
            "/etc/systemd/system",
            "/run/systemd/system",
            "/usr/local/lib/systemd/system",
            "/usr/lib/systemd/system",
        ];
        let mut file = None;
        for dir in PATHS {
            let p = format!("{dir}/{unit}");
            let Ok(r) = self.fs.resolve_all(&p) else {
                continue;
            };
            match self.lstat(jp, &p)?.map(|s| s.kind) {
                Some(Kind::Symlink(t)) if t == "/dev/null" => return Ok(UnitState::masked()),
                Some(_) => {
                    if let Some(bytes) = self.fs.read(&r).at(jp, "reading unit")? {
                        file = Some(bytes);
                        break;
                    }
                    if r == "/dev/null" {
                        return Ok(UnitState::masked());
                    }
                }
                None => {}
            }
        }
        let Some(bytes) = file else {
            return Ok(UnitState::default());
        };
        let opts: Vec<UnitOption> =
            parse_unit(&String::from_utf8_lossy(&bytes)).unwrap_or_default();
        let install = |k: &str| -> Vec<String> {
            opts.iter()
                .filter(|o| o.section == "Install" && o.name == k)
                .flat_map(|o| {
                    o.value
                        .split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let aliases = install("Alias");
        let wanted = !install("WantedBy").is_empty()
            || !install("RequiredBy").is_empty()
            || !install("UpheldBy").is_empty();
        let also = !install("Also").is_empty();
        let linked = links.iter().any(|l| match l.dir {
            // A `.wants`/`.requires` link named after the unit.
            Some(_) => l.name == unit,
            // An alias, or another name pointing at the unit.
            None => {
                aliases.contains(&l.name)
                    || (l.target.ends_with(&format!("/{unit}")) && l.name != unit)
            }
        });
        Ok(UnitState {
            found: true,
            masked: false,
            // enabled (links), static (no [Install] at all), indirect (Also= only)
            enabled: linked || (aliases.is_empty() && !wanted) || (also && !wanted),
            aliases,
        })
    }
}

/// The sections ignition-apply parses but never writes into an image (it skips them with
/// `--ignore-unsupported`), named so the user knows they had no effect here.
pub fn ignored_sections(c: &Config) -> Vec<String> {
    let s = &c.storage;
    [
        ("$.passwd.users", !c.passwd.users.is_empty()),
        ("$.passwd.groups", !c.passwd.groups.is_empty()),
        (
            "$.kernelArguments",
            !c.kernel_arguments.should_exist.is_empty()
                || !c.kernel_arguments.should_not_exist.is_empty(),
        ),
        ("$.storage.disks", !s.disks.is_empty()),
        ("$.storage.raid", !s.raid.is_empty()),
        ("$.storage.luks", !s.luks.is_empty()),
        ("$.storage.filesystems", !s.filesystems.is_empty()),
    ]
    .into_iter()
    .filter(|(_, present)| *present)
    .map(|(path, _)| {
        format!("{path}: ignored: ignition-apply does not apply this section to an image")
    })
    .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_sections_are_reported() {
        let c = machineos_ignition::parse(
            br#"{"ignition":{"version":"3.5.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k"]}]},
                "kernelArguments":{"shouldExist":["a"]},"storage":{"disks":[{"device":"/dev/vda"}]}}"#,
        )
        .unwrap()
        .config;
        let w = ignored_sections(&c);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].starts_with("$.passwd.users: ignored"));
        assert!(ignored_sections(&Config::default()).is_empty());
    }
}

/// A symlink in the unit directory.
struct UnitLink {
    /// Its absolute path.
    path: String,
    /// Its file name.
    name: String,
    /// Its target, verbatim.
    target: String,
    /// The subdirectory it is in, if not directly in /etc/systemd/system.
    dir: Option<String>,
}

#[derive(Debug, Default)]
struct UnitState {
    found: bool,
    masked: bool,
    enabled: bool,
    aliases: Vec<String>,
}

impl UnitState {
    fn masked() -> Self {
        Self {
            found: true,
            masked: true,
            ..Self::default()
        }
    }
    /// `is-enabled` exits 0 for enabled, static, indirect, alias and generated units.
    fn enabled_like(&self) -> bool {
        self.found && !self.masked && self.enabled
    }
}

/// Turn the overlay's changes into ordered tar entries.
fn emit(fs: &Overlay<'_>) -> Result<Vec<Entry>, OverlayError> {
    let mut nodes: BTreeMap<Vec<(bool, String)>, Entry> = BTreeMap::new();
    let mut links = Vec::new();
    let key = |path: &str, whiteout: bool| -> Vec<(bool, String)> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let n = comps.len();
        // Whiteouts sort first within their directory, so lower contents are hidden before
        // this layer's own children of that directory are laid down.
        comps
            .iter()
            .enumerate()
            .map(|(i, c)| (!(whiteout && i + 1 == n), c.to_string()))
            .collect()
    };
    let mut need_parents = Vec::new();
    for (path, change) in fs.changes() {
        let rel = path.trim_start_matches('/').to_string();
        match change {
            Change::Removed => {
                if fs.base_visible(path)?.is_some() {
                    nodes.insert(
                        key(path, true),
                        Entry {
                            path: rel,
                            kind: EntryKind::Whiteout,
                            mode: 0,
                            uid: 0,
                            gid: 0,
                        },
                    );
                    need_parents.push(path.clone());
                }
            }
            Change::Node(n) => {
                let kind = match &n.kind {
                    LayerKind::File(b) => EntryKind::File(b.clone()),
                    LayerKind::Dir { opaque } => {
                        if *opaque {
                            let opq = format!("{path}/.wh..wh..opq");
                            nodes.insert(
                                key(&opq, true),
                                Entry {
                                    path: rel.clone(),
                                    kind: EntryKind::Opaque,
                                    mode: 0,
                                    uid: 0,
                                    gid: 0,
                                },
                            );
                        }
                        EntryKind::Dir
                    }
                    LayerKind::Symlink(t) => EntryKind::Symlink(t.clone()),
                    LayerKind::HardLink(t) => {
                        // Runtimes that apply a link member's header to the inode
                        // (containers/storage, our own base indexer) must see the inode's
                        // metadata there, as GNU tar and Go's archive/tar write it.
                        let inode = match fs.changes().get(t) {
                            Some(Change::Node(owner)) => owner,
                            _ => return Err(OverlayError::DanglingLink(t.clone())),
                        };
                        links.push(Entry {
                            path: rel,
                            kind: EntryKind::HardLink(t.trim_start_matches('/').to_string()),
                            mode: inode.mode,
                            uid: inode.uid,
                            gid: inode.gid,
                        });
                        need_parents.push(path.clone());
                        continue;
                    }
                };
                nodes.insert(
                    key(path, false),
                    Entry {
                        path: rel,
                        kind,
                        mode: n.mode,
                        uid: n.uid,
                        gid: n.gid,
                    },
                );
                need_parents.push(path.clone());
            }
        }
    }
    // Every ancestor is in the layer: new ones are already; existing ones keep the base's
    // metadata.
    for path in need_parents {
        let mut a = parent(&path).to_string();
        while a != "/" {
            if let std::collections::btree_map::Entry::Vacant(slot) = nodes.entry(key(&a, false)) {
                let st = fs
                    .lstat(&a)?
                    .ok_or_else(|| OverlayError::NotADirectory(a.clone()))?;
                slot.insert(Entry {
                    path: a.trim_start_matches('/').to_string(),
                    kind: EntryKind::Dir,
                    mode: st.mode,
                    uid: st.uid,
                    gid: st.gid,
                });
            }
            a = parent(&a).to_string();
        }
    }
    links.sort_by_key(|e| key(&e.path, false));
    Ok(nodes.into_values().chain(links).collect())
}
