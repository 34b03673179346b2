//! Properties of `ignition_layer_tar` over small generated configs and generated base trees
//! full of awkward symlinks (relative, absolute, `..`-heavy, chains, loops, dangling): the
//! same inputs give the same bytes (or the same error), it never hangs or panics, and a
//! successful layer is well formed — clean relative paths that cannot escape the root, each
//! path once, every parent directory earlier in the tar, hard links only to earlier entries.

#[path = "support/tar_path.rs"]
mod tar_path;

use machineos_layer::{BaseError, BaseView, Node, NodeKind, ignition_layer_tar};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use tar_path::clean_tar_path;

/// A base filesystem in memory: path → (metadata, content).
#[derive(Debug, Clone, Default)]
struct MemView {
    nodes: BTreeMap<String, (Node, Vec<u8>)>,
}

impl MemView {
    fn put(&mut self, path: &str, kind: NodeKind, mode: u32, uid: u32, content: &[u8]) {
        let node = Node {
            kind,
            mode,
            uid,
            gid: uid,
            link_id: None,
        };
        self.nodes
            .insert(path.to_string(), (node, content.to_vec()));
    }
    fn dir(&mut self, path: &str) {
        self.put(path, NodeKind::Dir, 0o755, 0, b"");
    }
    fn file(&mut self, path: &str, mode: u32, uid: u32, content: &[u8]) {
        let size = content.len() as u64;
        self.put(path, NodeKind::File { size }, mode, uid, content);
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "",
    }
}

impl BaseView for MemView {
    fn lstat(&self, path: &str) -> Result<Option<Node>, BaseError> {
        Ok(self.nodes.get(path).map(|(n, _)| n.clone()))
    }
    fn read(&self, path: &str) -> Result<Vec<u8>, BaseError> {
        match self.nodes.get(path) {
            Some((
                Node {
                    kind: NodeKind::File { .. },
                    ..
                },
                c,
            )) => Ok(c.clone()),
            _ => Err(BaseError::NotAFile {
                path: path.to_string(),
            }),
        }
    }
    fn children(&self, path: &str) -> Result<Vec<String>, BaseError> {
        Ok(self
            .nodes
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == path)
            .map(|p| p[p.rfind('/').map_or(0, |i| i + 1)..].to_string())
            .collect())
    }
    fn hard_link_group(&self, link_id: u64) -> Result<Vec<String>, BaseError> {
        Ok(self
            .nodes
            .iter()
            .filter(|(_, (n, _))| n.link_id == Some(link_id))
            .map(|(p, _)| p.clone())
            .collect())
    }
}

/// Where generated base nodes may go (their parents are in the skeleton).
const BASE_SLOTS: &[&str] = &["/l1", "/etc/l2", "/var/a/l3", "/usr/l4", "/etc/x", "/var/y"];
/// Symlink targets for the base and for configured links: relative, absolute, `..`-heavy,
/// into other links (chains, loops), dangling.
const TARGETS: &[&str] = &[
    "../var",
    "a",
    "..",
    "../../..",
    "/var/a",
    "/etc",
    "/l1",
    "/etc/l2",
    "l1",
    "/",
    "/nonexistent",
    "x/y",
    "../etc/x",
    "/usr/l4",
    "l3",
];
/// Components of configured paths.
const COMPONENTS: &[&str] = &[
    "etc", "var", "a", "l1", "l2", "l3", "l4", "x", "y", "usr", "h1", "z",
];

#[derive(Debug, Clone)]
enum BaseNode {
    Symlink(&'static str),
    File(u32, u32),
    Dir(u32),
}

fn base_node() -> impl Strategy<Value = BaseNode> {
    prop_oneof![
        3 => prop::sample::select(TARGETS).prop_map(BaseNode::Symlink),
        1 => (prop::sample::select(&[0o644u32, 0o600, 0o4755][..]), prop::sample::select(&[0u32, 1000][..]))
            .prop_map(|(m, u)| BaseNode::File(m, u)),
        1 => prop::sample::select(&[0o755u32, 0o700, 0o2775][..]).prop_map(BaseNode::Dir),
    ]
}

fn base_strategy() -> impl Strategy<Value = MemView> {
    (
        prop::collection::btree_map(prop::sample::select(BASE_SLOTS), base_node(), 0..5),
        any::<bool>(),
    )
        .prop_map(|(extra, hard_pair)| {
            let mut v = MemView::default();
            for d in [
                "/",
                "/etc",
                "/usr",
                "/var",
                "/var/a",
                "/etc/systemd",
                "/etc/systemd/system",
            ] {
                v.dir(d);
            }
            v.file(
                "/etc/passwd",
                0o644,
                0,
                b"root:x:0:0::/root:/bin/bash\ncore:x:1000:1000::/var/home/core:/bin/bash\n",
            );
            v.file("/etc/group", 0o644, 0, b"root:x:0:\ncore:x:1000:\n");
            for (path, node) in extra {
                match node {
                    BaseNode::Symlink(t) => v.put(
                        path,
                        NodeKind::Symlink {
                            target: t.to_string(),
                        },
                        0o777,
                        0,
                        b"",
                    ),
                    BaseNode::File(mode, uid) => v.file(path, mode, uid, b"base content\n"),
                    BaseNode::Dir(mode) => v.put(path, NodeKind::Dir, mode, 0, b""),
                }
            }
            if hard_pair {
                v.file("/etc/h1", 0o644, 0, b"pair\n");
                v.file("/var/h1", 0o644, 0, b"pair\n");
                for p in ["/etc/h1", "/var/h1"] {
                    v.nodes.get_mut(p).expect("just put").0.link_id = Some(7);
                }
            }
            v
        })
}

fn path_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(COMPONENTS), 1..4)
        .prop_map(|c| format!("/{}", c.join("/")))
}

fn source() -> impl Strategy<Value = Value> {
    prop::sample::select(
        &[
            "data:,a",
            "data:,",
            "data:;base64,aGVsbG8K",
            "data:,line%0A",
        ][..],
    )
    .prop_map(|s| json!({ "source": s }))
}

fn maybe<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop::option::of(s).boxed()
}

/// One storage entry (file, directory or link) for a given path.
fn storage_entry() -> impl Strategy<Value = (u8, Value)> {
    let owner = maybe(prop_oneof![
        Just(json!({"id": 0})),
        Just(json!({"id": 1000})),
        Just(json!({"name": "core"})),
    ]);
    let mode = maybe(prop::sample::select(
        &[0o644u32, 0o600, 0o755, 0o4755, 0o1777][..],
    ));
    prop_oneof![
        (
            maybe(source()),
            prop::collection::vec(source(), 0..2),
            mode.clone(),
            owner.clone(),
            maybe(any::<bool>())
        )
            .prop_map(|(contents, append, mode, user, overwrite)| {
                let mut f = json!({});
                if let Some(c) = contents {
                    f["contents"] = c;
                }
                if !append.is_empty() {
                    f["append"] = json!(append);
                }
                if let Some(m) = mode {
                    f["mode"] = json!(m);
                }
                if let Some(u) = user {
                    f["user"] = u;
                }
                // overwrite: true needs a source (a validation error otherwise, fine too).
                if let Some(o) = overwrite {
                    f["overwrite"] = json!(o);
                }
                (0u8, f)
            }),
        (mode, owner, maybe(any::<bool>())).prop_map(|(mode, user, overwrite)| {
            let mut d = json!({});
            if let Some(m) = mode {
                d["mode"] = json!(m);
            }
            if let Some(u) = user {
                d["user"] = u;
            }
            if let Some(o) = overwrite {
                d["overwrite"] = json!(o);
            }
            (1u8, d)
        }),
        (prop::sample::select(TARGETS), maybe(any::<bool>())).prop_map(|(t, overwrite)| {
            let mut l = json!({ "target": t });
            if let Some(o) = overwrite {
                l["overwrite"] = json!(o);
            }
            (2u8, l)
        }),
        (
            prop_oneof![
                path_strategy(),
                // Files the base has, alone or with other names.
                prop::sample::select(&["/etc/passwd", "/etc/h1", "/var/h1"][..])
                    .prop_map(str::to_string),
            ],
            maybe(any::<bool>())
        )
            .prop_map(|(t, overwrite)| {
                let mut l = json!({ "target": t, "hard": true });
                if let Some(o) = overwrite {
                    l["overwrite"] = json!(o);
                }
                (2u8, l)
            }),
    ]
}

fn unit_strategy() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["a.service", "b.socket", "c.timer", "d.service"][..]),
        maybe(prop::sample::select(&["", "[Unit]\nDescription=x\n"][..])),
        maybe(any::<bool>()),
        maybe(any::<bool>()),
        prop::collection::vec(
            (
                prop::sample::select(&["10-a.conf", "20-b.conf"][..]),
                maybe(prop::sample::select(&["", "[Service]\nNice=1\n"][..])),
            ),
            0..2,
        ),
    )
        .prop_map(|(name, contents, mask, enabled, dropins)| {
            let mut u = json!({ "name": name });
            if let Some(c) = contents {
                u["contents"] = json!(c);
            }
            if let Some(m) = mask {
                u["mask"] = json!(m);
            }
            if let Some(e) = enabled {
                u["enabled"] = json!(e);
            }
            let dropins: BTreeMap<&str, Value> = dropins
                .into_iter()
                .map(|(n, c)| {
                    let mut d = json!({ "name": n });
                    if let Some(c) = c {
                        d["contents"] = json!(c);
                    }
                    (n, d)
                })
                .collect();
            if !dropins.is_empty() {
                u["dropins"] = json!(dropins.into_values().collect::<Vec<_>>());
            }
            u
        })
}

fn config_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(&["3.3.0", "3.5.0"][..]),
        prop::collection::btree_map(path_strategy(), storage_entry(), 0..6),
        prop::collection::vec(unit_strategy(), 0..3),
    )
        .prop_map(|(version, storage, units)| {
            let mut files = Vec::new();
            let mut dirs = Vec::new();
            let mut links = Vec::new();
            for (path, (kind, mut e)) in storage {
                e["path"] = json!(path);
                match kind {
                    0 => files.push(e),
                    1 => dirs.push(e),
                    _ => links.push(e),
                }
            }
            // Unit names must be unique, or the config is (validly) rejected every time.
            let mut seen = BTreeSet::new();
            let units: Vec<Value> = units
                .into_iter()
                .filter(|u| seen.insert(u["name"].as_str().unwrap_or_default().to_string()))
                .collect();
            let cfg = json!({
                "ignition": { "version": version },
                "storage": { "files": files, "directories": dirs, "links": links },
                "systemd": { "units": units },
            });
            serde_json::to_vec_pretty(&cfg).expect("json")
        })
}

/// The engine on another thread, so that a hang (a symlink loop) fails instead of blocking.
fn run_engine(config: &[u8], view: &Arc<MemView>) -> Result<Result<Vec<u8>, String>, String> {
    let (tx, rx) = mpsc::channel();
    let config = config.to_vec();
    let view = Arc::clone(view);
    std::thread::spawn(move || {
        let r = ignition_layer_tar(&config, "generated.ign", &*view).map_err(|e| e.to_string());
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(r) => Ok(r),
        Err(mpsc::RecvTimeoutError::Timeout) => Err("the engine did not finish within 20 s".into()),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the engine panicked".into()),
    }
}

/// Check the structure of a layer tar.
fn check_layer(tar_bytes: &[u8]) -> Result<(), String> {
    let mut archive = tar::Archive::new(tar_bytes);
    let mut paths = BTreeSet::new();
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    let mut nodes: BTreeSet<String> = BTreeSet::new();
    // Mode and owner of each file and symlink, which its hard-link members must repeat.
    let mut inodes: BTreeMap<String, (u32, u64, u64)> = BTreeMap::new();
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let path = clean_tar_path(&raw)?;
        if !paths.insert(path.clone()) {
            return Err(format!("{path:?} appears twice"));
        }
        if let Some(i) = path.rfind('/') {
            let parent = &path[..i];
            if !dirs.contains(parent) {
                return Err(format!(
                    "{path:?} comes before (or without) a directory entry for its parent {parent:?}"
                ));
            }
        }
        let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
        let whiteout = name.starts_with(".wh.");
        let h = entry.header();
        let meta = (
            h.mode().map_err(|e| e.to_string())?,
            h.uid().map_err(|e| e.to_string())?,
            h.gid().map_err(|e| e.to_string())?,
        );
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                dirs.insert(path.clone());
            }
            // A hard link may name a file or a symlink (link(2) does not follow it).
            tar::EntryType::Regular | tar::EntryType::Symlink => {
                inodes.insert(path.clone(), meta);
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .ok_or_else(|| format!("{path:?}: hard link without a target"))?;
                let target = clean_tar_path(&target)?;
                if !nodes.contains(&target) {
                    return Err(format!(
                        "{path:?}: hard link to {target:?}, which is not an earlier entry"
                    ));
                }
                // Runtimes apply a link member's header to the shared inode.
                match inodes.get(&target) {
                    Some(m) if *m == meta => {}
                    Some(m) => {
                        return Err(format!(
                            "{path:?}: hard link header has mode/uid/gid {meta:?}, its target {target:?} {m:?}"
                        ));
                    }
                    None => {
                        return Err(format!(
                            "{path:?}: hard link to {target:?}, which is neither a file nor a symlink"
                        ));
                    }
                }
            }
            other => return Err(format!("{path:?}: unexpected entry type {other:?}")),
        }
        if whiteout {
            if entry.header().entry_type() != tar::EntryType::Regular {
                return Err(format!("{path:?}: a whiteout that is not a regular file"));
            }
        } else {
            nodes.insert(path);
        }
    }
    Ok(())
}

#[test]
fn generated_configs_give_deterministic_well_formed_layers() {
    // 64 by default; PROPTEST_CASES=N for a longer hunt.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let ok = AtomicUsize::new(0);
    let result = runner.run(&(base_strategy(), config_strategy()), |(base, config)| {
        let base = Arc::new(base);
        let first = run_engine(&config, &base).map_err(TestCaseError::fail)?;
        let second = run_engine(&config, &base).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&first, &second, "two runs on the same inputs differ");
        if let Ok(layer) = first {
            ok.fetch_add(1, Ordering::Relaxed);
            check_layer(&layer).map_err(TestCaseError::fail)?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The generator must reach the engine's success path often enough to mean something.
    let ok = ok.load(Ordering::Relaxed);
    assert!(
        ok >= cases as usize / 4,
        "only {ok} of {cases} generated configs built a layer"
    );
}

/// The layer checker itself rejects what it should.
#[test]
fn layer_checker_rejects_bad_layers() {
    fn raw_layer(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        raw_layer_modes(
            &entries
                .iter()
                .map(|&(p, k, l)| (p, k, l, 0o644))
                .collect::<Vec<_>>(),
        )
    }
    fn raw_layer_modes(entries: &[(&str, tar::EntryType, &str, u32)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, link, mode) in entries {
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(*kind);
            h.set_mode(*mode);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_size(0);
            h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            h.set_cksum();
            b.append(&h, &[][..]).expect("append");
        }
        b.into_inner().expect("tar")
    }
    use tar::EntryType::{Directory as D, Link as L, Regular as R};
    let good = raw_layer(&[
        ("etc/", D, ""),
        ("etc/a", R, ""),
        ("etc/.wh.b", R, ""),
        ("x", L, "etc/a"),
    ]);
    assert_eq!(check_layer(&good), Ok(()));
    for (bad, want) in [
        (
            raw_layer(&[("/etc/", D, "")]),
            r#"tar path "/etc/" is absolute"#,
        ),
        (
            raw_layer(&[("etc/../x", R, "")]),
            r#"tar path "etc/../x" is not clean"#,
        ),
        (
            raw_layer(&[("etc/a", R, "")]),
            r#""etc/a" comes before (or without) a directory entry for its parent "etc""#,
        ),
        (
            raw_layer(&[("etc/", D, ""), ("etc/", D, "")]),
            r#""etc" appears twice"#,
        ),
        (
            raw_layer(&[("etc", R, ""), ("etc/a", R, "")]),
            r#""etc/a" comes before (or without) a directory entry for its parent "etc""#,
        ),
        (
            raw_layer(&[("etc/", D, ""), ("etc/.wh.a", R, ""), ("x", L, "etc/.wh.a")]),
            r#""x": hard link to "etc/.wh.a", which is not an earlier entry"#,
        ),
        (
            raw_layer(&[("x", L, "etc/passwd")]),
            r#""x": hard link to "etc/passwd", which is not an earlier entry"#,
        ),
        // A link member with another mode than its inode (what runtimes would chmod it to).
        (
            raw_layer_modes(&[
                ("etc/", D, "", 0o755),
                ("etc/a", R, "", 0o644),
                ("x", L, "etc/a", 0),
            ]),
            r#""x": hard link header has mode/uid/gid (0, 0, 0), its target "etc/a" (420, 0, 0)"#,
        ),
    ] {
        assert_eq!(check_layer(&bad), Err(want.to_string()));
    }
}
