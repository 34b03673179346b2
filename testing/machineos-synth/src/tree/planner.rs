//! The planner's bookkeeping: which paths are taken (every non-directory path is claimed
//! exactly once, every parent is registered as a directory) and the helpers that add an
//! item — a directory, a text file, a generated file, an ELF binary, a symlink, a set of
//! hard links, a systemd unit — after claiming its path. Also the architecture-dependent
//! names (kernel release suffix, dynamic loader).

use std::collections::{BTreeMap, BTreeSet};

use super::TreeError;
use super::entry::{Body, DIR, ELF, EXE, Kind, LINK, Meta, REG, Synth};
use crate::content::Style;
use crate::rng::{Rng, derive};
use crate::spec::SynthSpec;

/// A path-level item before it is placed in a layer.
#[derive(Debug, Clone)]
pub(super) struct Item<'s> {
    /// Path without leading `/`.
    pub(super) path: String,
    /// Kind and contents.
    pub(super) kind: Kind<'s>,
    /// Owner and mode.
    pub(super) meta: Meta,
}

/// Architecture-dependent names.
pub(super) struct Arch {
    /// The OCI architecture (`amd64`), as in the marker file.
    pub(super) goarch: String,
    /// The kernel's name for it (`x86_64`), as in the kernel release and the treefile ref.
    pub(super) uname: String,
    /// The file name of glibc's dynamic loader in `/usr/lib64`.
    pub(super) loader: &'static str,
}

impl Arch {
    /// The names for OCI architecture `goarch` (unknown ones get a generic loader name).
    fn new(goarch: &str) -> Arch {
        let (uname, loader) = match goarch {
            "amd64" => ("x86_64", "ld-linux-x86-64.so.2"),
            "arm64" => ("aarch64", "ld-linux-aarch64.so.1"),
            "ppc64le" => ("ppc64le", "ld64.so.2"),
            "s390x" => ("s390x", "ld64.so.1"),
            "386" => ("i686", "ld-linux.so.2"),
            "arm" => ("armv7hl", "ld-linux-armhf.so.3"),
            other => (other, "ld-linux.so.2"),
        };
        Arch {
            goarch: goarch.to_owned(),
            uname: uname.to_owned(),
            loader,
        }
    }
}

/// The state of one planning run: the spec, the names derived from its platform, and every
/// path and package name taken so far.
pub(super) struct Planner<'s> {
    /// The spec being planned.
    pub(super) spec: &'s SynthSpec,
    /// Seed of file contents: differs per architecture, so binaries differ between arches.
    pub(super) content_seed: u64,
    /// Architecture-dependent names.
    pub(super) arch: Arch,
    /// The kernel version (`uname -r`).
    pub(super) kver: String,
    /// Metadata of every directory of the tree.
    pub(super) dirs: BTreeMap<String, Meta>,
    /// Every non-directory path outside the final layer's overrides, with the symlink
    /// target for symlinks.
    pub(super) taken: BTreeMap<String, Option<String>>,
    /// Package names in use.
    pub(super) packages: BTreeSet<String>,
}

impl<'s> Planner<'s> {
    /// A planner for `spec`, with nothing claimed yet and the names of the packages that
    /// are always there (`named`) taken.
    pub(super) fn new(spec: &'s SynthSpec, named: Vec<String>) -> Planner<'s> {
        let arch = Arch::new(&spec.platform.architecture);
        let kver = format!("{}.{}", kernel_release(spec.variant), arch.uname);
        Planner {
            spec,
            content_seed: derive(spec.seed, &format!("content:{}", spec.platform)),
            arch,
            kver,
            dirs: BTreeMap::new(),
            taken: BTreeMap::new(),
            packages: named.into_iter().collect(),
        }
    }

    // ---- claiming paths -------------------------------------------------------------

    pub(super) fn is_free(&self, path: &str) -> bool {
        !self.taken.contains_key(path) && !self.dirs.contains_key(path)
    }

    /// Claim a non-directory path, registering its parents as directories.
    pub(super) fn claim(&mut self, path: &str, symlink: Option<&str>) -> Result<(), TreeError> {
        if !self.is_free(path) {
            return Err(TreeError::Collision(path.to_owned()));
        }
        self.parents(path)?;
        self.taken
            .insert(path.to_owned(), symlink.map(str::to_owned));
        Ok(())
    }

    pub(super) fn parents(&mut self, path: &str) -> Result<(), TreeError> {
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            let dir = &path[..end + i];
            if self.taken.contains_key(dir) {
                return Err(TreeError::Collision(dir.to_owned()));
            }
            if !self.dirs.contains_key(dir) {
                self.dirs.insert(dir.to_owned(), DIR);
            }
            end += i + 1;
        }
        Ok(())
    }

    /// A free path `{stem}{ext}`, else `{stem}-2{ext}`, `{stem}-3{ext}`, …
    pub(super) fn unique(&self, stem: &str, ext: &str) -> String {
        let first = format!("{stem}{ext}");
        if self.is_free(&first) {
            return first;
        }
        (2u64..)
            .map(|n| format!("{stem}-{n}{ext}"))
            .find(|p| self.is_free(p))
            .unwrap_or(first)
    }

    // ---- adding items -----------------------------------------------------------------

    pub(super) fn dir(
        &mut self,
        out: &mut Vec<Item<'s>>,
        path: &str,
        m: Meta,
    ) -> Result<(), TreeError> {
        if self.taken.contains_key(path) {
            return Err(TreeError::Collision(path.to_owned()));
        }
        self.parents(path)?;
        self.dirs.insert(path.to_owned(), m);
        out.push(Item {
            path: path.to_owned(),
            kind: Kind::Dir,
            meta: m,
        });
        Ok(())
    }

    pub(super) fn text(
        &mut self,
        out: &mut Vec<Item<'s>>,
        path: &str,
        m: Meta,
        body: impl Into<String>,
    ) -> Result<(), TreeError> {
        self.claim(path, None)?;
        out.push(Item {
            path: path.to_owned(),
            kind: Kind::File(Body::Inline(body.into().into_bytes())),
            meta: m,
        });
        Ok(())
    }

    pub(super) fn synth_body(
        &self,
        path: &str,
        weight: u64,
        style: Style,
        prefix: &'static [u8],
    ) -> Body<'s> {
        Body::Synth(Synth {
            seed: derive(self.content_seed, path),
            weight,
            size: 0,
            style,
            prefix,
        })
    }

    pub(super) fn synth(
        &mut self,
        out: &mut Vec<Item<'s>>,
        path: &str,
        m: Meta,
        weight: u64,
        style: Style,
        prefix: &'static [u8],
    ) -> Result<(), TreeError> {
        self.claim(path, None)?;
        out.push(Item {
            path: path.to_owned(),
            kind: Kind::File(self.synth_body(path, weight, style, prefix)),
            meta: m,
        });
        Ok(())
    }

    /// An ELF executable or library with a pseudo-random size weight.
    pub(super) fn elf(
        &mut self,
        out: &mut Vec<Item<'s>>,
        path: &str,
        m: Meta,
    ) -> Result<(), TreeError> {
        let weight = Rng::labelled(self.spec.seed, path).log_uniform(64 << 10, 4 << 20);
        self.synth(out, path, m, weight, Style::Binary, ELF)
    }

    pub(super) fn symlink(
        &mut self,
        out: &mut Vec<Item<'s>>,
        path: &str,
        target: &str,
    ) -> Result<(), TreeError> {
        self.claim(path, Some(target))?;
        out.push(Item {
            path: path.to_owned(),
            kind: Kind::Symlink(target.to_owned()),
            meta: LINK,
        });
        Ok(())
    }

    /// One ELF file under several names; the first name in sort order holds the data.
    pub(super) fn hardlinks(
        &mut self,
        out: &mut Vec<Item<'s>>,
        names: &[&str],
        weight: u64,
    ) -> Result<(), TreeError> {
        let mut names = names.to_vec();
        names.sort_unstable();
        let primary = names[0];
        self.synth(out, primary, EXE, weight, Style::Binary, ELF)?;
        for name in &names[1..] {
            self.claim(name, None)?;
            out.push(Item {
                path: (*name).to_owned(),
                kind: Kind::HardLink(primary.to_owned()),
                meta: EXE,
            });
        }
        Ok(())
    }

    pub(super) fn unit(
        &mut self,
        out: &mut Vec<Item<'s>>,
        pkg: &str,
        name: &str,
        wanted_by: &str,
    ) -> Result<(), TreeError> {
        let body = unit_text(pkg, name, wanted_by);
        self.text(out, &format!("usr/lib/systemd/system/{name}"), REG, body)
    }
}

/// A systemd unit file of package `pkg` named `name`; `wanted_by` empty for a static unit.
pub(super) fn unit_text(pkg: &str, name: &str, wanted_by: &str) -> String {
    let (stem, kind) = name.rsplit_once('.').unwrap_or((name, "service"));
    let mut s = format!(
        "[Unit]\nDescription={} ({pkg})\nDocumentation=man:{}(8)\n",
        stem.trim_end_matches('@'),
        stem.trim_end_matches('@')
    );
    match kind {
        "service" => {
            s.push_str("After=network-online.target\nWants=network-online.target\n\n[Service]\nType=simple\n");
            s.push_str(&format!(
                "ExecStart=/usr/bin/{stem}\nRestart=on-failure\n",
                stem = stem.trim_end_matches('@')
            ));
        }
        "socket" => s.push_str(&format!("\n[Socket]\nListenStream=/run/{stem}.sock\n")),
        "timer" => s.push_str("\n[Timer]\nOnCalendar=daily\nPersistent=true\n"),
        _ => {}
    }
    if !wanted_by.is_empty() {
        s.push_str(&format!("\n[Install]\nWantedBy={wanted_by}\n"));
    }
    s
}

/// The kernel release of a variant, without the architecture.
fn kernel_release(variant: crate::spec::SynthVariant) -> &'static str {
    match variant {
        crate::spec::SynthVariant::Fcos => "6.11.5-300.fc41",
        crate::spec::SynthVariant::Scos => "5.14.0-522.el9",
        crate::spec::SynthVariant::Rhcos => "5.14.0-427.40.1.el9_4",
    }
}
