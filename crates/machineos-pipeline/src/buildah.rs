//! Runs RUN steps with the local `buildah`: `buildah bud` of a rendered Containerfile and
//! `buildah push --digestfile` of the result ([`build_and_push`]).
//!
//! **buildah's environment**, all in one private temporary directory removed afterwards:
//! containers/storage with the `vfs` driver (`--root`, `--runroot`: no overlay or fuse
//! needed, nothing shared with the machine's storage), `--isolation chroot` (what works in
//! a container and as the MCO's build pod runs it), an empty build context holding only the
//! Containerfile. Credentials: an `auth.json` (mode 0600) with the credential machineos
//! itself would use for the output and extensions repositories (the auth files of
//! [`RegistryAccess::auth_candidates`], as for the native push), then every other entry of
//! those auth files (the first file that has a key wins), for images a user Containerfile
//! names. TLS: each CA file copied into a `--cert-dir`; the registries machineos may reach
//! over plain HTTP (loopback ones among the output and extensions registries, and the
//! [`RegistryAccess::insecure_registries`] hosts) listed `insecure = true` in a
//! `registries.conf` given through `CONTAINERS_REGISTRIES_CONF` (only then; it replaces the
//! machine's main `registries.conf` for the build, and containers' `insecure` also skips
//! certificate verification where machineos would verify an HTTPS answer). buildah's output
//! goes to stderr as it comes; a failure carries its last lines. Times: `bud --timestamp`
//! with `SOURCE_DATE_EPOCH` (0 when unset), the native layer's rule, so a RUN-step image is
//! as reproducible as its RUN steps are.
//!
//! Simplified: a Containerfile's images other than the native and extensions images get no
//! `insecure` entry unless named as insecure registries; no registry deadline applies to
//! buildah (it has its own retries); an interrupted run can leave its temporary directory.
//! Hand-written: a thin driver of the `buildah` command line; no crate drives buildah.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use base64::Engine;
use machineos_image::auth::{AuthFile, Credential, Credentials, MAX_AUTH_FILE};
use machineos_image::reference::is_loopback_registry;
use machineos_image::{Digest, RegistryRef};

/// How many of buildah's last output lines a failure carries.
const TAIL_LINES: usize = 25;
/// How buildah reaches registries: what the command line's registry options say (`--authfile`
/// and its defaults, `--ca-file`, `--insecure-registry`).
#[derive(Debug, Clone, Default)]
pub struct RegistryAccess {
    /// The auth files credentials are read from, in order.
    pub auth_candidates: Vec<PathBuf>,
    /// Extra CA certificates (PEM) to trust.
    pub ca_files: Vec<PathBuf>,
    /// Registries (`host[:port]`) that may be reached over plain HTTP.
    pub insecure_registries: Vec<String>,
}

/// The buildah found on `PATH`, and its version.
#[derive(Debug, Clone)]
pub struct Buildah {
    /// The executable.
    pub path: PathBuf,
    /// `buildah --version`'s version (`1.28.2`), or `unknown`.
    pub version: String,
}
impl Buildah {
    /// The `buildah` on `PATH` and its version; `None` when there is none.
    pub fn find() -> Option<Buildah> {
        let path = find_in_path("buildah")?;
        let version = Command::new(&path)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| parse_version(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_else(|| "unknown".to_owned());
        Some(Buildah { path, version })
    }
}

/// The version in `buildah version 1.28.2 (image-spec …)`.
fn parse_version(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    words.find(|w| *w == "version")?;
    words.next().map(str::to_owned)
}

/// The executable file `name` in a `PATH` directory.
fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
/// What [`build_and_push`] produced.
#[derive(Debug, Clone)]
pub struct Built {
    /// The pushed image's manifest digest.
    pub digest: Digest,
    /// `output-repository@digest`.
    pub pullspec: String,
    /// Seconds `buildah bud` and `buildah push` took.
    pub seconds: f64,
}

/// `buildah bud` of `containerfile` and `buildah push` of the result to `output`, in a
/// private storage (see the module documentation). `registries` are the registries the
/// build reaches (output, extensions image), for the credentials and `insecure` entries.
pub fn build_and_push(
    buildah: &Buildah,
    containerfile: &str,
    output: &RegistryRef,
    registries: &[&RegistryRef],
    access: &RegistryAccess,
) -> anyhow::Result<Built> {
    let started = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("machineos-buildah-")
        .tempdir()
        .context("creating buildah's temporary directory")?;
    let context_dir = dir.path().join("context");
    std::fs::create_dir(&context_dir).context("creating the build context")?;
    let file = context_dir.join("Containerfile");
    std::fs::write(&file, containerfile).context("writing the Containerfile")?;

    let auth = dir.path().join("auth.json");
    write_private(&auth, &auth_json(access, registries)?)?;
    let mut common: Vec<String> = vec!["--authfile".into(), path_arg(&auth)];
    if !access.ca_files.is_empty() {
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).context("creating the certificate directory")?;
        for (i, ca) in access.ca_files.iter().enumerate() {
            std::fs::copy(ca, certs.join(format!("ca-{i}.crt")))
                .with_context(|| format!("--ca-file {}", ca.display()))?;
        }
        common.extend(["--cert-dir".into(), path_arg(&certs)]);
    }
    let mut insecure: Vec<String> = registries
        .iter()
        .map(|r| r.registry().to_owned())
        .filter(|h| is_loopback_registry(h))
        .chain(access.insecure_registries.iter().cloned())
        .collect();
    insecure.sort();
    insecure.dedup();
    let registries_conf = if insecure.is_empty() {
        None
    } else {
        let conf = dir.path().join("registries.conf");
        std::fs::write(&conf, registries_conf(&insecure))
            .context("writing buildah's registries.conf")?;
        Some(conf)
    };

    let storage = [
        "--root".to_owned(),
        path_arg(&dir.path().join("root")),
        "--runroot".to_owned(),
        path_arg(&dir.path().join("run")),
        "--storage-driver".to_owned(),
        "vfs".to_owned(),
    ];
    let iid = dir.path().join("image-id");
    let mut bud: Vec<String> = storage.to_vec();
    bud.extend(["bud", "--isolation", "chroot", "--format", "oci"].map(String::from));
    bud.extend(common.iter().cloned());
    // Reproducible as the native layer is: every time in the result (the config's
    // `created`, the history, the files the RUN steps wrote) is SOURCE_DATE_EPOCH, 0
    // when unset.
    bud.extend(["--timestamp".into(), source_date_epoch()?.to_string()]);
    bud.extend(["--iidfile".into(), path_arg(&iid)]);
    bud.extend(["--file".into(), path_arg(&file), path_arg(&context_dir)]);
    run(buildah, "bud", &bud, registries_conf.as_deref())?;
    let image_id = std::fs::read_to_string(&iid).context("reading buildah's --iidfile")?;

    let digestfile = dir.path().join("digest");
    let mut push: Vec<String> = storage.to_vec();
    push.push("push".into());
    push.extend(common);
    push.extend(["--digestfile".into(), path_arg(&digestfile)]);
    push.push(image_id.trim().to_owned());
    push.push(format!("docker://{output}"));
    run(buildah, "push", &push, registries_conf.as_deref())?;
    let digest = std::fs::read_to_string(&digestfile).context("reading buildah's --digestfile")?;
    let digest = Digest::parse(digest.trim())
        .with_context(|| format!("buildah's --digestfile {:?}", digest.trim()))?;
    // The storage and the auth file go with the directory.
    dir.close()
        .context("removing buildah's temporary directory")?;
    Ok(Built {
        pullspec: output.by_digest(&digest),
        digest,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `SOURCE_DATE_EPOCH` as the native layer reads it (0 when unset).
fn source_date_epoch() -> anyhow::Result<u64> {
    let options = machineos_layer::write::LayerOptions::from_env()?;
    Ok(options.mtime)
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Write `bytes` to a new file readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// A `registries.conf` marking `hosts` insecure.
fn registries_conf(hosts: &[String]) -> String {
    let mut out = String::from(
        "# machineos build: the registries machineos may reach over plain HTTP.\nunqualified-search-registries = []\n",
    );
    for h in hosts {
        out.push_str(&format!(
            "\n[[registry]]\nlocation = {}\ninsecure = true\n",
            serde_json::Value::String(h.clone())
        ));
    }
    out
}

/// The containers `auth.json` buildah gets: the credential machineos would use for each of
/// `refs` (exact `host/repository` keys, which win in containers' lookup), then every other
/// key of the auth files, the first file having it winning.
fn auth_json(access: &RegistryAccess, refs: &[&RegistryRef]) -> anyhow::Result<Vec<u8>> {
    let credentials = Credentials::load(&access.auth_candidates)?;
    let mut entries: BTreeMap<String, Credential> = BTreeMap::new();
    for path in credentials.files() {
        let file = read_auth_file(path)?;
        for key in file.keys() {
            if entries.contains_key(key) {
                continue;
            }
            let (host, repository) = key.split_once('/').unwrap_or((key, ""));
            if let Some(c) = file.lookup(host, repository) {
                entries.insert(key.to_owned(), c.clone());
            }
        }
    }
    for r in refs {
        if let Some(c) = credentials.lookup(r.registry(), r.repository()) {
            entries.insert(r.name(), c.clone());
        }
    }
    let auths: serde_json::Map<String, serde_json::Value> = entries
        .into_iter()
        .map(|(key, c)| {
            let token = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                c.username,
                c.password.expose()
            ));
            (key, serde_json::json!({ "auth": token }))
        })
        .collect();
    Ok(serde_json::to_vec_pretty(
        &serde_json::json!({ "auths": auths }),
    )?)
}

/// One auth file, bounded as [`Credentials::load`] reads them.
fn read_auth_file(path: &Path) -> anyhow::Result<AuthFile> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_AUTH_FILE + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_AUTH_FILE {
        bail!("{}: larger than {MAX_AUTH_FILE} bytes", path.display());
    }
    AuthFile::parse(&bytes).with_context(|| path.display().to_string())
}

/// Run `buildah args…`, its output copied to stderr; a failure carries its last lines.
fn run(
    buildah: &Buildah,
    what: &str,
    args: &[String],
    registries_conf: Option<&Path>,
) -> anyhow::Result<()> {
    let mut cmd = Command::new(&buildah.path);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(conf) = registries_conf {
        cmd.env("CONTAINERS_REGISTRIES_CONF", conf);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running {} {what}", buildah.path.display()))?;
    let tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let forward = |stream: Option<Box<dyn Read + Send>>| {
        let tail = tail.clone();
        std::thread::spawn(move || {
            let Some(stream) = stream else { return };
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        })
    };
    let out = forward(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = forward(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = child
        .wait()
        .with_context(|| format!("waiting for buildah {what}"))?;
    let _ = out.join();
    let _ = err.join();
    if !status.success() {
        let last: Vec<String> = tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        bail!("buildah {what} failed ({status}):\n{}", last.join("\n"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_table() {
        assert_eq!(
            parse_version(
                "buildah version 1.28.2 (image-spec 1.1.0-rc2, runtime-spec 1.0.2-dev)\n"
            ),
            Some("1.28.2".to_owned())
        );
        assert_eq!(parse_version("nonsense"), None);
        assert_eq!(
            registries_conf(&["127.0.0.1:5000".into()]),
            "# machineos build: the registries machineos may reach over plain HTTP.\nunqualified-search-registries = []\n\n[[registry]]\nlocation = \"127.0.0.1:5000\"\ninsecure = true\n"
        );
    }
}
