//! Running the real `ignition-apply` (Debian's ignition 2.14) on a directory, the way the
//! MCO's Containerfile does, with `--root` pointing at the copy of the base.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs the multi-call binary.
pub const DEFAULT_BIN: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// The binary to run: `$MACHINEOS_IGNITION_BIN` or the Debian path.
pub fn binary() -> PathBuf {
    std::env::var_os("MACHINEOS_IGNITION_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BIN))
}

/// The outcome of one run.
pub struct Outcome {
    pub success: bool,
    /// stdout and stderr (Ignition logs and errors go to stdout).
    pub output: String,
}

/// Run `ignition-apply --root root --ignore-unsupported config` with umask 022, in a
/// "container" (`container=oci`), killing it after `timeout`.
pub fn run(bin: &Path, root: &Path, config: &Path, timeout: Duration) -> std::io::Result<Outcome> {
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#"umask 022; exec -a ignition-apply "$1" --root "$2" --ignore-unsupported "$3" 2>&1"#)
        .arg("bash")
        .arg(bin)
        .arg(root)
        .arg(config)
        .env("container", "oci")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut output = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let success = match status {
        Some(s) => s.success(),
        None => {
            output.push_str(&format!("\n(killed after {timeout:?})"));
            false
        }
    };
    Ok(Outcome { success, output })
}

/// The error lines of an Ignition log (CRITICAL/ERROR and validation `error at` lines), or
/// the whole log when there are none.
pub fn error_summary(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("CRITICAL") || l.starts_with("ERROR") || l.contains("error at "))
        .collect();
    if lines.is_empty() {
        output.trim().to_string()
    } else {
        lines.join("\n")
    }
}
