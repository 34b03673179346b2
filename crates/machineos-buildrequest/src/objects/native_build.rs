//! The OpenShift Build `native-<build>` (`build.openshift.io/v1`): the first of the OpenShift
//! Build backend's two Builds, which runs the machineos image's `machineos build
//! --native-only` inside OpenShift's build system, so the controller does no image work for
//! such a build either.
//!
//! **Why two Builds, not one two-stage Dockerfile.** The natural single Build — stage one
//! `FROM` the machineos image runs `machineos build` and pushes the native image, stage two
//! starts `FROM` that image and runs the RUN steps — cannot run on OpenShift: its builder
//! (openshift/builder, `pkg/build/builder/docker.go`, `DockerBuilder.Build`) lists every
//! image the Dockerfile's `FROM` lines name (`findReferencedImages`) and pulls each
//! **before** the build starts, so stage two's image, which only stage one pushes, fails
//! the pull on every first build (`PullBuilderImageFailed`). So the native stage is its own
//! Build, and the RUN-step Build ([`super::build`]) is created once it is complete, `FROM`
//! the native image by digest. With nothing to RUN this Build's push is the result.
//!
//! Contract of [`native_build`] (field names as openshift/api `build/v1/types.go`):
//!
//! * `apiVersion: build.openshift.io/v1`, `kind: Build`, named [`native_build_name`]
//!   (`native-<build>` fitted to 63), with the labels, annotations and owner reference of
//!   every per-build object, plus the annotation [`BUILD_STAGE_ANNOTATION`]` = native`
//!   that tells it from the RUN-step Build.
//! * `spec.source`: `type: Dockerfile`, `dockerfile` inline — `FROM <builder image>` and one
//!   `RUN` in the exec form (no shell needed in the image): `machineos build --native-only
//!   --rendered <dir> --pool <pool> --base <base by digest> --output <tag> --authfile
//!   <file> --cache-dir /tmp/machineos-cache`, plus `--platform` (the architectures
//!   decided), `--extensions-image` (labels the image as the Job's build does),
//!   `--ca-file` and `--insecure-registry` (the controller's registry trust),
//!   `--boot-guard` (unless the MachineOSConfig opts out). `<tag>` is
//!   `<repository>:<build>-native` when RUN steps follow, else the MachineOSBuild's push
//!   spec itself.
//! * `spec.strategy`: `type: Docker`; `dockerStrategy`: `pullSecret` = the merged Secret
//!   `pull-<build>` (pulls the builder image), `noCache: true`, `imageOptimizationPolicy:
//!   SkipLayers`, and `volumes` (`BuildVolume`: `name`, `source` with `type` `ConfigMap` or
//!   `Secret`, `mounts[].destinationPath`; OpenShift mounts them read-only into the RUN
//!   step, never into the image): the MachineConfig ConfigMap at [`MACHINECONFIG_DIR`] (a
//!   split MachineConfig: each part's ConfigMap at `<dir>/<i>`, one volume per part, since
//!   a build volume holds one ConfigMap; `machineos build --rendered` reads the parts one
//!   directory down), the pull Secret's `.dockerconfigjson` as `config.json` under
//!   [`PULL_AUTH_DIR`], and, with a CA bundle, the inputs ConfigMap `containerfile-<build>`'s
//!   bundle under [`INPUTS_DIR`].
//! * No `spec.output`: the RUN step pushes, and the image this Build would commit (the
//!   builder image with a cache directory) is thrown away — the builder says "Build
//!   complete, no image push requested". So the Build's status carries no digest: the
//!   controller asks the registry for `<tag>` once the Build is Complete — the Build's push
//!   is the tag's latest write (the tag's name is a function of the build's inputs: no other
//!   build pushes there).
//! * `serviceAccount` when given; no `nodeSelector` (the native engine builds any
//!   architecture from anywhere); `triggeredBy` as the RUN-step Build's.
//!
//! Needs a cluster whose Build API has build volumes (OpenShift 4.10 and later). OpenShift's
//! builder pulls the builder image with `pull-<build>` alone (the push and base pull
//! credentials): a builder image in a private registry other than those needs its
//! credentials in the base pull Secret.

use serde_json::{Value, json};

use super::build::BUILD_API_VERSION;
use super::configmaps::{CA_BUNDLE_KEY, MC_KEY, mc_part_key};
use super::names::{
    BuildMeta, MAX_JOB_NAME, containerfile_config_map_name, fit_name,
    machine_config_config_map_name, machine_config_part_name, object_meta, pull_secret_name,
};

/// Annotation on a Build telling the native stage (`native`) from the RUN-step Build.
pub const BUILD_STAGE_ANNOTATION: &str = "machineos.io/build-stage";
/// [`BUILD_STAGE_ANNOTATION`]'s value on the native Build.
pub const NATIVE_STAGE: &str = "native";
/// Where the MachineConfig ConfigMap(s) are mounted in the RUN step.
pub const MACHINECONFIG_DIR: &str = "/machineos/machineconfig";
/// Where the merged pull Secret's `config.json` is mounted.
pub const PULL_AUTH_DIR: &str = "/machineos/pull";
/// Where the inputs ConfigMap's CA bundle is mounted.
pub const INPUTS_DIR: &str = "/machineos/inputs";
/// The base index cache inside the RUN step (thrown away with the Build's image).
pub const CACHE_DIR: &str = "/tmp/machineos-cache";

/// The native Build's name: `native-<build>`, fitted to 63 characters as the Job's (the
/// build pod's name and labels derive from it).
pub fn native_build_name(build: &str) -> String {
    fit_name(&format!("native-{build}"), MAX_JOB_NAME)
}

/// Everything the native Build is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeBuildInputs {
    /// The build.
    pub meta: BuildMeta,
    /// The namespace of the Build, its ConfigMaps and Secrets.
    pub namespace: String,
    /// The machineos image the RUN step runs in.
    pub builder_image: String,
    /// Where `machineos build` pushes (see the module documentation).
    pub tag: String,
    /// The base image, by digest.
    pub base_image: String,
    /// The extensions image, by digest, when the configuration has one.
    pub extensions_image: Option<String>,
    /// `--platform` values (`linux/amd64`, …); empty: the builder's own.
    pub platforms: Vec<String>,
    /// Registries (`host[:port]`) `machineos build` may reach over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Whether the inputs ConfigMap carries a registry CA bundle.
    pub ca_bundle: bool,
    /// How many MachineConfig ConfigMaps there are (1: `mc-<build>`; more: the parts).
    pub mc_parts: usize,
    /// The build's service account; None: OpenShift's `builder`.
    pub service_account: Option<String>,
    /// `machineos build --boot-guard`: the image gets the boot guard.
    pub boot_guard: bool,
}

impl NativeBuildInputs {
    /// Inputs with one MachineConfig ConfigMap and nothing optional.
    pub fn new(
        meta: BuildMeta,
        namespace: impl Into<String>,
        builder_image: impl Into<String>,
        tag: impl Into<String>,
        base_image: impl Into<String>,
    ) -> Self {
        Self {
            meta,
            namespace: namespace.into(),
            builder_image: builder_image.into(),
            tag: tag.into(),
            base_image: base_image.into(),
            extensions_image: None,
            platforms: Vec::new(),
            insecure_registries: Vec::new(),
            ca_bundle: false,
            mc_parts: 1,
            service_account: None,
            boot_guard: false,
        }
    }
}

/// The RUN step's command: `machineos build --native-only …` (see the module documentation).
pub fn native_build_command(inputs: &NativeBuildInputs) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "machineos".into(),
        "build".into(),
        "--native-only".into(),
        "--rendered".into(),
        MACHINECONFIG_DIR.into(),
        "--pool".into(),
        inputs.meta.pool.clone(),
        "--base".into(),
        inputs.base_image.clone(),
        "--output".into(),
        inputs.tag.clone(),
        "--authfile".into(),
        format!("{PULL_AUTH_DIR}/config.json"),
        "--cache-dir".into(),
        CACHE_DIR.into(),
    ];
    if !inputs.platforms.is_empty() {
        args.extend(["--platform".to_owned(), inputs.platforms.join(",")]);
    }
    if let Some(ext) = &inputs.extensions_image {
        args.extend(["--extensions-image".to_owned(), ext.clone()]);
    }
    if inputs.ca_bundle {
        args.extend([
            "--ca-file".to_owned(),
            format!("{INPUTS_DIR}/{CA_BUNDLE_KEY}"),
        ]);
    }
    for host in &inputs.insecure_registries {
        args.extend(["--insecure-registry".to_owned(), host.clone()]);
    }
    if inputs.boot_guard {
        args.push("--boot-guard".to_owned());
    }
    args
}

/// The native Build's Dockerfile: `FROM` the builder image, one exec-form `RUN`.
pub fn native_dockerfile(inputs: &NativeBuildInputs) -> String {
    let command = Value::from(native_build_command(inputs)).to_string();
    format!("FROM {}\nRUN {command}\n", inputs.builder_image)
}

/// The native Build (see the module documentation).
pub fn native_build(inputs: &NativeBuildInputs) -> Value {
    let meta = &inputs.meta;
    let build = &meta.build;
    let config_map_volume = |name: String, config_map: String, key: String, dest: String| {
        json!({
            "name": name,
            "source": {
                "type": "ConfigMap",
                "configMap": { "name": config_map, "items": [{ "key": key, "path": key }] },
            },
            "mounts": [{ "destinationPath": dest }],
        })
    };
    let mut volumes: Vec<Value> = if inputs.mc_parts <= 1 {
        vec![config_map_volume(
            "machineconfig".into(),
            machine_config_config_map_name(build),
            MC_KEY.into(),
            MACHINECONFIG_DIR.into(),
        )]
    } else {
        (0..inputs.mc_parts)
            .map(|i| {
                config_map_volume(
                    format!("machineconfig-{i}"),
                    machine_config_part_name(build, i),
                    mc_part_key(i),
                    format!("{MACHINECONFIG_DIR}/{i}"),
                )
            })
            .collect()
    };
    volumes.push(json!({
        "name": "pull-secret",
        "source": {
            "type": "Secret",
            "secret": {
                "secretName": pull_secret_name(build),
                "items": [{ "key": ".dockerconfigjson", "path": "config.json" }],
            },
        },
        "mounts": [{ "destinationPath": PULL_AUTH_DIR }],
    }));
    if inputs.ca_bundle {
        volumes.push(config_map_volume(
            "inputs".into(),
            containerfile_config_map_name(build),
            CA_BUNDLE_KEY.into(),
            INPUTS_DIR.into(),
        ));
    }
    let mut spec = json!({
        "source": { "type": "Dockerfile", "dockerfile": native_dockerfile(inputs) },
        "strategy": {
            "type": "Docker",
            "dockerStrategy": {
                "pullSecret": { "name": pull_secret_name(build) },
                "noCache": true,
                "imageOptimizationPolicy": "SkipLayers",
                "volumes": volumes,
            },
        },
        "triggeredBy": [{ "message": format!("machineos: MachineOSBuild {build} (native stage)") }],
    });
    if let Some(account) = &inputs.service_account {
        spec["serviceAccount"] = json!(account);
    }
    let mut metadata = object_meta(meta, &native_build_name(build), &inputs.namespace, true);
    metadata["annotations"][BUILD_STAGE_ANNOTATION] = json!(NATIVE_STAGE);
    json!({
        "apiVersion": BUILD_API_VERSION,
        "kind": "Build",
        "metadata": metadata,
        "spec": spec,
    })
}
