//! Names, labels, annotations and owner references of the per-build objects.
//!
//! Contract: every name returned is a valid Kubernetes object name for its kind and every
//! label value a valid label value, whatever the build's name:
//!
//! * ConfigMap and Secret names (`containerfile-<build>`, `mc-<build>`, `mc-<build>-<i>`,
//!   `pull-<build>`) are DNS subdomains of at most 253 characters; the Job name
//!   (`build-<build>`) has at most 63, because the Job controller copies it into the
//!   `job-name` and `batch.kubernetes.io/job-name` labels of its pods (the API server
//!   rejects longer Job names). A build is named `<pool>-<32 hex>`, so a pool name of more
//!   than 24 characters makes `build-<build>` too long. The OpenShift Build has the Job's
//!   name, fitted the same way ([`build_name`]): its pod's `openshift.io/build.name` label
//!   carries it too, and one name per build whatever the backend keeps selectors simple.
//! * A name or label value that does not fit is **shortened, not refused**: its first
//!   characters, then `-` and the first 10 hex digits of the SHA-256 of the whole original
//!   (see [`fit_name`] and [`label_value`]). Different builds keep different names unless
//!   two long names share the prefix and a 40-bit hash prefix.
//! * Label values the MCO sets to object names (the rendered MachineConfig, the pool, the
//!   MachineOSConfig, the MachineOSBuild) go through [`label_value`]; when one is shortened
//!   the object also carries an annotation with the same key and the full value, so nothing
//!   is lost. Select objects of a build with [`label_value`] of its name.
//!
//! Simplification: the MCO's optional `has-etc-pki-entitlement`/`has-etc-yum-repos-d`/
//! `has-etc-pki-rpm-gpg` annotations are not produced (no entitlement inputs yet).

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Label on every ephemeral build object (value `""`).
pub const EPHEMERAL_BUILD_OBJECT_LABEL: &str =
    "machineconfiguration.openshift.io/ephemeral-build-object";
/// Label on every object on-cluster layering creates or manages (value `""`).
pub const ON_CLUSTER_LAYERING_LABEL: &str = "machineconfiguration.openshift.io/on-cluster-layering";
/// Label and annotation: the build's MachineOSConfig.
pub use machineos_vocab::build::MACHINE_OS_CONFIG_LABEL as MACHINE_OS_CONFIG_KEY;
/// Label: the rendered MachineConfig the build builds.
pub use machineos_vocab::build::RENDERED_MACHINE_CONFIG_LABEL;
/// Label: the pool the build builds for.
pub use machineos_vocab::build::TARGET_POOL_LABEL;
/// Label and annotation: the MachineOSBuild.
pub const MACHINE_OS_BUILD_KEY: &str = "machineconfiguration.openshift.io/machine-os-build";

/// API version of the MachineOSBuild, the owner of every per-build object.
pub const MACHINE_OS_BUILD_API_VERSION: &str = "machineconfiguration.openshift.io/v1";
/// Kind of the owner of every per-build object.
pub const MACHINE_OS_BUILD_KIND: &str = "MachineOSBuild";

/// Longest object name that is a DNS subdomain (ConfigMaps).
pub const MAX_NAME: usize = 253;
/// Longest Job name (it becomes a label value on the Job's pods).
pub const MAX_JOB_NAME: usize = 63;
/// Longest label value.
pub const MAX_LABEL_VALUE: usize = 63;
/// Hex digits of the SHA-256 kept when a name or value is shortened.
const HASH_HEX: usize = 10;

/// Who a build is: the names its objects are derived from and labelled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildMeta {
    /// The MachineOSBuild's name.
    pub build: String,
    /// The MachineOSBuild's `metadata.uid` (the owner reference of every object).
    pub build_uid: String,
    /// The MachineOSConfig's name.
    pub machine_os_config: String,
    /// The target MachineConfigPool's name.
    pub pool: String,
    /// The rendered MachineConfig's name.
    pub rendered_machine_config: String,
}

/// `name` if it has at most `max` bytes, else its first bytes (without trailing `-`/`.`),
/// `-` and 10 hex digits of its SHA-256; the result has at most `max` bytes.
pub fn fit_name(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = short_hash(name);
    let keep = max.saturating_sub(HASH_HEX + 1);
    let prefix = truncate_chars(name, keep).trim_end_matches(['-', '.']);
    if prefix.is_empty() {
        hash
    } else {
        format!("{prefix}-{hash}")
    }
}

/// `value` if it is a valid label value (at most 63 characters of `[A-Za-z0-9._-]`, starting
/// and ending with an alphanumeric, or empty); else a valid label value derived from it: its
/// first characters (invalid ones replaced by `-`, ends trimmed to alphanumerics), `-` and
/// 10 hex digits of the SHA-256 of the whole original. Deterministic, so selectors can use it.
pub fn label_value(value: &str) -> String {
    if is_valid_label_value(value) {
        return value.to_owned();
    }
    let hash = short_hash(value);
    let cleaned: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let keep = MAX_LABEL_VALUE - HASH_HEX - 1;
    let prefix = truncate_chars(&cleaned, keep).trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if prefix.is_empty() {
        hash
    } else {
        format!("{prefix}-{hash}")
    }
}

/// Whether `value` is a valid Kubernetes label value.
pub fn is_valid_label_value(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let bytes = value.as_bytes();
    value.len() <= MAX_LABEL_VALUE
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// The Containerfile ConfigMap's name: `containerfile-<build>` (fitted to 253).
pub fn containerfile_config_map_name(build: &str) -> String {
    fit_name(&format!("containerfile-{build}"), MAX_NAME)
}

/// The MachineConfig ConfigMap's name when it fits in one: `mc-<build>` (fitted to 253).
pub fn machine_config_config_map_name(build: &str) -> String {
    fit_name(&format!("mc-{build}"), MAX_NAME)
}

/// The name of part `index` of a split MachineConfig: `mc-<build>-<index>` (the base fitted
/// so that the whole stays within 253).
pub fn machine_config_part_name(build: &str, index: usize) -> String {
    let suffix = format!("-{index}");
    let base = fit_name(&format!("mc-{build}"), MAX_NAME - suffix.len());
    format!("{base}{suffix}")
}

/// The build Job's name: `build-<build>`, fitted to 63 characters.
pub fn job_name(build: &str) -> String {
    fit_name(&format!("build-{build}"), MAX_JOB_NAME)
}

/// The merged pull Secret's name: `pull-<build>` (fitted to 253).
pub fn pull_secret_name(build: &str) -> String {
    fit_name(&format!("pull-{build}"), MAX_NAME)
}

/// The OpenShift Build's name: the Job's, `build-<build>` fitted to 63 characters.
pub fn build_name(build: &str) -> String {
    job_name(build)
}

/// The labels of every per-build object (the MCO's six, values through [`label_value`]).
pub fn labels(meta: &BuildMeta) -> Map<String, Value> {
    let mut labels = Map::new();
    labels.insert(EPHEMERAL_BUILD_OBJECT_LABEL.into(), json!(""));
    labels.insert(ON_CLUSTER_LAYERING_LABEL.into(), json!(""));
    for (key, value) in named_labels(meta) {
        labels.insert(key.into(), json!(label_value(value)));
    }
    labels
}

/// The annotations of every per-build object: the MachineOSConfig's and the MachineOSBuild's
/// names, and the full value of every label [`label_value`] shortened.
pub fn annotations(meta: &BuildMeta) -> Map<String, Value> {
    let mut annotations = Map::new();
    annotations.insert(MACHINE_OS_CONFIG_KEY.into(), json!(meta.machine_os_config));
    annotations.insert(MACHINE_OS_BUILD_KEY.into(), json!(meta.build));
    for (key, value) in named_labels(meta) {
        if label_value(value) != value {
            annotations.insert(key.into(), json!(value));
        }
    }
    annotations
}

/// The owner reference to the MachineOSBuild: `controller` and `blockOwnerDeletion` as
/// given (true for the Job, false for the ConfigMaps).
pub fn build_owner_reference(meta: &BuildMeta, controller: bool) -> Value {
    json!({
        "apiVersion": MACHINE_OS_BUILD_API_VERSION,
        "kind": MACHINE_OS_BUILD_KIND,
        "name": meta.build,
        "uid": meta.build_uid,
        "controller": controller,
        "blockOwnerDeletion": controller,
    })
}

/// `metadata` of a per-build object: name, namespace, labels, annotations, and an owner
/// reference to the MachineOSBuild.
pub fn object_meta(meta: &BuildMeta, name: &str, namespace: &str, controller: bool) -> Value {
    json!({
        "name": name,
        "namespace": namespace,
        "labels": labels(meta),
        "annotations": annotations(meta),
        "ownerReferences": [build_owner_reference(meta, controller)],
    })
}

fn named_labels(meta: &BuildMeta) -> [(&'static str, &str); 4] {
    [
        (RENDERED_MACHINE_CONFIG_LABEL, &meta.rendered_machine_config),
        (TARGET_POOL_LABEL, &meta.pool),
        (MACHINE_OS_CONFIG_KEY, &meta.machine_os_config),
        (MACHINE_OS_BUILD_KEY, &meta.build),
    ]
}

fn short_hash(value: &str) -> String {
    let digest = hex::encode(Sha256::digest(value.as_bytes()));
    digest[..HASH_HEX].to_owned()
}

/// The longest prefix of `s` with at most `max` bytes that ends on a character boundary.
fn truncate_chars(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
