//! What bootc and rpm-ostree hosts share beyond their tools: `systemctl` operations a
//! change's policy asks for, the soft reboot, its count, and the live apply's deployments.
//!
//! Contract:
//! * [`reboot`] runs the configured reboot command (`systemctl reboot`).
//! * [`io_weight`] lowers or resets a unit's cgroup I/O weight for this boot
//!   (`systemctl set-property --runtime`), for work done in a daemon (rpm-ostree's pulls).
//! * [`systemctl`] runs `systemctl <reload|restart> UNIT` or `systemctl daemon-reload`
//!   through the runner (under its prefix: in the host's namespaces).
//! * [`soft_reboots`] is systemd's `SoftRebootsCount` (`systemctl show -P SoftRebootsCount`,
//!   systemd ≥ 256); 0 when the host's systemd does not report it.
//! * [`soft_reboot`]: `ostree admin prepare-soft-reboot 0` makes the staged deployment
//!   (index 0 of `ostree admin status`) the soft-reboot target — ostree (≥ 2025.3) mounts it
//!   at `/run/nextroot`, and refuses when the deployment's boot checksum (kernel and
//!   initramfs) or kernel arguments differ from the booted ones, or the host has no
//!   composefs (ostree `ot-admin-builtin-prepare-soft-reboot.c`, `can_soft_reboot`; bootc's
//!   `--soft-reboot=auto` makes the same preparation through the library) — then `systemctl
//!   soft-reboot` (systemd ≥ 254; from 255 a plain reboot would soft-reboot into
//!   `/run/nextroot` too). When the preparation fails (an older ostree, a deployment that
//!   does not qualify), a reboot instead, as bootc's `auto` does; when `systemctl
//!   soft-reboot` fails (a systemd before 254), the preparation is reset and the host
//!   rebooted. Failures are logged.
//! * [`apply_live`]: the host status's booted and staged deployments, [`crate::live::apply`]
//!   under the host root, the record in the runner's state directory; [`sync_live`]: the
//!   next boot's deployment (staged, else booted), [`crate::live::sync_recorded`].

use std::path::Path;

use crate::live::{Applied, AppliedRecord};
use crate::run::Runner;
use crate::{HostError, HostStatus, Systemctl};

/// Run `op`.
pub fn systemctl(runner: &Runner, op: &Systemctl) -> Result<(), HostError> {
    runner.run(&runner.tools.systemctl, &op.args()).map(|_| ())
}

/// systemd's soft reboot count (0 when unknown).
pub fn soft_reboots(runner: &Runner) -> u64 {
    let args = ["show", "-P", "SoftRebootsCount"].map(String::from);
    runner
        .run(&runner.tools.systemctl, &args)
        .ok()
        .and_then(|o| o.stdout.trim().parse().ok())
        .unwrap_or(0)
}

/// Soft-reboot into the staged deployment, else reboot (see the module documentation).
pub fn soft_reboot(runner: &Runner, tool: &str) -> Result<(), HostError> {
    let prepare = ["admin", "prepare-soft-reboot", "0"].map(String::from);
    if let Err(e) = runner.run(&runner.tools.ostree, &prepare) {
        tracing::warn!(error = %e, "the staged deployment cannot be soft-rebooted into; rebooting");
        return reboot(runner, tool);
    }
    match runner.run(&runner.tools.systemctl, &["soft-reboot".to_owned()]) {
        Ok(_) => Ok(()),
        Err(e) => {
            // A systemd without soft-reboot (< 254): undo the preparation, reboot.
            tracing::warn!(error = %e, "systemctl soft-reboot failed; rebooting");
            let reset = ["admin", "prepare-soft-reboot", "--reset"].map(String::from);
            let _ = runner.run(&runner.tools.ostree, &reset);
            reboot(runner, tool)
        }
    }
}

/// Apply the staged deployment's configuration to the running system under `root`.
pub fn apply_live(
    runner: &Runner,
    root: &Path,
    status: &HostStatus,
    tool: &str,
) -> Result<Applied, HostError> {
    let (Some(booted), Some(staged)) = (&status.booted_deployment, &status.staged_deployment)
    else {
        return Err(HostError::Unsupported {
            tool: tool.into(),
            operation: "apply the staged image's configuration live".into(),
            reason: "the status names no booted and staged ostree deployment".into(),
        });
    };
    crate::live::apply(
        root,
        &booted.dir(root),
        &staged.dir(root),
        &AppliedRecord::new(&runner.state_dir),
    )
}

/// Reboot with the configured command (`systemctl reboot`).
pub fn reboot(runner: &Runner, tool: &str) -> Result<(), HostError> {
    let Some((prog, args)) = runner.tools.reboot.split_first() else {
        return Err(HostError::Unsupported {
            tool: tool.into(),
            operation: "reboot".into(),
            reason: "no reboot command configured".into(),
        });
    };
    runner.run(Path::new(prog), args).map(|_| ())
}

/// Make the recorded live paths the next boot's image's again (staged, else booted).
pub fn sync_live(
    runner: &Runner,
    root: &Path,
    status: &HostStatus,
    tool: &str,
) -> Result<Applied, HostError> {
    let Some(next) = status
        .staged_deployment
        .as_ref()
        .or(status.booted_deployment.as_ref())
    else {
        return Err(HostError::Unsupported {
            tool: tool.into(),
            operation: "undo live applies".into(),
            reason: "the status names no ostree deployment".into(),
        });
    };
    crate::live::sync_recorded(
        root,
        &next.dir(root),
        &AppliedRecord::new(&runner.state_dir),
    )
}

/// Set (`Some`) or reset (`None`) `unit`'s cgroup I/O weight for this boot (`systemctl
/// set-property --runtime UNIT IOWeight=N`; an empty assignment resets it); `true` when it
/// was set. Best effort: a failure is logged.
pub fn io_weight(runner: &Runner, unit: &str, weight: Option<u32>) -> bool {
    let value = weight.map(|w| w.to_string()).unwrap_or_default();
    let args = vec![
        "set-property".to_owned(),
        "--runtime".to_owned(),
        unit.to_owned(),
        format!("IOWeight={value}"),
    ];
    match runner.run(&runner.tools.systemctl, &args) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(unit, error = %e, "setting the I/O weight");
            false
        }
    }
}
