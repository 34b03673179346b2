//! Case (c): what the MCO's on-cluster build does, with buildah as the MCO runs it
//! (`--storage-driver vfs --isolation chroot`), from an empty container storage every time.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::measure::{Cmd, Sample, measure};

/// The build context's Containerfile for base image `base`.
///
/// It is the MCO's `Containerfile.on-cluster-build-template` reduced to what shapes the
/// filesystem: the rendered MachineConfig as `currentconfig`, ignition-apply on its Ignition
/// config with `--ignore-unsupported` (`container=oci` as in a build pod), and the commit's
/// clean-up of `/tmp` and `/var/tmp` that `ostree container commit` does there. The image's
/// ignition-apply is Debian's multi-call binary installed under that name (see
/// [`crate::base`]), run by bash as `/bin/sh`.
pub fn containerfile(base: &str) -> String {
    format!(
        "FROM {base}\n\
         COPY currentconfig /etc/machine-config-daemon/currentconfig\n\
         COPY config.ign /tmp/config.ign\n\
         RUN container=oci ignition-apply --root / --ignore-unsupported /tmp/config.ign && rm -rf /tmp/* /var/tmp/*\n"
    )
}

/// Writes the build context: `Containerfile`, `currentconfig` (the rendered MachineConfig,
/// byte for byte what machineos writes there) and `config.ign`.
pub fn write_context(
    dir: &Path,
    base: &str,
    currentconfig: &[u8],
    config_ign: &[u8],
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, bytes) in [
        ("Containerfile", containerfile(base).into_bytes()),
        ("currentconfig", currentconfig.to_vec()),
        ("config.ign", config_ign.to_vec()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        // COPY keeps the source's mode: make it the 0644 the MCO's files have.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("chmod {}", path.display()))?;
    }
    Ok(())
}

/// One repetition's private container storage.
pub struct Storage {
    /// `--root`.
    pub root: PathBuf,
    /// `--runroot`.
    pub runroot: PathBuf,
}

impl Storage {
    /// A storage below `dir` (which must not exist yet).
    pub fn new(dir: &Path) -> Result<Storage> {
        let root = dir.join("root");
        let runroot = dir.join("runroot");
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        std::fs::create_dir_all(&runroot)
            .with_context(|| format!("creating {}", runroot.display()))?;
        Ok(Storage { root, runroot })
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--root".to_owned(),
            self.root.display().to_string(),
            "--runroot".to_owned(),
            self.runroot.display().to_string(),
            "--storage-driver".to_owned(),
            "vfs".to_owned(),
        ]
    }
}

/// The two timed halves of one build.
pub struct Build {
    /// `buildah bud`: pull the base, COPY, RUN ignition-apply, commit.
    pub bud: Sample,
    /// `buildah push` to the registry.
    pub push: Sample,
}

/// Builds `context` into `tag` with `storage` and pushes it, timing both commands.
pub fn build(
    storage: &Storage,
    context: &Path,
    tag: &str,
    scratch: &Path,
    log: &Path,
) -> Result<Build> {
    let mut bud = storage.args();
    bud.extend(["bud", "--isolation", "chroot", "--tls-verify=false", "-f"].map(str::to_owned));
    bud.push(context.join("Containerfile").display().to_string());
    bud.push("-t".to_owned());
    bud.push(tag.to_owned());
    bud.push(context.display().to_string());
    crate::sync();
    let bud = measure(&Cmd::new("buildah", bud), scratch, log).context("buildah bud")?;
    let mut push = storage.args();
    push.extend(["push", "--tls-verify=false"].map(str::to_owned));
    push.push(tag.to_owned());
    push.push(format!("docker://{tag}"));
    crate::sync();
    let push = measure(&Cmd::new("buildah", push), scratch, log).context("buildah push")?;
    Ok(Build { bud, push })
}
