//! Golden files: text compared with a file kept in the repository, or the file rewritten
//! when the test runs with `MACHINEOS_UPDATE_SNAPSHOTS=1` (then review the diff and commit
//! it). One routine for every crate's snapshot tests.

use std::path::Path;

/// The variable that rewrites golden files instead of comparing with them.
pub const UPDATE_VAR: &str = "MACHINEOS_UPDATE_SNAPSHOTS";

/// Panics unless `got` equals the file at `path` (naming the file, the first differing
/// line of each, and how to update it); with `MACHINEOS_UPDATE_SNAPSHOTS=1`, writes `got`
/// there instead.
pub fn assert_golden(path: &Path, got: &str) {
    if std::env::var_os(UPDATE_VAR).is_some_and(|v| v == "1") {
        if let Err(e) = std::fs::write(path, got) {
            panic!("writing {}: {e}", path.display());
        }
        return;
    }
    let want = match std::fs::read_to_string(path) {
        Ok(w) => w,
        Err(e) => panic!(
            "{}: {e} (run with {UPDATE_VAR}=1 to create it)",
            path.display()
        ),
    };
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        panic!(
            "{} differs first at line {}:\n  golden: {:?}\n  now:    {:?}\nrerun with \
             {UPDATE_VAR}=1 if the change is intended",
            path.display(),
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line),
        );
    }
}
