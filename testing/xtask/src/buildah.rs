//! The buildah builds: case (c), what the MCO's on-cluster build does, with buildah as the
//! MCO runs it (`--storage-driver vfs --isolation chroot`, from an empty container storage
//! every time), and case (d), buildah at its best (overlay storage that already holds the
//! base, `--layers=false --pull=never`). Both build the same context ([`write_context`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::measure::{Cmd, Sample, measure, run};

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

/// A storage driver configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `vfs`: every layer a full copy of the tree (what the MCO's build pod uses).
    Vfs,
    /// `overlay` with the kernel's overlayfs.
    Overlay,
    /// `overlay` with fuse-overlayfs as its mount program (where the kernel's cannot mount).
    FuseOverlay,
}

/// fuse-overlayfs, Debian package `fuse-overlayfs`.
pub const FUSE_OVERLAYFS: &str = "/usr/bin/fuse-overlayfs";

impl Driver {
    fn args(self) -> Vec<String> {
        let mut a = vec!["--storage-driver".to_owned()];
        match self {
            Driver::Vfs => a.push("vfs".to_owned()),
            Driver::Overlay => a.push("overlay".to_owned()),
            Driver::FuseOverlay => a.extend([
                "overlay".to_owned(),
                "--storage-opt".to_owned(),
                format!("overlay.mount_program={FUSE_OVERLAYFS}"),
            ]),
        }
        a
    }

    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Driver::Vfs => "vfs",
            Driver::Overlay => "overlay (kernel overlayfs)",
            Driver::FuseOverlay => "overlay (fuse-overlayfs)",
        }
    }
}

/// A container storage of its own (`--root`, `--runroot`, driver).
pub struct Storage {
    /// `--root`.
    pub root: PathBuf,
    /// `--runroot`.
    pub runroot: PathBuf,
    /// The storage driver.
    pub driver: Driver,
}

impl Storage {
    /// A storage below `dir` (which must not exist yet).
    pub fn new(dir: &Path, driver: Driver) -> Result<Storage> {
        let root = dir.join("root");
        let runroot = dir.join("runroot");
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        std::fs::create_dir_all(&runroot)
            .with_context(|| format!("creating {}", runroot.display()))?;
        Ok(Storage {
            root,
            runroot,
            driver,
        })
    }

    /// buildah's global options for this storage, then `args`.
    fn args<'a>(&self, args: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut a = vec![
            "--root".to_owned(),
            self.root.display().to_string(),
            "--runroot".to_owned(),
            self.runroot.display().to_string(),
        ];
        a.extend(self.driver.args());
        a.extend(args.into_iter().map(str::to_owned));
        a
    }

    /// Runs `buildah` on this storage, untimed; returns its stdout.
    pub fn run<'a>(&self, args: impl IntoIterator<Item = &'a str>) -> Result<String> {
        let a = self.args(args);
        run("buildah", &a.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// `buildah info`'s `store.GraphStatus`, as `key: value` pairs (initialising the storage
    /// driver: for kernel overlay, containers/storage test-mounts an overlay first).
    pub fn graph_status(&self) -> Result<Vec<(String, String)>> {
        let info: Value = serde_json::from_str(&self.run(["info"])?)
            .context("parsing `buildah info`'s output")?;
        let driver = info
            .pointer("/store/GraphDriverName")
            .and_then(Value::as_str);
        let want = if self.driver == Driver::Vfs {
            "vfs"
        } else {
            "overlay"
        };
        if driver != Some(want) {
            bail!("`buildah info` reports storage driver {driver:?}, not {want}");
        }
        Ok(info
            .pointer("/store/GraphStatus")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                        (k.clone(), v)
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Pulls `image` (plain HTTP registry) into the storage, untimed.
    pub fn pull(&self, image: &str) -> Result<()> {
        self.run(["pull", "--quiet", "--tls-verify=false", image])
            .with_context(|| format!("buildah pull {image}"))?;
        Ok(())
    }

    /// Mounts `image` (already in the storage) as a working container's root and unmounts
    /// it again: the mount every `RUN` of a build needs.
    pub fn probe_mount(&self, image: &str) -> Result<()> {
        let name = "machineos-bench-probe";
        self.run(["from", "--pull=never", "--quiet", "--name", name, image])
            .context("buildah from")?;
        let mounted = self.run(["mount", name]).context("buildah mount");
        let _ = self.run(["umount", name]);
        let removed = self.run(["rm", name]).context("buildah rm");
        let point = mounted?;
        removed?;
        if point.trim().is_empty() {
            bail!("`buildah mount` printed no mount point");
        }
        Ok(())
    }

    /// Removes image `tag` (and nothing it shares with other images, such as the base's
    /// layers), untimed.
    pub fn rmi(&self, tag: &str) -> Result<()> {
        self.run(["rmi", tag])
            .with_context(|| format!("buildah rmi {tag}"))?;
        Ok(())
    }

    /// Unmounts whatever buildah still has mounted of this storage (best effort, before the
    /// storage is deleted).
    pub fn unmount_all(&self) {
        let _ = self.run(["umount", "--all"]);
    }
}

/// The two timed halves of one build.
pub struct Build {
    /// `buildah bud`: (pull the base,) COPY, RUN ignition-apply, commit.
    pub bud: Sample,
    /// `buildah push` to the registry.
    pub push: Sample,
}

/// `buildah bud` options of case (c): the MCO's build, which pulls the base.
pub const MCO_BUD: &[&str] = &["--tls-verify=false"];

/// `buildah bud` options of case (d): the base must be in the storage already, and no
/// intermediate layer is cached (there is one `RUN`; `--layers=false` is the default, made
/// explicit).
pub const BEST_BUD: &[&str] = &["--layers=false", "--pull=never"];

/// Builds `context` into `tag` with `storage` (`bud --isolation chroot` plus `bud_opts`)
/// and pushes it, timing both commands.
pub fn build(
    storage: &Storage,
    bud_opts: &[&str],
    context: &Path,
    tag: &str,
    scratch: &Path,
    log: &Path,
) -> Result<Build> {
    let containerfile = context.join("Containerfile").display().to_string();
    let context = context.display().to_string();
    let mut bud = vec!["bud", "--isolation", "chroot"];
    bud.extend(bud_opts);
    bud.extend(["-f", &containerfile, "-t", tag, &context]);
    crate::sync();
    let bud =
        measure(&Cmd::new("buildah", storage.args(bud)), scratch, log).context("buildah bud")?;
    let dest = format!("docker://{tag}");
    let push = storage.args(["push", "--tls-verify=false", tag, &dest]);
    crate::sync();
    let push = measure(&Cmd::new("buildah", push), scratch, log).context("buildah push")?;
    Ok(Build { bud, push })
}
