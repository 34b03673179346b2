//! Validation of a spec 2.x config, as `github.com/coreos/ignition/config/validate` walks
//! the `config/v2_2/types` (and, for the converter's check, `config/v2_3/types`) tree:
//! depth first in field order, a node's `Validate()` before its fields (and, when that is
//! fatal, instead of them), each field's `Validate<Field>()` before the field itself, and —
//! when the raw JSON is at hand — unrecognized keys reported after a struct's fields.
//!
//! Go places each entry at a line and column of the input; here it is placed at a JSON path
//! of the input (`$.storage.files.0.mode`).

use serde_json::Value;

use crate::decode::unrecognized;
use crate::unit;
use crate::url;
use crate::v22::*;

/// How bad an entry is (`report.entryKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Fatal.
    Error,
    /// Not fatal.
    Warning,
    /// A hint.
    Info,
    /// Not fatal to Ignition, but fatal to the spec 2 → 3 converter.
    Deprecated,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Error => "error",
            Kind::Warning => "warning",
            Kind::Info => "info",
            Kind::Deprecated => "deprecated",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: Kind,
    pub message: String,
    /// A JSON path of the config that was validated.
    pub path: String,
}

/// Which spec's rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Spec {
    /// 2.1.0 (the config has been translated up to 2.2's types).
    V21,
    /// 2.2.0.
    V22,
    /// 2.3.0: what the converter checks (`v23tov30.Check2_3`), on 2.2's types translated
    /// the way `config/v2_3.Translate` does (every partition gets `size` and `start`).
    V23,
}

/// Validates `cfg`. With `raw` (the JSON it was decoded from), unrecognized keys are
/// reported too, as `validate.ValidateConfig` does; without, it is
/// `validate.ValidateWithoutSource`.
pub(crate) fn validate(cfg: &Config, raw: Option<&Value>, spec: Spec) -> Vec<Entry> {
    let mut w = Walker {
        entries: Vec::new(),
        spec,
    };
    w.config(cfg, "$", raw);
    w.entries
}

/// Whether any entry is an error (`report.IsFatal`).
pub(crate) fn is_fatal(entries: &[Entry]) -> bool {
    entries.iter().any(|e| e.kind == Kind::Error)
}

struct Walker {
    entries: Vec<Entry>,
    spec: Spec,
}

fn child<'v>(raw: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    raw.and_then(|v| v.as_object()).and_then(|m| m.get(key))
}

fn item(raw: Option<&Value>, i: usize) -> Option<&Value> {
    match raw {
        Some(Value::Array(items)) => items.get(i),
        // Go keeps the parent's node when the child is not found.
        other => other,
    }
}

const ERR_PATH_RELATIVE: &str = "path not absolute";

fn check_path(p: &str) -> Result<(), String> {
    if p.starts_with('/') {
        Ok(())
    } else {
        Err(ERR_PATH_RELATIVE.into())
    }
}

fn check_mode(m: Option<i64>) -> Result<(), String> {
    match m {
        Some(m) if !(0..=0o7777).contains(&m) => Err("illegal file mode".into()),
        _ => Ok(()),
    }
}

/// `Disk.ValidatePartitions` (2.0's `Disk.Validate`): colliding numbers, overlaps,
/// misalignment. 2.2 compares partitions by value, 2.3 (pointers) by identity.
pub(crate) fn partition_problems(parts: &[Partition], by_identity: bool) -> Vec<&'static str> {
    let mut out = Vec::new();
    let collide = parts
        .iter()
        .enumerate()
        .any(|(i, a)| a.number != 0 && parts.iter().skip(i + 1).any(|b| b.number == a.number));
    if collide {
        out.push("partition numbers collide");
    }
    let end = |x: &Partition| {
        if x.size == 0 {
            x.start
        } else {
            x.start + x.size - 1
        }
    };
    let overlap = parts.iter().enumerate().any(|(i, a)| {
        a.start != 0
            && parts.iter().enumerate().any(|(j, b)| {
                let same = if by_identity { i == j } else { a == b };
                !same
                    && b.start != 0
                    && ((a.start >= b.start && a.start <= end(b))
                        || (end(a) >= b.start && end(a) <= end(b))
                        || (a.start < b.start && end(a) > end(b)))
            })
    });
    if overlap {
        out.push("partitions overlap");
    }
    if parts.iter().any(|x| x.start & 2047 != 0) {
        out.push("partitions misaligned");
    }
    out
}

/// `validateGUID`.
pub(crate) fn check_guid(g: &str) -> Result<(), String> {
    let b = g.as_bytes();
    let groups = [8, 4, 4, 4, 12];
    let ok = g.is_empty() || {
        let parts: Vec<&[u8]> = b.split(|&c| c == b'-').collect();
        parts.len() == 5
            && parts
                .iter()
                .zip(groups)
                .all(|(p, n)| p.len() == n && p.iter().all(u8::is_ascii_hexdigit))
    };
    if ok {
        Ok(())
    } else {
        Err("doesn't match the form \"01234567-89AB-CDEF-EDCB-A98765432101\"".into())
    }
}

/// `Verification.Validate`.
pub(crate) fn check_hash(hash: Option<&str>) -> Result<(), String> {
    let Some(h) = hash else { return Ok(()) };
    let Some((function, sum)) = h.split_once('-') else {
        return Err("malformed hash specifier".into());
    };
    if function != "sha512" {
        return Err("unrecognized hash function".into());
    }
    if sum.len() != 128 {
        return Err("incorrect size for hash sum".into());
    }
    Ok(())
}

/// `path.Ext`.
pub(crate) fn ext(name: &str) -> &str {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    match name[base_start..].rfind('.') {
        Some(i) => &name[base_start + i..],
        None => "",
    }
}

pub(crate) const UNIT_EXTS: &[&str] = &[
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// Go's `%q` of a string.
pub(crate) use machineos_diagnostics::go_quote;

impl Walker {
    fn push(&mut self, kind: Kind, path: &str, message: impl Into<String>) {
        self.entries.push(Entry {
            kind,
            message: message.into(),
            path: path.to_string(),
        });
    }

    fn check(&mut self, path: &str, r: Result<(), String>) {
        if let Err(m) = r {
            self.push(Kind::Error, path, m);
        }
    }

    /// Runs a node's `Validate()`; true when it was fatal (then its fields are skipped).
    fn node_validate(&mut self, f: impl FnOnce(&mut Vec<Entry>)) -> bool {
        let mut sub = Vec::new();
        f(&mut sub);
        let fatal = is_fatal(&sub);
        self.entries.extend(sub);
        fatal
    }

    /// Unrecognized keys of the object a struct was decoded from.
    fn unknown(&mut self, raw: Option<&Value>, p: &str, tags: &[&'static str]) {
        self.unknown_except(raw, p, tags, &[]);
    }

    /// Unrecognized keys, for a struct that spec 2.1 declares without `not_in_v21`.
    fn unknown_except(
        &mut self,
        raw: Option<&Value>,
        p: &str,
        tags: &[&'static str],
        not_in_v21: &[&str],
    ) {
        let Some(Value::Object(map)) = raw else {
            return;
        };
        let tags: Vec<&'static str> = tags
            .iter()
            .copied()
            .filter(|t| self.spec != Spec::V21 || !not_in_v21.contains(t))
            .collect();
        for (k, similar) in unrecognized(map, &tags) {
            let at = format!("{p}.{k}");
            self.push(
                Kind::Warning,
                &at,
                format!("Config has unrecognized key: {k}"),
            );
            if let Some(t) = similar {
                self.push(Kind::Info, &at, format!("Did you mean {t} instead of {k}"));
            }
        }
    }

    fn config(&mut self, c: &Config, p: &str, raw: Option<&Value>) {
        // Config.Validate: checkFilesFilesystems, checkDuplicateFilesystems.
        let mut known: Vec<&str> = vec!["root"];
        known.extend(c.storage.filesystems.iter().map(|f| f.name.as_str()));
        let nodes = c
            .storage
            .files
            .iter()
            .map(|f| ("File", &f.filesystem, &f.path))
            .chain(
                c.storage
                    .links
                    .iter()
                    .map(|l| ("Link", &l.filesystem, &l.path)),
            )
            .chain(
                c.storage
                    .directories
                    .iter()
                    .map(|d| ("Directory", &d.filesystem, &d.path)),
            );
        for (kind, fs, path) in nodes {
            if !fs.is_empty() && !known.contains(&fs.as_str()) {
                self.push(
                    Kind::Warning,
                    p,
                    format!(
                        "{kind} {} references nonexistent filesystem {}. (This is ok if it is defined in a referenced config)",
                        go_quote(path),
                        go_quote(fs)
                    ),
                );
            }
        }
        let mut seen: Vec<&str> = vec!["root"];
        for f in &c.storage.filesystems {
            if seen.contains(&f.name.as_str()) {
                self.push(
                    Kind::Warning,
                    p,
                    format!(
                        "Filesystem {} shadows exising filesystem definition",
                        go_quote(&f.name)
                    ),
                );
            }
            seen.push(&f.name);
        }
        self.ignition(
            &c.ignition,
            &format!("{p}.ignition"),
            child(raw, "ignition"),
        );
        self.networkd(
            &c.networkd,
            &format!("{p}.networkd"),
            child(raw, "networkd"),
        );
        self.passwd(&c.passwd, &format!("{p}.passwd"), child(raw, "passwd"));
        self.storage(&c.storage, &format!("{p}.storage"), child(raw, "storage"));
        self.systemd(&c.systemd, &format!("{p}.systemd"), child(raw, "systemd"));
        self.unknown(raw, p, Config::TAGS);
    }

    fn ignition(&mut self, i: &Ignition, p: &str, raw: Option<&Value>) {
        // Ignition.Validate checks the version, which parsing has already settled.
        let cp = format!("{p}.config");
        let craw = child(raw, "config");
        for (n, r) in i.config.append.iter().enumerate() {
            let ap = format!("{cp}.append");
            self.config_reference(r, &format!("{ap}.{n}"), item(child(craw, "append"), n));
        }
        if let Some(r) = &i.config.replace {
            self.config_reference(r, &format!("{cp}.replace"), child(craw, "replace"));
        }
        self.unknown(craw, &cp, IgnitionConfig::TAGS);
        let sp = format!("{p}.security");
        let sraw = child(raw, "security");
        let tp = format!("{sp}.tls");
        let traw = child(sraw, "tls");
        for (n, ca) in i.security.tls.certificate_authorities.iter().enumerate() {
            let at = format!("{tp}.certificateAuthorities.{n}");
            let araw = item(child(traw, "certificateAuthorities"), n);
            self.check(&format!("{at}.source"), url::check_v2(&ca.source));
            self.verification(
                &ca.verification,
                &format!("{at}.verification"),
                child(araw, "verification"),
            );
            self.unknown(araw, &at, CaReference::TAGS);
        }
        self.unknown(traw, &tp, Tls::TAGS);
        self.unknown(sraw, &sp, Security::TAGS);
        self.unknown(
            child(raw, "timeouts"),
            &format!("{p}.timeouts"),
            Timeouts::TAGS,
        );
        self.unknown_except(raw, p, Ignition::TAGS, &["security"]);
    }

    fn config_reference(&mut self, r: &ConfigReference, p: &str, raw: Option<&Value>) {
        self.check(&format!("{p}.source"), url::check_v2(&r.source));
        self.verification(
            &r.verification,
            &format!("{p}.verification"),
            child(raw, "verification"),
        );
        self.unknown(raw, p, ConfigReference::TAGS);
    }

    fn verification(&mut self, v: &Verification, p: &str, raw: Option<&Value>) {
        let fatal = self.node_validate(|sub| {
            if let Err(m) = check_hash(v.hash.as_deref()) {
                sub.push(Entry {
                    kind: Kind::Error,
                    message: m,
                    path: p.to_string(),
                });
            }
        });
        if !fatal {
            self.unknown(raw, p, Verification::TAGS);
        }
    }

    fn networkd(&mut self, n: &Networkd, p: &str, raw: Option<&Value>) {
        let uraw = child(raw, "units");
        for (i, u) in n.units.iter().enumerate() {
            let up = format!("{p}.units.{i}");
            let r = item(uraw, i);
            let fatal = self.node_validate(|sub| {
                if let Err(m) = unit::parse(&u.contents) {
                    sub.push(Entry {
                        kind: Kind::Error,
                        message: m,
                        path: up.clone(),
                    });
                }
                if !matches!(ext(&u.name), ".link" | ".netdev" | ".network") {
                    sub.push(Entry {
                        kind: Kind::Error,
                        message: "invalid networkd unit extension".into(),
                        path: up.clone(),
                    });
                }
            });
            if fatal {
                continue;
            }
            let draw = child(r, "dropins");
            for (j, d) in u.dropins.iter().enumerate() {
                let dp = format!("{up}.dropins.{j}");
                let fatal = self.dropin(
                    &d.contents,
                    &d.name,
                    &dp,
                    "invalid networkd drop-in extension",
                );
                if !fatal {
                    self.unknown(item(draw, j), &dp, NetworkdDropin::TAGS);
                }
            }
            self.unknown_except(r, &up, Networkdunit::TAGS, &["dropins"]);
        }
        self.unknown(raw, p, Networkd::TAGS);
    }

    /// A drop-in's `Validate()`; true when fatal.
    fn dropin(&mut self, contents: &str, name: &str, p: &str, bad_ext: &str) -> bool {
        self.node_validate(|sub| {
            if let Err(m) = unit::parse(contents) {
                sub.push(Entry {
                    kind: Kind::Error,
                    message: m,
                    path: p.to_string(),
                });
            }
            if ext(name) != ".conf" {
                sub.push(Entry {
                    kind: Kind::Error,
                    message: bad_ext.into(),
                    path: p.to_string(),
                });
            }
        })
    }

    fn passwd(&mut self, pw: &Passwd, p: &str, raw: Option<&Value>) {
        let graw = child(raw, "groups");
        for (i, _) in pw.groups.iter().enumerate() {
            self.unknown(item(graw, i), &format!("{p}.groups.{i}"), PasswdGroup::TAGS);
        }
        let uraw = child(raw, "users");
        for (i, u) in pw.users.iter().enumerate() {
            let up = format!("{p}.users.{i}");
            let r = item(uraw, i);
            let fatal = self.node_validate(|sub| {
                let Some(_) = &u.create else { return };
                let mut add = |kind, m: &str| {
                    sub.push(Entry {
                        kind,
                        message: m.to_string(),
                        path: up.clone(),
                    })
                };
                add(
                    Kind::Warning,
                    "the create object has been deprecated in favor of user-level options",
                );
                let conflicts = [
                    (!u.gecos.is_empty(), "gecos"),
                    (!u.groups.is_empty(), "groups"),
                    (!u.home_dir.is_empty(), "homeDir"),
                    (u.no_create_home, "noCreateHome"),
                    (u.no_log_init, "noLogInit"),
                    (u.no_user_group, "noUserGroup"),
                    (!u.primary_group.is_empty(), "primaryGroup"),
                    (!u.shell.is_empty(), "shell"),
                    (u.system, "system"),
                    (u.uid.is_some(), "uid"),
                ];
                for (set, field) in conflicts {
                    if set {
                        add(
                            Kind::Error,
                            &format!(
                                "cannot use both the create object and the user-level {field} field"
                            ),
                        );
                    }
                }
            });
            if fatal {
                continue;
            }
            if u.create.is_some() {
                self.unknown(
                    child(r, "create"),
                    &format!("{up}.create"),
                    Usercreate::TAGS,
                );
            }
            self.unknown(r, &up, PasswdUser::TAGS);
        }
        self.unknown(raw, p, Passwd::TAGS);
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        filesystem: &str,
        group: Option<&NodeGroup>,
        path: &str,
        user: Option<&NodeUser>,
        p: &str,
        raw: Option<&Value>,
    ) {
        if filesystem.is_empty() {
            self.push(
                Kind::Error,
                &format!("{p}.filesystem"),
                "no filesystem specified",
            );
        }
        if let Some(g) = group {
            let gp = format!("{p}.group");
            if g.id.is_some() && !g.name.is_empty() {
                self.push(Kind::Error, &gp, "cannot set both id and name");
            } else {
                self.unknown(child(raw, "group"), &gp, NodeGroup::TAGS);
            }
        }
        self.check(&format!("{p}.path"), check_path(path));
        if let Some(u) = user {
            let up = format!("{p}.user");
            if u.id.is_some() && !u.name.is_empty() {
                self.push(Kind::Error, &up, "cannot set both id and name");
            } else {
                self.unknown(child(raw, "user"), &up, NodeUser::TAGS);
            }
        }
    }

    fn mode(&mut self, mode: Option<i64>, p: &str) {
        let mp = format!("{p}.mode");
        self.check(&mp, check_mode(mode));
        if mode.is_none() && self.spec >= Spec::V22 {
            self.push(Kind::Warning, &mp, "permissions unset, defaulting to 0000");
        }
    }

    fn storage(&mut self, s: &Storage, p: &str, raw: Option<&Value>) {
        let draw = child(raw, "directories");
        for (i, d) in s.directories.iter().enumerate() {
            let dp = format!("{p}.directories.{i}");
            let r = item(draw, i);
            self.node(
                &d.filesystem,
                d.group.as_ref(),
                &d.path,
                d.user.as_ref(),
                &dp,
                r,
            );
            self.mode(d.mode, &dp);
            self.unknown_except(r, &dp, Directory::TAGS, &["overwrite"]);
        }
        let kraw = child(raw, "disks");
        for (i, d) in s.disks.iter().enumerate() {
            self.disk(d, &format!("{p}.disks.{i}"), item(kraw, i));
        }
        let fraw = child(raw, "files");
        for (i, f) in s.files.iter().enumerate() {
            self.file(f, &format!("{p}.files.{i}"), item(fraw, i));
        }
        let sraw = child(raw, "filesystems");
        for (i, f) in s.filesystems.iter().enumerate() {
            self.filesystem(f, &format!("{p}.filesystems.{i}"), item(sraw, i));
        }
        let lraw = child(raw, "links");
        for (i, l) in s.links.iter().enumerate() {
            let lp = format!("{p}.links.{i}");
            let r = item(lraw, i);
            self.node(
                &l.filesystem,
                l.group.as_ref(),
                &l.path,
                l.user.as_ref(),
                &lp,
                r,
            );
            self.unknown_except(r, &lp, Link::TAGS, &["overwrite"]);
        }
        let rraw = child(raw, "raid");
        for (i, a) in s.raid.iter().enumerate() {
            let ap = format!("{p}.raid.{i}");
            for d in &a.devices {
                if check_path(d).is_err() {
                    self.push(Kind::Error, &format!("{ap}.devices"), ERR_PATH_RELATIVE);
                }
            }
            let lp = format!("{ap}.level");
            match a.level.as_str() {
                "linear" | "raid0" | "0" | "stripe" => {
                    if a.spares != 0 {
                        self.push(
                            Kind::Error,
                            &lp,
                            "spares unsupported for arrays with a level greater than 0",
                        );
                    }
                }
                "raid1" | "1" | "mirror" | "raid4" | "4" | "raid5" | "5" | "raid6" | "6"
                | "raid10" | "10" => {}
                _ => self.push(Kind::Error, &lp, "unrecognized raid level"),
            }
            self.unknown_except(item(rraw, i), &ap, Raid::TAGS, &["options"]);
        }
        self.unknown(raw, p, Storage::TAGS);
    }

    fn disk(&mut self, d: &Disk, p: &str, raw: Option<&Value>) {
        let dev = format!("{p}.device");
        if d.device.is_empty() {
            self.push(Kind::Error, &dev, "disk device is required");
        } else {
            self.check(&dev, check_path(&d.device));
        }
        let pp = format!("{p}.partitions");
        let parts = &d.partitions;
        for m in partition_problems(parts, self.spec == Spec::V23) {
            self.push(Kind::Error, &pp, m);
        }
        let praw = child(raw, "partitions");
        for (i, x) in parts.iter().enumerate() {
            let xp = format!("{pp}.{i}");
            self.check(&format!("{xp}.guid"), check_guid(&x.guid));
            let lp = format!("{xp}.label");
            if x.label.len() > 36 {
                self.push(
                    Kind::Error,
                    &lp,
                    "partition labels may not exceed 36 characters",
                );
            }
            if x.label.contains(':') {
                self.push(
                    Kind::Warning,
                    &lp,
                    "partition label will be truncated to text before the colon",
                );
            }
            if self.spec == Spec::V23 {
                // config/v2_3.Translate gives every partition a size and a start.
                self.push(
                    Kind::Deprecated,
                    &format!("{xp}.size"),
                    "size is deprecated; use sizeMB instead",
                );
                self.push(
                    Kind::Deprecated,
                    &format!("{xp}.start"),
                    "start is deprecated; use startMB instead",
                );
            }
            self.check(&format!("{xp}.typeGuid"), check_guid(&x.type_guid));
            self.unknown(item(praw, i), &xp, Partition::TAGS);
        }
        self.unknown(raw, p, Disk::TAGS);
    }

    fn file(&mut self, f: &File, p: &str, raw: Option<&Value>) {
        if self.spec >= Spec::V22 && f.overwrite == Some(true) && f.append {
            self.push(
                Kind::Error,
                p,
                "cannot set both append and overwrite to true",
            );
            return;
        }
        self.node(
            &f.filesystem,
            f.group.as_ref(),
            &f.path,
            f.user.as_ref(),
            p,
            raw,
        );
        let cp = format!("{p}.contents");
        let craw = child(raw, "contents");
        if !matches!(f.contents.compression.as_str(), "" | "gzip") {
            self.push(
                Kind::Error,
                &format!("{cp}.compression"),
                "invalid compression method",
            );
        }
        let src = &f.contents.source;
        let r = url::check_v2(src).map_err(|e| {
            if self.spec == Spec::V23 {
                format!("invalid url {}: {e}", go_quote(src))
            } else {
                e
            }
        });
        self.check(&format!("{cp}.source"), r);
        self.verification(
            &f.contents.verification,
            &format!("{cp}.verification"),
            child(craw, "verification"),
        );
        self.unknown(craw, &cp, FileContents::TAGS);
        self.mode(f.mode, p);
        self.unknown_except(raw, p, File::TAGS, &["overwrite", "append"]);
    }

    fn filesystem(&mut self, f: &Filesystem, p: &str, raw: Option<&Value>) {
        let fatal = self.node_validate(|sub| {
            let mut add = |kind, m: &str| {
                sub.push(Entry {
                    kind,
                    message: m.to_string(),
                    path: p.to_string(),
                })
            };
            if f.mount.is_none() && f.path.is_none() {
                add(Kind::Error, "filesystem is missing mount or path");
            }
            if let Some(m) = &f.mount {
                if f.path.is_some() {
                    add(Kind::Error, "filesystem has both mount and path defined");
                }
                if m.create.is_some() {
                    if m.wipe_filesystem {
                        add(
                            Kind::Error,
                            "cannot use both create object and wipeFilesystem field",
                        );
                    }
                    if !m.options.is_empty() {
                        add(
                            Kind::Error,
                            "cannot use both create object and mount-level options field",
                        );
                    }
                    add(
                        Kind::Warning,
                        "the create object has been deprecated in favor of mount-level options",
                    );
                }
            }
        });
        if fatal {
            return;
        }
        if let Some(m) = &f.mount {
            let mp = format!("{p}.mount");
            let mraw = child(raw, "mount");
            let formats = ["ext4", "btrfs", "xfs", "swap", "vfat"];
            if !formats.contains(&m.format.as_str()) {
                self.push(Kind::Error, &mp, "invalid filesystem format");
            } else {
                if m.create.is_some() {
                    self.unknown(child(mraw, "create"), &format!("{mp}.create"), Create::TAGS);
                }
                self.check(&format!("{mp}.device"), check_path(&m.device));
                if let Some(label) = &m.label {
                    let (max, msg) = match m.format.as_str() {
                        "ext4" => (
                            16,
                            "filesystem labels cannot be longer than 16 characters when using ext4",
                        ),
                        "btrfs" => (
                            256,
                            "filesystem labels cannot be longer than 256 characters when using btrfs",
                        ),
                        "xfs" => (
                            12,
                            "filesystem labels cannot be longer than 12 characters when using xfs",
                        ),
                        "swap" => (
                            15,
                            "filesystem labels cannot be longer than 15 characters when using swap",
                        ),
                        _ => (
                            11,
                            "filesystem labels cannot be longer than 11 characters when using vfat",
                        ),
                    };
                    if label.len() > max {
                        self.push(Kind::Error, &format!("{mp}.label"), msg);
                    }
                }
                self.unknown(mraw, &mp, Mount::TAGS);
            }
        }
        if let Some(path) = &f.path
            && check_path(path).is_err()
        {
            let msg = if self.spec == Spec::V23 {
                format!("filesystem {}: path not absolute", go_quote(&f.name))
            } else {
                ERR_PATH_RELATIVE.to_string()
            };
            self.push(Kind::Error, &format!("{p}.path"), msg);
        }
        self.unknown(raw, p, Filesystem::TAGS);
    }

    fn systemd(&mut self, s: &Systemd, p: &str, raw: Option<&Value>) {
        let uraw = child(raw, "units");
        for (i, u) in s.units.iter().enumerate() {
            let up = format!("{p}.units.{i}");
            let r = item(uraw, i);
            let cp = format!("{up}.contents");
            match unit::parse(&u.contents) {
                Err(m) => self.push(Kind::Error, &cp, m),
                Ok(sections) => {
                    let enabled = u.enable || u.enabled == Some(true);
                    if let Some(sections) = sections
                        && enabled
                        && !u.contents.is_empty()
                        && !unit::has_install(&sections)
                    {
                        self.push(
                            Kind::Warning,
                            &cp,
                            format!(
                                "unit {} is enabled, but has no install section so enable does nothing",
                                go_quote(&u.name)
                            ),
                        );
                    }
                }
            }
            let draw = child(r, "dropins");
            for (j, d) in u.dropins.iter().enumerate() {
                let dp = format!("{up}.dropins.{j}");
                let fatal = self.dropin(
                    &d.contents,
                    &d.name,
                    &dp,
                    "invalid systemd drop-in extension",
                );
                if !fatal {
                    self.unknown(item(draw, j), &dp, SystemdDropin::TAGS);
                }
            }
            if !UNIT_EXTS.contains(&ext(&u.name)) {
                self.push(
                    Kind::Error,
                    &format!("{up}.name"),
                    "invalid systemd unit extension",
                );
            }
            self.unknown(r, &up, Unit::TAGS);
        }
        self.unknown(raw, p, Systemd::TAGS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_helpers() {
        assert_eq!(ext("a/b.c/d"), "");
        assert_eq!(ext("foo.service"), ".service");
        assert_eq!(ext("foo"), "");
        assert_eq!(go_quote("a\"b\n\u{1}é"), "\"a\\\"b\\n\\x01é\"");
        assert!(check_guid("").is_ok());
        assert!(check_guid("0FC63DAF-8483-4772-8E79-3D69D8477DE4").is_ok());
        assert!(check_guid("0FC63DAF-8483-4772-8E79").is_err());
        assert_eq!(
            check_hash(Some("sha256-ab")),
            Err("unrecognized hash function".into())
        );
        assert_eq!(
            check_hash(Some("abc")),
            Err("malformed hash specifier".into())
        );
    }
}
