//! Pulling with the MCO's backoff (MCO `pkg/daemon/update.go`, the OCPBUGS-43406 workaround:
//! a CoreDNS restart must not fail an update).
//!
//! Contract: up to [`PULL_BACKOFF`]`.attempts` attempts; after a transient failure
//! ([`Classify::is_transient`]) sleep 10 s, then 20 s, 40 s, and 60 s for each later one
//! (doubling, capped); a permanent failure, or the last attempt's failure, is returned as
//! is. The sleep is a parameter so tests record it instead of waiting.
//!
//! Note: the MCO's own loop is `wait.ExponentialBackoff{Duration: 10s, Factor: 2, Steps: 7,
//! Cap: 60s}`, and apimachinery's `delay` sets the remaining steps to zero once the next
//! delay hits the cap, so the MCO in fact makes 4 attempts (sleeps 10, 20, 40 s). This
//! module makes the 7 attempts the MCO's parameters ask for (sleeps 10, 20, 40, 60, 60,
//! 60 s).

use std::path::Path;
use std::time::Duration;

use machineos_diagnostics::{Backoff, Classify};

use crate::{Host, HostError};

/// Attempts with a backoff between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullRetry {
    /// The wait after each failure.
    pub backoff: Backoff,
    /// Attempts in all (sleeps are one fewer).
    pub attempts: u32,
}

/// The MCO's rebase backoff: 10 s, doubling, capped at 60 s, 7 attempts.
pub const PULL_BACKOFF: PullRetry = PullRetry {
    backoff: Backoff::doubling(Duration::from_secs(10), Duration::from_secs(60)),
    attempts: 7,
};

impl PullRetry {
    /// The sleeps between attempts, in order.
    pub fn delays(&self) -> Vec<Duration> {
        self.backoff.delays(self.attempts).collect()
    }

    /// Call `op` until it succeeds, fails permanently, or the attempts run out.
    pub fn run<T>(
        &self,
        mut op: impl FnMut() -> Result<T, HostError>,
        sleep: &mut dyn FnMut(Duration),
    ) -> Result<T, HostError> {
        let mut delays = self.delays().into_iter();
        loop {
            match op() {
                Ok(v) => return Ok(v),
                Err(e) if e.is_transient() => match delays.next() {
                    Some(d) => {
                        tracing::warn!(error = %e, delay = ?d, "transient failure; retrying");
                        sleep(d);
                    }
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }
}

/// [`Host::pull`] with [`PULL_BACKOFF`].
pub fn pull_with_retry(
    host: &dyn Host,
    image: &str,
    auth: Option<&Path>,
    sleep: &mut dyn FnMut(Duration),
) -> Result<(), HostError> {
    PULL_BACKOFF.run(|| host.pull(image, auth), sleep)
}
