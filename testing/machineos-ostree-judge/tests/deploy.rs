//! machineos's images as nodes take them: built with the native builder on an
//! ostree-encapsulated synthetic base, imported and deployed by ostree-ext into a test
//! sysroot, and the deployed tree compared path by path with the image as umoci unpacks it
//! (what the layers mean). Every difference must be one ostree is known to make; each case
//! prints its comparison.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use machineos_image::{ImageRef, Layout, Platform};
use machineos_layer::write::{Compression, LayerOptions};
use machineos_native_builder::{BuildSpec, Environment, Outcome, Quiet};
use machineos_ostree_judge::{Deployed, Kind, Snapshot};
use machineos_synth::{ExtraFile, SynthSpec};
use machineos_testkit::umoci_unpack;

/// The fixed `SOURCE_DATE_EPOCH` of the builds.
const EPOCH: u64 = 1_700_000_000;

/// The example base with two unrelated files of equal contents — one content object once
/// encapsulated, so hard links of each other in the image.
fn base(dir: &Path) -> PathBuf {
    let path = dir.join("base");
    let layout = Layout::create(&path).expect("layout");
    let mut spec = SynthSpec::example();
    for p in ["/etc/dup-a.conf", "/usr/share/dup-b"] {
        spec.extra_files.push(ExtraFile {
            path: p.into(),
            contents: b"same contents\n".to_vec(),
            mode: 0o644,
        });
    }
    let desc = machineos_synth::write_image(&layout, &spec).expect("synth");
    layout.set_tag("base", &desc).expect("tag");
    path
}

/// Build `config` (an Ignition config) on `base` into the layout `out`, tag `t`.
fn build(base: &Path, out: &Path, config: &str) -> Outcome {
    let recipe =
        machineos_layering::ignition_recipe(config.as_bytes(), "test.ign").expect("config");
    let spec = BuildSpec {
        base: ImageRef::parse(&format!("oci:{}:base", base.display())).expect("ref"),
        output: ImageRef::parse(&format!("oci:{}:t", out.display())).expect("ref"),
        platform: Platform::new("linux", "amd64", None),
        recipe,
        created_by: "machineos ostree judge test".into(),
        layer: LayerOptions {
            mtime: EPOCH,
            compression: Compression::Gzip,
        },
        layer_out: None,
    };
    let env = Environment {
        registry: None,
        cache: None,
        memory: None,
        progress: std::sync::Arc::new(Quiet),
    };
    machineos_testkit::runtime()
        .block_on(machineos_native_builder::build(spec, env))
        .expect("build")
}

/// Deploy `image` with the judge binary into a new sysroot under `dir`.
fn deploy(image: &str, dir: &Path) -> Deployed {
    let out = Command::new(env!("CARGO_BIN_EXE_machineos-ostree-judge"))
        .args(["deploy", image])
        .arg(dir.join("sysroot"))
        .env("OSTREE_SYSROOT_OPTS", "skip-sync")
        .output()
        .expect("run the judge");
    assert!(
        out.status.success(),
        "deploying {image}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the judge's JSON")
}

/// Paths the comparison leaves out, and why: the object store (ostree-ext's transport,
/// not part of the deployed tree), `/var` (a node keeps its own; checked separately), and
/// `/usr/etc` (ostree's pristine copy of `/etc`, in the deployment only).
fn compared(path: &str) -> bool {
    !(path == "sysroot"
        || path.starts_with("sysroot/")
        || path == "var"
        || path.starts_with("var/")
        || path == "usr/etc"
        || path.starts_with("usr/etc/"))
}

/// Every difference between the image as unpacked and the deployed tree, as
/// `(path, image, deployed)` descriptions; timestamps and inode numbers are not compared.
fn differences(image: &Snapshot, deployed: &Snapshot) -> BTreeMap<String, (String, String)> {
    let show = |e: Option<&machineos_ostree_judge::Entry>| match e {
        None => "absent".to_owned(),
        Some(e) => format!("{:?} {:04o} {}:{}", e.kind, e.mode, e.uid, e.gid),
    };
    let mut out = BTreeMap::new();
    let paths: std::collections::BTreeSet<&String> = image
        .entries
        .keys()
        .chain(deployed.entries.keys())
        .collect();
    for p in paths {
        if p.is_empty() || !compared(p) {
            continue;
        }
        let (a, b) = (image.entries.get(p), deployed.entries.get(p));
        let same = match (a, b) {
            (Some(a), Some(b)) => {
                (&a.kind, a.mode, a.uid, a.gid) == (&b.kind, b.mode, b.uid, b.gid)
            }
            (None, None) => true,
            _ => false,
        };
        if !same {
            out.insert(p.clone(), (show(a), show(b)));
        }
    }
    out
}

fn file_text(s: &Snapshot, root: &Path, path: &str) -> String {
    assert!(
        matches!(s.get(path).map(|e| &e.kind), Some(Kind::File(_))),
        "{path} is not a file: {:?}",
        s.get(path)
    );
    std::fs::read_to_string(root.join(path)).expect("read")
}

fn print(case: &str, diffs: &BTreeMap<String, (String, String)>) {
    println!(
        "case {case}: {} differences between the image and the deployment",
        diffs.len()
    );
    for (p, (a, b)) in diffs {
        println!("  /{p}: image {a}, deployed {b}");
    }
}

/// The example MachineConfigs' kind of content, all at once: files in `/etc` (new,
/// overwritten, appended — one of them through an ostree dedup link), an overwrite of a
/// `/usr` file, a directory whose mode the config changes, a new directory, symlinks, a
/// hard link the config makes, long and UTF-8 names, units (enabled, drop-in, masked),
/// and `/var` content directly and through `/usr/local`.
const CONFIG: &str = r#"{
  "ignition": {"version": "3.4.0"},
  "storage": {
    "files": [
      {"path": "/etc/chrony.conf", "overwrite": true, "mode": 420,
       "contents": {"source": "data:,server%20ntp.example.com%20iburst%0A"}},
      {"path": "/etc/hosts", "append": [{"source": "data:,10.0.0.1%20registry.lab%0A"}]},
      {"path": "/etc/dup-a.conf", "append": [{"source": "data:,appended%0A"}]},
      {"path": "/usr/lib/os-release", "overwrite": true, "mode": 420,
       "contents": {"source": "data:,NAME%3DCustom%0AID%3Dcustom%0A"}},
      {"path": "/etc/containers/registries.conf.d/99-mirror.conf", "mode": 384,
       "contents": {"source": "data:,%5B%5Bregistry%5D%5D%0Alocation%20%3D%20%22quay.io%22%0A"}},
      {"path": "/etc/machineos-\u00fcn\u00efc\u00f8de-LONGNAME.conf", "contents": {"source": "data:,utf8%0A"}},
      {"path": "/usr/local/bin/hello", "mode": 493,
       "contents": {"source": "data:,%23!%2Fbin%2Fsh%0Aecho%20hi%0A"}},
      {"path": "/var/lib/machineos-test/state", "mode": 416, "user": {"id": 0}, "group": {"id": 992},
       "contents": {"source": "data:,state%0A"}}
    ],
    "directories": [
      {"path": "/etc/containers", "mode": 448},
      {"path": "/etc/machineos-test", "mode": 448},
      {"path": "/var/lib/machineos-test", "mode": 488}
    ],
    "links": [
      {"path": "/etc/machineos-test/current", "target": "/usr/local/bin/hello"},
      {"path": "/etc/chrony-hard.conf", "target": "/etc/chrony.conf", "hard": true}
    ]
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

/// The long name of [`CONFIG`], 200 bytes of the file name.
fn long_name() -> String {
    format!("machineos-\u{fc}n\u{ef}c\u{f8}de-{}.conf", "L".repeat(170))
}

#[test]
fn an_image_on_an_encapsulated_base_deploys_as_the_layer_means() {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = base(dir.path());
    let out = dir.path().join("out");
    let config = CONFIG.replace("LONGNAME", &"L".repeat(170));
    let outcome = build(&base, &out, &config);

    // The layer holds no object-store path, and warns about /etc/containers.
    let names: Vec<&str> = outcome
        .plan
        .entries
        .iter()
        .map(|e| e.path.as_str())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("sysroot")), "{names:?}");
    let warned: Vec<&str> = outcome
        .plan
        .warnings
        .iter()
        .map(|w| w.path.as_str())
        .collect();
    assert_eq!(
        warned,
        ["$.storage.directories.0"],
        "{:?}",
        outcome.plan.warnings
    );

    // The image as a container runtime sees it, and as a node deploys it.
    let unpacked = dir.path().join("unpacked");
    umoci_unpack(&out, "t", &unpacked).expect("umoci unpack");
    let image = Snapshot::of(&unpacked.join("rootfs")).expect("snapshot");
    let d = deploy(&format!("oci:{}:t", out.display()), dir.path());
    let deployed = Snapshot::of(&d.root).expect("snapshot");
    assert_eq!(d.filtered, None, "ostree-ext dropped paths of the layer");

    let diffs = differences(&image, &deployed);
    print("example MachineConfigs", &diffs);
    // The one difference: the mode of a directory the base has (warned about above).
    assert_eq!(
        diffs.keys().map(String::as_str).collect::<Vec<_>>(),
        ["etc/containers"],
        "{diffs:#?}"
    );
    assert_eq!(deployed.get("etc/containers").map(|e| e.mode), Some(0o755));
    assert_eq!(image.get("etc/containers").map(|e| e.mode), Some(0o700));

    // Appends: the named file only; the equal /usr file keeps the base's contents.
    assert_eq!(
        file_text(&deployed, &d.root, "etc/dup-a.conf"),
        "same contents\nappended\n"
    );
    assert_eq!(
        file_text(&deployed, &d.root, "usr/share/dup-b"),
        "same contents\n"
    );
    assert!(file_text(&deployed, &d.root, "etc/hosts").ends_with("10.0.0.1 registry.lab\n"));
    assert_eq!(
        file_text(&deployed, &d.root, "usr/lib/os-release"),
        "NAME=Custom\nID=custom\n"
    );
    assert_eq!(
        file_text(&deployed, &d.root, &format!("etc/{}", long_name())),
        "utf8\n"
    );
    // Units, presets, masks, drop-ins.
    assert_eq!(
        deployed
            .get("etc/systemd/system/fstrim.timer")
            .map(|e| e.kind.clone()),
        Some(Kind::Symlink("/dev/null".into()))
    );
    assert!(
        file_text(
            &deployed,
            &d.root,
            "etc/systemd/system-preset/20-ignition.preset"
        )
        .contains("enable hello.service")
    );
    assert_eq!(
        file_text(
            &deployed,
            &d.root,
            "etc/systemd/system/chronyd.service.d/10-test.conf"
        ),
        "[Service]\nNice=5\n"
    );
    // The hard link the config made: one inode in the image; ostree copies /etc.
    assert!(
        image
            .links_of("etc/chrony-hard.conf")
            .contains(&"etc/chrony.conf")
    );
    println!(
        "  /etc/chrony-hard.conf shares its inode with {:?} in the deployment",
        deployed.links_of("etc/chrony-hard.conf")
    );

    // /var: the deployment's own /var is the image's, which a rebased node never sees;
    // the factory copy and the tmpfiles.d snippet are in /usr, which it does.
    let factory = deployed.subtree("usr/share/factory/var");
    assert_eq!(
        factory
            .get("lib/machineos-test/state")
            .map(|e| (e.mode, e.uid, e.gid)),
        Some((0o640, 0, 992))
    );
    assert!(factory.get("usrlocal/bin/hello").is_some(), "{factory:#?}");
    let snippet = file_text(&deployed, &d.root, "usr/lib/tmpfiles.d/machineos-var.conf");
    println!("  usr/lib/tmpfiles.d/machineos-var.conf:\n{snippet}");
}

/// What a boot does with the image's snippet on the node at `root`
/// (`systemd-tmpfiles --root=ROOT --create`), and the tree after it.
fn boot_tmpfiles(root: &Path) -> Snapshot {
    let st = Command::new("systemd-tmpfiles")
        .arg(format!("--root={}", root.display()))
        .arg("--create")
        .arg(root.join("usr/lib/tmpfiles.d/machineos-var.conf"))
        .output()
        .expect("systemd-tmpfiles");
    assert!(
        st.status.success(),
        "systemd-tmpfiles: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    Snapshot::of(root).expect("snapshot")
}

#[test]
fn a_rebased_node_gets_var_content_from_tmpfiles_without_losing_its_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = base(dir.path());
    let out = dir.path().join("out");
    build(&base, &out, &CONFIG.replace("LONGNAME", "x"));
    let d = deploy(&format!("oci:{}:t", out.display()), dir.path());

    // A node that rebased: the deployment with the stateroot's /var (none of the image's
    // content), where the admin already changed one of the files.
    let root = dir.path().join("node");
    let status = Command::new("cp")
        .args(["-a", "--"])
        .arg(&d.root)
        .arg(&root)
        .status()
        .expect("cp");
    assert!(status.success());
    std::fs::remove_dir_all(root.join("var")).expect("rm var");
    std::fs::create_dir_all(root.join("var/lib/machineos-test")).expect("mkdir");
    std::fs::write(root.join("var/lib/machineos-test/state"), "local\n").expect("write");
    let node = boot_tmpfiles(&root);
    // Kept: the admin's change. Delivered: the rest, with the config's modes and owners.
    assert_eq!(
        file_text(&node, &root, "var/lib/machineos-test/state"),
        "local\n"
    );
    assert_eq!(
        node.get("var/lib/machineos-test").map(|e| e.mode),
        Some(0o750)
    );
    let hello = node
        .get("var/usrlocal/bin/hello")
        .map(|e| (e.kind.clone(), e.mode));
    assert!(matches!(hello, Some((Kind::File(_), 0o755))), "{hello:?}");
    assert_eq!(
        file_text(&node, &root, "var/usrlocal/bin/hello"),
        "#!/bin/sh\necho hi\n"
    );

    // And a fresh /var gets everything.
    std::fs::remove_dir_all(root.join("var")).expect("rm var");
    let node = boot_tmpfiles(&root);
    assert_eq!(
        file_text(&node, &root, "var/lib/machineos-test/state"),
        "state\n"
    );
    assert_eq!(
        node.get("var/lib/machineos-test/state")
            .map(|e| (e.mode, e.uid, e.gid)),
        Some((0o640, 0, 992))
    );
}

#[test]
fn the_encapsulated_base_itself_deploys_and_matches_its_unpacked_tree() {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = base(dir.path());
    let unpacked = dir.path().join("unpacked");
    umoci_unpack(&base, "base", &unpacked).expect("umoci unpack");
    let image = Snapshot::of(&unpacked.join("rootfs")).expect("snapshot");
    let d = deploy(&format!("oci:{}:base", base.display()), dir.path());
    let deployed = Snapshot::of(&d.root).expect("snapshot");
    let diffs = differences(&image, &deployed);
    print("the encapsulated base", &diffs);
    assert_eq!(diffs, BTreeMap::new());
    // Equal files share one content object: hard links of each other in the deployment.
    assert!(!deployed.links_of("usr/share/dup-b").is_empty());
}

/// A live apply on a real pair of ostree deployments: node A booted (its `/etc` the running
/// one, with the node's own files), image B deployed beside it as a node's next deployment
/// is (ostree merges A's `/etc` into it). Applying B live makes A's running `/etc` exactly
/// ostree's merge result — so the merge at the next boot changes nothing — and puts B's
/// `/var` content in place, which no merge does; an image that changes `/usr` is refused.
#[test]
fn a_live_apply_makes_the_running_etc_what_the_next_boots_merge_makes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = base(dir.path());
    let file = |path: &str, mode: u32, text: &str| {
        format!(
            r#"{{"path": "{path}", "mode": {mode}, "overwrite": true, "contents": {{"source": "data:,{text}"}}}}"#
        )
    };
    let config = |files: &[String], unit: &str| {
        format!(
            r#"{{"ignition": {{"version": "3.4.0"}}, "storage": {{"files": [{}]}},
               "systemd": {{"units": [{{"name": "hello.service", "enabled": true,
                 "contents": "[Service]\nExecStart=/bin/true {unit}\n[Install]\nWantedBy=multi-user.target\n"}}]}}}}"#,
            files.join(", ")
        )
    };
    let a_out = dir.path().join("a");
    build(
        &base,
        &a_out,
        &config(
            &[
                file("/etc/chrony.conf", 420, "server%20a%0A"),
                file("/etc/motd", 420, "one%0A"),
                file("/var/lib/app/conf", 416, "v1%0A"),
            ],
            "a",
        ),
    );
    let b_out = dir.path().join("b");
    build(
        &base,
        &b_out,
        &config(
            &[
                file("/etc/chrony.conf", 384, "server%20b%0A"),
                file("/etc/app/conf.d/10-x.conf", 420, "x%3D1%0A"),
                file("/var/lib/app/conf", 416, "v2%0A"),
            ],
            "b",
        ),
    );
    let c_out = dir.path().join("c");
    build(
        &base,
        &c_out,
        &config(&[file("/usr/lib/os-release", 420, "ID%3Dother%0A")], "a"),
    );
    let a = deploy(&format!("oci:{}:t", a_out.display()), dir.path());
    // The node as it runs A: its own files in /etc, A's /var content delivered.
    std::fs::write(a.root.join("etc/local.conf"), "mine\n").expect("write");
    std::fs::create_dir_all(a.var.join("lib/app")).expect("mkdir");
    let cp = Command::new("cp")
        .args(["-a", "--"])
        .arg(a.root.join("usr/share/factory/var/lib/app/conf"))
        .arg(a.var.join("lib/app/conf"))
        .status()
        .expect("cp");
    assert!(cp.success());
    // B deployed beside it: ostree merges the running /etc into B's.
    let b = deploy(&format!("oci:{}:t", b_out.display()), dir.path());
    assert_ne!(a.root, b.root);
    let merged = Snapshot::of(&b.root.join("etc")).expect("snapshot");
    assert!(
        merged.get("local.conf").is_some(),
        "ostree kept the node's file"
    );

    // The running system: A's root, the stateroot's /var.
    let live = dir.path().join("live");
    std::fs::create_dir_all(&live).expect("mkdir");
    std::os::unix::fs::symlink(a.root.join("etc"), live.join("etc")).expect("link");
    std::os::unix::fs::symlink(&a.var, live.join("var")).expect("link");
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).expect("mkdir");
    let record = machineos_host::live::AppliedRecord::new(&run);
    let done = machineos_host::live::apply(&live, &a.root, &b.root, &record).expect("live apply");
    println!(
        "live apply wrote {:?}, removed {:?}",
        done.written, done.removed
    );
    assert!(
        done.written.contains(&"/etc/chrony.conf".to_owned()),
        "{done:?}"
    );
    assert!(done.removed.contains(&"/etc/motd".to_owned()), "{done:?}");
    assert!(
        done.written.contains(&"/var/lib/app/conf".to_owned()),
        "{done:?}"
    );

    let running = Snapshot::of(&a.root.join("etc")).expect("snapshot");
    let view = |s: &Snapshot| -> BTreeMap<String, (Kind, u32, u32, u32)> {
        s.entries
            .iter()
            .filter(|(p, _)| !p.is_empty())
            .map(|(p, e)| (p.clone(), (e.kind.clone(), e.mode, e.uid, e.gid)))
            .collect()
    };
    let (want, have) = (view(&merged), view(&running));
    let differ: Vec<&String> = want
        .keys()
        .chain(have.keys())
        .filter(|p| want.get(*p) != have.get(*p))
        .collect();
    assert!(
        differ.is_empty(),
        "the running /etc differs from ostree's merge at {differ:?}"
    );
    assert_eq!(
        std::fs::read_to_string(a.var.join("lib/app/conf")).expect("read"),
        "v2\n"
    );
    // Again: nothing to do.
    let again = machineos_host::live::apply(&live, &a.root, &b.root, &record).expect("again");
    assert!(
        again.written.is_empty() && again.removed.is_empty(),
        "{again:?}"
    );

    // An image that changes /usr cannot be applied live; nothing is written.
    let c = deploy(&format!("oci:{}:t", c_out.display()), dir.path());
    let e = machineos_host::live::apply(&live, &a.root, &c.root, &record).unwrap_err();
    assert!(e.to_string().contains("/usr/lib/os-release"), "{e}");
    assert_eq!(
        std::fs::read_to_string(a.root.join("etc/chrony.conf")).expect("read"),
        "server b\n"
    );
}
