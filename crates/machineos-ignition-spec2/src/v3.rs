//! The converter's spec 3 output: the part of Ignition's `config/v3_5/types` that a
//! converted spec 2 config can fill, the spec 3.0 validation the converter runs on it
//! (`v23tov30.Translate` ends with `validate.ValidateWithContext`), and its JSON, written
//! as the MCO marshals a config (`github.com/clarketm/json`: fields in declaration order,
//! `omitempty` also dropping structs whose fields are all empty).

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::url;
use crate::validate2::{UNIT_EXTS, check_hash, ext};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Config {
    pub ignition: Ignition,
    pub passwd: Passwd,
    pub storage: Storage,
    pub systemd: Systemd,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ignition {
    pub merge: Vec<Resource>,
    pub replace: Resource,
    pub certificate_authorities: Vec<Resource>,
    pub http_response_headers: Option<i64>,
    pub http_total: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Resource {
    pub compression: Option<String>,
    pub source: Option<String>,
    pub hash: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Passwd {
    pub groups: Vec<PasswdGroup>,
    pub users: Vec<PasswdUser>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PasswdGroup {
    pub gid: Option<i64>,
    pub name: String,
    pub password_hash: Option<String>,
    pub system: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PasswdUser {
    pub gecos: Option<String>,
    pub groups: Vec<String>,
    pub home_dir: Option<String>,
    pub name: String,
    pub no_create_home: Option<bool>,
    pub no_log_init: Option<bool>,
    pub no_user_group: Option<bool>,
    pub password_hash: Option<String>,
    pub primary_group: Option<String>,
    pub ssh_authorized_keys: Vec<String>,
    pub shell: Option<String>,
    pub system: Option<bool>,
    pub uid: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Storage {
    pub directories: Vec<Directory>,
    pub disks: Vec<Disk>,
    pub files: Vec<File>,
    pub links: Vec<Link>,
    pub raid: Vec<Raid>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Disk {
    pub device: String,
    pub wipe_table: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Raid {
    pub devices: Vec<String>,
    pub level: String,
    pub name: String,
    pub options: Vec<String>,
    pub spares: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Owner {
    pub id: Option<i64>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Node {
    pub group: Owner,
    pub overwrite: Option<bool>,
    pub path: String,
    pub user: Owner,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct File {
    pub node: Node,
    pub append: Vec<Resource>,
    pub contents: Resource,
    pub mode: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Directory {
    pub node: Node,
    pub mode: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Link {
    pub node: Node,
    pub hard: Option<bool>,
    pub target: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Systemd {
    pub units: Vec<Unit>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Unit {
    pub contents: Option<String>,
    pub dropins: Vec<Dropin>,
    pub enabled: Option<bool>,
    pub mask: Option<bool>,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Dropin {
    pub contents: Option<String>,
    pub name: String,
}

// ---------------------------------------------------------------------------------------
// Spec 3.0 validation (github.com/coreos/ignition/v2/config/v3_0/types, vcontext's walk).

/// One entry of a vcontext report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// `error` or `warning`.
    pub fatal: bool,
    /// vcontext's path, such as `$.storage.files.0.path`.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.fatal { "error" } else { "warning" };
        if self.path == "$" {
            write!(f, "{kind}: {}", self.message)
        } else {
            write!(f, "{kind} at {}: {}", self.path, self.message)
        }
    }
}

#[derive(Default)]
struct Report(Vec<Entry>);

impl Report {
    fn err(&mut self, path: impl Into<String>, r: Result<(), String>) {
        if let Err(message) = r {
            self.0.push(Entry {
                fatal: true,
                path: path.into(),
                message,
            });
        }
    }
    fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Entry {
            fatal: false,
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Spec 3 `validatePath`.
fn check_path(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("path not specified".into());
    }
    if !p.starts_with('/') {
        return Err("path not absolute".into());
    }
    if crate::gopath::clean(p) != p {
        return Err("path is not fully simplified".into());
    }
    Ok(())
}

fn check_url_nil_ok(s: Option<&str>) -> Result<(), String> {
    match s {
        None | Some("") => Ok(()),
        Some(s) => url::check_v3(s),
    }
}

fn check_owner(o: &Owner) -> Result<(), String> {
    if o.id.is_some() && o.name.as_deref().is_some_and(|n| !n.is_empty()) {
        Err("cannot set both id and name".into())
    } else {
        Ok(())
    }
}

/// Validates the 3.0 config the converter produced; the entries in vcontext's order.
pub(crate) fn validate(c: &Config) -> Vec<Entry> {
    let mut r = Report::default();
    // Config.Validate: files, directories and links where a unit or drop-in goes.
    let mut unit_paths: HashSet<String> = HashSet::new();
    for u in &c.systemd.units {
        if u.contents.as_deref().is_some_and(|s| !s.is_empty()) {
            unit_paths.insert(format!("/etc/systemd/system/{}", u.name));
        }
        for d in &u.dropins {
            if d.contents.as_deref().is_some_and(|s| !s.is_empty()) {
                unit_paths.insert(format!("/etc/systemd/system/{}.d/{}", u.name, d.name));
            }
        }
    }
    let conflict = || Err("path conflicts with systemd unit or dropin".to_string());
    for (i, f) in c.storage.files.iter().enumerate() {
        if unit_paths.contains(&f.node.path) {
            r.err(format!("$.storage.files.{i}.path"), conflict());
        }
    }
    for (i, d) in c.storage.directories.iter().enumerate() {
        if unit_paths.contains(&d.node.path) {
            r.err(format!("$.storage.directories.{i}.path"), conflict());
        }
    }
    for (i, l) in c.storage.links.iter().enumerate() {
        if unit_paths.contains(&l.node.path) {
            r.err(format!("$.storage.links.{i}.path"), conflict());
        }
    }

    // ignition: merge, replace, certificate authorities (Ignition.Validate's version check
    // always passes: the converter sets 3.0.0).
    let resource = |r: &mut Report, p: &str, res: &Resource| {
        r.err(
            format!("{p}.source"),
            check_url_nil_ok(res.source.as_deref()),
        );
        r.err(
            format!("{p}.verification.hash"),
            check_hash(res.hash.as_deref()),
        );
    };
    for (i, m) in c.ignition.merge.iter().enumerate() {
        resource(&mut r, &format!("$.ignition.config.merge.{i}"), m);
    }
    resource(&mut r, "$.ignition.config.replace", &c.ignition.replace);
    for (i, ca) in c.ignition.certificate_authorities.iter().enumerate() {
        let p = format!("$.ignition.security.tls.certificateAuthorities.{i}");
        // CaReference.Source is a plain string in 3.0: empty is no scheme.
        r.err(
            format!("{p}.source"),
            url::check_v3(ca.source.as_deref().unwrap_or("")),
        );
        r.err(
            format!("{p}.verification.hash"),
            check_hash(ca.hash.as_deref()),
        );
    }

    // storage: Storage.Validate (hard links to directories, owners of hard links), then
    // directories, disks, files, links, raid.
    for (i, l) in c.storage.links.iter().enumerate() {
        if l.hard != Some(true) {
            continue;
        }
        let mut target = crate::gopath::clean(&l.target);
        if !target.starts_with('/') {
            target = crate::gopath::join(&[&l.node.path, &l.target]);
        }
        for d in &c.storage.directories {
            if target == d.node.path {
                r.err(
                    format!("$.storage.links.{i}"),
                    Err("hard link target is a directory".into()),
                );
            }
        }
        let owner = "user/group ignored for hard link";
        let lp = format!("$.storage.links.{i}");
        if l.node.user.id.is_some() {
            r.warn(format!("{lp}.user.id"), owner);
        }
        if l.node.user.name.is_some() {
            r.warn(format!("{lp}.user.name"), owner);
        }
        if l.node.group.id.is_some() {
            r.warn(format!("{lp}.group.id"), owner);
        }
        if l.node.group.name.is_some() {
            r.warn(format!("{lp}.group.name"), owner);
        }
    }
    let node = |r: &mut Report, p: &str, n: &Node| {
        r.err(format!("{p}.path"), check_path(&n.path));
    };
    let owners = |r: &mut Report, p: &str, n: &Node| {
        r.err(format!("{p}.group"), check_owner(&n.group));
        r.err(format!("{p}.user"), check_owner(&n.user));
    };
    let mode = |r: &mut Report, p: &str, m: Option<i64>| {
        if let Some(m) = m {
            if !(0..=0o7777).contains(&m) {
                r.err(format!("{p}.mode"), Err("illegal file mode".into()));
            }
            if m & 0o7000 != 0 {
                r.warn(
                    format!("{p}.mode"),
                    "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0",
                );
            }
        }
    };
    for (i, d) in c.storage.directories.iter().enumerate() {
        let p = format!("$.storage.directories.{i}");
        node(&mut r, &p, &d.node);
        mode(&mut r, &p, d.mode);
        owners(&mut r, &p, &d.node);
    }
    for (i, d) in c.storage.disks.iter().enumerate() {
        let p = format!("$.storage.disks.{i}.device");
        if d.device.is_empty() {
            r.err(p, Err("disk device is required".into()));
        } else {
            r.err(p, check_path(&d.device));
        }
    }
    for (i, f) in c.storage.files.iter().enumerate() {
        let p = format!("$.storage.files.{i}");
        node(&mut r, &p, &f.node);
        mode(&mut r, &p, f.mode);
        if f.node.overwrite == Some(true) && f.contents.source.is_none() {
            r.err(
                format!("{p}.overwrite"),
                Err("overwrite must be false if source is unspecified".into()),
            );
        }
        owners(&mut r, &p, &f.node);
        for (j, a) in f.append.iter().enumerate() {
            contents(&mut r, &format!("{p}.append.{j}"), a);
        }
        contents(&mut r, &format!("{p}.contents"), &f.contents);
    }
    for (i, l) in c.storage.links.iter().enumerate() {
        let p = format!("$.storage.links.{i}");
        node(&mut r, &p, &l.node);
        owners(&mut r, &p, &l.node);
    }
    for (i, a) in c.storage.raid.iter().enumerate() {
        let p = format!("$.storage.raid.{i}");
        let level = match a.level.as_str() {
            "linear" | "raid0" | "0" | "stripe" if a.spares.is_some_and(|s| s != 0) => {
                Err("spares unsupported for arrays with a level greater than 0".to_string())
            }
            "linear" | "raid0" | "0" | "stripe" | "raid1" | "1" | "mirror" | "raid4" | "4"
            | "raid5" | "5" | "raid6" | "6" | "raid10" | "10" => Ok(()),
            _ => Err("unrecognized raid level".into()),
        };
        r.err(format!("{p}.level"), level);
        if a.devices.is_empty() {
            r.err(format!("{p}.devices"), Err("raid devices required".into()));
        }
        for (j, d) in a.devices.iter().enumerate() {
            r.err(format!("{p}.devices.{j}"), check_path(d));
        }
    }

    // systemd: Systemd.Validate (instantiated units), then each unit and drop-in.
    for (i, u) in c.systemd.units.iter().enumerate() {
        let Some((template, _)) = instance_of(&u.name) else {
            continue;
        };
        if u.enabled != Some(true) {
            continue;
        }
        let tmpl_name = format!("{template}@.service");
        // Go keeps the last unit of a name in its map.
        let Some(tmpl) = c.systemd.units.iter().rev().find(|t| t.name == tmpl_name) else {
            continue;
        };
        let Some(contents) = tmpl.contents.as_deref().filter(|s| !s.is_empty()) else {
            continue;
        };
        if let Ok(sections) = crate::unit::parse(contents)
            && !crate::unit::has_install(&sections.unwrap_or_default())
        {
            r.warn(
                format!("$.systemd.units.{i}.contents"),
                format!(
                    "template unit {} for {} doesn't have Install section",
                    crate::validate2::go_quote(&tmpl_name),
                    crate::validate2::go_quote(&u.name)
                ),
            );
        }
    }
    for (i, u) in c.systemd.units.iter().enumerate() {
        let p = format!("$.systemd.units.{i}");
        if !UNIT_EXTS.contains(&ext(&u.name)) {
            r.err(
                format!("{p}.name"),
                Err("invalid systemd unit extension".into()),
            );
        }
        let parsed = match u.contents.as_deref() {
            None => Ok(Some(Vec::new())),
            // go-systemd v22 returns an empty, non-nil list for a unit without options.
            Some(s) => crate::unit::parse(s).map(|o| Some(o.unwrap_or_default())),
        };
        match parsed {
            Err(m) => r.err(format!("{p}.contents"), Err(m)),
            Ok(Some(sections)) => {
                if u.enabled == Some(true)
                    && u.contents.as_deref().is_some_and(|s| !s.is_empty())
                    && !crate::unit::has_install(&sections)
                {
                    r.warn(
                        format!("{p}.contents"),
                        format!(
                            "unit {} is enabled, but has no install section so enable does nothing",
                            crate::validate2::go_quote(&u.name)
                        ),
                    );
                }
            }
            Ok(None) => {}
        }
        for (j, d) in u.dropins.iter().enumerate() {
            let dp = format!("{p}.dropins.{j}");
            if let Some(s) = d.contents.as_deref() {
                r.err(format!("{dp}.contents"), crate::unit::parse(s).map(|_| ()));
            }
            if ext(&d.name) != ".conf" {
                r.err(
                    format!("{dp}.name"),
                    Err("invalid systemd drop-in extension".into()),
                );
            }
        }
    }

    dups(c, &mut r);
    r.0
}

/// `^(.+?)@(.+?)\.service$`: the template and instance of an instantiated unit.
fn instance_of(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".service")?;
    let at = stem.find('@')?;
    let (template, instance) = (&stem[..at], &stem[at + 1..]);
    (!template.is_empty() && !instance.is_empty()).then_some((template, instance))
}

fn contents(r: &mut Report, p: &str, c: &Resource) {
    if let Some(comp) = &c.compression
        && !matches!(comp.as_str(), "" | "gzip")
    {
        r.err(
            format!("{p}.compression"),
            Err("invalid compression method".into()),
        );
    }
    if c.hash.is_some() && c.source.is_none() {
        r.err(
            format!("{p}.verification.hash"),
            Err("source must be specified if verification is specified".into()),
        );
    }
    r.err(format!("{p}.source"), check_url_nil_ok(c.source.as_deref()));
    r.err(
        format!("{p}.verification.hash"),
        check_hash(c.hash.as_deref()),
    );
}

/// `ValidateDups`: a later entry with the key of an earlier one in the same list.
fn dups(c: &Config, r: &mut Report) {
    fn check<'a>(r: &mut Report, p: &str, keys: impl Iterator<Item = &'a str>) {
        let mut seen: HashSet<&str> = HashSet::new();
        for (i, k) in keys.enumerate() {
            if !seen.insert(k) {
                r.err(format!("{p}.{i}"), Err("duplicate entry defined".into()));
            }
        }
    }
    check(
        r,
        "$.ignition.config.merge",
        c.ignition
            .merge
            .iter()
            .map(|m| m.source.as_deref().unwrap_or("")),
    );
    check(
        r,
        "$.ignition.security.tls.certificateAuthorities",
        c.ignition
            .certificate_authorities
            .iter()
            .map(|m| m.source.as_deref().unwrap_or("")),
    );
    check(
        r,
        "$.passwd.groups",
        c.passwd.groups.iter().map(|g| g.name.as_str()),
    );
    check(
        r,
        "$.passwd.users",
        c.passwd.users.iter().map(|u| u.name.as_str()),
    );
    for (i, u) in c.passwd.users.iter().enumerate() {
        let p = format!("$.passwd.users.{i}");
        check(
            r,
            &format!("{p}.groups"),
            u.groups.iter().map(String::as_str),
        );
        check(
            r,
            &format!("{p}.sshAuthorizedKeys"),
            u.ssh_authorized_keys.iter().map(String::as_str),
        );
    }
    // Files, directories and links share one list of paths (Storage.MergedKeys); the
    // converter has already refused duplicates among them.
    check(
        r,
        "$.storage.disks",
        c.storage.disks.iter().map(|d| d.device.as_str()),
    );
    check(
        r,
        "$.storage.raid",
        c.storage.raid.iter().map(|a| a.name.as_str()),
    );
    for (i, a) in c.storage.raid.iter().enumerate() {
        check(
            r,
            &format!("$.storage.raid.{i}.devices"),
            a.devices.iter().map(String::as_str),
        );
    }
    check(
        r,
        "$.systemd.units",
        c.systemd.units.iter().map(|u| u.name.as_str()),
    );
    for (i, u) in c.systemd.units.iter().enumerate() {
        check(
            r,
            &format!("$.systemd.units.{i}.dropins"),
            u.dropins.iter().map(|d| d.name.as_str()),
        );
    }
}

// ---------------------------------------------------------------------------------------
// JSON, as github.com/clarketm/json marshals config/v3_5/types.Config.

struct Obj(Map<String, Value>);

impl Obj {
    fn new() -> Obj {
        Obj(Map::new())
    }
    /// A field without `omitempty`.
    fn req(mut self, k: &str, v: Value) -> Obj {
        self.0.insert(k.into(), v);
        self
    }
    /// A pointer field with `omitempty`: present when set.
    fn ptr<T: Into<Value> + Clone>(mut self, k: &str, v: &Option<T>) -> Obj {
        if let Some(v) = v {
            self.0.insert(k.into(), v.clone().into());
        }
        self
    }
    /// A slice or struct field with `omitempty`: present unless empty.
    fn opt(mut self, k: &str, empty: bool, v: impl FnOnce() -> Value) -> Obj {
        if !empty {
            self.0.insert(k.into(), v());
        }
        self
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().cloned().map(Value::String).collect())
}

impl Resource {
    fn is_empty(&self) -> bool {
        self.compression.is_none() && self.source.is_none() && self.hash.is_none()
    }
    fn json(&self) -> Value {
        Obj::new()
            .ptr("compression", &self.compression)
            .ptr("source", &self.source)
            .opt("verification", self.hash.is_none(), || {
                Obj::new().ptr("hash", &self.hash).done()
            })
            .done()
    }
}

impl Owner {
    fn is_empty(&self) -> bool {
        self.id.is_none() && self.name.is_none()
    }
    fn json(&self) -> Value {
        Obj::new()
            .ptr("id", &self.id)
            .ptr("name", &self.name)
            .done()
    }
}

impl Node {
    fn fields(&self, o: Obj) -> Obj {
        o.opt("group", self.group.is_empty(), || self.group.json())
            .ptr("overwrite", &self.overwrite)
            .req("path", Value::String(self.path.clone()))
            .opt("user", self.user.is_empty(), || self.user.json())
    }
}

fn list<T>(v: &[T], f: impl Fn(&T) -> Value) -> Value {
    Value::Array(v.iter().map(f).collect())
}

impl Config {
    /// The config's JSON, key for key as the MCO would marshal it.
    pub(crate) fn to_json(&self) -> Value {
        let ign = &self.ignition;
        let config_empty = ign.merge.is_empty() && ign.replace.is_empty();
        let timeouts_empty = ign.http_response_headers.is_none() && ign.http_total.is_none();
        let ignition = Obj::new()
            .opt("config", config_empty, || {
                Obj::new()
                    .opt("merge", ign.merge.is_empty(), || {
                        list(&ign.merge, Resource::json)
                    })
                    .opt("replace", ign.replace.is_empty(), || ign.replace.json())
                    .done()
            })
            .opt("security", ign.certificate_authorities.is_empty(), || {
                let tls = Obj::new()
                    .req(
                        "certificateAuthorities",
                        list(&ign.certificate_authorities, Resource::json),
                    )
                    .done();
                Obj::new().req("tls", tls).done()
            })
            .opt("timeouts", timeouts_empty, || {
                Obj::new()
                    .ptr("httpResponseHeaders", &ign.http_response_headers)
                    .ptr("httpTotal", &ign.http_total)
                    .done()
            })
            .req("version", Value::String("3.5.0".into()))
            .done();

        let pw = &self.passwd;
        let passwd = Obj::new()
            .opt("groups", pw.groups.is_empty(), || {
                list(&pw.groups, |g| {
                    Obj::new()
                        .ptr("gid", &g.gid)
                        .req("name", Value::String(g.name.clone()))
                        .ptr("passwordHash", &g.password_hash)
                        .ptr("system", &g.system)
                        .done()
                })
            })
            .opt("users", pw.users.is_empty(), || {
                list(&pw.users, |u| {
                    Obj::new()
                        .ptr("gecos", &u.gecos)
                        .opt("groups", u.groups.is_empty(), || strings(&u.groups))
                        .ptr("homeDir", &u.home_dir)
                        .req("name", Value::String(u.name.clone()))
                        .ptr("noCreateHome", &u.no_create_home)
                        .ptr("noLogInit", &u.no_log_init)
                        .ptr("noUserGroup", &u.no_user_group)
                        .ptr("passwordHash", &u.password_hash)
                        .ptr("primaryGroup", &u.primary_group)
                        .opt(
                            "sshAuthorizedKeys",
                            u.ssh_authorized_keys.is_empty(),
                            || strings(&u.ssh_authorized_keys),
                        )
                        .ptr("shell", &u.shell)
                        .ptr("system", &u.system)
                        .ptr("uid", &u.uid)
                        .done()
                })
            })
            .done();

        let st = &self.storage;
        let storage = Obj::new()
            .opt("directories", st.directories.is_empty(), || {
                list(&st.directories, |d| {
                    d.node.fields(Obj::new()).ptr("mode", &d.mode).done()
                })
            })
            .opt("disks", st.disks.is_empty(), || {
                list(&st.disks, |d| {
                    Obj::new()
                        .req("device", Value::String(d.device.clone()))
                        .ptr("wipeTable", &d.wipe_table)
                        .done()
                })
            })
            .opt("files", st.files.is_empty(), || {
                list(&st.files, |f| {
                    f.node
                        .fields(Obj::new())
                        .opt("append", f.append.is_empty(), || {
                            list(&f.append, Resource::json)
                        })
                        .opt("contents", f.contents.is_empty(), || f.contents.json())
                        .ptr("mode", &f.mode)
                        .done()
                })
            })
            .opt("links", st.links.is_empty(), || {
                list(&st.links, |l| {
                    l.node
                        .fields(Obj::new())
                        .ptr("hard", &l.hard)
                        // 3.3's translation makes the target a pointer, always set.
                        .req("target", Value::String(l.target.clone()))
                        .done()
                })
            })
            .opt("raid", st.raid.is_empty(), || {
                list(&st.raid, |a| {
                    Obj::new()
                        .opt("devices", a.devices.is_empty(), || strings(&a.devices))
                        // 3.3's translation makes the level a pointer, always set.
                        .req("level", Value::String(a.level.clone()))
                        .req("name", Value::String(a.name.clone()))
                        .opt("options", a.options.is_empty(), || strings(&a.options))
                        .ptr("spares", &a.spares)
                        .done()
                })
            })
            .done();

        let systemd = Obj::new()
            .opt("units", self.systemd.units.is_empty(), || {
                list(&self.systemd.units, |u| {
                    Obj::new()
                        .ptr("contents", &u.contents)
                        .opt("dropins", u.dropins.is_empty(), || {
                            list(&u.dropins, |d| {
                                Obj::new()
                                    .ptr("contents", &d.contents)
                                    .req("name", Value::String(d.name.clone()))
                                    .done()
                            })
                        })
                        .ptr("enabled", &u.enabled)
                        .ptr("mask", &u.mask)
                        .req("name", Value::String(u.name.clone()))
                        .done()
                })
            })
            .done();

        let nonempty = |v: &Value| v.as_object().is_some_and(|m| !m.is_empty());
        let mut top = Obj::new().req("ignition", ignition);
        for (k, v) in [
            ("passwd", passwd),
            ("storage", storage),
            ("systemd", systemd),
        ] {
            if nonempty(&v) {
                top = top.req(k, v);
            }
        }
        top.done()
    }
}
