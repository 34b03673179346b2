//! Ignition's systemd steps over the overlay: which unit files and drop-ins are written,
//! which units are masked or unmasked, and which `enable`/`disable` lines go into the preset
//! file — with `systemctl is-enabled`/`disable` emulated on the image's unit directories.

use std::collections::BTreeMap;

use machineos_ignition::model::{Config, Unit};
use machineos_ignition::unit::{UnitOption, parse_unit};

use super::error::{At, perr};
use super::{PRESET_PATH, PlanError, Planner, UNITS_DIR};
use crate::contents::Contents;
use crate::overlay::{Kind, LayerKind, Stat, parent};

impl Planner<'_> {
    fn write_unit_file(&mut self, jp: &str, path: &str, contents: &str) -> Result<(), PlanError> {
        let r = self.fs.resolve_parent(path).at(jp, "resolving path")?;
        let fail = format!("failed to write {path}");
        self.fs.mkdir_all(parent(&r)).at(jp, &fail)?;
        if let Some(Stat {
            kind: Kind::Dir, ..
        }) = self.lstat(jp, &r)?
        {
            return Err(perr(
                jp,
                format!("{fail}: rename: file exists and is a directory"),
            ));
        }
        self.fs.remove_all(&r).at(jp, &fail)?;
        self.fs
            .put(
                &r,
                LayerKind::File(Contents::bytes(contents.as_bytes())),
                0o644,
                0,
                0,
            )
            .at(jp, &fail)
    }

    pub(super) fn units(&mut self, c: &Config) -> Result<(), PlanError> {
        // Preset lines keyed as Ignition keys them: `<unit>-enabled|disabled`, instances
        // of a template gathered under `<tmpl>@.service`.
        let mut presets: BTreeMap<String, (String, bool, Vec<String>)> = BTreeMap::new();
        for (i, u) in c.systemd.units.iter().enumerate() {
            let jp = format!("$.systemd.units.{i}");
            for (j, d) in u.dropins.iter().enumerate() {
                if let Some(contents) = &d.contents {
                    let path = format!("{UNITS_DIR}/{}.d/{}", u.name, d.name);
                    self.write_unit_file(&format!("{jp}.dropins.{j}"), &path, contents)?;
                }
            }
            if let Some(contents) = u.contents.as_deref().filter(|c| !c.is_empty()) {
                self.write_unit_file(&jp, &format!("{UNITS_DIR}/{}", u.name), contents)?;
            }
            if let Some(enabled) = u.enabled {
                let id = if enabled { "enabled" } else { "disabled" };
                match u.name.find('@') {
                    Some(at) => {
                        let (tmpl, rest) = u.name.split_at(at);
                        let (inst, ext) = rest[1..].rsplit_once('.').unwrap_or((&rest[1..], ""));
                        let unit = format!("{tmpl}@.{ext}");
                        let e = presets.entry(format!("{unit}-{id}")).or_insert((
                            unit,
                            enabled,
                            Vec::new(),
                        ));
                        e.2.push(inst.to_string());
                    }
                    None => {
                        presets.insert(
                            format!("{}-{id}", u.name),
                            (u.name.clone(), enabled, Vec::new()),
                        );
                    }
                }
            }
            match u.mask {
                Some(true) => self.mask(&jp, u)?,
                Some(false) => self.unmask(&jp, u)?,
                None => {}
            }
        }
        // Current Ignition writes presets sorted by key; 2.14 used Go map order (random).
        // Instantiated units: current Ignition then asks systemd's version over D-Bus and
        // fails in a build container; we do not reproduce that failure (see
        // crates/machineos-layer/tests/differential/cases/README.md).
        for (_, (unit, enabled, instances)) in presets {
            let unit_string = if instances.is_empty() {
                unit.clone()
            } else {
                format!("{unit} {}", instances.join(" "))
            };
            if enabled {
                self.append_preset(&format!("enable {unit_string}\n"))?;
            } else if instances.is_empty() && self.disable(&unit)? {
                self.append_preset(&format!("disable {unit_string}\n"))?;
            }
            // A disabled template with instances is not a valid name for `systemctl
            // is-enabled`, so current Ignition writes nothing for it.
        }
        Ok(())
    }

    fn mask(&mut self, jp: &str, u: &Unit) -> Result<(), PlanError> {
        let r = self
            .fs
            .resolve_parent(&format!("{UNITS_DIR}/{}", u.name))
            .at(jp, "resolving path")?;
        let fail = format!("masking unit {:?}", u.name);
        self.fs.mkdir_all(parent(&r)).at(jp, &fail)?;
        self.fs.remove_all(&r).at(jp, &fail)?;
        // Created by root with the process's owner; no chown.
        self.fs
            .put(&r, LayerKind::Symlink("/dev/null".into()), 0o777, 0, 0)
            .at(jp, &fail)
    }

    fn unmask(&mut self, jp: &str, u: &Unit) -> Result<(), PlanError> {
        let r = self
            .fs
            .resolve_parent(&format!("{UNITS_DIR}/{}", u.name))
            .at(jp, "resolving path")?;
        if let Some(Stat {
            kind: Kind::Symlink(t),
            ..
        }) = self.lstat(jp, &r)?
            && t == "/dev/null"
        {
            self.fs
                .remove_all(&r)
                .at(jp, &format!("unmasking unit {:?}", u.name))?;
        }
        Ok(())
    }

    fn append_preset(&mut self, line: &str) -> Result<(), PlanError> {
        let jp = "$.systemd.units";
        let r = self
            .fs
            .resolve_parent(PRESET_PATH)
            .at(jp, "resolving preset path")?;
        self.fs
            .mkdir_all(parent(&r))
            .at(jp, "creating preset directory")?;
        let (mut data, mode, uid, gid) = match self.lstat(jp, &r)? {
            Some(st) if st.kind == Kind::File => (
                self.fs
                    .read(&r)
                    .at(jp, "reading preset")?
                    .unwrap_or_default(),
                st.mode,
                st.uid,
                st.gid,
            ),
            Some(_) => {
                return Err(perr(
                    jp,
                    format!("appending to {PRESET_PATH}: not a regular file"),
                ));
            }
            None => (Vec::new(), 0o644, 0, 0),
        };
        data.extend_from_slice(line.as_bytes());
        self.fs
            .put(&r, LayerKind::File(Contents::bytes(data)), mode, uid, gid)
            .at(jp, "writing preset")
    }

    /// `systemctl --root … is-enabled` then `disable`, emulated. Returns whether the unit
    /// was enabled (current Ignition writes a `disable` line only then; 2.14 always did).
    fn disable(&mut self, unit: &str) -> Result<bool, PlanError> {
        let jp = "$.systemd.units";
        let links = self.unit_links()?;
        let state = self.unit_state(unit, &links)?;
        if !state.enabled_like() {
            return Ok(false);
        }
        // Remove every symlink under /etc/systemd/system (one level of .wants/.requires
        // directories deep, as `systemctl disable` scans) that names or points at the unit
        // or one of its aliases, then remove directories that became empty.
        let mut names = vec![unit.to_string()];
        names.extend(state.aliases);
        let is_ours = |link_name: &str, target: &str| {
            let tbase = target.rsplit('/').next().unwrap_or(target);
            target != "/dev/null"
                && (names.iter().any(|n| n == link_name) || names.iter().any(|n| n == tbase))
        };
        let mut touched_dirs = Vec::new();
        for link in links {
            if is_ours(&link.name, &link.target) {
                self.fs.remove_all(&link.path).at(jp, "disabling")?;
                if let Some(dir) = link.dir {
                    touched_dirs.push(dir);
                }
            }
        }
        touched_dirs.dedup();
        for dir in touched_dirs {
            if self.fs.children(&dir).at(jp, "listing units")?.is_empty() {
                self.fs.remove_all(&dir).at(jp, "disabling")?;
            }
        }
        Ok(true)
    }

    /// The symlinks `systemctl` considers: those directly in /etc/systemd/system and those
    /// one directory below it (`*.wants`, `*.requires`, …).
    fn unit_links(&self) -> Result<Vec<UnitLink>, PlanError> {
        let jp = "$.systemd.units";
        let mut links = Vec::new();
        for name in self.fs.children(UNITS_DIR).at(jp, "listing units")? {
            let p = format!("{UNITS_DIR}/{name}");
            match self.lstat(jp, &p)?.map(|s| s.kind) {
                Some(Kind::Symlink(target)) => links.push(UnitLink {
                    path: p,
                    name,
                    target,
                    dir: None,
                }),
                Some(Kind::Dir) => {
                    for child in self.fs.children(&p).at(jp, "listing units")? {
                        let cp = format!("{p}/{child}");
                        if let Some(Kind::Symlink(target)) = self.lstat(jp, &cp)?.map(|s| s.kind) {
                            links.push(UnitLink {
                                path: cp,
                                name: child,
                                target,
                                dir: Some(p.clone()),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(links)
    }

    fn unit_state(&self, unit: &str, links: &[UnitLink]) -> Result<UnitState, PlanError> {
        let jp = "$.systemd.units";
        const PATHS: [&str; 4] = [
            "/etc/systemd/system",
            "/run/systemd/system",
            "/usr/local/lib/systemd/system",
            "/usr/lib/systemd/system",
        ];
        let mut file = None;
        for dir in PATHS {
            let p = format!("{dir}/{unit}");
            let Ok(r) = self.fs.resolve_all(&p) else {
                continue;
            };
            match self.lstat(jp, &p)?.map(|s| s.kind) {
                Some(Kind::Symlink(t)) if t == "/dev/null" => return Ok(UnitState::masked()),
                Some(_) => {
                    if let Some(bytes) = self.fs.read(&r).at(jp, "reading unit")? {
                        file = Some(bytes);
                        break;
                    }
                    if r == "/dev/null" {
                        return Ok(UnitState::masked());
                    }
                }
                None => {}
            }
        }
        let Some(bytes) = file else {
            return Ok(UnitState::default());
        };
        let opts: Vec<UnitOption> =
            parse_unit(&String::from_utf8_lossy(&bytes)).unwrap_or_default();
        let install = |k: &str| -> Vec<String> {
            opts.iter()
                .filter(|o| o.section == "Install" && o.name == k)
                .flat_map(|o| {
                    o.value
                        .split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let aliases = install("Alias");
        let wanted = !install("WantedBy").is_empty()
            || !install("RequiredBy").is_empty()
            || !install("UpheldBy").is_empty();
        let also = !install("Also").is_empty();
        let linked = links.iter().any(|l| match l.dir {
            // A `.wants`/`.requires` link named after the unit.
            Some(_) => l.name == unit,
            // An alias, or another name pointing at the unit.
            None => {
                aliases.contains(&l.name)
                    || (l.target.ends_with(&format!("/{unit}")) && l.name != unit)
            }
        });
        Ok(UnitState {
            found: true,
            masked: false,
            // enabled (links), static (no [Install] at all), indirect (Also= only)
            enabled: linked || (aliases.is_empty() && !wanted) || (also && !wanted),
            aliases,
        })
    }
}

/// A symlink in the unit directory.
struct UnitLink {
    /// Its absolute path.
    path: String,
    /// Its file name.
    name: String,
    /// Its target, verbatim.
    target: String,
    /// The subdirectory it is in, if not directly in /etc/systemd/system.
    dir: Option<String>,
}

#[derive(Debug, Default)]
struct UnitState {
    found: bool,
    masked: bool,
    enabled: bool,
    aliases: Vec<String>,
}

impl UnitState {
    fn masked() -> Self {
        Self {
            found: true,
            masked: true,
            ..Self::default()
        }
    }
    /// `is-enabled` exits 0 for enabled, static, indirect, alias and generated units.
    fn enabled_like(&self) -> bool {
        self.found && !self.masked && self.enabled
    }
}
