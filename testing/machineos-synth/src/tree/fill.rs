//! The generated files of a package, by its kind: licenses, docs, binaries, helpers,
//! libraries with their soname symlinks, man pages, translations, data files, one unit,
//! kernel modules, firmware — each with a path made unique and a size weight.
use super::entry::{Body, ELF, EXE, GZIP, Kind, LINK, Meta, REG, XZ};
use super::packages::{Package, PkgKind, SYLLABLES};
use super::planner::{Item, Planner, unit_text};
use crate::content::Style;
use crate::rng::Rng;

impl<'s> Planner<'s> {
    /// Add `n` generated files to `pkg`, by the package's kind.
    pub(super) fn fill(&mut self, pkg: &mut Package<'s>, n: u64) {
        let mut rng = Rng::labelled(self.spec.seed, &format!("fill:{}", pkg.name));
        let mut st = FillState::default();
        let name = pkg.name.clone();
        for k in 0..n {
            let class = if k == 0 {
                Class::License
            } else {
                match pkg.kind {
                    PkgKind::Kernel => Class::Module,
                    PkgKind::Firmware => Class::Firmware,
                    PkgKind::Tool => *rng.pick(TOOL_MIX),
                    PkgKind::Library => *rng.pick(LIBRARY_MIX),
                    PkgKind::Data => *rng.pick(DATA_MIX),
                }
            };
            // A class can be impossible for a package (`usr/libexec/zincati` is a file, so
            // no helpers below it); plain data files always fit.
            if !self.fill_one(&name, class, &mut rng, &mut st, &mut pkg.items) {
                self.fill_one(&name, Class::Data, &mut rng, &mut st, &mut pkg.items);
            }
        }
    }

    /// Add one file of `class`; false if the class cannot be placed for this package.
    fn fill_one(
        &mut self,
        pkg: &str,
        class: Class,
        rng: &mut Rng,
        st: &mut FillState,
        out: &mut Vec<Item<'s>>,
    ) -> bool {
        let word = |rng: &mut Rng| *rng.pick(WORDS);
        let (path, m, weight, style, prefix): (String, Meta, u64, Style, &'static [u8]) =
            match class {
                Class::License => {
                    let p = self.unique(&format!("usr/share/licenses/{pkg}/COPYING"), "");
                    (p, REG, rng.log_uniform(2 << 10, 40 << 10), Style::Text, b"")
                }
                Class::Doc => {
                    let doc = *rng.pick(&[
                        "README",
                        "NEWS",
                        "AUTHORS",
                        "ChangeLog",
                        "TODO",
                        "CONTRIBUTING",
                    ]);
                    let ext = *rng.pick(&["", ".md", ".txt"]);
                    let p = self.unique(&format!("usr/share/doc/{pkg}/{doc}"), ext);
                    (p, REG, rng.log_uniform(1 << 10, 64 << 10), Style::Text, b"")
                }
                Class::Bin => {
                    let stem = if st.bins == 0 {
                        format!("usr/bin/{pkg}")
                    } else {
                        format!("usr/bin/{pkg}-{}", word(rng))
                    };
                    st.bins += 1;
                    let p = self.unique(&stem, "");
                    (
                        p,
                        EXE,
                        rng.log_uniform(16 << 10, 4 << 20),
                        Style::Binary,
                        ELF,
                    )
                }
                Class::Libexec => {
                    let p = self.unique(&format!("usr/libexec/{pkg}/{}", word(rng)), "");
                    (
                        p,
                        EXE,
                        rng.log_uniform(16 << 10, 2 << 20),
                        Style::Binary,
                        ELF,
                    )
                }
                Class::Lib => {
                    let stem = pkg.trim_start_matches("lib").trim_end_matches("-libs");
                    let stem = if st.libs == 0 {
                        format!("usr/lib64/lib{stem}")
                    } else {
                        format!("usr/lib64/lib{stem}-{}", word(rng))
                    };
                    st.libs += 1;
                    let major = rng.range(0, 9);
                    let ext = format!(".so.{major}.{}.{}", rng.range(0, 40), rng.range(0, 9));
                    let p = self.unique(&stem, &ext);
                    let soname = format!("{}.so.{major}", p.split(".so.").next().unwrap_or(&p));
                    let target = p.rsplit('/').next().unwrap_or(&p).to_owned();
                    if self.is_free(&soname) && self.claim(&soname, Some(&target)).is_ok() {
                        out.push(Item {
                            path: soname,
                            kind: Kind::Symlink(target),
                            meta: LINK,
                        });
                    }
                    (
                        p,
                        EXE,
                        rng.log_uniform(32 << 10, 4 << 20),
                        Style::Binary,
                        ELF,
                    )
                }
                Class::Man => {
                    let sec = *rng.pick(&["1", "1", "5", "8"]);
                    let stem = if st.mans == 0 {
                        format!("usr/share/man/man{sec}/{pkg}")
                    } else {
                        format!("usr/share/man/man{sec}/{pkg}-{}", word(rng))
                    };
                    st.mans += 1;
                    let p = self.unique(&stem, &format!(".{sec}.gz"));
                    (
                        p,
                        REG,
                        rng.log_uniform(1 << 10, 16 << 10),
                        Style::Random,
                        GZIP,
                    )
                }
                Class::Locale => match LANGS.get(st.langs) {
                    Some(lang) => {
                        st.langs += 1;
                        let p = self
                            .unique(&format!("usr/share/locale/{lang}/LC_MESSAGES/{pkg}"), ".mo");
                        (
                            p,
                            REG,
                            rng.log_uniform(2 << 10, 128 << 10),
                            Style::Binary,
                            b"\xde\x12\x04\x95",
                        )
                    }
                    None => return self.fill_one(pkg, Class::Data, rng, st, out),
                },
                Class::Data => {
                    if st.subdirs.is_empty() || rng.percent(4) {
                        let mut d = format!("usr/share/{pkg}/{}", word(rng));
                        if rng.percent(40) {
                            d.push('/');
                            d.push_str(word(rng));
                        }
                        st.subdirs.push(d);
                    }
                    let dir = rng.pick(&st.subdirs).clone();
                    let (ext, style) = *rng.pick(&[
                        (".xml", Style::Text),
                        (".json", Style::Text),
                        (".dat", Style::Binary),
                        (".conf", Style::Text),
                        (".db", Style::Binary),
                        (".txt", Style::Text),
                        (".bin", Style::Binary),
                    ]);
                    let p = self.unique(&format!("{dir}/{}", word(rng)), ext);
                    (p, REG, rng.log_uniform(128, 64 << 10), style, b"")
                }
                Class::Unit => {
                    if st.units > 0 {
                        return self.fill_one(pkg, Class::Data, rng, st, out);
                    }
                    st.units += 1;
                    let p = self.unique(&format!("usr/lib/systemd/system/{pkg}"), ".service");
                    let name = p.rsplit('/').next().unwrap_or(&p).to_owned();
                    let wanted_by = if rng.percent(50) {
                        "multi-user.target"
                    } else {
                        ""
                    };
                    if self.claim(&p, None).is_err() {
                        return false;
                    }
                    out.push(Item {
                        path: p,
                        kind: Kind::File(Body::Inline(
                            unit_text(pkg, &name, wanted_by).into_bytes(),
                        )),
                        meta: REG,
                    });
                    return true;
                }
                Class::Module => {
                    let area = *rng.pick(MODULE_AREAS);
                    let mut stem = String::new();
                    for _ in 0..rng.range(1, 3) {
                        stem.push_str(rng.pick::<&str>(SYLLABLES));
                    }
                    if rng.percent(40) {
                        stem.push('_');
                        stem.push_str(word(rng));
                    }
                    let p = self.unique(
                        &format!("usr/lib/modules/{}/kernel/{area}/{stem}", self.kver),
                        ".ko.xz",
                    );
                    (p, REG, rng.log_uniform(4 << 10, 1 << 20), Style::Random, XZ)
                }
                Class::Firmware => {
                    let vendor = *rng.pick(FIRMWARE_VENDORS);
                    let mut stem = String::new();
                    for _ in 0..rng.range(1, 2) {
                        stem.push_str(rng.pick::<&str>(SYLLABLES));
                    }
                    let ext = *rng.pick(&[".bin.xz", ".fw.xz", ".ucode.xz", ".bin"]);
                    let p = self.unique(
                        &format!("usr/lib/firmware/{vendor}/{stem}_{}", rng.range(1, 99)),
                        ext,
                    );
                    let style = if ext.ends_with(".xz") {
                        Style::Random
                    } else {
                        Style::Binary
                    };
                    let prefix = if ext.ends_with(".xz") { XZ } else { b"" };
                    (p, REG, rng.log_uniform(1 << 10, 4 << 20), style, prefix)
                }
            };
        if self.claim(&path, None).is_err() {
            return false;
        }
        out.push(Item {
            kind: Kind::File(self.synth_body(&path, weight, style, prefix)),
            path,
            meta: m,
        });
        true
    }
}

/// What one generated file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    License,
    Doc,
    Bin,
    Libexec,
    Lib,
    Man,
    Locale,
    Data,
    Unit,
    Module,
    Firmware,
}

/// What a tool package's generated files are, by frequency.
const TOOL_MIX: &[Class] = &[
    Class::Bin,
    Class::Bin,
    Class::Libexec,
    Class::Man,
    Class::Man,
    Class::Locale,
    Class::Locale,
    Class::Doc,
    Class::Data,
    Class::Data,
    Class::Data,
    Class::Data,
    Class::Data,
    Class::Unit,
];
/// What a library package's generated files are, by frequency.
const LIBRARY_MIX: &[Class] = &[
    Class::Lib,
    Class::Lib,
    Class::Lib,
    Class::Man,
    Class::Locale,
    Class::Doc,
    Class::Data,
    Class::Data,
    Class::Data,
];
/// What a data package's generated files are, by frequency.
const DATA_MIX: &[Class] = &[
    Class::Data,
    Class::Data,
    Class::Data,
    Class::Data,
    Class::Doc,
];

/// Per-package naming state while generating files.
#[derive(Debug, Default)]
struct FillState {
    bins: u32,
    libs: u32,
    mans: u32,
    langs: usize,
    units: u32,
    subdirs: Vec<String>,
}

/// Words of generated file names.
const WORDS: &[&str] = &[
    "alpha", "array", "backend", "base", "cache", "client", "common", "core", "data", "defaults",
    "device", "engine", "extra", "filter", "format", "helper", "index", "input", "layout",
    "legacy", "local", "main", "map", "meta", "model", "module", "net", "output", "parser",
    "plugin", "policy", "profile", "proto", "query", "rules", "schema", "server", "shared",
    "store", "style", "table", "template", "theme", "tools", "types", "util", "vendor", "zone",
];

/// Locales of translations, in the order a package gets them.
const LANGS: &[&str] = &[
    "ar", "bg", "ca", "cs", "da", "de", "el", "en_GB", "es", "et", "eu", "fi", "fr", "gl", "he",
    "hr", "hu", "id", "it", "ja", "ka", "ko", "lt", "lv", "nb", "nl", "pl", "pt", "pt_BR", "ro",
    "ru", "sk", "sl", "sr", "sv", "tr", "uk", "vi", "zh_CN", "zh_TW",
];

/// Directories of kernel modules below `kernel/`.
const MODULE_AREAS: &[&str] = &[
    "drivers/net/ethernet",
    "drivers/net/wireless",
    "drivers/scsi",
    "drivers/block",
    "drivers/gpu/drm",
    "drivers/usb/storage",
    "drivers/hid",
    "drivers/infiniband/hw",
    "drivers/md",
    "drivers/nvme/host",
    "drivers/virtio",
    "drivers/char",
    "fs",
    "fs/nfs",
    "net/ipv4",
    "net/ipv6",
    "net/netfilter",
    "net/sched",
    "crypto",
    "lib",
    "sound/pci",
];

/// Directories of firmware below `/usr/lib/firmware`.
const FIRMWARE_VENDORS: &[&str] = &[
    "amdgpu",
    "i915",
    "intel",
    "iwlwifi",
    "mellanox",
    "qcom",
    "rtl_nic",
    "brcm",
    "ath10k",
    "nvidia",
    "mediatek",
    "cxgb4",
    "bnx2x",
    "qed",
    "liquidio",
    "netronome",
    "radeon",
];
