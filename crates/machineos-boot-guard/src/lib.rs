//! The boot guard the controller bakes into every image it builds, and the record the agent
//! reads after it acted.
//!
//! Contract:
//! * [`files`] are what the image gains: the script ([`SCRIPT_PATH`], 0755), the unit
//!   ([`UNIT_PATH`]) and its enablement, a static `multi-user.target.wants` link in
//!   `/usr/lib` (as images enable units: a preset would be applied only by a first boot's
//!   `systemctl preset-all`, never on an update). The texts are `files/` of this crate; the
//!   script's header is its documentation (the unit's `Documentation=` points at it).
//! * At boot the script waits for the kubelet's health endpoint; if it has not answered
//!   `ok` within the deadline on a deployment that never passed before, it rolls back to
//!   the previous deployment (`rpm-ostree rollback`, else `bootc rollback`), writes
//!   [`RECORD_PATH`] and reboots — once: while the record exists it never rolls back again.
//!   No previous deployment (the tool refuses): nothing written, no reboot.
//! * The agent reads the record ([`Record::parse`]), reports the rollback as its own health
//!   gate's ([`Record::check`]) and removes the file, which re-arms the guard.
//!
//! Why a shell script: it runs on the host before the kubelet (so before the agent's pod
//! can), with only what every CoreOS and bootc image has (bash, curl, coreutils and the
//! update tool); a binary would have to be built per architecture into every image.

use std::collections::BTreeMap;

/// The unit's name.
pub const UNIT_NAME: &str = "machineos-boot-guard.service";
/// Where the unit lies in the image.
pub const UNIT_PATH: &str = "/usr/lib/systemd/system/machineos-boot-guard.service";
/// The link that enables it.
pub const WANTS_PATH: &str =
    "/usr/lib/systemd/system/multi-user.target.wants/machineos-boot-guard.service";
/// Where the script lies in the image.
pub const SCRIPT_PATH: &str = "/usr/libexec/machineos/boot-guard";
/// The per-node settings file (`MACHINEOS_BOOT_GUARD=off`, `…_DEADLINE`, `…_INTERVAL`,
/// `…_HEALTHZ`), read by the unit when present.
pub const ENV_PATH: &str = "/etc/machineos/boot-guard.env";
/// The guard's state directory, shared by every deployment (below `/var`).
pub const STATE_DIR: &str = "/var/lib/machineos/boot-guard";
/// The record of a rollback the guard made.
pub const RECORD_PATH: &str = "/var/lib/machineos/boot-guard/rolled-back";
/// The deployment that last passed the guard.
pub const HEALTHY_PATH: &str = "/var/lib/machineos/boot-guard/healthy";

/// The unit's text.
pub const UNIT: &str = include_str!("../files/machineos-boot-guard.service");
/// The script's text.
pub const SCRIPT: &str = include_str!("../files/boot-guard");

/// One file the guard adds to an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardFile {
    /// A regular file, root-owned.
    File {
        /// Absolute path in the image.
        path: &'static str,
        /// Permission bits.
        mode: u32,
        /// Its text.
        contents: &'static str,
    },
    /// A symbolic link.
    Symlink {
        /// Absolute path in the image.
        path: &'static str,
        /// The target, verbatim.
        target: &'static str,
    },
}

/// What an image gains: the script, the unit, the link enabling it.
pub fn files() -> [GuardFile; 3] {
    [
        GuardFile::File {
            path: SCRIPT_PATH,
            mode: 0o755,
            contents: SCRIPT,
        },
        GuardFile::File {
            path: UNIT_PATH,
            mode: 0o644,
            contents: UNIT,
        },
        GuardFile::Symlink {
            path: WANTS_PATH,
            target: "../machineos-boot-guard.service",
        },
    ]
}

/// The check the guard's rollback reports: `boot guard (kubelet healthz)`.
pub const CHECK: &str = "kubelet-healthz";

/// A rollback the guard made, as its record file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The deployment rolled back from (`CHECKSUM.SERIAL`).
    pub from: String,
    /// The tool that rolled back (`rpm-ostree` or `bootc`).
    pub tool: String,
    /// The check that failed ([`CHECK`]).
    pub check: String,
    /// What the node showed.
    pub evidence: String,
    /// When (UTC, RFC 3339), as the guard wrote it.
    pub at: String,
}

/// Why a record file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// A line without `=`.
    Line {
        /// 1-based.
        line: usize,
    },
    /// A key the guard always writes is missing.
    Missing {
        /// The key.
        key: &'static str,
    },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Line { line } => write!(f, "{RECORD_PATH}: line {line} is not KEY=VALUE"),
            RecordError::Missing { key } => write!(f, "{RECORD_PATH}: no {key}="),
        }
    }
}

impl std::error::Error for RecordError {}

impl Record {
    /// Parse the record file's text (`KEY=VALUE` lines; unknown keys ignored, so a newer
    /// guard's record reads).
    pub fn parse(text: &str) -> Result<Record, RecordError> {
        let mut kv = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or(RecordError::Line { line: i + 1 })?;
            kv.insert(k.trim(), v.to_string());
        }
        let mut take = |key: &'static str| kv.remove(key).ok_or(RecordError::Missing { key });
        Ok(Record {
            from: take("from")?,
            tool: take("tool")?,
            check: take("check")?,
            evidence: take("evidence")?,
            at: take("at").unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_as_the_script_writes_it_reads() {
        let r = Record::parse(
            "from=0123abcd.1\ntool=rpm-ostree\ncheck=kubelet-healthz\nevidence=http://127.0.0.1:10248/healthz did not answer ok within 900s (last: curl: (7) Failed to connect)\ndeadline=900\nat=2026-12-08T01:02:03Z\n",
        )
        .unwrap();
        assert_eq!(r.from, "0123abcd.1");
        assert_eq!(r.tool, "rpm-ostree");
        assert_eq!(r.check, CHECK);
        assert!(r.evidence.contains("within 900s"), "{}", r.evidence);
        assert_eq!(r.at, "2026-12-08T01:02:03Z");
    }

    #[test]
    fn a_record_missing_a_key_or_garbled_is_an_error_naming_it() {
        assert_eq!(
            Record::parse("from=x\ntool=bootc\ncheck=c\n"),
            Err(RecordError::Missing { key: "evidence" })
        );
        assert_eq!(
            Record::parse("from=x\ngarbage\n"),
            Err(RecordError::Line { line: 2 })
        );
    }

    #[test]
    fn the_files_are_the_script_the_unit_runs_and_the_link_enabling_it() {
        let [script, unit, link] = files();
        assert!(matches!(
            script,
            GuardFile::File {
                path: SCRIPT_PATH,
                mode: 0o755,
                ..
            }
        ));
        assert!(matches!(
            unit,
            GuardFile::File {
                path: UNIT_PATH,
                mode: 0o644,
                ..
            }
        ));
        assert!(UNIT.contains(&format!("ExecStart={SCRIPT_PATH}\n")));
        assert!(UNIT.contains(&format!("EnvironmentFile=-{ENV_PATH}\n")));
        assert!(SCRIPT.contains(&format!("state={STATE_DIR}\n")));
        assert!(SCRIPT.contains(&format!("check={CHECK}\"")));
        let GuardFile::Symlink { path, target } = link else {
            panic!("{link:?}")
        };
        assert_eq!(path, WANTS_PATH);
        assert!(UNIT.contains("WantedBy=multi-user.target"));
        assert_eq!(
            std::path::Path::new(path)
                .parent()
                .unwrap()
                .join(target)
                .file_name(),
            std::path::Path::new(UNIT_PATH).file_name()
        );
    }
}
