//! What a move between two images costs a node by what their filesystems differ in, when
//! the two rendered MachineConfigs do not tell it all (another base, a Containerfile, RUN
//! steps): a kernel or initrd that differs, or the kernel arguments an image ships (bootc's
//! `kargs.d`), needs a reboot; any other path outside what a
//! running node can take live ([`crate::is_live_path`]: `/etc`, `/var`, `/usr/local`) needs
//! at least the new deployment booted — a soft reboot, since the kernel stays; live paths
//! alone need nothing by themselves (the node disruption policies decide the actions of the
//! MachineConfig changes among them). The image's own copies of live content count as live:
//! `/usr/etc` (the deployment's default `/etc`), `/usr/share/factory/var` (the `/var`
//! content machineos's layer carries, copied by systemd-tmpfiles) and that layer's
//! tmpfiles snippet — the same paths the agent's live apply accepts
//! (`machineos_host::live`).
//!
//! [`decide_across_images`] decides a node's move when the two images differ by more than
//! their rendered MachineConfigs (another base or extensions image, a rebuild) but the
//! filesystem difference between exactly the node's image and the target is known (the
//! target MachineOSImage's `status.changes`, compared with the node's image):
//! * the configuration changes are decided by the policies ([`crate::decide()`]) without
//!   `osImageURL` and `extensions` — what those change is in the filesystem difference;
//!   kernel arguments, FIPS and kernelType still reboot;
//! * the filesystem: a kernel or initrd that differs → `Reboot`; any other path that
//!   differs → at least `SoftReboot` (paths outside the live tree need the new deployment
//!   booted, and live paths the MachineConfigs do not explain — a base's own `/etc` —
//!   have no policy to apply them by: the userspace restart applies them all); nothing
//!   differs → nothing more;
//! * the class is the stronger of the two; a booting class drains.
//!
//! [`raise_by_paths`] is the check for a move the configs decide (two builds of one base):
//! when the filesystem difference from exactly the node's image is known too, what the paths
//! need (a kernel or `kargs.d`: reboot; outside the live tree: soft reboot — a
//! Containerfile's RUN step the configs do not show) raises the configs' decision.
//!
//! Pure.

use crate::changes::{ConfigChanges, OsChange};
use crate::decide::{Class, Outcome, Reason, decide, is_live_path};
use crate::policy::{Action, ClusterPolicies};

/// The class and why, from the paths that differ between two images.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImageClass {
    /// The class the paths alone need.
    pub class: Class,
    /// Why: the kernel or initrd files that differ, else the first few paths that cannot be
    /// applied live (with how many more), else nothing.
    pub reasons: Vec<String>,
}

/// How many non-live paths a reason lists before counting the rest.
pub const LISTED: usize = 5;

/// Whether `path` is a kernel image or an initramfs as ostree-based images ship them:
/// `/usr/lib/modules/<version>/vmlinuz` or `…/initramfs.img` (also under `/boot`).
pub fn is_kernel_path(path: &str) -> bool {
    let rest = path
        .strip_prefix("/usr/lib/modules/")
        .or_else(|| path.strip_prefix("/lib/modules/"));
    if let Some(rest) = rest {
        return matches!(
            rest.split_once('/'),
            Some((version, "vmlinuz" | "initramfs.img")) if !version.is_empty()
        );
    }
    path.strip_prefix("/boot/").is_some_and(|name| {
        !name.contains('/') && (name.starts_with("vmlinuz") || name.starts_with("initramfs"))
    })
}

/// Whether `path` holds kernel arguments an image ships: bootc's
/// `/usr/lib/bootc/kargs.d/*.toml`, which a switch applies to the new deployment — a new
/// kernel command line, so only a reboot gives it.
pub fn is_kargs_path(path: &str) -> bool {
    path.strip_prefix("/usr/lib/bootc/kargs.d/")
        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

/// The class `changed` (paths added, removed or modified) needs (see the module
/// documentation).
pub fn image_class<'a>(changed: impl IntoIterator<Item = &'a str>) -> ImageClass {
    let mut kernel = Vec::new();
    let mut not_live = Vec::new();
    for p in changed {
        if is_kernel_path(p) || is_kargs_path(p) {
            kernel.push(p);
        } else if !is_live_path(p) && p != "/" && !is_live_root(p) {
            not_live.push(p);
        }
    }
    if !kernel.is_empty() {
        return ImageClass {
            class: Class::Reboot,
            reasons: kernel
                .iter()
                .map(|p| {
                    if is_kargs_path(p) {
                        format!("{p} differs: the kernel arguments change")
                    } else {
                        format!("{p} differs: the kernel or initrd changes")
                    }
                })
                .collect(),
        };
    }
    if !not_live.is_empty() {
        let mut reasons: Vec<String> = not_live
            .iter()
            .take(LISTED)
            .map(|p| format!("{p} differs: not applied to a running node"))
            .collect();
        if not_live.len() > LISTED {
            reasons.push(format!("and {} more such paths", not_live.len() - LISTED));
        }
        return ImageClass {
            class: Class::SoftReboot,
            reasons,
        };
    }
    ImageClass {
        class: Class::None,
        reasons: Vec::new(),
    }
}

/// `/etc`, `/var` and `/usr/local` themselves (their metadata, not their contents), and the
/// image's copies of live content (see the module documentation).
fn is_live_root(p: &str) -> bool {
    let under = |root: &str| p == root || p.strip_prefix(root).is_some_and(|r| r.starts_with('/'));
    matches!(
        p,
        "/etc"
            | "/var"
            | "/usr/local"
            | "/usr/share/factory"
            | "/usr/lib/tmpfiles.d/machineos-var.conf"
    ) || under("/usr/etc")
        || under("/usr/share/factory/var")
}

/// What comparing the node's image with the target found (a MachineOSImage's
/// `status.changes`, when its `from` is the node's image and it compared the node's
/// architecture).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageEvidence {
    /// The image compared with: the node's.
    pub from: String,
    /// How many paths differ (added, removed, modified).
    pub changed: u64,
    /// Whether a kernel or initramfs differs.
    pub kernel_changed: bool,
    /// What the paths alone need ([`image_class`]).
    pub path_class: Class,
}

/// The decision for a move whose images differ by more than the configs (`why`: how,
/// e.g. "the base image changes (a → b)"), from the configs' changes and the images'
/// difference (see the module documentation).
pub fn decide_across_images(
    changes: &ConfigChanges,
    policies: &ClusterPolicies,
    image: &ImageEvidence,
    why: &str,
) -> Outcome {
    let mut config = changes.clone();
    config
        .os
        .retain(|o| !matches!(o, OsChange::OsImageUrl | OsChange::Extensions));
    let mut outcome = decide(&config, policies);
    let (image_class, what) = if image.kernel_changed || image.path_class == Class::Reboot {
        (Class::Reboot, "the kernel or initrd differs")
    } else if image.changed > 0 {
        (
            Class::SoftReboot,
            "the kernel and initrd are the same; the new deployment is booted",
        )
    } else {
        (Class::None, "no path differs")
    };
    let reason = Reason {
        change: format!(
            "{why}: {} paths differ from the node's image {} ({what})",
            image.changed, image.from
        ),
        policy: Some("image difference".into()),
        actions: reason_actions(image_class),
    };
    outcome.reasons.push(reason);
    raise_to(&mut outcome, image_class);
    outcome
}

/// `outcome` (the configs' decision for a move between two builds of one base) raised to
/// what the measured paths need (see the module documentation).
pub fn raise_by_paths(mut outcome: Outcome, image: &ImageEvidence) -> Outcome {
    let class = if image.kernel_changed {
        Class::Reboot
    } else {
        image.path_class
    };
    if class <= outcome.class {
        return outcome;
    }
    outcome.reasons.push(Reason {
        change: format!(
            "the image differs from the node's image {} beyond the configs: {}",
            image.from,
            if class == Class::Reboot {
                "the kernel, initrd or kernel arguments change"
            } else {
                "paths outside /etc, /var and /usr/local change"
            }
        ),
        policy: Some("image difference".into()),
        actions: reason_actions(class),
    });
    raise_to(&mut outcome, class);
    outcome
}

/// The actions a reason by the images' difference names for `class`.
fn reason_actions(class: Class) -> Vec<Action> {
    vec![match class {
        Class::Reboot => Action::Reboot,
        Class::SoftReboot => Action::Drain,
        _ => Action::None,
    }]
}

/// `outcome` raised to `class` when that is stronger: drained, and a reboot's actions only
/// the reboot.
fn raise_to(outcome: &mut Outcome, class: Class) {
    if class > outcome.class {
        outcome.class = class;
        outcome.drain = true;
        if class == Class::Reboot {
            outcome.actions = vec![Action::Reboot];
        }
    }
}
