//! Runners for the reference tools (`skopeo`, `umoci`) that tests use to cross-check what our
//! code pushed or built; failures carry the command line and the tool's stderr.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::registry::TestRegistry;

/// Transport prefixes skopeo understands; a reference without one is taken as `docker://`.
const TRANSPORTS: &[&str] = &[
    "docker://",
    "oci:",
    "oci-archive:",
    "dir:",
    "docker-archive:",
    "docker-daemon:",
    "containers-storage:",
];

/// Fails with an install hint unless `name` is an executable file on `PATH` (or, if `name`
/// contains a `/`, is itself an executable file).
pub fn require_tool(name: &str) -> Result<()> {
    if find_executable(name).is_some() {
        Ok(())
    } else {
        Err(missing_tool(name))
    }
}

fn missing_tool(name: &str) -> anyhow::Error {
    let package = match name {
        "docker-registry" | "skopeo" | "umoci" | "buildah" => name,
        _ => "the package providing it",
    };
    anyhow::anyhow!(
        "`{name}` is not installed or not on PATH; install it with `apt-get install {package}`"
    )
}

fn find_executable(name: &str) -> Option<PathBuf> {
    let is_executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        return is_executable(&path).then_some(path);
    }
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Runs `program args...`, returning stdout; on a non-zero exit the error holds the command
/// line, the exit status and stderr.
fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String> {
    require_tool(program)?;
    let shown = std::iter::once(program.to_owned())
        .chain(
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running `{shown}`"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        bail!(
            "`{shown}` failed with {}:\n{}{}",
            output.status,
            stderr.trim_end(),
            if stdout.trim().is_empty() {
                String::new()
            } else {
                format!("\nstdout:\n{}", stdout.trim_end())
            }
        );
    }
    Ok(stdout)
}

/// Runs `skopeo args...` and returns its stdout.
pub fn skopeo(args: &[&str]) -> Result<String> {
    run("skopeo", args)
}

/// Runs `umoci args...` and returns its stdout.
pub fn umoci(args: &[&str]) -> Result<String> {
    run("umoci", args)
}

/// Prefixes `docker://` unless `image` already names a transport.
fn with_transport(image: &str) -> String {
    if TRANSPORTS.iter().any(|t| image.starts_with(t)) {
        image.to_owned()
    } else {
        format!("docker://{image}")
    }
}

/// `skopeo inspect --raw`: the manifest (or index) exactly as stored, as text.
///
/// `image` is `HOST/NAME:TAG` (or `@DIGEST`), optionally with a transport prefix;
/// `docker://` is assumed. `cert_dir` is passed as `--cert-dir`, `creds` as `--creds`,
/// and `tls_verify` as `--tls-verify` (must be `false` for plain-HTTP registries).
pub fn skopeo_inspect_raw(
    image: &str,
    cert_dir: Option<&Path>,
    creds: Option<(&str, &str)>,
    tls_verify: bool,
) -> Result<String> {
    let mut args = vec!["inspect".to_owned(), "--raw".to_owned()];
    if let Some(dir) = cert_dir {
        args.push("--cert-dir".to_owned());
        args.push(dir.to_string_lossy().into_owned());
    }
    if let Some((user, password)) = creds {
        args.push("--creds".to_owned());
        args.push(format!("{user}:{password}"));
    }
    args.push(format!("--tls-verify={tls_verify}"));
    args.push(with_transport(image));
    run("skopeo", &args)
}

/// Source and destination settings for [`skopeo_copy`]. `Default` verifies TLS on both
/// sides and sets no certificates or credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    /// `--src-cert-dir`.
    pub src_cert_dir: Option<PathBuf>,
    /// `--src-creds USER:PASSWORD`.
    pub src_creds: Option<(String, String)>,
    /// `--src-tls-verify`.
    pub src_tls_verify: bool,
    /// `--dest-cert-dir`.
    pub dest_cert_dir: Option<PathBuf>,
    /// `--dest-creds USER:PASSWORD`.
    pub dest_creds: Option<(String, String)>,
    /// `--dest-tls-verify`.
    pub dest_tls_verify: bool,
    /// Further `skopeo copy` arguments, placed before the image references
    /// (e.g. `--all`, `--format=oci`, `--preserve-digests`).
    pub extra_args: Vec<String>,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            src_cert_dir: None,
            src_creds: None,
            src_tls_verify: true,
            dest_cert_dir: None,
            dest_creds: None,
            dest_tls_verify: true,
            extra_args: Vec::new(),
        }
    }
}

impl CopyOptions {
    /// Defaults: verify TLS, no certificates, no credentials.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads from `registry`: its CA, its credentials, and no TLS verification when it is
    /// plain HTTP.
    pub fn src_registry(mut self, registry: &TestRegistry) -> Self {
        self.src_cert_dir = registry.cert_dir().map(Path::to_path_buf);
        self.src_creds = registry
            .credentials()
            .map(|(u, p)| (u.to_owned(), p.to_owned()));
        self.src_tls_verify = registry.is_tls();
        self
    }

    /// Writes to `registry`: its CA, its credentials, and no TLS verification when it is
    /// plain HTTP.
    pub fn dest_registry(mut self, registry: &TestRegistry) -> Self {
        self.dest_cert_dir = registry.cert_dir().map(Path::to_path_buf);
        self.dest_creds = registry
            .credentials()
            .map(|(u, p)| (u.to_owned(), p.to_owned()));
        self.dest_tls_verify = registry.is_tls();
        self
    }

    /// Sets `--src-tls-verify` (use `false` for a plain-HTTP source such as a `FaultProxy`).
    pub fn src_tls_verify(mut self, verify: bool) -> Self {
        self.src_tls_verify = verify;
        self
    }

    /// Sets `--dest-tls-verify` (use `false` for a plain-HTTP destination such as a
    /// `FaultProxy`).
    pub fn dest_tls_verify(mut self, verify: bool) -> Self {
        self.dest_tls_verify = verify;
        self
    }

    /// Appends one extra `skopeo copy` argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (side, cert_dir, creds, verify) in [
            (
                "src",
                &self.src_cert_dir,
                &self.src_creds,
                self.src_tls_verify,
            ),
            (
                "dest",
                &self.dest_cert_dir,
                &self.dest_creds,
                self.dest_tls_verify,
            ),
        ] {
            if let Some(dir) = cert_dir {
                args.push(format!("--{side}-cert-dir"));
                args.push(dir.to_string_lossy().into_owned());
            }
            if let Some((user, password)) = creds {
                args.push(format!("--{side}-creds"));
                args.push(format!("{user}:{password}"));
            }
            args.push(format!("--{side}-tls-verify={verify}"));
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// `skopeo --insecure-policy copy --quiet OPTIONS SRC DEST`.
///
/// `src` and `dest` take a transport prefix (`oci:DIR:TAG`, `docker://HOST/NAME:TAG`, ...);
/// a reference without one is taken as `docker://`.
pub fn skopeo_copy(src: &str, dest: &str, opts: &CopyOptions) -> Result<()> {
    let mut args = vec![
        "--insecure-policy".to_owned(),
        "copy".to_owned(),
        "--quiet".to_owned(),
    ];
    args.extend(opts.to_args());
    args.push(with_transport(src));
    args.push(with_transport(dest));
    run("skopeo", &args).map(drop)
}

/// `umoci unpack --image LAYOUT:TAG DEST` (with `--rootless` when not running as root).
/// The root filesystem ends up in `DEST/rootfs`; `DEST` must not exist yet.
pub fn umoci_unpack(layout_dir: &Path, tag: &str, dest: &Path) -> Result<()> {
    let mut args = vec!["unpack".to_owned()];
    if !running_as_root() {
        args.push("--rootless".to_owned());
    }
    args.push("--image".to_owned());
    args.push(format!("{}:{tag}", layout_dir.to_string_lossy()));
    args.push(dest.to_string_lossy().into_owned());
    run("umoci", &args).map(drop)
}

/// An image unpacked by buildah into its own throwaway containers/storage (vfs driver), the
/// way podman, CRI-O and the MCO's build pod unpack images: unlike umoci, containers/storage
/// applies a hard-link member's header to the shared inode. The root filesystem is at
/// [`BuildahRoot::path`] until this is dropped (the container and the storage go with it).
#[derive(Debug)]
pub struct BuildahRoot {
    /// Storage, run root and a link to the layout (buildah names the image after its path,
    /// which must be lower case, so this is not a `TempDir`).
    storage: PathBuf,
    container: String,
    path: PathBuf,
}

impl BuildahRoot {
    /// The mounted root filesystem.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn args(storage: &Path, rest: &[&str]) -> Vec<String> {
        let mut args = vec![
            "--root".to_owned(),
            storage.join("root").to_string_lossy().into_owned(),
            "--runroot".to_owned(),
            storage.join("run").to_string_lossy().into_owned(),
            "--storage-driver".to_owned(),
            "vfs".to_owned(),
        ];
        args.extend(rest.iter().map(|s| s.to_string()));
        args
    }
}

impl Drop for BuildahRoot {
    fn drop(&mut self) {
        let _ = run(
            "buildah",
            &Self::args(&self.storage, &["rm", &self.container]),
        );
        let _ = run(
            "buildah",
            &Self::args(&self.storage, &["rmi", "--all", "--force"]),
        );
        let _ = std::fs::remove_dir_all(&self.storage);
    }
}

/// `buildah from oci:LAYOUT:TAG` then `buildah mount` (as root), in a fresh storage.
pub fn buildah_mount(layout_dir: &Path, tag: &str) -> Result<BuildahRoot> {
    require_tool("buildah")?;
    if !running_as_root() {
        bail!("buildah with the vfs driver needs root here");
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let storage = std::env::temp_dir().join(format!(
        "machineos-buildah-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&storage).context("creating buildah's storage directory")?;
    let mut root = BuildahRoot {
        storage,
        container: String::new(),
        path: PathBuf::new(),
    };
    let layout = root.storage.join("layout");
    std::os::unix::fs::symlink(std::path::absolute(layout_dir)?, &layout)?;
    let image = format!("oci:{}:{tag}", layout.to_string_lossy());
    root.container = run(
        "buildah",
        &BuildahRoot::args(&root.storage, &["from", "--quiet", &image]),
    )?
    .trim()
    .to_owned();
    root.path = run(
        "buildah",
        &BuildahRoot::args(&root.storage, &["mount", &root.container]),
    )?
    .trim()
    .into();
    Ok(root)
}

/// Whether the effective user is root (the owner of `/proc/self` is the effective uid).
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_defaults_to_docker() {
        assert_eq!(
            with_transport("127.0.0.1:5000/a:b"),
            "docker://127.0.0.1:5000/a:b"
        );
        assert_eq!(with_transport("docker://x/y"), "docker://x/y");
        assert_eq!(with_transport("oci:/tmp/l:t"), "oci:/tmp/l:t");
    }

    #[test]
    fn copy_options_render_flags() {
        let opts = CopyOptions {
            src_cert_dir: Some(PathBuf::from("/c")),
            dest_creds: Some(("u".into(), "p".into())),
            dest_tls_verify: false,
            ..CopyOptions::default()
        }
        .arg("--all");
        assert_eq!(
            opts.to_args(),
            [
                "--src-cert-dir",
                "/c",
                "--src-tls-verify=true",
                "--dest-creds",
                "u:p",
                "--dest-tls-verify=false",
                "--all"
            ]
        );
    }

    #[test]
    fn missing_tool_names_the_package() {
        let err = require_tool("definitely-not-a-tool-xyz").unwrap_err();
        assert!(err.to_string().contains("not installed"), "{err}");
        require_tool("sh").unwrap();
        assert!(
            missing_tool("docker-registry")
                .to_string()
                .contains("apt-get install docker-registry")
        );
    }

    #[test]
    fn failure_carries_stderr() {
        let err = run("sh", &["-c", "echo oops >&2; exit 3"]).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("oops") && msg.contains("exit status: 3"),
            "{msg}"
        );
    }
}
