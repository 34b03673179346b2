//! A tiny deterministic pseudo-random generator, so that the same seed always yields the same
//! tree and the same bytes on every machine and Rust version.
//!
//! It is SplitMix64 (a 64-bit counter passed through a fixed mixing function). It is chosen
//! for reproducibility and speed only: it is NOT cryptographically secure and must never be
//! used for secrets. Only integer arithmetic is used anywhere in generation (no floats, no
//! `ln`/`exp` from the platform's libm), so results cannot drift between platforms.

/// The SplitMix64 increment (the golden-ratio constant 2^64 / φ).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 output function: a bijective mix of all 64 input bits.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a over `bytes`, used to turn names (paths, labels) into seeds.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A seed derived from `seed` and a label, independent of every other label's stream.
pub(crate) fn derive(seed: u64, label: &str) -> u64 {
    mix64(seed ^ mix64(fnv1a(label.as_bytes())))
}

/// SplitMix64 state.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator starting from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A generator for the stream named `label` under `seed`.
    pub(crate) fn labelled(seed: u64, label: &str) -> Rng {
        Rng::new(derive(seed, label))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }

    /// A number in `0..n` (0 when `n` is 0), by multiply-high (bias below 2^-32 for the small
    /// `n` used here, irrelevant for test data).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub(crate) fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A roughly log-uniform number in `lo..hi` (integers only): a random power-of-two octave
    /// above `lo`, then a random point inside it. Gives the heavy-tailed spread of real file
    /// sizes.
    pub(crate) fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let lo = lo.max(1);
        let octaves = u64::from((hi / lo).max(1).ilog2());
        let base = lo << self.below(octaves + 1);
        (base + self.below(base)).min(hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // SplitMix64 seeded with 0: the published first outputs of the algorithm.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(7);
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            let v = r.range(3, 5);
            assert!((3..=5).contains(&v));
            let l = r.log_uniform(100, 10_000);
            assert!((100..=10_000).contains(&l), "{l}");
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn labels_are_independent_and_stable() {
        assert_ne!(derive(1, "a"), derive(1, "b"));
        assert_ne!(derive(1, "a"), derive(2, "a"));
        assert_eq!(derive(1, "a"), derive(1, "a"));
    }
}
