//! Validation with Ignition's rules and messages, each naming the JSON path
//! (`error at $.storage.files.3.path: path not absolute`).
//!
//! Only what Ignition's validators check is checked here; what needs the target
//! filesystem (existing files, owners by name) is the planner's business.
//!
//! The rules do not depend on the spec version (3.0.0–3.6.0): a mode is legal up to `0o7777`
//! in every version. Ignition's two version-dependent rules are elsewhere or out of scope:
//! the warning about special mode bits before 3.6.0 comes from [`parse`](crate::parse()),
//! which knows the version; the names Ignition allows for a custom Clevis pin (`tpm2`, `tang`,
//! `sss` before 3.6.0, any from 3.6.0 on) are not checked: LUKS, disks, RAID and filesystems,
//! which a layer does not apply, are checked for duplicate entries only.

use std::collections::{HashMap, HashSet};

use crate::Warning;
use crate::dataurl;
use crate::model::{Config, NodeGroup, NodeUser, Resource};
use crate::resource::scheme;
use crate::unit::{has_install_section, parse_unit};

/// The first validation error, as Ignition reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error at {path}: {message}")]
pub struct ValidationError {
    /// JSON path such as `$.storage.files.3.path`.
    pub path: String,
    /// Ignition's message, such as `path not absolute`.
    pub message: String,
}

impl machineos_diagnostics::Classify for ValidationError {
    /// `InvalidConfig`.
    fn reason(&self) -> &'static str {
        "InvalidConfig"
    }

    /// Always permanent: the config must change.
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

#[derive(Default)]
struct Report {
    errors: Vec<ValidationError>,
    warnings: Vec<Warning>,
}

impl Report {
    fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ValidationError {
            path: path.into(),
            message: message.into(),
        });
    }
    fn check(&mut self, path: impl Into<String>, r: Result<(), String>) {
        if let Err(m) = r {
            self.error(path, m);
        }
    }
    fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Warning {
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Validate a config. Returns the warnings, or the first error in document order.
pub fn validate(config: &Config) -> Result<Vec<Warning>, ValidationError> {
    let errors = validate_all(config)?;
    Ok(errors)
}

/// Validate and return every error (document order) — for reports that list them all.
pub fn validate_report(config: &Config) -> (Vec<ValidationError>, Vec<Warning>) {
    let mut r = Report::default();
    check_config(config, &mut r);
    (r.errors, r.warnings)
}

fn validate_all(config: &Config) -> Result<Vec<Warning>, ValidationError> {
    let (errors, warnings) = validate_report(config);
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(warnings),
    }
}

fn check_config(c: &Config, r: &mut Report) {
    // ignition
    let ic = &c.ignition.config;
    for (i, res) in ic.merge.iter().enumerate() {
        let p = format!("$.ignition.config.merge.{i}");
        r.check(&p, required_source(res));
        check_resource(res, &p, r);
    }
    check_resource(&ic.replace, "$.ignition.config.replace", r);
    for (i, res) in c
        .ignition
        .security
        .tls
        .certificate_authorities
        .iter()
        .enumerate()
    {
        let p = format!("$.ignition.security.tls.certificateAuthorities.{i}");
        r.check(&p, required_source(res));
        check_resource(res, &p, r);
    }
    for (key, v) in [
        ("httpProxy", &c.ignition.proxy.http_proxy),
        ("httpsProxy", &c.ignition.proxy.https_proxy),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty())
            && !matches!(scheme(v).as_deref(), Some("http" | "https"))
        {
            r.error(format!("$.ignition.proxy.{key}"), "proxies must be http(s)");
        }
    }

    // passwd: keyed lists must not repeat.
    dups(
        c.passwd.users.iter().map(|u| u.name.as_str()),
        "$.passwd.users",
        r,
    );
    dups(
        c.passwd.groups.iter().map(|g| g.name.as_str()),
        "$.passwd.groups",
        r,
    );

    // storage
    let s = &c.storage;
    for (i, f) in s.files.iter().enumerate() {
        let p = format!("$.storage.files.{i}");
        r.check(format!("{p}.path"), check_path(&f.path));
        r.check(format!("{p}.mode"), check_mode(f.mode));
        if f.overwrite == Some(true) && f.contents.source.is_none() {
            r.error(
                format!("{p}.overwrite"),
                "overwrite must be false if source is unspecified",
            );
        }
        check_owner(&f.user, &f.group, &p, r);
        check_resource(&f.contents, &format!("{p}.contents"), r);
        for (j, a) in f.append.iter().enumerate() {
            check_resource(a, &format!("{p}.append.{j}"), r);
        }
    }
    for (i, d) in s.directories.iter().enumerate() {
        let p = format!("$.storage.directories.{i}");
        r.check(format!("{p}.path"), check_path(&d.path));
        r.check(format!("{p}.mode"), check_mode(d.mode));
        check_owner(&d.user, &d.group, &p, r);
    }
    for (i, l) in s.links.iter().enumerate() {
        let p = format!("$.storage.links.{i}");
        r.check(format!("{p}.path"), check_path(&l.path));
        check_owner(&l.user, &l.group, &p, r);
    }
    // files, directories and links share one key space: the path.
    let nodes = s
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("$.storage.files.{i}"), f.path.as_str()))
        .chain(
            s.directories
                .iter()
                .enumerate()
                .map(|(i, d)| (format!("$.storage.directories.{i}"), d.path.as_str())),
        )
        .chain(
            s.links
                .iter()
                .enumerate()
                .map(|(i, l)| (format!("$.storage.links.{i}"), l.path.as_str())),
        );
    let mut seen = HashSet::new();
    for (p, path) in nodes {
        if !seen.insert(path) {
            r.error(p, "duplicate entry defined");
        }
    }
    let under_link = |path: &str| {
        s.links
            .iter()
            .any(|l| path.starts_with(&format!("{}/", l.path)))
    };
    for (i, d) in s.directories.iter().enumerate() {
        if under_link(&d.path) {
            r.error(
                format!("$.storage.directories.{i}"),
                "directory path includes link in config",
            );
        }
    }
    for (i, f) in s.files.iter().enumerate() {
        if under_link(&f.path) {
            r.error(
                format!("$.storage.files.{i}"),
                "file path includes link in config",
            );
        }
    }
    for (i, l) in s.links.iter().enumerate() {
        let p = format!("$.storage.links.{i}");
        if under_link(&l.path) {
            r.error(&p, "link path includes link in config");
        }
        let Some(target) = l.target.as_deref().filter(|t| !t.is_empty()) else {
            r.error(format!("{p}.target"), "link target is required");
            continue;
        };
        r.check(format!("{p}.target"), check_os_path(target));
        if l.hard != Some(true) {
            continue;
        }
        let target = if target.starts_with('/') {
            clean(target)
        } else {
            clean(&format!("{}/{target}", l.path))
        };
        if s.directories.iter().any(|d| d.path == target) {
            r.error(&p, "hard link target is a directory");
        }
        for (set, field) in [
            (l.user.id.is_some(), "user.id"),
            (l.user.name.is_some(), "user.name"),
            (l.group.id.is_some(), "group.id"),
            (l.group.name.is_some(), "group.name"),
        ] {
            if set {
                r.warn(format!("{p}.{field}"), "user/group ignored for hard link");
            }
        }
    }
    dups(
        s.disks.iter().map(|d| d.device.as_str()),
        "$.storage.disks",
        r,
    );
    dups(
        s.filesystems.iter().map(|f| f.device.as_str()),
        "$.storage.filesystems",
        r,
    );
    dups(s.raid.iter().map(|d| d.name.as_str()), "$.storage.raid", r);
    dups(s.luks.iter().map(|d| d.name.as_str()), "$.storage.luks", r);

    // systemd
    let units = &c.systemd.units;
    for (i, u) in units.iter().enumerate() {
        let p = format!("$.systemd.units.{i}");
        if !valid_unit_name(&u.name) {
            r.error(format!("{p}.name"), "invalid systemd unit extension");
        }
        // The unit file and its drop-in directory are named after the unit.
        r.check(
            format!("{p}.name"),
            check_os_path(&format!("/etc/systemd/system/{}.d", u.name)),
        );
        match u.contents.as_deref().map(parse_unit) {
            Some(Err(e)) => r.error(format!("{p}.contents"), e),
            Some(Ok(opts))
                if u.enabled == Some(true)
                    && !u.contents.as_deref().unwrap_or("").is_empty()
                    && !has_install_section(&opts) =>
            {
                r.warn(
                    format!("{p}.contents"),
                    format!(
                        "unit \"{}\" is enabled, but has no install section so enable does nothing",
                        u.name
                    ),
                );
            }
            Some(Ok(_)) | None => {}
        }
        for (j, d) in u.dropins.iter().enumerate() {
            let dp = format!("{p}.dropins.{j}");
            if let Some(Err(e)) = d.contents.as_deref().map(parse_unit) {
                r.error(format!("{dp}.contents"), e);
            }
            if !d.name.ends_with(".conf") || ext(&d.name) != ".conf" {
                r.error(format!("{dp}.name"), "invalid systemd drop-in extension");
            }
            r.check(
                format!("{dp}.name"),
                check_os_path(&format!("/etc/systemd/system/{}.d/{}", u.name, d.name)),
            );
        }
        dups(
            u.dropins.iter().map(|d| d.name.as_str()),
            &format!("{p}.dropins"),
            r,
        );
    }
    dups(units.iter().map(|u| u.name.as_str()), "$.systemd.units", r);

    // Current Ignition (2.15+) rejects a node at the same path as a unit or drop-in with
    // contents; Ignition 2.14 let the unit win silently. We follow current Ignition.
    let mut unit_paths = HashSet::new();
    for u in units {
        if u.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            unit_paths.insert(format!("/etc/systemd/system/{}", u.name));
        }
        for d in &u.dropins {
            if d.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                unit_paths.insert(format!("/etc/systemd/system/{}.d/{}", u.name, d.name));
            }
        }
    }
    for (list, paths) in [
        (
            "files",
            s.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
        ),
        (
            "directories",
            s.directories.iter().map(|d| d.path.as_str()).collect(),
        ),
        ("links", s.links.iter().map(|l| l.path.as_str()).collect()),
    ] {
        for (i, path) in paths.into_iter().enumerate() {
            if unit_paths.contains(path) {
                r.error(
                    format!("$.storage.{list}.{i}.path"),
                    "path conflicts with systemd unit or dropin",
                );
            }
        }
    }
}

fn dups<'a>(keys: impl Iterator<Item = &'a str>, list: &str, r: &mut Report) {
    let mut seen = HashMap::new();
    for (i, k) in keys.enumerate() {
        if seen.insert(k, i).is_some() {
            r.error(format!("{list}.{i}"), "duplicate entry defined");
        }
    }
}

/// `path.Ext` of Go: the suffix from the last dot of the last element.
fn ext(name: &str) -> &str {
    let base = name.rsplit('/').next().unwrap_or(name);
    match base.rfind('.') {
        Some(i) => &base[i..],
        None => "",
    }
}

/// Unit names must end in one of systemd's unit types.
pub fn valid_unit_name(name: &str) -> bool {
    matches!(
        ext(name),
        ".service"
            | ".socket"
            | ".device"
            | ".mount"
            | ".automount"
            | ".swap"
            | ".target"
            | ".path"
            | ".timer"
            | ".snapshot"
            | ".slice"
            | ".scope"
    )
}

/// Ignition's path rules: non-empty, absolute, and already clean; and what the kernel
/// refuses when ignition-apply writes it (a NUL byte, a name over [`NAME_MAX`] bytes, a path
/// over [`PATH_MAX`] bytes), which Ignition only reports once it fails to write.
pub fn check_path(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("path not specified".into());
    }
    check_os_path(p)?;
    if !p.starts_with('/') {
        return Err("path not absolute".into());
    }
    if clean(p) != p {
        return Err("path is not fully simplified".into());
    }
    Ok(())
}

/// The longest file name (one path component) Linux accepts, in bytes.
pub const NAME_MAX: usize = 255;
/// The longest path Linux accepts, in bytes (`PATH_MAX` counts the terminating NUL).
pub const PATH_MAX: usize = 4095;

/// What Linux refuses in a path or symlink target whatever else holds: a NUL byte, a
/// component longer than [`NAME_MAX`] bytes, more than [`PATH_MAX`] bytes in all. A layer
/// with such a name cannot be extracted by any runtime.
pub fn check_os_path(p: &str) -> Result<(), String> {
    if p.contains('\0') {
        return Err("path contains a NUL byte".into());
    }
    if p.len() > PATH_MAX {
        return Err(format!(
            "file name too long: the path is {} bytes (at most {PATH_MAX})",
            p.len()
        ));
    }
    if let Some(c) = p.split('/').find(|c| c.len() > NAME_MAX) {
        let shown: String = c.chars().take(16).collect();
        return Err(format!(
            "file name too long: the component {shown:?}… is {} bytes (at most {NAME_MAX})",
            c.len()
        ));
    }
    Ok(())
}

fn check_mode(m: Option<i64>) -> Result<(), String> {
    match m {
        Some(m) if !(0..=0o7777).contains(&m) => Err("illegal file mode".into()),
        _ => Ok(()),
    }
}

fn check_owner(u: &NodeUser, g: &NodeGroup, p: &str, r: &mut Report) {
    if u.id.is_some() && u.name.as_deref().is_some_and(|n| !n.is_empty()) {
        r.error(format!("{p}.user"), "cannot set both id and name");
    }
    if g.id.is_some() && g.name.as_deref().is_some_and(|n| !n.is_empty()) {
        r.error(format!("{p}.group"), "cannot set both id and name");
    }
}

fn required_source(res: &Resource) -> Result<(), String> {
    match res.source.as_deref() {
        None | Some("") => Err("source is required".into()),
        Some(_) => Ok(()),
    }
}

fn check_resource(res: &Resource, p: &str, r: &mut Report) {
    if let Some(c) = res.compression.as_deref()
        && !matches!(c, "" | "gzip")
    {
        r.error(format!("{p}.compression"), "invalid compression method");
    }
    if res.verification.hash.is_some() && res.source.is_none() {
        r.error(
            format!("{p}.verification.hash"),
            "source must be specified if verification is specified",
        );
    }
    if let Some(src) = res.source.as_deref().filter(|s| !s.is_empty()) {
        r.check(format!("{p}.source"), check_url(src));
    }
    if !res.http_headers.is_empty() {
        let ok = res.source.as_deref().and_then(scheme);
        match ok.as_deref() {
            Some("http" | "https") => {}
            None => r.error(format!("{p}.httpHeaders"), "unable to parse url"),
            Some(_) => r.error(
                format!("{p}.httpHeaders"),
                "cannot use HTTP headers with this source scheme",
            ),
        }
        let mut seen = HashSet::new();
        for (i, h) in res.http_headers.iter().enumerate() {
            if h.name.is_empty() {
                r.error(
                    format!("{p}.httpHeaders.{i}.name"),
                    "HTTP header name can't be empty",
                );
            } else if !seen.insert(h.name.as_str()) {
                r.error(format!("{p}.httpHeaders.{i}"), "duplicate entry defined");
            }
        }
    }
    if let Some(h) = res.verification.hash.as_deref() {
        let hp = format!("{p}.verification.hash");
        match h.split_once('-') {
            None => r.error(hp, "malformed hash specifier"),
            Some((f, sum)) => {
                let want = match f {
                    "sha512" => 128,
                    "sha256" => 64,
                    _ => {
                        r.error(hp, "unrecognized hash function");
                        return;
                    }
                };
                // Ignition decodes the hex when it fetches, so either case is fine.
                if sum.len() != want {
                    r.error(hp, "incorrect size for hash sum");
                } else if let Err(e) = crate::resource::decode_hex(sum) {
                    r.error(hp, e);
                }
            }
        }
    }
}

fn check_url(src: &str) -> Result<(), String> {
    // Go's url.Parse rejects ASCII control characters anywhere, newlines included.
    if src.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("unable to parse url".into());
    }
    match scheme(src).as_deref() {
        Some("http" | "https" | "tftp" | "gs" | "s3" | "arn") => Ok(()),
        Some("data") => dataurl::check(src).map(|_| ()).map_err(|e| e.0),
        Some(_) | None => Err("invalid url scheme".into()),
    }
}

/// Lexical cleaning as Go's `path.Clean` does it.
pub fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            x => out.push(x),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(cfg: &str) -> Result<Vec<Warning>, String> {
        check_at("3.5.0", cfg)
    }

    /// Parse warnings, then validation's.
    fn check_at(version: &str, cfg: &str) -> Result<Vec<Warning>, String> {
        let full = format!(r#"{{"ignition":{{"version":"{version}"}},{cfg}}}"#);
        let parsed = crate::parse(full.as_bytes()).map_err(|e| e.to_string())?;
        let mut warnings = parsed.warnings;
        warnings.extend(validate(&parsed.config).map_err(|e| e.to_string())?);
        Ok(warnings)
    }

    #[test]
    fn errors_table() {
        let cases: &[(&str, &str)] = &[
            (
                r#""storage":{"files":[{"path":""}]}"#,
                "error at $.storage.files.0.path: path not specified",
            ),
            (
                r#""storage":{"files":[{"path":"etc/x"}]}"#,
                "error at $.storage.files.0.path: path not absolute",
            ),
            (
                r#""storage":{"files":[{"path":"/etc/../x"}]}"#,
                "error at $.storage.files.0.path: path is not fully simplified",
            ),
            (
                r#""storage":{"files":[{"path":"/etc/x/"}]}"#,
                "error at $.storage.files.0.path: path is not fully simplified",
            ),
            (
                r#""storage":{"files":[{"path":"/etc//x"}]}"#,
                "error at $.storage.files.0.path: path is not fully simplified",
            ),
            (
                r#""storage":{"files":[{"path":"/a"}],"directories":[{"path":"/a"}]}"#,
                "error at $.storage.directories.0: duplicate entry defined",
            ),
            (
                r#""storage":{"files":[{"path":"/a","mode":4096}]}"#,
                "error at $.storage.files.0.mode: illegal file mode",
            ),
            (
                r#""storage":{"files":[{"path":"/a","overwrite":true}]}"#,
                "error at $.storage.files.0.overwrite: overwrite must be false if source is unspecified",
            ),
            (
                r#""storage":{"files":[{"path":"/a","user":{"id":1,"name":"core"}}]}"#,
                "error at $.storage.files.0.user: cannot set both id and name",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"source":"data:,a b"}}]}"#,
                "error at $.storage.files.0.contents.source: invalid data character",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"source":"ftp://x/y"}}]}"#,
                "error at $.storage.files.0.contents.source: invalid url scheme",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"source":"data:,x","compression":"xz"}}]}"#,
                "error at $.storage.files.0.contents.compression: invalid compression method",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"source":"data:,x","verification":{"hash":"md5-00"}}}]}"#,
                "error at $.storage.files.0.contents.verification.hash: unrecognized hash function",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"source":"data:,x","verification":{"hash":"sha256-00"}}}]}"#,
                "error at $.storage.files.0.contents.verification.hash: incorrect size for hash sum",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"verification":{"hash":"sha256-00"}}}]}"#,
                "error at $.storage.files.0.contents.verification.hash: source must be specified if verification is specified",
            ),
            (
                r#""storage":{"files":[{"path":"/etc/a\u0000b"}]}"#,
                "error at $.storage.files.0.path: path contains a NUL byte",
            ),
            (
                r#""storage":{"links":[{"path":"/l","target":"/a\u0000"}]}"#,
                "error at $.storage.links.0.target: path contains a NUL byte",
            ),
            (
                r#""systemd":{"units":[{"name":"a\u0000.service"}]}"#,
                "error at $.systemd.units.0.name: path contains a NUL byte",
            ),
            (
                r#""storage":{"files":[{"path":"/a","contents":{"source":"data:,x","verification":{"hash":"sha256-zz00000000000000000000000000000000000000000000000000000000000000"}}}]}"#,
                "error at $.storage.files.0.contents.verification.hash: encoding/hex: invalid byte: U+007A 'z'",
            ),
            (
                r#""storage":{"links":[{"path":"/l"}]}"#,
                "error at $.storage.links.0.target: link target is required",
            ),
            (
                r#""storage":{"links":[{"path":"/l","target":"/x"}],"files":[{"path":"/l/f"}]}"#,
                "error at $.storage.files.0: file path includes link in config",
            ),
            (
                r#""storage":{"links":[{"path":"/l","target":"/d","hard":true}],"directories":[{"path":"/d"}]}"#,
                "error at $.storage.links.0: hard link target is a directory",
            ),
            (
                r#""systemd":{"units":[{"name":"foo.conf"}]}"#,
                "error at $.systemd.units.0.name: invalid systemd unit extension",
            ),
            (
                r#""systemd":{"units":[{"name":"foo.service","dropins":[{"name":"a.txt"}]}]}"#,
                "error at $.systemd.units.0.dropins.0.name: invalid systemd drop-in extension",
            ),
            (
                r#""systemd":{"units":[{"name":"foo.service","contents":"[Unit"}]}"#,
                "error at $.systemd.units.0.contents: invalid unit content: unable to find end of section",
            ),
            (
                r#""systemd":{"units":[{"name":"a.service"},{"name":"a.service"}]}"#,
                "error at $.systemd.units.1: duplicate entry defined",
            ),
            (
                r#""systemd":{"units":[{"name":"a.service","contents":"[Unit]"}]},"storage":{"files":[{"path":"/etc/systemd/system/a.service"}]}"#,
                "error at $.storage.files.0.path: path conflicts with systemd unit or dropin",
            ),
            (
                r#""ignition":{"version":"3.5.0","config":{"merge":[{}]}}"#,
                "error at $.ignition.config.merge.0: source is required",
            ),
        ];
        for version in ["3.5.0", "3.6.0"] {
            for (cfg, want) in cases {
                assert_eq!(
                    check_at(version, cfg).unwrap_err(),
                    *want,
                    "{version}: {cfg}"
                );
            }
        }
    }

    #[test]
    fn spec_3_6() {
        let special = "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0";
        // (config, at 3.5.0, at 3.6.0)
        type Outcome = Result<Vec<Warning>, String>;
        let cases: Vec<(&str, Outcome, Outcome)> = vec![
            // Special bits: legal in every version; warned of (and masked) before 3.6.0 only.
            (
                r#""storage":{"files":[{"path":"/a","mode":4095}],"directories":[{"path":"/d","mode":1023}]}"#,
                Ok(vec![
                    Warning::new("$.storage.files.0.mode", special),
                    Warning::new("$.storage.directories.0.mode", special),
                ]),
                Ok(vec![]),
            ),
            // Above 0o7777: illegal in every version.
            (
                r#""storage":{"files":[{"path":"/a","mode":4096}]}"#,
                Err("error at $.storage.files.0.mode: illegal file mode".into()),
                Err("error at $.storage.files.0.mode: illegal file mode".into()),
            ),
            (
                r#""storage":{"directories":[{"path":"/d","mode":-1}]}"#,
                Err("error at $.storage.directories.0.mode: illegal file mode".into()),
                Err("error at $.storage.directories.0.mode: illegal file mode".into()),
            ),
            // A custom Clevis pin of any name: Ignition refuses it before 3.6.0 ("unsupported
            // clevis pin"); LUKS is not validated here, so it passes in both.
            (
                r#""storage":{"luks":[{"name":"l","device":"/dev/vdb","clevis":{"custom":{"pin":"foo","config":"{}"}}}]}"#,
                Ok(vec![]),
                Ok(vec![]),
            ),
            // LUKS keyed lists still must not repeat.
            (
                r#""storage":{"luks":[{"name":"l","cex":{"enabled":true}},{"name":"l"}]}"#,
                Err("error at $.storage.luks.1: duplicate entry defined".into()),
                Err("error at $.storage.luks.1: duplicate entry defined".into()),
            ),
        ];
        for (cfg, at_3_5, at_3_6) in cases {
            assert_eq!(check_at("3.5.0", cfg), at_3_5, "3.5.0: {cfg}");
            assert_eq!(check_at("3.6.0", cfg), at_3_6, "3.6.0: {cfg}");
        }
    }

    #[test]
    fn names_the_kernel_refuses() {
        let long = "n".repeat(NAME_MAX + 1);
        let ok = "n".repeat(NAME_MAX);
        let deep = format!("/{}", vec![ok.as_str(); 16].join("/"));
        assert!(deep.len() > PATH_MAX);
        let cases = [
            (
                format!(r#""storage":{{"files":[{{"path":"/etc/{long}"}}]}}"#),
                "error at $.storage.files.0.path: file name too long: the component",
            ),
            (
                format!(r#""storage":{{"directories":[{{"path":"{deep}"}}]}}"#),
                "error at $.storage.directories.0.path: file name too long: the path is 4096 bytes",
            ),
            (
                format!(r#""storage":{{"links":[{{"path":"/l","target":"{deep}"}}]}}"#),
                "error at $.storage.links.0.target: file name too long",
            ),
            (
                format!(
                    r#""systemd":{{"units":[{{"name":"{}.service"}}]}}"#,
                    "u".repeat(250)
                ),
                "error at $.systemd.units.0.name: file name too long",
            ),
            (
                format!(
                    r#""systemd":{{"units":[{{"name":"a.service","dropins":[{{"name":"{long}.conf"}}]}}]}}"#
                ),
                "error at $.systemd.units.0.dropins.0.name: file name too long",
            ),
        ];
        for (cfg, want) in cases {
            let e = check(&cfg).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
        // At the limits exactly: accepted.
        let at = format!("/{}", vec![ok.as_str(); 15].join("/"));
        assert!(at.len() <= PATH_MAX);
        assert_eq!(
            check(&format!(r#""storage":{{"files":[{{"path":"{at}"}}]}}"#)),
            Ok(vec![])
        );
    }

    #[test]
    fn hash_sums_in_either_case() {
        let sum = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
        for s in [sum.to_string(), sum.to_uppercase()] {
            assert_eq!(
                check(&format!(
                    r#""storage":{{"files":[{{"path":"/a","contents":{{"source":"data:,hello%0A","verification":{{"hash":"sha256-{s}"}}}}}}]}}"#
                )),
                Ok(vec![])
            );
        }
    }

    #[test]
    fn warnings() {
        assert_eq!(
            check(
                r#""systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Unit]\nA=b"}]}"#,
            ),
            Ok(vec![Warning::new(
                "$.systemd.units.0.contents",
                "unit \"a.service\" is enabled, but has no install section so enable does nothing"
            )])
        );
        // A remote source is valid (only fetching it is refused).
        assert_eq!(
            check(r#""storage":{"files":[{"path":"/a","contents":{"source":"https://e/x"}}]}"#),
            Ok(vec![])
        );
        // A hard link's owner is ignored, with a warning.
        assert_eq!(
            check(
                r#""storage":{"links":[{"path":"/l","target":"/t","hard":true,"user":{"id":0}}]}"#
            ),
            Ok(vec![Warning::new(
                "$.storage.links.0.user.id",
                "user/group ignored for hard link"
            )])
        );
    }

    #[test]
    fn clean_matches_go() {
        for (i, o) in [
            ("/", "/"),
            ("/a/../b", "/b"),
            ("/../a", "/a"),
            ("a/../../b", "../b"),
            ("//a//b/", "/a/b"),
            ("", "."),
            ("./a", "a"),
        ] {
            assert_eq!(clean(i), o, "{i}");
        }
    }
}
