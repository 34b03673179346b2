//! An in-memory host for the agent's tests and the simulated cluster: deployments, a boot
//! id, and failure injection. Clones share one state, so a test (or the simulated cluster's
//! "power supply") keeps a handle while the agent owns another; [`FakeHost::boot`] is the
//! reboot itself — the harness calls it after it stopped the agent, then starts a new one.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Host, HostError, HostKind, HostStatus};

/// The fake host's state.
#[derive(Debug, Clone, Default)]
pub struct FakeState {
    /// What the host reports.
    pub status: HostStatus,
    /// Reboots requested and not yet performed by [`FakeHost::boot`].
    pub reboot_requested: bool,
    /// Every reboot performed.
    pub boots: u32,
    /// Calls, in order (`pull IMG`, `deploy IMG`, `kargs`, `reboot`, `pull-secret`, `ssh USER`).
    pub calls: Vec<String>,
    /// The boot guard's rollback record, as the guard would have left it.
    pub boot_guard_record: Option<String>,
    /// The next `n` pulls fail transiently.
    pub fail_pulls: u32,
    /// `deploy` fails with this message (permanently) while set.
    pub fail_deploy: Option<String>,
    /// The next boot comes up on this image instead of the staged one.
    pub boot_into: Option<String>,
    /// The pull secret last written.
    pub pull_secret: Option<Vec<u8>>,
    /// How many times the pull secret was released ([`Host::release_pull_secret`]); the
    /// last one written stays in `pull_secret` for tests to read.
    pub pull_secret_releases: usize,
    /// SSH keys last written, per user.
    pub ssh_keys: std::collections::BTreeMap<String, Vec<String>>,
    /// A soft reboot requested and not yet performed by [`FakeHost::soft_boot`].
    pub soft_reboot_requested: bool,
    /// The image whose configuration the running system has: the booted one, or the
    /// staged one after a live apply ([`Host::apply_live`]).
    pub live_config: Option<String>,
    /// `apply_live` refuses with this message (the staged image differs in more than
    /// configuration) while set.
    pub refuse_live: Option<String>,
    /// The next `n` live applies fail transiently (an I/O error).
    pub fail_live: u32,
    /// `systemctl` operations run, in order (`restart chronyd.service`, `daemon-reload`).
    pub systemctl: Vec<String>,
}

/// A fake host; clones share state.
#[derive(Debug, Clone, Default)]
pub struct FakeHost {
    state: Arc<Mutex<FakeState>>,
}

impl FakeHost {
    /// A host booted into `image` (by digest), boot id `boot-0`.
    pub fn booted(image: &str) -> FakeHost {
        let h = FakeHost::default();
        {
            let mut s = h.lock();
            s.status.booted = Some(image.to_owned());
            s.status.boot_id = "boot-0".into();
            s.live_config = Some(image.to_owned());
        }
        h
    }

    /// The shared state (for assertions and failure injection).
    pub fn lock(&self) -> MutexGuard<'_, FakeState> {
        // A panic while holding the lock poisons it; the state is still what was written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Perform a reboot: the staged deployment (or [`FakeState::boot_into`]) becomes the
    /// booted one, the old booted one the rollback, and the boot id changes.
    pub fn boot(&self) {
        let mut s = self.lock();
        s.boots += 1;
        s.reboot_requested = false;
        let queued = std::mem::take(&mut s.status.rollback_queued);
        let next = s.boot_into.take().or_else(|| s.status.staged.take());
        let next = match next {
            None if queued => s.status.rollback.clone(),
            next => next,
        };
        if let Some(next) = next {
            s.status.rollback = s.status.booted.take();
            s.status.booted = Some(next);
        }
        s.status.staged = None;
        s.status.boot_id = format!("boot-{}", s.boots);
        s.status.soft_reboots = 0;
        s.live_config = s.status.booted.clone();
    }

    /// Perform a soft reboot: as [`FakeHost::boot`], but the kernel stays — the boot id is
    /// kept and the soft reboot count goes up (systemd's `SoftRebootsCount`).
    pub fn soft_boot(&self) {
        let mut s = self.lock();
        s.soft_reboot_requested = false;
        if let Some(next) = s.status.staged.take() {
            s.status.rollback = s.status.booted.take();
            s.status.booted = Some(next);
        }
        s.status.soft_reboots += 1;
        s.live_config = s.status.booted.clone();
    }
}

impl Host for FakeHost {
    fn kind(&self) -> HostKind {
        HostKind::Fake
    }

    fn status(&self) -> Result<HostStatus, HostError> {
        Ok(self.lock().status.clone())
    }

    fn pull(&self, image: &str, _auth: Option<&std::path::Path>) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push(format!("pull {image}"));
        if s.fail_pulls > 0 {
            s.fail_pulls -= 1;
            return Err(HostError::Tool {
                tool: "fake".into(),
                args: format!("pull {image}"),
                status: "exit status: 1".into(),
                stderr: "dial tcp: lookup registry: temporary failure in name resolution".into(),
                transient: true,
            });
        }
        if !s.status.pulled.iter().any(|p| p == image) {
            s.status.pulled.push(image.to_owned());
        }
        Ok(())
    }

    fn deploy(&self, image: &str, _auth: Option<&std::path::Path>) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push(format!("deploy {image}"));
        if let Some(m) = &s.fail_deploy {
            return Err(HostError::Tool {
                tool: "fake".into(),
                args: format!("deploy {image}"),
                status: "exit status: 1".into(),
                stderr: m.clone(),
                transient: false,
            });
        }
        s.status.staged = Some(image.to_owned());
        Ok(())
    }

    fn kargs(&self, add: &[String], remove: &[String]) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push(format!("kargs +{add:?} -{remove:?}"));
        s.status.kargs.retain(|k| !remove.contains(k));
        s.status.kargs.extend(add.iter().cloned());
        Ok(())
    }

    fn reboot(&self) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push("reboot".into());
        s.reboot_requested = true;
        Ok(())
    }

    fn soft_reboot(&self) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push("soft-reboot".into());
        s.soft_reboot_requested = true;
        Ok(())
    }

    fn apply_live(&self) -> Result<crate::live::Applied, HostError> {
        let mut s = self.lock();
        let staged = s.status.staged.clone();
        s.calls
            .push(format!("apply-live {}", staged.as_deref().unwrap_or("-")));
        if s.fail_live > 0 {
            s.fail_live -= 1;
            return Err(HostError::Io {
                path: "/etc/chrony.conf".into(),
                source: std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted"),
            });
        }
        if let Some(m) = &s.refuse_live {
            return Err(HostError::Unsupported {
                tool: "live apply".into(),
                operation: "apply the staged image's configuration to the running system".into(),
                reason: m.clone(),
            });
        }
        let Some(staged) = staged else {
            return Err(HostError::Unsupported {
                tool: "fake".into(),
                operation: "apply the staged image's configuration live".into(),
                reason: "nothing is staged".into(),
            });
        };
        s.live_config = Some(staged);
        Ok(crate::live::Applied::default())
    }

    fn sync_live(&self) -> Result<crate::live::Applied, HostError> {
        let mut s = self.lock();
        s.calls.push("sync-live".into());
        // The running configuration becomes the next boot's image's.
        s.live_config = s.status.staged.clone().or_else(|| s.status.booted.clone());
        Ok(crate::live::Applied::default())
    }

    fn systemctl(&self, op: &crate::Systemctl) -> Result<(), HostError> {
        let mut s = self.lock();
        let line = op.args().join(" ");
        s.calls.push(format!("systemctl {line}"));
        s.systemctl.push(line);
        Ok(())
    }

    fn write_pull_secret(&self, dockerconfigjson: &[u8]) -> Result<std::path::PathBuf, HostError> {
        let mut s = self.lock();
        s.calls.push("pull-secret".into());
        s.pull_secret = Some(dockerconfigjson.to_vec());
        Ok(std::path::PathBuf::from("/run/ostree/auth.json"))
    }

    fn release_pull_secret(&self) -> Result<(), HostError> {
        self.lock().pull_secret_releases += 1;
        Ok(())
    }

    fn write_ssh_keys(&self, user: &str, keys: &[String]) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push(format!("ssh {user}"));
        s.ssh_keys.insert(user.to_owned(), keys.to_vec());
        Ok(())
    }

    /// As the real backends' [`Host::rollback`] (`rollback_with`): nothing when `to` boots
    /// next already (where `bootc rollback` itself would toggle back — every call is in
    /// `calls`, so a test sees a second one), else as `bootc rollback`: the staged
    /// deployment is dropped and the rollback one queued.
    fn rollback(&self, to: &str) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push(format!("rollback {to}"));
        if s.status.boots_next(to) {
            return Ok(());
        }
        if !s.status.is(s.status.rollback.as_deref(), to) {
            return Err(HostError::Unsupported {
                tool: "fake".into(),
                operation: format!("roll back to {to}"),
                reason: format!(
                    "the rollback deployment is {}",
                    s.status.rollback.as_deref().unwrap_or("absent")
                ),
            });
        }
        s.status.staged = None;
        s.status.rollback_queued = true;
        Ok(())
    }

    fn boot_guard_record(&self) -> Result<Option<String>, HostError> {
        Ok(self.lock().boot_guard_record.clone())
    }

    fn clear_boot_guard_record(&self) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls.push("clear boot guard record".into());
        s.boot_guard_record = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_switches_to_the_staged_image_and_keeps_the_rollback() {
        let h = FakeHost::booted("r/os@sha256:aa");
        h.pull("r/os@sha256:bb", None).unwrap();
        assert_eq!(
            h.status().unwrap().booted.as_deref(),
            Some("r/os@sha256:aa")
        );
        h.deploy("r/os@sha256:bb", None).unwrap();
        h.reboot().unwrap();
        assert!(h.lock().reboot_requested);
        h.boot();
        let s = h.status().unwrap();
        assert_eq!(s.booted.as_deref(), Some("r/os@sha256:bb"));
        assert_eq!(s.rollback.as_deref(), Some("r/os@sha256:aa"));
        assert_eq!(s.boot_id, "boot-1");
    }

    #[test]
    fn a_rollback_queues_the_previous_deployment_once() {
        let h = FakeHost::booted("r/os@sha256:aa");
        assert!(
            h.rollback("r/os@sha256:aa").is_ok(),
            "booted, nothing staged: next already"
        );
        h.deploy("r/os@sha256:bb", None).unwrap();
        h.boot();
        assert!(
            h.rollback("r/os@sha256:cc").is_err(),
            "not the rollback deployment"
        );
        h.rollback("r/os@sha256:aa").unwrap();
        h.rollback("r/os@sha256:aa").unwrap();
        assert!(h.status().unwrap().boots_next("r/os@sha256:aa"));
        h.boot();
        let s = h.status().unwrap();
        assert_eq!(s.booted.as_deref(), Some("r/os@sha256:aa"));
        assert_eq!(s.rollback.as_deref(), Some("r/os@sha256:bb"));
        assert!(!s.rollback_queued);
    }
}
