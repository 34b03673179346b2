//! The OpenShift build controller and builder for the test API server: [`BuildExecutor`]
//! runs every new `build.openshift.io/v1` Build with the Docker strategy for real, with
//! `buildah` on this machine (as root), so a controller's OpenShift Build backend is tested
//! end to end. `builds.build.openshift.io` is a built-in resource of the store (namespaced,
//! `status` subresource; see [`crate::resource`]), so no CRD needs installing.
//!
//! Contract (field names and reasons as openshift/api `build/v1`, messages as the
//! openshift build controller's):
//! * On every store change (and every [`crate::http::watch::POLL`]), each Build in phase
//!   empty, `New` or `Pending`, not being deleted and not yet started, is planned
//!   ([`plan_build`]) from its namespace's ConfigMaps and Secrets:
//!   - `spec.output.to` present but not `kind: DockerImage` with a `name` → phase `New`,
//!     reason `InvalidOutputReference`, message `Output image could not be resolved.`
//!     (retried); no `spec.output.to` at all → built and not pushed (openshift/builder:
//!     "Build complete, no image push requested"), `Complete` without a digest;
//!   - `spec.output.pushSecret` missing → phase `New`, reason `MissingPushSecret`, message
//!     `Missing push secret.` (retried, as the real controller waits for it);
//!   - a missing source ConfigMap/Secret, pull secret or key → phase `Pending` with the
//!     kubelet's `… not found` message (the build pod would wait in
//!     `CreateContainerConfigError`; retried);
//!   - anything unsupported → phase `Error`, reason `CannotCreateBuildPodSpec`, message
//!     `Failed to create pod spec.`, the detail in `logSnippet`;
//!   - `status.cancelled: true` before it started → phase `Cancelled`.
//! * Otherwise it is written `Pending` (with `outputDockerImageReference` =
//!   `spec.output.to.name`) then `Running` (`startTimestamp`), and built in its directory
//!   `<work_dir>/builds/<namespace>/<name>-<uid>`: `context/` holds `spec.source.dockerfile`
//!   at `spec.strategy.dockerStrategy.dockerfilePath` (default `Dockerfile`) and each
//!   `spec.source.configMaps[]`/`secrets[]` entry's keys as files under
//!   `context/<destinationDir>/`; `spec.strategy.dockerStrategy.pullSecret` and
//!   `spec.output.pushSecret` (Secrets with `.dockerconfigjson`, or legacy `.dockercfg`)
//!   become auth files; each `spec.strategy.dockerStrategy.volumes[]` (`BuildVolume`,
//!   ConfigMap or Secret source, all keys or its `items` at their paths) is laid out under
//!   `volumes/<name>/` and mounted read-only at each `mounts[].destinationPath` of the RUN
//!   steps (`--volume DIR:DEST:ro`, as openshift/builder's transient mounts; the name must
//!   be a DNS label, the path absolute without `..` or `:`). Then, with the build's own
//!   containers storage
//!   (`CONTAINERS_STORAGE_CONF`, vfs) and [`crate::podexec::ExecSettings::extra_env`]:
//!   `buildah bud --storage-driver vfs --isolation chroot [--authfile PULL] [--no-cache]
//!   [--build-arg K=V]… [--label K=V]… [--volume …]… -f DOCKERFILE [-t NAME] CONTEXT`,
//!   then (with an output) `buildah push
//!   --storage-driver vfs [--authfile PUSH] --digestfile F NAME`.
//! * Success → phase `Complete`, `status.output.to.imageDigest` (the pushed manifest's
//!   digest), `completionTimestamp`, `duration` (nanoseconds, Go's `time.Duration` JSON:
//!   completion − start at the store clock's second precision, as the real controller
//!   computes it from the two timestamps). Failure → phase `Failed`, reason
//!   `DockerBuildFailed` (`Docker build strategy has failed.`) or, when the push failed,
//!   `PushImageToRegistryFailed` (`Failed to push the image to the registry.`),
//!   `logSnippet` = the last 80 lines / 2048 bytes of the log (the build pod's
//!   `FallbackToLogsOnError` message), and the timestamps and duration.
//! * `status.cancelled: true` written by a client while it runs → the buildah process group
//!   is killed and the phase is `Cancelled`, reason `CancelledBuild`, message `The build was
//!   cancelled by the user.`. A Build deleted (or replaced) while it runs → killed, no
//!   status written. Every status write goes through the `status` subresource, read and
//!   written under one store lock (a client's concurrent `cancelled` is never lost).
//! * The log (both commands' output) stays readable with [`BuildExecutor::log`]; the build
//!   directory (storage included) is removed afterwards unless `keep_dirs`.
//! * Simplifications: no build pod object is created (nor the `openshift.io/build.pod-name`
//!   annotation), no BuildConfig, ImageStream or `Serial` run policy, no
//!   `completionDeadlineSeconds`, no stages; unsupported (→ `Error`): strategies other than
//!   Docker, `source.git`/`binary`/`images`, `dockerStrategy.from`/`env`, `valueFrom` build
//!   args, `postCommit` hooks, CSI build volumes. buildah pulls each stage's `FROM` image
//!   when the stage starts; openshift/builder pulls every one before the build (so there a
//!   stage cannot start `FROM` an image an earlier stage pushes).
//!
//! Hand-written: the build controller's state machine is a few status writes around two
//! buildah commands.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use crate::http::Shared;
use crate::http::table::parse_rfc3339;
use crate::podexec::plan::{
    DEFAULT_MODE, DEFAULT_PATH, PlanError, PlannedFile, STORAGE_CONF, STORAGE_DIR, SourceKind,
    log_tail, source_data, storage_conf,
};
use crate::podexec::process::{self, Proc, SharedLog};
use crate::podexec::{ExecSettings, create_dirs, drive, remove_dir_safely, source_gr, write_files};
use crate::resource::GroupResource;
use crate::store::{Store, WriteOptions};

const W: WriteOptions = WriteOptions { dry_run: false };

/// `StatusReasonInvalidOutputReference` and its message.
pub const INVALID_OUTPUT: (&str, &str) = (
    "InvalidOutputReference",
    "Output image could not be resolved.",
);
/// `StatusReasonMissingPushSecret` and its message.
pub const MISSING_PUSH_SECRET: (&str, &str) = ("MissingPushSecret", "Missing push secret.");
/// `StatusReasonCannotCreateBuildPodSpec` and its message.
pub const CANNOT_CREATE_SPEC: (&str, &str) =
    ("CannotCreateBuildPodSpec", "Failed to create pod spec.");
/// `StatusReasonDockerBuildFailed` and its message.
pub const DOCKER_BUILD_FAILED: (&str, &str) =
    ("DockerBuildFailed", "Docker build strategy has failed.");
/// `StatusReasonPushImageToRegistryFailed` and its message.
pub const PUSH_FAILED: (&str, &str) = (
    "PushImageToRegistryFailed",
    "Failed to push the image to the registry.",
);
/// `StatusReasonCancelledBuild` and its message.
pub const CANCELLED: (&str, &str) = ("CancelledBuild", "The build was cancelled by the user.");

fn builds() -> GroupResource {
    GroupResource::new("build.openshift.io", "builds")
}

/// Why a Build cannot be run (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildPlanError {
    /// `spec.output.to` is not a `DockerImage` with a name.
    #[error("spec.output.to: {detail}")]
    InvalidOutput {
        /// What is wrong.
        detail: String,
    },
    /// The push secret does not exist.
    #[error("secret \"{name}\" not found (referenced by spec.output.pushSecret.name)")]
    MissingPushSecret {
        /// Its name.
        name: String,
    },
    /// An input ConfigMap/Secret (missing, bad data, bad path).
    #[error(transparent)]
    Input(PlanError),
    /// A field this build controller does not implement.
    #[error("{field}: {what} is not supported by the test build controller")]
    Unsupported {
        /// The JSON path.
        field: String,
        /// What.
        what: String,
    },
}

/// What to lay out and run for one Build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPlan {
    /// The build's directory.
    pub dir: PathBuf,
    /// The build context (`dir/context`).
    pub context: PathBuf,
    /// The image to build and push (`spec.output.to.name`); `None`: no `spec.output`, built
    /// and not pushed.
    pub output: Option<String>,
    /// Directories to create.
    pub dirs: Vec<PathBuf>,
    /// Files to write (Dockerfile, sources, auth files, `storage.conf`).
    pub files: Vec<PlannedFile>,
    /// `buildah` arguments of the build.
    pub bud_args: Vec<String>,
    /// `buildah` arguments of the push.
    pub push_args: Vec<String>,
    /// Where the push writes the digest.
    pub digest_file: PathBuf,
    /// The environment (before `extra_env`).
    pub env: Vec<(String, String)>,
}

fn s_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn non_empty(v: &Value, p: &str) -> bool {
    match v.pointer(p) {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// A relative directory/file path inside the context.
fn inside(field: &str, p: &str) -> Result<PathBuf, BuildPlanError> {
    let bad = |why| {
        BuildPlanError::Input(PlanError::BadPath {
            field: field.to_string(),
            path: p.to_string(),
            why,
        })
    };
    if p.starts_with('/') {
        return Err(bad("must be relative"));
    }
    let path = Path::new(p);
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(bad("must not contain '..'"));
    }
    Ok(path.components().collect())
}

/// The auth file a dockerconfigjson (or legacy dockercfg) Secret gives.
fn auth_file(secret: &Value, name: &str, field: &str) -> Result<Vec<u8>, BuildPlanError> {
    let data =
        source_data(SourceKind::Secret, name, secret, field).map_err(BuildPlanError::Input)?;
    let get = |k: &str| data.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Some(j) = get(".dockerconfigjson") {
        return Ok(j);
    }
    if let Some(c) = get(".dockercfg") {
        let parsed: Value = serde_json::from_slice(&c).unwrap_or(Value::Null);
        return Ok(json!({"auths": parsed}).to_string().into_bytes());
    }
    Err(BuildPlanError::Input(PlanError::MissingKey {
        kind: SourceKind::Secret,
        name: name.to_string(),
        key: ".dockerconfigjson".into(),
        field: field.to_string(),
    }))
}

/// Plans Build `build` in `dir`, reading its namespace's ConfigMaps and Secrets through
/// `lookup` (see the module documentation).
pub fn plan_build(
    build: &Value,
    dir: &Path,
    lookup: &dyn Fn(SourceKind, &str) -> Option<Value>,
) -> Result<BuildPlan, BuildPlanError> {
    let spec = build.get("spec").cloned().unwrap_or(Value::Null);
    let unsupported = |field: &str, what: &str| BuildPlanError::Unsupported {
        field: field.to_string(),
        what: what.to_string(),
    };
    let kind = s_at(&spec, "/output/to/kind").unwrap_or("");
    let output = match (kind, s_at(&spec, "/output/to/name")) {
        // No output: "Build complete, no image push requested" (openshift/builder).
        _ if !non_empty(&spec, "/output/to") => None,
        ("DockerImage", Some(n)) => Some(n.to_string()),
        ("DockerImage", None) => {
            return Err(BuildPlanError::InvalidOutput {
                detail: "name is required".into(),
            });
        }
        (k, _) => {
            return Err(BuildPlanError::InvalidOutput {
                detail: format!("kind {k:?} is not DockerImage"),
            });
        }
    };
    let push_secret = s_at(&spec, "/output/pushSecret/name").filter(|_| output.is_some());
    let push = match push_secret {
        Some(n) => Some((
            n,
            lookup(SourceKind::Secret, n).ok_or_else(|| BuildPlanError::MissingPushSecret {
                name: n.to_string(),
            })?,
        )),
        None => None,
    };
    match s_at(&spec, "/strategy/type") {
        Some("Docker") | None => {}
        Some(t) => return Err(unsupported("spec.strategy.type", &format!("strategy {t}"))),
    }
    for (p, what) in [
        ("/source/git", "a git source"),
        ("/source/binary", "a binary source"),
        ("/source/images", "image sources"),
        ("/strategy/dockerStrategy/from", "dockerStrategy.from"),
        ("/strategy/dockerStrategy/env", "dockerStrategy.env"),
        ("/postCommit/script", "a postCommit hook"),
        ("/postCommit/command", "a postCommit hook"),
        ("/postCommit/args", "a postCommit hook"),
    ] {
        if non_empty(&spec, p) {
            return Err(unsupported(&format!("spec{}", p.replace('/', ".")), what));
        }
    }
    let context = dir.join("context");
    let mut files = Vec::new();
    let dfpath = s_at(&spec, "/strategy/dockerStrategy/dockerfilePath").unwrap_or("Dockerfile");
    let dockerfile = context.join(inside(
        "spec.strategy.dockerStrategy.dockerfilePath",
        dfpath,
    )?);
    if let Some(d) = spec.pointer("/source/dockerfile").and_then(Value::as_str) {
        files.push(PlannedFile {
            path: dockerfile.clone(),
            contents: d.as_bytes().to_vec(),
            mode: DEFAULT_MODE,
        });
    }
    for (list, kind, key) in [
        ("configMaps", SourceKind::ConfigMap, "configMap"),
        ("secrets", SourceKind::Secret, "secret"),
    ] {
        let entries = spec
            .pointer(&format!("/source/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, e) in entries.iter().enumerate() {
            let field = format!("spec.source.{list}[{i}]");
            let name = s_at(e, &format!("/{key}/name")).unwrap_or("");
            let obj = lookup(kind, name).ok_or_else(|| {
                BuildPlanError::Input(PlanError::NotFound {
                    kind,
                    name: name.to_string(),
                    field: format!("{field}.{key}.name"),
                })
            })?;
            let dest = inside(
                &format!("{field}.destinationDir"),
                s_at(e, "/destinationDir").unwrap_or(""),
            )?;
            for (k, bytes) in
                source_data(kind, name, &obj, &field).map_err(BuildPlanError::Input)?
            {
                let rel = inside(&format!("{field} key {k:?}"), &k)?;
                files.push(PlannedFile {
                    path: context.join(&dest).join(rel),
                    contents: bytes,
                    mode: DEFAULT_MODE,
                });
            }
        }
    }
    let mut bud_args: Vec<String> = ["bud", "--storage-driver", "vfs", "--isolation", "chroot"]
        .map(String::from)
        .to_vec();
    let mut push_args: Vec<String> = ["push", "--storage-driver", "vfs"]
        .map(String::from)
        .to_vec();
    if let Some(n) = s_at(&spec, "/strategy/dockerStrategy/pullSecret/name") {
        let field = "spec.strategy.dockerStrategy.pullSecret.name";
        let secret = lookup(SourceKind::Secret, n).ok_or_else(|| {
            BuildPlanError::Input(PlanError::NotFound {
                kind: SourceKind::Secret,
                name: n.to_string(),
                field: field.into(),
            })
        })?;
        let path = dir.join("auth").join("pull.json");
        files.push(PlannedFile {
            path: path.clone(),
            contents: auth_file(&secret, n, field)?,
            mode: 0o600,
        });
        bud_args.extend(["--authfile".into(), path.to_string_lossy().into_owned()]);
    }
    if let Some((n, secret)) = push {
        let path = dir.join("auth").join("push.json");
        files.push(PlannedFile {
            path: path.clone(),
            contents: auth_file(&secret, n, "spec.output.pushSecret.name")?,
            mode: 0o600,
        });
        push_args.extend(["--authfile".into(), path.to_string_lossy().into_owned()]);
    }
    if spec.pointer("/strategy/dockerStrategy/noCache") == Some(&Value::Bool(true)) {
        bud_args.push("--no-cache".into());
    }
    let build_args = spec
        .pointer("/strategy/dockerStrategy/buildArgs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, a) in build_args.iter().enumerate() {
        if a.get("valueFrom").is_some() {
            return Err(unsupported(
                &format!("spec.strategy.dockerStrategy.buildArgs[{i}].valueFrom"),
                "valueFrom",
            ));
        }
        let name = s_at(a, "/name").unwrap_or("");
        let value = a.get("value").and_then(Value::as_str).unwrap_or("");
        bud_args.extend(["--build-arg".into(), format!("{name}={value}")]);
    }
    let labels = spec
        .pointer("/output/imageLabels")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for l in &labels {
        let name = s_at(l, "/name").unwrap_or("");
        let value = l.get("value").and_then(Value::as_str).unwrap_or("");
        bud_args.extend(["--label".into(), format!("{name}={value}")]);
    }
    let volumes = spec
        .pointer("/strategy/dockerStrategy/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        let (volume_files, mounts) = plan_volume(v, i, dir, lookup)?;
        files.extend(volume_files);
        for (host, dest) in mounts {
            bud_args.extend(["--volume".into(), format!("{}:{dest}:ro", host.display())]);
        }
    }
    let digest_file = dir.join("digest");
    bud_args.extend(["-f".into(), dockerfile.to_string_lossy().into_owned()]);
    if let Some(output) = &output {
        bud_args.extend(["-t".into(), output.clone()]);
        push_args.extend([
            "--digestfile".into(),
            digest_file.to_string_lossy().into_owned(),
            output.clone(),
        ]);
    } else {
        push_args.clear();
    }
    bud_args.push(context.to_string_lossy().into_owned());
    files.push(PlannedFile {
        path: dir.join(STORAGE_CONF),
        contents: storage_conf(dir).into_bytes(),
        mode: DEFAULT_MODE,
    });
    let home = dir.join("home");
    let env = vec![
        ("PATH".to_string(), DEFAULT_PATH.to_string()),
        ("HOME".to_string(), home.to_string_lossy().into_owned()),
        (
            "CONTAINERS_STORAGE_CONF".to_string(),
            dir.join(STORAGE_CONF).to_string_lossy().into_owned(),
        ),
    ];
    Ok(BuildPlan {
        dir: dir.to_path_buf(),
        dirs: vec![context.clone(), home, dir.join(STORAGE_DIR)],
        context,
        output,
        files,
        bud_args,
        push_args,
        digest_file,
        env,
    })
}

/// A build volume's directory on this machine and where the RUN steps see it.
type VolumeMount = (PathBuf, String);

/// A build volume (`spec.strategy.dockerStrategy.volumes[i]`, openshift/api `BuildVolume`):
/// its source's keys (all, or `items` mapped to their paths) as files under
/// `dir/volumes/<name>`, and each mount's `(that directory, destinationPath)`. The real
/// builder mounts them read-only into RUN steps (openshift/builder
/// `pkg/build/builder/transient_mounts.go`); `destinationPath` must be absolute, without
/// `..` or `:` (openshift/api's field documentation). CSI sources are not supported here.
fn plan_volume(
    v: &Value,
    i: usize,
    dir: &Path,
    lookup: &dyn Fn(SourceKind, &str) -> Option<Value>,
) -> Result<(Vec<PlannedFile>, Vec<VolumeMount>), BuildPlanError> {
    let field = format!("spec.strategy.dockerStrategy.volumes[{i}]");
    let name = s_at(v, "/name").unwrap_or("");
    if name.len() > 63 || !crate::meta::is_label(name) {
        return Err(BuildPlanError::Input(PlanError::BadPath {
            field: format!("{field}.name"),
            path: name.to_string(),
            why: "must be a DNS label",
        }));
    }
    let (kind, key, obj_name) = match s_at(v, "/source/type") {
        Some("ConfigMap") => (
            SourceKind::ConfigMap,
            "configMap",
            s_at(v, "/source/configMap/name"),
        ),
        Some("Secret") => (
            SourceKind::Secret,
            "secret",
            s_at(v, "/source/secret/secretName"),
        ),
        other => {
            return Err(BuildPlanError::Unsupported {
                field: format!("{field}.source.type"),
                what: format!("volume source {other:?}"),
            });
        }
    };
    let obj_name = obj_name.unwrap_or("");
    let source_field = format!("{field}.source.{key}");
    let obj = lookup(kind, obj_name).ok_or_else(|| {
        BuildPlanError::Input(PlanError::NotFound {
            kind,
            name: obj_name.to_string(),
            field: source_field.clone(),
        })
    })?;
    let data = source_data(kind, obj_name, &obj, &source_field).map_err(BuildPlanError::Input)?;
    let root = dir.join("volumes").join(name);
    let mut files = Vec::new();
    match v
        .pointer(&format!("/source/{key}/items"))
        .and_then(Value::as_array)
    {
        Some(items) => {
            for (j, item) in items.iter().enumerate() {
                let k = s_at(item, "/key").unwrap_or("");
                let bytes = data.iter().find(|(n, _)| n == k).ok_or_else(|| {
                    BuildPlanError::Input(PlanError::MissingKey {
                        kind,
                        name: obj_name.to_string(),
                        key: k.to_string(),
                        field: format!("{source_field}.items[{j}].key"),
                    })
                })?;
                let path = s_at(item, "/path").unwrap_or(k);
                files.push(PlannedFile {
                    path: root.join(inside(&format!("{source_field}.items[{j}].path"), path)?),
                    contents: bytes.1.clone(),
                    mode: DEFAULT_MODE,
                });
            }
        }
        None => {
            for (k, bytes) in data {
                files.push(PlannedFile {
                    path: root.join(inside(&format!("{source_field} key {k:?}"), &k)?),
                    contents: bytes,
                    mode: DEFAULT_MODE,
                });
            }
        }
    }
    let mut mounts = Vec::new();
    let list = v
        .pointer("/mounts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (j, m) in list.iter().enumerate() {
        let dest = s_at(m, "/destinationPath").unwrap_or("");
        let bad = |why| {
            BuildPlanError::Input(PlanError::BadPath {
                field: format!("{field}.mounts[{j}].destinationPath"),
                path: dest.to_string(),
                why,
            })
        };
        if !dest.starts_with('/') {
            return Err(bad("must be an absolute path"));
        }
        if dest.contains(':') || dest.split('/').any(|c| c == "..") {
            return Err(bad("must not contain '..' or ':'"));
        }
        mounts.push((root.clone(), dest.to_string()));
    }
    Ok((files, mounts))
}

/// How a finished build ended (for [`finished_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildEnd {
    /// Built, and pushed with this digest (`None`: no output, nothing pushed).
    Complete {
        /// `sha256:…`.
        digest: Option<String>,
    },
    /// Failed with this reason and message (one of the constants), and log snippet.
    Failed {
        /// `(reason, message)`.
        why: (&'static str, &'static str),
        /// The end of the log.
        log_snippet: String,
    },
    /// Cancelled by the user.
    Cancelled,
}

/// `status` with the end of a build at `now` (pure): phase, reason, message, output
/// digest, `completionTimestamp` and `duration` (from `startTimestamp`, in nanoseconds).
pub fn finished_status(status: &Value, end: &BuildEnd, now: &str) -> Value {
    let mut st: Map<String, Value> = status.as_object().cloned().unwrap_or_default();
    for k in ["reason", "message", "logSnippet"] {
        st.remove(k);
    }
    let (phase, why) = match end {
        BuildEnd::Complete { digest } => {
            if let Some(digest) = digest {
                st.insert("output".into(), json!({"to": {"imageDigest": digest}}));
            }
            ("Complete", None)
        }
        BuildEnd::Failed { why, log_snippet } => {
            if !log_snippet.is_empty() {
                st.insert("logSnippet".into(), json!(log_snippet));
            }
            ("Failed", Some(*why))
        }
        BuildEnd::Cancelled => ("Cancelled", Some(CANCELLED)),
    };
    st.insert("phase".into(), json!(phase));
    if let Some((reason, message)) = why {
        st.insert("reason".into(), json!(reason));
        st.insert("message".into(), json!(message));
    }
    st.insert("completionTimestamp".into(), json!(now));
    let start = st
        .get("startTimestamp")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339);
    if let (Some(s), Some(e)) = (start, parse_rfc3339(now)) {
        st.insert(
            "duration".into(),
            json!((e - s).max(0).saturating_mul(1_000_000_000)),
        );
    }
    Value::Object(st)
}

/// `status` with phase `phase`, `reason`/`message` set (or removed when `None`) (pure).
fn with_phase(status: &Value, phase: &str, why: Option<(&str, &str)>) -> Value {
    let mut st: Map<String, Value> = status.as_object().cloned().unwrap_or_default();
    st.insert("phase".into(), json!(phase));
    match why {
        Some((reason, message)) => {
            if reason.is_empty() {
                st.remove("reason");
            } else {
                st.insert("reason".into(), json!(reason));
            }
            st.insert("message".into(), json!(message));
        }
        None => {
            st.remove("reason");
            st.remove("message");
        }
    }
    Value::Object(st)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Run,
    Cancel,
    Delete,
}

struct RunningBuild {
    ns: String,
    name: String,
    stop: watch::Sender<Stop>,
}

#[derive(Default)]
struct State {
    started: HashSet<String>,
    running: HashMap<String, RunningBuild>,
    logs: HashMap<(String, String), SharedLog>,
    tasks: Vec<AbortHandle>,
}

struct Inner {
    shared: Arc<Shared>,
    settings: ExecSettings,
    state: Mutex<State>,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The OpenShift build controller that runs Builds with buildah (see the module
/// documentation). Stops, killing running builds, when dropped.
pub struct BuildExecutor {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for BuildExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildExecutor")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl BuildExecutor {
    /// Starts the controller on the current tokio runtime.
    pub fn spawn(shared: Arc<Shared>, settings: ExecSettings) -> BuildExecutor {
        let inner = Arc::new(Inner {
            shared: shared.clone(),
            settings,
            state: Mutex::new(State::default()),
        });
        let i = inner.clone();
        let task = drive(shared, move |s| step(&i, s));
        BuildExecutor { inner, task }
    }

    /// The log of Build `ns/name` so far (lossy UTF-8); `None` for a build never started.
    pub fn log(&self, ns: &str, name: &str) -> Option<String> {
        let log = self
            .inner
            .state()
            .logs
            .get(&(ns.to_string(), name.to_string()))
            .cloned()?;
        Some(String::from_utf8_lossy(&process::snapshot(&log)).into_owned())
    }

    /// How many builds are running now.
    pub fn running(&self) -> usize {
        self.inner.state().running.len()
    }

    /// Stops the controller and kills every running build.
    pub fn stop(&self) {
        self.task.abort();
        let tasks = std::mem::take(&mut self.inner.state().tasks);
        for t in tasks {
            t.abort();
        }
    }
}

impl Drop for BuildExecutor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn current_build(s: &Store, ns: &str, name: &str, uid: &str) -> Option<Value> {
    s.get(&builds(), Some(ns), name).ok().filter(|b| {
        str_at(b, "/metadata/uid") == uid && b.pointer("/metadata/deletionTimestamp").is_none()
    })
}

/// Writes the status `f` computes for Build `ns/name` if it is still `uid` and `f`
/// changes it. Whether it was written.
fn write_build_status(
    s: &mut Store,
    ns: &str,
    name: &str,
    uid: &str,
    f: impl FnOnce(&Value, &str) -> Value,
) -> bool {
    let Some(mut b) = current_build(s, ns, name, uid) else {
        return false;
    };
    let old = b.get("status").cloned().unwrap_or_else(|| json!({}));
    let new = f(&old, &s.now());
    if new == old {
        return true;
    }
    if let Some(m) = b.as_object_mut() {
        m.insert("status".into(), new);
    }
    s.update_status(&builds(), Some(ns), name, &b, W).is_ok()
}

fn cancelled(b: &Value) -> bool {
    b.pointer("/status/cancelled") == Some(&Value::Bool(true))
}

/// One pass of the build controller, under the store lock.
fn step(inner: &Arc<Inner>, s: &mut Store) {
    {
        let st = inner.state();
        for (uid, r) in &st.running {
            let stop = match current_build(s, &r.ns, &r.name, uid) {
                None => Stop::Delete,
                Some(b) if cancelled(&b) => Stop::Cancel,
                Some(_) => continue,
            };
            r.stop.send_if_modified(|v| {
                let change = *v == Stop::Run;
                if change {
                    *v = stop;
                }
                change
            });
        }
    }
    let candidates: Vec<Value> = s
        .objects()
        .filter(|(k, _)| k.gr == builds())
        .map(|(_, v)| v)
        .filter(|b| {
            matches!(str_at(b, "/status/phase"), "" | "New" | "Pending")
                && b.pointer("/metadata/deletionTimestamp").is_none()
        })
        .cloned()
        .collect();
    for b in candidates {
        let uid = str_at(&b, "/metadata/uid").to_string();
        if inner.state().started.contains(&uid) {
            continue;
        }
        start_build(inner, s, &b, uid);
    }
    inner.state().tasks.retain(|t| !t.is_finished());
}

fn start_build(inner: &Arc<Inner>, s: &mut Store, b: &Value, uid: String) {
    let ns = str_at(b, "/metadata/namespace").to_string();
    let name = str_at(b, "/metadata/name").to_string();
    if cancelled(b) {
        write_build_status(s, &ns, &name, &uid, |st, now| {
            finished_status(st, &BuildEnd::Cancelled, now)
        });
        return;
    }
    let dir = inner
        .settings
        .work_dir
        .join("builds")
        .join(&ns)
        .join(format!("{name}-{uid}"));
    let planned = {
        let lookup = |kind: SourceKind, n: &str| s.get(&source_gr(kind), Some(&ns), n).ok();
        plan_build(b, &dir, &lookup)
    };
    let plan = match planned {
        Ok(p) => p,
        Err(e) => {
            let detail = e.to_string();
            write_build_status(s, &ns, &name, &uid, |st, _| match &e {
                BuildPlanError::InvalidOutput { .. } => with_phase(st, "New", Some(INVALID_OUTPUT)),
                BuildPlanError::MissingPushSecret { .. } => {
                    with_phase(st, "New", Some(MISSING_PUSH_SECRET))
                }
                BuildPlanError::Input(p) if p.is_config_error() => {
                    with_phase(st, "Pending", Some(("", &detail)))
                }
                _ => {
                    let mut v = with_phase(st, "Error", Some(CANNOT_CREATE_SPEC));
                    if let Some(m) = v.as_object_mut() {
                        m.insert("logSnippet".into(), json!(detail));
                    }
                    v
                }
            });
            return;
        }
    };
    let output = plan.output.clone();
    let pending = write_build_status(s, &ns, &name, &uid, |st, _| {
        let mut v = with_phase(st, "Pending", None);
        if let Some(m) = v.as_object_mut() {
            m.insert("outputDockerImageReference".into(), json!(output));
        }
        v
    });
    let running = pending
        && write_build_status(s, &ns, &name, &uid, |st, now| {
            let mut v = with_phase(st, "Running", None);
            if let Some(m) = v.as_object_mut() {
                m.insert("startTimestamp".into(), json!(now));
            }
            v
        });
    if !running {
        return;
    }
    let (stop, stop_rx) = watch::channel(Stop::Run);
    let log: SharedLog = Arc::default();
    {
        let mut st = inner.state();
        st.started.insert(uid.clone());
        st.logs.insert((ns.clone(), name.clone()), log.clone());
        st.running.insert(
            uid.clone(),
            RunningBuild {
                ns: ns.clone(),
                name: name.clone(),
                stop,
            },
        );
    }
    let task = tokio::spawn(run_build(inner.clone(), ns, name, uid, plan, stop_rx, log));
    inner.state().tasks.push(task.abort_handle());
}

async fn run_build(
    inner: Arc<Inner>,
    ns: String,
    name: String,
    uid: String,
    plan: BuildPlan,
    stop: watch::Receiver<Stop>,
    log: SharedLog,
) {
    let end = execute(&inner, &plan, stop, &log).await;
    if let Some(end) = end {
        let shared = &inner.shared;
        let mut s = shared.lock();
        write_build_status(&mut s, &ns, &name, &uid, |st, now| {
            finished_status(st, &end, now)
        });
        shared.notify(s.resource_version());
    }
    inner.state().running.remove(&uid);
    if !inner.settings.keep_dirs {
        let dir = plan.dir.clone();
        let _ = tokio::task::spawn_blocking(move || remove_dir_safely(&dir)).await;
    }
}

/// Runs one buildah command; `Err` with the stop request when stopped.
async fn run_step(
    inner: &Inner,
    plan: &BuildPlan,
    args: &[String],
    stop: &mut watch::Receiver<Stop>,
    log: &SharedLog,
) -> Result<i32, Stop> {
    let mut env = plan.env.clone();
    env.extend(inner.settings.extra_env.iter().cloned());
    let mut proc = match Proc::spawn(&inner.settings.buildah, args, &env, &plan.dir, log) {
        Ok(p) => p,
        Err(e) => {
            process::append(
                log,
                format!("error: starting {}: {e}\n", inner.settings.buildah).as_bytes(),
            );
            return Ok(-1);
        }
    };
    let out = tokio::select! {
        code = proc.wait() => Ok(code),
        r = stop.wait_for(|v| *v != Stop::Run) => Err(r.map(|v| *v).unwrap_or(Stop::Delete)),
    };
    if out.is_err() {
        proc.kill();
    }
    proc.finish().await;
    out
}

/// Builds and pushes; the end to report (`None`: deleted, report nothing).
async fn execute(
    inner: &Inner,
    plan: &BuildPlan,
    mut stop: watch::Receiver<Stop>,
    log: &SharedLog,
) -> Option<BuildEnd> {
    let failed = |why, log: &SharedLog| BuildEnd::Failed {
        why,
        log_snippet: log_tail(&process::snapshot(log)),
    };
    let stopped = |s: Stop| match s {
        Stop::Cancel => Some(BuildEnd::Cancelled),
        _ => None,
    };
    let p = plan.clone();
    let laid_out = tokio::task::spawn_blocking(move || {
        create_dirs(&p.dirs)?;
        write_files(&p.files)
    })
    .await;
    let err = match laid_out {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => Some(e.to_string()),
    };
    if let Some(e) = err {
        process::append(
            log,
            format!("error: laying out the build: {e}\n").as_bytes(),
        );
        return Some(failed(DOCKER_BUILD_FAILED, log));
    }
    match run_step(inner, plan, &plan.bud_args, &mut stop, log).await {
        Err(s) => return stopped(s),
        Ok(0) => {}
        Ok(_) => return Some(failed(DOCKER_BUILD_FAILED, log)),
    }
    if plan.output.is_none() {
        process::append(log, b"Build complete, no image push requested\n");
        return Some(BuildEnd::Complete { digest: None });
    }
    match run_step(inner, plan, &plan.push_args, &mut stop, log).await {
        Err(s) => return stopped(s),
        Ok(0) => {}
        Ok(_) => return Some(failed(PUSH_FAILED, log)),
    }
    let path = plan.digest_file.clone();
    let digest = tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
        .await
        .ok()
        .and_then(Result::ok)
        .map(|d| d.trim().to_string())
        .unwrap_or_default();
    if digest.is_empty() {
        process::append(log, b"error: buildah push wrote no digest\n");
        return Some(failed(PUSH_FAILED, log));
    }
    Some(BuildEnd::Complete {
        digest: Some(digest),
    })
}
