//! A small mutation fuzzer for machineos's parsers, run as ordinary tests (`cargo test -p
//! machineos-fuzz`) for a bounded time, so CI runs it on every change.
//!
//! Why not cargo-fuzz or AFL: both need a nightly toolchain or compiler instrumentation, and
//! this project builds with one stable toolchain. What this does instead, per target: start
//! from seed inputs (real configs, manifests, layers, cache files), apply libFuzzer-style
//! byte mutations (bit flips, interesting bytes and numbers, insertions, deletions,
//! duplications, splices, truncations), keep a mutant in the corpus when it reaches an
//! outcome not seen before (a new error message: a coarse stand-in for new coverage), and
//! check every run: no panic, an error that says something, and — with the capped allocator
//! each fuzz test binary installs — bounded memory. A failing input is written to
//! `target/fuzz-failures/` and named in the panic message, so it can be replayed with
//! [`replay`].
//!
//! Budget: `MACHINEOS_FUZZ_SECONDS` per target (default 4), `MACHINEOS_FUZZ_SEED` for
//! another sequence of mutations (default fixed).

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What one run of a target says about an input.
pub type Outcome = Result<(), String>;

/// A deterministic xorshift generator (no dependency, reproducible per seed).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.bits() % n.max(1) as u64) as usize
    }
}

/// Bytes and numbers that make parsers take their rare paths.
const INTERESTING: &[&[u8]] = &[
    b"\0",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"/",
    b"..",
    b"%",
    b"%zz",
    b"=",
    b"\n",
    b"\\u0000",
    b"-1",
    b"0",
    b"4294967296",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"1e999",
    b"null",
    b"true",
    b"&a [*a,*a,*a,*a,*a,*a,*a,*a]",
    b"sha512:",
    b"data:;base64,",
    b"gzip",
    b"../../..",
];

/// One mutation of `input`, drawing splices from `corpus`.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = v.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.bits() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let s = INTERESTING[rng.below(INTERESTING.len())];
                v.splice(i..i, s.iter().copied());
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                v.drain(i..i + n);
            }
            4 if len > 0 => {
                // Duplicate a range (grows inputs, repeats structures).
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(256));
                let chunk: Vec<u8> = v[i..i + n].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, chunk);
            }
            5 if !corpus.is_empty() => {
                // Splice a piece of another input.
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below((other.len() - i).min(512));
                    let at = rng.below(v.len() + 1);
                    v.splice(at..at, other[i..i + n].iter().copied());
                }
            }
            6 if len > 0 => v.truncate(rng.below(len)),
            7 if len > 0 => {
                // Overwrite with an interesting token.
                let s = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(len);
                let end = (i + s.len()).min(len);
                v.splice(i..end, s.iter().copied());
            }
            _ => {
                let i = rng.below(len + 1);
                v.insert(i, rng.bits() as u8);
            }
        }
        if v.len() > 1 << 20 {
            v.truncate(1 << 20);
        }
    }
    v
}

/// The per-target time budget.
pub fn budget() -> Duration {
    let secs = std::env::var("MACHINEOS_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(4.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("MACHINEOS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6d61_6368_696e_656f)
}

/// What a fuzzing session did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Inputs run.
    pub runs: u64,
    /// Distinct outcomes met (the corpus grew by one for each new one).
    pub outcomes: usize,
    /// Inputs the target accepted.
    pub accepted: u64,
}

/// Runs `target` on `seeds` and their mutants for the budget. Panics — naming the saved
/// input — when the target panics or returns an error with an empty or internal message.
pub fn fuzz(name: &str, seeds: Vec<Vec<u8>>, target: impl Fn(&[u8]) -> Outcome) -> Stats {
    assert!(!seeds.is_empty(), "{name}: no seeds");
    let mut rng = Rng::new(seed() ^ name.bytes().fold(0u64, |h, b| h.rotate_left(5) ^ b as u64));
    let mut corpus = seeds.clone();
    let mut seen = HashSet::new();
    let deadline = Instant::now() + budget();
    let mut stats = Stats {
        runs: 0,
        outcomes: 0,
        accepted: 0,
    };
    let mut queue: Vec<Vec<u8>> = seeds;
    loop {
        let input = match queue.pop() {
            Some(i) => i,
            None => {
                if Instant::now() >= deadline {
                    break;
                }
                let parent = corpus[rng.below(corpus.len())].clone();
                mutate(&mut rng, &parent, &corpus)
            }
        };
        stats.runs += 1;
        let outcome = match catch_unwind(AssertUnwindSafe(|| target(&input))) {
            Ok(o) => o,
            Err(p) => {
                let what = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                fail(name, &input, &format!("panicked: {what}"));
            }
        };
        match &outcome {
            Ok(()) => stats.accepted += 1,
            Err(msg) if msg.trim().is_empty() => fail(name, &input, "an error with no message"),
            Err(msg) if msg.contains("internal error") => {
                fail(name, &input, &format!("an internal error: {msg}"))
            }
            Err(_) => {}
        }
        let class = match &outcome {
            Ok(()) => "ok".to_string(),
            Err(m) => outcome_class(m),
        };
        if seen.insert(class) && corpus.len() < 4096 {
            corpus.push(input);
        }
    }
    stats.outcomes = seen.len();
    eprintln!(
        "fuzz {name}: {} runs, {} accepted, {} distinct outcomes",
        stats.runs, stats.accepted, stats.outcomes
    );
    stats
}

/// An error message without what varies from input to input without meaning another path
/// through the parser: digits (offsets, sizes) and quoted text (the input echoed back).
fn outcome_class(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        if c == '"' {
            quoted = !quoted;
        } else if !quoted && !c.is_ascii_digit() {
            out.push(c);
        }
        if out.len() >= 80 {
            break;
        }
    }
    out
}

fn fail(name: &str, input: &[u8], what: &str) -> ! {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}-{:016x}.bin", fingerprint(input)));
    let _ = std::fs::write(&path, input);
    panic!(
        "fuzz {name}: {what}\ninput ({} bytes) saved to {}; replay with machineos_fuzz::replay",
        input.len(),
        path.display()
    );
}

fn fingerprint(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The inputs saved for `name` under `target/fuzz-failures/` (to replay a failure).
pub fn replay(name: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-failures");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
        .filter_map(|e| std::fs::read(e.path()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_bounded() {
        let corpus = vec![b"{\"a\": [1, 2, 3]}".to_vec()];
        let run = || {
            let mut rng = Rng::new(42);
            (0..500)
                .map(|_| mutate(&mut rng, &corpus[0], &corpus))
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(a.iter().any(|m| m != &corpus[0]));
        assert!(a.iter().all(|m| m.len() <= 1 << 20));
    }

    #[test]
    #[should_panic(expected = "panicked: boom")]
    fn a_panicking_target_is_reported_with_its_input() {
        fuzz("selftest", vec![b"x".to_vec()], |i| {
            if i == b"x" {
                panic!("boom")
            }
            Ok(())
        });
    }
}
