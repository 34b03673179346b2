//! The record of images a backend pulled without deploying them. Neither bootc's status nor
//! rpm-ostree's lists an image that is only in the host's ostree repository, so each
//! successful pull is recorded, one image per line, in a file of the runner's state
//! directory — on the host's `/run`, so it outlives an agent restart and is cleared at boot
//! (an undeployed image may be pruned then anyway) — and reported in [`HostStatus::pulled`]
//! unless the tool already reports it as staged or booted.

use std::path::{Path, PathBuf};

use crate::files;
use crate::{HostError, HostStatus};

/// One backend's record.
#[derive(Debug, Clone)]
pub struct PullRecord {
    path: PathBuf,
}

impl PullRecord {
    /// The record `name` (e.g. `bootc-pulled`) in `state_dir`.
    pub fn new(state_dir: &Path, name: &str) -> PullRecord {
        PullRecord {
            path: state_dir.join(name),
        }
    }

    /// The images recorded (none when there is no record).
    pub fn images(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Record `image` as pulled.
    pub fn add(&self, image: &str) -> Result<(), HostError> {
        let mut pulled = self.images();
        pulled.push(image.to_owned());
        let text: String = pulled.iter().map(|p| format!("{p}\n")).collect();
        files::write_atomic(&self.path, text.as_bytes(), 0o644)
    }

    /// Add the recorded images to `s.pulled`, but not one it has, stages or boots.
    pub fn report(&self, s: &mut HostStatus) {
        for p in self.images() {
            if !s.pulled.contains(&p)
                && s.staged.as_ref() != Some(&p)
                && s.booted.as_ref() != Some(&p)
            {
                s.pulled.push(p);
            }
        }
    }
}
