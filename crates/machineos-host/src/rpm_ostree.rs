//! The rpm-ostree backend.
//!
//! Contract (coreos/rpm-ostree `rust/src/daemon.rs`, `src/daemon/rpmostreed-deployment-utils.cxx`,
//! `src/app/rpmostree-builtin-{status,rebase,kargs}.cxx`; the MCO's `pkg/daemon/rpm-ostree.go`):
//! * `status` runs `rpm-ostree status --json` and reads `deployments[]`, newest first: the
//!   one with `booted: true` is booted; one before it (`staged: true`, or a pending
//!   deployment) is the next boot, unless it is `finalization-locked`, then it is reported in
//!   `pulled`; the first one after the booted one is the rollback. A deployment's image is
//!   `<repository of container-image-reference>@<container-image-reference-digest>`, the
//!   transport prefix (`ostree-unverified-registry:`, `ostree-remote-registry:<remote>:`,
//!   `ostree-image-signed:docker://`, …) dropped; when the digest member is missing
//!   (rpm-ostree makes it non-fatal, coreos/rpm-ostree#4185) the reference's own
//!   `@sha256:…` is used. A deployment that is not a container image has no image. Rebased
//!   to a multi-architecture index by digest, the digest member is the platform manifest's
//!   and the reference names the index: the index is kept in [`HostStatus::references`], so
//!   `pull`, `deploy` and their checks accept either.
//!   Kernel arguments and the boot id come from `<root>/proc`.
//! * `pull(X)`: `rpm-ostree rebase --experimental --download-only
//!   ostree-unverified-registry:X` — the transaction pulls the image into the ostree repo
//!   and stops before writing a deployment ("Just download latest ostree and RPM data, don't
//!   deploy"). The transaction runs in `rpm-ostreed`, not in the client the agent starts, so
//!   an I/O class on the client would not reach it: for the pull the daemon's cgroup I/O
//!   weight is lowered to the minimum (`systemctl set-property --runtime rpm-ostreed.service
//!   IOWeight=1`) and reset after (`IOWeight=`); a host where that fails pulls at the normal
//!   weight. rpm-ostree's status does not list pulled images, so successful pulls are
//!   recorded in `<state_dir>/rpm-ostree-pulled` (cleared at boot) and reported in `pulled`.
//!   rpm-ostree may prune an undeployed image in a later operation; a pull only saves time.
//! * `deploy(X)`: nothing when X is the next boot (or booted with nothing staged); else
//!   `rpm-ostree rebase --experimental ostree-unverified-registry:X`, the MCO's command,
//!   through [`Runner::run_long`]. The booted deployment stays the rollback.
//! * `kargs`: `rpm-ostree kargs --delete-if-present=<r>… --append=<a>…`, the MCO's
//!   `generateKargs` (deletes first, tolerant of drift; OCPBUGS-75894).
//! * `soft_reboot`: rpm-ostree has no soft reboot of its own (coreos/rpm-ostree#4525); ostree's
//!   `prepare-soft-reboot` is tried ([`crate::systemd::soft_reboot`]: it refuses a
//!   deployment whose kernel, initramfs or kernel arguments differ, and hosts without
//!   composefs), else a reboot. A bare `systemctl soft-reboot` is never run: without
//!   `/run/nextroot` it restarts the same deployment.
//! * `rollback(X)`: `rpm-ostree rollback` (`src/daemon/rpmostreed-transaction-types.cxx`,
//!   `rollback_transaction_execute`) moves the rollback deployment to the top (it is then
//!   pending: the one before the booted one, reported as `staged`); it refuses while a
//!   staged deployment exists, and with a pending one and no rollback it puts the booted one
//!   back on top — it toggles, so it runs only when X is the rollback deployment and does
//!   not boot next already; afterwards X must boot next.
//! * Pull credentials: `<root>/run/ostree/auth.json` ([`crate::files::RPM_OSTREE_AUTH`]).

use std::path::{Path, PathBuf};

use crate::files::{self, RPM_OSTREE_AUTH};
use crate::json::{Doc, repository};
use crate::pulled::PullRecord;
use crate::run::{Ran, Runner};
use crate::{Host, HostError, HostKind, HostStatus};

const TOOL: &str = "rpm-ostree";
const TRANSPORT: &str = "ostree-unverified-registry:";
/// The daemon that runs rpm-ostree's transactions.
const DAEMON: &str = "rpm-ostreed.service";

/// A host driven with rpm-ostree.
#[derive(Debug, Clone)]
pub struct RpmOstree {
    runner: Runner,
    root: PathBuf,
}

/// The image a container image reference names, transport dropped: `repo[:tag][@digest]`.
pub fn strip_transport(reference: &str) -> &str {
    let mut r = reference;
    for p in [
        "ostree-unverified-registry:",
        "ostree-unverified-image:",
        "ostree-image-signed:",
    ] {
        if let Some(rest) = r.strip_prefix(p) {
            r = rest;
            break;
        }
    }
    for p in ["ostree-remote-registry:", "ostree-remote-image:"] {
        if let Some(rest) = r.strip_prefix(p) {
            r = rest.split_once(':').map_or(rest, |(_, img)| img);
            break;
        }
    }
    for p in ["docker://", "registry:"] {
        if let Some(rest) = r.strip_prefix(p) {
            return rest;
        }
    }
    r
}

/// Parse `rpm-ostree status --json` into a host status (without kargs and boot id).
pub fn parse_status(json: &str) -> Result<HostStatus, HostError> {
    let d = Doc { tool: TOOL };
    let v = d.parse(json)?;
    let deployments = v
        .get("deployments")
        .and_then(|d| d.as_array())
        .ok_or_else(|| d.err("$.deployments", "missing or not an array"))?;
    let mut out = HostStatus::default();
    let mut references = std::collections::BTreeMap::new();
    let mut booted_at = None;
    let mut images = Vec::with_capacity(deployments.len());
    let mut deployments_at = Vec::with_capacity(deployments.len());
    for (i, dep) in deployments.iter().enumerate() {
        let path = format!("$.deployments[{i}]");
        if !dep.is_object() {
            return Err(d.err(&path, "expected an object"));
        }
        let image = match d.opt_str(dep, &path, "container-image-reference")? {
            None => None,
            Some(reference) => {
                let name = strip_transport(reference);
                let digest = match d.opt_str(dep, &path, "container-image-reference-digest")? {
                    Some(digest) => digest,
                    None => name.split_once('@').map(|(_, d)| d).ok_or_else(|| {
                        d.err(
                            &format!("{path}.container-image-reference-digest"),
                            "missing, and the reference has no digest",
                        )
                    })?,
                };
                let image = format!("{}@{digest}", repository(name));
                // Rebased to an index by digest: the digest member is the manifest's.
                if name.contains('@') && name != image {
                    references.insert(image.clone(), name.to_owned());
                }
                Some(image)
            }
        };
        let deployment = match (
            d.opt_str(dep, &path, "osname")?,
            d.opt_str(dep, &path, "checksum")?,
            dep.get("serial").and_then(serde_json::Value::as_u64),
        ) {
            (Some(osname), Some(checksum), Some(serial)) => Some(crate::live::Deployment {
                stateroot: osname.to_owned(),
                checksum: checksum.to_owned(),
                serial: u32::try_from(serial)
                    .map_err(|_| d.err(&format!("{path}.serial"), "not a count"))?,
            }),
            _ => None,
        };
        if d.bool(dep, &path, "booted")? {
            booted_at = Some(i);
            out.booted = image.clone();
            out.booted_deployment = deployment.clone();
        }
        let locked = d.bool(dep, &path, "finalization-locked")?;
        deployments_at.push(deployment);
        images.push((image, d.bool(dep, &path, "staged")?, locked));
    }
    match booted_at {
        Some(b) => {
            // Deployments before the booted one are pending: the first boots next.
            if let Some((img, _, locked)) = images.first().filter(|_| b > 0) {
                if *locked {
                    out.pulled.extend(img.clone());
                } else {
                    out.staged = img.clone();
                    out.staged_deployment = deployments_at.first().cloned().flatten();
                }
            }
            out.rollback = images.get(b + 1).and_then(|(img, _, _)| img.clone());
        }
        None => {
            // Not booted from a deployment (e.g. a container); still report a staged one.
            if let Some((img, true, locked)) = images.first() {
                if *locked {
                    out.pulled.extend(img.clone());
                } else {
                    out.staged = img.clone();
                }
            }
        }
    }
    out.references = references;
    Ok(out)
}

impl RpmOstree {
    /// An rpm-ostree host whose files are under `root`.
    pub fn new(runner: Runner, root: impl Into<PathBuf>) -> RpmOstree {
        RpmOstree {
            runner,
            root: root.into(),
        }
    }

    fn rpm_ostree(&self, args: &[String]) -> Result<String, HostError> {
        Ok(self.runner.run(&self.runner.tools.rpm_ostree, args)?.stdout)
    }

    /// The images pulled (`rebase --download-only`) and not deployed.
    fn pulled(&self) -> PullRecord {
        PullRecord::new(&self.runner.state_dir, "rpm-ostree-pulled")
    }

    /// `rpm-ostree status --json`, parsed, with the recorded pulls.
    fn tool_status(&self) -> Result<HostStatus, HostError> {
        let mut s = parse_status(&self.rpm_ostree(&["status".into(), "--json".into()])?)?;
        self.pulled().report(&mut s);
        Ok(s)
    }
}

impl Host for RpmOstree {
    fn kind(&self) -> HostKind {
        HostKind::RpmOstree
    }

    fn status(&self) -> Result<HostStatus, HostError> {
        let mut s = self.tool_status()?;
        s.kargs = files::booted_kargs(&self.root)?;
        s.boot_id = files::boot_id(&self.root)?;
        s.soft_reboots = crate::systemd::soft_reboots(&self.runner);
        Ok(s)
    }

    fn pull(&self, image: &str, auth: Option<&Path>) -> Result<(), HostError> {
        files::install_auth(&self.root, RPM_OSTREE_AUTH, auth)?;
        let s = self.tool_status()?;
        if s.holds(image) {
            return Ok(());
        }
        // Ahead of the node's turn the pull yields the disk: it runs in rpm-ostree's daemon,
        // so the daemon's I/O weight is lowered for it and restored after.
        let lowered = crate::systemd::io_weight(&self.runner, DAEMON, Some(1));
        let pulled = self.rpm_ostree(&[
            "rebase".into(),
            "--experimental".into(),
            "--download-only".into(),
            format!("{TRANSPORT}{image}"),
        ]);
        if lowered {
            crate::systemd::io_weight(&self.runner, DAEMON, None);
        }
        pulled?;
        self.pulled().add(image)
    }

    fn deploy(&self, image: &str, auth: Option<&Path>) -> Result<(), HostError> {
        files::install_auth(&self.root, RPM_OSTREE_AUTH, auth)?;
        if self.tool_status()?.boots_next(image) {
            return Ok(());
        }
        let args = vec![
            "rebase".to_owned(),
            "--experimental".to_owned(),
            format!("{TRANSPORT}{image}"),
        ];
        let tool = &self.runner.tools.rpm_ostree;
        if let Ran::Waited = self.runner.run_long(tool, &args)? {
            if self.tool_status()?.boots_next(image) {
                return Ok(());
            }
            self.runner.run_long(tool, &args)?;
        }
        let after = self.tool_status()?;
        if after.boots_next(image) {
            Ok(())
        } else {
            Err(HostError::Output {
                tool: TOOL.into(),
                path: "$.deployments[0]".into(),
                message: format!(
                    "after rebasing to {image} the next boot's image is {:?}",
                    after.staged
                ),
            })
        }
    }

    fn kargs(&self, add: &[String], remove: &[String]) -> Result<(), HostError> {
        if add.is_empty() && remove.is_empty() {
            return Ok(());
        }
        let mut args = vec!["kargs".to_owned()];
        args.extend(remove.iter().map(|r| format!("--delete-if-present={r}")));
        args.extend(add.iter().map(|a| format!("--append={a}")));
        self.rpm_ostree(&args).map(|_| ())
    }

    fn reboot(&self) -> Result<(), HostError> {
        crate::systemd::reboot(&self.runner, TOOL)
    }

    fn soft_reboot(&self) -> Result<(), HostError> {
        crate::systemd::soft_reboot(&self.runner, TOOL)
    }

    fn apply_live(&self) -> Result<crate::live::Applied, HostError> {
        let s = self.tool_status()?;
        crate::systemd::apply_live(&self.runner, &self.root, &s, TOOL)
    }

    fn sync_live(&self) -> Result<crate::live::Applied, HostError> {
        let s = self.tool_status()?;
        crate::systemd::sync_live(&self.runner, &self.root, &s, TOOL)
    }

    fn rollback(&self, to: &str) -> Result<(), HostError> {
        crate::rollback_with(
            TOOL,
            to,
            || self.tool_status(),
            || self.rpm_ostree(&["rollback".into()]).map(|_| ()),
        )
    }

    fn boot_guard_record(&self) -> Result<Option<String>, HostError> {
        crate::files::boot_guard_record(&self.root)
    }

    fn clear_boot_guard_record(&self) -> Result<(), HostError> {
        crate::files::clear_boot_guard_record(&self.root)
    }

    fn systemctl(&self, op: &crate::Systemctl) -> Result<(), HostError> {
        crate::systemd::systemctl(&self.runner, op)
    }

    fn release_pull_secret(&self) -> Result<(), HostError> {
        files::release_auth(&self.root, RPM_OSTREE_AUTH)
    }

    fn write_pull_secret(&self, dockerconfigjson: &[u8]) -> Result<PathBuf, HostError> {
        files::write_pull_secret(&self.root, RPM_OSTREE_AUTH, dockerconfigjson)
    }

    fn write_ssh_keys(&self, user: &str, keys: &[String]) -> Result<(), HostError> {
        files::write_ssh_keys(&self.root, user, keys).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports() {
        for (r, want) in [
            (
                "ostree-unverified-registry:quay.io/a/b@sha256:00",
                "quay.io/a/b@sha256:00",
            ),
            (
                "ostree-remote-registry:fedora:quay.io/a/b:t",
                "quay.io/a/b:t",
            ),
            (
                "ostree-image-signed:docker://quay.io/a/b:t",
                "quay.io/a/b:t",
            ),
            (
                "ostree-unverified-image:docker://quay.io/a/b",
                "quay.io/a/b",
            ),
            (
                "ostree-unverified-image:registry:quay.io/a/b",
                "quay.io/a/b",
            ),
        ] {
            assert_eq!(strip_transport(r), want);
        }
    }
}
