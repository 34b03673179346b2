//! The `machineos` binary for tests that run it where production runs it — inside a build
//! pod the test API server's kubelet executes — from a crate whose tests Cargo gives no
//! `CARGO_BIN_EXE_machineos`.
//!
//! Which binary: `$MACHINEOS_BIN` when set; else `machineos` in the target directory the
//! running test executable was built into (`<target>/<profile>/deps/<test>` →
//! `<target>/<profile>/machineos`). `cargo test --workspace` (what `scripts/test.sh` runs)
//! builds every package's binaries before it runs any test, so that one is current; a test
//! run alone (`cargo test -p machineos-controller --test job_buildah`) needs `cargo build
//! -p machineos` first. Missing, it is an error naming both ways, never a skip.

use std::path::PathBuf;

use anyhow::{Context, bail};

/// The `machineos` binary (see the module documentation).
pub fn machineos_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("MACHINEOS_BIN") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("MACHINEOS_BIN={} is not a file", path.display());
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().context("the test executable's path")?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("the test executable is not in <target>/<profile>/deps")?;
    let path = profile_dir.join("machineos");
    if !path.is_file() {
        bail!(
            "no machineos binary at {}: run `cargo build -p machineos` (or the whole `cargo \
             test --workspace`), or set MACHINEOS_BIN",
            path.display()
        );
    }
    Ok(path)
}
