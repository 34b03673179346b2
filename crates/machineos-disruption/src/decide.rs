//! The actions a change needs, by the MCO daemon's rules
//! (`calculatePostConfigChangeNodeDisruptionAction[FromMCDiffs]` and
//! `isDrainRequiredForNodeDisruptionActions`), and the one disruption class machineos
//! schedules a node by.
//!
//! Contract of [`decide`]:
//! * Any OS field (`osImageURL`, kernel arguments, FIPS, kernelType, extensions) changed →
//!   `[Reboot]`. Nothing changed → `[None]`.
//! * Each changed file takes the actions of its closest policy: a policy path equal to the
//!   file's path or a directory above it at any depth (both paths cleaned of `.` and
//!   repeated or trailing `/`; `/etc/containers/registries.conf.d/x` is not under
//!   `/etc/containers/registries.conf`), the longest policy path winning, the first on a
//!   tie. A file no policy covers → `[Reboot]`, at once.
//! * Each changed unit takes the actions of the policy of exactly its name; none → `[Reboot]`.
//! * A `passwd` change takes the SSH key actions.
//! * The actions are put together in that order (files, units, SSH key), duplicates kept
//!   (as the MCO runs them): any `Reboot` makes the result `[Reboot]`; `None`s among other
//!   actions are dropped; only `None`s make `[None]`.
//! * **Drain** ([`Outcome::drain`]): with `Reboot` or `Drain` in the result, or `Special`
//!   unless the registries.conf change is safe ([`crate::registries::is_safe_change`], the
//!   MCO's TOML check; contents it cannot read are not safe).
//! * **Class** ([`Class`]), the strongest of: `Reboot` with a reboot; `Drain` with a drain;
//!   else `DaemonReload`, `Restart`, `Reload` (a `Special` is a CRI-O reload) by what the
//!   list holds; else `None`.
//! * **What an image-based node cannot apply live** (machineos's rule, on top of the MCO's):
//!   the agent applies a change live by copying the new image's `/etc` and `/var` contents
//!   into the running system ([`is_live_path`]; `/usr/local` is `/var/usrlocal` on every
//!   CoreOS). A changed file elsewhere (`/usr/lib/…`, `/usr/share/…`) or another Ignition section that differs (`storage.links`,
//!   `storage.directories`, …: the MCO refuses those on a running node) needs the new image
//!   booted; with no OS field changed the kernel, initrd and kernel arguments are the ones
//!   running, so a userspace reboot is enough: the class is at least `SoftReboot` (and the
//!   node drains), unless the policies already say `Reboot`. The reason names the change
//!   with the policy `live apply`.
//!
//! Pure; table-tested against the MCO's defaults (`tests/decide.rs`).

use serde::Serialize;

use crate::changes::ConfigChanges;
use crate::policy::{Action, ClusterPolicies, FilePolicy};

/// What a change costs a node, strongest last. `SoftReboot` is machineos's (a `systemd
/// soft-reboot` when the kernel, initrd and kernel arguments stay) and is not produced from
/// a MachineConfig change alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Class {
    /// Nothing to do on the node beyond writing the configuration.
    None,
    /// A service reload.
    Reload,
    /// A service restart.
    Restart,
    /// `systemctl daemon-reload` (and what follows it).
    DaemonReload,
    /// The node drained first.
    Drain,
    /// A userspace-only reboot (`systemd soft-reboot` into the new deployment): the kernel,
    /// initrd and kernel arguments stay.
    SoftReboot,
    /// A reboot.
    Reboot,
}

impl Class {
    /// Every class, weakest first.
    pub const ALL: [Class; 7] = [
        Class::None,
        Class::Reload,
        Class::Restart,
        Class::DaemonReload,
        Class::Drain,
        Class::SoftReboot,
        Class::Reboot,
    ];

    /// The name the API and the annotations use (`SoftReboot`).
    pub fn name(self) -> &'static str {
        match self {
            Class::None => "None",
            Class::Reload => "Reload",
            Class::Restart => "Restart",
            Class::DaemonReload => "DaemonReload",
            Class::Drain => "Drain",
            Class::SoftReboot => "SoftReboot",
            Class::Reboot => "Reboot",
        }
    }

    /// The class a [`Class::name`] names.
    pub fn parse(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether the node leaves service for it (cordoned, drained): `Drain`, `SoftReboot` and
    /// `Reboot` take a rollout slot; the others are applied on a schedulable node.
    pub fn takes_slot(self) -> bool {
        self >= Class::Drain
    }

    /// Whether the node boots the new image for it (`SoftReboot`, `Reboot`); the weaker
    /// classes are applied to the running system, the image staged for the next boot.
    pub fn boots(self) -> bool {
        self >= Class::SoftReboot
    }
}

impl<'de> serde::Deserialize<'de> for Class {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Class::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown class {s:?}")))
    }
}

/// Whether a changed file at `path` can be applied to a running image-based node: under
/// `/etc` (the live tree the next boot's three-way merge starts from), `/var` (never
/// replaced by an update) or `/usr/local` (a link to `/var/usrlocal` on Fedora, CentOS
/// Stream and RHEL CoreOS). Paths are compared cleaned.
pub fn is_live_path(path: &str) -> bool {
    let p = clean(path);
    ["/etc", "/var", "/usr/local"].iter().any(|root| {
        p.strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Why a change needs what it needs: one line per changed item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// What changed (`file /etc/chrony.conf`, `unit chronyd.service`, `passwd`,
    /// `kernelArguments`).
    pub change: String,
    /// The policy that decided it (`file /etc/containers`, `unit …`, `sshkey`), or none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Its actions.
    pub actions: Vec<Action>,
}

/// The decision (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The actions, in the order they run.
    pub actions: Vec<Action>,
    /// Whether the node is drained first.
    pub drain: bool,
    /// The class a rollout schedules the node by.
    pub class: Class,
    /// Per change, what decided it (up to the first change that forced a reboot).
    pub reasons: Vec<Reason>,
}

/// `path` cleaned: `.` segments and empty ones (repeated or trailing `/`) dropped; `..`
/// removes the segment before it, as Go's `filepath.Clean`.
fn clean(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The policy for `file`: the longest policy path equal to it or a directory above it.
pub fn closest_file_policy<'a>(policies: &'a [FilePolicy], file: &str) -> Option<&'a FilePolicy> {
    let file = clean(file);
    let mut best: Option<&FilePolicy> = None;
    for p in policies {
        let path = clean(&p.path);
        let covers = path == file || file.starts_with(&format!("{}/", path.trim_end_matches('/')));
        if covers && best.is_none_or(|b| p.path.len() > b.path.len()) {
            best = Some(p);
        }
    }
    best
}

fn reboot_for(change: String) -> Outcome {
    Outcome {
        actions: vec![Action::Reboot],
        drain: true,
        class: Class::Reboot,
        reasons: vec![Reason {
            change,
            policy: None,
            actions: vec![Action::Reboot],
        }],
    }
}

/// The actions `changes` need under `policies` (see the module documentation).
pub fn decide(changes: &ConfigChanges, policies: &ClusterPolicies) -> Outcome {
    if let Some(os) = changes.os.first() {
        let name = serde_json::to_value(os)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        return reboot_for(name);
    }
    let mut reasons = Vec::new();
    let mut actions = Vec::new();
    for file in &changes.files {
        let Some(p) = closest_file_policy(&policies.files, file) else {
            return reboot_for(format!("file {file}"));
        };
        reasons.push(Reason {
            change: format!("file {file}"),
            policy: Some(format!("file {}", p.path)),
            actions: p.actions.clone(),
        });
        actions.extend(p.actions.iter().cloned());
    }
    for unit in &changes.units {
        let Some(p) = policies.units.iter().find(|u| &u.name == unit) else {
            return reboot_for(format!("unit {unit}"));
        };
        reasons.push(Reason {
            change: format!("unit {unit}"),
            policy: Some(format!("unit {}", p.name)),
            actions: p.actions.clone(),
        });
        actions.extend(p.actions.iter().cloned());
    }
    if changes.passwd {
        reasons.push(Reason {
            change: "passwd".into(),
            policy: Some("sshkey".into()),
            actions: policies.sshkey.clone(),
        });
        actions.extend(policies.sshkey.iter().cloned());
    }
    if actions.contains(&Action::Reboot) {
        return Outcome {
            actions: vec![Action::Reboot],
            drain: true,
            class: Class::Reboot,
            reasons,
        };
    }
    // What the running system cannot take live needs the new image booted.
    let mut not_live: Vec<String> = changes
        .files
        .iter()
        .filter(|f| !is_live_path(f))
        .map(|f| format!("file {f}"))
        .collect();
    not_live.extend(changes.other.iter().map(|s| format!("Ignition {s}")));
    if actions.iter().any(|a| *a != Action::None) {
        actions.retain(|a| *a != Action::None);
    } else {
        actions = vec![Action::None];
    }
    // `Special` drains unless the registries.conf change is a safe one.
    let special_safe = changes.registries_conf.as_ref().is_some_and(|c| {
        crate::registries::is_safe_change(c.before.as_deref(), c.after.as_deref())
    });
    let drain = actions.iter().any(|a| match a {
        Action::Drain => true,
        Action::Special => !special_safe,
        _ => false,
    });
    for change in &not_live {
        reasons.push(Reason {
            change: change.clone(),
            policy: Some("live apply".into()),
            actions: vec![Action::Drain],
        });
    }
    let drain = drain || !not_live.is_empty();
    let class = if !not_live.is_empty() {
        Class::SoftReboot
    } else if drain {
        Class::Drain
    } else {
        actions
            .iter()
            .map(|a| match a {
                Action::DaemonReload => Class::DaemonReload,
                Action::Restart(_) => Class::Restart,
                Action::Reload(_) | Action::Special => Class::Reload,
                _ => Class::None,
            })
            .max()
            .unwrap_or(Class::None)
    };
    Outcome {
        actions,
        drain,
        class,
        reasons,
    }
}
