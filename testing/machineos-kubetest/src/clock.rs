//! The store's two sources of non-determinism, injectable so tests see fixed values: the
//! time ([`Clock`]: [`ManualClock`] for tests, [`SystemClock`] for a served store) and
//! randomness ([`Ids`]: a seeded SplitMix64 generator for `metadata.uid` and `generateName`
//! suffixes).
//!
//! Timestamps are RFC 3339 in UTC at second precision (`2024-01-02T03:04:05Z`), the form
//! `metav1.Time` serializes to.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current time, in seconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to; clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock at `secs` since the epoch.
    pub fn new(secs: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(secs)))
    }

    /// Moves the clock `secs` forward.
    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// `secs` since the epoch as RFC 3339 UTC (`1970-01-01T00:00:00Z`).
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The characters of a `generateName` suffix (apimachinery's `utilrand.String` alphabet:
/// no vowels, no easily confused characters).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Deterministic identifiers from a seed (SplitMix64).
#[derive(Debug, Clone)]
pub struct Ids {
    state: u64,
}

impl Ids {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Ids {
        Ids { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random (version 4) UUID.
    pub fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        let a = (a & !0xf000) | 0x4000; // version 4
        let b = (b & !(0xc << 60)) | (0x8 << 60); // RFC 4122 variant
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// A `generateName` suffix of `n` characters.
    pub fn suffix(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| {
                let i = (self.next() % SUFFIX_ALPHABET.len() as u64) as usize;
                char::from(SUFFIX_ALPHABET[i])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        for (secs, want) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_704_164_645, "2024-01-02T03:04:05Z"),
            (-1, "1969-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339(secs), want);
        }
    }

    #[test]
    fn ids_are_deterministic_and_well_formed() {
        let (mut a, mut b) = (Ids::new(7), Ids::new(7));
        let u = a.uuid();
        assert_eq!(u, b.uuid());
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
        let s = a.suffix(5);
        assert_eq!(s.len(), 5);
        assert!(s.bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
        assert_ne!(a.uuid(), u);
    }

    #[test]
    fn manual_clock_advances_for_all_clones() {
        let c = ManualClock::new(10);
        let d = c.clone();
        c.advance(5);
        assert_eq!(d.now(), 15);
    }
}
