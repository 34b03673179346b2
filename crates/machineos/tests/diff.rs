//! `machineos diff` against the truth: every pair of images below is also unpacked with
//! umoci and snapshotted, and the paths the command reports — added, removed, modified,
//! with kind, mode, owner, size, symlink target and content digest — must be exactly the
//! paths whose snapshots differ, described as the snapshots describe them.
//!
//! The pairs: a synthetic base and an image machineos built on it; two images built on that
//! base from different MachineConfigs (a file in `/etc`, one under `/usr/local`); and two
//! different bases (another seed: every generated file's contents differ, some paths come
//! and go), where no layer is shared and the contents of equal-sized files are read. Also:
//! an image against itself (exit 0, nothing listed), the reads an image diffed against its
//! own base costs (its top layer only: indexed over the base's cached index, then its new
//! contents read), and the disruption the report derives.
//!
//! Needs umoci and root (umoci keeps owners only as root); fails without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use machineos_image::Layout;
use machineos_synth::{SynthSpec, write_image};
use machineos_testkit::{EntryKind, TreeEntry, snapshot, umoci_unpack};
use serde_json::Value;

mod common;
use common::{machineos, repo};

struct Images {
    tmp: tempfile::TempDir,
    layout: PathBuf,
}

impl Images {
    fn new() -> Images {
        let tmp = tempfile::tempdir().unwrap();
        let layout = tmp.path().join("images");
        let l = Layout::create(&layout).unwrap();
        let base = SynthSpec::example();
        l.set_tag("base", &write_image(&l, &base).unwrap()).unwrap();
        let other = SynthSpec {
            seed: base.seed + 1,
            ..base.clone()
        };
        l.set_tag("other", &write_image(&l, &other).unwrap())
            .unwrap();
        // A newer base with the same kernel: one more file under /usr.
        let mut newer = base.clone();
        newer.extra_files.push(machineos_synth::ExtraFile {
            path: "/usr/bin/new-tool".into(),
            contents: b"#!/bin/sh\n".to_vec(),
            mode: 0o755,
        });
        l.set_tag("newer", &write_image(&l, &newer).unwrap())
            .unwrap();
        let images = Images { tmp, layout };
        // `one`: the examples; `two`: the examples and a motd and a tool under /usr/local.
        images.build("one", &[&repo().join("examples/machineconfigs")]);
        let extra = images.tmp.path().join("extra.yaml");
        std::fs::write(
            &extra,
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n\
             metadata:\n  labels:\n    machineconfiguration.openshift.io/role: worker\n  \
             name: 99-worker-motd\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    \
             storage:\n      files:\n      - contents:\n          source: data:,hello\n        \
             mode: 420\n        path: /etc/motd\n      - contents:\n          source: \
             data:,tool\n        mode: 493\n        path: /usr/local/bin/tool\n",
        )
        .unwrap();
        images.build("two", &[&repo().join("examples/machineconfigs"), &extra]);
        // `three`: the examples on the newer base.
        images.build_on("newer", "three", &[&repo().join("examples/machineconfigs")]);
        images
    }

    fn image(&self, tag: &str) -> String {
        format!("oci:{}:{tag}", self.layout.display())
    }

    fn build(&self, tag: &str, inputs: &[&Path]) {
        self.build_on("base", tag, inputs);
    }

    fn build_on(&self, base: &str, tag: &str, inputs: &[&Path]) {
        let cache = self.tmp.path().join("cache");
        let mut args = vec![
            "build".to_owned(),
            "--base".to_owned(),
            self.image(base),
            "--output".to_owned(),
            self.image(tag),
            "--cache-dir".to_owned(),
            cache.display().to_string(),
            "--platform".to_owned(),
            "linux/amd64".to_owned(),
        ];
        args.extend(inputs.iter().map(|p| p.display().to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = machineos(&refs);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// `machineos diff -o json`: its exit code and report.
    fn diff(&self, from: &str, to: &str) -> (i32, Value) {
        let cache = self.tmp.path().join("cache");
        let o = machineos(&[
            "diff",
            &self.image(from),
            &self.image(to),
            "--platform",
            "linux/amd64",
            "--cache-dir",
            cache.to_str().unwrap(),
            "-o",
            "json",
        ]);
        let code = o.status.code().unwrap();
        assert!(
            code == 0 || code == 1,
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        (code, serde_json::from_slice(&o.stdout).unwrap())
    }

    fn tree(&self, tag: &str) -> BTreeMap<String, TreeEntry> {
        let dest = self.tmp.path().join(format!("unpacked-{tag}"));
        if !dest.exists() {
            umoci_unpack(&self.layout, tag, &dest).unwrap();
        }
        snapshot(&dest.join("rootfs"))
    }
}

fn kind(k: EntryKind) -> &'static str {
    match k {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
        _ => "other",
    }
}

/// A snapshot entry as the report describes a node.
fn described(e: &TreeEntry) -> Value {
    let mut v = serde_json::json!({
        "kind": kind(e.kind),
        "mode": format!("{:04o}", e.mode),
        "uid": e.uid,
        "gid": e.gid,
    });
    if e.kind == EntryKind::File {
        v["size"] = e.size.into();
        v["digest"] = format!("sha256:{}", e.sha256.as_deref().unwrap()).into();
    }
    if let Some(t) = &e.link_target {
        v["target"] = t.clone().into();
    }
    v
}

/// What umoci's trees say differs: path → (change, before, after).
fn truth(
    a: &BTreeMap<String, TreeEntry>,
    b: &BTreeMap<String, TreeEntry>,
) -> BTreeMap<String, (&'static str, Option<Value>, Option<Value>)> {
    let mut out = BTreeMap::new();
    for (p, e) in a {
        match b.get(p) {
            None => {
                out.insert(p.clone(), ("removed", Some(described(e)), None));
            }
            Some(f) if described(e) != described(f) => {
                out.insert(
                    p.clone(),
                    ("modified", Some(described(e)), Some(described(f))),
                );
            }
            Some(_) => {}
        }
    }
    for (p, f) in b {
        if !a.contains_key(p) {
            out.insert(p.clone(), ("added", None, Some(described(f))));
        }
    }
    out
}

/// The report's files in the same shape; a removed or unchanged-contents side carries no
/// digest in the report, so the truth's is dropped there before comparing.
fn reported(
    report: &Value,
    truth: &BTreeMap<String, (&'static str, Option<Value>, Option<Value>)>,
) -> BTreeMap<String, (&'static str, Option<Value>, Option<Value>)> {
    let mut out = BTreeMap::new();
    for f in report["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap().to_owned();
        let change = match f["change"].as_str().unwrap() {
            "added" => "added",
            "removed" => "removed",
            _ => "modified",
        };
        let mut before = f.get("before").cloned();
        // The report reads the old contents only when it must; take the truth's digest for
        // the comparison where it did not.
        if let (Some(b), Some((_, Some(t), _))) = (before.as_mut(), truth.get(&path))
            && b.get("digest").is_none()
            && let Some(d) = t.get("digest")
        {
            b["digest"] = d.clone();
        }
        out.insert(path, (change, before, f.get("after").cloned()));
    }
    out
}

fn check(images: &Images, from: &str, to: &str) -> Value {
    let (code, report) = images.diff(from, to);
    let want = truth(&images.tree(from), &images.tree(to));
    let got = reported(&report, &want);
    let got: BTreeMap<_, _> = got.into_iter().filter(|(p, _)| p != "/").collect();
    assert_eq!(got, want, "{from} → {to}");
    assert_eq!(
        code,
        i32::from(!want.is_empty()),
        "{from} → {to}: exit code"
    );
    report
}

#[test]
fn diff_reports_exactly_what_the_unpacked_trees_differ_in() {
    let images = Images::new();
    // An image against the base it was built on: only its own layer is read — to index it
    // over the base's cached index, and again only for contents the index does not keep.
    let report = check(&images, "base", "one");
    let reads = report["layerReads"].as_u64().unwrap();
    assert!((1..=2).contains(&reads), "{report}");
    assert_eq!(report["kernel"]["changed"], false);
    let base_label = report["baseImage"]["to"].as_str().unwrap();
    assert!(base_label.contains("@sha256:"), "{base_label}");
    // Two builds of one base: the motd and the tool (with its /var copy and factory entry).
    // Both indexed over the base's index its label names; only their top layers read.
    let report = check(&images, "one", "two");
    assert!(report["layerReads"].as_u64().unwrap() <= 4, "{report}");
    let paths: Vec<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for want in ["/etc/motd", "/var/usrlocal/bin/tool"] {
        assert!(paths.contains(&want), "{want} in {paths:?}");
    }
    // Both embed their rendered MachineConfig: the policies decide (a file with no policy
    // reboots, by the MCO's defaults), and name it.
    assert_eq!(report["disruption"]["class"], "Reboot");
    assert_eq!(report["disruption"]["reasons"][0], "file /etc/motd");
    assert_eq!(report["machineConfig"]["changed"], true);
    // The same MachineConfigs on a newer base whose kernel is the same: decided with the
    // filesystem difference, as the controller decides such a move — a soft reboot, where
    // the configs' changed osImageURL alone would reboot.
    let report = check(&images, "one", "three");
    assert_eq!(report["kernel"]["changed"], false);
    assert_ne!(report["baseImage"]["from"], report["baseImage"]["to"]);
    assert_eq!(report["disruption"]["class"], "SoftReboot", "{report}");
    let why = report["machineConfig"]["disruption"]["reasons"].to_string();
    assert!(
        why.contains("the base image changes")
            && why.contains("the kernel and initrd are the same"),
        "{why}"
    );
    // Two different bases: nothing shared, equal-sized files read and compared.
    let report = check(&images, "base", "other");
    assert!(
        report["summary"]["modified"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(report["machineConfig"].is_null());
    // The kernel and initrd differ: a reboot, and why.
    assert_eq!(report["kernel"]["changed"], true);
    assert_eq!(report["disruption"]["class"], "Reboot");
    let why = report["disruption"]["reasons"].to_string();
    assert!(
        why.contains("vmlinuz differs: the kernel or initrd changes"),
        "{why}"
    );
    // An image without an embedded MachineConfig against one with: not classified, a
    // reboot (here by the configuration alone: the kernel is the same).
    let (_, report) = images.diff("base", "two");
    assert_eq!(report["kernel"]["changed"], false);
    assert_eq!(report["disruption"]["class"], "Reboot");
    let why = report["disruption"]["reasons"][0].as_str().unwrap();
    assert!(
        why.starts_with("the first image does not embed a rendered MachineConfig"),
        "{why}"
    );
    // Nothing differs: exit 0, no files.
    let (code, report) = images.diff("two", "two");
    assert_eq!(code, 0);
    assert!(report["files"].as_array().unwrap().is_empty());
    assert_eq!(report["disruption"]["class"], "None");
}
