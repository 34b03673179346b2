//! The host operations the node agent needs, behind one trait ([`Host`]), so the agent's
//! state machine never knows which tool runs: **bootc** (`bootc switch`, `bootc status
//! --format json`) or **rpm-ostree** (`rpm-ostree rebase ostree-unverified-registry:…`,
//! `rpm-ostree status --json`, `rpm-ostree kargs`), chosen by what the host has; and a
//! [`FakeHost`] for tests and the simulated cluster.
//!
//! Contract:
//! * Every method is blocking (it runs a host tool or touches files); the async agent calls
//!   them on blocking threads.
//! * `pull` never changes what boots next; `deploy` makes `image` the next boot and keeps
//!   the current deployment as the rollback; `reboot` asks the host to reboot (on a real
//!   host the process is killed by it; a fake host records the request).
//! * Errors name the tool, its arguments and its stderr, and say whether a retry may help
//!   (a registry or DNS briefly unavailable).
//!
//! Pieces: [`run`] (running tools, directly or as a systemd-run unit), [`bootc`] and
//! [`rpm_ostree`] (the backends; each module's doc says which commands it runs and why),
//! [`detect()`] (which backend), [`files`] (pull secret, SSH keys, `/proc` facts),
//! [`pulled`] (the record of images pulled and not deployed), [`retry`] (the MCO's pull
//! backoff), [`fake`].

pub mod bootc;
pub mod detect;
pub mod error;
pub mod fake;
pub mod files;
mod json;
pub mod live;
pub mod pulled;
pub mod retry;
pub mod rpm_ostree;
pub mod run;
pub mod systemd;

pub use bootc::Bootc;
pub use detect::detect;
pub use error::HostError;
pub use fake::FakeHost;
pub use json::repository;
pub use retry::{PULL_BACKOFF, pull_with_retry};
pub use rpm_ostree::RpmOstree;
pub use run::{Mode, Runner, Tools};

/// Which tool the host is driven with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// `bootc`.
    Bootc,
    /// `rpm-ostree`.
    RpmOstree,
    /// An in-memory host (tests).
    Fake,
}

/// What the host reports about its deployments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostStatus {
    /// The image (by digest, `repo@sha256:…`) the running system booted; `None` when it
    /// booted something that is not a container image.
    pub booted: Option<String>,
    /// The image deployed for the next boot, if one is staged.
    pub staged: Option<String>,
    /// The rollback deployment's image, if there is one.
    pub rollback: Option<String>,
    /// Images pulled into the host's store but not deployed (what `pull` left).
    pub pulled: Vec<String>,
    /// The kernel arguments of the booted deployment.
    pub kargs: Vec<String>,
    /// This boot's id (`/proc/sys/kernel/random/boot_id`), to tell a reboot happened.
    pub boot_id: String,
    /// For an image above that was asked for by another reference with a digest — a
    /// multi-architecture index, whose host reports the platform manifest it pulled
    /// (bootc's `imageDigest`, rpm-ostree's `container-image-reference-digest`) — that
    /// reference: reported image → `repo@sha256:<index>`.
    pub references: std::collections::BTreeMap<String, String>,
    /// How many soft reboots this boot has had (systemd's `SoftRebootsCount`: a soft reboot
    /// keeps the kernel, so the boot id stays); 0 where unknown.
    pub soft_reboots: u64,
    /// Where the booted deployment is checked out (bootc's `ostree`, rpm-ostree's `osname`,
    /// `checksum`, `serial`), for a live apply.
    pub booted_deployment: Option<live::Deployment>,
    /// Where the staged deployment (the next boot) is checked out.
    pub staged_deployment: Option<live::Deployment>,
    /// The rollback deployment is the next boot (bootc's `rollbackQueued`, after `bootc
    /// rollback`; rpm-ostree reports a rolled-back deployment as the pending one, `staged`).
    pub rollback_queued: bool,
}

/// A `systemctl` operation a configuration change's policy asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Systemctl {
    /// `systemctl reload UNIT`.
    Reload(String),
    /// `systemctl restart UNIT`.
    Restart(String),
    /// `systemctl daemon-reload`.
    DaemonReload,
}

impl Systemctl {
    /// Its arguments.
    pub fn args(&self) -> Vec<String> {
        match self {
            Systemctl::Reload(u) => vec!["reload".into(), u.clone()],
            Systemctl::Restart(u) => vec!["restart".into(), u.clone()],
            Systemctl::DaemonReload => vec!["daemon-reload".into()],
        }
    }
}

impl HostStatus {
    /// Whether `reported` (one of the images above) is `image`: the same, or deployed from
    /// the reference `image` (an index whose manifest the host reports).
    pub fn is(&self, reported: Option<&str>, image: &str) -> bool {
        reported.is_some_and(|r| r == image || self.references.get(r).is_some_and(|i| i == image))
    }

    /// Whether `image` is among the pulled images ([`HostStatus::is`]).
    pub fn has_pulled(&self, image: &str) -> bool {
        self.pulled.iter().any(|p| self.is(Some(p), image))
    }

    /// Whether the host holds `image` already: booted, staged or pulled (a `pull` has
    /// nothing to do).
    pub fn holds(&self, image: &str) -> bool {
        self.is(self.booted.as_deref(), image)
            || self.is(self.staged.as_deref(), image)
            || self.has_pulled(image)
    }

    /// Whether `image` boots next: staged, or booted with nothing staged (a `deploy` has
    /// nothing to do).
    pub fn boots_next(&self, image: &str) -> bool {
        if self.rollback_queued && self.staged.is_none() {
            return self.is(self.rollback.as_deref(), image);
        }
        self.is(self.staged.as_deref(), image)
            || (self.is(self.booted.as_deref(), image) && self.staged.is_none())
    }
}

/// The one rule of [`Host::rollback`] for the tools that toggle: nothing when `to` boots
/// next; refused unless the rollback deployment is `to`; else `run` (the tool's rollback),
/// after which `to` must boot next.
pub(crate) fn rollback_with(
    tool: &str,
    to: &str,
    status: impl Fn() -> Result<HostStatus, HostError>,
    run: impl FnOnce() -> Result<(), HostError>,
) -> Result<(), HostError> {
    let before = status()?;
    if before.boots_next(to) {
        return Ok(());
    }
    if !before.is(before.rollback.as_deref(), to) {
        return Err(HostError::Unsupported {
            tool: tool.into(),
            operation: format!("roll back to {to}"),
            reason: format!(
                "the rollback deployment is {}",
                before.rollback.as_deref().unwrap_or("absent")
            ),
        });
    }
    run()?;
    let after = status()?;
    if after.boots_next(to) {
        Ok(())
    } else {
        Err(HostError::Output {
            tool: tool.into(),
            path: "$".into(),
            message: format!(
                "after the rollback the next boot is not {to} (staged {:?}, rollback {:?})",
                after.staged, after.rollback
            ),
        })
    }
}

/// Operations on the node's operating system.
pub trait Host: Send + Sync {
    /// Which tool drives the host.
    fn kind(&self) -> HostKind;
    /// The host's deployments and boot id.
    fn status(&self) -> Result<HostStatus, HostError>;
    /// Pull `image` (by digest) into the host's store without deploying it, using the pull
    /// secret at `auth` (a `config.json`-style file) if given. Idempotent.
    fn pull(&self, image: &str, auth: Option<&std::path::Path>) -> Result<(), HostError>;
    /// Make `image` the next boot, keeping the booted deployment as the rollback. Idempotent.
    fn deploy(&self, image: &str, auth: Option<&std::path::Path>) -> Result<(), HostError>;
    /// Put back what the last pull secret write replaced in the tool's auth file and drop
    /// the Secret's registries (the update that needed them is done). Idempotent.
    fn release_pull_secret(&self) -> Result<(), HostError>;
    /// Replace the next boot's kernel arguments `remove` with `add`.
    fn kargs(&self, add: &[String], remove: &[String]) -> Result<(), HostError>;
    /// Reboot the host.
    fn reboot(&self) -> Result<(), HostError>;
    /// Reboot userspace into the staged deployment, keeping the kernel (`systemd
    /// soft-reboot`); where the host cannot, a reboot. The boot id stays;
    /// [`HostStatus::soft_reboots`] counts it.
    fn soft_reboot(&self) -> Result<(), HostError>;
    /// Apply the staged image's configuration (`/etc`, `/var`) to the running system
    /// ([`live::apply`]); refused when the staged image differs in more than that.
    fn apply_live(&self) -> Result<live::Applied, HostError>;
    /// Make what live applies of this boot wrote the next boot's image's again (the staged
    /// one, else the booted one: [`live::sync_recorded`]) — before a reboot into another
    /// image, or when a live change is undone.
    fn sync_live(&self) -> Result<live::Applied, HostError>;
    /// Run one `systemctl` operation on the host.
    fn systemctl(&self, op: &Systemctl) -> Result<(), HostError>;
    /// Write `dockerconfigjson` where the host tool reads pull credentials; returns the path.
    fn write_pull_secret(&self, dockerconfigjson: &[u8]) -> Result<std::path::PathBuf, HostError>;
    /// Write `keys` as `user`'s authorized SSH keys (the rendered config's `passwd` section).
    fn write_ssh_keys(&self, user: &str, keys: &[String]) -> Result<(), HostError>;
    /// Make the rollback deployment — which must be `to` — the next boot, from the
    /// deployment the host keeps (no pull): `bootc rollback`, `rpm-ostree rollback`.
    /// Nothing when `to` boots next already: both tools toggle, so a second call would put
    /// the booted deployment back on top. Refused when the rollback deployment is not `to`.
    fn rollback(&self, to: &str) -> Result<(), HostError>;
    /// The text of the boot guard's rollback record, if the guard left one
    /// (`machineos_boot_guard::RECORD_PATH` below the host root).
    fn boot_guard_record(&self) -> Result<Option<String>, HostError>;
    /// Remove the boot guard's rollback record, which re-arms the guard. Idempotent.
    fn clear_boot_guard_record(&self) -> Result<(), HostError>;
}
