//! The build Job `build-<build>`: one pod, one container running buildah.
//!
//! Contract (the MCO's `toBuildahPod`/`podToJob`, with the differences marked *machineos*):
//!
//! * `batch/v1` Job, owned by the MachineOSBuild (`controller` and `blockOwnerDeletion`
//!   true), `backoffLimit` from [`JobInputs::backoff_limit`] (default 3, so 4 attempts),
//!   `completions: 1`, `parallelism: 1`, no TTL; the MCO's labels and annotations on the Job
//!   and its pod template.
//! * Pod: `restartPolicy: Never`, `terminationGracePeriodSeconds` (default 10, the MCO's);
//!   optional `serviceAccountName` and `nodeSelector` `kubernetes.io/arch` (*machineos*: the
//!   MCO schedules on any architecture); `automountServiceAccountToken: false`
//!   (*machineos*): the pod needs **no API credentials**, because the digest comes back
//!   through the container's termination message, not a ConfigMap the pod writes.
//! * One container `build` ([`BUILD_CONTAINER`]), running `templates/build.sh` (included
//!   with `include_str!`, passed to `bash -c`): it lays out the build context from the
//!   mounted ConfigMaps (reassembling a split MachineConfig), then `buildah bud
//!   --storage-driver vfs --authfile <pull> --tag <tag> --file <Containerfile> <context>` and
//!   `buildah push --storage-driver vfs --authfile <push> --digestfile /dev/termination-log
//!   <tag>`. `terminationMessagePath: /dev/termination-log`, `terminationMessagePolicy:
//!   FallbackToLogsOnError`: on success the message is the digest the push wrote; on failure
//!   the file is empty, so the kubelet substitutes the last log lines (at most 80 lines /
//!   2048 bytes) — the failure's log tail for free. The kubelet creates that file writable
//!   by any user (kubernetes/kubernetes#31839), so uid 1000 can write it.
//! * Env: `BUILDAH_ISOLATION=chroot`, `STORAGE_DRIVER=vfs`, `HOME=/home/build`, `TAG`, and
//!   the paths the script reads.
//! * Volumes: the Containerfile ConfigMap at [`CONTAINERFILE_DIR`]; the MachineConfig
//!   ConfigMap(s) as one projected volume at [`MACHINECONFIG_DIR`] (every part under its
//!   own key); the `.dockerconfigjson` of the build's merged pull Secret `pull-<build>`
//!   ([`super::secrets`]: the push Secret's credentials, which read the native image the
//!   Containerfile starts `FROM`, and the base pull Secret's, which read the extensions
//!   image) as `config.json` under [`PULL_AUTH_DIR`], for `buildah bud`; the push
//!   Secret's as `config.json` under [`PUSH_AUTH_DIR`], for `buildah push` (so the push
//!   Secret must have a `.dockerconfigjson` key; the MCO mounts its canonicalized copy);
//!   emptyDirs for the build context ([`CONTEXT_DIR`]) and buildah's storage
//!   ([`STORAGE_DIR`]; vfs copies every layer).
//! * **Security.** The pod runs as uid/gid 1000 (`runAsNonRoot`), the `build` user of the
//!   `quay.io/buildah/stable` image, with every capability dropped but `SETUID` and
//!   `SETGID`, and `allowPrivilegeEscalation: true`. Why not fully restricted: rootless
//!   buildah maps the image's uids through a user namespace with `newuidmap`/`newgidmap`,
//!   which are file-capability (or setuid) binaries: they need `no_new_privs` off
//!   (`allowPrivilegeEscalation`) and `CAP_SETUID`/`CAP_SETGID` in the bounding set. Inside
//!   its own user namespace buildah gets a full capability set (the kernel resets the
//!   bounding set there), so the `chroot` isolation's bind mounts need nothing more. Without
//!   the uid mapping an OS image's files (owned by many uids) cannot be written. This
//!   passes the Pod Security `baseline` level, not `restricted`. The node's seccomp and
//!   AppArmor profiles must allow creating a user namespace and mounting inside it (the
//!   Kubernetes default, `Unconfined` seccomp, does; a `RuntimeDefault` that forbids
//!   `unshare(CLONE_NEWUSER)`, or Ubuntu's `apparmor_restrict_unprivileged_userns`, does
//!   not: those clusters need an Unconfined profile for this pod, not set here).
//!
//! Simplifications: no proxy variables, additional trust bundle, entitlement/yum-repo
//! volumes, resources or tolerations (the MCO has no resources or tolerations either).

use serde_json::{Value, json};

use super::configmaps::{CONTAINERFILE_KEY, MC_KEY, mc_part_key};
use super::names::{
    BuildMeta, containerfile_config_map_name, job_name, labels, machine_config_config_map_name,
    machine_config_part_name, object_meta, pull_secret_name,
};

/// The build script run by the pod's container.
pub const BUILD_SCRIPT: &str = include_str!("../../templates/build.sh");
/// The default builder image.
pub const DEFAULT_IMAGE: &str = "quay.io/buildah/stable:v1.39";
/// The default `backoffLimit`: 3 retries, 4 attempts (the MCO's).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// The default `terminationGracePeriodSeconds` (the MCO's).
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 10;
/// The name of the pod's only container.
pub const BUILD_CONTAINER: &str = "build";
/// The uid and gid the pod runs as (the buildah image's `build` user).
pub const BUILD_UID: i64 = 1000;
/// The build user's home.
pub const HOME_DIR: &str = "/home/build";
/// Where the Containerfile ConfigMap is mounted (file `Containerfile`).
pub const CONTAINERFILE_DIR: &str = "/tmp/containerfile";
/// Where the MachineConfig ConfigMap(s) are mounted (`machineconfig.json.gz` or its parts).
pub const MACHINECONFIG_DIR: &str = "/tmp/machineconfig";
/// Where the merged pull Secret `pull-<build>` is mounted (file `config.json`).
pub const PULL_AUTH_DIR: &str = "/tmp/base-image-pull-creds";
/// Where the push Secret is mounted (file `config.json`).
pub const PUSH_AUTH_DIR: &str = "/tmp/final-image-push-creds";
/// The build context the script lays out: `Containerfile` and
/// `machineconfig/machineconfig.json.gz` (the MCO's layout).
pub const CONTEXT_DIR: &str = "/home/build/context";
/// buildah's storage (rootless default under `$HOME`).
pub const STORAGE_DIR: &str = "/home/build/.local/share/containers";
/// The container's termination message file: the digest on success.
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// Everything the build Job is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInputs {
    /// The build.
    pub meta: BuildMeta,
    /// The namespace of the Job, its ConfigMaps and Secrets.
    pub namespace: String,
    /// Where to push (the MachineOSBuild's `renderedImagePushSpec`, a tagged pullspec).
    pub tag: String,
    /// The Secret (`kubernetes.io/dockerconfigjson`) to push with. (Pulls use the merged
    /// Secret `pull-<build>`, see [`super::secrets::merged_pull_secret`].)
    pub push_secret: String,
    /// How many MachineConfig ConfigMaps there are (1: `mc-<build>`; more: the parts).
    pub mc_parts: usize,
    /// The builder image (default [`DEFAULT_IMAGE`]).
    pub image: String,
    /// The Job's `backoffLimit` (default [`DEFAULT_BACKOFF_LIMIT`]).
    pub backoff_limit: i32,
    /// The pod's `terminationGracePeriodSeconds`.
    pub termination_grace_period_seconds: i64,
    /// The Job's `activeDeadlineSeconds`, if any.
    pub active_deadline_seconds: Option<i64>,
    /// The target architecture in Kubernetes' naming (`amd64`, `arm64`, `ppc64le`,
    /// `s390x`): the pod is scheduled on such a node. None: any node.
    pub arch: Option<String>,
    /// The pod's service account; None: the namespace's default.
    pub service_account: Option<String>,
}

impl JobInputs {
    /// Inputs with the defaults: one MachineConfig ConfigMap, [`DEFAULT_IMAGE`],
    /// [`DEFAULT_BACKOFF_LIMIT`], [`DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS`], no deadline,
    /// architecture or service account.
    pub fn new(
        meta: BuildMeta,
        namespace: impl Into<String>,
        tag: impl Into<String>,
        push_secret: impl Into<String>,
    ) -> Self {
        Self {
            meta,
            namespace: namespace.into(),
            tag: tag.into(),
            push_secret: push_secret.into(),
            mc_parts: 1,
            image: DEFAULT_IMAGE.to_owned(),
            backoff_limit: DEFAULT_BACKOFF_LIMIT,
            termination_grace_period_seconds: DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
            active_deadline_seconds: None,
            arch: None,
            service_account: None,
        }
    }
}

/// The build Job (see the module documentation).
pub fn build_job(inputs: &JobInputs) -> Value {
    let meta = &inputs.meta;
    let name = job_name(&meta.build);
    let env = [
        ("BUILDAH_ISOLATION", "chroot"),
        ("STORAGE_DRIVER", "vfs"),
        ("HOME", HOME_DIR),
        ("TAG", inputs.tag.as_str()),
        ("CONTAINERFILE_DIR", CONTAINERFILE_DIR),
        ("MACHINECONFIG_DIR", MACHINECONFIG_DIR),
        ("MC_PARTS", &inputs.mc_parts.max(1).to_string()),
        ("CONTEXT_DIR", CONTEXT_DIR),
        ("PULL_AUTHFILE", &format!("{PULL_AUTH_DIR}/config.json")),
        ("PUSH_AUTHFILE", &format!("{PUSH_AUTH_DIR}/config.json")),
        ("TERMINATION_LOG", TERMINATION_LOG),
    ]
    .map(|(name, value)| json!({ "name": name, "value": value }));

    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": inputs.termination_grace_period_seconds,
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": {
            "runAsUser": BUILD_UID,
            "runAsGroup": BUILD_UID,
            "runAsNonRoot": true,
        },
        "containers": [{
            "name": BUILD_CONTAINER,
            "image": inputs.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/bash", "-c", BUILD_SCRIPT, "build.sh"],
            "env": env,
            "securityContext": {
                "allowPrivilegeEscalation": true,
                "privileged": false,
                "capabilities": { "drop": ["ALL"], "add": ["SETUID", "SETGID"] },
            },
            "terminationMessagePath": TERMINATION_LOG,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [
                { "name": "containerfile", "mountPath": CONTAINERFILE_DIR, "readOnly": true },
                { "name": "machineconfig", "mountPath": MACHINECONFIG_DIR, "readOnly": true },
                { "name": "pull-secret", "mountPath": PULL_AUTH_DIR, "readOnly": true },
                { "name": "push-secret", "mountPath": PUSH_AUTH_DIR, "readOnly": true },
                { "name": "context", "mountPath": CONTEXT_DIR },
                { "name": "buildah-storage", "mountPath": STORAGE_DIR },
            ],
        }],
        "volumes": [
            {
                "name": "containerfile",
                "configMap": {
                    "name": containerfile_config_map_name(&meta.build),
                    "items": [{ "key": CONTAINERFILE_KEY, "path": CONTAINERFILE_KEY }],
                },
            },
            { "name": "machineconfig", "projected": { "sources": mc_sources(inputs) } },
            secret_volume("pull-secret", &pull_secret_name(&meta.build)),
            secret_volume("push-secret", &inputs.push_secret),
            { "name": "context", "emptyDir": {} },
            { "name": "buildah-storage", "emptyDir": {} },
        ],
    });
    if let Some(account) = &inputs.service_account {
        pod_spec["serviceAccountName"] = json!(account);
    }
    if let Some(arch) = &inputs.arch {
        pod_spec["nodeSelector"] = json!({ "kubernetes.io/arch": arch });
    }

    let mut spec = json!({
        "backoffLimit": inputs.backoff_limit,
        "completions": 1,
        "parallelism": 1,
        "template": {
            "metadata": { "labels": labels(meta) },
            "spec": pod_spec,
        },
    });
    if let Some(deadline) = inputs.active_deadline_seconds {
        spec["activeDeadlineSeconds"] = json!(deadline);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_meta(meta, &name, &inputs.namespace, true),
        "spec": spec,
    })
}

fn mc_sources(inputs: &JobInputs) -> Vec<Value> {
    let build = &inputs.meta.build;
    if inputs.mc_parts <= 1 {
        return vec![json!({ "configMap": {
            "name": machine_config_config_map_name(build),
            "items": [{ "key": MC_KEY, "path": MC_KEY }],
        }})];
    }
    (0..inputs.mc_parts)
        .map(|i| {
            let key = mc_part_key(i);
            json!({ "configMap": {
                "name": machine_config_part_name(build, i),
                "items": [{ "key": key, "path": key }],
            }})
        })
        .collect()
}

fn secret_volume(name: &str, secret: &str) -> Value {
    json!({
        "name": name,
        "secret": {
            "secretName": secret,
            "items": [{ "key": ".dockerconfigjson", "path": "config.json" }],
        },
    })
}
