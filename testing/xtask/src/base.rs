//! The benchmark's base images: machineos-synth's `bench-1g` and `bench-100m` profiles, plus
//! what buildah's path needs to run ignition-apply inside the image (the host's Debian
//! ignition binary, bash for `RUN`'s `/bin/sh -c`, `rm` for the commit clean-up, `systemctl`
//! which ignition-apply runs to disable units, and every shared library and the dynamic
//! loader they link against).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use machineos_image::{Layout, Platform};
use machineos_synth::{ExtraFile, Generated, Profile};

/// Where Debian's `ignition` package installs the multi-call binary.
pub const DEBIAN_IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// The tag of the generated images in their layouts.
pub const TAG: &str = "1";

/// The image's path of a host file: the synthetic tree has `/bin`, `/sbin`, `/lib` and
/// `/lib64` as symlinks into `/usr` (as Fedora CoreOS), and extra files may not lie below a
/// symlink, so they go to the real directory, which the loader still finds through the link.
fn image_path(host: &str) -> String {
    for top in ["/bin/", "/sbin/", "/lib/", "/lib64/"] {
        if host.starts_with(top) {
            return format!("/usr{host}");
        }
    }
    host.to_owned()
}

/// The shared libraries and the loader `ldd` lists for `binary` (none for a static one).
fn shared_libraries(binary: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .with_context(|| format!("running `ldd {}`", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        bail!(
            "`ldd {}` failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        // "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "\t/lib64/ld-linux-x86-64.so.2 (0x…)"
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(p.to_owned());
        }
    }
    Ok(libs)
}

/// The files that make `ignition-apply` runnable in the image under buildah's chroot
/// isolation: `(host path, image path)` pairs.
pub fn runtime_files(ignition: &Path) -> Result<Vec<(PathBuf, String)>> {
    // ignition picks its applet by the basename of argv[0], so installing the binary as
    // `ignition-apply` makes a plain `ignition-apply …` work (no `exec -a` needed).
    let programs = [
        (ignition.to_path_buf(), "/usr/bin/ignition-apply".to_owned()),
        (PathBuf::from("/bin/bash"), "/usr/bin/bash".to_owned()),
        (PathBuf::from("/bin/rm"), "/usr/bin/rm".to_owned()),
        // ignition-apply runs `systemctl --root / disable UNIT` for `enabled: false`.
        (
            PathBuf::from("/usr/bin/systemctl"),
            "/usr/bin/systemctl".to_owned(),
        ),
    ];
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for (host, dest) in programs {
        if !host.is_file() {
            bail!(
                "{} is missing (install Debian's `ignition`, `bash` and `coreutils`)",
                host.display()
            );
        }
        for lib in shared_libraries(&host)? {
            let dest = image_path(&lib);
            if !out.iter().any(|(_, d)| *d == dest) {
                out.push((PathBuf::from(&lib), dest));
            }
        }
        out.push((host, dest));
    }
    Ok(out)
}

/// Reads the runtime files into synth's extra files (mode from the host file).
fn extra_files(runtime: &[(PathBuf, String)]) -> Result<Vec<ExtraFile>> {
    use std::os::unix::fs::PermissionsExt;
    runtime
        .iter()
        .map(|(host, dest)| {
            let contents =
                std::fs::read(host).with_context(|| format!("reading {}", host.display()))?;
            let mode = std::fs::metadata(host)
                .with_context(|| format!("inspecting {}", host.display()))?
                .permissions()
                .mode()
                & 0o7777;
            Ok(ExtraFile {
                path: dest.clone(),
                contents,
                mode,
            })
        })
        .collect()
}

/// Generates the `profile` image with the runtime files into a fresh OCI layout at `dir`,
/// tagged [`TAG`].
pub fn generate(profile: Profile, dir: &Path, runtime: &[(PathBuf, String)]) -> Result<Generated> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let mut spec = profile.spec(Platform::host());
    spec.extra_files = extra_files(runtime)?;
    let layout = Layout::create(dir).with_context(|| format!("creating {}", dir.display()))?;
    let g = machineos_synth::generate(&layout, &spec)
        .with_context(|| format!("generating the {} base", profile.name()))?;
    layout
        .set_tag(TAG, &g.manifest)
        .with_context(|| format!("tagging {}", dir.display()))?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_map_below_usr() {
        assert_eq!(
            image_path("/lib64/ld-linux-x86-64.so.2"),
            "/usr/lib64/ld-linux-x86-64.so.2"
        );
        assert_eq!(
            image_path("/lib/x86_64-linux-gnu/libc.so.6"),
            "/usr/lib/x86_64-linux-gnu/libc.so.6"
        );
        assert_eq!(image_path("/usr/lib/x/y.so"), "/usr/lib/x/y.so");
    }

    #[test]
    fn bash_needs_libc_and_a_loader() {
        let files = runtime_files_for_bash();
        assert!(files.iter().any(|f| f.contains("libc.so")), "{files:?}");
        assert!(files.iter().any(|f| f.contains("ld-")), "{files:?}");
    }

    fn runtime_files_for_bash() -> Vec<String> {
        shared_libraries(Path::new("/bin/bash")).unwrap()
    }
}
