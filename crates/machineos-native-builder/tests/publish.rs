//! Publishing against a real registry (Debian's docker-registry on loopback) and OCI
//! layouts, checked with skopeo and umoci: TLS with basic auth, cross-repository mounts,
//! multi-platform bases, the warm base-index cache, faults, and determinism.

mod support;

use machineos_image::auth::Credentials;
use machineos_native_builder::{BuildError, CacheUse, Environment};
use machineos_registry::RegistryError;
use machineos_testkit::{
    FaultAction, FaultProxy, FaultRule, RegistryOptions, TestRegistry, diff, skopeo, snapshot,
    umoci_unpack,
};
use support::*;

/// Tags of `repo` in `reg`, read through the registry API (empty when the repository does
/// not exist).
fn tags(reg: &TestRegistry, repo: &str) -> Vec<String> {
    let args = [
        "list-tags".to_string(),
        "--tls-verify=false".to_string(),
        format!("docker://{}/{repo}", reg.host()),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match skopeo(&args) {
        Ok(out) => {
            let v: serde_json::Value = serde_json::from_str(&out).expect("list-tags JSON");
            v["Tags"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        }
        // A repository that was never pushed to has no tags; anything else is a failure.
        Err(e)
            if format!("{e:#}").contains("NAME_UNKNOWN")
                || format!("{e:#}").contains("name unknown") =>
        {
            Vec::new()
        }
        Err(e) => panic!("listing tags of {repo}: {e:#}"),
    }
}

#[test]
fn tls_and_basic_auth_push_pulls_back_as_base_plus_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start(
        RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret-pw"),
    )
    .expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));

    let creds = credentials_file(tmp.path(), &reg.host(), "builder", "s3cret-pw");
    let out_ref = format!("{}/layered/worker:v1", reg.host());
    let outcome = build(
        spec(&format!("{}/base/os:1", reg.host()), &out_ref, CONFIG),
        env(registry_options(Some(&reg), creds), None),
    )
    .expect("build");
    assert_eq!(
        outcome.pullspec,
        format!("{}/layered/worker@{}", reg.host(), outcome.manifest_digest)
    );

    // skopeo sees the tag, the digest we reported, and our labels next to the base's.
    let cert_dir = reg.cert_dir().unwrap().display().to_string();
    let inspect = skopeo(&[
        "inspect",
        "--cert-dir",
        &cert_dir,
        "--creds",
        "builder:s3cret-pw",
        &format!("docker://{out_ref}"),
    ])
    .expect("skopeo inspect");
    let v: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(v["Digest"], outcome.manifest_digest.to_string());
    assert_eq!(v["Labels"]["machineconfig"], "rendered-worker-test");
    assert_eq!(v["Labels"]["machineconfigpool"], "worker");
    assert_eq!(v["Labels"]["containers.bootc"], "1");
    assert_eq!(v["Labels"]["ostree.bootable"], "true");
    assert_eq!(v["Labels"]["baseOSContainerImage"], outcome.base_pullspec);
    assert_eq!(
        v["Layers"].as_array().unwrap().len(),
        outcome.base_layers + 1
    );

    // Pulled back and unpacked, the image is the base with the plan applied.
    let pulled = tmp.path().join("pulled");
    pull_back(&reg, &out_ref, &pulled);
    umoci_unpack(&pulled, "t", &tmp.path().join("got")).expect("unpack result");
    umoci_unpack(&layout, "base", &tmp.path().join("base")).expect("unpack base");
    let got = snapshot(&tmp.path().join("got/rootfs"));
    let want = expected_tree(&snapshot(&tmp.path().join("base/rootfs")), &outcome.plan);
    let differences = diff(&want, &got);
    assert!(
        differences.is_empty(),
        "unpacked image differs from base + plan:\n{}",
        differences.join("\n")
    );
    let preset = std::fs::read_to_string(
        tmp.path()
            .join("got/rootfs/etc/systemd/system-preset/20-ignition.preset"),
    )
    .unwrap();
    assert!(preset.contains("enable hello.service"), "{preset}");
    assert_eq!(
        got["/etc/systemd/system/fstrim.timer"]
            .link_target
            .as_deref(),
        Some("/dev/null")
    );
}

#[test]
fn mounts_within_a_registry_and_copies_across_registries() {
    let tmp = tempfile::tempdir().unwrap();
    let a = TestRegistry::start_plain().expect("registry a");
    let b = TestRegistry::start_plain().expect("registry b");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    let base = format!("{}/base/os:1", a.host());
    push_base(&layout, &a, &base);

    let same = build(
        spec(&base, &format!("{}/team/worker:v1", a.host()), CONFIG),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("build into the same registry");
    assert_eq!(same.blobs.mounted as usize, same.base_layers);
    assert_eq!(same.blobs.copied, 0);
    // The base manifest pinned in team/worker tells the next build, in one request, that
    // every base layer is there.
    let again = build(
        spec(
            &base,
            &format!("{}/team/worker:v2", a.host()),
            &config_variant(4),
        ),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("second build into the same repository");
    assert_eq!(again.blobs.present as usize, again.base_layers);
    assert_eq!(again.blobs.mounted + again.blobs.copied, 0);

    let other = build(
        spec(&base, &format!("{}/team/worker:v1", b.host()), CONFIG),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("build into another registry");
    assert_eq!(other.blobs.mounted, 0);
    assert_eq!(other.blobs.copied as usize, other.base_layers);
    // Same inputs, same image, wherever it is published.
    assert_eq!(same.manifest_digest, other.manifest_digest);

    // The copy is complete: skopeo can copy the whole image out of registry b.
    pull_back(
        &b,
        &format!("{}/team/worker:v1", b.host()),
        &tmp.path().join("from-b"),
    );
}

#[test]
fn multi_platform_base_uses_the_requested_platform() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64", "linux/arm64"], false);
    let base = format!("{}/base/multi:1", reg.host());
    push_base(&layout, &reg, &base);

    let mut arm = spec(&base, &format!("{}/out/arm:v1", reg.host()), CONFIG);
    arm.platform = "linux/arm64".parse().unwrap();
    let arm = build(
        arm,
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("arm64");
    let amd = build(
        spec(&base, &format!("{}/out/amd:v1", reg.host()), CONFIG),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("amd64");
    assert_eq!(arm.platform.to_string(), "linux/arm64");
    assert_eq!(amd.platform.to_string(), "linux/amd64");
    assert_ne!(arm.base_pullspec, amd.base_pullspec);

    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{base}"),
    ])
    .expect("index");
    let index: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let arm_digest = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["platform"]["architecture"] == "arm64")
        .unwrap()["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        arm.base_pullspec.ends_with(&arm_digest),
        "{} vs {arm_digest}",
        arm.base_pullspec
    );

    let config = skopeo(&[
        "inspect",
        "--config",
        "--tls-verify=false",
        &format!("docker://{}/out/arm:v1", reg.host()),
    ])
    .expect("config");
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["architecture"], "arm64");

    let mut missing = spec(&base, &format!("{}/out/s390x:v1", reg.host()), CONFIG);
    missing.platform = "linux/s390x".parse().unwrap();
    let err = build(
        missing,
        env(registry_options(None, Credentials::default()), None),
    )
    .expect_err("no s390x in the index");
    let msg = err.to_string();
    assert!(
        msg.contains("linux/s390x") && msg.contains("linux/arm64"),
        "{msg}"
    );
}

/// A plain registry holding a one-platform base (`base/os:1`), the counting proxy in front
/// of it, and the base's reference through the proxy.
fn base_behind_a_proxy(dir: &std::path::Path) -> (TestRegistry, FaultProxy, String) {
    let reg = TestRegistry::start_plain().expect("registry");
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let layout = base_layout(dir, &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let base = format!("{}/base/os:1", proxy.host());
    (reg, proxy, base)
}

#[test]
fn warm_cache_reads_no_base_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let (_reg, proxy, base) = base_behind_a_proxy(tmp.path());
    let cache = tmp.path().join("cache");

    let cold = build(
        spec(&base, &format!("{}/out/a:v1", proxy.host()), CONFIG),
        env(registry_options(None, Credentials::default()), Some(&cache)),
    )
    .expect("cold build");
    assert_eq!(cold.cache, CacheUse::Miss);
    assert_eq!(cold.base_layer_reads as usize, cold.base_layers);

    // A warm build into `out/<repo>:v1` of config variant `n`.
    let warm_build = |repo: &str, n| {
        build(
            spec(
                &base,
                &format!("{}/out/{repo}:v1", proxy.host()),
                &config_variant(n),
            ),
            env(registry_options(None, Credentials::default()), Some(&cache)),
        )
    };
    proxy.clear_requests();
    let warm = warm_build("b", 2).expect("warm build");
    assert_eq!(warm.cache, CacheUse::Hit);
    assert_eq!(warm.base_layer_reads, 0);
    assert_ne!(warm.manifest_digest, cold.manifest_digest);
    // Not one GET of a base layer blob went over the wire.
    let base_manifest = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{base}"),
    ])
    .unwrap();
    let base_manifest: serde_json::Value = serde_json::from_str(&base_manifest).unwrap();
    for layer in base_manifest["layers"].as_array().unwrap() {
        let digest = layer["digest"].as_str().unwrap();
        assert_eq!(
            proxy.count("GET", digest),
            0,
            "base layer {digest} was read"
        );
    }
    // Nor the base's config: the cache directory keeps it by digest.
    let config = base_manifest["config"]["digest"].as_str().unwrap();
    assert_eq!(proxy.count("GET", config), 0, "{:#?}", proxy.requests());
    // A kept config that does not hash to its name is not used: it is fetched again.
    let kept = machineos_baseindex::Cache::new(cache.clone())
        .blob_path(&machineos_image::Digest::parse(config).unwrap());
    std::fs::write(&kept, b"{}").unwrap();
    proxy.clear_requests();
    warm_build("c", 3).expect("warm build over a damaged kept config");
    assert_eq!(proxy.count("GET", config), 1);
}

/// In one process with an `IndexMemory`, the second build reads neither the cache
/// directory nor the base's config: both are in memory.
#[test]
fn builds_in_one_process_keep_the_index_and_config_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let (_reg, proxy, base) = base_behind_a_proxy(tmp.path());
    let memory = machineos_baseindex::IndexMemory::new(64 << 20);
    let env = || Environment {
        memory: Some(memory.clone()),
        ..env(registry_options(None, Credentials::default()), None)
    };
    let first = build(
        spec(&base, &format!("{}/out/m:v1", proxy.host()), CONFIG),
        env(),
    )
    .expect("first build");
    assert_eq!(first.cache, CacheUse::Disabled);
    proxy.clear_requests();
    let second = build(
        spec(
            &base,
            &format!("{}/out/m:v2", proxy.host()),
            &config_variant(2),
        ),
        env(),
    )
    .expect("second build");
    assert_eq!(second.cache, CacheUse::Memory);
    assert_eq!(second.base_layer_reads, 0);
    // One request for the base: its manifest by tag.
    let base_reads: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/base/os/"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(base_reads.len(), 1, "{base_reads:#?}");
    assert_eq!(memory.stats().hits, 1);
}

#[test]
fn a_registry_that_fails_then_recovers_is_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let proxy = FaultProxy::start(
        reg.addr(),
        vec![
            FaultRule::new("/manifests/", FaultAction::Status(500))
                .method("GET")
                .times(2),
            // Small blobs go up in the PUT that closes their upload.
            FaultRule::new("/blobs/uploads/", FaultAction::Status(503))
                .method("PUT")
                .times(1),
            FaultRule::new("/manifests/", FaultAction::Status(502))
                .method("PUT")
                .times(1),
        ],
    )
    .expect("proxy");
    let outcome = build(
        spec(
            &format!("{}/base/os:1", proxy.host()),
            &format!("{}/out/retry:v1", proxy.host()),
            CONFIG,
        ),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("build succeeds after retries");
    let faulted = proxy.requests().iter().filter(|r| r.faulted).count();
    assert_eq!(faulted, 4, "{:#?}", proxy.requests());
    assert_eq!(tags(&reg, "out/retry"), vec!["v1".to_string()]);
    let _ = outcome;
}

#[test]
fn unauthorized_is_a_clear_error_without_a_retry_storm() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start(RegistryOptions::new().with_auth("builder", "right-pw"))
        .expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let base = format!("{}/base/os:1", proxy.host());
    let out = format!("{}/out/denied:v1", proxy.host());

    // No credentials at all.
    let err = build(
        spec(&base, &out, CONFIG),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect_err("anonymous access is refused");
    assert!(
        matches!(
            err,
            BuildError::Registry(ref e) if matches!(**e, RegistryError::Unauthorized { .. })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("access denied") && msg.contains("no credentials"),
        "{msg}"
    );
    assert!(
        proxy.requests().len() <= 6,
        "retry storm: {:#?}",
        proxy.requests()
    );

    // Wrong credentials: refused, named as such, and the password never shows.
    proxy.clear_requests();
    let creds = credentials_file(tmp.path(), &proxy.host(), "builder", "wrong-pw");
    let err = build(
        spec(&base, &out, CONFIG),
        env(registry_options(None, creds), None),
    )
    .expect_err("wrong password is refused");
    let msg = format!("{err} {err:?}");
    assert!(msg.contains("were sent and refused"), "{msg}");
    assert!(!msg.contains("wrong-pw"), "the password leaked: {msg}");
    assert!(
        proxy.requests().len() <= 6,
        "retry storm: {:#?}",
        proxy.requests()
    );
    assert_eq!(proxy.count("PUT", "/manifests/"), 0);
}

#[test]
fn credentials_scoped_to_repositories_are_used_for_their_repositories() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start(RegistryOptions::new().with_auth("builder", "right-pw"))
        .expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let h = reg.host();
    let base = format!("{h}/base/os:1");

    // The host-wide entry is wrong; the entries for base/ and out/ are right.
    let creds = credentials_for(
        tmp.path(),
        &[
            (&h, "builder", "wrong-pw"),
            (&format!("{h}/base"), "builder", "right-pw"),
            (&format!("{h}/out"), "builder", "right-pw"),
        ],
    );
    build(
        spec(&base, &format!("{h}/out/scoped:v1"), CONFIG),
        env(registry_options(None, creds), None),
    )
    .expect("each repository gets its own credential");

    // Only base/ is right: pulling works, pushing to other/ uses the host-wide (wrong) entry.
    let creds = credentials_for(
        tmp.path(),
        &[
            (&h, "builder", "wrong-pw"),
            (&format!("{h}/base"), "builder", "right-pw"),
        ],
    );
    let err = build(
        spec(&base, &format!("{h}/other/scoped:v1"), CONFIG),
        env(registry_options(None, creds), None),
    )
    .expect_err("the push must use the host-wide credential");
    assert!(
        matches!(
            err,
            BuildError::Registry(ref e) if matches!(**e, RegistryError::Unauthorized { .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("other/scoped"), "{err}");
}

#[test]
fn an_output_with_a_digest_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    let out = format!(
        "oci:{}@sha256:{}",
        tmp.path().join("out").display(),
        "a".repeat(64)
    );
    let err = build(
        spec(&format!("oci:{}:base", layout.display()), &out, CONFIG),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect_err("digest outputs are refused");
    assert!(matches!(err, BuildError::InvalidOutput { .. }), "{err:?}");
    assert!(!tmp.path().join("out").exists());
}

#[test]
fn a_connection_reset_mid_upload_is_retried_or_reported_and_pushes_no_manifest() {
    // Small blobs carry their bytes in the PUT that closes the upload; with a threshold of
    // 0 every blob goes up in a PATCH first (as blobs over `MONOLITHIC_MAX` do).
    for (method, monolithic_max) in [("PUT", machineos_registry::MONOLITHIC_MAX), ("PATCH", 0)] {
        reset_mid_upload(method, monolithic_max);
    }
}

fn reset_mid_upload(method: &str, monolithic_max: u64) {
    let options = || machineos_registry::RegistryOptions {
        monolithic_max,
        ..registry_options(None, Credentials::default())
    };
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let base = format!("{}/base/os:1", reg.host());

    // Once: the upload starts over and the build succeeds.
    let proxy = FaultProxy::start(
        reg.addr(),
        vec![
            FaultRule::new("/blobs/uploads/", FaultAction::ResetAfterBody(64))
                .method(method)
                .times(1),
        ],
    )
    .expect("proxy");
    build(
        spec(
            &base,
            &format!("{}/out/reset-{}:once", proxy.host(), method.to_lowercase()),
            CONFIG,
        ),
        env(options(), None),
    )
    .expect("one reset is retried");
    assert_eq!(proxy.requests().iter().filter(|r| r.faulted).count(), 1);

    // Always: a clear error after a bounded number of attempts, and no manifest or tag.
    proxy
        .set_rules(vec![
            FaultRule::new("/blobs/uploads/", FaultAction::ResetAfterBody(64))
                .method(method)
                .times(1000),
        ])
        .unwrap();
    proxy.clear_requests();
    let err = build(
        spec(
            &base,
            &format!(
                "{}/out/reset-{}:always",
                proxy.host(),
                method.to_lowercase()
            ),
            &config_variant(3),
        ),
        env(options(), None),
    )
    .expect_err("persistent resets fail the build");
    let msg = err.to_string();
    assert!(
        msg.contains("uploading blob") && msg.contains("attempt"),
        "{msg}"
    );
    // The layer and the config upload side by side, each with its 4 attempts.
    let resets = proxy.requests().iter().filter(|r| r.faulted).count();
    assert_eq!(resets, 8, "{:#?}", proxy.requests());
    assert_eq!(proxy.count("PUT", "/manifests/"), 0);
    assert!(
        !tags(&reg, &format!("out/reset-{}", method.to_lowercase()))
            .contains(&"always".to_string())
    );
}

#[test]
fn a_missing_base_is_a_clear_error_and_pushes_nothing() {
    let reg = TestRegistry::start_plain().expect("registry");
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let err = build(
        spec(
            &format!("{}/no/such-base:1", proxy.host()),
            &format!("{}/out/x:v1", proxy.host()),
            CONFIG,
        ),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect_err("no base");
    assert!(
        matches!(err, BuildError::Registry(ref e) if matches!(**e, RegistryError::NotFound { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("no/such-base"), "{err}");
    assert_eq!(proxy.count("PUT", ""), 0);
    assert_eq!(proxy.count("POST", ""), 0);
    assert_eq!(proxy.count("PATCH", ""), 0);
}

#[test]
fn same_inputs_give_the_same_digest_in_layouts_and_registries() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let base_oci = format!("oci:{}:base", layout.display());
    let out1 = format!("oci:{}:a", tmp.path().join("out1").display());
    let out2 = format!("oci:{}:b", tmp.path().join("out2").display());
    let one = build(
        spec(&base_oci, &out1, CONFIG),
        env(registry_options(None, Credentials::default()), None),
    )
    .unwrap();
    let two = build(
        spec(&base_oci, &out2, CONFIG),
        env(
            registry_options(None, Credentials::default()),
            Some(&tmp.path().join("cache")),
        ),
    )
    .unwrap();
    let registry_build = |tag: &str| {
        build(
            spec(
                &format!("{}/base/os:1", reg.host()),
                &format!("{}/out/det:{tag}", reg.host()),
                CONFIG,
            ),
            env(registry_options(None, Credentials::default()), None),
        )
        .unwrap()
    };
    let three = registry_build("a");
    let four = registry_build("b");
    assert_eq!(one.manifest_digest, two.manifest_digest);
    assert_eq!(three.manifest_digest, four.manifest_digest);
    // The layer is the same wherever the base comes from; the manifests differ only because
    // the config records where the base was (label baseOSContainerImage).
    assert_eq!(one.layer.digest, three.layer.digest);
    assert_ne!(one.base_pullspec, three.base_pullspec);
    // The layout output unpacks to base + plan too.
    umoci_unpack(&tmp.path().join("out1"), "a", &tmp.path().join("got")).expect("unpack");
    umoci_unpack(&layout, "base", &tmp.path().join("base")).expect("unpack base");
    let differences = diff(
        &expected_tree(&snapshot(&tmp.path().join("base/rootfs")), &one.plan),
        &snapshot(&tmp.path().join("got/rootfs")),
    );
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn a_failed_build_leaves_no_tag_in_the_output_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    let out_dir = tmp.path().join("out");
    // /etc/passwd is a regular file in the base: a file below it cannot be written.
    let bad = CONFIG.replace("/etc/machineos-test\"", "/etc/passwd/oops\"");
    let err = build(
        spec(
            &format!("oci:{}:base", layout.display()),
            &format!("oci:{}:v1", out_dir.display()),
            &bad,
        ),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect_err("plan fails");
    assert!(err.to_string().contains("/etc/passwd"), "{err}");
    let index = out_dir.join("index.json");
    if index.exists() {
        let text = std::fs::read_to_string(&index).unwrap();
        assert!(!text.contains("\"v1\""), "tag left behind: {text}");
    }
}

#[test]
fn docker_media_types_are_kept_for_docker_bases() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = base_layout(tmp.path(), &["linux/amd64"], true);
    let out_dir = tmp.path().join("out");
    let outcome = build(
        spec(
            &format!("oci:{}:base", layout.display()),
            &format!("oci:{}:v1", out_dir.display()),
            CONFIG,
        ),
        env(registry_options(None, Credentials::default()), None),
    )
    .expect("build");
    let manifest = std::fs::read(
        out_dir
            .join("blobs/sha256")
            .join(outcome.manifest_digest.hex()),
    )
    .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(
        layers.last().unwrap()["mediaType"],
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    );
}

/// Docker Hub's and quay.io's way: a `Bearer` challenge, a token service, tokens per scope.
/// The mount into another repository needs pull on its source in the same token.
#[test]
fn bearer_token_registries_are_authenticated_per_scope_and_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let proxy = FaultProxy::start_with_token_auth(reg.addr(), "robot", "t0ken-pw").unwrap();
    let base = format!("{}/base/os:1", proxy.host());

    let creds = credentials_file(tmp.path(), &proxy.host(), "robot", "t0ken-pw");
    let outcome = build(
        spec(&base, &format!("{}/out/tok:v1", proxy.host()), CONFIG),
        env(registry_options(None, creds), None),
    )
    .expect("token auth");
    assert!(outcome.blobs.mounted > 0, "{:?}", outcome.blobs);
    assert!(proxy.count("GET", "/token") >= 1);
    let mounts: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("mount="))
        .collect();
    assert!(
        mounts.iter().all(|r| r.status == Some(201)),
        "every mount is done in one request with a two-repository token: {mounts:#?}"
    );
    assert_eq!(tags(&reg, "out/tok"), vec!["v1".to_string()]);

    // A wrong password: the token service refuses, and the error says so.
    let creds = credentials_file(tmp.path(), &proxy.host(), "robot", "wrong");
    let err = build(
        spec(&base, &format!("{}/out/tok:v2", proxy.host()), CONFIG),
        env(registry_options(None, creds), None),
    )
    .expect_err("refused");
    assert!(
        matches!(
            err,
            BuildError::Registry(ref e) if matches!(**e, RegistryError::Unauthorized { .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("were sent and refused"), "{err}");
    assert!(!format!("{err:?}").contains("wrong"), "the password leaked");
}
