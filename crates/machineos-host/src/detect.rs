//! Choosing the backend a host is driven with, as the MCO's daemon does: rpm-ostree where
//! it is present, bootc only where it is not.
//!
//! Contract: rpm-ostree when `rpm-ostree status --json` succeeds — Fedora, CentOS Stream and
//! RHEL CoreOS, layered or not, and bootc images that carry rpm-ostree too. The MCO drives
//! these hosts with rpm-ostree (`pkg/daemon/rpm-ostree.go`; its bootc client is an
//! experiment behind a feature gate), and only rpm-ostree changes a deployment's kernel
//! arguments (`rpm-ostree kargs`), which every MachineConfig `kernelArguments` change needs:
//! bootc has no such command and would refuse them. Else bootc when `bootc status --format
//! json` succeeds and reports a booted image (a bootc-only host). Else
//! [`HostError::NoTool`] when neither program exists. An rpm-ostree that exists but fails,
//! on a host whose bootc reports nothing booted, is that failure (a real problem on the
//! host, not an absent tool).

use std::io::ErrorKind;
use std::path::Path;

use crate::bootc::{self, Bootc};
use crate::rpm_ostree::RpmOstree;
use crate::run::Runner;
use crate::{Host, HostError};

/// The backend for this host; files are under `root`.
pub fn detect(runner: &Runner, root: &Path) -> Result<Box<dyn Host>, HostError> {
    let rpm_args = ["status", "--json"].map(String::from);
    let rpm_failure = match runner.run(&runner.tools.rpm_ostree, &rpm_args) {
        Ok(_) => {
            tracing::info!("host tool: rpm-ostree");
            return Ok(Box::new(RpmOstree::new(runner.clone(), root)));
        }
        Err(HostError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => None,
        Err(e) => Some(e),
    };
    let bootc_args = ["status", "--format", "json"].map(String::from);
    match runner.run(&runner.tools.bootc, &bootc_args) {
        Ok(out) => match bootc::parse_status(&out.stdout) {
            Ok(s) if s.booted.is_some() => {
                tracing::info!("host tool: bootc (no rpm-ostree here)");
                return Ok(Box::new(Bootc::new(runner.clone(), root)));
            }
            Ok(_) => tracing::debug!("bootc reports no booted image"),
            Err(e) => tracing::debug!(error = %e, "bootc status unreadable"),
        },
        Err(e) => tracing::debug!(error = %e, "bootc unavailable"),
    }
    Err(rpm_failure.unwrap_or(HostError::NoTool))
}
