//! The per-build objects: names and labels within Kubernetes' limits, the MachineConfig
//! ConfigMaps' split and its inverse (property-tested, at the chunk boundaries), the build
//! script run for real with a stub `buildah`, every object read back through
//! `k8s-openapi`'s types, and golden YAML of the Job and the ConfigMaps
//! (`tests/golden/objects/`; regenerate with
//! `MACHINEOS_UPDATE_SNAPSHOTS=1 cargo test -p machineos-buildrequest --test objects`).

use std::io::Read;
use std::path::PathBuf;

use base64::Engine;
use machineos_buildrequest::objects::configmaps::{
    MC_KEY, MC_PART_ANNOTATION, MC_PARTS_ANNOTATION, encode, mc_part_key,
};
use machineos_buildrequest::objects::names::{
    MACHINE_OS_BUILD_KEY, RENDERED_MACHINE_CONFIG_LABEL, TARGET_POOL_LABEL,
    containerfile_config_map_name, is_valid_label_value, job_name, label_value,
    machine_config_config_map_name, machine_config_part_name,
};
use machineos_buildrequest::objects::{
    BuildMeta, JobInputs, McError, McLimits, ReassembleError, build_inputs_config_map, build_job,
    containerfile_config_map, from_mounted_keys, machine_config_config_maps,
    machine_config_config_maps_with, reassemble,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const NS: &str = "openshift-machine-config-operator";

fn meta(pool: &str) -> BuildMeta {
    BuildMeta {
        build: format!("{pool}-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"),
        build_uid: "1b4e28ba-2fa1-11d2-883f-0016d3cca427".into(),
        machine_os_config: pool.into(),
        pool: pool.into(),
        rendered_machine_config: format!("rendered-{pool}-0123456789abcdef0123456789abcdef"),
    }
}

fn rendered_mc() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": { "name": "rendered-worker-0123456789abcdef0123456789abcdef" },
        "spec": {
            "osImageURL": "quay.io/fedora/fedora-coreos:stable",
            "config": { "ignition": { "version": "3.5.0" }, "storage": { "files": [{
                "path": "/etc/motd", "mode": 420,
                "contents": { "source": "data:,hello%20from%20machineos%0A" },
            }]}},
            "extensions": ["usbguard"],
            "kernelType": "realtime",
        },
    }))
    .unwrap()
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Deterministic bytes gzip barely compresses, as JSON (a long string of 64 symbols: 6 bits
/// each, so the base64 of the gzip is about as long as the string).
fn incompressible_json(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let digits: String = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(ALPHABET[(x & 63) as usize])
        })
        .collect();
    serde_json::to_vec(&json!({ "spec": { "config": { "blob": digits } } })).unwrap()
}

fn names_of(cms: &[Value]) -> Vec<&str> {
    cms.iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect()
}

fn gunzip_base64(text: &str) -> Vec<u8> {
    let gz = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut out)
        .unwrap();
    out
}

// ---- names, labels, annotations ----

#[test]
fn names_follow_the_mco_for_ordinary_builds() {
    let m = meta("worker");
    assert_eq!(
        containerfile_config_map_name(&m.build),
        "containerfile-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    assert_eq!(
        machine_config_config_map_name(&m.build),
        "mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    assert_eq!(
        machine_config_part_name(&m.build, 2),
        "mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-2"
    );
    assert_eq!(
        job_name(&m.build),
        "build-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    // `build-` + 24-character pool + `-` + 32 hex is exactly 63: kept as is.
    let pool = "a".repeat(24);
    let build = format!("{pool}-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a");
    assert_eq!(job_name(&build), format!("build-{build}"));
    assert_eq!(job_name(&build).len(), 63);
}

#[test]
fn long_pool_names_are_shortened_with_a_hash_and_stay_distinct() {
    let a = meta("infrastructure-gpu-nodes-east");
    let b = meta("infrastructure-gpu-nodes-west");
    let (ja, jb) = (job_name(&a.build), job_name(&b.build));
    assert!(ja.len() <= 63 && jb.len() <= 63, "{ja} {jb}");
    assert_ne!(ja, jb);
    assert!(
        ja.starts_with("build-infrastructure-gpu-nodes-east-"),
        "{ja}"
    );
    assert!(is_valid_label_value(&ja), "{ja}");
    assert_eq!(ja, job_name(&a.build), "deterministic");
    // A name of 250 characters: every ConfigMap name fits in 253, parts included.
    let long = format!("{}-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a", "p".repeat(217));
    assert_eq!(long.len(), 250);
    for name in [
        containerfile_config_map_name(&long),
        machine_config_config_map_name(&long),
        machine_config_part_name(&long, 7),
        job_name(&long),
    ] {
        assert!(name.len() <= 253, "{name}");
        assert!(
            name.bytes().last().unwrap().is_ascii_alphanumeric(),
            "{name}"
        );
    }
    assert!(machine_config_part_name(&long, 7).ends_with("-7"));
    assert_ne!(
        machine_config_part_name(&long, 0),
        machine_config_part_name(&long, 1)
    );
}

#[test]
fn label_values_are_always_valid_and_full_values_kept_in_annotations() {
    for v in ["", "worker", "a.b_c-d", &"x".repeat(63)] {
        assert_eq!(label_value(v), v);
    }
    for v in [
        "x".repeat(64),
        "-leading".into(),
        "trailing-".into(),
        "spaces and/slashes".into(),
        "ünïcode-pool".into(),
        "---".into(),
        format!(
            "rendered-{}-0123456789abcdef0123456789abcdef",
            "p".repeat(40)
        ),
    ] {
        let l = label_value(&v);
        assert!(is_valid_label_value(&l), "{v:?} -> {l:?}");
        assert_eq!(l, label_value(&v));
    }
    assert_ne!(label_value(&"x".repeat(64)), label_value(&"x".repeat(65)));

    let m = meta("infrastructure-gpu-nodes-east");
    let cm = containerfile_config_map(&m, NS, "FROM scratch\n");
    let labels = cm["metadata"]["labels"].as_object().unwrap();
    assert_eq!(labels.len(), 6);
    for (k, v) in labels {
        assert!(is_valid_label_value(v.as_str().unwrap()), "{k}={v}");
    }
    let annotations = &cm["metadata"]["annotations"];
    // Shortened: the rendered MachineConfig (72 characters) and the build (62 fits).
    assert_eq!(
        annotations[RENDERED_MACHINE_CONFIG_LABEL],
        json!(m.rendered_machine_config)
    );
    assert_ne!(
        labels[RENDERED_MACHINE_CONFIG_LABEL],
        json!(m.rendered_machine_config)
    );
    assert_eq!(annotations[MACHINE_OS_BUILD_KEY], json!(m.build));
    assert!(
        annotations.get(TARGET_POOL_LABEL).is_none(),
        "the pool fits"
    );
}

// ---- ConfigMaps ----

#[test]
fn containerfile_config_map_has_the_key_labels_and_owner() {
    let cm = containerfile_config_map(&meta("worker"), NS, "FROM scratch\nRUN true\n");
    assert_eq!(cm["data"]["Containerfile"], "FROM scratch\nRUN true\n");
    assert_eq!(cm["metadata"]["namespace"], NS);
    let owner = &cm["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "MachineOSBuild");
    assert_eq!(owner["controller"], false);
    assert_eq!(owner["blockOwnerDeletion"], false);
}

#[test]
fn a_small_machine_config_is_one_config_map_encoded_as_the_mco_does() {
    let json = rendered_mc();
    let cms = machine_config_config_maps(&meta("worker"), NS, &json).unwrap();
    assert_eq!(
        names_of(&cms),
        ["mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"]
    );
    let data = cms[0]["data"].as_object().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), [MC_KEY]);
    // The MCO's encoding: base64 -d | gunzip gives the JSON back.
    assert_eq!(gunzip_base64(data[MC_KEY].as_str().unwrap()), json);
    assert_eq!(reassemble(&cms).unwrap(), json);
    assert!(cms[0]["metadata"]["annotations"][MC_PARTS_ANNOTATION].is_null());
}

#[test]
fn a_machine_config_over_one_mib_is_split_and_reassembled() {
    let json = incompressible_json(1_400_000, 7);
    let cms = machine_config_config_maps(&meta("worker"), NS, &json).unwrap();
    let encoded_len = encode(&json).unwrap().len();
    assert!(encoded_len > 1_000_000, "{encoded_len}");
    let want = encoded_len.div_ceil(1_000_000);
    assert_eq!(cms.len(), want);
    for (i, cm) in cms.iter().enumerate() {
        assert_eq!(
            cm["metadata"]["name"],
            format!("mc-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a-{i}")
        );
        let a = &cm["metadata"]["annotations"];
        assert_eq!(a[MC_PARTS_ANNOTATION], want.to_string());
        assert_eq!(a[MC_PART_ANNOTATION], i.to_string());
        let data = cm["data"].as_object().unwrap();
        assert_eq!(data.len(), 1);
        let value = data[&mc_part_key(i)].as_str().unwrap();
        // The API server's bound: keys + values of one ConfigMap ≤ 1 MiB.
        assert!(value.len() + mc_part_key(i).len() <= 1_048_576);
        assert!(value.len() <= 1_000_000);
    }
    assert_eq!(reassemble(&cms).unwrap(), json);
    let mut reversed = cms.clone();
    reversed.reverse();
    assert_eq!(
        reassemble(&reversed).unwrap(),
        json,
        "order of the input is free"
    );

    assert!(matches!(
        reassemble(&cms[1..]),
        Err(ReassembleError::Parts(m)) if m.contains("missing part(s) 0")
    ));
    let twice = [cms[0].clone(), cms[0].clone()];
    assert!(matches!(reassemble(&twice), Err(ReassembleError::Parts(m)) if m.contains("twice")));
    assert_eq!(reassemble(&[]), Err(ReassembleError::Empty));
}

/// What a build pod sees: the ConfigMap(s) mounted as files, one per key.
fn mounted(cms: &[Value]) -> std::collections::BTreeMap<String, String> {
    let mut files = std::collections::BTreeMap::new();
    for cm in cms {
        for (k, v) in cm["data"].as_object().unwrap() {
            files.insert(k.clone(), v.as_str().unwrap().to_owned());
        }
    }
    // A projected volume's bookkeeping entries are not parts.
    files.insert("..data".into(), String::new());
    files
}

#[test]
fn a_build_pod_reads_the_machine_config_back_from_its_mounted_files() {
    let small = incompressible_json(10_000, 3);
    let cms = machine_config_config_maps(&meta("worker"), NS, &small).unwrap();
    assert_eq!(from_mounted_keys(&mounted(&cms)).unwrap(), small);
    let big = incompressible_json(2_400_000, 5);
    let cms = machine_config_config_maps(&meta("worker"), NS, &big).unwrap();
    assert!(cms.len() > 2);
    assert_eq!(from_mounted_keys(&mounted(&cms)).unwrap(), big);
    let mut gap = mounted(&cms);
    gap.remove(&mc_part_key(1));
    assert!(matches!(
        from_mounted_keys(&gap),
        Err(ReassembleError::Parts(m)) if m.contains("missing part(s) 1")
    ));
    assert_eq!(
        from_mounted_keys(&mounted(&[])),
        Err(ReassembleError::Empty)
    );
}

#[test]
fn a_machine_config_above_eight_parts_is_refused_with_the_sizes() {
    let json = incompressible_json(8_200_000, 11);
    let bytes = encode(&json).unwrap().len();
    assert!(bytes > 8_000_000, "{bytes}");
    let err = machine_config_config_maps(&meta("worker"), NS, &json).unwrap_err();
    match &err {
        McError::TooLarge {
            build,
            bytes: b,
            limit,
        } => {
            assert_eq!(build, "worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a");
            assert_eq!((*b, *limit), (bytes, 8_000_000));
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a") && text.contains("8000000"));
}

#[test]
fn chunk_boundaries_exactly() {
    let m = meta("worker");
    let json = rendered_mc();
    let len = encode(&json).unwrap().len();
    let limits = |chunk_bytes, max_parts| McLimits {
        chunk_bytes,
        max_parts,
    };
    // Exactly one chunk: the single, MCO-named ConfigMap.
    let one = machine_config_config_maps_with(&m, NS, &json, limits(len, 1)).unwrap();
    assert_eq!(names_of(&one), [machine_config_config_map_name(&m.build)]);
    // One byte over: two parts, the second holding one byte.
    let two = machine_config_config_maps_with(&m, NS, &json, limits(len - 1, 8)).unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(two[1]["data"][mc_part_key(1)].as_str().unwrap().len(), 1);
    assert_eq!(reassemble(&two).unwrap(), json);
    // Exactly max_parts full chunks fit; one byte less of chunk does not.
    let padded = (0..)
        .map(|extra| {
            let mut v: Value = serde_json::from_slice(&json).unwrap();
            v["pad"] = json!("x".repeat(extra));
            serde_json::to_vec(&v).unwrap()
        })
        .find(|j| encode(j).unwrap().len().is_multiple_of(4))
        .unwrap();
    let plen = encode(&padded).unwrap().len();
    let four = machine_config_config_maps_with(&m, NS, &padded, limits(plen / 4, 4)).unwrap();
    assert_eq!(four.len(), 4);
    assert_eq!(reassemble(&four).unwrap(), padded);
    assert!(matches!(
        machine_config_config_maps_with(&m, NS, &padded, limits(plen / 4 - 1, 4)),
        Err(McError::TooLarge { limit, .. }) if limit == (plen / 4 - 1) * 4
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn split_and_reassemble_round_trip(
        text in "[ -~]{0,3000}",
        numbers in proptest::collection::vec(any::<i64>(), 0..200),
        divisor in 1usize..10,
        offset in 0usize..3,
    ) {
        let json = serde_json::to_vec(&json!({ "text": text, "numbers": numbers })).unwrap();
        let len = encode(&json).unwrap().len();
        // Chunks around len/divisor: exactly at, one under and one over a boundary.
        let chunk = (len / divisor + offset).saturating_sub(1).max(1);
        let limits = McLimits { chunk_bytes: chunk, max_parts: 8 };
        let parts = len.div_ceil(chunk);
        match machine_config_config_maps_with(&meta("worker"), NS, &json, limits) {
            Ok(cms) => {
                prop_assert!(parts <= 8);
                prop_assert_eq!(cms.len(), parts);
                for cm in &cms {
                    let data = cm["data"].as_object().unwrap();
                    prop_assert!(data.values().all(|v| v.as_str().unwrap().len() <= chunk));
                }
                prop_assert_eq!(reassemble(&cms).unwrap(), json);
            }
            Err(McError::TooLarge { bytes, limit, .. }) => {
                prop_assert!(parts > 8);
                prop_assert_eq!((bytes, limit), (len, chunk * 8));
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}

// ---- the Job ----

fn inputs() -> JobInputs {
    JobInputs::new(
        meta("worker"),
        NS,
        "registry.example.com/os/worker:worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
        "quay.io/fedora/fedora-coreos@sha256:0000000000000000000000000000000000000000000000000000000000000000",
    )
}

#[test]
fn the_job_has_the_owner_limits_and_the_termination_message_contract() {
    let job = build_job(&inputs());
    assert_eq!(
        job["metadata"]["name"],
        "build-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(
        owner,
        &json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
            "name": "worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a",
            "uid": "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
            "controller": true, "blockOwnerDeletion": true,
        })
    );
    assert_eq!(job["spec"]["backoffLimit"], 3);
    assert_eq!(job["spec"]["completions"], 1);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert!(pod["nodeSelector"].is_null());
    let c = &pod["containers"][0];
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(c["command"], json!(["machineos"]));
    assert_eq!(c["args"][0], "build");
    let env: Vec<(&str, &str)> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    for want in [
        ("HOME", "/home/build"),
        ("TMPDIR", "/home/build"),
        ("POOL", "worker"),
        ("TERMINATION_LOG", "/dev/termination-log"),
        ("AUTHFILE", "/tmp/base-image-pull-creds/config.json"),
    ] {
        assert!(env.contains(&want), "{want:?} in {env:?}");
    }
    // One Secret: the merged pull Secret (the push credentials are in it).
    let volumes = pod["volumes"].as_array().unwrap();
    let secrets: Vec<&Value> = volumes
        .iter()
        .filter_map(|v| v.get("secret").map(|s| &s["secretName"]))
        .collect();
    assert_eq!(
        secrets,
        vec!["pull-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"]
    );

    let mut custom = inputs();
    custom.backoff_limit = 0;
    custom.arch = Some("arm64".into());
    custom.service_account = Some("machine-os-builder".into());
    custom.active_deadline_seconds = Some(3600);
    custom.image = "registry.example.com/machineos:1".into();
    let job = build_job(&custom);
    assert_eq!(job["spec"]["backoffLimit"], 0);
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 3600);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(
        pod["nodeSelector"],
        json!({ "kubernetes.io/arch": "arm64" })
    );
    assert_eq!(pod["serviceAccountName"], "machine-os-builder");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.com/machineos:1"
    );
}

#[test]
fn the_job_of_a_long_pool_has_a_63_character_name() {
    let mut i = inputs();
    i.meta = meta("infrastructure-gpu-nodes-east");
    let job = build_job(&i);
    let name = job["metadata"]["name"].as_str().unwrap();
    assert!(name.len() <= 63 && is_valid_label_value(name), "{name}");
    let volumes = &job["spec"]["template"]["spec"]["volumes"];
    assert_eq!(
        volumes[0]["configMap"]["name"],
        containerfile_config_map_name(&i.meta.build)
    );
}

#[test]
fn every_object_reads_back_through_k8s_openapi_unchanged() {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut split = inputs();
    split.mc_parts = 3;
    split.arch = Some("amd64".into());
    split.active_deadline_seconds = Some(7200);
    split.service_account = Some("machine-os-builder".into());
    for job in [build_job(&inputs()), build_job(&split)] {
        let typed: Job = serde_json::from_value(job.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&typed).unwrap(),
            job,
            "a field k8s-openapi drops"
        );
    }
    let m = meta("worker");
    let mut cms = vec![containerfile_config_map(&m, NS, "FROM scratch\n")];
    cms.extend(machine_config_config_maps(&m, NS, &rendered_mc()).unwrap());
    for cm in cms {
        let typed: ConfigMap = serde_json::from_value(cm.clone()).unwrap();
        assert_eq!(serde_json::to_value(&typed).unwrap(), cm);
    }
}

// ---- the container's arguments ----

/// Every `$(VAR)` the arguments name, and the env the container defines.
fn refs_and_env(job: &Value) -> (Vec<String>, Vec<String>) {
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let re = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find("$(") {
            let tail = &rest[i + 2..];
            let end = tail.find(')').unwrap();
            out.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
        out
    };
    let refs = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| re(a.as_str().unwrap()))
        .collect();
    let env = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    (refs, env)
}

#[test]
fn every_variable_the_arguments_name_is_defined_so_the_kubelet_expands_it() {
    let mut full = inputs();
    full.extensions_image = Some("registry.example.com/os/ext@sha256:00".into());
    full.containerfile = true;
    full.ca_bundle = true;
    full.insecure_registries = vec!["registry.local:5000".into()];
    full.platforms = vec!["linux/amd64".into(), "linux/arm64".into()];
    full.boot_guard = true;
    for job in [build_job(&inputs()), build_job(&full)] {
        let (refs, env) = refs_and_env(&job);
        assert!(refs.len() >= 6, "{refs:?}");
        for r in &refs {
            assert!(env.contains(r), "$({r}) is not in the env {env:?}");
        }
    }
    let args: Vec<String> = serde_json::from_value(
        build_job(&full)["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
    )
    .unwrap();
    let pairs: Vec<(&str, &str)> = args
        .iter()
        .zip(args.iter().skip(1))
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    for want in [
        ("--platform", "linux/amd64,linux/arm64"),
        ("--extensions-image", "$(EXTENSIONS_IMAGE)"),
        ("--containerfile", "$(CONTAINERFILE)"),
        ("--ca-file", "$(REGISTRY_CA_FILE)"),
        ("--insecure-registry", "registry.local:5000"),
        ("--digestfile", "$(TERMINATION_LOG)"),
    ] {
        assert!(pairs.contains(&want), "{want:?} in {args:?}");
    }
    assert!(args.iter().any(|a| a == "--boot-guard"), "{args:?}");
    let plain: Vec<String> = serde_json::from_value(
        build_job(&inputs())["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
    )
    .unwrap();
    assert!(!plain.iter().any(|a| a == "--boot-guard"), "{plain:?}");
    // Without them, no flag names an input that is not there.
    let (refs, _) = refs_and_env(&build_job(&inputs()));
    for absent in ["EXTENSIONS_IMAGE", "CONTAINERFILE", "REGISTRY_CA_FILE"] {
        assert!(!refs.iter().any(|r| r == absent), "{absent} in {refs:?}");
    }
}

#[test]
fn the_inputs_config_map_holds_only_what_there_is() {
    let m = meta("worker");
    let both = build_inputs_config_map(&m, NS, Some("FROM configs AS final\n"), Some("PEM"));
    assert_eq!(
        both["data"],
        json!({"Containerfile": "FROM configs AS final\n", "registry-ca.pem": "PEM"})
    );
    let none = build_inputs_config_map(&m, NS, None, None);
    assert_eq!(none["data"], json!({}));
    assert_eq!(
        none["metadata"]["name"],
        containerfile_config_map_name(&m.build)
    );
}

// ---- golden files ----

fn golden(name: &str, value: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/objects")
        .join(name);
    machineos_testkit::golden::assert_golden(&path, &machineos_goyaml::to_yaml(value).unwrap());
}

#[test]
fn golden_yaml_of_the_job_and_the_config_maps() {
    let m = meta("worker");
    golden("job.yaml", &build_job(&inputs()));
    let mut split = inputs();
    split.mc_parts = 2;
    split.arch = Some("arm64".into());
    split.service_account = Some("machine-os-builder".into());
    split.extensions_image =
        Some("quay.io/openshift/extensions@sha256:1111111111111111111111111111111111111111111111111111111111111111".into());
    split.containerfile = true;
    split.ca_bundle = true;
    golden("job-split-arm64.yaml", &build_job(&split));
    golden(
        "build-inputs-configmap.yaml",
        &build_inputs_config_map(
            &m,
            NS,
            Some("FROM configs AS final\nRUN true\n"),
            Some("-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----\n"),
        ),
    );
    golden(
        "containerfile-configmap.yaml",
        &containerfile_config_map(
            &m,
            NS,
            "FROM quay.io/fedora/fedora-coreos:stable\nRUN true\n",
        ),
    );
    let cms = machine_config_config_maps(&m, NS, &rendered_mc()).unwrap();
    golden("mc-configmap.yaml", &cms[0]);
    let limits = McLimits {
        chunk_bytes: 200,
        max_parts: 8,
    };
    let parts = machine_config_config_maps_with(&m, NS, &rendered_mc(), limits).unwrap();
    golden("mc-configmaps-split.yaml", &Value::Array(parts));
}
