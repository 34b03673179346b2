//! Packages: what one is (name, kind, share of the generated files, items), and the
//! invented packages that bring the tree to the requested file count — real Fedora CoreOS
//! names first, then pronounceable made-up ones.

use super::TreeError;
use super::entry::{Body, Kind};
use super::planner::{Item, Planner};
use crate::rng::Rng;
use crate::spec::SynthSpec;

/// What a package's generated files are like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PkgKind {
    /// Kernel modules.
    Kernel,
    /// Firmware blobs.
    Firmware,
    /// Binaries, helpers, man pages, translations, data, a unit.
    Tool,
    /// Shared libraries and some data.
    Library,
    /// Data files and docs.
    Data,
}

/// A package: its items and how many of the generated files it should get.
#[derive(Debug)]
pub(super) struct Package<'s> {
    /// The rpm name, unique in the tree.
    pub(super) name: String,
    /// What its generated files are like.
    pub(super) kind: PkgKind,
    /// Relative share of the generated files.
    pub(super) share: u64,
    /// Its items so far.
    pub(super) items: Vec<Item<'s>>,
}

impl Package<'_> {
    /// The sum of its generated files' size weights.
    pub(super) fn weight(&self) -> u64 {
        self.items
            .iter()
            .map(|i| match &i.kind {
                Kind::File(Body::Synth(s)) => s.weight,
                _ => 0,
            })
            .sum()
    }
}

/// The regular files among `items`.
pub(super) fn count_files(items: &[Item<'_>]) -> u64 {
    items
        .iter()
        .filter(|i| matches!(i.kind, Kind::File(_)))
        .count() as u64
}

/// Files per package the generator aims for when it decides how many packages to invent.
const FILES_PER_PACKAGE: u64 = 150;
/// Files a generated package gets at least (a license and one more).
const MIN_PACKAGE_FILES: u64 = 2;

/// How many packages to invent for `spec` when the fixed files number `fixed` and there
/// are `named` named packages: about one per [`FILES_PER_PACKAGE`] files left, and at least
/// enough to give every package layer a package, each with [`MIN_PACKAGE_FILES`].
pub(super) fn invented_count(spec: &SynthSpec, fixed: u64, named: u64) -> Result<u64, TreeError> {
    let middle = u64::from(spec.layers.saturating_sub(2));
    let fill_total = u64::from(spec.files).saturating_sub(fixed);
    let generated = (fill_total / FILES_PER_PACKAGE)
        .saturating_sub(named)
        .max(middle.saturating_sub(named));
    let need = fixed + generated * MIN_PACKAGE_FILES;
    if u64::from(spec.files) < need {
        return Err(TreeError::TooFewFiles {
            files: spec.files,
            layers: spec.layers,
            fixed,
            need,
        });
    }
    Ok(generated)
}

/// How many of the `total` generated files each package gets: every invented package (no
/// items yet) its minimum, the rest spread by share, the remainder one by one from the
/// first package on.
pub(super) fn file_counts(packages: &[Package<'_>], total: u64) -> Vec<u64> {
    let mut counts: Vec<u64> = packages
        .iter()
        .map(|pkg| {
            if pkg.items.is_empty() {
                MIN_PACKAGE_FILES
            } else {
                0
            }
        })
        .collect();
    let spread = total - counts.iter().sum::<u64>();
    let shares: u64 = packages.iter().map(|p| p.share).sum();
    for (c, pkg) in counts.iter_mut().zip(packages) {
        *c += spread * pkg.share / shares;
    }
    let left = total - counts.iter().sum::<u64>();
    for i in 0..left as usize {
        let n = counts.len();
        counts[i % n] += 1;
    }
    counts
}

impl<'s> Planner<'s> {
    /// Invented package number `i`, with no items yet.
    pub(super) fn invented(&mut self, i: u64) -> Package<'s> {
        let mut rng = Rng::labelled(self.spec.seed, &format!("package:{i}"));
        let (name, kind) = if let Some(name) = REAL_NAMES.get(i as usize) {
            let kind = if name.starts_with("lib") || name.ends_with("-libs") {
                PkgKind::Library
            } else if matches!(
                *name,
                "hwdata" | "selinux-policy-targeted" | "pciutils-libs"
            ) {
                PkgKind::Data
            } else {
                PkgKind::Tool
            };
            ((*name).to_owned(), kind)
        } else {
            let kind = *rng.pick(&[
                PkgKind::Tool,
                PkgKind::Tool,
                PkgKind::Library,
                PkgKind::Library,
                PkgKind::Data,
            ]);
            let mut stem = String::new();
            for _ in 0..rng.range(2, 3) {
                stem.push_str(rng.pick::<&str>(SYLLABLES));
            }
            let name = match kind {
                PkgKind::Library => format!("lib{stem}"),
                PkgKind::Data => format!("{stem}-data"),
                _ => {
                    let suffix = *rng.pick(&["", "", "-utils", "-tools", "d"]);
                    format!("{stem}{suffix}")
                }
            };
            (name, kind)
        };
        let name = if self.packages.contains(&name) {
            format!("{name}{i}")
        } else {
            name
        };
        self.packages.insert(name.clone());
        Package {
            name,
            kind,
            share: rng.log_uniform(4, 64),
            items: Vec::new(),
        }
    }
}

/// Fedora CoreOS package names for the first invented packages.
const REAL_NAMES: &[&str] = &[
    "acl",
    "attr",
    "audit-libs",
    "bzip2-libs",
    "cracklib",
    "cryptsetup",
    "curl",
    "cyrus-sasl",
    "device-mapper",
    "dracut",
    "e2fsprogs-libs",
    "elfutils-libs",
    "expat",
    "file-libs",
    "findutils",
    "gawk",
    "gdisk",
    "glib2",
    "gmp",
    "gnupg2",
    "gnutls",
    "gpgme",
    "grep",
    "gzip",
    "hwdata",
    "iproute",
    "iptables-nft",
    "json-c",
    "kbd",
    "keyutils",
    "kmod",
    "krb5-libs",
    "less",
    "libarchive",
    "libblkid",
    "libcap",
    "libffi",
    "libgcc",
    "libidn2",
    "libmount",
    "libnl3",
    "libseccomp",
    "libselinux",
    "libsemanage",
    "libsepol",
    "libssh",
    "libtasn1",
    "libunistring",
    "libuuid",
    "libxml2",
    "libzstd",
    "lvm2",
    "lz4-libs",
    "mdadm",
    "ncurses",
    "nettle",
    "nftables",
    "nss",
    "openldap",
    "openssl-libs",
    "p11-kit",
    "pam",
    "pciutils-libs",
    "pcre2",
    "policycoreutils",
    "popt",
    "procps-ng",
    "readline",
    "rsync",
    "sed",
    "selinux-policy-targeted",
    "sqlite-libs",
    "tar",
    "tpm2-tss",
    "vim-minimal",
    "which",
    "xfsprogs",
    "xz-libs",
    "zlib",
];

/// Syllables of made-up package, module and firmware names.
pub(super) const SYLLABLES: &[&str] = &[
    "ac", "al", "ar", "be", "bo", "ca", "co", "da", "de", "el", "en", "fa", "fi", "ga", "gi", "ha",
    "in", "io", "ka", "la", "li", "lo", "ma", "mi", "mo", "na", "ne", "no", "or", "pa", "pe", "po",
    "ra", "re", "ri", "ro", "sa", "se", "si", "so", "ta", "te", "ti", "to", "tu", "un", "va", "ve",
    "vi", "xa", "ze",
];
