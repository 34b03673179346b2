//! Every parser that takes untrusted bytes, fuzzed from real seeds for a bounded time (see
//! the crate documentation): Ignition configs (through planning and the layer writer),
//! `data:` URLs, MachineConfig YAML/JSON (through rendering, spec 2 configs included), the
//! YAML Go writes for any JSON (rendered names), image manifests, indexes and
//! configs, image references, auth files, registry answers, base layers (tar, plain and
//! gzip), the base index cache format, and the test API server's request bodies, selectors
//! and tokens through its store. This binary's allocator is capped: an input that
//! makes a parser hold unbounded memory aborts the run.

use std::io::Write;
use std::path::{Path, PathBuf};

use machineos_fuzz::{Outcome, fuzz};

/// What every target together may hold beyond what the process held at start.
const HEADROOM: usize = 512 << 20;

machineos_testkit::capped_allocator!(HEADROOM);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file with `ext` below `dir` (sorted), as bytes.
fn files(dir: &Path, ext: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

/// The Ignition configs of the differential cases, the example config, and a gzip one.
fn ignition_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = files(
        &repo().join("crates/machineos-layer/tests/differential/cases"),
        "json",
    )
    .into_iter()
    .filter_map(|case| {
        let v: serde_json::Value = serde_json::from_slice(&case).ok()?;
        serde_json::to_vec(v.get("config")?).ok()
    })
    .collect();
    seeds.extend(files(&repo().join("examples/ignition"), "ign"));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"hello\n").unwrap();
    let b64: String = {
        use std::fmt::Write as _;
        // A tiny base64 encoder is not worth a dependency here: use hex in a %-escaped URL.
        let mut s = String::new();
        for b in gz.finish().unwrap() {
            let _ = write!(s, "%{b:02x}");
        }
        s
    };
    seeds.push(
        format!(
            r#"{{"ignition":{{"version":"3.4.0"}},"storage":{{"files":[{{"path":"/etc/gz","contents":{{"source":"data:,{b64}","compression":"gzip"}},"append":[{{"source":"data:;base64,eA=="}}]}}],"links":[{{"path":"/etc/h","target":"/etc/passwd","hard":true}}]}},"systemd":{{"units":[{{"name":"a.service","enabled":true,"contents":"[Install]\nWantedBy=multi-user.target\n","dropins":[{{"name":"x.conf","contents":"[Service]\n"}}]}}]}}}}"#
        )
        .into_bytes(),
    );
    seeds
}

/// A small root to plan over: passwd, group, a unit directory, a symlink, a hard link.
fn base_root() -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let dir = std::env::temp_dir().join(format!("machineos-fuzz-root-{}", std::process::id()));
    ONCE.call_once(|| {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("etc/systemd/system")).unwrap();
        std::fs::create_dir_all(dir.join("usr/lib/systemd/system")).unwrap();
        std::fs::create_dir_all(dir.join("var/usrlocal")).unwrap();
        std::fs::write(
            dir.join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\ncore:x:1000:1000::/var/home/core:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(dir.join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
        std::fs::write(
            dir.join("usr/lib/systemd/system/v.service"),
            "[Install]\nWantedBy=multi-user.target\n",
        )
        .unwrap();
        std::os::unix::fs::symlink("var/usrlocal", dir.join("usr/local")).unwrap();
        std::fs::hard_link(dir.join("etc/passwd"), dir.join("etc/passwd-")).unwrap();
    });
    dir
}

#[test]
fn ignition_configs_plan_and_write() {
    cap_memory();
    let root = base_root();
    let base = machineos_layer::DirView::new(&root);
    let stats = fuzz("ignition", ignition_seeds(), |bytes| {
        let plan =
            machineos_layer::plan_ignition(bytes, "fuzz.ign", &base).map_err(|e| e.to_string())?;
        let opts = machineos_layer::LayerOptions::default();
        machineos_layer::write::write_tar(&plan, &opts, std::io::sink())
            .map(drop)
            .map_err(|e| format!("writing the layer: {e}"))
    });
    assert!(stats.accepted > 0);
}

#[test]
fn data_urls() {
    cap_memory();
    let seeds = [
        "data:,hello%20world",
        "data:;base64,aGVsbG8=",
        "data:text/plain;charset=\"utf-8\";base64,aGVs\nbG8=",
        "data:application/octet-stream;a=b;base64,",
        "data:x-foo/bar,x",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let stats = fuzz("dataurl", seeds, |bytes| {
        let s = String::from_utf8_lossy(bytes);
        let n = machineos_ignition::dataurl::check(&s).map_err(|e| e.to_string())?;
        // Collecting gives what streaming measured.
        let all = machineos_ignition::dataurl::decode(&s).map_err(|e| e.to_string())?;
        assert_eq!(all.len() as u64, n);
        Ok(())
    });
    assert!(stats.accepted > 0);
}

#[test]
fn machineconfigs_load_and_render() {
    cap_memory();
    let mut seeds = files(&repo().join("examples/machineconfigs"), "yaml");
    seeds.extend(
        files(&repo().join("bench/machineconfigs"), "yaml")
            .into_iter()
            .take(8),
    );
    // A spec 2.2 MachineConfig: the MCO's conversion path.
    seeds.push(
        br#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
"metadata":{"name":"00-old","labels":{"machineconfiguration.openshift.io/role":"worker"}},
"spec":{"config":{"ignition":{"version":"2.2.0"},
"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA a","ssh-ed25519 AAAA a"]}]},
"storage":{"files":[{"filesystem":"root","path":"/etc/a","mode":420,"contents":{"source":"data:,a"}},
{"filesystem":"root","path":"/etc/a","mode":384,"contents":{"source":"data:,b"}}]},
"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Unit]\nDescription=a\n",
"dropins":[{"name":"x.conf","contents":"[Unit]\nAfter=b\n"}]}]}}}}"#
            .to_vec(),
    );
    let stats = fuzz("machineconfig", seeds, |bytes| {
        let m = machineos_render::load::load_manifests("fuzz.yaml", bytes)
            .map_err(|e| e.to_string())?;
        let mcs: Vec<_> = m.machine_configs.iter().collect();
        if mcs.is_empty() {
            return Ok(());
        }
        let r = machineos_render::render::render("worker", &mcs, &Default::default())
            .map_err(|e| e.to_string())?;
        machineos_ignition::children::resolve(r.ignition).map_err(|e| e.to_string())?;
        serde_json::to_vec(&r.machine_config)
            .map(drop)
            .map_err(|e| e.to_string())
    });
    assert!(stats.accepted > 0);
}

/// Any JSON value has the YAML Go would write, or yaml.v2's refusal; the same every time.
#[test]
fn go_yaml_of_any_json() {
    cap_memory();
    let seeds = [
        r#"{"osImageURL":"quay.io/x@sha256:ab","config":{"ignition":{"version":"3.5.0"}},"kernelArguments":["y","a b"],"fips":false}"#,
        r#"{"a":"line\nline\n","b":" lead","c":"\u00e9\u2028x","d":[1,-2.5,1e21,null,true,{}],"e":{"k":[]}}"#,
        r##"["0755","2024-01-02","1:20","--- x","#c",": x","\ufeffbom"]"##,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let stats = fuzz("goyaml", seeds, |bytes| {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let yaml = machineos_goyaml::to_yaml(&v).map_err(|e| e.to_string())?;
        assert_eq!(machineos_goyaml::to_yaml(&v).as_deref(), Ok(yaml.as_str()));
        Ok(())
    });
    assert!(stats.accepted > 0);
}

const MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":2},
"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha512:cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e","size":3,"annotations":{"a":"b"}}],
"annotations":{"org.opencontainers.image.title":"x"}}"#;
const INDEX: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":7,"platform":{"architecture":"arm64","os":"linux","variant":"v8"}},
{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":7,"platform":{"architecture":"amd64","os":"linux"}}]}"#;
const DOCKER: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
"config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":2,"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":3,"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}]}"#;
const CONFIG: &str = r#"{"architecture":"amd64","os":"linux","config":{"Labels":{"containers.bootc":"1"}},
"rootfs":{"type":"layers","diff_ids":["sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"]},
"history":[{"created_by":"x"}],"created":"2024-01-01T00:00:00Z"}"#;

#[test]
fn image_manifests_indexes_and_configs() {
    cap_memory();
    let seeds = [MANIFEST, INDEX, DOCKER, CONFIG]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let platform = machineos_image::Platform::new("linux", "amd64", None);
    let stats = fuzz("image-json", seeds, |bytes| {
        use machineos_image::manifest::{Manifest, derive_manifest, parse_manifest};
        let mut accepted = false;
        match parse_manifest(bytes, None) {
            Ok(Manifest::Image(m)) => {
                accepted = true;
                derive_manifest(bytes, &m.config, &m.config).map_err(|e| e.to_string())?;
            }
            Ok(Manifest::Index(i)) => {
                accepted = true;
                let _ = i.select(&platform);
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
        if let Ok(view) = machineos_image::config::parse_config(bytes) {
            accepted = true;
            let patch = machineos_image::config::ConfigPatch {
                diff_id: machineos_image::Digest::sha256(b""),
                labels: Default::default(),
                created: Some("2024-01-01T00:00:00Z".into()),
                history_created_by: "fuzz".into(),
                history_comment: None,
            };
            let patched =
                machineos_image::config::patch_config(bytes, &patch).map_err(|e| e.to_string())?;
            let again =
                machineos_image::config::parse_config(&patched).map_err(|e| e.to_string())?;
            assert_eq!(again.diff_ids.len(), view.diff_ids.len() + 1);
        }
        if accepted {
            Ok(())
        } else {
            Err("neither a manifest nor a config".into())
        }
    });
    assert!(stats.accepted > 0);
}

#[test]
fn references_auth_files_and_registry_answers() {
    cap_memory();
    let seeds = [
        "quay.io/fedora/fedora-coreos:stable",
        "oci:./out:v1@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "docker://[::1]:5000/a/b@sha512:cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
        r#"{"auths":{"quay.io/org":{"auth":"dXNlcjpwYXNz"},"registry.lab:5000":{"username":"u","password":"p"}}}"#,
        r#"{"kind":"Secret","type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":"eyJhdXRocyI6e319"}}"#,
        r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a:pull""#,
        r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let stats = fuzz("refs-auth-answers", seeds, |bytes| {
        let s = String::from_utf8_lossy(bytes);
        let r = machineos_image::ImageRef::parse(&s);
        if let Ok(r) = &r {
            // A reference prints as something that parses to itself.
            assert_eq!(
                machineos_image::ImageRef::parse(&r.to_string())
                    .ok()
                    .as_ref(),
                Some(r)
            );
        }
        let a = machineos_image::auth::AuthFile::parse(bytes);
        let _ = machineos_registry::auth::parse_challenge(&s);
        let _ = machineos_registry::http::parse_error_body(bytes);
        match (r, a) {
            (Err(e), Err(f)) => Err(format!("{e}; {f}")),
            _ => Ok(()),
        }
    });
    assert!(stats.accepted > 0);
}

/// Layers with every member type, long names, whiteouts, hard links; plain and gzip.
fn layer_seeds() -> Vec<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut add = |path: &str, ty: tar::EntryType, data: &[u8], link: Option<&str>| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(ty);
        h.set_mode(0o644);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_size(data.len() as u64);
        match link {
            Some(l) => b.append_link(&mut h, path, l).unwrap(),
            None => b.append_data(&mut h, path, data).unwrap(),
        }
    };
    add("etc/", tar::EntryType::Directory, b"", None);
    add(
        "etc/passwd",
        tar::EntryType::Regular,
        b"root:x:0:0::/root:/bin/sh\n",
        None,
    );
    add("etc/hard", tar::EntryType::Link, b"", Some("etc/passwd"));
    add(
        "etc/sym",
        tar::EntryType::Symlink,
        b"",
        Some("../usr/lib/x"),
    );
    add(
        "usr/lib/systemd/system/a.service",
        tar::EntryType::Regular,
        b"[Unit]\n",
        None,
    );
    add(
        &format!("usr/share/{}", "n".repeat(200)),
        tar::EntryType::Regular,
        b"long",
        None,
    );
    add("usr/.wh.gone", tar::EntryType::Regular, b"", None);
    add("var/.wh..wh..opq", tar::EntryType::Regular, b"", None);
    add("dev/fifo", tar::EntryType::Fifo, b"", None);
    let plain = b.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    vec![plain, gz.finish().unwrap()]
}

fn index_of(layer: &[u8]) -> Result<machineos_baseindex::BaseIndex, String> {
    use machineos_baseindex::{IndexBuilder, LayerCompression};
    let compression = if layer.starts_with(&[0x1f, 0x8b]) {
        LayerCompression::Gzip
    } else {
        LayerCompression::None
    };
    let mut b = IndexBuilder::new();
    b.apply_layer(0, compression, layer)
        .map_err(|e| e.to_string())?;
    b.finish().map_err(|e| e.to_string())
}

#[test]
fn base_layers_index() {
    cap_memory();
    let stats = fuzz("layer", layer_seeds(), |bytes| {
        let idx = index_of(bytes)?;
        // Whatever indexes stores and loads back the same.
        let enc = idx.encode().map_err(|e| e.to_string())?;
        let back = machineos_baseindex::BaseIndex::decode(&enc).map_err(|e| e.to_string())?;
        assert!(back == idx, "an index changed through its encoding");
        Ok(())
    });
    assert!(stats.accepted > 0);
}

#[test]
fn base_index_cache_files_decode() {
    cap_memory();
    let seeds = layer_seeds()
        .iter()
        .map(|l| index_of(l).unwrap().encode().unwrap())
        .collect();
    let stats = fuzz("cache", seeds, |bytes| {
        let check = |bytes: &[u8]| -> Outcome {
            let idx = machineos_baseindex::BaseIndex::decode(bytes).map_err(|e| e.to_string())?;
            // What loads, stores again, and loads back as the same index.
            let enc = idx.encode().map_err(|e| e.to_string())?;
            let back = machineos_baseindex::BaseIndex::decode(&enc).map_err(|e| e.to_string())?;
            assert!(back == idx, "a decoded index re-encodes to another index");
            Ok(())
        };
        // As mutated (the checksum catches it), and with the checksum made to match, so the
        // decoder's checks behind it are what is tried.
        let raw = check(bytes);
        const HEADER: usize = 12;
        if bytes.len() >= HEADER + 32 {
            let mut fixed = bytes.to_vec();
            let body_end = fixed.len() - 32;
            let sum = <sha2::Sha256 as sha2::Digest>::digest(&fixed[HEADER..body_end]);
            fixed[body_end..].copy_from_slice(&sum);
            return check(&fixed).or(raw);
        }
        raw
    });
    assert!(stats.accepted > 0);
}

/// Every error of the test API server says something (its `Status` message).
fn api_err(e: machineos_kubetest::ApiError) -> String {
    let st = e.to_status();
    let msg = st["message"].as_str().unwrap_or("").to_string();
    assert!(!msg.is_empty(), "an error without a message: {st}");
    assert!(
        st["code"].as_u64().is_some_and(|c| (400..600).contains(&c)),
        "{st}"
    );
    msg
}

/// A store with machineos's CRDs and one ConfigMap and MachineConfig to update and patch.
fn kubetest_store() -> machineos_kubetest::Store {
    use machineos_kubetest::{GroupResource, Store, StoreConfig, WriteOptions};
    let mut s = Store::new(StoreConfig::default());
    let crds = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
    for crd in machineos_api::crds() {
        let v = serde_json::to_value(&crd).unwrap();
        s.create(&crds, None, &v, WriteOptions::default()).unwrap();
    }
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "seed", "labels": {"a": "b"}}, "data": {"k": "v"}});
    s.create(
        &GroupResource::new("", "configmaps"),
        Some("default"),
        &cm,
        WriteOptions::default(),
    )
    .unwrap();
    let mc = serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig", "metadata": {"name": "seed"},
        "spec": {"config": {"ignition": {"version": "3.5.0"}}}});
    s.create(
        &GroupResource::new("machineconfiguration.openshift.io", "machineconfigs"),
        None,
        &mc,
        WriteOptions::default(),
    )
    .unwrap();
    s
}

/// The test API server's request inputs: bodies as JSON, YAML, apply documents and
/// protobuf; the bodies through create, update, every patch type and server-side apply of
/// a built-in kind and a custom resource (schema, CEL); selectors, continue tokens and
/// resourceVersions. No panic, every refusal a `Status` with a message.
#[test]
fn kubetest_requests() {
    use machineos_kubetest::http::{body, protobuf};
    use machineos_kubetest::list::{ContinueToken, parse_rv};
    use machineos_kubetest::selector::{FieldSelector, LabelSelector};
    use machineos_kubetest::store_apply::{ApplyOptions, parse_apply_body};
    use machineos_kubetest::{GroupResource, PatchType, Subresource, WriteOptions};
    cap_memory();
    let mut seeds: Vec<Vec<u8>> = [
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":"b"},"finalizers":["f/g"]},"data":{"k":"v"}}"#,
        r#"[{"op":"add","path":"/data/x","value":"y"},{"op":"test","path":"/data/k","value":"v"}]"#,
        r#"{"metadata":{"$patch":"replace"},"data":{"$retainKeys":["k"],"k":null},"$setElementOrder/x":[]}"#,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  a: '1'\n",
        "app in (a,b),!x,tier!=db,k",
        "metadata.name=x,spec.nodeName!=",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    for f in files(&repo().join("examples/machineconfigs"), "yaml") {
        if let Ok(v) = body::parse_yaml(&f) {
            seeds.push(serde_json::to_vec(&v).unwrap());
        }
    }
    let store = std::cell::RefCell::new(kubetest_store());
    let runs = std::cell::Cell::new(0u32);
    let cms = GroupResource::new("", "configmaps");
    let mcs = GroupResource::new("machineconfiguration.openshift.io", "machineconfigs");
    let stats = fuzz("kubetest", seeds, |bytes| {
        runs.set(runs.get() + 1);
        if runs.get().is_multiple_of(200) {
            *store.borrow_mut() = kubetest_store();
        }
        let text = String::from_utf8_lossy(bytes);
        let _ = LabelSelector::parse(&text).map_err(api_err);
        let _ = FieldSelector::parse(&text).map_err(api_err);
        let _ = ContinueToken::decode(&text).map_err(api_err);
        let _ = parse_rv(&text).map_err(api_err);
        let _ = protobuf::decode(bytes).map_err(api_err);
        let _ = body::parse_yaml(bytes).map_err(api_err);
        let _ = parse_apply_body(bytes).map_err(api_err);
        let v = body::parse_json(bytes).map_err(api_err)?;
        let mut s = store.borrow_mut();
        let mut any = false;
        for (gr, ns) in [(&cms, Some("default")), (&mcs, None)] {
            let w = WriteOptions::default();
            any |= s
                .create(gr, ns, &v, WriteOptions::DRY_RUN)
                .map_err(api_err)
                .is_ok();
            any |= s.create(gr, ns, &v, w).map_err(api_err).is_ok();
            any |= s.update(gr, ns, "seed", &v, w).map_err(api_err).is_ok();
            for kind in [PatchType::Merge, PatchType::Json, PatchType::Strategic] {
                any |= s
                    .patch(gr, ns, "seed", kind, &v, Subresource::Main, w)
                    .map_err(api_err)
                    .is_ok();
            }
            let ao = ApplyOptions {
                manager: "fuzz".into(),
                force: runs.get().is_multiple_of(2),
                dry_run: false,
            };
            any |= s
                .apply(gr, ns, "seed", &v, Subresource::Main, &ao)
                .map_err(api_err)
                .is_ok();
        }
        if any {
            Ok(())
        } else {
            Err("every write refused".into())
        }
    });
    assert!(stats.accepted > 0);
}
