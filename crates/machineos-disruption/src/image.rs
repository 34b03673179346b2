//! What a move between two images costs a node by what their filesystems differ in, when
//! the two rendered MachineConfigs do not tell it all (another base, a Containerfile, RUN
//! steps): a kernel or initrd that differs needs a reboot; any other path outside what a
//! running node can take live ([`crate::is_live_path`]: `/etc`, `/var`, `/usr/local`) needs
//! at least the new deployment booted — a soft reboot, since the kernel stays; live paths
//! alone need nothing by themselves (the node disruption policies decide the actions of the
//! MachineConfig changes among them). The image's own copies of live content count as live:
//! `/usr/etc` (the deployment's default `/etc`), `/usr/share/factory/var` (the `/var`
//! content machineos's layer carries, copied by systemd-tmpfiles) and that layer's
//! tmpfiles snippet — the same paths the agent's live apply accepts
//! (`machineos_host::live`). Pure.

use crate::decide::{Class, is_live_path};

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

/// The class `changed` (paths added, removed or modified) needs (see the module
/// documentation).
pub fn image_class<'a>(changed: impl IntoIterator<Item = &'a str>) -> ImageClass {
    let mut kernel = Vec::new();
    let mut not_live = Vec::new();
    for p in changed {
        if is_kernel_path(p) {
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
                .map(|p| format!("{p} differs: the kernel or initrd changes"))
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
