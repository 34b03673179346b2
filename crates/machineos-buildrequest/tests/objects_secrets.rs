//! The merged pull Secret: the merge and its precedence, table-driven; every malformed
//! payload refused with the Secret, key and JSON path and never a credential; the Secret
//! read back through `k8s-openapi`; the merged file read by skopeo (containers/image, as
//! buildah reads it) to check that each registry gets the intended credential; golden YAML
//! (`tests/golden/objects/pull-secret.yaml`; regenerate with
//! `MACHINEOS_UPDATE_SNAPSHOTS=1 cargo test -p machineos-buildrequest --test objects_secrets`).

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use machineos_buildrequest::objects::names::pull_secret_name;
use machineos_buildrequest::objects::{
    BuildMeta, RegistrySecret, SecretError, merged_auths, merged_pull_secret,
};
use machineos_diagnostics::Classify;
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

fn auth(user: &str) -> Value {
    json!({ "auth": STANDARD.encode(format!("{user}:pw-{user}")) })
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Registries and whose credential each got.
type Users = Vec<(String, String)>;

/// The registries of a merged document and whose credential each got.
fn users(merged: &Value) -> Users {
    merged["auths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let decoded = STANDARD.decode(v["auth"].as_str().unwrap()).unwrap();
            let text = String::from_utf8(decoded).unwrap();
            (k.clone(), text.split(':').next().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn merge_table() {
    let pairs = |v: &[(&str, &str)]| -> Users {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    // (case, push payload, pull payload, want registry → user, in key order)
    let cases: Vec<(&str, Value, Option<Value>, Users)> = vec![
        (
            "disjoint registries: both kept",
            json!({ "auths": { "registry.example.com": auth("push") } }),
            Some(json!({ "auths": { "quay.io": auth("pull"), "registry.redhat.io": auth("rh") } })),
            pairs(&[
                ("quay.io", "pull"),
                ("registry.example.com", "push"),
                ("registry.redhat.io", "rh"),
            ]),
        ),
        (
            "a registry both name: push wins",
            json!({ "auths": { "quay.io": auth("push") } }),
            Some(json!({ "auths": { "quay.io": auth("pull"), "cdn.example.com": auth("cdn") } })),
            pairs(&[("cdn.example.com", "cdn"), ("quay.io", "push")]),
        ),
        (
            "push legacy .dockercfg with a URL key, pull new shape: one registry, push wins",
            json!({ "https://quay.io/v1/": auth("push") }),
            Some(json!({ "auths": { "quay.io": auth("pull") } })),
            pairs(&[("quay.io", "push")]),
        ),
        (
            "pull legacy, Docker Hub spellings: docker.io",
            json!({ "auths": { "registry.example.com": auth("push") } }),
            Some(json!({ "https://index.docker.io/v1/": auth("hub") })),
            pairs(&[("docker.io", "hub"), ("registry.example.com", "push")]),
        ),
        (
            "push names registry-1.docker.io, pull docker.io: push wins",
            json!({ "auths": { "registry-1.docker.io": auth("push") } }),
            Some(json!({ "auths": { "docker.io": auth("pull") } })),
            pairs(&[("docker.io", "push")]),
        ),
        (
            "a per-repository key is kept apart from its registry",
            json!({ "auths": { "quay.io/org/os": auth("push") } }),
            Some(json!({ "auths": { "quay.io": auth("pull") } })),
            pairs(&[("quay.io", "pull"), ("quay.io/org/os", "push")]),
        ),
        (
            "a legacy key keeps only its host",
            json!({ "quay.io/org/os": auth("push") }),
            Some(json!({ "auths": { "quay.io": auth("pull") } })),
            pairs(&[("quay.io", "push")]),
        ),
        (
            "two spellings in one Secret: the canonical one wins",
            json!({ "auths": { "https://quay.io": auth("url"), "quay.io": auth("plain") } }),
            None,
            pairs(&[("quay.io", "plain")]),
        ),
        (
            "two non-canonical spellings: the first in byte order wins",
            json!({ "auths": { "https://quay.io/v1/": auth("v1"), "http://quay.io": auth("http") } }),
            None,
            pairs(&[("quay.io", "http")]),
        ),
        (
            "no base pull Secret: the push Secret alone",
            json!({ "auths": { "registry.example.com:5000": auth("push") } }),
            None,
            pairs(&[("registry.example.com:5000", "push")]),
        ),
        (
            "empty Secrets: empty auths",
            json!({ "auths": {} }),
            Some(json!({})),
            vec![],
        ),
    ];
    for (name, push, pull, want) in cases {
        let (push, pull) = (bytes(&push), pull.map(|p| bytes(&p)));
        let push = RegistrySecret::dockerconfigjson("push-creds", &push);
        let pull = pull
            .as_deref()
            .map(|p| RegistrySecret::dockerconfigjson("global-pull-secret-copy", p));
        let merged = merged_auths(&push, pull.as_ref()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(users(&merged), want, "{name}");
    }
}

#[test]
fn entries_are_copied_whole_and_other_members_dropped() {
    let push = bytes(&json!({
        "auths": { "quay.io": { "username": "u", "password": "p", "email": "e@example.com" } },
        "credHelpers": { "quay.io": "ecr-login" },
        "credsStore": "desktop",
    }));
    let pull = bytes(&json!({ "auths": { "registry.redhat.io": {
        "auth": "dTpw", "identitytoken": "tok" } } }));
    let merged = merged_auths(
        &RegistrySecret::dockerconfigjson("push-creds", &push),
        Some(&RegistrySecret::dockercfg("pull", &pull)),
    )
    .unwrap();
    assert_eq!(
        merged,
        json!({ "auths": {
            "quay.io": { "username": "u", "password": "p", "email": "e@example.com" },
            "registry.redhat.io": { "auth": "dTpw", "identitytoken": "tok" },
        }})
    );
}

#[test]
fn malformed_payloads_name_the_secret_key_and_path_never_a_value() {
    let cases: Vec<(&str, &[u8], &str)> = vec![
        (
            ".dockerconfigjson",
            b"{\"auths\": \"hunter2\"}",
            "Secret push-creds: .dockerconfigjson: auths: expected an object, found a string",
        ),
        (
            ".dockerconfigjson",
            b"{\"auths\": {\"quay.io\": \"hunter2\"}}",
            "Secret push-creds: .dockerconfigjson: auths[\"quay.io\"]: expected an object, found a string",
        ),
        (
            ".dockercfg",
            b"{\"quay.io\": [\"hunter2\"]}",
            "Secret push-creds: .dockercfg: [\"quay.io\"]: expected an object, found an array",
        ),
        (
            ".dockerconfigjson",
            b"{\"auths\": null}",
            "Secret push-creds: .dockerconfigjson: auths: expected an object, found null",
        ),
        (
            ".dockerconfigjson",
            b"[\"hunter2\"]",
            "Secret push-creds: .dockerconfigjson: expected an object, found an array",
        ),
        (
            ".dockerconfigjson",
            b"{\"auths\": {\"quay.io\": {\"auth\": \"hunter2\"}",
            "Secret push-creds: .dockerconfigjson: not valid JSON: EOF while parsing an object",
        ),
        (
            ".dockerconfigjson",
            b"",
            "Secret push-creds: .dockerconfigjson: not valid JSON: EOF while parsing a value",
        ),
    ];
    for (key, data, want) in cases {
        let push = RegistrySecret {
            name: "push-creds",
            key,
            data,
        };
        let err = merged_auths(&push, None).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(want), "{text}\nwant {want}");
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(err.reason(), "InvalidPullSecret");
        assert!(!err.is_transient());
    }
    // The base pull Secret's errors name it.
    let good = bytes(&json!({ "auths": {} }));
    let err: SecretError = merged_auths(
        &RegistrySecret::dockerconfigjson("push-creds", &good),
        Some(&RegistrySecret::dockerconfigjson(
            "global-pull-secret-copy",
            b"{\"auths\": 7}",
        )),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Secret global-pull-secret-copy: .dockerconfigjson: auths: expected an object, found a number"
    );
    let err = merged_pull_secret(
        &meta("worker"),
        NS,
        RegistrySecret::dockerconfigjson("push-creds", b"7"),
        None,
    )
    .unwrap_err();
    assert_eq!(err.secret, "push-creds");
}

fn sample_secret(m: &BuildMeta) -> Value {
    let push = bytes(&json!({ "auths": { "registry.example.com": auth("push") } }));
    let pull = bytes(&json!({ "auths": {
        "quay.io": auth("pull"), "registry.example.com": auth("pull") } }));
    merged_pull_secret(
        m,
        NS,
        RegistrySecret::dockerconfigjson("push-creds", &push),
        Some(RegistrySecret::dockerconfigjson(
            "global-pull-secret-copy",
            &pull,
        )),
    )
    .unwrap()
}

#[test]
fn the_secret_has_the_name_type_owner_and_reads_back_through_k8s_openapi() {
    use k8s_openapi::api::core::v1::Secret;
    let m = meta("worker");
    let secret = sample_secret(&m);
    assert_eq!(
        secret["metadata"]["name"],
        "pull-worker-4f1c0e9b2a7d6c5e8f9a0b1c2d3e4f5a"
    );
    assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
    let owner = &secret["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "MachineOSBuild");
    assert_eq!(owner["controller"], false);
    assert_eq!(secret["metadata"]["labels"].as_object().unwrap().len(), 6);

    let typed: Secret = serde_json::from_value(secret.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), secret);
    let data = &typed.data.unwrap()[".dockerconfigjson"].0;
    let merged: Value = serde_json::from_slice(data).unwrap();
    assert_eq!(
        users(&merged),
        [
            ("quay.io".to_owned(), "pull".to_owned()),
            ("registry.example.com".to_owned(), "push".to_owned()),
        ]
    );

    // A long pool: the name still fits.
    let long = meta(&"p".repeat(240));
    let name = pull_secret_name(&long.build);
    assert!(name.len() <= 253, "{name}");
    assert_eq!(sample_secret(&long)["metadata"]["name"], name);
}

#[test]
fn skopeo_reads_the_merged_file_as_intended() {
    // containers/image (skopeo, buildah) reading the merged file: each registry gets the
    // credential the merge chose, Docker Hub under all its spellings.
    let push = bytes(
        &json!({ "https://registry.example.com:5000/v1/": auth("push"),
                              "quay.io/org/os": auth("push-repo") }),
    );
    let pull = bytes(&json!({ "auths": {
        "registry.example.com:5000": auth("pull"), "quay.io": auth("pull-quay"),
        "https://index.docker.io/v1/": auth("hub") } }));
    let merged = merged_auths(
        &RegistrySecret::dockercfg("push-creds", &push),
        Some(&RegistrySecret::dockerconfigjson("pull", &pull)),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.json");
    std::fs::write(&file, merged.to_string()).unwrap();
    let file = file.to_str().unwrap();
    for (registry, want) in [
        ("registry.example.com:5000", "push"),
        // The legacy push key keeps only its host: quay.io is the push credential.
        ("quay.io", "push-repo"),
        ("docker.io", "hub"),
        ("index.docker.io", "hub"),
    ] {
        let out =
            machineos_testkit::skopeo(&["login", "--get-login", "--authfile", file, registry])
                .unwrap_or_else(|e| panic!("{registry}: {e:#}"));
        assert_eq!(out.trim(), want, "{registry}");
    }
}

#[test]
fn golden_yaml_of_the_pull_secret() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/objects/pull-secret.yaml");
    machineos_testkit::golden::assert_golden(
        &path,
        &machineos_goyaml::to_yaml(&sample_secret(&meta("worker"))).unwrap(),
    );
}
