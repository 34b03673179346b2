//! The OpenShift Build: its fields checked against the JSON tags of openshift/api's Go
//! types (`k8s-openapi` has no OpenShift types), its limits, and golden YAML
//! (`tests/golden/objects/build*.yaml`; regenerate with
//! `MACHINEOS_UPDATE_SNAPSHOTS=1 cargo test -p machineos-buildrequest --test objects_build`).

mod buildv1;

use std::path::PathBuf;

use buildv1::check_build;

use machineos_buildrequest::objects::build::MAX_DOCKERFILE_BYTES;
use machineos_buildrequest::objects::names::{build_name, is_valid_label_value, job_name};
use machineos_buildrequest::objects::native_build::{
    BUILD_STAGE_ANNOTATION, native_build_command, native_dockerfile,
};
use machineos_buildrequest::objects::{
    BuildApiError, BuildApiInputs, BuildMeta, JobInputs, NativeBuildInputs, build_build, build_job,
    native_build, native_build_name,
};
use machineos_diagnostics::Classify;
use serde_json::{Value, json};

const NS: &str = "openshift-machine-config-operator";
const CONTAINERFILE: &str = "FROM registry.example.com/os/worker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef AS configs\nLABEL machineconfigpool=worker\n\nFROM configs AS final\nRUN touch /etc/hello\n";

fn meta(pool: &str) -> BuildMeta {
    BuildMeta {
        build: format!("{pool}-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"),
        build_uid: "1b4e28ba-2fa1-11d2-883f-0016d3cca427".into(),
        machine_os_config: pool.into(),
        pool: pool.into(),
        rendered_machine_config: format!("rendered-{pool}-0123456789abcdef0123456789abcdef"),
    }
}

fn inputs() -> BuildApiInputs {
    BuildApiInputs::new(
        meta("worker"),
        NS,
        "registry.example.com/os/worker:worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
        CONTAINERFILE,
        "push-secret",
    )
}

fn split() -> BuildApiInputs {
    let mut i = inputs();
    i.mc_parts = 3;
    i.arch = Some("arm64".into());
    i.service_account = Some("machine-os-builder".into());
    i.completion_deadline_seconds = Some(7200);
    i
}

const BASE: &str = "registry.example.com/os/base@sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn native() -> NativeBuildInputs {
    NativeBuildInputs::new(
        meta("worker"),
        NS,
        "ghcr.io/machineos/machineos:latest",
        "registry.example.com/os/worker:worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-native",
        BASE,
    )
}

fn native_split() -> NativeBuildInputs {
    let mut i = native();
    i.mc_parts = 2;
    i.ca_bundle = true;
    i.platforms = vec!["linux/amd64".into(), "linux/arm64".into()];
    i.extensions_image = Some(format!("{BASE}-ext"));
    i.insecure_registries = vec!["registry.example.com".into()];
    i.service_account = Some("machine-os-builder".into());
    i
}

// ---- the fields of openshift/api build/v1 ----

#[test]
fn every_field_is_one_of_openshift_api_build_v1() {
    for build in [
        build_build(&inputs()).unwrap(),
        build_build(&split()).unwrap(),
        native_build(&native()),
        native_build(&native_split()),
    ] {
        let problems = check_build(&build);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
    // The check itself catches a misspelt field, a wrong enum value and a missing required
    // field.
    let mut bad = build_build(&inputs()).unwrap();
    bad["spec"]["strategy"]["dockerStrategy"]["imageOptimisationPolicy"] = json!("SkipLayers");
    bad["spec"]["output"]["to"]["kind"] = json!("Image");
    bad["spec"]["source"]["configMaps"][0]
        .as_object_mut()
        .unwrap()
        .remove("configMap");
    assert_eq!(
        check_build(&bad),
        [
            ".spec.source.configMaps[0].configMap: required in ConfigMapBuildSource, missing",
            ".spec.strategy.dockerStrategy.imageOptimisationPolicy: no such field in DockerBuildStrategy",
            ".spec.output.to.kind: \"Image\" does not fit its Go type",
        ]
    );
}

#[test]
fn the_status_fields_build_state_reads_are_build_v1_fields() {
    // Every status the build_state tests use has this shape; a misspelt field here would
    // make build_state read nothing.
    let build = json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": { "name": "build-w" },
        "status": {
            "phase": "Complete", "reason": "GenericBuildFailed", "message": "m",
            "startTimestamp": "2025-01-01T00:00:00Z", "logSnippet": "l", "cancelled": false,
            "output": { "to": { "imageDigest": "sha256:0" } },
        },
    });
    let problems = check_build(&build);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- the Build ----

#[test]
fn the_build_has_the_job_name_owner_secrets_and_sources() {
    let build = build_build(&inputs()).unwrap();
    let job = build_job(&JobInputs::new(
        meta("worker"),
        NS,
        "registry.example.com/os/worker:worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
        "push-secret",
    ));
    assert_eq!(
        build["metadata"], job["metadata"],
        "same name, labels, owner"
    );
    assert_eq!(
        build["metadata"]["name"],
        "build-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    assert_eq!(build["metadata"]["ownerReferences"][0]["controller"], true);
    let spec = &build["spec"];
    assert_eq!(spec["source"]["dockerfile"], CONTAINERFILE);
    assert_eq!(
        spec["source"]["configMaps"],
        json!([{ "configMap": { "name": "mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a" },
                 "destinationDir": "machineconfig" }])
    );
    let docker = &spec["strategy"]["dockerStrategy"];
    assert_eq!(
        docker["pullSecret"]["name"],
        "pull-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    assert!(docker.get("env").is_none() && docker.get("from").is_none());
    assert_eq!(spec["output"]["pushSecret"]["name"], "push-secret");
    for absent in [
        "nodeSelector",
        "serviceAccount",
        "completionDeadlineSeconds",
    ] {
        assert!(spec.get(absent).is_none(), "{absent}");
    }

    let split = build_build(&split()).unwrap();
    let spec = &split["spec"];
    let names: Vec<&str> = spec["source"]["configMaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["destinationDir"], "machineconfig");
            c["configMap"]["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        names,
        (0..3)
            .map(|i| format!("mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-{i}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        spec["nodeSelector"],
        json!({ "kubernetes.io/arch": "arm64" })
    );
    assert_eq!(spec["serviceAccount"], "machine-os-builder");
    assert_eq!(spec["completionDeadlineSeconds"], 7200);
}

#[test]
fn a_long_pool_gets_the_jobs_fitted_name() {
    let mut i = inputs();
    i.meta = meta("infrastructure-gpu-nodes-east");
    let build = build_build(&i).unwrap();
    let name = build["metadata"]["name"].as_str().unwrap();
    assert_eq!(name, job_name(&i.meta.build));
    assert_eq!(name, build_name(&i.meta.build));
    assert!(name.len() <= 63 && is_valid_label_value(name), "{name}");
}

#[test]
fn oversized_containerfiles_and_bad_deadlines_are_refused() {
    let mut i = inputs();
    i.containerfile = format!("FROM scratch\n{}", "#".repeat(MAX_DOCKERFILE_BYTES));
    let err = build_build(&i).unwrap_err();
    assert_eq!(
        err,
        BuildApiError::ContainerfileTooLarge {
            build: "worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a".into(),
            bytes: MAX_DOCKERFILE_BYTES + 13,
            limit: MAX_DOCKERFILE_BYTES,
        }
    );
    assert!(err.to_string().contains("spec.source.dockerfile"), "{err}");
    assert_eq!(err.reason(), "InvalidContainerfile");
    // Exactly at the limit: accepted.
    i.containerfile = "#".repeat(MAX_DOCKERFILE_BYTES);
    assert!(build_build(&i).is_ok());

    for bad in [0, -5] {
        let mut i = inputs();
        i.completion_deadline_seconds = Some(bad);
        let err = build_build(&i).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "spec.completionDeadlineSeconds: {bad} is not a positive"
            )),
            "{err}"
        );
        assert_eq!(err.reason(), "InvalidBuildInput");
        assert!(!err.is_transient());
    }
}

#[test]
fn the_native_build_runs_machineos_build_native_only_with_its_inputs_as_build_volumes() {
    let b = native_build(&native());
    let name = "native-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a";
    assert_eq!(b["metadata"]["name"], name);
    assert_eq!(native_build_name(&meta("worker").build), name);
    assert_eq!(
        b["metadata"]["annotations"][BUILD_STAGE_ANNOTATION],
        "native"
    );
    assert_eq!(b["metadata"]["ownerReferences"][0]["controller"], true);
    let spec = &b["spec"];
    // No output: the RUN step pushes; no nodeSelector: any architecture builds any.
    for absent in ["output", "nodeSelector", "serviceAccount"] {
        assert!(spec.get(absent).is_none(), "{absent}");
    }
    let command = native_build_command(&native());
    assert_eq!(
        command[..5],
        [
            "machineos",
            "build",
            "--native-only",
            "--rendered",
            "/machineos/machineconfig"
        ]
    );
    let pairs: Vec<(&str, &str)> = command[5..]
        .chunks(2)
        .map(|c| (c[0].as_str(), c[1].as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("--pool", "worker"),
            ("--base", BASE),
            (
                "--output",
                "registry.example.com/os/worker:worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-native"
            ),
            ("--authfile", "/machineos/pull/config.json"),
            ("--cache-dir", "/tmp/machineos-cache"),
        ]
    );
    // The exec form: no shell needed in the image, every argument one JSON string.
    let dockerfile = native_dockerfile(&native());
    assert_eq!(spec["source"]["dockerfile"], dockerfile.as_str());
    let (from, run) = dockerfile.split_once('\n').unwrap();
    assert_eq!(from, "FROM ghcr.io/machineos/machineos:latest");
    let exec: Vec<String> = serde_json::from_str(run.strip_prefix("RUN ").unwrap()).unwrap();
    assert_eq!(exec, command);
    let docker = &spec["strategy"]["dockerStrategy"];
    assert_eq!(
        docker["pullSecret"]["name"],
        "pull-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    assert_eq!(
        docker["volumes"],
        json!([
            { "name": "machineconfig",
              "source": { "type": "ConfigMap", "configMap": {
                  "name": "mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
                  "items": [{ "key": "machineconfig.json.gz", "path": "machineconfig.json.gz" }] } },
              "mounts": [{ "destinationPath": "/machineos/machineconfig" }] },
            { "name": "pull-secret",
              "source": { "type": "Secret", "secret": {
                  "secretName": "pull-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
                  "items": [{ "key": ".dockerconfigjson", "path": "config.json" }] } },
              "mounts": [{ "destinationPath": "/machineos/pull" }] },
        ])
    );

    // A split MachineConfig: one volume per part, one directory down each; the CA bundle
    // from the inputs ConfigMap; every option on the command line.
    let b = native_build(&native_split());
    let volumes = b["spec"]["strategy"]["dockerStrategy"]["volumes"]
        .as_array()
        .unwrap();
    let mounts: Vec<(&str, &str, &str)> = volumes
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap(),
                v["source"]["configMap"]["name"]
                    .as_str()
                    .or(v["source"]["secret"]["secretName"].as_str())
                    .unwrap(),
                v["mounts"][0]["destinationPath"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        mounts,
        [
            (
                "machineconfig-0",
                "mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-0",
                "/machineos/machineconfig/0"
            ),
            (
                "machineconfig-1",
                "mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-1",
                "/machineos/machineconfig/1"
            ),
            (
                "pull-secret",
                "pull-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
                "/machineos/pull"
            ),
            (
                "inputs",
                "containerfile-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
                "/machineos/inputs"
            ),
        ]
    );
    let command = native_build_command(&native_split()).join(" ");
    for want in [
        "--platform linux/amd64,linux/arm64",
        "--ca-file /machineos/inputs/registry-ca.pem",
        "--insecure-registry registry.example.com",
        "--extensions-image registry.example.com/os/base@sha256:",
    ] {
        assert!(command.contains(want), "{want} in {command}");
    }
    assert!(!command.contains("--boot-guard"), "{command}");
    let mut guarded = native_split();
    guarded.boot_guard = true;
    assert!(native_build_command(&guarded).contains(&"--boot-guard".to_owned()));
    assert_eq!(b["spec"]["serviceAccount"], "machine-os-builder");
}

// ---- golden files ----

fn golden(name: &str, value: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/objects")
        .join(name);
    machineos_testkit::golden::assert_golden(&path, &machineos_goyaml::to_yaml(value).unwrap());
}

#[test]
fn golden_yaml_of_the_build() {
    golden("build.yaml", &build_build(&inputs()).unwrap());
    golden("build-split-arm64.yaml", &build_build(&split()).unwrap());
    golden("native-build.yaml", &native_build(&native()));
    golden("native-build-split.yaml", &native_build(&native_split()));
}
