//! Choosing the backend a host is driven with.
//!
//! Contract: bootc when `bootc status --format json` succeeds and reports a booted image
//! (a bootc host; on an rpm-ostree host bootc may be installed but report nothing booted, or
//! fail); else rpm-ostree when `rpm-ostree status --json` succeeds; else
//! [`HostError::NoTool`] when neither program exists. An rpm-ostree that exists but fails is
//! that failure (a real problem on the host, not an absent tool).

use std::io::ErrorKind;
use std::path::Path;

use crate::bootc::{self, Bootc};
use crate::rpm_ostree::RpmOstree;
use crate::run::Runner;
use crate::{Host, HostError};

/// The backend for this host; files are under `root`.
pub fn detect(runner: &Runner, root: &Path) -> Result<Box<dyn Host>, HostError> {
    let bootc_args = ["status", "--format", "json"].map(String::from);
    match runner.run(&runner.tools.bootc, &bootc_args) {
        Ok(out) => match bootc::parse_status(&out.stdout) {
            Ok(s) if s.booted.is_some() => {
                tracing::info!("host tool: bootc");
                return Ok(Box::new(Bootc::new(runner.clone(), root)));
            }
            Ok(_) => tracing::debug!("bootc reports no booted image"),
            Err(e) => tracing::debug!(error = %e, "bootc status unreadable"),
        },
        Err(e) => tracing::debug!(error = %e, "bootc unavailable"),
    }
    let rpm_args = ["status", "--json"].map(String::from);
    match runner.run(&runner.tools.rpm_ostree, &rpm_args) {
        Ok(_) => {
            tracing::info!("host tool: rpm-ostree");
            Ok(Box::new(RpmOstree::new(runner.clone(), root)))
        }
        Err(HostError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
            Err(HostError::NoTool)
        }
        Err(e) => Err(e),
    }
}
