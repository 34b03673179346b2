//! The one exponential backoff of machineos: how long to wait after the n-th consecutive
//! failure of something worth repeating (a registry request, a pull on a node, a drain, an
//! API write, a pool's reconcile).
//!
//! Contract: the wait after failure `n` (1-based) is `initial × factor^(n−1)`, never more
//! than `cap`, computed with saturating arithmetic so no count overflows; failure 0 waits
//! like failure 1. How many attempts to make, and which failures are worth repeating at all
//! ([`crate::Classify`]), is the caller's: this only says how long. Pure: no clock, no sleep.

use std::time::Duration;

/// A capped exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub initial: Duration,
    /// Each wait is the previous one times this.
    pub factor: u32,
    /// No wait is longer.
    pub cap: Duration,
}

impl Backoff {
    /// `initial`, doubling, at most `cap`.
    pub const fn doubling(initial: Duration, cap: Duration) -> Backoff {
        Backoff {
            initial,
            factor: 2,
            cap,
        }
    }

    /// The wait after the `failures`-th consecutive failure.
    pub fn delay(&self, failures: u32) -> Duration {
        let times = self.factor.saturating_pow(failures.saturating_sub(1));
        self.initial.saturating_mul(times).min(self.cap)
    }

    /// The waits between `attempts` attempts, in order (one fewer than the attempts).
    pub fn delays(&self, attempts: u32) -> impl Iterator<Item = Duration> + '_ {
        (1..attempts).map(|n| self.delay(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_initial_up_to_the_cap_and_never_overflows() {
        let b = Backoff::doubling(Duration::from_millis(250), Duration::from_secs(30));
        let ms: Vec<u128> = [0, 1, 2, 3, 7, 8, 9, 64, u32::MAX]
            .iter()
            .map(|&n| b.delay(n).as_millis())
            .collect();
        assert_eq!(
            ms,
            [250, 250, 500, 1000, 16_000, 30_000, 30_000, 30_000, 30_000]
        );
        let tripling = Backoff {
            initial: Duration::from_secs(1),
            factor: 3,
            cap: Duration::MAX,
        };
        assert_eq!(tripling.delay(3), Duration::from_secs(9));
        assert_eq!(
            tripling.delay(u32::MAX),
            Duration::from_secs(u64::from(u32::MAX))
        );
    }

    #[test]
    fn delays_are_one_fewer_than_the_attempts() {
        let b = Backoff::doubling(Duration::from_secs(10), Duration::from_secs(60));
        let s: Vec<u64> = b.delays(7).map(|d| d.as_secs()).collect();
        assert_eq!(s, [10, 20, 40, 60, 60, 60]);
        assert_eq!(b.delays(1).count(), 0);
        assert_eq!(b.delays(0).count(), 0);
    }
}
