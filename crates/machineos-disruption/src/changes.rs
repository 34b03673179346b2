//! What changed between two rendered MachineConfigs, in the terms the MCO's daemon decides
//! disruption by (`pkg/daemon/update.go`: the file, unit and passwd diffs and the OS fields).
//!
//! Contract of [`ConfigChanges::between`]:
//! * **files**: every `spec.config.storage.files[].path` added, removed, or whose entry
//!   differs in any field (contents, mode, owner, append, overwrite…), sorted.
//! * **units**: every `spec.config.systemd.units[].name` added, removed or whose entry differs
//!   (contents, enabled, mask, a drop-in: a drop-in change is its unit's change), sorted.
//! * **passwd**: whether `spec.config.passwd` differs at all (the SSH keys and password hash
//!   of `core` are all the MCO lets change).
//! * **os**: the fields whose change needs the OS itself updated — `osImageURL`,
//!   `kernelArguments`, `fips`, `kernelType` (empty and `default` equal), `extensions` — in
//!   that order.
//! * **registries_conf**: when `/etc/containers/registries.conf` is among the files, its
//!   contents before and after (from `data:` URLs), for [`crate::registries`].
//! * **other**: any other Ignition section that differs (`storage.directories`,
//!   `storage.links`, `storage.disks`, `storage.filesystems`, `storage.raid`, `kernelArguments`
//!   inside Ignition, …): the MCO refuses those as not reconcilable on a running node; here
//!   they cost a reboot.
//!
//! Entries are compared as the JSON the rendered MachineConfigs store, so two spellings of
//! one value (a field present with its default and absent) count as a change — as they would
//! be a new rendered MachineConfig too.

use std::collections::BTreeMap;

use machineos_api::v1::MachineConfig;
use serde::Serialize;
use serde_json::Value;

/// A field of the rendered MachineConfig whose change needs the OS updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OsChange {
    /// `spec.osImageURL`.
    OsImageUrl,
    /// `spec.kernelArguments`.
    KernelArguments,
    /// `spec.fips`.
    Fips,
    /// `spec.kernelType`.
    KernelType,
    /// `spec.extensions`.
    Extensions,
}

/// What changed (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConfigChanges {
    /// Changed file paths.
    pub files: Vec<String>,
    /// Changed unit names.
    pub units: Vec<String>,
    /// Whether `passwd` changed (SSH keys, password hash).
    pub passwd: bool,
    /// OS fields that changed.
    pub os: Vec<OsChange>,
    /// Other Ignition sections that changed (`storage.links`, …).
    pub other: Vec<String>,
    /// When `/etc/containers/registries.conf` changed: its contents before and after
    /// (`None`: absent, or not a `data:` URL this reads), for the `Special` action's check.
    #[serde(skip)]
    pub registries_conf: Option<Contents>,
}

/// A changed file's contents before and after (`None`: absent, or not readable here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Before.
    pub before: Option<Vec<u8>>,
    /// After.
    pub after: Option<Vec<u8>>,
}

/// The path the MCO's `Special` policy action is for.
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

/// The contents of file `path` of a rendered config, when its source is a `data:` URL.
fn file_contents(config: &serde_json::Map<String, Value>, path: &str) -> Option<Vec<u8>> {
    let files = config.get("storage")?.get("files")?.as_array()?;
    let f = files
        .iter()
        .rev()
        .find(|f| f.get("path").and_then(Value::as_str) == Some(path))?;
    let source = f.get("contents")?.get("source")?.as_str()?;
    machineos_ignition::dataurl::decode(source).ok()
}

impl ConfigChanges {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.units.is_empty()
            && !self.passwd
            && self.os.is_empty()
            && self.other.is_empty()
    }

    /// What changed from `old` to `new`.
    pub fn between(old: &MachineConfig, new: &MachineConfig) -> ConfigChanges {
        let (a, b) = (&old.spec, &new.spec);
        let kernel = |k: &str| {
            if k.is_empty() {
                "default".to_owned()
            } else {
                k.to_owned()
            }
        };
        let mut os = Vec::new();
        if a.os_image_url != b.os_image_url {
            os.push(OsChange::OsImageUrl);
        }
        if a.kernel_arguments != b.kernel_arguments {
            os.push(OsChange::KernelArguments);
        }
        if a.fips != b.fips {
            os.push(OsChange::Fips);
        }
        if kernel(&a.kernel_type) != kernel(&b.kernel_type) {
            os.push(OsChange::KernelType);
        }
        if a.extensions != b.extensions {
            os.push(OsChange::Extensions);
        }
        let empty = serde_json::Map::new();
        let ca = a.config.as_ref().unwrap_or(&empty);
        let cb = b.config.as_ref().unwrap_or(&empty);
        let at = |c: &serde_json::Map<String, Value>, section: &str, field: &str| {
            c.get(section)
                .and_then(|s| s.get(field))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let files = keyed_diff(
            &at(ca, "storage", "files"),
            &at(cb, "storage", "files"),
            "path",
        );
        let units = keyed_diff(
            &at(ca, "systemd", "units"),
            &at(cb, "systemd", "units"),
            "name",
        );
        let passwd = ca.get("passwd") != cb.get("passwd");
        let mut other = Vec::new();
        let sections: std::collections::BTreeSet<&String> = ca.keys().chain(cb.keys()).collect();
        for section in sections {
            match section.as_str() {
                "passwd" | "ignition" => {}
                "storage" | "systemd" => {
                    let fields = |c: &serde_json::Map<String, Value>| -> Vec<String> {
                        c.get(section)
                            .and_then(Value::as_object)
                            .map(|o| o.keys().cloned().collect())
                            .unwrap_or_default()
                    };
                    let mut names = fields(ca);
                    names.extend(fields(cb));
                    names.sort();
                    names.dedup();
                    for field in names {
                        let known = matches!(
                            (section.as_str(), field.as_str()),
                            ("storage", "files") | ("systemd", "units")
                        );
                        if !known && at(ca, section, &field) != at(cb, section, &field) {
                            other.push(format!("{section}.{field}"));
                        }
                    }
                }
                _ => {
                    if ca.get(section) != cb.get(section) {
                        other.push(section.clone());
                    }
                }
            }
        }
        let registries_conf = files
            .iter()
            .any(|f| f == REGISTRIES_CONF)
            .then(|| Contents {
                before: file_contents(ca, REGISTRIES_CONF),
                after: file_contents(cb, REGISTRIES_CONF),
            });
        ConfigChanges {
            files,
            units,
            passwd,
            os,
            other,
            registries_conf,
        }
    }
}

/// The keys (`key` field of each entry of two JSON arrays) added, removed or whose entry
/// differs, sorted. Entries without the key are compared as one group under `""`.
fn keyed_diff(a: &Value, b: &Value, key: &str) -> Vec<String> {
    let index = |v: &Value| -> BTreeMap<String, Vec<Value>> {
        let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for e in v.as_array().into_iter().flatten() {
            let k = e.get(key).and_then(Value::as_str).unwrap_or_default();
            m.entry(k.to_owned()).or_default().push(e.clone());
        }
        m
    };
    let (ia, ib) = (index(a), index(b));
    let mut out: Vec<String> = ia
        .keys()
        .chain(ib.keys())
        .filter(|k| ia.get(*k) != ib.get(*k))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}
