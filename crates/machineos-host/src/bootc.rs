//! The bootc backend.
//!
//! Contract (bootc-dev/bootc `crates/lib/src/cli.rs`, `spec.rs`, `docs/src/man/`):
//! * `status` runs `bootc status --format json` (apiVersion `org.containers.bootc/v1`, kind
//!   `BootcHost`) and reads `status.{staged,booted,rollback}.image`: the image is
//!   `<repository of image.image.image>@<image.imageDigest>`. A staged entry with
//!   `downloadOnly: true` is not the next boot: it is reported in `pulled`, not `staged`.
//!   Kernel arguments and the boot id come from `<root>/proc` (bootc's JSON has neither).
//!   An image deployed from a multi-architecture index by digest reports the platform
//!   manifest's digest in `imageDigest` and the index in `image.image`: the index is kept
//!   in [`HostStatus::references`], so `pull`, `deploy` and their checks accept either.
//! * `pull(X)` never changes what boots next. `bootc switch` has no `--download-only`
//!   (`SwitchOpts` in `crates/lib/src/cli.rs`), and `bootc upgrade --download-only` only
//!   downloads the *current spec's* image, so reaching X that way needs a `switch` first —
//!   which makes X the next boot until the second step locks it, and for good if the agent
//!   dies in between: an unplanned reboot would then apply X outside the rollout's budget.
//!   Instead X is pulled into the host's ostree repository with bootc's own ostree-ext, the
//!   import bootc runs for a switch: `bootc internals ostree-container image pull --quiet
//!   /sysroot/ostree/repo ostree-unverified-registry:X` (`InternalsOpts::OstreeContainer` →
//!   ostree-ext `ContainerImageOpts::Pull`; credentials from ostree's `/etc/ostree/auth.json`
//!   or `/run/ostree/auth.json`). The image is kept under its ostree ref, no deployment is
//!   written, and the `switch` that deploys it later finds its layers there. The pull runs in
//!   the idle I/O class (`ionice -c 3`; bootc imports in its own process), so staging ahead
//!   of a node's turn yields the disk to its workloads. bootc's status
//!   does not list pulled images, so successful pulls are recorded in
//!   `<state_dir>/bootc-pulled` (the host's `/run`: cleared at boot) and reported in `pulled`,
//!   as a download-only staged deployment made by someone else is.
//! * `deploy(X)`: nothing when X is staged (or booted with nothing staged); `bootc upgrade
//!   --from-downloaded --quiet` when X is a download-only staged deployment (unlocks it);
//!   else `bootc switch --quiet X`
//!   (the MCO's `pkg/daemon/bootc.go` runs plain `bootc switch <image>`). Both run through
//!   [`Runner::run_long`] (systemd-run when so configured). The booted deployment stays the
//!   rollback (ostree keeps booted + staged); `--retain` is not needed for that (it only
//!   keeps the old image's ostree ref from pruning). Afterwards X must be the staged image,
//!   else [`HostError::Output`].
//! * `kargs`: bootc has no command to change kernel arguments of the next deployment (they
//!   come from the image's `/usr/lib/bootc/kargs.d`; bootc ≥ 1.15.2's `bootc loader-entries
//!   set-options-for-source` is not used here). A change that leaves the booted arguments as
//!   they are succeeds; any other is [`HostError::Unsupported`].
//! * `soft_reboot`: only when the staged entry says `softRebootCapable` (bootc's own rule:
//!   kernel, initramfs and kernel arguments unchanged, systemd and ostree able, the same
//!   SELinux policy), [`crate::systemd::soft_reboot`]; else a reboot, as bootc's
//!   `--soft-reboot=auto`. (bootc's own `switch --soft-reboot=auto` prepares at stage time;
//!   machineos stages first and decides at the reboot, so it prepares then.)
//! * `rollback(X)`: `bootc rollback` (`crates/lib/src/deploy.rs`, `rollback`) writes the
//!   rollback deployment first and drops a staged one; `status.rollbackQueued` then says the
//!   rollback entry boots next. Run again it *reverts* ("Reverting queued rollback state"),
//!   so it runs only when X is the rollback entry and does not boot next already
//!   (`rollback_with`); afterwards X must boot next.
//! * Pull credentials: `<root>/etc/ostree/auth.json` ([`crate::files::BOOTC_AUTH`]); an
//!   `auth` file given elsewhere is copied there first.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::files::{self, BOOTC_AUTH};
use crate::json::{Doc, repository};
use crate::pulled::PullRecord;
use crate::run::{Ran, Runner};
use crate::{Host, HostError, HostKind, HostStatus};

const TOOL: &str = "bootc";
/// The host's ostree repository, as the host tools see it.
const OSTREE_REPO: &str = "/sysroot/ostree/repo";

/// A host driven with bootc.
#[derive(Debug, Clone)]
pub struct Bootc {
    runner: Runner,
    root: PathBuf,
}

/// One slot of `bootc status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootcEntry {
    /// `repo@sha256:…` (the digest bootc pulled: an index's platform manifest).
    pub image: String,
    /// The reference it was deployed from (`image.image.image`), when that carries a
    /// digest other than `image`'s: a multi-architecture index.
    pub reference: Option<String>,
    /// `downloadOnly`: staged with finalization locked.
    pub download_only: bool,
    /// `ostree`: where the deployment is checked out.
    pub deployment: Option<crate::live::Deployment>,
    /// `softRebootCapable`: the same kernel, initramfs and kernel arguments as the booted
    /// deployment, a systemd and ostree that can soft-reboot, the same SELinux policy
    /// (bootc `status.rs`, `has_soft_reboot_capability`).
    pub soft_reboot_capable: bool,
}

/// What `bootc status --format json` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootcStatus {
    /// `status.staged`.
    pub staged: Option<BootcEntry>,
    /// `status.booted`.
    pub booted: Option<BootcEntry>,
    /// `status.rollback`.
    pub rollback: Option<BootcEntry>,
    /// `status.rollbackQueued`: the rollback entry boots next (after `bootc rollback`).
    pub rollback_queued: bool,
}

/// Parse `bootc status --format json`.
pub fn parse_status(json: &str) -> Result<BootcStatus, HostError> {
    let d = Doc { tool: TOOL };
    let v = d.parse(json)?;
    if let Some(kind) = d.opt_str(&v, "$", "kind")?
        && kind != "BootcHost"
    {
        return Err(d.err("$.kind", format!("expected BootcHost, got {kind:?}")));
    }
    let Some(status) = d.obj(&v, "$", "status")? else {
        return Ok(BootcStatus::default());
    };
    let slot = |name: &str| -> Result<Option<BootcEntry>, HostError> {
        let path = format!("$.status.{name}");
        let Some(entry) = d.obj(status, "$.status", name)? else {
            return Ok(None);
        };
        entry_image(&d, entry, &path)
    };
    Ok(BootcStatus {
        staged: slot("staged")?,
        booted: slot("booted")?,
        rollback: slot("rollback")?,
        rollback_queued: d.bool(status, "$.status", "rollbackQueued")?,
    })
}

fn entry_image(d: &Doc<'_>, entry: &Value, path: &str) -> Result<Option<BootcEntry>, HostError> {
    let Some(img) = d.obj(entry, path, "image")? else {
        return Ok(None);
    };
    let ipath = format!("{path}.image");
    let reference = d
        .obj(img, &ipath, "image")?
        .ok_or_else(|| d.err(&format!("{ipath}.image"), "missing"))?;
    let name = d.str(reference, &format!("{ipath}.image"), "image")?;
    let digest = d.str(img, &ipath, "imageDigest")?;
    if !digest.contains(':') {
        return Err(d.err(
            &format!("{ipath}.imageDigest"),
            format!("not a digest: {digest:?}"),
        ));
    }
    let image = format!("{}@{digest}", repository(name));
    let deployment = match d.obj(entry, path, "ostree")? {
        None => None,
        Some(o) => {
            let opath = format!("{path}.ostree");
            Some(crate::live::Deployment {
                stateroot: d.str(o, &opath, "stateroot")?.to_owned(),
                checksum: d.str(o, &opath, "checksum")?.to_owned(),
                serial: o
                    .get("deploySerial")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        d.err(&format!("{opath}.deploySerial"), "missing or not a count")
                    })?,
            })
        }
    };
    Ok(Some(BootcEntry {
        reference: (name.contains('@') && name != image).then(|| name.to_owned()),
        image,
        download_only: d.bool(entry, path, "downloadOnly")?,
        deployment,
        soft_reboot_capable: d.bool(entry, path, "softRebootCapable")?,
    }))
}

impl BootcStatus {
    /// The host status: a download-only staged image is `pulled`, not `staged`.
    pub fn host_status(&self) -> HostStatus {
        let img = |e: &Option<BootcEntry>| e.as_ref().map(|e| e.image.clone());
        let (staged, pulled) = match &self.staged {
            Some(e) if e.download_only => (None, vec![e.image.clone()]),
            s => (img(s), Vec::new()),
        };
        let references = [&self.staged, &self.booted, &self.rollback]
            .into_iter()
            .flatten()
            .filter_map(|e| Some((e.image.clone(), e.reference.clone()?)))
            .collect();
        let dep = |e: &Option<BootcEntry>| e.as_ref().and_then(|e| e.deployment.clone());
        HostStatus {
            booted: img(&self.booted),
            staged_deployment: staged.as_ref().and_then(|_| dep(&self.staged)),
            staged,
            rollback: img(&self.rollback),
            pulled,
            references,
            booted_deployment: dep(&self.booted),
            rollback_queued: self.rollback_queued,
            ..HostStatus::default()
        }
    }
}

impl Bootc {
    /// A bootc host whose files are under `root`.
    pub fn new(runner: Runner, root: impl Into<PathBuf>) -> Bootc {
        Bootc {
            runner,
            root: root.into(),
        }
    }

    fn bootc(&self, args: &[&str]) -> Result<String, HostError> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Ok(self.runner.run(&self.runner.tools.bootc, &args)?.stdout)
    }

    /// `bootc status --format json`, parsed.
    pub fn bootc_status(&self) -> Result<BootcStatus, HostError> {
        parse_status(&self.bootc(&["status", "--format", "json"])?)
    }

    /// The images this host's ostree repository holds by our pulls.
    fn pulled(&self) -> PullRecord {
        PullRecord::new(&self.runner.state_dir, "bootc-pulled")
    }

    /// `bootc status`, with the recorded pulls in `pulled`.
    fn tool_status(&self) -> Result<HostStatus, HostError> {
        let mut s = self.bootc_status()?.host_status();
        self.pulled().report(&mut s);
        Ok(s)
    }

    fn switch(&self, image: &str, from_downloaded: bool) -> Result<(), HostError> {
        let args: Vec<String> = if from_downloaded {
            vec![
                "upgrade".into(),
                "--from-downloaded".into(),
                "--quiet".into(),
            ]
        } else {
            vec!["switch".into(), "--quiet".into(), image.into()]
        };
        match self.runner.run_long(&self.runner.tools.bootc, &args)? {
            Ran::Done(_) => Ok(()),
            Ran::Waited => {
                // Someone's switch ran; if it was not to `image`, run ours.
                let s = self.bootc_status()?.host_status();
                if s.is(s.staged.as_deref(), image) {
                    Ok(())
                } else {
                    self.switch(image, from_downloaded)
                }
            }
        }
    }
}

impl Host for Bootc {
    fn kind(&self) -> HostKind {
        HostKind::Bootc
    }

    fn status(&self) -> Result<HostStatus, HostError> {
        let mut s = self.tool_status()?;
        s.kargs = files::booted_kargs(&self.root)?;
        s.boot_id = files::boot_id(&self.root)?;
        s.soft_reboots = crate::systemd::soft_reboots(&self.runner);
        Ok(s)
    }

    fn pull(&self, image: &str, auth: Option<&Path>) -> Result<(), HostError> {
        files::install_auth(&self.root, BOOTC_AUTH, auth)?;
        let s = self.tool_status()?;
        if s.holds(image) {
            return Ok(());
        }
        let imgref = format!("ostree-unverified-registry:{image}");
        // Ahead of the node's turn: in the idle I/O class (bootc pulls in its own process).
        let args: Vec<String> = [
            "internals",
            "ostree-container",
            "image",
            "pull",
            "--quiet",
            OSTREE_REPO,
            &imgref,
        ]
        .map(String::from)
        .to_vec();
        self.runner.run_idle(&self.runner.tools.bootc, &args)?;
        self.pulled().add(image)
    }

    fn deploy(&self, image: &str, auth: Option<&Path>) -> Result<(), HostError> {
        files::install_auth(&self.root, BOOTC_AUTH, auth)?;
        let s = self.bootc_status()?.host_status();
        if s.boots_next(image) {
            return Ok(());
        }
        self.switch(image, s.has_pulled(image))?;
        let after = self.bootc_status()?.host_status();
        if after.boots_next(image) {
            Ok(())
        } else {
            Err(HostError::Output {
                tool: TOOL.into(),
                path: "$.status.staged".into(),
                message: format!(
                    "after switching to {image} the staged image is {:?}",
                    after.staged
                ),
            })
        }
    }

    fn kargs(&self, add: &[String], remove: &[String]) -> Result<(), HostError> {
        if add.is_empty() && remove.is_empty() {
            return Ok(());
        }
        let booted = files::booted_kargs(&self.root)?;
        if apply_kargs(&booted, add, remove) == sorted(&booted) {
            return Ok(());
        }
        Err(HostError::Unsupported {
            tool: TOOL.into(),
            operation: format!("change kernel arguments (add {add:?}, remove {remove:?})"),
            reason: "bootc has no command to change a deployment's kernel arguments; they \
                     come from the image's /usr/lib/bootc/kargs.d"
                .into(),
        })
    }

    fn reboot(&self) -> Result<(), HostError> {
        crate::systemd::reboot(&self.runner, TOOL)
    }

    fn soft_reboot(&self) -> Result<(), HostError> {
        // bootc says whether the staged deployment qualifies; when it does not, a reboot
        // (bootc's `--soft-reboot=auto`).
        let capable = self
            .bootc_status()?
            .staged
            .is_some_and(|e| e.soft_reboot_capable && !e.download_only);
        if !capable {
            tracing::info!(
                "the staged deployment is not soft-reboot capable (bootc status); rebooting"
            );
            return crate::systemd::reboot(&self.runner, TOOL);
        }
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
            || self.bootc(&["rollback"]).map(|_| ()),
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
        files::release_auth(&self.root, BOOTC_AUTH)
    }

    fn write_pull_secret(&self, dockerconfigjson: &[u8]) -> Result<PathBuf, HostError> {
        files::write_pull_secret(&self.root, BOOTC_AUTH, dockerconfigjson)
    }

    fn write_ssh_keys(&self, user: &str, keys: &[String]) -> Result<(), HostError> {
        files::write_ssh_keys(&self.root, user, keys).map(|_| ())
    }
}

fn sorted(k: &[String]) -> Vec<String> {
    let mut v = k.to_vec();
    v.sort();
    v
}

/// `kargs` without one instance of each of `remove`, plus `add`, sorted.
pub(crate) fn apply_kargs(kargs: &[String], add: &[String], remove: &[String]) -> Vec<String> {
    let mut v = kargs.to_vec();
    for r in remove {
        if let Some(i) = v.iter().position(|k| k == r) {
            v.remove(i);
        }
    }
    v.extend(add.iter().cloned());
    v.sort();
    v
}
