//! The build Job `build-<build>`: one pod, one container running the whole build —
//! `machineos build` on the rendered MachineConfig, then, when something needs RUN, buildah
//! — so the controller does no image work for a Job build.
//!
//! Contract (the MCO's `toBuildahPod`/`podToJob`, with the differences marked *machineos*):
//!
//! * `batch/v1` Job, owned by the MachineOSBuild (`controller` and `blockOwnerDeletion`
//!   true), `backoffLimit` from [`JobInputs::backoff_limit`] (default 3, so 4 attempts),
//!   `completions: 1`, `parallelism: 1`, no TTL; the MCO's labels and annotations on the Job
//!   and its pod template.
//! * Pod: `restartPolicy: Never`, `terminationGracePeriodSeconds` (default 10, the MCO's);
//!   optional `serviceAccountName`, and `nodeSelector` `kubernetes.io/arch` when RUN steps
//!   run (they execute on the pod's own architecture; the native engine builds any
//!   architecture from anywhere); `automountServiceAccountToken: false` (*machineos*): the
//!   pod needs **no API credentials**, because the digest comes back through the
//!   container's termination message, not a ConfigMap the pod writes.
//! * One container `build` ([`BUILD_CONTAINER`]) of the machineos image
//!   ([`DEFAULT_IMAGE`], which carries buildah too), running
//!   `machineos build --rendered <MachineConfig dir> --pool <pool> --base <base by digest>
//!   --output <tag> --authfile <merged pull Secret> --cache-dir … --digestfile
//!   /dev/termination-log`, plus `--platform` (the architectures the controller decided),
//!   `--extensions-image` (by digest), `--containerfile` (the MachineOSConfig's, when there
//!   is one), `--ca-file` and `--insecure-registry` (the controller's own registry trust),
//!   `--boot-guard` (unless the MachineOSConfig opts out).
//!   Paths reach the arguments as `$(VAR)` references to the container's env, the kubelet's
//!   expansion. `machineos build` reads the rendered MachineConfig as it is (the single
//!   ConfigMap or its parts, mounted as one directory), builds the native image, and with
//!   extensions, a kernelType or a Containerfile pushes it to `<tag>-native` and runs
//!   buildah (`--isolation chroot`, vfs storage in a temporary directory under `$TMPDIR`,
//!   `--timestamp` from `SOURCE_DATE_EPOCH`) to build and push the result.
//!   `terminationMessagePath: /dev/termination-log`, `terminationMessagePolicy:
//!   FallbackToLogsOnError`: on success the message is the digest `--digestfile` wrote; on
//!   failure the file is empty, so the kubelet substitutes the last log lines (at most 80
//!   lines / 2048 bytes) — the failure's log tail for free. The kubelet creates that file
//!   writable by any user (kubernetes/kubernetes#31839), so uid 1000 can write it.
//! * Volumes: the build's inputs ConfigMap `containerfile-<build>` at [`INPUTS_DIR`]
//!   (*machineos*: the MachineOSConfig's Containerfile, not a rendered template, and the
//!   controller's registry CA bundle; see [`super::configmaps::build_inputs_config_map`]);
//!   the MachineConfig ConfigMap(s) as one projected volume at [`MACHINECONFIG_DIR`]
//!   (every part under its own key); the `.dockerconfigjson` of the build's merged pull
//!   Secret `pull-<build>` ([`super::secrets`]: the push Secret's credentials, which push
//!   and read back the native image, and the base pull Secret's, which read the base and
//!   extensions images) as `config.json` under [`PULL_AUTH_DIR`]; an emptyDir as the build
//!   user's home [`HOME_DIR`] (the base index cache, buildah's temporary storage; vfs
//!   copies every layer).
//! * **Security.** The pod runs as uid/gid 1000 (`runAsNonRoot`), the `build` user of the
//!   machineos image (with `/etc/subuid` and `/etc/subgid` ranges), with every capability
//!   dropped but `SETUID` and `SETGID`, and `allowPrivilegeEscalation: true`. Why not fully
//!   restricted: rootless buildah maps the image's uids through a user namespace with
//!   `newuidmap`/`newgidmap`, which are file-capability (or setuid) binaries: they need
//!   `no_new_privs` off (`allowPrivilegeEscalation`) and `CAP_SETUID`/`CAP_SETGID` in the
//!   bounding set. Inside its own user namespace buildah gets a full capability set (the
//!   kernel resets the bounding set there), so the `chroot` isolation's bind mounts need
//!   nothing more. Without the uid mapping an OS image's files (owned by many uids) cannot
//!   be written. This passes the Pod Security `baseline` level, not `restricted`. The
//!   node's seccomp and AppArmor profiles must allow creating a user namespace and mounting
//!   inside it (the Kubernetes default, `Unconfined` seccomp, does; a `RuntimeDefault` that
//!   forbids `unshare(CLONE_NEWUSER)`, or Ubuntu's `apparmor_restrict_unprivileged_userns`,
//!   does not: those clusters need an Unconfined profile for this pod, not set here). A
//!   build with nothing to RUN needs none of this, but one pod shape keeps it simple.
//!
//! Simplifications: no proxy variables, additional trust bundle, entitlement/yum-repo
//! volumes, resources or tolerations (the MCO has no resources or tolerations either).

use serde_json::{Value, json};

use super::configmaps::{CA_BUNDLE_KEY, CONTAINERFILE_KEY, MC_KEY, mc_part_key};
use super::names::{
    BuildMeta, containerfile_config_map_name, job_name, labels, machine_config_config_map_name,
    machine_config_part_name, object_meta, pull_secret_name,
};

/// The default builder image: machineos's own (`machineos build` and buildah).
pub const DEFAULT_IMAGE: &str = "ghcr.io/machineos/machineos:latest";
/// The default `backoffLimit`: 3 retries, 4 attempts (the MCO's).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// The default `terminationGracePeriodSeconds` (the MCO's).
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 10;
/// The name of the pod's only container.
pub const BUILD_CONTAINER: &str = "build";
/// The uid and gid the pod runs as (the machineos image's `build` user).
pub const BUILD_UID: i64 = 1000;
/// The build user's home (an emptyDir): the base index cache and temporary files.
pub const HOME_DIR: &str = "/home/build";
/// Where the build's inputs ConfigMap is mounted (`Containerfile`, `registry-ca.pem`).
pub const INPUTS_DIR: &str = "/tmp/build-inputs";
/// Where the MachineConfig ConfigMap(s) are mounted (`machineconfig.json.gz` or its parts).
pub const MACHINECONFIG_DIR: &str = "/tmp/machineconfig";
/// Where the merged pull Secret `pull-<build>` is mounted (file `config.json`).
pub const PULL_AUTH_DIR: &str = "/tmp/base-image-pull-creds";
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
    /// The base image, by digest.
    pub base_image: String,
    /// The extensions image, by digest, if the build has one.
    pub extensions_image: Option<String>,
    /// Whether the inputs ConfigMap holds a Containerfile to build on top.
    pub containerfile: bool,
    /// Whether the inputs ConfigMap holds a registry CA bundle.
    pub ca_bundle: bool,
    /// Registries (`host[:port]`) `machineos build` may reach over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// The platforms to build (`linux/amd64`, …): one image, or an index over several.
    pub platforms: Vec<String>,
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
    /// The architecture the pod must run on, in Kubernetes' naming (`amd64`, `arm64`,
    /// `ppc64le`, `s390x`): set when RUN steps run. None: any node.
    pub arch: Option<String>,
    /// The pod's service account; None: the namespace's default.
    pub service_account: Option<String>,
    /// `machineos build --boot-guard`: the image gets the boot guard.
    pub boot_guard: bool,
}

impl JobInputs {
    /// Inputs with the defaults: one MachineConfig ConfigMap, no extensions image,
    /// Containerfile or CA bundle, [`DEFAULT_IMAGE`], [`DEFAULT_BACKOFF_LIMIT`],
    /// [`DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS`], no deadline, platform list,
    /// architecture or service account.
    pub fn new(
        meta: BuildMeta,
        namespace: impl Into<String>,
        tag: impl Into<String>,
        base_image: impl Into<String>,
    ) -> Self {
        Self {
            meta,
            namespace: namespace.into(),
            tag: tag.into(),
            base_image: base_image.into(),
            extensions_image: None,
            containerfile: false,
            ca_bundle: false,
            insecure_registries: Vec::new(),
            platforms: Vec::new(),
            mc_parts: 1,
            image: DEFAULT_IMAGE.to_owned(),
            backoff_limit: DEFAULT_BACKOFF_LIMIT,
            termination_grace_period_seconds: DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
            active_deadline_seconds: None,
            arch: None,
            service_account: None,
            boot_guard: false,
        }
    }
}

/// The container's arguments: `machineos build …` (see the module documentation).
pub fn build_args(inputs: &JobInputs) -> Vec<String> {
    let mut args: Vec<String> = [
        "build",
        "--rendered",
        "$(MACHINECONFIG_DIR)",
        "--pool",
        "$(POOL)",
        "--base",
        "$(BASE_IMAGE)",
        "--output",
        "$(TAG)",
        "--authfile",
        "$(AUTHFILE)",
        "--cache-dir",
        "$(CACHE_DIR)",
        "--digestfile",
        "$(TERMINATION_LOG)",
    ]
    .map(String::from)
    .to_vec();
    if !inputs.platforms.is_empty() {
        args.extend(["--platform".to_owned(), inputs.platforms.join(",")]);
    }
    if inputs.extensions_image.is_some() {
        args.extend(["--extensions-image", "$(EXTENSIONS_IMAGE)"].map(String::from));
    }
    if inputs.containerfile {
        args.extend(["--containerfile", "$(CONTAINERFILE)"].map(String::from));
    }
    if inputs.ca_bundle {
        args.extend(["--ca-file", "$(REGISTRY_CA_FILE)"].map(String::from));
    }
    for host in &inputs.insecure_registries {
        args.extend(["--insecure-registry".to_owned(), host.clone()]);
    }
    if inputs.boot_guard {
        args.push("--boot-guard".to_owned());
    }
    args
}

/// The build Job (see the module documentation).
pub fn build_job(inputs: &JobInputs) -> Value {
    let meta = &inputs.meta;
    let name = job_name(&meta.build);
    let mut env: Vec<(&str, String)> = vec![
        ("HOME", HOME_DIR.to_owned()),
        ("TMPDIR", HOME_DIR.to_owned()),
        ("CACHE_DIR", format!("{HOME_DIR}/.cache/machineos")),
        ("TAG", inputs.tag.clone()),
        ("POOL", meta.pool.clone()),
        ("BASE_IMAGE", inputs.base_image.clone()),
        ("MACHINECONFIG_DIR", MACHINECONFIG_DIR.to_owned()),
        ("AUTHFILE", format!("{PULL_AUTH_DIR}/config.json")),
        ("TERMINATION_LOG", TERMINATION_LOG.to_owned()),
    ];
    if let Some(ext) = &inputs.extensions_image {
        env.push(("EXTENSIONS_IMAGE", ext.clone()));
    }
    if inputs.containerfile {
        env.push(("CONTAINERFILE", format!("{INPUTS_DIR}/{CONTAINERFILE_KEY}")));
    }
    if inputs.ca_bundle {
        env.push(("REGISTRY_CA_FILE", format!("{INPUTS_DIR}/{CA_BUNDLE_KEY}")));
    }
    let env: Vec<Value> = env
        .into_iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect();

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
            "command": ["machineos"],
            "args": build_args(inputs),
            "env": env,
            "securityContext": {
                "allowPrivilegeEscalation": true,
                "privileged": false,
                "capabilities": { "drop": ["ALL"], "add": ["SETUID", "SETGID"] },
            },
            "terminationMessagePath": TERMINATION_LOG,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [
                { "name": "inputs", "mountPath": INPUTS_DIR, "readOnly": true },
                { "name": "machineconfig", "mountPath": MACHINECONFIG_DIR, "readOnly": true },
                { "name": "pull-secret", "mountPath": PULL_AUTH_DIR, "readOnly": true },
                { "name": "home", "mountPath": HOME_DIR },
            ],
        }],
        "volumes": [
            {
                "name": "inputs",
                "configMap": { "name": containerfile_config_map_name(&meta.build) },
            },
            { "name": "machineconfig", "projected": { "sources": mc_sources(inputs) } },
            secret_volume("pull-secret", &pull_secret_name(&meta.build)),
            { "name": "home", "emptyDir": {} },
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
