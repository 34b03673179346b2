//! Specs 2.1.0 and 2.0.0, which `config/v2_2.Parse` still accepts by falling back to
//! `config/v2_1.Parse` and `config/v2_0.Parse` and translating the result up to 2.2
//! (`TranslateFromV2_1`, `TranslateFromV2_0`), and the `config/v1` decode that ends the
//! chain (it only matters whether it fails: a config it decodes lacks `ignitionVersion: 1`
//! and is an unknown version).

use serde_json::Value;

use crate::decode::{Dec, Decode, TypeError, go_struct};
use crate::semver::Semver;
use crate::unit;
use crate::url;
use crate::v22;
use crate::validate2::{self, Entry, Kind, check_hash, ext, go_quote};

// ---------------------------------------------------------------------------------------
// 2.1: 2.2's types without a few fields, and plain values where 2.2 has pointers.

/// Removes, wherever Go's decoder would find them (keys match ignoring case), the members
/// at `path` (`*` for every element of an array).
fn strip(v: &mut Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match v {
        Value::Array(items) if *first == "*" => {
            for item in items {
                strip(item, rest);
            }
        }
        Value::Object(map) => {
            if rest.is_empty() {
                map.retain(|k, _| !k.eq_ignore_ascii_case(first));
            } else {
                for (k, child) in map.iter_mut() {
                    if k.eq_ignore_ascii_case(first) {
                        strip(child, rest);
                    }
                }
            }
        }
        _ => {}
    }
}

/// `config/v2_1`'s decode, translated to 2.2 (`config/v2_2.TranslateFromV2_1`).
pub(crate) fn decode_v21(v: &Value) -> (v22::Config, Option<TypeError>) {
    let mut v = v.clone();
    for path in [
        &["ignition", "security"][..],
        &["storage", "files", "*", "overwrite"],
        &["storage", "files", "*", "append"],
        &["storage", "directories", "*", "overwrite"],
        &["storage", "links", "*", "overwrite"],
        &["storage", "raid", "*", "options"],
        &["networkd", "units", "*", "dropins"],
    ] {
        strip(&mut v, path);
    }
    let mut d = Dec::new();
    let mut cfg = v22::Config::default();
    v22::Config::decode(&mut d, &v, "$", &mut cfg);
    // 2.1's modes are plain ints, its owners plain structs: translated, always set.
    for f in &mut cfg.storage.files {
        f.mode.get_or_insert(0);
        f.user.get_or_insert_with(Default::default);
        f.group.get_or_insert_with(Default::default);
    }
    for x in &mut cfg.storage.directories {
        x.mode.get_or_insert(0);
        x.user.get_or_insert_with(Default::default);
        x.group.get_or_insert_with(Default::default);
    }
    for l in &mut cfg.storage.links {
        l.user.get_or_insert_with(Default::default);
        l.group.get_or_insert_with(Default::default);
    }
    cfg.ignition.version = "2.2.0".into();
    (cfg, d.finish())
}

// ---------------------------------------------------------------------------------------
// 2.0

/// A decode-time failure of one of 2.0's custom types (Go's `UnmarshalJSON` error).
fn custom_error(d: &mut Dec, path: &str, message: &str) {
    d.custom_error(path, message);
}

/// `types.Url`: a string that `url.Parse` accepts, as `URL.String` prints it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Url(pub String);

impl Decode for Url {
    fn go_type() -> String {
        "types.Url".into()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::Null => {}
            // Go keeps the parsed URL and prints it back when translating (a lower-case
            // scheme, notably).
            Value::String(s) => match url::reserialize(s) {
                Some(u) => out.0 = u,
                None => custom_error(d, path, "unable to parse url"),
            },
            _ => String::decode(d, v, path, &mut out.0),
        }
    }
}

/// `types.Hash`: `function-sum`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hash(pub String);

impl Decode for Hash {
    fn go_type() -> String {
        "types.Hash".into()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::String(s) if !s.contains('-') => {
                custom_error(d, path, "malformed hash specifier");
            }
            _ => String::decode(d, v, path, &mut out.0),
        }
    }
}

/// `types.IgnitionVersion`: a semantic version (empty is the zero version).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Version(pub Option<Semver>);

impl Decode for Version {
    fn go_type() -> String {
        "types.IgnitionVersion".into()
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        match v {
            Value::String(s) if s.is_empty() => {}
            Value::String(s) => match Semver::parse(s) {
                Some(sv) => out.0 = Some(sv),
                None => custom_error(d, path, &format!("{s} is not in dotted-tri format")),
            },
            Value::Null => {}
            _ => custom_error(d, path, "invalid semver string"),
        }
    }
}

/// An unsigned Go integer (`uint`, `uint32`, `uint64`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Uint<const BITS: u32>(pub u64);

impl<const BITS: u32> Decode for Uint<BITS> {
    fn go_type() -> String {
        if BITS == 64 {
            "uint64".into()
        } else {
            format!("uint{BITS}")
        }
    }
    fn decode(d: &mut Dec, v: &Value, path: &str, out: &mut Self) {
        if let Value::Number(n) = v
            && let Some(u) = n.as_u64()
            && (BITS == 64 || u >> BITS == 0)
        {
            out.0 = u;
            return;
        }
        d.number_error(path, v, &Self::go_type());
    }
}

go_struct! {
    Config20 = "types.Config" {
        ignition: Ignition20 = "ignition",
        storage: Storage20 = "storage",
        systemd: Systemd20 = "systemd",
        networkd: Networkd20 = "networkd",
        passwd: Passwd20 = "passwd",
    }
}
go_struct! {
    Ignition20 = "types.Ignition" { version: Version = "version", config: IgnitionConfig20 = "config" }
}
go_struct! {
    IgnitionConfig20 = "types.IgnitionConfig" {
        append: Vec<ConfigReference20> = "append",
        replace: Option<ConfigReference20> = "replace",
    }
}
go_struct! {
    ConfigReference20 = "types.ConfigReference" { source: Url = "source", verification: Verification20 = "verification" }
}
go_struct! {
    Verification20 = "types.Verification" { hash: Option<Hash> = "hash" }
}
go_struct! {
    Storage20 = "types.Storage" {
        disks: Vec<Disk20> = "disks",
        raid: Vec<Raid20> = "raid",
        filesystems: Vec<Filesystem20> = "filesystems",
        files: Vec<File20> = "files",
    }
}
go_struct! {
    Disk20 = "types.Disk" { device: String = "device", wipe_table: bool = "wipeTable", partitions: Vec<Partition20> = "partitions" }
}
go_struct! {
    Partition20 = "types.Partition" {
        label: String = "label",
        number: i64 = "number",
        size: Uint<64> = "size",
        start: Uint<64> = "start",
        type_guid: String = "typeGuid",
    }
}
go_struct! {
    Raid20 = "types.Raid" { name: String = "name", level: String = "level", devices: Vec<String> = "devices", spares: i64 = "spares" }
}
go_struct! {
    Filesystem20 = "types.Filesystem" { name: String = "name", mount: Option<Mount20> = "mount", path: Option<String> = "path" }
}
go_struct! {
    Mount20 = "types.FilesystemMount" { device: String = "device", format: String = "format", create: Option<Create20> = "create" }
}
go_struct! {
    Create20 = "types.FilesystemCreate" { force: bool = "force", options: Vec<String> = "options" }
}
go_struct! {
    File20 = "types.File" {
        filesystem: String = "filesystem",
        path: String = "path",
        contents: Contents20 = "contents",
        mode: Uint<32> = "mode",
        user: Id20 = "user",
        group: Id20 = "group",
    }
}
go_struct! {
    Id20 = "types.FileUser" { id: i64 = "id" }
}
go_struct! {
    Contents20 = "types.FileContents" { compression: String = "compression", source: Url = "source", verification: Verification20 = "verification" }
}
go_struct! {
    Systemd20 = "types.Systemd" { units: Vec<Unit20> = "units" }
}
go_struct! {
    Unit20 = "types.SystemdUnit" {
        name: String = "name",
        enable: bool = "enable",
        mask: bool = "mask",
        contents: String = "contents",
        dropins: Vec<Dropin20> = "dropins",
    }
}
go_struct! {
    Dropin20 = "types.SystemdUnitDropIn" { name: String = "name", contents: String = "contents" }
}
go_struct! {
    Networkd20 = "types.Networkd" { units: Vec<NetworkdUnit20> = "units" }
}
go_struct! {
    NetworkdUnit20 = "types.NetworkdUnit" { name: String = "name", contents: String = "contents" }
}
go_struct! {
    Passwd20 = "types.Passwd" { users: Vec<User20> = "users", groups: Vec<Group20> = "groups" }
}
go_struct! {
    User20 = "types.User" {
        name: String = "name",
        password_hash: String = "passwordHash",
        ssh_authorized_keys: Vec<String> = "sshAuthorizedKeys",
        create: Option<UserCreate20> = "create",
    }
}
go_struct! {
    UserCreate20 = "types.UserCreate" {
        uid: Option<Uint<64>> = "uid",
        gecos: String = "gecos",
        home_dir: String = "homeDir",
        no_create_home: bool = "noCreateHome",
        primary_group: String = "primaryGroup",
        groups: Vec<String> = "groups",
        no_user_group: bool = "noUserGroup",
        system: bool = "system",
        no_log_init: bool = "noLogInit",
        shell: String = "shell",
    }
}
go_struct! {
    Group20 = "types.Group" {
        name: String = "name",
        gid: Option<Uint<64>> = "gid",
        password_hash: String = "passwordHash",
        system: bool = "system",
    }
}

/// `config/v2_0`'s decode, with the version it declares (the zero version when empty).
pub(crate) fn decode_v20(v: &Value) -> Result<(Config20, Semver), TypeError> {
    let mut d = Dec::new();
    let mut cfg = Config20::default();
    Config20::decode(&mut d, v, "$", &mut cfg);
    if let Some(e) = d.finish() {
        return Err(e);
    }
    let version = cfg.ignition.version.0.clone().unwrap_or(Semver {
        major: 0,
        minor: 0,
        patch: 0,
        pre: String::new(),
        meta: String::new(),
    });
    Ok((cfg, version))
}

/// `config/v2_0`'s validation (with the raw JSON, as `validate.ValidateConfig`), and the
/// config translated to 2.2 (`TranslateFromV2_0`, then `TranslateFromV2_1`).
pub(crate) fn validate_v20(c: &Config20, raw: &Value) -> (v22::Config, Vec<Entry>) {
    let mut w = Walker20::default();
    w.config(c, raw);
    (translate_v20(c), w.entries)
}

#[derive(Default)]
struct Walker20 {
    entries: Vec<Entry>,
}

fn child<'v>(raw: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    raw.and_then(|v| v.as_object()).and_then(|m| m.get(key))
}

fn item(raw: Option<&Value>, i: usize) -> Option<&Value> {
    raw.and_then(|v| v.as_array()).and_then(|a| a.get(i))
}

impl Walker20 {
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

    fn unknown(&mut self, raw: Option<&Value>, p: &str, tags: &[&'static str]) {
        let Some(Value::Object(map)) = raw else {
            return;
        };
        for (k, similar) in crate::decode::unrecognized(map, tags) {
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

    fn path(&mut self, p: &str, value: &str) {
        if !value.starts_with('/') {
            self.push(Kind::Error, p, "path not absolute");
        }
    }

    fn url(&mut self, p: &str, u: &Url) {
        let r = if u.0.is_empty() {
            Ok(())
        } else {
            match url::scheme(&u.0).as_deref() {
                Some("http" | "https" | "oem") => Ok(()),
                Some("data") => machineos_ignition::dataurl::check(&u.0)
                    .map(|_| ())
                    .map_err(|e| e.0),
                _ => Err("invalid url scheme".to_string()),
            }
        };
        self.check(p, r);
    }

    fn verification(&mut self, v: &Verification20, p: &str, raw: Option<&Value>) {
        if let Some(h) = &v.hash {
            let hp = format!("{p}.hash");
            // Hash.Validate; the format was checked when decoding.
            match check_hash(Some(&h.0)) {
                Err(m) if m != "malformed hash specifier" => self.push(Kind::Error, &hp, m),
                _ => {}
            }
        }
        self.unknown(raw, p, Verification20::TAGS);
    }

    fn config(&mut self, c: &Config20, raw: &Value) {
        let raw = Some(raw);
        let mut known = vec!["root"];
        known.extend(c.storage.filesystems.iter().map(|f| f.name.as_str()));
        for f in &c.storage.files {
            if !f.filesystem.is_empty() && !known.contains(&f.filesystem.as_str()) {
                self.push(
                    Kind::Warning,
                    "$",
                    format!(
                        "File {} references nonexistent filesystem {}. (This is ok if it is defined in a referenced config)",
                        go_quote(&f.path),
                        go_quote(&f.filesystem)
                    ),
                );
            }
        }
        let mut seen = vec!["root"];
        for f in &c.storage.filesystems {
            if seen.contains(&f.name.as_str()) {
                self.push(
                    Kind::Warning,
                    "$",
                    format!(
                        "Filesystem {} shadows exising filesystem definition",
                        go_quote(&f.name)
                    ),
                );
            }
            seen.push(&f.name);
        }

        let iraw = child(raw, "ignition");
        let craw = child(iraw, "config");
        for (i, r) in c.ignition.config.append.iter().enumerate() {
            let p = format!("$.ignition.config.append.{i}");
            let rr = item(child(craw, "append"), i);
            self.url(&format!("{p}.source"), &r.source);
            self.verification(
                &r.verification,
                &format!("{p}.verification"),
                child(rr, "verification"),
            );
            self.unknown(rr, &p, ConfigReference20::TAGS);
        }
        if let Some(r) = &c.ignition.config.replace {
            let p = "$.ignition.config.replace";
            let rr = child(craw, "replace");
            self.url(&format!("{p}.source"), &r.source);
            self.verification(
                &r.verification,
                &format!("{p}.verification"),
                child(rr, "verification"),
            );
            self.unknown(rr, p, ConfigReference20::TAGS);
        }
        self.unknown(craw, "$.ignition.config", IgnitionConfig20::TAGS);
        self.unknown(iraw, "$.ignition", Ignition20::TAGS);

        let sraw = child(raw, "storage");
        for (i, d) in c.storage.disks.iter().enumerate() {
            let p = format!("$.storage.disks.{i}");
            let dr = item(child(sraw, "disks"), i);
            let parts: Vec<v22::Partition> = d.partitions.iter().map(partition).collect();
            let mut sub = Vec::new();
            if d.device.is_empty() {
                sub.push("disk device is required");
            }
            sub.extend(validate2::partition_problems(&parts, false));
            if !sub.is_empty() {
                for m in sub {
                    self.push(Kind::Error, &p, m);
                }
                continue;
            }
            self.path(&format!("{p}.device"), &d.device);
            let praw = child(dr, "partitions");
            for (j, x) in d.partitions.iter().enumerate() {
                let xp = format!("{p}.partitions.{j}");
                let lp = format!("{xp}.label");
                if x.label.len() > 36 {
                    self.push(
                        Kind::Error,
                        &lp,
                        "partition labels may not exceed 36 characters",
                    );
                } else if x.label.contains(':') {
                    self.push(
                        Kind::Warning,
                        &lp,
                        "partition label will be truncated to text before the colon",
                    );
                }
                self.check(
                    &format!("{xp}.typeGuid"),
                    validate2::check_guid(&x.type_guid),
                );
                self.unknown(item(praw, j), &xp, Partition20::TAGS);
            }
            self.unknown(dr, &p, Disk20::TAGS);
        }
        for (i, a) in c.storage.raid.iter().enumerate() {
            let p = format!("$.storage.raid.{i}");
            let level = match a.level.as_str() {
                "linear" | "raid0" | "0" | "stripe" if a.spares != 0 => {
                    Some("spares unsupported for arrays with a level greater than 0")
                }
                "linear" | "raid0" | "0" | "stripe" | "raid1" | "1" | "mirror" | "raid4" | "4"
                | "raid5" | "5" | "raid6" | "6" | "raid10" | "10" => None,
                _ => Some("unrecognized raid level"),
            };
            if let Some(m) = level {
                self.push(Kind::Error, &p, m);
                continue;
            }
            for (j, dev) in a.devices.iter().enumerate() {
                self.path(&format!("{p}.devices.{j}"), dev);
            }
            self.unknown(item(child(sraw, "raid"), i), &p, Raid20::TAGS);
        }
        for (i, f) in c.storage.filesystems.iter().enumerate() {
            let p = format!("$.storage.filesystems.{i}");
            let fr = item(child(sraw, "filesystems"), i);
            if f.mount.is_none() && f.path.is_none() {
                self.push(Kind::Error, &p, "filesystem is missing mount or path");
                continue;
            }
            if f.mount.is_some() && f.path.is_some() {
                self.push(
                    Kind::Error,
                    &p,
                    "filesystem has both mount and path defined",
                );
                continue;
            }
            if let Some(m) = &f.mount {
                let mp = format!("{p}.mount");
                self.path(&format!("{mp}.device"), &m.device);
                if !matches!(m.format.as_str(), "ext4" | "btrfs" | "xfs") {
                    self.push(
                        Kind::Error,
                        &format!("{mp}.format"),
                        "invalid filesystem format",
                    );
                }
                if m.create.is_some() {
                    self.unknown(
                        child(child(fr, "mount"), "create"),
                        &format!("{mp}.create"),
                        Create20::TAGS,
                    );
                }
                self.unknown(child(fr, "mount"), &mp, Mount20::TAGS);
            }
            if let Some(path) = &f.path {
                self.path(&format!("{p}.path"), path);
            }
            self.unknown(fr, &p, Filesystem20::TAGS);
        }
        for (i, f) in c.storage.files.iter().enumerate() {
            let p = format!("$.storage.files.{i}");
            let fr = item(child(sraw, "files"), i);
            if f.filesystem.is_empty() {
                self.push(Kind::Error, &p, "no filesystem specified");
                continue;
            }
            self.path(&format!("{p}.path"), &f.path);
            let cp = format!("{p}.contents");
            let cr = child(fr, "contents");
            if !matches!(f.contents.compression.as_str(), "" | "gzip") {
                self.push(
                    Kind::Error,
                    &format!("{cp}.compression"),
                    "invalid compression method",
                );
            }
            self.url(&format!("{cp}.source"), &f.contents.source);
            self.verification(
                &f.contents.verification,
                &format!("{cp}.verification"),
                child(cr, "verification"),
            );
            self.unknown(cr, &cp, Contents20::TAGS);
            if f.mode.0 & !0o7777 != 0 {
                self.push(Kind::Error, &format!("{p}.mode"), "illegal file mode");
            }
            self.unknown(child(fr, "user"), &format!("{p}.user"), Id20::TAGS);
            self.unknown(child(fr, "group"), &format!("{p}.group"), Id20::TAGS);
            self.unknown(fr, &p, File20::TAGS);
        }
        self.unknown(sraw, "$.storage", Storage20::TAGS);

        let yraw = child(raw, "systemd");
        for (i, u) in c.systemd.units.iter().enumerate() {
            let p = format!("$.systemd.units.{i}");
            let ur = item(child(yraw, "units"), i);
            match unit::parse(&u.contents) {
                Err(m) => {
                    self.push(Kind::Error, &p, m);
                    continue;
                }
                Ok(sections) => {
                    if let Some(sections) = sections
                        && u.enable
                        && !u.contents.is_empty()
                        && !unit::has_install(&sections)
                    {
                        self.push(
                            Kind::Warning,
                            &p,
                            format!(
                                "unit {} is enabled, but has no install section so enable does nothing",
                                go_quote(&u.name)
                            ),
                        );
                    }
                }
            }
            if !validate2::UNIT_EXTS.contains(&ext(&u.name)) {
                self.push(
                    Kind::Error,
                    &format!("{p}.name"),
                    "invalid systemd unit extension",
                );
            }
            for (j, d) in u.dropins.iter().enumerate() {
                let dp = format!("{p}.dropins.{j}");
                if let Err(m) = unit::parse(&d.contents) {
                    self.push(Kind::Error, &dp, m);
                    continue;
                }
                if ext(&d.name) != ".conf" {
                    self.push(
                        Kind::Error,
                        &format!("{dp}.name"),
                        "invalid systemd drop-in extension",
                    );
                }
                self.unknown(item(child(ur, "dropins"), j), &dp, Dropin20::TAGS);
            }
            self.unknown(ur, &p, Unit20::TAGS);
        }
        self.unknown(yraw, "$.systemd", Systemd20::TAGS);

        let nraw = child(raw, "networkd");
        for (i, u) in c.networkd.units.iter().enumerate() {
            let p = format!("$.networkd.units.{i}");
            if let Err(m) = unit::parse(&u.contents) {
                self.push(Kind::Error, &p, m);
                continue;
            }
            if !matches!(ext(&u.name), ".link" | ".netdev" | ".network") {
                self.push(
                    Kind::Error,
                    &format!("{p}.name"),
                    "invalid networkd unit extension",
                );
            }
            self.unknown(item(child(nraw, "units"), i), &p, NetworkdUnit20::TAGS);
        }
        self.unknown(nraw, "$.networkd", Networkd20::TAGS);

        let praw = child(raw, "passwd");
        for (i, u) in c.passwd.users.iter().enumerate() {
            let p = format!("$.passwd.users.{i}");
            let ur = item(child(praw, "users"), i);
            if u.create.is_some() {
                self.unknown(
                    child(ur, "create"),
                    &format!("{p}.create"),
                    UserCreate20::TAGS,
                );
            }
            self.unknown(ur, &p, User20::TAGS);
        }
        for (i, _) in c.passwd.groups.iter().enumerate() {
            let p = format!("$.passwd.groups.{i}");
            self.unknown(item(child(praw, "groups"), i), &p, Group20::TAGS);
        }
        self.unknown(praw, "$.passwd", Passwd20::TAGS);
        self.unknown(raw, "$", Config20::TAGS);
    }
}

fn partition(x: &Partition20) -> v22::Partition {
    v22::Partition {
        guid: String::new(),
        label: x.label.clone(),
        number: x.number,
        size: x.size.0 as i64,
        start: x.start.0 as i64,
        type_guid: x.type_guid.clone(),
    }
}

/// `TranslateFromV2_0` then `TranslateFromV2_1`.
fn translate_v20(c: &Config20) -> v22::Config {
    let reference = |r: &ConfigReference20| v22::ConfigReference {
        source: r.source.0.clone(),
        verification: v22::Verification {
            hash: r.verification.hash.as_ref().map(|h| h.0.clone()),
        },
    };
    let mut out = v22::Config::default();
    out.ignition.version = "2.2.0".into();
    out.ignition.config.append = c.ignition.config.append.iter().map(reference).collect();
    out.ignition.config.replace = c.ignition.config.replace.as_ref().map(reference);
    out.storage.disks = c
        .storage
        .disks
        .iter()
        .map(|d| v22::Disk {
            device: d.device.clone(),
            partitions: d.partitions.iter().map(partition).collect(),
            wipe_table: d.wipe_table,
        })
        .collect();
    out.storage.raid = c
        .storage
        .raid
        .iter()
        .map(|a| v22::Raid {
            devices: a.devices.clone(),
            level: a.level.clone(),
            name: a.name.clone(),
            options: Vec::new(),
            spares: a.spares,
        })
        .collect();
    out.storage.filesystems = c
        .storage
        .filesystems
        .iter()
        .map(|f| v22::Filesystem {
            mount: f.mount.as_ref().map(|m| v22::Mount {
                create: m.create.as_ref().map(|c| v22::Create {
                    force: c.force,
                    options: c.options.clone(),
                }),
                device: m.device.clone(),
                format: m.format.clone(),
                ..Default::default()
            }),
            name: f.name.clone(),
            path: f.path.clone(),
        })
        .collect();
    out.storage.files = c
        .storage
        .files
        .iter()
        .map(|f| v22::File {
            filesystem: f.filesystem.clone(),
            group: Some(v22::NodeGroup {
                id: Some(f.group.id),
                name: String::new(),
            }),
            path: f.path.clone(),
            user: Some(v22::NodeUser {
                id: Some(f.user.id),
                name: String::new(),
            }),
            contents: v22::FileContents {
                compression: f.contents.compression.clone(),
                source: f.contents.source.0.clone(),
                verification: v22::Verification {
                    hash: f.contents.verification.hash.as_ref().map(|h| h.0.clone()),
                },
            },
            mode: Some(f.mode.0 as i64),
            ..Default::default()
        })
        .collect();
    out.systemd.units = c
        .systemd
        .units
        .iter()
        .map(|u| v22::Unit {
            contents: u.contents.clone(),
            dropins: u
                .dropins
                .iter()
                .map(|d| v22::SystemdDropin {
                    contents: d.contents.clone(),
                    name: d.name.clone(),
                })
                .collect(),
            enable: u.enable,
            enabled: None,
            mask: u.mask,
            name: u.name.clone(),
        })
        .collect();
    out.networkd.units = c
        .networkd
        .units
        .iter()
        .map(|u| v22::Networkdunit {
            contents: u.contents.clone(),
            dropins: Vec::new(),
            name: u.name.clone(),
        })
        .collect();
    out.passwd.users = c
        .passwd
        .users
        .iter()
        .map(|u| v22::PasswdUser {
            create: u.create.as_ref().map(|c| v22::Usercreate {
                gecos: c.gecos.clone(),
                groups: c.groups.clone(),
                home_dir: c.home_dir.clone(),
                no_create_home: c.no_create_home,
                no_log_init: c.no_log_init,
                no_user_group: c.no_user_group,
                primary_group: c.primary_group.clone(),
                shell: c.shell.clone(),
                system: c.system,
                uid: c.uid.map(|u| u.0 as i64),
            }),
            name: u.name.clone(),
            password_hash: (!u.password_hash.is_empty()).then(|| u.password_hash.clone()),
            ssh_authorized_keys: u.ssh_authorized_keys.clone(),
            ..Default::default()
        })
        .collect();
    out.passwd.groups = c
        .passwd
        .groups
        .iter()
        .map(|g| v22::PasswdGroup {
            gid: g.gid.map(|u| u.0 as i64),
            name: g.name.clone(),
            password_hash: g.password_hash.clone(),
            system: g.system,
        })
        .collect();
    out
}

// ---------------------------------------------------------------------------------------
// v1: decoded only to learn whether it fails.

go_struct! {
    Config1 = "types.Config" {
        version: i64 = "ignitionVersion",
        storage: Storage1 = "storage",
        systemd: Systemd20 = "systemd",
        networkd: Networkd20 = "networkd",
        passwd: Passwd20 = "passwd",
    }
}
go_struct! {
    Storage1 = "types.Storage" {
        disks: Vec<Disk20> = "disks",
        raid: Vec<Raid20> = "raid",
        filesystems: Vec<Filesystem1> = "filesystems",
    }
}
go_struct! {
    Filesystem1 = "types.Filesystem" {
        device: String = "device",
        format: String = "format",
        create: Option<Create20> = "create",
        files: Vec<File1> = "files",
    }
}
go_struct! {
    File1 = "types.File" {
        path: String = "path",
        contents: String = "contents",
        mode: Uint<32> = "mode",
        uid: i64 = "uid",
        gid: i64 = "gid",
    }
}

/// `config/v1`'s decode: the first error, or `None` when it decodes.
pub(crate) fn decode_v1(v: &Value) -> Option<TypeError> {
    let mut d = Dec::new();
    let mut cfg = Config1::default();
    Config1::decode(&mut d, v, "$", &mut cfg);
    d.finish()
}
