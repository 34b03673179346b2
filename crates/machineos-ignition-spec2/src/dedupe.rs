//! The MCO's clean-up of a spec 2 config before conversion, which spec 3 needs because it
//! forbids duplicates: `removeIgnDuplicateFilesUnitsUsers` and `dedupePasswdUserSSHKeys`
//! in `pkg/controller/common/helpers.go`.
//!
//! * Files: the last entry for a path wins; the others are dropped. The path is compared as
//!   written (not cleaned), and the filesystem is ignored.
//! * Units: the last entry for a name wins; the drop-ins of the earlier entries are added to
//!   it, latest first, unless it already has one of that name.
//! * Users: every user must be `core`; the last entry is kept, with the SSH keys of the
//!   earlier ones appended (latest first), then de-duplicated keeping first occurrences.
//!
//! The MCO walks the lists from the end and appends, so the kept files and units come out
//! in **reverse** order (the last one first). No map iteration is involved, so the order is
//! deterministic, and it is reproduced here.

use std::collections::{HashMap, HashSet};

use machineos_diagnostics::Warning;

use crate::v22::{Config, File, PasswdUser, Unit};

/// Why the clean-up failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotCore {
    /// The user's name.
    pub name: String,
    /// Its index in `passwd.users`.
    pub index: usize,
}

/// Removes duplicate files, units and users as the MCO does.
pub(crate) fn dedupe(mut cfg: Config, warnings: &mut Vec<Warning>) -> Result<Config, NotCore> {
    let files = std::mem::take(&mut cfg.storage.files);
    let mut out_files: Vec<File> = Vec::new();
    let mut paths: HashSet<String> = HashSet::new();
    for (i, f) in files.into_iter().enumerate().rev() {
        if !paths.insert(f.path.clone()) {
            warnings.push(Warning::new(
                format!("$.storage.files.{i}"),
                format!("duplicate file {}: a later entry replaces it", f.path),
            ));
            continue;
        }
        out_files.push(f);
    }

    let units = std::mem::take(&mut cfg.systemd.units);
    let mut out_units: Vec<Unit> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for (i, u) in units.into_iter().enumerate().rev() {
        let Some(kept) = by_name.get(&u.name).and_then(|&j| out_units.get_mut(j)) else {
            by_name.insert(u.name.clone(), out_units.len());
            out_units.push(u);
            continue;
        };
        warnings.push(Warning::new(
            format!("$.systemd.units.{i}"),
            if u.dropins.is_empty() {
                format!("duplicate unit {}: a later entry replaces it", u.name)
            } else {
                format!("Found duplicate unit {}, appending dropin section", u.name)
            },
        ));
        for d in u.dropins {
            if !kept.dropins.iter().any(|e| e.name == d.name) {
                kept.dropins.push(d);
            }
        }
    }

    let users = std::mem::take(&mut cfg.passwd.users);
    if let Some(last) = users.len().checked_sub(1) {
        let mut keys: Vec<String> = Vec::new();
        for (i, u) in users.iter().enumerate().rev() {
            if u.name != "core" {
                return Err(NotCore {
                    name: u.name.clone(),
                    index: i,
                });
            }
            keys.extend(u.ssh_authorized_keys.iter().cloned());
        }
        let mut out: PasswdUser = users.into_iter().nth(last).unwrap_or_default();
        let mut deduped: Vec<String> = Vec::with_capacity(keys.len());
        let mut seen: HashSet<String> = HashSet::new();
        for k in keys {
            if !seen.insert(k.clone()) {
                warnings.push(Warning::new(
                    "$.passwd.users",
                    format!("duplicate SSH public key found: {k}"),
                ));
                continue;
            }
            deduped.push(k);
        }
        out.ssh_authorized_keys = deduped;
        cfg.passwd.users = vec![out];
    }

    cfg.storage.files = out_files;
    cfg.systemd.units = out_units;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v22::{FileContents, SystemdDropin};

    fn file(path: &str, source: &str) -> File {
        File {
            filesystem: "root".into(),
            path: path.into(),
            contents: FileContents {
                source: source.into(),
                ..Default::default()
            },
            mode: Some(420),
            ..Default::default()
        }
    }

    fn dropin(name: &str, contents: &str) -> SystemdDropin {
        SystemdDropin {
            name: name.into(),
            contents: contents.into(),
        }
    }

    fn unit(contents: &str, dropins: Vec<SystemdDropin>) -> Unit {
        Unit {
            name: "testUnit".into(),
            contents: contents.into(),
            dropins,
            ..Default::default()
        }
    }

    /// TestRemoveIgnDuplicateFilesAndUnits (pkg/controller/common/helpers_test.go), with its
    /// own data: removeIgnDuplicateFilesUnitsUsers alone, which does not validate names.
    #[test]
    fn remove_ign_duplicate_files_and_units() {
        let (old, new) = ("data:,old", "data:,new");
        let mut cfg = Config::default();
        cfg.storage.files = vec![
            file("/etc/testfileconfig", old),
            file("/etc/testfileconfig", new),
        ];
        cfg.systemd.units = vec![
            unit(old, vec![dropin("one", old)]),
            unit("", vec![dropin("one", new)]),
            unit(new, vec![dropin("two", new)]),
        ];
        let mut warnings = Vec::new();
        let got = dedupe(cfg, &mut warnings);
        let mut want = Config::default();
        want.storage.files = vec![file("/etc/testfileconfig", new)];
        want.systemd.units = vec![unit(new, vec![dropin("two", new), dropin("one", new)])];
        assert_eq!(got, Ok(want));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
    }

    /// removeIgnDuplicateFilesUnitsUsers and dedupePasswdUserSSHKeys on users: the last
    /// core user, the keys of all, newest user first, each key once; another user refused
    /// (checked from the last one back).
    #[test]
    fn users() {
        let user = |name: &str, keys: &[&str]| PasswdUser {
            name: name.into(),
            ssh_authorized_keys: keys.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        };
        let mut cfg = Config::default();
        cfg.passwd.users = vec![
            user("core", &["a", "b"]),
            user("core", &["c", "a"]),
            user("core", &["b", "d", "d"]),
        ];
        let mut warnings = Vec::new();
        let got = dedupe(cfg, &mut warnings).map(|c| c.passwd.users);
        assert_eq!(got, Ok(vec![user("core", &["b", "d", "c", "a"])]));
        assert_eq!(warnings.len(), 3);

        let mut cfg = Config::default();
        cfg.passwd.users = vec![user("x", &[]), user("y", &[]), user("core", &[])];
        assert_eq!(
            dedupe(cfg, &mut Vec::new()),
            Err(NotCore {
                name: "y".into(),
                index: 1
            })
        );
    }
}
