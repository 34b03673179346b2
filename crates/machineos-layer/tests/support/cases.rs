//! The case file format (documented in `tests/differential/cases/README.md`) and the
//! checks of explicit expectations (`entries`) against a tree snapshot.

use super::tree::{self, Kind, Tree};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `ok` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Ok,
    Error,
}

/// What a tree must hold at one path.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntrySpec {
    /// `file`, `dir`, `symlink`, `absent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Octal string, e.g. `"0644"`, special bits included.
    pub mode: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Exact content (UTF-8).
    pub content: Option<String>,
    /// Symlink target.
    pub target: Option<String>,
    /// Other paths sharing the inode (hard links), any order.
    pub links: Option<Vec<String>>,
}

/// How our side is compared in a deviation case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CompareTo {
    /// With the reference tree (the default when both sides succeed).
    #[default]
    Reference,
    /// With the untouched base.
    Base,
    /// Only the listed entries.
    None,
}

/// What our engine must produce where it deliberately differs from 2.14.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ours {
    /// Defaults to the case's `expect`.
    pub expect: Option<Expect>,
    pub error_contains: Option<String>,
    #[serde(default)]
    pub entries: BTreeMap<String, EntrySpec>,
    #[serde(default)]
    pub compare: CompareTo,
    /// Paths (and everything below them) left out of the tree comparison; the paths of
    /// `entries` are left out automatically.
    #[serde(default)]
    pub ignore: Vec<String>,
}

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub description: String,
    /// The Ignition config; serialised as JSON (key order kept).
    pub config: Option<serde_json::Value>,
    /// The config as raw text instead (for syntax errors).
    pub config_raw: Option<String>,
    /// What `ignition-apply` 2.14 does (and, unless `deviation`, what we must do).
    pub expect: Expect,
    /// A substring of the error, checked on both sides.
    pub error_contains: Option<String>,
    /// Entries the reference tree must have (checks the rule book); ours must match too.
    #[serde(default)]
    pub entries: BTreeMap<String, EntrySpec>,
    /// The reference must leave the base exactly as it was.
    #[serde(default)]
    pub unchanged: bool,
    /// Why we deliberately differ from 2.14; requires `ours`.
    pub deviation: Option<String>,
    pub ours: Option<Ours>,
    /// Compare the preset file as sorted lines (2.14 writes presets in map order).
    #[serde(default)]
    pub compare_preset_sorted: bool,
}

impl Case {
    /// The config bytes given to both sides.
    pub fn config_bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.config, &self.config_raw) {
            (Some(v), None) => serde_json::to_vec_pretty(v).map_err(|e| e.to_string()),
            (None, Some(raw)) => Ok(raw.clone().into_bytes()),
            _ => Err("exactly one of `config` and `config_raw` is required".to_string()),
        }
    }

    /// Consistency of the case file itself.
    pub fn validate(&self) -> Result<(), String> {
        self.config_bytes()?;
        if self.deviation.is_some() != self.ours.is_some() {
            return Err("`deviation` and `ours` go together".to_string());
        }
        if self.error_contains.is_some() && self.expect != Expect::Error {
            return Err("`error_contains` needs `\"expect\": \"error\"`".to_string());
        }
        for (path, spec) in self
            .entries
            .iter()
            .chain(self.ours.iter().flat_map(|o| o.entries.iter()))
        {
            if !path.starts_with('/') {
                return Err(format!("entry path {path} is not absolute"));
            }
            if !["file", "dir", "symlink", "absent"].contains(&spec.kind.as_str()) {
                return Err(format!("{path}: unknown type {}", spec.kind));
            }
            if let Some(m) = &spec.mode {
                u32::from_str_radix(m, 8).map_err(|_| format!("{path}: mode {m} is not octal"))?;
            }
        }
        Ok(())
    }
}

/// All `*.json` case files under `dir`, sorted by name.
pub fn case_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// Check `specs` against `tree`; one line per mismatch, prefixed with `side`.
pub fn check_entries(
    side: &str,
    tree: &Tree,
    specs: &BTreeMap<String, EntrySpec>,
    preset_sorted: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (path, spec) in specs {
        let Some(e) = tree.get(path) else {
            if spec.kind != "absent" {
                out.push(format!(
                    "{side}: {path}: expected a {}, found nothing",
                    spec.kind
                ));
            }
            continue;
        };
        let kind_ok = matches!(
            (spec.kind.as_str(), &e.kind),
            ("file", Kind::File) | ("dir", Kind::Dir) | ("symlink", Kind::Symlink(_))
        );
        if !kind_ok {
            out.push(format!(
                "{side}: {path}: expected {}, found {}",
                if spec.kind == "absent" {
                    "nothing"
                } else {
                    &spec.kind
                },
                e.describe()
            ));
            continue;
        }
        if let Some(m) = &spec.mode {
            let m = u32::from_str_radix(m, 8).unwrap_or(u32::MAX);
            if e.mode != m {
                out.push(format!(
                    "{side}: {path}: mode {:04o}, expected {m:04o}",
                    e.mode
                ));
            }
        }
        if let Some(uid) = spec.uid
            && e.uid != uid
        {
            out.push(format!("{side}: {path}: uid {}, expected {uid}", e.uid));
        }
        if let Some(gid) = spec.gid
            && e.gid != gid
        {
            out.push(format!("{side}: {path}: gid {}, expected {gid}", e.gid));
        }
        if let Some(c) = &spec.content {
            let same = if preset_sorted && path == tree::PRESET {
                tree::sorted_lines(&e.content) == tree::sorted_lines(c.as_bytes())
            } else {
                e.content == c.as_bytes()
            };
            if !same {
                out.push(format!(
                    "{side}: {path}: content {}, expected {}",
                    tree::preview(&e.content),
                    tree::preview(c.as_bytes())
                ));
            }
        }
        if let Some(t) = &spec.target
            && e.kind != Kind::Symlink(t.clone())
        {
            out.push(format!(
                "{side}: {path}: {}, expected target {t}",
                e.describe()
            ));
        }
        if let Some(links) = &spec.links {
            let mut want = links.clone();
            want.sort();
            if e.links != want {
                out.push(format!(
                    "{side}: {path}: hard links {:?}, expected {want:?}",
                    e.links
                ));
            }
        }
    }
    out
}
