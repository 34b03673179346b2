//! The last layer: the rpm database and treefile, the per-architecture marker, the
//! whiteouts and opaque directory that remove or replace skeleton paths, and the caller's
//! extra files (checked against the generated tree: not a directory, not below a symlink or
//! file, not one of this layer's own entries).

use super::TreeError;
use super::entry::{Body, Kind, REG, meta};
use super::planner::{Item, Planner};
use crate::content::Style;

/// A file the final layer removes with a whiteout.
pub(super) const WHITEOUT_FILE: &str = "usr/share/doc/fedora-release/README.obsolete";
/// A directory the final layer removes with a whiteout.
pub(super) const WHITEOUT_DIR: &str = "usr/share/fedora-release/legacy";
/// A directory the final layer makes opaque, replacing its contents.
pub(super) const OPAQUE_DIR: &str = "usr/share/fedora-release/channels";
/// The file recording the image's architecture, relative to the root.
pub(super) const ARCH_FILE: &str = crate::ARCH_FILE.split_at(1).1;
/// The rpm database of the final layer.
const RPMDB: &str = "usr/lib/sysimage/rpm/rpmdb.sqlite";
/// The rpm-ostree treefile of the final layer.
const TREEFILE: &str = "usr/share/rpm-ostree/treefile.json";

impl<'s> Planner<'s> {
    /// The final layer's own items: marker, rpm database, treefile, whiteouts and the
    /// opaque directory's new contents.
    pub(super) fn last_fixed(&mut self) -> Result<Vec<Item<'s>>, TreeError> {
        let mut out = Vec::new();
        let o = &mut out;
        self.text(o, ARCH_FILE, REG, format!("{}\n", self.arch.goarch))?;
        self.synth(o, RPMDB, REG, 8 << 20, Style::Binary, b"SQLite format 3\0")?;
        self.text(
            o,
            TREEFILE,
            REG,
            format!(
                "{{\"ref\":\"fedora/{}/coreos/stable\",\"machineos-synth\":true}}\n",
                self.arch.uname
            ),
        )?;
        // Overrides of layer-0 paths: not claimed.
        let (dir, name) = WHITEOUT_FILE
            .rsplit_once('/')
            .unwrap_or(("", WHITEOUT_FILE));
        let (wdir, wname) = WHITEOUT_DIR.rsplit_once('/').unwrap_or(("", WHITEOUT_DIR));
        for path in [
            format!("{dir}/.wh.{name}"),
            format!("{wdir}/.wh.{wname}"),
            format!("{OPAQUE_DIR}/.wh..wh..opq"),
        ] {
            o.push(Item {
                path,
                kind: Kind::Whiteout,
                meta: meta(0, 0, 0),
            });
        }
        for (name, body) in [
            ("stable", "stream=stable\nrevision=2\n"),
            ("next", "stream=next\nrevision=2\n"),
        ] {
            o.push(Item {
                path: format!("{OPAQUE_DIR}/{name}"),
                kind: Kind::File(Body::Inline(body.as_bytes().to_vec())),
                meta: REG,
            });
        }
        Ok(out)
    }

    /// The spec's extra files, checked against the tree planned so far.
    pub(super) fn extras(&mut self) -> Result<Vec<Item<'s>>, TreeError> {
        let mut out = Vec::new();
        for x in &self.spec.extra_files {
            let path = x.path.trim_start_matches('/').to_owned();
            if self.dirs.contains_key(&path) {
                return Err(TreeError::ExtraIsDir(path));
            }
            for own in [
                WHITEOUT_FILE,
                WHITEOUT_DIR,
                OPAQUE_DIR,
                ARCH_FILE,
                RPMDB,
                TREEFILE,
            ] {
                if path == own || path.starts_with(&format!("{own}/")) {
                    return Err(TreeError::ExtraOnFinalLayer(path));
                }
            }
            let mut end = 0;
            while let Some(i) = path[end..].find('/') {
                let ancestor = &path[..end + i];
                if let Some(target) = self.taken.get(ancestor) {
                    return Err(TreeError::ExtraBelowNonDir {
                        path: path.clone(),
                        ancestor: ancestor.to_owned(),
                        hint: target
                            .as_ref()
                            .map(|t| format!(" (a symlink to {t})"))
                            .unwrap_or_default(),
                    });
                }
                end += i + 1;
            }
            self.parents(&path)?;
            out.push(Item {
                path,
                kind: Kind::File(Body::Extra(&x.contents)),
                meta: meta(x.mode, 0, 0),
            });
        }
        Ok(out)
    }
}
