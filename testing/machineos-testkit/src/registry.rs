//! A real CNCF distribution registry on loopback, so registry clients are tested against the
//! reference server (auth, TLS, upload sessions, Location headers) instead of a mock.

use std::fmt;
use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Realm announced by the htpasswd access controller (and by the proxy's injected 401s).
pub const AUTH_REALM: &str = "machineos-test";

/// The executable that runs the registry (Debian package `docker-registry`).
const BINARY: &str = "docker-registry";
/// How long `start` waits for `GET /v2/` to answer.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many fresh ports `start` tries when the chosen one was taken in the meantime.
const PORT_ATTEMPTS: usize = 5;
/// How many lines of the registry's log go into a startup error.
const LOG_TAIL_LINES: usize = 40;

/// How a [`TestRegistry`] is configured. `Default` is plain HTTP, no auth, absolute URLs,
/// manifest deletes enabled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryOptions {
    /// Serve HTTPS with a certificate for `127.0.0.1`, `localhost` and `::1`, signed by a
    /// CA generated for this registry alone.
    pub tls: bool,
    /// Require HTTP basic auth (htpasswd, bcrypt) with this `(username, password)`.
    pub auth: Option<(String, String)>,
    /// Set `http.relativeurls`, so `Location` headers are relative paths.
    pub relative_urls: bool,
    /// Leave `storage.delete` off, so `DELETE` of a manifest answers `405 UNSUPPORTED`, as
    /// on a registry whose operator disabled deletes.
    pub deletes_disabled: bool,
}

impl RegistryOptions {
    /// Plain HTTP, no auth, absolute URLs (same as `Default`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Serve HTTPS with a per-registry test CA.
    pub fn with_tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Require basic auth with these credentials.
    pub fn with_auth(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.auth = Some((username.into(), password.into()));
        self
    }

    /// Make the registry emit relative `Location` headers.
    pub fn with_relative_urls(mut self) -> Self {
        self.relative_urls = true;
        self
    }

    /// Make the registry refuse manifest deletes (`405 UNSUPPORTED`).
    pub fn without_deletes(mut self) -> Self {
        self.deletes_disabled = true;
        self
    }
}

/// A running `docker-registry serve` process bound to `127.0.0.1:PORT`, with its storage,
/// configuration, log and certificates in a private temporary directory.
///
/// Dropping it kills and reaps the process, then removes the directory.
pub struct TestRegistry {
    // Field order matters: the process must be gone before its directory is removed.
    process: ChildGuard,
    addr: SocketAddr,
    opts: RegistryOptions,
    tls: Option<TlsFiles>,
    storage_dir: PathBuf,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl fmt::Debug for TestRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestRegistry")
            .field("url", &self.url())
            .field("auth", &self.opts.auth.as_ref().map(|(user, _)| user))
            .field("relative_urls", &self.opts.relative_urls)
            .field("storage_dir", &self.storage_dir)
            .finish()
    }
}

impl TestRegistry {
    /// Starts a registry configured by `opts` and waits (up to ~10 s) until `GET /v2/`
    /// answers 200 or 401.
    ///
    /// Fails if `docker-registry` is not installed (install it with
    /// `apt-get install docker-registry`), or if the process does not come up; the error then
    /// carries the tail of the registry's log.
    pub fn start(opts: RegistryOptions) -> Result<TestRegistry> {
        crate::tools::require_tool(BINARY)?;
        let dir = tempfile::Builder::new()
            .prefix("machineos-registry-")
            .tempdir()
            .context("creating the test registry's temporary directory")?;
        let storage_dir = dir.path().join("storage");
        fs::create_dir(&storage_dir)
            .with_context(|| format!("creating {}", storage_dir.display()))?;
        let tls = if opts.tls {
            Some(write_tls_files(dir.path()).context("generating the test registry's TLS files")?)
        } else {
            None
        };
        let htpasswd = match &opts.auth {
            Some((user, password)) => Some(write_htpasswd(dir.path(), user, password)?),
            None => None,
        };
        let log_path = dir.path().join("registry.log");
        let config_path = dir.path().join("config.yml");
        let scheme = if tls.is_some() { "https" } else { "http" };

        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let addr = free_loopback_addr()?;
            let config = render_config(
                addr,
                &storage_dir,
                !opts.deletes_disabled,
                opts.relative_urls,
                tls.as_ref(),
                htpasswd.as_deref(),
            );
            fs::write(&config_path, config)
                .with_context(|| format!("writing {}", config_path.display()))?;
            let mut process = spawn_registry(&config_path, &log_path)?;
            let url = format!("{scheme}://{addr}/v2/");
            let ca_pem = tls.as_ref().map(|t| t.ca_pem.as_slice());
            match wait_until_ready(&mut process.0, &url, ca_pem) {
                Ok(()) => {
                    return Ok(TestRegistry {
                        process,
                        addr,
                        opts,
                        tls,
                        storage_dir,
                        log_path,
                        _dir: dir,
                    });
                }
                Err(err) => {
                    drop(process);
                    let tail = log_tail(&log_path, LOG_TAIL_LINES);
                    let err = err.context(format!(
                        "docker-registry did not start on {addr}; log tail ({}):\n{tail}",
                        log_path.display()
                    ));
                    if tail.contains("address already in use") {
                        last_error = Some(err);
                        continue;
                    }
                    return Err(err);
                }
            }
        }
        Err(last_error
            .unwrap_or_else(|| anyhow!("no attempt was made"))
            .context(format!(
                "docker-registry could not bind a free port in {PORT_ATTEMPTS} attempts"
            )))
    }

    /// Starts a plain-HTTP registry without auth (`start(RegistryOptions::default())`).
    pub fn start_plain() -> Result<TestRegistry> {
        Self::start(RegistryOptions::default())
    }

    /// Process id of the `docker-registry` process.
    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// `127.0.0.1:PORT`, the registry part of image references.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The socket address the registry listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// `127.0.0.1:PORT/{name}`, e.g. `reference("os/base:4.16")`.
    pub fn reference(&self, name: &str) -> String {
        format!("{}/{name}", self.addr)
    }

    /// Whether the registry serves HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The options the registry was started with.
    pub fn options(&self) -> &RegistryOptions {
        &self.opts
    }

    /// `(username, password)` when auth is enabled.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.opts
            .auth
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }

    /// With TLS, a directory holding only `ca.crt`, usable as skopeo's `--cert-dir`,
    /// `--src-cert-dir` or `--dest-cert-dir`. `None` for plain HTTP.
    pub fn cert_dir(&self) -> Option<&Path> {
        self.tls.as_ref().map(|t| t.cert_dir.as_path())
    }

    /// With TLS, the path of the CA certificate (PEM) that signed the server certificate.
    pub fn ca_path(&self) -> Option<&Path> {
        self.tls.as_ref().map(|t| t.ca_path.as_path())
    }

    /// The CA certificate (PEM) that signed the server certificate; empty for plain HTTP.
    pub fn ca_pem(&self) -> &[u8] {
        self.tls.as_ref().map_or(&[], |t| t.ca_pem.as_slice())
    }

    /// The registry's storage root (filesystem driver `rootdirectory`).
    pub fn storage_dir(&self) -> &Path {
        &self.storage_dir
    }

    /// Path of the file receiving the registry's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The registry's log so far (level warn, access log off); empty if unreadable.
    pub fn log(&self) -> String {
        fs::read(&self.log_path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// An async HTTP client that trusts this registry's CA (if any) and uses no proxy.
    /// Credentials are not added; use `basic_auth(...)` per request.
    pub fn http_client(&self) -> Result<reqwest::Client> {
        http_client(self.tls.as_ref().map(|t| t.ca_pem.as_slice()))
    }
}

/// Kills and reaps the registry process when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // The process may already have exited; either way reap it.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// TLS material written for one registry.
struct TlsFiles {
    ca_pem: Vec<u8>,
    cert_dir: PathBuf,
    ca_path: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

/// Generates a CA and a server certificate for the loopback names, and writes them below
/// `dir`: `tls/server.{crt,key}` for the registry, `certs/ca.crt` for clients.
fn write_tls_files(dir: &Path) -> Result<TlsFiles> {
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).context("building the CA parameters")?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "machineos-testkit CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .context("self-signing the CA certificate")?;
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().context("generating the server key")?;
    let mut server_params = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        "::1".to_owned(),
    ])
    .context("building the server certificate parameters")?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, "machineos-testkit registry");
    server_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .context("signing the server certificate")?;

    let tls_dir = dir.join("tls");
    let cert_dir = dir.join("certs");
    for d in [&tls_dir, &cert_dir] {
        fs::create_dir(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let ca_pem = ca_cert.pem().into_bytes();
    let files = TlsFiles {
        ca_path: cert_dir.join("ca.crt"),
        server_cert: tls_dir.join("server.crt"),
        server_key: tls_dir.join("server.key"),
        ca_pem,
        cert_dir,
    };
    write_file(&files.ca_path, &files.ca_pem)?;
    write_file(&files.server_cert, server_cert.pem().as_bytes())?;
    write_file(&files.server_key, server_key.serialize_pem().as_bytes())?;
    Ok(files)
}

/// Writes an htpasswd file with one bcrypt (`$2y$`, cost 5) entry; returns its path.
fn write_htpasswd(dir: &Path, user: &str, password: &str) -> Result<PathBuf> {
    if user.contains(':') || user.contains('\n') {
        bail!("htpasswd user name {user:?} must not contain ':' or a newline");
    }
    let hash = bcrypt::hash_with_result(password, 5)
        .context("bcrypt-hashing the test registry password")?
        .format_for_version(bcrypt::Version::TwoY);
    let path = dir.join("htpasswd");
    write_file(&path, format!("{user}:{hash}\n").as_bytes())?;
    Ok(path)
}

fn write_file(path: &Path, contents: &[u8]) -> Result<()> {
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// A loopback address whose port was free a moment ago (bound to port 0, then released).
fn free_loopback_addr() -> Result<SocketAddr> {
    let listener =
        TcpListener::bind(("127.0.0.1", 0)).context("binding 127.0.0.1:0 to pick a free port")?;
    listener
        .local_addr()
        .context("reading the address of a port-0 listener")
}

/// A YAML double-quoted scalar (JSON strings are valid YAML).
fn yaml_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn render_config(
    addr: SocketAddr,
    storage_dir: &Path,
    deletes: bool,
    relative_urls: bool,
    tls: Option<&TlsFiles>,
    htpasswd: Option<&Path>,
) -> String {
    let mut config = format!(
        "version: 0.1
log:
  level: warn
  formatter: text
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: {deletes}
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: {addr}
  secret: machineos-testkit-not-a-secret
  relativeurls: {relative_urls}
",
        storage = yaml_str(&storage_dir.to_string_lossy()),
        addr = yaml_str(&addr.to_string()),
    );
    if let Some(tls) = tls {
        config.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            yaml_str(&tls.server_cert.to_string_lossy()),
            yaml_str(&tls.server_key.to_string_lossy()),
        ));
    }
    if let Some(htpasswd) = htpasswd {
        config.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: {}\n    path: {}\n",
            yaml_str(AUTH_REALM),
            yaml_str(&htpasswd.to_string_lossy()),
        ));
    }
    config
}

fn spawn_registry(config_path: &Path, log_path: &Path) -> Result<ChildGuard> {
    let log =
        fs::File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .with_context(|| format!("duplicating the handle of {}", log_path.display()))?;
    let child = Command::new(BINARY)
        .arg("serve")
        .arg(config_path)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .with_context(|| format!("spawning `{BINARY} serve {}`", config_path.display()))?;
    Ok(ChildGuard(child))
}

/// Builds an async client without proxy that trusts `ca_pem` in addition to the defaults.
fn http_client(ca_pem: Option<&[u8]>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(pem) = ca_pem {
        let cert =
            reqwest::Certificate::from_pem(pem).context("parsing the test CA certificate")?;
        builder = builder.add_root_certificate(cert);
    }
    builder.build().context("building an HTTP client")
}

/// Polls `url` until it answers 200 or 401, the process exits, or the timeout passes.
///
/// The polling runs on a scoped thread with its own current-thread runtime, so this works
/// from plain threads and from inside any tokio runtime alike.
fn wait_until_ready(child: &mut Child, url: &str, ca_pem: Option<&[u8]>) -> Result<()> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| poll_ready(child, url, ca_pem))
            .join()
            .map_err(|_| anyhow!("the readiness probe thread panicked"))?
    })
}

fn poll_ready(child: &mut Child, url: &str, ca_pem: Option<&[u8]>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the readiness probe runtime")?;
    let client = http_client(ca_pem)?;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Some(status) = child
            .try_wait()
            .context("checking the docker-registry process")?
        {
            bail!("docker-registry exited early with {status}");
        }
        // `send` arms its timeout immediately, so it must run inside the runtime.
        let probe = runtime
            .block_on(async { client.get(url).timeout(Duration::from_secs(1)).send().await });
        let last = match probe {
            Ok(resp) if matches!(resp.status().as_u16(), 200 | 401) => return Ok(()),
            Ok(resp) => format!("GET {url} answered {}", resp.status()),
            Err(err) => format!("GET {url} failed: {}", error_chain(&err)),
        };
        if Instant::now() >= deadline {
            bail!(
                "docker-registry not ready after {}s ({last})",
                STARTUP_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `err: cause: cause...` (reqwest's Display omits the causes).
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The last `lines` lines of the file at `path`, or a note saying it could not be read.
fn log_tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    match fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text)) {
        Ok(_) => {
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            let tail = all[start..].join("\n");
            if tail.is_empty() {
                "(log is empty)".to_owned()
            } else {
                tail
            }
        }
        Err(err) => format!("(could not read {}: {err})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_quotes_paths_and_adds_sections() {
        let tls = TlsFiles {
            ca_pem: Vec::new(),
            cert_dir: PathBuf::from("/c"),
            ca_path: PathBuf::from("/c/ca.crt"),
            server_cert: PathBuf::from("/t/server.crt"),
            server_key: PathBuf::from("/t/server.key"),
        };
        let config = render_config(
            "127.0.0.1:5000".parse().unwrap(),
            Path::new("/tmp/a \"b\""),
            false,
            true,
            Some(&tls),
            Some(Path::new("/h/htpasswd")),
        );
        assert!(
            config.contains(r#"rootdirectory: "/tmp/a \"b\"""#),
            "{config}"
        );
        assert!(config.contains("relativeurls: true"));
        assert!(
            config.contains("  delete:\n    enabled: false\n"),
            "{config}"
        );
        assert!(config.contains("  tls:\n    certificate: \"/t/server.crt\""));
        assert!(config.contains("realm: \"machineos-test\""));
    }

    #[test]
    fn early_exit_is_reported_with_the_log() {
        if crate::tools::require_tool(BINARY).is_err() {
            return; // covered by the integration tests, which do require it
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yml");
        let log = dir.path().join("registry.log");
        fs::write(&config, "version: 0.1\nstorage: {}\n").unwrap();
        let mut process = spawn_registry(&config, &log).unwrap();
        let err = wait_until_ready(&mut process.0, "http://127.0.0.1:1/v2/", None).unwrap_err();
        assert!(err.to_string().contains("exited early"), "{err:#}");
        assert!(!log_tail(&log, 5).is_empty());
    }

    #[test]
    fn htpasswd_uses_2y_bcrypt() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_htpasswd(dir.path(), "alice", "s3cret").unwrap();
        let line = fs::read_to_string(path).unwrap();
        let (user, hash) = line.trim_end().split_once(':').unwrap();
        assert_eq!(user, "alice");
        assert!(hash.starts_with("$2y$05$"), "{hash}");
        assert!(bcrypt::verify("s3cret", hash).unwrap());
        let e = write_htpasswd(dir.path(), "a:b", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must not contain ':'"), "{e}");
    }
}
