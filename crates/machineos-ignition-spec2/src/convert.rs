//! Spec 2.2 → 3.0 → 3.5, as the MCO's converter does it (`pkg/controller/common/
//! ignition_converter.go`: `v23tov30.Translate(ign23.Translate(cfg), {"root": "/"})`, then
//! `v31translate` … `v35translate`).
//!
//! `ign-converter/translate/v23tov30.Check2_3` refuses what spec 3 cannot express: an
//! invalid or deprecated 2.3 config (every disk partition: `config/v2_3.Translate` gives
//! each one the deprecated `size` and `start`), `networkd`, filesystems other than `root`
//! (the MCO maps no other), two files, directories or links at one path, a path under a
//! link the config creates, two units or drop-ins of one name. Then it translates — files
//! default to `overwrite: true`, `append` becomes an `append` resource with `overwrite:
//! false`, `enable`/`enabled` merge into `enabled`, `passwd.users[].create` is dropped —
//! and validates the 3.0 result. The 3.1 … 3.5 translations change nothing a converted
//! config holds but the version.
//!
//! One quirk is kept on purpose: `translateCfgRefs` points every `merge` source at its
//! loop variable, so all of them end up with the last `append` source (and two or more
//! `append` entries are then refused as duplicates by the 3.0 validation).

use std::collections::{HashMap, HashSet};

use crate::gopath::join;
use crate::v3;
use crate::v22;
use crate::validate2::{self, Entry, Kind, Spec, go_quote};

/// Why `v23tov30.Translate` refused a config; the messages are ign-converter's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The 2.3 validation failed or found something deprecated.
    InvalidInput(Vec<Entry>),
    /// `networkd` is set.
    Networkd,
    /// A filesystem other than `root` is declared.
    NoFilesystem { name: String, index: usize },
    /// Two files, directories or links at one path.
    DuplicateInode {
        old: String,
        new: String,
        path: String,
    },
    /// A path under a link the config creates.
    UsesOwnLink {
        link: String,
        name: String,
        path: String,
    },
    /// Two units of one name.
    DuplicateUnit { name: String, index: usize },
    /// Two drop-ins of one name in a unit.
    DuplicateDropin {
        unit: String,
        name: String,
        path: String,
    },
    /// The 3.0 result is invalid.
    InvalidOutput(Vec<v3::Entry>),
}

impl Refusal {
    /// The JSON path (of the config after the MCO's clean-up) it is about.
    pub(crate) fn path(&self) -> String {
        match self {
            Refusal::InvalidInput(entries) => entries
                .iter()
                .find(|e| matches!(e.kind, Kind::Error | Kind::Deprecated))
                .map_or_else(|| "$".into(), |e| e.path.clone()),
            Refusal::Networkd => "$.networkd.units".into(),
            Refusal::NoFilesystem { index, .. } => format!("$.storage.filesystems.{index}"),
            Refusal::DuplicateInode { path, .. }
            | Refusal::UsesOwnLink { path, .. }
            | Refusal::DuplicateDropin { path, .. } => path.clone(),
            Refusal::DuplicateUnit { index, .. } => format!("$.systemd.units.{index}"),
            Refusal::InvalidOutput(entries) => entries
                .iter()
                .find(|e| e.fatal)
                .map_or_else(|| "$".into(), |e| e.path.clone()),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::InvalidInput(entries) => {
                // report.Report.String of a report without source: "kind: message" lines.
                let lines: Vec<String> = entries
                    .iter()
                    .map(|e| format!("{}: {}", e.kind.as_str(), e.message))
                    .collect();
                write!(f, "Invalid input config:\n{}", lines.join("\n"))
            }
            Refusal::Networkd => {
                f.write_str("config includes deprecated networkd section - use Files instead")
            }
            Refusal::NoFilesystem { name, .. } => write!(
                f,
                "Config defined filesystem {} but no mapping was defined.Please specify a path to be used as the filesystem mountpoint.",
                go_quote(name)
            ),
            Refusal::DuplicateInode { old, new, .. } => write!(
                f,
                "Config has conflicting inodes: {} and {}.  All files, directories and links must specify a unique `path`.",
                go_quote(old),
                go_quote(new)
            ),
            Refusal::UsesOwnLink { link, name, .. } => write!(
                f,
                "{name} uses link defined in config {}. Please use a link not defined in Storage:Links",
                go_quote(link)
            ),
            Refusal::DuplicateUnit { name, .. } => write!(
                f,
                "Config has duplicate unit name {}.  All units must specify a unique `name`.",
                go_quote(name)
            ),
            Refusal::DuplicateDropin { unit, name, .. } => write!(
                f,
                "Config has duplicate dropin name {} in unit {}.  All dropins must specify a unique `name`.",
                go_quote(name),
                go_quote(unit)
            ),
            Refusal::InvalidOutput(entries) => {
                // vcontext's report.Report.String: every entry followed by a newline.
                for e in entries {
                    writeln!(f, "{e}")?;
                }
                Ok(())
            }
        }
    }
}

/// The mount point the MCO maps a spec 2 filesystem name to: only `root`.
fn mount_of(fs: &str) -> &'static str {
    if fs == "root" { "/" } else { "" }
}

/// `v23tov30.Check2_3` with the MCO's filesystem map.
fn check(cfg: &v22::Config) -> Result<(), Refusal> {
    let report = validate2::validate(cfg, None, Spec::V23);
    if report
        .iter()
        .any(|e| matches!(e.kind, Kind::Error | Kind::Deprecated))
    {
        return Err(Refusal::InvalidInput(report));
    }
    if !cfg.networkd.units.is_empty() {
        return Err(Refusal::Networkd);
    }
    for (index, fs) in cfg.storage.filesystems.iter().enumerate() {
        if fs.name != "root" {
            return Err(Refusal::NoFilesystem {
                name: fs.name.clone(),
                index,
            });
        }
    }
    let full = |fs: &str, p: &str| join(&["/", mount_of(fs), p]);
    let links: Vec<String> = cfg
        .storage
        .links
        .iter()
        .map(|l| full(&l.filesystem, &l.path))
        .collect();
    let uses_link = |p: &str| {
        links
            .iter()
            .find(|l| p.starts_with(l.as_str()) && p != l.as_str())
            .cloned()
    };
    let mut entries: HashMap<String, String> = HashMap::new();
    let nodes = cfg
        .storage
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| ("File", "files", i, &f.filesystem, &f.path))
        .chain(
            cfg.storage
                .directories
                .iter()
                .enumerate()
                .map(|(i, d)| ("Directory", "directories", i, &d.filesystem, &d.path)),
        )
        .chain(
            cfg.storage
                .links
                .iter()
                .enumerate()
                .map(|(i, l)| ("Link", "links", i, &l.filesystem, &l.path)),
        );
    for (kind, list, i, fs, p) in nodes {
        let path = full(fs, p);
        let name = format!("{kind}: {path}");
        let at = format!("$.storage.{list}.{i}.path");
        if let Some(old) = entries.get(&path) {
            return Err(Refusal::DuplicateInode {
                old: old.clone(),
                new: name,
                path: at,
            });
        }
        if let Some(link) = uses_link(&path) {
            return Err(Refusal::UsesOwnLink {
                link,
                name,
                path: at,
            });
        }
        entries.insert(path, name);
    }
    let mut units: HashSet<&str> = HashSet::new();
    for (index, u) in cfg.systemd.units.iter().enumerate() {
        if !units.insert(&u.name) {
            return Err(Refusal::DuplicateUnit {
                name: u.name.clone(),
                index,
            });
        }
        let mut dropins: HashSet<&str> = HashSet::new();
        for (j, d) in u.dropins.iter().enumerate() {
            if !dropins.insert(&d.name) {
                return Err(Refusal::DuplicateDropin {
                    unit: u.name.clone(),
                    name: d.name.clone(),
                    path: format!("$.systemd.units.{index}.dropins.{j}"),
                });
            }
        }
    }
    Ok(())
}

/// `util.StrP`: empty is unset.
fn str_p(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// `util.BoolP`: false is unset.
fn bool_p(b: bool) -> Option<bool> {
    b.then_some(true)
}

fn node(
    fs: &str,
    path: &str,
    user: Option<&v22::NodeUser>,
    group: Option<&v22::NodeGroup>,
    overwrite: Option<bool>,
) -> v3::Node {
    let user = user.cloned().unwrap_or_default();
    let group = group.cloned().unwrap_or_default();
    v3::Node {
        group: v3::Owner {
            id: group.id,
            name: str_p(&group.name),
        },
        overwrite,
        path: join(&[mount_of(fs), path]),
        user: v3::Owner {
            id: user.id,
            name: str_p(&user.name),
        },
    }
}

/// `v23tov30.Translate` then `v31translate` … `v35translate`.
/// Takes the config by value: file and unit contents (possibly large `data:` URLs) move.
pub(crate) fn convert(mut cfg: v22::Config) -> Result<v3::Config, Refusal> {
    check(&cfg)?;
    let files = std::mem::take(&mut cfg.storage.files);
    let units = std::mem::take(&mut cfg.systemd.units);
    let reference = |r: &v22::ConfigReference| v3::Resource {
        compression: None,
        source: Some(r.source.clone()),
        hash: r.verification.hash.clone(),
    };
    let ign = &cfg.ignition;
    // translateCfgRefs takes `&ref` of its range variable, which ign-converter's module
    // (go 1.18) shares across iterations: every merge source is the last append's.
    let last_source = ign.config.append.last().map(|r| r.source.clone());
    let ignition = v3::Ignition {
        merge: ign
            .config
            .append
            .iter()
            .map(|r| v3::Resource {
                source: last_source.clone(),
                ..reference(r)
            })
            .collect(),
        replace: ign
            .config
            .replace
            .as_ref()
            .map(reference)
            .unwrap_or_default(),
        certificate_authorities: ign
            .security
            .tls
            .certificate_authorities
            .iter()
            .map(|ca| v3::Resource {
                compression: None,
                source: Some(ca.source.clone()),
                hash: ca.verification.hash.clone(),
            })
            .collect(),
        http_response_headers: ign.timeouts.http_response_headers,
        http_total: ign.timeouts.http_total,
    };
    let passwd = v3::Passwd {
        groups: cfg
            .passwd
            .groups
            .iter()
            .map(|g| v3::PasswdGroup {
                gid: g.gid,
                name: g.name.clone(),
                password_hash: str_p(&g.password_hash),
                system: bool_p(g.system),
            })
            .collect(),
        users: cfg
            .passwd
            .users
            .iter()
            .map(|u| v3::PasswdUser {
                gecos: str_p(&u.gecos),
                groups: u.groups.clone(),
                home_dir: str_p(&u.home_dir),
                name: u.name.clone(),
                no_create_home: bool_p(u.no_create_home),
                no_log_init: bool_p(u.no_log_init),
                no_user_group: bool_p(u.no_user_group),
                password_hash: u.password_hash.clone(),
                primary_group: str_p(&u.primary_group),
                ssh_authorized_keys: u.ssh_authorized_keys.clone(),
                shell: str_p(&u.shell),
                system: bool_p(u.system),
                uid: u.uid,
            })
            .collect(),
    };
    let st = &cfg.storage;
    let storage = v3::Storage {
        directories: st
            .directories
            .iter()
            .map(|d| v3::Directory {
                node: node(
                    &d.filesystem,
                    &d.path,
                    d.user.as_ref(),
                    d.group.as_ref(),
                    d.overwrite,
                ),
                mode: d.mode,
            })
            .collect(),
        disks: st
            .disks
            .iter()
            .map(|d| v3::Disk {
                device: d.device.clone(),
                wipe_table: bool_p(d.wipe_table),
            })
            .collect(),
        files: files
            .into_iter()
            .map(|f| {
                // 2.x files overwrite by default; appending ones must not in 3.x.
                let overwrite = if f.append {
                    Some(false)
                } else {
                    Some(f.overwrite.unwrap_or(true))
                };
                let c = v3::Resource {
                    compression: str_p(&f.contents.compression),
                    source: Some(f.contents.source),
                    hash: f.contents.verification.hash,
                };
                let (append, contents) = if f.append {
                    (vec![c], v3::Resource::default())
                } else {
                    (Vec::new(), c)
                };
                v3::File {
                    node: node(
                        &f.filesystem,
                        &f.path,
                        f.user.as_ref(),
                        f.group.as_ref(),
                        overwrite,
                    ),
                    append,
                    contents,
                    mode: f.mode,
                }
            })
            .collect(),
        links: st
            .links
            .iter()
            .map(|l| v3::Link {
                node: node(
                    &l.filesystem,
                    &l.path,
                    l.user.as_ref(),
                    l.group.as_ref(),
                    l.overwrite,
                ),
                hard: bool_p(l.hard),
                target: l.target.clone(),
            })
            .collect(),
        raid: st
            .raid
            .iter()
            .map(|a| v3::Raid {
                devices: a.devices.clone(),
                level: a.level.clone(),
                name: a.name.clone(),
                options: a.options.clone(),
                spares: (a.spares != 0).then_some(a.spares),
            })
            .collect(),
    };
    let systemd = v3::Systemd {
        units: units
            .into_iter()
            .map(|u| {
                // Enabled wins over the deprecated Enable (ign-converter's choice).
                let enabled = match u.enabled {
                    Some(false) => Some(false),
                    Some(true) => Some(true),
                    None => bool_p(u.enable),
                };
                v3::Unit {
                    contents: (!u.contents.is_empty()).then_some(u.contents),
                    dropins: u
                        .dropins
                        .into_iter()
                        .map(|d| v3::Dropin {
                            contents: (!d.contents.is_empty()).then_some(d.contents),
                            name: d.name,
                        })
                        .collect(),
                    enabled,
                    mask: bool_p(u.mask),
                    name: u.name,
                }
            })
            .collect(),
    };
    let out = v3::Config {
        ignition,
        passwd,
        storage,
        systemd,
    };
    let report = v3::validate(&out);
    if report.iter().any(|e| e.fatal) {
        return Err(Refusal::InvalidOutput(report));
    }
    Ok(out)
}
