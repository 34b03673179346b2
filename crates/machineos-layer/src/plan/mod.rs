//! The plan: what `ignition-apply --ignore-unsupported` would do to an image root, computed
//! as data against a [`BaseView`] — pure, no filesystem writes.
//!
//! The steps follow Ignition's files stage in its order: files, directories and symbolic
//! links sorted by the depth of their resolved path; then hard links in config order; then
//! units (drop-ins, contents, mask/unmask) in config order; then the preset file. Where
//! Ignition 2.14 (Debian) and current Ignition differ, current Ignition is followed and the
//! spot says so.
//!
//! This module holds what a plan is ([`Plan`], [`Entry`]), what a build adds around Ignition
//! ([`PlanOptions`]) and the driver ([`plan_with`]) that runs the steps in order; the steps
//! themselves are in `storage` (directories, files, links, appends) and `units` (units,
//! drop-ins, masks, presets), the overlay becomes tar entries in `emit`, and `error` says
//! why a plan fails.
//!
//! On an ostree-encapsulated base (one with an object store under
//! `/sysroot/ostree/repo/objects`, as Fedora CoreOS and RHEL CoreOS images have), the plan
//! also accounts for what ostree does not carry to a node: files that share an inode only
//! through the object store are written on their own (see
//! [`crate::overlay::is_ostree_dedup`]), a mode or owner change on a directory the base has
//! is warned about (libostree keeps the base's), and `/var` content gets a factory copy and
//! a tmpfiles.d snippet (`ostree`).

mod emit;
mod error;
mod ostree;
mod storage;
#[cfg(test)]
mod tests;
mod units;

use machineos_diagnostics::Warning;
use machineos_ignition::model::Config;

use crate::base::BaseView;
use crate::contents::Contents;
use crate::overlay::{LayerKind, Overlay, Stat, parent};

use emit::emit;
use error::At;
pub use error::PlanError;
pub use ostree::{FACTORY, VAR_TMPFILES};

/// Where systemd units are written.
pub const UNITS_DIR: &str = "/etc/systemd/system";
/// The preset file Ignition appends to.
pub const PRESET_PATH: &str = "/etc/systemd/system-preset/20-ignition.preset";

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
    /// Non-fatal findings, each at the JSON path of the config entry it is about or, when
    /// no entry is, at a path in the image.
    pub warnings: Vec<Warning>,
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
/// `/etc/machine-config-daemon/currentconfig` before `ignition-apply`); root-owned, parents
/// 0755.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraFile {
    /// Absolute path in the image.
    pub path: String,
    /// What it is.
    pub node: ExtraNode,
}

/// What an [`ExtraFile`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraNode {
    /// A regular file.
    File {
        /// Contents.
        contents: Vec<u8>,
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link, target verbatim.
    Symlink(String),
}

impl ExtraFile {
    /// A regular file, 0644.
    pub fn file(path: impl Into<String>, contents: Vec<u8>) -> ExtraFile {
        ExtraFile {
            path: path.into(),
            node: ExtraNode::File {
                contents,
                mode: 0o644,
            },
        }
    }
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
    let fs = Overlay::new(base);
    let ostree = ostree::is_encapsulated(&fs);
    let mut p = Planner {
        fs,
        warnings: Vec::new(),
        ostree,
    };
    for f in &opts.extra_files {
        let jp = "$";
        let r = p.fs.resolve_parent(&f.path).at(jp, "resolving path")?;
        p.fs.mkdir_all(parent(&r))
            .at(jp, &format!("creating parents of {}", f.path))?;
        p.fs.remove_all(&r)
            .at(jp, &format!("replacing {}", f.path))?;
        let (kind, mode) = match &f.node {
            ExtraNode::File { contents, mode } => {
                (LayerKind::File(Contents::bytes(contents.clone())), *mode)
            }
            ExtraNode::Symlink(target) => (LayerKind::Symlink(target.clone()), 0o777),
        };
        p.fs.put(&r, kind, mode, 0, 0)
            .at(jp, &format!("writing {}", f.path))?;
    }
    p.warnings.extend(ignored_sections(config));
    p.storage(config)?;
    p.units(config)?;
    if p.ostree {
        let skip: &[&str] = if opts.commit_cleanup {
            &COMMIT_EMPTIED
        } else {
            &[]
        };
        ostree::deliver_var(&mut p.fs, skip)?;
    }
    let mut entries = emit(&p.fs).map_err(|e| PlanError::Emit(Box::new(e)))?;
    if opts.commit_cleanup {
        // One warning per emptied directory that lost entries, at its path in the image.
        for d in COMMIT_EMPTIED {
            let before = entries.len();
            let below = format!("{d}/");
            entries.retain(|e| !e.path.starts_with(&below));
            let dropped = before - entries.len();
            if dropped > 0 {
                p.warnings.push(Warning::new(
                    format!("/{d}"),
                    format!(
                        "{dropped} entries below /{d} dropped: ostree container commit empties it"
                    ),
                ));
            }
        }
    }
    Ok(Plan {
        entries,
        warnings: p.warnings,
    })
}

/// A plan being made: the image root as the steps so far left it, and the warnings met.
struct Planner<'a> {
    fs: Overlay<'a>,
    warnings: Vec<Warning>,
    /// The base is ostree-encapsulated (it has an object store): what ostree does not
    /// carry to a node is warned about or made up for (see [`ostree`]).
    ostree: bool,
}

impl Planner<'_> {
    /// `lstat` of the overlay, failing at the config entry `jp`.
    fn lstat(&self, jp: &str, path: &str) -> Result<Option<Stat>, PlanError> {
        self.fs.lstat(path).at(jp, "reading base")
    }
}

/// The sections ignition-apply parses but never writes into an image (it skips them with
/// `--ignore-unsupported`), named so the user knows they had no effect here: one warning at
/// the JSON path of each section present.
pub fn ignored_sections(c: &Config) -> Vec<Warning> {
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
        Warning::new(
            path,
            "ignored: ignition-apply does not apply this section to an image",
        )
    })
    .collect()
}
