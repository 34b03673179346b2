//! Registry credentials from containers `auth.json`, Docker `config.json` and the payload of a
//! Kubernetes `kubernetes.io/dockerconfigjson` Secret, with the lookup rules podman and skopeo
//! use. Parsing works on bytes; discovering and reading files is a thin separate layer.
//!
//! Passwords are held in [`Secret`], which never prints its content; error messages name JSON
//! paths and files, never values.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use machineos_diagnostics::{Classify, Retry, io_retry};
use serde_json::{Map, Value};

/// Why credentials could not be parsed or loaded. Never contains a secret.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file is not JSON.
    #[error("parsing registry auth file: not valid JSON: {0}")]
    Syntax(serde_json::Error),
    /// A value has the wrong type or content; `path` is its JSON path.
    #[error("parsing registry auth file: {path}: {problem}")]
    Invalid {
        /// JSON path of the offending value.
        path: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An auth file exists but could not be read.
    #[error("reading registry auth file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: io::Error,
    },
    /// An auth file could not be parsed.
    #[error("registry auth file {}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why it could not be parsed.
        error: Box<AuthError>,
    },
}

impl Classify for AuthError {
    /// `InvalidAuthFile` for a file that is not a valid auth file, `AuthFileIOError` for one
    /// that could not be read.
    fn reason(&self) -> &'static str {
        match self {
            AuthError::Syntax(_) | AuthError::Invalid { .. } => "InvalidAuthFile",
            AuthError::Read { .. } => "AuthFileIOError",
            AuthError::File { error, .. } => error.reason(),
        }
    }

    /// Reading is retried as its I/O error says ([`machineos_diagnostics::io_retry`]); a
    /// file that does not parse must change first.
    fn retry(&self) -> Retry {
        match self {
            AuthError::Syntax(_) | AuthError::Invalid { .. } => Retry::Permanent,
            AuthError::Read { error, .. } => io_retry(error),
            AuthError::File { error, .. } => error.retry(),
        }
    }
}

/// A secret string. Debug prints `Secret(<redacted>)`; there is no Display.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret value.
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The secret value, for sending it where it belongs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A username and password for one registry (or repository namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The username.
    pub username: String,
    /// The password or token.
    pub password: Secret,
}

/// The credentials in one auth file, keyed by normalised registry or `registry/path` prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthFile {
    entries: BTreeMap<String, Credential>,
}

/// Normalise an `auths` key: drop `http://`/`https://`, a trailing `/v1/` or `/v2/` and
/// trailing `/`, and spell Docker Hub `docker.io`.
pub fn normalize_auth_key(key: &str) -> String {
    let mut k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    for suffix in ["/v1/", "/v2/", "/v1", "/v2"] {
        if let Some(s) = k.strip_suffix(suffix) {
            k = s;
            break;
        }
    }
    let k = k.trim_end_matches('/');
    let (host, rest) = match k.split_once('/') {
        Some((h, r)) => (h, Some(r)),
        None => (k, None),
    };
    let host = normalize_registry(host);
    match rest {
        Some(r) => format!("{host}/{r}"),
        None => host.to_owned(),
    }
}

fn normalize_registry(host: &str) -> &str {
    match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    }
}

fn entry_path(key: &str) -> String {
    format!("$.auths[{key:?}]")
}

fn invalid(path: String, problem: &'static str) -> AuthError {
    AuthError::Invalid { path, problem }
}

/// `obj[field]` as an optional string; `null` counts as absent.
fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'a str>, AuthError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(
            format!("{}.{field}", entry_path(key)),
            "not a string",
        )),
    }
}

/// Decode an `auth` value, `base64(user:password)`.
fn decode_auth(key: &str, auth: &str) -> Result<Credential, AuthError> {
    let path = || format!("{}.auth", entry_path(key));
    let trimmed = auth.trim();
    let bytes = STANDARD
        .decode(trimmed)
        .or_else(|_| STANDARD_NO_PAD.decode(trimmed))
        .map_err(|_| invalid(path(), "not valid base64"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| invalid(path(), "decoded value is not UTF-8"))?;
    let Some((user, pass)) = text.split_once(':') else {
        return Err(invalid(path(), "decoded value is not username:password"));
    };
    Ok(Credential {
        username: user.to_owned(),
        password: Secret(pass.to_owned()),
    })
}

fn parse_entry(key: &str, value: &Value) -> Result<Option<Credential>, AuthError> {
    let obj = value
        .as_object()
        .ok_or_else(|| invalid(entry_path(key), "not an object"))?;
    if let Some(auth) = opt_str(obj, key, "auth")?
        && !auth.is_empty()
    {
        return decode_auth(key, auth).map(Some);
    }
    let user = opt_str(obj, key, "username")?.unwrap_or("");
    let pass = opt_str(obj, key, "password")?.unwrap_or("");
    if !user.is_empty() && !pass.is_empty() {
        return Ok(Some(Credential {
            username: user.to_owned(),
            password: Secret(pass.to_owned()),
        }));
    }
    // Entries with only an identity token (OAuth refresh token) or nothing at all (Docker
    // writes `{}` when a credential store holds the secret) carry no usable password.
    Ok(None)
}

impl AuthFile {
    /// Parse an auth file: `{"auths": {KEY: {"auth": base64("user:pass")} |
    /// {"username": …, "password": …}}}`. Other top-level keys (`credHelpers`, `credsStore`, …)
    /// are ignored, as are entries with no usable password (identity-token-only, empty). When
    /// two keys normalise to the same one, the first in the file wins.
    pub fn parse(bytes: &[u8]) -> Result<AuthFile, AuthError> {
        let root: Value = serde_json::from_slice(bytes).map_err(AuthError::Syntax)?;
        let root = root
            .as_object()
            .ok_or_else(|| invalid("$".to_owned(), "not a JSON object"))?;
        if root.get("kind").and_then(Value::as_str) == Some("Secret") {
            return AuthFile::parse_secret(root);
        }
        let mut entries = BTreeMap::new();
        match root.get("auths") {
            None | Some(Value::Null) => {}
            Some(Value::Object(auths)) => {
                for (key, value) in auths {
                    if let Some(cred) = parse_entry(key, value)? {
                        entries.entry(normalize_auth_key(key)).or_insert(cred);
                    }
                }
            }
            Some(_) => return Err(invalid("$.auths".to_owned(), "not an object")),
        }
        Ok(AuthFile { entries })
    }

    /// A Kubernetes Secret manifest in JSON (`kubectl get secret -o json`) of type
    /// `kubernetes.io/dockerconfigjson`: its `.dockerconfigjson` payload, from `data`
    /// (base64) or `stringData`.
    fn parse_secret(root: &Map<String, Value>) -> Result<AuthFile, AuthError> {
        const KEY: &str = ".dockerconfigjson";
        if let Some(text) = root
            .get("stringData")
            .and_then(|d| d.get(KEY))
            .and_then(Value::as_str)
        {
            return AuthFile::parse(text.as_bytes());
        }
        let path = || format!("$.data[{KEY:?}]");
        let encoded = root
            .get("data")
            .and_then(|d| d.get(KEY))
            .ok_or_else(|| {
                invalid(
                    path(),
                    "missing: not a kubernetes.io/dockerconfigjson Secret",
                )
            })?
            .as_str()
            .ok_or_else(|| invalid(path(), "not a string"))?;
        let payload = STANDARD
            .decode(encoded.trim())
            .map_err(|_| invalid(path(), "not valid base64"))?;
        AuthFile::parse(&payload)
    }

    /// The normalised keys that have credentials.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The credential for `registry/repository`: among keys equal to it or a prefix of it
    /// ending at a `/`, the longest wins.
    pub fn lookup(&self, registry: &str, repository: &str) -> Option<&Credential> {
        let registry = normalize_registry(registry);
        let target = if repository.is_empty() {
            registry.to_owned()
        } else {
            format!("{registry}/{repository}")
        };
        self.entries
            .iter()
            .filter(|(key, _)| {
                target == **key
                    || target
                        .strip_prefix(key.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .max_by_key(|(key, _)| key.len())
            .map(|(_, cred)| cred)
    }
}

/// The environment auth file discovery depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthEnv {
    /// `$REGISTRY_AUTH_FILE`.
    pub registry_auth_file: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
}

impl AuthEnv {
    /// Read the variables from this process's environment (unset or empty means `None`).
    pub fn from_process_env() -> AuthEnv {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        AuthEnv {
            registry_auth_file: var("REGISTRY_AUTH_FILE"),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR"),
            home: var("HOME"),
        }
    }
}

/// The auth files to consult, in order: only `explicit` (`--authfile`) when given; otherwise
/// `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`, `~/.docker/config.json`
/// (each when its variable is set).
pub fn auth_file_candidates(explicit: Option<&Path>, env: &AuthEnv) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_path_buf()];
    }
    let mut out = Vec::new();
    if let Some(p) = &env.registry_auth_file {
        out.push(p.clone());
    }
    if let Some(d) = &env.xdg_runtime_dir {
        out.push(d.join("containers").join("auth.json"));
    }
    if let Some(h) = &env.home {
        out.push(h.join(".docker").join("config.json"));
    }
    out
}

/// Credentials from several auth files, consulted in order.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Every candidate path looked at, found or not (for messages).
    searched: Vec<PathBuf>,
    files: Vec<(PathBuf, AuthFile)>,
}

/// The largest auth file read (real ones are a few KiB).
pub const MAX_AUTH_FILE: u64 = 4 << 20;

/// The bytes of an auth file: a regular file (following symlinks) of at most
/// [`MAX_AUTH_FILE`] bytes — never a FIFO that would block, or a device that never ends.
fn read_auth_file(path: &Path) -> io::Result<Vec<u8>> {
    let meta = fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut io::Read::take(fs::File::open(path)?, MAX_AUTH_FILE + 1),
        &mut bytes,
    )?;
    if bytes.len() as u64 > MAX_AUTH_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {MAX_AUTH_FILE} bytes"),
        ));
    }
    Ok(bytes)
}

impl Credentials {
    /// Read and parse each candidate; files that do not exist are skipped, a file that exists
    /// but cannot be read or parsed is an error naming it.
    pub fn load(candidates: &[PathBuf]) -> Result<Credentials, AuthError> {
        let mut files = Vec::new();
        for path in candidates {
            let bytes = match read_auth_file(path) {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => {
                    return Err(AuthError::Read {
                        path: path.clone(),
                        error,
                    });
                }
            };
            let file = AuthFile::parse(&bytes).map_err(|e| AuthError::File {
                path: path.clone(),
                error: Box::new(e),
            })?;
            files.push((path.clone(), file));
        }
        Ok(Credentials {
            searched: candidates.to_vec(),
            files,
        })
    }

    /// Credentials from already parsed files, consulted in the given order.
    pub fn from_files(files: Vec<(PathBuf, AuthFile)>) -> Credentials {
        Credentials {
            searched: files.iter().map(|(p, _)| p.clone()).collect(),
            files,
        }
    }

    /// The files looked at, for messages: `a.json, b.json (not found)`, or
    /// `no auth files` when there were no candidates.
    pub fn describe_sources(&self) -> String {
        if self.searched.is_empty() {
            return "no auth files".to_owned();
        }
        let found = |p: &PathBuf| self.files.iter().any(|(f, _)| f == p);
        self.searched
            .iter()
            .map(|p| {
                if found(p) {
                    p.display().to_string()
                } else {
                    format!("{} (not found)", p.display())
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The file the credential for `registry/repository` comes from, if any.
    pub fn lookup_source(&self, registry: &str, repository: &str) -> Option<&Path> {
        self.files
            .iter()
            .find(|(_, f)| f.lookup(registry, repository).is_some())
            .map(|(p, _)| p.as_path())
    }

    /// The files that were found, in order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }

    /// The credential for `registry/repository` from the first file that has a match (the
    /// longest match within that file).
    pub fn lookup(&self, registry: &str, repository: &str) -> Option<&Credential> {
        self.files
            .iter()
            .find_map(|(_, f)| f.lookup(registry, repository))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_files_are_read_bounded() {
        let t = tempfile::tempdir().unwrap();
        let zero = t.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let big = t.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_AUTH_FILE + 1)
            .unwrap();
        for (p, kind, needle) in [
            (&zero, io::ErrorKind::InvalidInput, "not a regular file"),
            (&big, io::ErrorKind::InvalidData, "larger than"),
        ] {
            let e = Credentials::load(std::slice::from_ref(p)).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(needle) && msg.contains(&p.display().to_string()),
                "{msg}"
            );
            match e {
                AuthError::Read { path, error } => {
                    assert_eq!((&path, error.kind()), (p, kind));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    const PASSWORD: &str = "hunter2:with-colon";

    fn b64(s: &str) -> String {
        STANDARD.encode(s)
    }

    fn sample() -> String {
        format!(
            r#"{{
              "auths": {{
                "quay.io": {{"auth": "{}"}},
                "quay.io/org": {{"auth": "{}"}},
                "https://index.docker.io/v1/": {{"auth": "{}", "email": "x@y"}},
                "registry.example.com:5000/": {{"username": "u4", "password": "{PASSWORD}"}},
                "token.example.com": {{"identitytoken": "abc"}},
                "empty.example.com": {{}},
                "quay.io/organisation": {{"auth": "{}"}}
              }},
              "credHelpers": {{"gcr.io": "gcloud"}},
              "credsStore": "desktop"
            }}"#,
            b64(&format!("u1:{PASSWORD}")),
            b64(&format!("u2:{PASSWORD}")),
            b64(&format!("u3:{PASSWORD}")),
            b64(&format!("u5:{PASSWORD}")),
        )
    }

    #[test]
    fn lookup_table() {
        let f = AuthFile::parse(sample().as_bytes()).unwrap();
        let cases = [
            ("quay.io", "org/repo", Some("u2")),
            ("quay.io", "org", Some("u2")),
            ("quay.io", "orgx/repo", Some("u1")),
            ("quay.io", "organisation/x", Some("u5")),
            ("quay.io", "other/repo", Some("u1")),
            ("docker.io", "library/fedora", Some("u3")),
            ("index.docker.io", "library/fedora", Some("u3")),
            ("registry.example.com:5000", "a/b", Some("u4")),
            ("registry.example.com", "a/b", None),
            ("token.example.com", "a", None),
            ("empty.example.com", "a", None),
            ("quay.iox", "a", None),
        ];
        for (reg, repo, want) in cases {
            let got = f.lookup(reg, repo).map(|c| c.username.as_str());
            assert_eq!(got, want, "{reg}/{repo}");
        }
        assert_eq!(
            f.lookup("quay.io", "a").unwrap().password.expose(),
            PASSWORD
        );
    }

    #[test]
    fn kubernetes_secret_manifests_carry_the_same_payload() {
        let data = format!(
            r#"{{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                "metadata": {{"name": "pull-secret"}},
                "data": {{".dockerconfigjson": "{}"}}}}"#,
            b64(&sample())
        );
        let string_data = format!(
            r#"{{"kind": "Secret", "stringData": {{".dockerconfigjson": {}}}}}"#,
            serde_json::to_string(&sample()).unwrap()
        );
        for text in [data, string_data] {
            let f = AuthFile::parse(text.as_bytes()).unwrap();
            assert_eq!(f.lookup("quay.io", "org/x").unwrap().username, "u2");
        }
        let err = AuthFile::parse(br#"{"kind": "Secret", "data": {"other": "eA=="}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains(".dockerconfigjson"), "{err}");
    }

    #[test]
    fn key_normalisation_table() {
        let cases = [
            ("quay.io", "quay.io"),
            ("https://quay.io", "quay.io"),
            ("http://quay.io/", "quay.io"),
            ("https://index.docker.io/v1/", "docker.io"),
            ("registry-1.docker.io", "docker.io"),
            ("https://r.example.com/v2/", "r.example.com"),
            ("r.example.com/ns/repo/", "r.example.com/ns/repo"),
            ("index.docker.io/library", "docker.io/library"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_auth_key(input), want, "{input}");
        }
    }

    #[test]
    fn error_table_never_leaks() {
        let colonless = b64("hunter2secret");
        let cases = [
            ("[]".to_owned(), "$: not a JSON object"),
            (r#"{"auths": []}"#.to_owned(), "$.auths: not an object"),
            (
                format!(r#"{{"auths": {{"quay.io": "{PASSWORD}"}}}}"#),
                "$.auths[\"quay.io\"]: not an object",
            ),
            (
                format!(r#"{{"auths": {{"quay.io": {{"auth": "{PASSWORD}!"}}}}}}"#),
                "$.auths[\"quay.io\"].auth: not valid base64",
            ),
            (
                format!(r#"{{"auths": {{"quay.io": {{"auth": "{colonless}"}}}}}}"#),
                "$.auths[\"quay.io\"].auth: decoded value is not username:password",
            ),
            (
                r#"{"auths": {"quay.io": {"auth": 5}}}"#.to_owned(),
                "$.auths[\"quay.io\"].auth: not a string",
            ),
            (
                r#"{"auths": {"quay.io": {"username": "u", "password": 7}}}"#.to_owned(),
                "$.auths[\"quay.io\"].password: not a string",
            ),
            (
                format!(r#"{{"auths": {{"quay.io": {{"auth": "{PASSWORD}"#),
                "not valid JSON",
            ),
        ];
        for (body, needle) in cases {
            let err = AuthFile::parse(body.as_bytes()).unwrap_err();
            let (msg, dbg) = (err.to_string(), format!("{err:?}"));
            assert!(msg.contains(needle), "{msg}");
            for text in [&msg, &dbg] {
                assert!(!text.contains("hunter2"), "{text}");
                assert!(!text.contains(&colonless), "{text}");
            }
        }
    }

    #[test]
    fn debug_redacts() {
        let f = AuthFile::parse(sample().as_bytes()).unwrap();
        let cred = f.lookup("quay.io", "x").unwrap();
        let dbg = format!("{cred:?}");
        assert!(
            dbg.contains("u1") && dbg.contains("Secret(<redacted>)"),
            "{dbg}"
        );
        assert!(!dbg.contains("hunter2"), "{dbg}");
        let all = format!("{f:?}");
        assert!(!all.contains("hunter2"), "{all}");
    }

    #[test]
    fn candidates_table() {
        let env = AuthEnv {
            registry_auth_file: Some("/env/auth.json".into()),
            xdg_runtime_dir: Some("/run/user/1000".into()),
            home: Some("/home/me".into()),
        };
        let cases: [(Option<&Path>, AuthEnv, Vec<&str>); 3] = [
            (Some(Path::new("/x.json")), env.clone(), vec!["/x.json"]),
            (
                None,
                env,
                vec![
                    "/env/auth.json",
                    "/run/user/1000/containers/auth.json",
                    "/home/me/.docker/config.json",
                ],
            ),
            (None, AuthEnv::default(), vec![]),
        ];
        for (explicit, env, want) in cases {
            let got = auth_file_candidates(explicit, &env);
            let want: Vec<PathBuf> = want.into_iter().map(PathBuf::from).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn load_files() {
        let t = tempfile::tempdir().unwrap();
        let first = t.path().join("first.json");
        let second = t.path().join("second.json");
        let missing = t.path().join("missing.json");
        fs::write(
            &first,
            format!(
                r#"{{"auths":{{"quay.io/org":{{"auth":"{}"}}}}}}"#,
                b64("a:p1")
            ),
        )
        .unwrap();
        fs::write(
            &second,
            format!(
                r#"{{"auths":{{"quay.io/org/repo":{{"auth":"{}"}},"ghcr.io":{{"auth":"{}"}}}}}}"#,
                b64("b:p2"),
                b64("c:p3")
            ),
        )
        .unwrap();
        let creds = Credentials::load(&[missing.clone(), first.clone(), second.clone()]).unwrap();
        assert_eq!(creds.files().count(), 2);
        assert_eq!(
            creds.describe_sources(),
            format!(
                "{} (not found), {}, {}",
                missing.display(),
                first.display(),
                second.display()
            )
        );
        assert_eq!(creds.lookup_source("ghcr.io", "x"), Some(second.as_path()));
        assert_eq!(Credentials::default().describe_sources(), "no auth files");
        // The first file with a match wins, even if a later file has a longer match.
        assert_eq!(creds.lookup("quay.io", "org/repo").unwrap().username, "a");
        assert_eq!(creds.lookup("ghcr.io", "x/y").unwrap().username, "c");
        assert_eq!(creds.lookup("docker.io", "library/x"), None);

        let bad = t.path().join("bad.json");
        fs::write(
            &bad,
            format!(r#"{{"auths":{{"q":{{"auth":"{PASSWORD}"}}}}}}"#),
        )
        .unwrap();
        let err = Credentials::load(&[first, bad.clone()]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&bad.display().to_string()), "{msg}");
        assert!(msg.contains("$.auths[\"q\"].auth"), "{msg}");
        assert!(!msg.contains("hunter2") && !format!("{err:?}").contains("hunter2"));

        let err = Credentials::load(std::slice::from_ref(&t.path().to_path_buf())).unwrap_err();
        assert!(matches!(err, AuthError::Read { .. }), "{err}");
    }
}
