//! `machineos build`'s RUN steps: what the native engine cannot do (RPM installs from
//! `spec.extensions`, a `spec.kernelType` kernel swap, a user Containerfile), done by the
//! local `buildah` on top of the native image.
//!
//! **Flow.** [`plan`] reads what needs RUN from the rendered MachineConfig and
//! `--containerfile` (`machineos_buildrequest::containerfile::RunSteps`; its errors name the
//! field, a Containerfile error its line); nothing to RUN leaves `machineos build` as it was
//! (no buildah). [`Plan::check`] then refuses, before anything is pushed, what cannot work:
//! an OCI-layout `--output` or `--base` (buildah pulls the native image from the registry
//! by digest, and the `baseOSContainerImage` label needs a registry reference), a
//! `--platform` that is not this machine's (RUN steps execute here), no `buildah` on `PATH`.
//! The extensions image (the rendered `spec.baseOSExtensionsContainerImage`, as
//! `--extensions-image` sets it) is resolved to the platform's manifest digest
//! ([`resolve_extensions_image`]) and the Containerfile rendered once with a placeholder
//! FROM ([`Plan::containerfile`]), so a missing extensions image or a Containerfile the
//! local step cannot run fails first too. Then the native image is pushed to
//! `<output repository>:<output tag>-native` ([`native_output`]) — a tag, not only a digest:
//! a registry may garbage-collect an untagged manifest, and the intermediate stays
//! inspectable next to the result — the Containerfile rendered `FROM` it by digest, and
//! [`build_and_push`] runs `buildah bud` and `buildah push --digestfile` to the output
//! reference itself.
//!
//! **buildah's environment**, all in one private temporary directory removed afterwards:
//! containers/storage with the `vfs` driver (`--root`, `--runroot`: no overlay or fuse
//! needed, nothing shared with the machine's storage), `--isolation chroot` (what works in
//! a container and as the MCO's build pod runs it), an empty build context holding only the
//! Containerfile. Credentials: an `auth.json` (mode 0600) with the credential machineos
//! itself would use for the output and extensions repositories (`--authfile`,
//! `$REGISTRY_AUTH_FILE`, … as for the native push), then every other entry of those auth
//! files (the first file that has a key wins), for images a user Containerfile names. TLS:
//! each `--ca-file` copied into a `--cert-dir`; the registries machineos may reach over
//! plain HTTP (loopback ones among the output and extensions registries, and
//! `--insecure-registry` hosts) listed `insecure = true` in a `registries.conf` given
//! through `CONTAINERS_REGISTRIES_CONF` (only then; it replaces the machine's main
//! `registries.conf` for the build, and containers' `insecure` also skips certificate
//! verification where machineos would verify an HTTPS answer). buildah's output goes to
//! stderr as it comes; a failure carries its last lines.
//!
//! **Heredocs.** The rendered Containerfile is passed through [`machineos_buildrequest::containerfile::heredoc::lower`]
//! (RUN heredocs to the exec form), since Debian's buildah (1.28) predates heredoc support.
//!
//! Simplified: a Containerfile's images other than the native and extensions images get no
//! `insecure` entry unless named by `--insecure-registry`; no registry deadline applies to
//! buildah (it has its own retries); an interrupted run can leave its temporary directory.
//! Hand-written: a thin driver of the `buildah` command line; no crate drives buildah.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use base64::Engine;
use machineos_api::v1::{ContainerfileArch, MachineConfig};
use machineos_buildrequest::containerfile::{ContainerfileInputs, RunSteps, RunStepsError, render};
use machineos_image::auth::{AuthFile, Credential, Credentials, MAX_AUTH_FILE};
use machineos_image::reference::is_loopback_registry;
use machineos_image::{Digest, ImageRef, Platform, RegistryRef};

use crate::registry::RegistryArgs;

/// How many of buildah's last output lines a failure carries.
const TAIL_LINES: usize = 25;

/// What needs RUN for one build, and for what.
#[derive(Debug)]
pub struct Plan {
    /// The steps.
    pub steps: RunSteps,
    /// What needs them, for messages: `spec.extensions [usbguard]`, `spec.kernelType
    /// realtime`, `--containerfile FILE`.
    pub needs: Vec<String>,
    /// The input's name (`MachineConfig rendered-worker-…`).
    pub source_name: String,
    /// The rendered MachineConfig's name (label `machineconfig`).
    pub machine_config: String,
    /// The pool (label `machineconfigpool`).
    pub pool: String,
    /// The rendered `spec.baseOSExtensionsContainerImage` (may be empty).
    pub extensions_image: String,
    /// `--containerfile`.
    pub containerfile: Option<PathBuf>,
}

/// What needs RUN: `None` when nothing does. `mc` is the rendered MachineConfig (`None` for
/// an Ignition input), `containerfile` the `--containerfile` file.
pub fn plan(
    mc: Option<&MachineConfig>,
    source_name: &str,
    containerfile: Option<&Path>,
    pool: &str,
    platform: &Platform,
) -> anyhow::Result<Option<Plan>> {
    let Some(mc) = mc else {
        if let Some(path) = containerfile {
            bail!(
                "--containerfile {}: needs MachineConfig inputs (the image's labels name the rendered MachineConfig and pool); {source_name} is an Ignition config",
                path.display()
            );
        }
        return Ok(None);
    };
    // Nothing that needs RUN: not even the target architecture is checked (a native build
    // for any platform stays as it was).
    let default_kernel = matches!(mc.spec.kernel_type.as_str(), "" | "default");
    if containerfile.is_none() && mc.spec.extensions.is_empty() && default_kernel {
        return Ok(None);
    }
    let content = containerfile
        .map(|p| {
            std::fs::read_to_string(p).with_context(|| format!("--containerfile {}", p.display()))
        })
        .transpose()?;
    let entries: Vec<(ContainerfileArch, &str)> = content
        .as_deref()
        .map(|c| (ContainerfileArch::NoArch, c))
        .into_iter()
        .collect();
    let steps = RunSteps::new(mc, &entries, &platform.architecture).map_err(|e| {
        match (e, containerfile) {
            (RunStepsError::Containerfile { error, .. }, Some(path)) => {
                anyhow::anyhow!("--containerfile {}: {error}", path.display())
            }
            (RunStepsError::Architecture { value }, _) => anyhow::anyhow!(
                "--platform: RUN steps are built for amd64, arm64, ppc64le or s390x, not {value:?}"
            ),
            (e, _) => anyhow::Error::new(e),
        }
    })?;
    if steps.is_empty() {
        return Ok(None);
    }
    // What the local step cannot run, with the user's own line numbers.
    if let (Some(path), Some((_, user))) = (containerfile, steps.user_containerfile()) {
        machineos_buildrequest::containerfile::heredoc::lower(user)
            .map_err(|e| anyhow::anyhow!("--containerfile {}: {e}", path.display()))?;
    }
    let mut needs = Vec::new();
    if !steps.extensions().is_empty() {
        needs.push(format!(
            "spec.extensions [{}]",
            mc.spec.extensions.join(", ")
        ));
    }
    if let Some(k) = steps.kernel_swap() {
        needs.push(format!("spec.kernelType {}", k.as_str()));
    }
    if let (Some(path), Some(_)) = (containerfile, steps.user_containerfile()) {
        needs.push(format!("--containerfile {}", path.display()));
    }
    Ok(Some(Plan {
        steps,
        needs,
        source_name: source_name.to_owned(),
        machine_config: mc.name().to_owned(),
        pool: pool.to_owned(),
        extensions_image: mc.spec.base_os_extensions_container_image.clone(),
        containerfile: containerfile.map(Path::to_path_buf),
    }))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The buildah found on `PATH`, and its version.
#[derive(Debug, Clone)]
pub struct Buildah {
    /// The executable.
    pub path: PathBuf,
    /// `buildah --version`'s version (`1.28.2`), or `unknown`.
    pub version: String,
}

impl Plan {
    /// `MachineConfig X: spec.extensions [a] and … need(s) RUN steps`.
    fn what(&self) -> String {
        let verb = if self.needs.len() == 1 {
            "needs"
        } else {
            "need"
        };
        format!(
            "{}: {} {verb} RUN steps",
            self.source_name,
            and_list(&self.needs)
        )
    }

    /// Refuse, before anything is built, what the local RUN step cannot do; the buildah to
    /// run.
    pub fn check(
        &self,
        base: &ImageRef,
        output: &ImageRef,
        platform: &Platform,
    ) -> anyhow::Result<Buildah> {
        if !matches!(output, ImageRef::Registry(_)) {
            bail!(
                "{}, which machineos build runs with buildah for a registry --output only (buildah pulls the native image from it): give --output HOST/REPO[:TAG]",
                self.what()
            );
        }
        if !matches!(base, ImageRef::Registry(_)) {
            bail!(
                "{}, which need a registry --base (its reference is the image's baseOSContainerImage label)",
                self.what()
            );
        }
        let host = Platform::host();
        if platform.architecture != host.architecture {
            bail!(
                "{}, which run on this machine ({host}): --platform {platform} cannot be built here",
                self.what()
            );
        }
        let Some(path) = find_in_path("buildah") else {
            bail!(
                "{}: buildah not found in PATH (install buildah)",
                self.what()
            );
        };
        let version = Command::new(&path)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| parse_version(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_else(|| "unknown".to_owned());
        Ok(Buildah { path, version })
    }

    /// The Containerfile buildah builds: rendered `FROM from_image` (by digest), its RUN
    /// heredocs lowered.
    pub fn containerfile(
        &self,
        from_image: &str,
        extensions_image: Option<&str>,
        base_image: &str,
    ) -> anyhow::Result<String> {
        let rendered = render(&ContainerfileInputs {
            run_steps: &self.steps,
            from_image,
            extensions_image,
            machine_config: &self.machine_config,
            pool: &self.pool,
            base_image,
        })
        .with_context(|| self.what())?
        .with_context(|| format!("{}: nothing rendered", self.what()))?;
        let (lowered, _) = machineos_buildrequest::containerfile::heredoc::lower(&rendered)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: the rendered Containerfile (user Containerfile appended): {e}",
                    self.what()
                )
            })?;
        Ok(lowered)
    }

    /// What ran, for the summary: `extensions [usbguard]`, `kernel realtime`,
    /// `Containerfile FILE`.
    pub fn steps_ran(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.steps.extensions().is_empty() {
            out.push(format!(
                "rpm-ostree install {}",
                self.steps.extension_packages().join(" ")
            ));
        }
        if let Some(k) = self.steps.kernel_swap() {
            out.push(format!("kernel swap to {}", k.as_str()));
        }
        if let (Some(path), Some(_)) = (&self.containerfile, self.steps.user_containerfile()) {
            out.push(format!("Containerfile {}", path.display()));
        }
        out
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

/// Where the native image goes: the output repository, tag `<output tag>-native`
/// (`machineos_buildrequest::tag`, the controller's rule too).
pub fn native_output(output: &RegistryRef) -> anyhow::Result<RegistryRef> {
    let tag = machineos_buildrequest::tag::native_tag(output.tag_or_latest());
    output
        .with_tag(&tag)
        .with_context(|| format!("--output {output}: the native image's tag {tag:?}"))
}

/// The extensions image by digest (the `platform` manifest of an index), when the steps
/// need it and it is given; `None` otherwise (rendering then names what is missing).
pub async fn resolve_extensions_image(
    plan: &Plan,
    registry: Option<&machineos_registry::Registry>,
    platform: &Platform,
) -> anyhow::Result<Option<String>> {
    if !plan.steps.needs_extensions_image() || plan.extensions_image.is_empty() {
        return Ok(None);
    }
    let field = "spec.baseOSExtensionsContainerImage (--extensions-image)";
    let image = &plan.extensions_image;
    let reference = match ImageRef::parse(image).with_context(|| format!("{field} {image:?}"))? {
        ImageRef::Registry(r) => r,
        ImageRef::Layout(_) => {
            bail!(
                "{field} {image:?}: buildah mounts it from a registry; give HOST/REPO[:TAG|@DIGEST]"
            )
        }
    };
    if reference.digest().is_some() {
        return Ok(Some(
            reference.by_digest(reference.digest().context("digest")?),
        ));
    }
    let registry = registry.context("no registry client for the extensions image")?;
    let info = registry
        .image_info(&reference)
        .await
        .with_context(|| format!("{field} {image}"))?
        .with_context(|| format!("{field} {image}: not found"))?;
    let digest: Digest = if info.is_index() {
        info.architectures
            .iter()
            .find(|(arch, _)| *arch == platform.architecture)
            .map(|(_, d)| d.clone())
            .with_context(|| {
                format!(
                    "{field} {image}: no {} image in the index",
                    platform.architecture
                )
            })?
    } else {
        info.digest
    };
    Ok(Some(reference.by_digest(&digest)))
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
    args: &RegistryArgs,
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
    write_private(&auth, &auth_json(args, registries)?)?;
    let mut common: Vec<String> = vec!["--authfile".into(), path_arg(&auth)];
    if !args.ca_files().is_empty() {
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).context("creating the certificate directory")?;
        for (i, ca) in args.ca_files().iter().enumerate() {
            std::fs::copy(ca, certs.join(format!("ca-{i}.crt")))
                .with_context(|| format!("--ca-file {}", ca.display()))?;
        }
        common.extend(["--cert-dir".into(), path_arg(&certs)]);
    }
    let mut insecure: Vec<String> = registries
        .iter()
        .map(|r| r.registry().to_owned())
        .filter(|h| is_loopback_registry(h))
        .chain(args.insecure_registries().iter().cloned())
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
fn auth_json(args: &RegistryArgs, refs: &[&RegistryRef]) -> anyhow::Result<Vec<u8>> {
    let candidates = args.auth_candidates();
    let credentials = Credentials::load(&candidates)?;
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

    fn mc(extensions: &[&str], kernel_type: &str) -> MachineConfig {
        let mut mc = MachineConfig::new(
            "rendered-worker-0",
            machineos_api::v1::MachineConfigSpec::default(),
        );
        mc.spec.extensions = extensions.iter().map(|e| e.to_string()).collect();
        mc.spec.kernel_type = kernel_type.to_owned();
        mc
    }

    #[test]
    fn plan_table() {
        let amd64 = Platform::new("linux", "amd64", None);
        let i386 = Platform::new("linux", "386", None);
        let name = "MachineConfig rendered-worker-0";
        let plan_of = |m: &MachineConfig, p: &Platform| plan(Some(m), name, None, "worker", p);
        // Nothing to RUN, whatever the platform.
        assert!(plan_of(&mc(&[], ""), &i386).unwrap().is_none());
        assert!(plan_of(&mc(&[], "default"), &amd64).unwrap().is_none());
        // What needs RUN, named.
        let p = plan_of(&mc(&["usbguard", "usbguard"], "realtime"), &amd64)
            .unwrap()
            .unwrap();
        assert_eq!(
            p.needs,
            [
                "spec.extensions [usbguard, usbguard]",
                "spec.kernelType realtime"
            ]
        );
        assert_eq!(
            p.steps_ran(),
            ["rpm-ostree install usbguard", "kernel swap to realtime"]
        );
        assert_eq!(
            p.what(),
            "MachineConfig rendered-worker-0: spec.extensions [usbguard, usbguard] and spec.kernelType realtime need RUN steps"
        );
        // The MCO's refusals.
        let e = plan_of(&mc(&[], "64k-pages"), &amd64).unwrap_err();
        assert!(
            e.to_string()
                .contains("64k-pages is only supported for arm64"),
            "{e}"
        );
        let e = plan_of(&mc(&["usbguard"], ""), &i386).unwrap_err();
        assert!(e.to_string().contains("--platform"), "{e}");
        // An Ignition input has no labels to give a Containerfile.
        let e = plan(None, "x.ign", Some(Path::new("C")), "worker", &amd64).unwrap_err();
        assert!(e.to_string().contains("needs MachineConfig inputs"), "{e}");
        assert!(
            plan(None, "x.ign", None, "worker", &amd64)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn helpers_table() {
        assert_eq!(
            parse_version(
                "buildah version 1.28.2 (image-spec 1.1.0-rc2, runtime-spec 1.0.2-dev)\n"
            ),
            Some("1.28.2".to_owned())
        );
        assert_eq!(parse_version("nonsense"), None);
        assert_eq!(and_list(&["a".into()]), "a");
        assert_eq!(
            and_list(&["a".into(), "b".into(), "c".into()]),
            "a, b and c"
        );
        let out = RegistryRef::parse("127.0.0.1:5000/os/worker:v1").unwrap();
        assert_eq!(
            native_output(&out).unwrap().to_string(),
            "127.0.0.1:5000/os/worker:v1-native"
        );
        // A tag too long for `-native` is fitted (with a hash), not refused.
        let long = RegistryRef::parse(&format!("h/r:{}", "t".repeat(128))).unwrap();
        let native = native_output(&long).unwrap();
        let tag = native.to_string().rsplit_once(':').unwrap().1.to_owned();
        assert!(tag.len() <= 128 && tag.ends_with("-native"), "{tag}");
        assert_eq!(
            registries_conf(&["127.0.0.1:5000".into()]),
            "# machineos build: the registries machineos may reach over plain HTTP.\nunqualified-search-registries = []\n\n[[registry]]\nlocation = \"127.0.0.1:5000\"\ninsecure = true\n"
        );
    }
}
