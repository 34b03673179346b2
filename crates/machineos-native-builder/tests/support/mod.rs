//! Shared set-up of the publishing tests: synthetic bases, registries, build specs, and the
//! tree a build must produce (base + plan), computed independently of the publisher.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use machineos_baseindex::Cache;
use machineos_image::auth::Credentials;
use machineos_image::{ImageRef, Layout, Platform};
use machineos_layer::write::{Compression, LayerOptions};
use machineos_layer::{EntryKind, Plan};
use machineos_native_builder::{BuildError, BuildSpec, Environment, Outcome, Quiet};
use machineos_registry::{Registry, RegistryOptions, RetryPolicy};
use machineos_synth::SynthSpec;
use machineos_testkit::tree::{EntryKind as Kind, TreeEntry};
use machineos_testkit::{CopyOptions, TestRegistry, skopeo_copy};
use sha2::Digest as _;

/// The Ignition config the tests build: new files, an overwrite, an append, a file through
/// the `/usr/local` compat symlink owned by a named user, a directory, a symlink, an enabled
/// unit, a drop-in and a mask.
pub const CONFIG: &str = r#"{
  "ignition": {"version": "3.4.0"},
  "storage": {
    "files": [
      {"path": "/etc/chrony.conf", "overwrite": true, "mode": 420,
       "contents": {"source": "data:,server%20ntp.example.com%20iburst%0A"}},
      {"path": "/etc/hosts", "append": [{"source": "data:,10.0.0.1%20registry.lab%0A"}]},
      {"path": "/etc/containers/registries.conf.d/99-mirror.conf", "mode": 420,
       "contents": {"source": "data:,%5B%5Bregistry%5D%5D%0Alocation%20%3D%20%22quay.io%22%0A"}},
      {"path": "/usr/local/bin/hello", "mode": 493, "user": {"name": "core"},
       "contents": {"source": "data:,%23!%2Fbin%2Fsh%0Aecho%20hi%0A"}}
    ],
    "directories": [{"path": "/etc/machineos-test", "mode": 448}],
    "links": [{"path": "/etc/machineos-test/current", "target": "/usr/local/bin/hello"}]
  },
  "systemd": {
    "units": [
      {"name": "hello.service", "enabled": true,
       "contents": "[Unit]\nDescription=hello\n[Service]\nExecStart=/usr/local/bin/hello\n[Install]\nWantedBy=multi-user.target\n"},
      {"name": "chronyd.service", "dropins": [{"name": "10-test.conf", "contents": "[Service]\nNice=5\n"}]},
      {"name": "fstrim.timer", "mask": true}
    ]
  }
}"#;

/// [`CONFIG`] with the directory renamed, for "a second, different build".
pub fn config_variant(n: u32) -> String {
    CONFIG.replacen(
        r#"{"path": "/etc/machineos-test", "mode": 448}"#,
        &format!(r#"{{"path": "/etc/machineos-test-{n}", "mode": 448}}"#),
        1,
    )
}

pub use machineos_testkit::runtime;

/// Writes the example synthetic base (for `platforms`; an index when several) into a new
/// layout under `dir`, tagged `base`. Returns the layout directory.
pub fn base_layout(dir: &Path, platforms: &[&str], docker: bool) -> PathBuf {
    let path = dir.join("base-layout");
    let layout = Layout::create(&path).expect("layout");
    let specs: Vec<SynthSpec> = platforms
        .iter()
        .map(|p| SynthSpec {
            docker_media_types: docker,
            ..SynthSpec::example().with_platform(p.parse::<Platform>().expect("platform"))
        })
        .collect();
    let desc = if specs.len() == 1 {
        machineos_synth::write_image(&layout, &specs[0]).expect("synth")
    } else {
        machineos_synth::write_multi_arch(&layout, &specs).expect("synth")
    };
    layout.set_tag("base", &desc).expect("tag");
    path
}

/// Copies the layout's `base` image (all platforms) to `dest` (`host/repo:tag`) in `reg`.
pub fn push_base(layout: &Path, reg: &TestRegistry, dest: &str) {
    let opts = CopyOptions::new().dest_registry(reg).arg("--all");
    skopeo_copy(
        &format!("oci:{}:base", layout.display()),
        &format!("docker://{dest}"),
        &opts,
    )
    .expect("push base with skopeo");
}

/// Copies `image` (`host/repo:tag` in `reg`) into a new OCI layout `dest`, tagged `t`.
pub fn pull_back(reg: &TestRegistry, image: &str, dest: &Path) {
    skopeo_copy(
        &format!("docker://{image}"),
        &format!("oci:{}:t", dest.display()),
        &CopyOptions::new().src_registry(reg),
    )
    .expect("skopeo copy back");
}

/// A build of [`CONFIG`] (or `config`) from `base` to `output` for linux/amd64.
pub fn spec(base: &str, output: &str, config: &str) -> BuildSpec {
    let mut recipe =
        machineos_layering::ignition_recipe(config.as_bytes(), "test.ign").expect("config");
    recipe.labels = BTreeMap::from([
        (
            "machineconfig".to_string(),
            "rendered-worker-test".to_string(),
        ),
        ("machineconfigpool".to_string(), "worker".to_string()),
    ]);
    BuildSpec {
        base: ImageRef::parse(base).expect("base ref"),
        output: ImageRef::parse(output).expect("output ref"),
        platform: Platform::new("linux", "amd64", None),
        recipe,
        created_by: "machineos test".into(),
        layer: LayerOptions {
            mtime: 0,
            compression: Compression::Gzip,
        },
        layer_out: None,
    }
}

/// Registry options trusting `reg`'s CA (if any), with fast retries and `credentials`.
pub fn registry_options(reg: Option<&TestRegistry>, credentials: Credentials) -> RegistryOptions {
    RegistryOptions {
        ca_pems: reg
            .filter(|r| r.is_tls())
            .map(|r| vec![r.ca_pem().to_vec()])
            .unwrap_or_default(),
        insecure_hosts: Vec::new(),
        credentials: credentials.into(),
        retry: RetryPolicy::fast(),
        monolithic_push: false,
        monolithic_max: machineos_registry::MONOLITHIC_MAX,
        timeouts: Default::default(),
    }
}

/// An environment with a registry client made from `registry` and an optional cache.
pub fn env(registry: RegistryOptions, cache: Option<&Path>) -> Environment {
    Environment {
        registry: Some(Registry::new(registry).expect("registry client")),
        cache: cache.map(|d| Cache::new(d.to_path_buf())),
        memory: None,
        progress: Arc::new(Quiet),
    }
}

/// Runs one build.
#[allow(clippy::result_large_err)] // the tests match on the error; size is irrelevant here
pub fn build(spec: BuildSpec, env: Environment) -> Result<Outcome, BuildError> {
    runtime().block_on(machineos_native_builder::build(spec, env))
}

/// Writes an auth.json for `host` with `user:pass` and loads it.
pub fn credentials_file(dir: &Path, host: &str, user: &str, pass: &str) -> Credentials {
    credentials_for(dir, &[(host, user, pass)])
}

/// Writes an auth.json with one entry per `(key, user, pass)` and loads it.
pub fn credentials_for(dir: &Path, entries: &[(&str, &str, &str)]) -> Credentials {
    let auths: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(key, user, pass)| {
            let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            (key.to_string(), serde_json::json!({ "auth": auth }))
        })
        .collect();
    let path = dir.join("auth.json");
    std::fs::write(&path, serde_json::json!({ "auths": auths }).to_string()).expect("auth.json");
    Credentials::load(&[path]).expect("credentials")
}

/// The tree a correct build produces: `base` (a snapshot of the unpacked base) with the
/// plan's entries applied as a container runtime applies a layer — whiteouts and opaque
/// directories hide lower content first, then entries are added or replace what is there.
pub fn expected_tree(
    base: &BTreeMap<String, TreeEntry>,
    plan: &Plan,
) -> BTreeMap<String, TreeEntry> {
    let mut tree = base.clone();
    let under = |dir: &str, key: &str| key.starts_with(&format!("{dir}/"));
    for e in &plan.entries {
        let p = format!("/{}", e.path);
        match e.kind {
            EntryKind::Whiteout => tree.retain(|k, _| k != &p && !under(&p, k)),
            EntryKind::Opaque => tree.retain(|k, _| !under(&p, k)),
            _ => {}
        }
    }
    for e in &plan.entries {
        let p = format!("/{}", e.path);
        let entry = match &e.kind {
            EntryKind::Whiteout | EntryKind::Opaque => continue,
            EntryKind::Dir => TreeEntry {
                kind: Kind::Dir,
                mode: e.mode,
                uid: e.uid,
                gid: e.gid,
                size: 0,
                link_target: None,
                sha256: None,
                rdev: None,
            },
            EntryKind::File(bytes) => TreeEntry {
                kind: Kind::File,
                mode: e.mode,
                uid: e.uid,
                gid: e.gid,
                size: bytes.len(),
                link_target: None,
                sha256: Some(hex::encode(sha2::Sha256::digest(
                    bytes.to_vec(u64::MAX).expect("contents"),
                ))),
                rdev: None,
            },
            EntryKind::Symlink(target) => TreeEntry {
                kind: Kind::Symlink,
                mode: 0o777,
                uid: e.uid,
                gid: e.gid,
                size: 0,
                link_target: Some(target.clone()),
                sha256: None,
                rdev: None,
            },
            EntryKind::HardLink(target) => tree
                .get(&format!("/{target}"))
                .cloned()
                .expect("hard link target in the tree"),
        };
        if entry.kind != Kind::Dir {
            tree.retain(|k, _| !under(&p, k));
        }
        tree.insert(p, entry);
    }
    tree
}
