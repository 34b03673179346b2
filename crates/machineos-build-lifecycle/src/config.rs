//! A pool's opt-in as configuration: [`resolve`] validates a MachineOSConfig — or the
//! legacy label + `on-cluster-build-config` ConfigMap, as an implicit one — into the
//! [`Effective`] settings a build uses (builder, push target, Secrets, Containerfiles,
//! [`RetentionPolicy`]), or a [`ConfigError`] naming the object and field; [`context`] says
//! whether the pool is ready to build, waiting (for a rendered config, a base image) or not
//! opted in. What [`crate::decide()`] and [`crate::retention()`] both start from.

use std::collections::BTreeMap;

use machineos_diagnostics::Retry;

use crate::action::{ObjectRef, Requeue};
use crate::identity::{BuildInputs, build_name, parse_push_spec, valid_tag};
use crate::observed::{Backend, Observed, OptIn, PoolObserved, SecretState};
use crate::vocab;
/// A pool's opt-in, validated: an implicit MachineOSConfig for the legacy path.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    /// The MachineOSConfig's name (the pool's for a legacy opt-in).
    pub machine_os_config: String,
    /// The owner of the pool's builds: the MachineOSConfig, or the pool (legacy).
    pub owner: ObjectRef,
    /// The legacy path.
    pub legacy: bool,
    /// Which backend builds.
    pub backend: Backend,
    /// Repository to push to.
    pub push_repository: String,
    /// The push spec's own tag, if it had one.
    pub extra_tag: Option<String>,
    /// Push Secret.
    pub push_secret: String,
    /// Base pull Secret.
    pub base_image_pull_secret: Option<String>,
    /// Containerfiles by architecture.
    pub containerfiles: BTreeMap<String, String>,
    /// The rebuild annotation is set.
    pub rebuild: bool,
    /// Retention.
    pub retention: RetentionPolicy,
}

/// A configuration error, naming the object and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The object at fault.
    pub object: Box<ObjectRef>,
    /// The field (JSON path or ConfigMap key), empty when the object itself is missing.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// `InvalidConfiguration` or `BuilderNotSupported`.
    pub reason: &'static str,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.object;
        match &o.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", o.kind, o.name)?,
            None => write!(f, "{} {}", o.kind, o.name)?,
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl machineos_diagnostics::Classify for ConfigError {
    fn reason(&self) -> &'static str {
        self.reason
    }
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// Where a pool stands before any build decision.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolContext {
    /// Not opted in: nothing to do.
    NotOptedIn,
    /// Bad configuration.
    Invalid(ConfigError),
    /// Opted in, waiting for an input (rendered config, base image).
    Waiting(Box<Effective>, Requeue),
    /// Ready: the target build is known.
    Ready {
        /// The configuration.
        eff: Box<Effective>,
        /// The inputs.
        inputs: BuildInputs,
        /// `<pool>-<hash>`.
        target: String,
    },
}

/// Validate the opt-in and compute the target build.
pub fn context(observed: &Observed, p: &PoolObserved) -> PoolContext {
    let eff = match resolve(observed, p) {
        Ok(None) => return PoolContext::NotOptedIn,
        Ok(Some(e)) => e,
        Err(e) => return PoolContext::Invalid(e),
    };
    let wait = |reason| Requeue {
        pool: p.pool.name.clone(),
        reason,
        retry: Retry::Transient,
        after_seconds: Some(30),
    };
    let rendered = match (&p.pool.rendered_config, &p.rendered) {
        (Some(want), Some(r)) if *want == r.name => r,
        _ => return PoolContext::Waiting(Box::new(eff), wait("WaitingForRenderedConfig")),
    };
    let Some(base) = &p.base_image else {
        if let Some(e) = &p.base_image_error {
            return PoolContext::Invalid(ConfigError {
                object: Box::new(e.object.clone()),
                field: e.field.clone(),
                message: e.message.clone(),
                reason: vocab::REASON_BASE_IMAGE_UNAVAILABLE,
            });
        }
        return PoolContext::Waiting(Box::new(eff), wait("WaitingForBaseImage"));
    };
    let inputs = BuildInputs {
        rendered_config: rendered.content_digest.clone(),
        base_image: base.clone(),
        extensions_image: rendered.extensions_image.clone(),
        containerfiles: eff.containerfiles.clone(),
        builder: Some(eff.backend),
        push_repository: eff.push_repository.clone(),
    };
    let target = build_name(&p.pool.name, &inputs);
    PoolContext::Ready {
        eff: Box::new(eff),
        inputs,
        target,
    }
}

const CONTAINERFILE_ARCHES: [&str; 5] = ["ARM64", "AMD64", "PPC64LE", "S390X", "NoArch"];
const MAX_CONTAINERFILE: usize = 4096;

/// The pool's opt-in, validated; `Ok(None)` when it has not opted in.
pub fn resolve(observed: &Observed, p: &PoolObserved) -> Result<Option<Effective>, ConfigError> {
    let pool = &p.pool;
    let ns = observed.namespace.as_str();
    let eff = match &p.opt_in {
        None => return Ok(None),
        Some(OptIn::MachineOSConfig(m)) => {
            let obj = ObjectRef {
                uid: Some(m.uid.clone()),
                ..ObjectRef::cluster("MachineOSConfig", &m.name)
            };
            let err = |field: &str, message: String| ConfigError {
                object: Box::new(ObjectRef::cluster("MachineOSConfig", &m.name)),
                field: field.to_owned(),
                message,
                reason: vocab::REASON_INVALID_CONFIGURATION,
            };
            if let Some((field, message)) = &m.unreadable {
                return Err(err(field, message.clone()));
            }
            let backend = match m.image_builder_type.as_str() {
                "Native" => Backend::Native,
                "Job" => Backend::Job,
                "OpenShiftBuild" => Backend::OpenShiftBuild,
                other => {
                    return Err(err(
                        "spec.imageBuilder.imageBuilderType",
                        format!(
                            "unsupported value {other:?}: supported values: \"Native\", \"Job\", \"OpenShiftBuild\""
                        ),
                    ));
                }
            };
            let (repo, tag) = parse_push_spec(&m.rendered_image_push_spec)
                .map_err(|e| err("spec.renderedImagePushSpec", e))?;
            secret(observed, &m.rendered_image_push_secret, true)
                .map_err(|e| err("spec.renderedImagePushSecret.name", e))?;
            if let Some(s) = &m.base_image_pull_secret {
                secret(observed, s, true).map_err(|e| err("spec.baseImagePullSecret.name", e))?;
            }
            let mut containerfiles = BTreeMap::new();
            for (i, (arch, content)) in m.containerfiles.iter().enumerate() {
                let arch = if arch.is_empty() {
                    "NoArch"
                } else {
                    arch.as_str()
                };
                if !CONTAINERFILE_ARCHES.contains(&arch) {
                    return Err(err(
                        &format!("spec.containerFile[{i}].containerfileArch"),
                        format!(
                            "unsupported value {arch:?}: supported values: {CONTAINERFILE_ARCHES:?}"
                        ),
                    ));
                }
                if content.len() > MAX_CONTAINERFILE {
                    return Err(err(
                        &format!("spec.containerFile[{i}].content"),
                        format!(
                            "is {} bytes long, more than {MAX_CONTAINERFILE}",
                            content.len()
                        ),
                    ));
                }
                if containerfiles
                    .insert(arch.to_owned(), content.clone())
                    .is_some()
                {
                    return Err(err(
                        &format!("spec.containerFile[{i}].containerfileArch"),
                        format!("duplicate value {arch:?}"),
                    ));
                }
            }
            let retention = RetentionPolicy::from_annotations(&m.annotations)
                .map_err(|(key, e)| err(&format!("metadata.annotations[{key}]"), e))?;
            Effective {
                machine_os_config: m.name.clone(),
                owner: obj,
                legacy: false,
                backend,
                push_repository: repo,
                extra_tag: tag,
                push_secret: m.rendered_image_push_secret.clone(),
                base_image_pull_secret: m.base_image_pull_secret.clone(),
                containerfiles,
                rebuild: m.annotations.contains_key(vocab::REBUILD_ANNOTATION),
                retention,
            }
        }
        Some(OptIn::Legacy(l)) => {
            let cm = ObjectRef::namespaced("ConfigMap", ns, vocab::ON_CLUSTER_BUILD_CONFIG);
            let err = |field: &str, message: String| ConfigError {
                object: Box::new(cm.clone()),
                field: field.to_owned(),
                message,
                reason: vocab::REASON_INVALID_CONFIGURATION,
            };
            let Some(data) = &l.config_map else {
                return Err(err(
                    "",
                    format!(
                        "not found; pool {} has the label {} and needs it",
                        pool.name,
                        vocab::LAYERING_ENABLED_LABEL
                    ),
                ));
            };
            let key = |k: &str| data.get(k).filter(|v| !v.is_empty());
            let field = |k: &str| format!("data.{k}");
            let spec = key(vocab::KEY_FINAL_IMAGE_PULLSPEC).ok_or_else(|| {
                err(
                    &field(vocab::KEY_FINAL_IMAGE_PULLSPEC),
                    "is required".into(),
                )
            })?;
            let (repo, tag) = parse_push_spec(spec)
                .map_err(|e| err(&field(vocab::KEY_FINAL_IMAGE_PULLSPEC), e))?;
            let push = key(vocab::KEY_FINAL_IMAGE_PUSH_SECRET).ok_or_else(|| {
                err(
                    &field(vocab::KEY_FINAL_IMAGE_PUSH_SECRET),
                    "is required".into(),
                )
            })?;
            secret(observed, push, true)
                .map_err(|e| err(&field(vocab::KEY_FINAL_IMAGE_PUSH_SECRET), e))?;
            let pull = key(vocab::KEY_BASE_IMAGE_PULL_SECRET);
            if let Some(s) = pull {
                secret(observed, s, true)
                    .map_err(|e| err(&field(vocab::KEY_BASE_IMAGE_PULL_SECRET), e))?;
            }
            let backend = match key(vocab::KEY_IMAGE_BUILDER_TYPE).map(String::as_str) {
                None => Backend::Native,
                Some("custom-pod-builder") => Backend::Job,
                Some("openshift-image-builder") => Backend::OpenShiftBuild,
                Some(other) => {
                    return Err(err(
                        &field(vocab::KEY_IMAGE_BUILDER_TYPE),
                        format!(
                            "unsupported value {other:?}: supported values: \"custom-pod-builder\", \"openshift-image-builder\", or none for the native builder"
                        ),
                    ));
                }
            };
            Effective {
                machine_os_config: pool.name.clone(),
                owner: ObjectRef {
                    uid: Some(pool.uid.clone()),
                    ..ObjectRef::cluster("MachineConfigPool", &pool.name)
                },
                legacy: true,
                backend,
                push_repository: repo,
                extra_tag: tag,
                push_secret: push.clone(),
                base_image_pull_secret: pull.cloned(),
                containerfiles: BTreeMap::new(),
                rebuild: false,
                retention: RetentionPolicy::default(),
            }
        }
    };
    // The build's name is also its image tag: at most 128 characters.
    if !valid_tag(&format!("{}-{}", pool.name, "0".repeat(32))) {
        return Err(ConfigError {
            object: Box::new(ObjectRef::cluster("MachineConfigPool", &pool.name)),
            field: "metadata.name".into(),
            message: "is too long for a build name that is also an image tag (<pool>-<32 hex> must be at most 128 characters)".into(),
            reason: vocab::REASON_INVALID_CONFIGURATION,
        });
    }
    if !observed.supported_backends.contains(&eff.backend) {
        let supported: Vec<&str> = observed
            .supported_backends
            .iter()
            .map(|b| b.as_str())
            .collect();
        let (object, field) = if eff.legacy {
            (
                ObjectRef::namespaced("ConfigMap", ns, vocab::ON_CLUSTER_BUILD_CONFIG),
                format!("data.{}", vocab::KEY_IMAGE_BUILDER_TYPE),
            )
        } else {
            (
                ObjectRef::cluster("MachineOSConfig", &eff.machine_os_config),
                "spec.imageBuilder.imageBuilderType".to_owned(),
            )
        };
        return Err(ConfigError {
            object: Box::new(object),
            field,
            message: format!(
                "the {} builder is not supported yet by this controller (supported: {}); no build was started",
                eff.backend.as_str(),
                supported.join(", ")
            ),
            reason: vocab::REASON_BUILDER_NOT_SUPPORTED,
        });
    }
    Ok(Some(eff))
}

fn secret(observed: &Observed, name: &str, required: bool) -> Result<(), String> {
    let ns = &observed.namespace;
    if name.is_empty() {
        return if required {
            Err("is required".into())
        } else {
            Ok(())
        };
    }
    match observed.secrets.get(name) {
        Some(SecretState::Usable) => Ok(()),
        Some(SecretState::Invalid(why)) => Err(format!("Secret {ns}/{name} is not usable: {why}")),
        None => Err(format!("Secret {ns}/{name} not found")),
    }
}

/// A retention policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// How many Succeeded builds to keep, newest first.
    pub keep_succeeded: usize,
    /// For how many seconds after they ended to keep Failed and Interrupted builds.
    pub keep_failed_seconds: i64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            keep_succeeded: 5,
            keep_failed_seconds: 86_400,
        }
    }
}

impl RetentionPolicy {
    /// The policy a MachineOSConfig's annotations give; `Err((key, why))` on a bad value.
    pub fn from_annotations(a: &BTreeMap<String, String>) -> Result<Self, (String, String)> {
        let mut p = RetentionPolicy::default();
        if let Some(v) = a.get(vocab::RETAIN_SUCCEEDED_ANNOTATION) {
            p.keep_succeeded = v.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                (
                    vocab::RETAIN_SUCCEEDED_ANNOTATION.to_owned(),
                    format!("{v:?} is not a whole number of at least 1"),
                )
            })?;
        }
        if let Some(v) = a.get(vocab::RETAIN_FAILED_SECONDS_ANNOTATION) {
            p.keep_failed_seconds = v.parse().ok().filter(|&n: &i64| n >= 0).ok_or_else(|| {
                (
                    vocab::RETAIN_FAILED_SECONDS_ANNOTATION.to_owned(),
                    format!("{v:?} is not a whole number of seconds"),
                )
            })?;
        }
        Ok(p)
    }
}
