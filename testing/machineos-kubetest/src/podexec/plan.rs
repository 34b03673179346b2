//! The pure part of the test kubelet: from a Pod (JSON, as stored) and the ConfigMaps and
//! Secrets it references, the [`PodPlan`] of what to lay out on disk and what to run; and
//! the kubelet's rules for the termination message.
//!
//! Contract:
//! * Re-rooting ([`reroot`]): the pod sees the host filesystem except that every absolute
//!   path the pod spec names — volume `mountPath`s, env values starting with `/`,
//!   `workingDir`, `terminationMessagePath` — is moved under the pod's own root directory
//!   (`<pod dir>/root`). Paths are normalised lexically (`.` dropped, `..` never climbs
//!   above the root). Literal paths inside a script or in `command`/`args` are *not*
//!   re-rooted (they are the host's), except through `$(VAR)` references to env values.
//! * Volumes are materialised under `<pod dir>/volumes/<volume name>` and each volume mount
//!   is a symbolic link at its re-rooted `mountPath` to that directory (two mounts of one
//!   `emptyDir` share it). `configMap` (`items` key→path, or every key; `data` as UTF-8,
//!   `binaryData` base64-decoded), `secret` (same shape under `secretName`; `data`
//!   base64-decoded, `stringData` as UTF-8 since this store does not fold it into `data`),
//!   `projected` (`configMap`/`secret` sources into one directory) and `emptyDir` (an empty
//!   directory) are supported, with `items[].mode`/`defaultMode` (default 0644) and
//!   `optional`. Item paths must be relative without `..` (as the API server validates).
//! * A missing ConfigMap/Secret or key (not `optional`) is a [`PlanError::is_config_error`]:
//!   the executor keeps the pod `Pending` with the container waiting in
//!   `CreateContainerConfigError` and this message, and retries on every store change (the
//!   real kubelet reports a missing *volume* source as `ContainerCreating` plus a
//!   `FailedMount` event; this harness uses the container reason so a controller sees the
//!   name in the pod status). Any other [`PlanError`] (an unsupported field, a bad path, no
//!   `command`) makes the pod fail at start (exit code 128, reason `StartError`).
//! * Environment ([`PodPlan::env`]): `PATH` ([`DEFAULT_PATH`]), `HOSTNAME` (the pod name),
//!   `HOME` (`/root` re-rooted) as the runtime sets them, then the first container's `env`
//!   entries with a `value`, each expanded (`$(VAR)` references to earlier entries, `$$`
//!   escapes — the kubelet's expansion rules) and then re-rooted when it starts with `/`
//!   (except `PATH`, a search list),
//!   then `CONTAINERS_STORAGE_CONF` naming the pod's own `storage.conf` ([`storage_conf`]:
//!   driver `vfs`, graph and run roots inside the pod directory). `valueFrom` and `envFrom`
//!   are unsupported (start error naming the field).
//! * Command: the first container's `command` then `args`, `$(VAR)`-expanded with the final
//!   environment; `command[0]` is run from the host as is (absolute) or looked up in `PATH`.
//!   No `command` (the image's entrypoint) is unsupported. Only the first container runs;
//!   `initContainers`, `subPath` mounts and other volume types are unsupported.
//! * Termination message ([`termination_message`]): the last [`MAX_TERMINATION_MESSAGE`]
//!   bytes of the file at the re-rooted `terminationMessagePath` (default
//!   `/dev/termination-log`, created empty before start); when that is empty or missing,
//!   the policy is `FallbackToLogsOnError` and the container failed (non-zero exit), the
//!   last [`FALLBACK_LOG_LINES`] lines of the log, at most [`FALLBACK_LOG_BYTES`] bytes
//!   (the kubelet's `readLastStringFromContainerLogs`).
//!
//! Hand-written: the kubelet's volume, environment and expansion rules are small and this
//! harness needs them on plain JSON, without a Kubernetes client library.

use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

/// The pod's re-rooted filesystem, under its directory.
pub const ROOT_DIR: &str = "root";
/// Where volumes are materialised, under the pod's directory.
pub const VOLUMES_DIR: &str = "volumes";
/// The pod's containers storage (graph and run roots), under its directory.
pub const STORAGE_DIR: &str = "storage";
/// The pod's containers `storage.conf`, under its directory.
pub const STORAGE_CONF: &str = "storage.conf";
/// The kubelet's limit on a termination message file (`MaxContainerTerminationMessageLength`).
pub const MAX_TERMINATION_MESSAGE: usize = 4096;
/// How many log lines the `FallbackToLogsOnError` message keeps.
pub const FALLBACK_LOG_LINES: usize = 80;
/// How many bytes of those lines it keeps.
pub const FALLBACK_LOG_BYTES: usize = 2048;
/// The default `terminationMessagePath`.
pub const DEFAULT_TERMINATION_PATH: &str = "/dev/termination-log";
/// The `PATH` a container starts with (the usual image default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The mode of projected files without `mode`/`defaultMode` (the API default, 0644).
pub const DEFAULT_MODE: u32 = 0o644;

/// The kind of object a volume projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A core/v1 ConfigMap.
    ConfigMap,
    /// A core/v1 Secret.
    Secret,
}

impl SourceKind {
    /// The lower-case name the kubelet's messages use (`configmap`, `secret`).
    pub fn lower(self) -> &'static str {
        match self {
            SourceKind::ConfigMap => "configmap",
            SourceKind::Secret => "secret",
        }
    }

    fn key_word(self) -> &'static str {
        match self {
            SourceKind::ConfigMap => "config",
            SourceKind::Secret => "secret",
        }
    }
}

/// Why a pod cannot be laid out or started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A referenced ConfigMap/Secret does not exist.
    #[error("{} \"{name}\" not found (referenced by {field})", kind.lower())]
    NotFound {
        /// ConfigMap or Secret.
        kind: SourceKind,
        /// Its name.
        name: String,
        /// The JSON path of the reference.
        field: String,
    },
    /// A key named by `items` is not in the object.
    #[error("{} references non-existent {} key: {key} (at {field})", kind.lower(), kind.key_word())]
    MissingKey {
        /// ConfigMap or Secret.
        kind: SourceKind,
        /// Its name.
        name: String,
        /// The key.
        key: String,
        /// The JSON path of the item.
        field: String,
    },
    /// A `binaryData` (ConfigMap) or `data` (Secret) value is not base64.
    #[error("{} \"{name}\": {key} is not valid base64 (read for {field})", kind.lower())]
    BadBase64 {
        /// ConfigMap or Secret.
        kind: SourceKind,
        /// Its name.
        name: String,
        /// The key.
        key: String,
        /// The JSON path of the volume.
        field: String,
    },
    /// A field this kubelet does not implement.
    #[error("{field}: {what} is not supported by the test kubelet")]
    Unsupported {
        /// The JSON path.
        field: String,
        /// What is unsupported.
        what: String,
    },
    /// A path that is not absolute (mount paths) or not relative and inside (item paths).
    #[error("{field}: path {path:?} {why}")]
    BadPath {
        /// The JSON path.
        field: String,
        /// The path.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A volume mount names no volume of the pod.
    #[error("{field}: no volume named {name:?}")]
    UnknownVolume {
        /// The JSON path of the mount.
        field: String,
        /// The volume name.
        name: String,
    },
}

impl PlanError {
    /// A missing ConfigMap/Secret or key: the pod waits in `CreateContainerConfigError`
    /// until it appears (every other error fails the pod).
    pub fn is_config_error(&self) -> bool {
        matches!(
            self,
            PlanError::NotFound { .. } | PlanError::MissingKey { .. }
        )
    }
}

/// A file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Where (parents are created).
    pub path: PathBuf,
    /// The bytes.
    pub contents: Vec<u8>,
    /// The permission bits.
    pub mode: u32,
}

/// What to lay out for one pod and what to run in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPlan {
    /// The pod's directory (everything below is inside it).
    pub dir: PathBuf,
    /// The pod's re-rooted filesystem (`dir/root`).
    pub root: PathBuf,
    /// Directories to create (volumes, `HOME`, working directory, storage).
    pub dirs: Vec<PathBuf>,
    /// Files to write (volume contents, `storage.conf`, the empty termination log).
    pub files: Vec<PlannedFile>,
    /// Symbolic links `(link, target)`: each volume mount at its re-rooted `mountPath`.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// The first container's name.
    pub container: String,
    /// The program (`command[0]`).
    pub program: String,
    /// The rest of `command`, then `args`.
    pub args: Vec<String>,
    /// The environment, in order (a later entry of the same name wins).
    pub env: Vec<(String, String)>,
    /// The working directory (re-rooted `workingDir`, else the root).
    pub working_dir: PathBuf,
    /// The re-rooted `terminationMessagePath`.
    pub termination_message_path: PathBuf,
    /// `terminationMessagePolicy: FallbackToLogsOnError`.
    pub fallback_to_logs: bool,
}

/// `path` (absolute) moved under `root`, normalised lexically; `None` when `path` is not
/// absolute.
pub fn reroot(root: &Path, path: &str) -> Option<PathBuf> {
    if !path.starts_with('/') {
        return None;
    }
    let mut out = root.to_path_buf();
    let mut depth = 0usize;
    for c in Path::new(path).components() {
        match c {
            Component::Normal(n) => {
                out.push(n);
                depth += 1;
            }
            Component::ParentDir if depth > 0 => {
                out.pop();
                depth -= 1;
            }
            _ => {}
        }
    }
    Some(out)
}

/// A projected item's relative path, checked: not empty, not absolute, no `..`.
fn relative(field: &str, path: &str) -> Result<PathBuf, PlanError> {
    let bad = |why| PlanError::BadPath {
        field: field.to_string(),
        path: path.to_string(),
        why,
    };
    if path.is_empty() {
        return Err(bad("is empty"));
    }
    if path.starts_with('/') {
        return Err(bad("must be relative"));
    }
    let p = Path::new(path);
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(bad("must not contain '..'"));
    }
    Ok(p.components().collect())
}

/// The kubelet's `$(VAR)` expansion: a defined `VAR` is replaced by its value, an undefined
/// one is kept as written, `$$` is one `$`, and a `$` not followed by `(` or `$` is kept.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            match b[i + 1] {
                b'$' => {
                    out.push(b'$');
                    i += 2;
                }
                b'(' => match b[i + 2..].iter().position(|&c| c == b')') {
                    Some(end) => {
                        let name = String::from_utf8_lossy(&b[i + 2..i + 2 + end]);
                        match lookup(&name) {
                            Some(v) => out.extend_from_slice(v.as_bytes()),
                            None => out.extend_from_slice(&b[i..i + 3 + end]),
                        }
                        i += 3 + end;
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        i += 2;
                    }
                },
                _ => {
                    out.push(b'$');
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `storage.conf` giving a pod (or build) its own containers storage under `dir`
/// (driver `vfs`, so nothing is shared with `/var/lib/containers`).
pub fn storage_conf(dir: &Path) -> String {
    let q = |p: PathBuf| {
        let s = p.to_string_lossy().into_owned();
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    };
    format!(
        "# The test kubelet's per-pod containers storage.\n[storage]\ndriver = \"vfs\"\ngraphroot = {}\nrunroot = {}\n",
        q(dir.join(STORAGE_DIR).join("graph")),
        q(dir.join(STORAGE_DIR).join("run")),
    )
}

/// The last `n` bytes of `data`.
pub fn tail_bytes(data: &[u8], n: usize) -> &[u8] {
    &data[data.len().saturating_sub(n)..]
}

/// The last [`FALLBACK_LOG_LINES`] lines of `log`, at most [`FALLBACK_LOG_BYTES`] bytes
/// (lossy UTF-8): the kubelet's message for `FallbackToLogsOnError`.
pub fn log_tail(log: &[u8]) -> String {
    // The start of the last FALLBACK_LOG_LINES lines: a final newline ends the last line,
    // it does not begin another.
    let body = log.strip_suffix(b"\n").unwrap_or(log);
    let mut start = 0;
    let mut seen = 0;
    for (i, &c) in body.iter().enumerate().rev() {
        if c == b'\n' {
            seen += 1;
            if seen == FALLBACK_LOG_LINES {
                start = i + 1;
                break;
            }
        }
    }
    String::from_utf8_lossy(tail_bytes(&log[start..], FALLBACK_LOG_BYTES)).into_owned()
}

/// The container's termination message: `file` (the termination message file's content,
/// `None` when it is missing) cut to its last [`MAX_TERMINATION_MESSAGE`] bytes, or, when
/// that is empty, `fallback_to_logs` and `exit_code != 0`, [`log_tail`] of `log`.
pub fn termination_message(
    file: Option<&[u8]>,
    exit_code: i32,
    fallback_to_logs: bool,
    log: &[u8],
) -> String {
    let data = file
        .map(|f| tail_bytes(f, MAX_TERMINATION_MESSAGE))
        .unwrap_or_default();
    if data.is_empty() && fallback_to_logs && exit_code != 0 {
        return log_tail(log);
    }
    String::from_utf8_lossy(data).into_owned()
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn mode_of(v: &Value, key: &str) -> Option<u32> {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|m| u32::try_from(m).ok())
}

/// The decoded key/value pairs of a ConfigMap or Secret.
fn object_data(
    kind: SourceKind,
    name: &str,
    obj: &Value,
    field: &str,
) -> Result<Vec<(String, Vec<u8>)>, PlanError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut put = |k: &str, v: Vec<u8>| match out.iter_mut().find(|(n, _)| n == k) {
        Some(e) => e.1 = v,
        None => out.push((k.to_string(), v)),
    };
    let map = |key: &str| obj.get(key).and_then(Value::as_object).cloned();
    let decode = |k: &str, v: &Value| {
        b64.decode(v.as_str().unwrap_or("").as_bytes())
            .map_err(|_| PlanError::BadBase64 {
                kind,
                name: name.to_string(),
                key: k.to_string(),
                field: field.to_string(),
            })
    };
    match kind {
        SourceKind::ConfigMap => {
            for (k, v) in map("data").unwrap_or_default() {
                put(&k, v.as_str().unwrap_or("").as_bytes().to_vec());
            }
            for (k, v) in map("binaryData").unwrap_or_default() {
                put(&k, decode(&k, &v)?);
            }
        }
        SourceKind::Secret => {
            for (k, v) in map("data").unwrap_or_default() {
                put(&k, decode(&k, &v)?);
            }
            for (k, v) in map("stringData").unwrap_or_default() {
                put(&k, v.as_str().unwrap_or("").as_bytes().to_vec());
            }
        }
    }
    Ok(out)
}

/// The files one ConfigMap/Secret source projects into `dir`.
#[allow(clippy::too_many_arguments)]
fn project(
    kind: SourceKind,
    src: &Value,
    name_key: &str,
    default_mode: u32,
    dir: &Path,
    field: &str,
    lookup: &dyn Fn(SourceKind, &str) -> Option<Value>,
    files: &mut Vec<PlannedFile>,
) -> Result<(), PlanError> {
    let name = str_at(src, name_key).unwrap_or("");
    let optional = src.get("optional").and_then(Value::as_bool) == Some(true);
    let Some(obj) = lookup(kind, name) else {
        if optional {
            return Ok(());
        }
        return Err(PlanError::NotFound {
            kind,
            name: name.to_string(),
            field: format!("{field}.{name_key}"),
        });
    };
    let data = object_data(kind, name, &obj, field)?;
    let mode = mode_of(src, "defaultMode").unwrap_or(default_mode);
    match src.get("items").and_then(Value::as_array) {
        Some(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                let ifield = format!("{field}.items[{i}]");
                let key = str_at(item, "key").unwrap_or("");
                let Some((_, bytes)) = data.iter().find(|(k, _)| k == key) else {
                    if optional {
                        continue;
                    }
                    return Err(PlanError::MissingKey {
                        kind,
                        name: name.to_string(),
                        key: key.to_string(),
                        field: ifield,
                    });
                };
                let path = str_at(item, "path").unwrap_or("");
                let rel = relative(&format!("{ifield}.path"), path)?;
                files.push(PlannedFile {
                    path: dir.join(rel),
                    contents: bytes.clone(),
                    mode: mode_of(item, "mode").unwrap_or(mode),
                });
            }
        }
        _ => {
            for (k, bytes) in data {
                let rel = relative(&format!("{field} key {k:?}"), &k)?;
                files.push(PlannedFile {
                    path: dir.join(rel),
                    contents: bytes,
                    mode,
                });
            }
        }
    }
    Ok(())
}

/// Lays out volume `v` (`spec.volumes[i]`) in `dir`.
fn plan_volume(
    v: &Value,
    i: usize,
    dir: &Path,
    lookup: &dyn Fn(SourceKind, &str) -> Option<Value>,
    files: &mut Vec<PlannedFile>,
) -> Result<(), PlanError> {
    let field = format!("spec.volumes[{i}]");
    if v.get("emptyDir").is_some() {
        return Ok(());
    }
    if let Some(cm) = v.get("configMap") {
        return project(
            SourceKind::ConfigMap,
            cm,
            "name",
            DEFAULT_MODE,
            dir,
            &format!("{field}.configMap"),
            lookup,
            files,
        );
    }
    if let Some(sec) = v.get("secret") {
        return project(
            SourceKind::Secret,
            sec,
            "secretName",
            DEFAULT_MODE,
            dir,
            &format!("{field}.secret"),
            lookup,
            files,
        );
    }
    if let Some(p) = v.get("projected") {
        let mode = mode_of(p, "defaultMode").unwrap_or(DEFAULT_MODE);
        let sources = p
            .get("sources")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (j, s) in sources.iter().enumerate() {
            let sfield = format!("{field}.projected.sources[{j}]");
            if let Some(cm) = s.get("configMap") {
                let f = format!("{sfield}.configMap");
                project(
                    SourceKind::ConfigMap,
                    cm,
                    "name",
                    mode,
                    dir,
                    &f,
                    lookup,
                    files,
                )?;
            } else if let Some(sec) = s.get("secret") {
                let f = format!("{sfield}.secret");
                project(
                    SourceKind::Secret,
                    sec,
                    "name",
                    mode,
                    dir,
                    &f,
                    lookup,
                    files,
                )?;
            } else {
                return Err(PlanError::Unsupported {
                    field: sfield,
                    what: "a projected source other than configMap or secret".into(),
                });
            }
        }
        return Ok(());
    }
    let kind = v
        .as_object()
        .and_then(|m| m.keys().find(|k| *k != "name").cloned())
        .unwrap_or_else(|| "<none>".into());
    Err(PlanError::Unsupported {
        field,
        what: format!("volume type {kind}"),
    })
}

/// Plans pod `pod` in directory `dir`, reading the ConfigMaps and Secrets of its namespace
/// through `lookup` (see the module documentation).
pub fn plan_pod(
    pod: &Value,
    dir: &Path,
    lookup: &dyn Fn(SourceKind, &str) -> Option<Value>,
) -> Result<PodPlan, PlanError> {
    let spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    let unsupported = |field: &str, what: &str| PlanError::Unsupported {
        field: field.to_string(),
        what: what.to_string(),
    };
    if spec
        .get("initContainers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        return Err(unsupported("spec.initContainers", "an init container"));
    }
    let c = spec
        .pointer("/containers/0")
        .cloned()
        .ok_or_else(|| unsupported("spec.containers", "a pod without containers"))?;
    let root = dir.join(ROOT_DIR);
    let vdir = dir.join(VOLUMES_DIR);
    let mut dirs = vec![root.clone()];
    let mut files = Vec::new();
    let volumes = spec
        .get("volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        let name = str_at(v, "name").unwrap_or("");
        let d = vdir.join(relative(&format!("spec.volumes[{i}].name"), name)?);
        plan_volume(v, i, &d, lookup, &mut files)?;
        dirs.push(d);
    }
    let mut links = Vec::new();
    let mounts = c
        .get("volumeMounts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, m) in mounts.iter().enumerate() {
        let field = format!("spec.containers[0].volumeMounts[{i}]");
        if m.get("subPath").is_some() || m.get("subPathExpr").is_some() {
            return Err(unsupported(&field, "subPath"));
        }
        let name = str_at(m, "name").unwrap_or("");
        if !volumes.iter().any(|v| str_at(v, "name") == Some(name)) {
            return Err(PlanError::UnknownVolume {
                field,
                name: name.to_string(),
            });
        }
        let mp = str_at(m, "mountPath").unwrap_or("");
        let link = reroot(&root, mp)
            .filter(|l| *l != root)
            .ok_or_else(|| PlanError::BadPath {
                field: format!("{field}.mountPath"),
                path: mp.to_string(),
                why: "must be absolute and not /",
            })?;
        links.push((link, vdir.join(name)));
    }
    // Environment: the runtime's defaults, then the container's, then the storage.
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), DEFAULT_PATH.into()),
        ("HOSTNAME".into(), pod_name.into()),
        ("HOME".into(), "/root".into()),
    ];
    if c.get("envFrom")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        return Err(unsupported("spec.containers[0].envFrom", "envFrom"));
    }
    let entries = c
        .get("env")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        let field = format!("spec.containers[0].env[{i}]");
        let name = str_at(e, "name").unwrap_or("").to_string();
        if e.get("valueFrom").is_some() {
            return Err(unsupported(&format!("{field}.valueFrom"), "valueFrom"));
        }
        let raw = str_at(e, "value").unwrap_or("");
        let value = {
            let lookup = |n: &str| {
                env.iter()
                    .rev()
                    .find(|(k, _)| k == n)
                    .map(|(_, v)| v.clone())
            };
            expand(raw, &lookup)
        };
        env.push((name, value));
    }
    // Re-root every absolute value (the default HOME too), but not a search path.
    for (k, v) in env.iter_mut() {
        if k != "PATH"
            && let Some(p) = reroot(&root, v)
        {
            *v = p.to_string_lossy().into_owned();
        }
    }
    env.push((
        "CONTAINERS_STORAGE_CONF".into(),
        dir.join(STORAGE_CONF).to_string_lossy().into_owned(),
    ));
    if let Some((_, home)) = env.iter().rev().find(|(k, _)| k == "HOME")
        && Path::new(home).starts_with(&root)
    {
        dirs.push(PathBuf::from(home));
    }
    let final_lookup = |n: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    let strings = |key: &str| -> Vec<String> {
        c.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|s| expand(s.as_str().unwrap_or(""), &final_lookup))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut command = strings("command");
    if command.is_empty() {
        return Err(unsupported(
            "spec.containers[0].command",
            "a container without command (the image's entrypoint)",
        ));
    }
    let program = command.remove(0);
    let mut args = command;
    args.extend(strings("args"));
    let working_dir = match str_at(&c, "workingDir").filter(|w| !w.is_empty()) {
        Some(w) => reroot(&root, w).ok_or_else(|| PlanError::BadPath {
            field: "spec.containers[0].workingDir".into(),
            path: w.to_string(),
            why: "must be absolute",
        })?,
        None => root.clone(),
    };
    dirs.push(working_dir.clone());
    let tpath = str_at(&c, "terminationMessagePath")
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_TERMINATION_PATH);
    let termination_message_path =
        reroot(&root, tpath)
            .filter(|p| *p != root)
            .ok_or_else(|| PlanError::BadPath {
                field: "spec.containers[0].terminationMessagePath".into(),
                path: tpath.to_string(),
                why: "must be absolute and not /",
            })?;
    files.push(PlannedFile {
        path: termination_message_path.clone(),
        contents: Vec::new(),
        mode: 0o666,
    });
    files.push(PlannedFile {
        path: dir.join(STORAGE_CONF),
        contents: storage_conf(dir).into_bytes(),
        mode: DEFAULT_MODE,
    });
    dirs.push(dir.join(STORAGE_DIR));
    Ok(PodPlan {
        dir: dir.to_path_buf(),
        root,
        dirs,
        files,
        links,
        container: str_at(&c, "name").unwrap_or("").to_string(),
        program,
        args,
        env,
        working_dir,
        termination_message_path,
        fallback_to_logs: str_at(&c, "terminationMessagePolicy") == Some("FallbackToLogsOnError"),
    })
}

/// The `data` of a ConfigMap or Secret, decoded (for the build executor's inputs).
pub fn source_data(
    kind: SourceKind,
    name: &str,
    obj: &Value,
    field: &str,
) -> Result<Vec<(String, Vec<u8>)>, PlanError> {
    object_data(kind, name, obj, field)
}
