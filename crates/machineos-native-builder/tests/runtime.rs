//! The builder on the runtimes a controller runs it on: a current-thread runtime, and many
//! concurrent builds on one small multi-thread runtime. Nothing in a build blocks a runtime
//! thread or waits on the network from inside the planner — the planner asks for the base
//! contents the index does not keep, and they are fetched before it plans again.

mod support;

use std::path::Path;

use std::sync::Arc;

use machineos_baseindex::Cache;
use machineos_image::auth::Credentials;
use machineos_native_builder::{Environment, Quiet};
use machineos_registry::Registry;
use machineos_testkit::{TestRegistry, umoci_unpack};
use support::*;

/// Two non-empty regular files of the unpacked base whose contents the base index does not
/// keep (so an append to them needs their bytes from their layer), relative to `rootfs`.
fn unkept_files(rootfs: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = format!("/{}", p.strip_prefix(root).unwrap().display());
            if meta.is_dir() {
                walk(root, &p, out);
            } else if meta.is_file()
                && meta.len() > 0
                && !machineos_baseindex::keep_content(&rel, meta.len())
            {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(rootfs, &rootfs.join("usr"), &mut out);
    out.truncate(2);
    assert_eq!(out.len(), 2, "the example base has unkept files under /usr");
    out
}

/// A config appending a line to each of `paths`.
fn append_config(paths: &[String]) -> String {
    let files: Vec<serde_json::Value> = paths
        .iter()
        .map(|p| {
            serde_json::json!({
                "path": p,
                "append": [{"source": "data:,appended%20by%20machineos%0A"}]
            })
        })
        .collect();
    serde_json::json!({"ignition": {"version": "3.4.0"}, "storage": {"files": files}}).to_string()
}

#[test]
fn a_current_thread_runtime_builds_and_fetches_unkept_base_contents() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    umoci_unpack(&layout, "base", &tmp.path().join("base")).expect("unpack base");
    let rootfs = tmp.path().join("base/rootfs");
    let targets = unkept_files(&rootfs);
    let config = append_config(&targets);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // From a registry base, and from the layout itself.
    let out_ref = format!("{}/out/current:v1", reg.host());
    for (base, output) in [
        (format!("{}/base/os:1", reg.host()), out_ref.clone()),
        (
            format!("oci:{}:base", layout.display()),
            format!("oci:{}:t", tmp.path().join("out-layout").display()),
        ),
    ] {
        let outcome = rt
            .block_on(machineos_native_builder::build(
                spec(&base, &output, &config),
                env(registry_options(None, Credentials::default()), None),
            ))
            .unwrap_or_else(|e| panic!("{base}: {e}"));
        // Each layer streamed once to index it, and once more per unkept file read.
        assert_eq!(
            outcome.base_layer_reads as usize,
            outcome.base_layers + targets.len(),
            "{base}"
        );
    }

    let pulled = tmp.path().join("pulled");
    pull_back(&reg, &out_ref, &pulled);
    for (dir, tag) in [(pulled, "t"), (tmp.path().join("out-layout"), "t")] {
        let got = tmp
            .path()
            .join(format!("got-{}", dir.file_name().unwrap().display()));
        umoci_unpack(&dir, tag, &got).expect("unpack result");
        for t in &targets {
            let mut want = std::fs::read(rootfs.join(&t[1..])).unwrap();
            want.extend_from_slice(b"appended by machineos\n");
            assert_eq!(
                std::fs::read(got.join("rootfs").join(&t[1..])).unwrap(),
                want,
                "{t} in {}",
                dir.display()
            );
        }
    }
}

#[test]
fn many_concurrent_builds_share_one_multi_thread_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    umoci_unpack(&layout, "base", &tmp.path().join("base")).expect("unpack base");
    let targets = unkept_files(&tmp.path().join("base/rootfs"));
    let cache = tmp.path().join("cache");

    // Two workers, twelve builds at once over ONE registry client (one connection pool and
    // token cache, as in a controller): half with the appends (fetches on blocking
    // threads), half plain; every third into a layout (file work on blocking threads).
    let rt = runtime();
    let host = reg.host();
    let client = Registry::new(registry_options(None, Credentials::default())).expect("client");
    let outcomes = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..12u32 {
            let config = if i % 2 == 0 {
                append_config(&targets)
            } else {
                config_variant(i % 4)
            };
            let output = if i % 3 == 0 {
                format!("oci:{}:b{i}", tmp.path().join("layout-out").display())
            } else {
                format!("{host}/out/c{i}:v1")
            };
            let spec = spec(&format!("{host}/base/os:1"), &output, &config);
            let env = Environment {
                registry: Some(client.clone()),
                cache: Some(Cache::new(cache.clone())),
                memory: None,
                progress: Arc::new(Quiet),
            };
            tasks.push(tokio::spawn(async move {
                (i, machineos_native_builder::build(spec, env).await)
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.expect("build task"));
        }
        out
    });
    let mut by_config = std::collections::BTreeMap::new();
    for (i, outcome) in outcomes {
        let outcome = outcome.unwrap_or_else(|e| panic!("build {i}: {e}"));
        let key = if i % 2 == 0 { 0 } else { 1 + i % 4 };
        // The same config over the same base is the same image, wherever it is published.
        let digest = by_config
            .entry(key)
            .or_insert_with(|| outcome.manifest_digest.clone());
        assert_eq!(*digest, outcome.manifest_digest, "build {i}");
    }
    assert_eq!(by_config.len(), 3);
}

/// One client for many builds, as a controller keeps it: the second build into the same
/// repository reuses the first one's tokens and its knowledge of the registry's scheme.
#[test]
fn a_shared_client_reuses_tokens_and_schemes_across_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = TestRegistry::start_plain().expect("registry");
    let layout = base_layout(tmp.path(), &["linux/amd64"], false);
    push_base(&layout, &reg, &format!("{}/base/os:1", reg.host()));
    let proxy =
        machineos_testkit::FaultProxy::start_with_token_auth(reg.addr(), "robot", "t0ken-pw")
            .unwrap();
    let base = format!("{}/base/os:1", proxy.host());
    let creds = credentials_file(tmp.path(), &proxy.host(), "robot", "t0ken-pw");
    let client = Registry::new(registry_options(None, creds)).expect("client");
    let rt = runtime();
    let run = |tag: &str, config: &str| {
        rt.block_on(machineos_native_builder::build(
            spec(&base, &format!("{}/out/shared:{tag}", proxy.host()), config),
            Environment {
                registry: Some(client.clone()),
                cache: None,
                memory: None,
                progress: Arc::new(Quiet),
            },
        ))
        .expect("build")
    };
    // The scheme probe is the one plain `GET /v2/`.
    let probes = |p: &machineos_testkit::FaultProxy| {
        p.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path == "/v2/")
            .count()
    };
    run("v1", CONFIG);
    assert!(proxy.count("GET", "/token") >= 1);
    assert_eq!(probes(&proxy), 1);
    proxy.clear_requests();
    run("v2", &config_variant(3));
    assert_eq!(proxy.count("GET", "/token"), 0, "tokens are fetched again");
    assert_eq!(probes(&proxy), 0, "the scheme is probed again");
}
