//! Unit tests of the planner's own rules: the warnings it adds to Ignition's, and the
//! variant each kind of failure is reported as.

use super::*;
use crate::base::DirView;

const IGNORED: &str = "ignored: ignition-apply does not apply this section to an image";

fn config(json: &str) -> Config {
    machineos_ignition::parse(json.as_bytes())
        .expect("a valid config")
        .config
}

/// A base with the directories `ostree container commit` empties, and `/etc/conflict`.
fn base() -> (tempfile::TempDir, DirView) {
    let dir = tempfile::tempdir().expect("temp dir");
    for d in ["tmp", "var/tmp", "run", "var/cache", "etc/conflict"] {
        std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
    }
    let view = DirView::new(dir.path());
    (dir, view)
}

#[test]
fn ignored_sections_are_reported_at_their_json_paths() {
    let c = config(
        r#"{"ignition":{"version":"3.5.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k"]}]},
            "kernelArguments":{"shouldExist":["a"]},"storage":{"disks":[{"device":"/dev/vda"}]}}"#,
    );
    let w = ignored_sections(&c);
    assert_eq!(
        w,
        [
            Warning::new("$.passwd.users", IGNORED),
            Warning::new("$.kernelArguments", IGNORED),
            Warning::new("$.storage.disks", IGNORED),
        ]
    );
    assert_eq!(
        w[0].to_string(),
        format!("warning at $.passwd.users: {IGNORED}")
    );
    assert_eq!(ignored_sections(&Config::default()), []);
}

#[test]
fn commit_cleanup_warns_once_per_emptied_directory() {
    let (_dir, view) = base();
    let c = config(
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[
            {"path":"/tmp/a"},{"path":"/tmp/b"},{"path":"/var/cache/c"},{"path":"/etc/kept"}]}}"#,
    );
    let opts = PlanOptions {
        commit_cleanup: true,
        ..PlanOptions::default()
    };
    let p = plan_with(&c, &view, &opts).expect("plan");
    assert_eq!(
        p.warnings,
        [
            Warning::new(
                "/tmp",
                "2 entries below /tmp dropped: ostree container commit empties it"
            ),
            Warning::new(
                "/var/cache",
                "1 entries below /var/cache dropped: ostree container commit empties it"
            ),
        ]
    );
    let paths: Vec<&str> = p.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["etc", "etc/kept", "tmp", "var", "var/cache"]);
    // Without the clean-up nothing is dropped and nothing is said.
    let p = plan(&c, &view).expect("plan");
    assert_eq!(p.warnings, []);
    let paths: Vec<&str> = p.entries.iter().map(|e| e.path.as_str()).collect();
    let all = [
        "etc",
        "etc/kept",
        "tmp",
        "tmp/a",
        "tmp/b",
        "var",
        "var/cache",
    ];
    assert_eq!(paths, [&all[..], &["var/cache/c"]].concat());
}

#[test]
fn failures_are_reported_by_kind_at_the_entry() {
    let (_dir, view) = base();
    let conflict = config(
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/ok"},{"path":"/etc/conflict"}]}}"#,
    );
    match plan(&conflict, &view) {
        Err(PlanError::Conflict { path, message }) => {
            assert_eq!(path, "$.storage.files.1");
            assert_eq!(
                message,
                "error creating file \"/etc/conflict\": A non regular file exists there already and overwrite is false"
            );
        }
        other => panic!("{other:?}"),
    }
    let not_a_dir = config(
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/f","contents":{"source":"data:,x"}}],
            "directories":[{"path":"/etc/f/sub"}]}}"#,
    );
    match plan(&not_a_dir, &view) {
        Err(e @ PlanError::Overlay { .. }) => {
            assert_eq!(e.path(), "$.storage.directories.0");
            assert_eq!(
                e.to_string(),
                "error at $.storage.directories.0: failed to create directory /etc/f/sub: /etc/f: not a directory"
            );
        }
        other => panic!("{other:?}"),
    }
    let bad_hash = config(
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/h","contents":{"source":"data:,x",
            "verification":{"hash":"sha256-0000000000000000000000000000000000000000000000000000000000000000"}}}]}}"#,
    );
    match plan(&bad_hash, &view) {
        Err(PlanError::Resource { path, what, error }) => {
            assert_eq!(path, "$.storage.files.0.contents");
            assert_eq!(what, "failed to create file \"/etc/h\"");
            assert!(
                matches!(
                    *error,
                    machineos_ignition::resource::FetchError::Hash { .. }
                ),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// An ostree-encapsulated base on disk: `/etc/dup-a.conf` and `/usr/share/dup-b` equal, so
/// hard links of one content object; `/etc/real-a` and `/etc/real-b` a hard-link pair of
/// a derived layer (no object name); `/etc/containers` 0755; `/var/lib`.
fn ostree_base() -> (tempfile::TempDir, DirView) {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    for d in [
        "sysroot/ostree/repo/objects/ab",
        "etc/containers",
        "usr/share",
        "var/lib",
        "var/tmp",
    ] {
        std::fs::create_dir_all(r.join(d)).expect("mkdir");
    }
    let obj = r.join("sysroot/ostree/repo/objects/ab/cdef.file");
    std::fs::write(&obj, "same\n").expect("write");
    std::fs::hard_link(&obj, r.join("etc/dup-a.conf")).expect("link");
    std::fs::hard_link(&obj, r.join("usr/share/dup-b")).expect("link");
    std::fs::write(r.join("etc/real-a"), "real\n").expect("write");
    std::fs::hard_link(r.join("etc/real-a"), r.join("etc/real-b")).expect("link");
    let view = DirView::new(r);
    (dir, view)
}

/// [`ostree_base`] without its object store: a plain container base with the same files.
fn plain_base() -> (tempfile::TempDir, DirView) {
    let (dir, _) = ostree_base();
    std::fs::remove_dir_all(dir.path().join("sysroot")).expect("rm");
    let view = DirView::new(dir.path());
    (dir, view)
}

fn entry<'p>(p: &'p Plan, path: &str) -> Option<&'p Entry> {
    p.entries.iter().find(|e| e.path == path)
}

fn text(e: Option<&Entry>) -> String {
    match e.map(|e| &e.kind) {
        Some(EntryKind::File(c)) => {
            String::from_utf8(c.to_vec(u64::MAX).expect("bytes")).expect("utf-8")
        }
        other => panic!("not a file: {other:?}"),
    }
}

#[test]
fn appends_through_ostree_dedup_links_change_only_the_named_file() {
    let (_dir, view) = ostree_base();
    let c = config(
        r#"{"ignition":{"version":"3.4.0"},"storage":{"files":[
            {"path":"/etc/dup-a.conf","append":[{"source":"data:,more%0A"}]},
            {"path":"/etc/real-a","append":[{"source":"data:,more%0A"}]}]}}"#,
    );
    let p = plan(&c, &view).expect("plan");
    let paths: Vec<&str> = p.entries.iter().map(|e| e.path.as_str()).collect();
    // The dedup pair: only the named file, as a file of its own; no object name.
    assert_eq!(text(entry(&p, "etc/dup-a.conf")), "same\nmore\n");
    assert!(entry(&p, "usr/share/dup-b").is_none(), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("sysroot")),
        "no sysroot/ostree entry: {paths:?}"
    );
    // The derived layer's real hard links keep Ignition's semantics: both names change.
    assert_eq!(text(entry(&p, "etc/real-a")), "real\nmore\n");
    assert_eq!(
        entry(&p, "etc/real-b").map(|e| &e.kind),
        Some(&EntryKind::HardLink("etc/real-a".into()))
    );
}

#[test]
fn chmod_of_a_dedup_file_and_a_hard_link_to_it_stay_off_the_object_store() {
    let (_dir, view) = ostree_base();
    let c = config(
        r#"{"ignition":{"version":"3.4.0"},"storage":{
            "files":[{"path":"/usr/share/dup-b","mode":384}],
            "links":[{"path":"/etc/dup-link","target":"/etc/dup-a.conf","hard":true}]}}"#,
    );
    let p = plan(&c, &view).expect("plan");
    let paths: Vec<&str> = p.entries.iter().map(|e| e.path.as_str()).collect();
    assert!(!paths.iter().any(|p| p.starts_with("sysroot")), "{paths:?}");
    assert_eq!(entry(&p, "usr/share/dup-b").map(|e| e.mode), Some(0o600));
    assert_eq!(text(entry(&p, "etc/dup-a.conf")), "same\n");
    assert_eq!(entry(&p, "etc/dup-a.conf").map(|e| e.mode), Some(0o644));
    assert_eq!(
        entry(&p, "etc/dup-link").map(|e| &e.kind),
        Some(&EntryKind::HardLink("etc/dup-a.conf".into()))
    );
}

#[test]
fn the_same_base_without_an_object_store_keeps_ignitions_hard_link_semantics() {
    let (_dir, view) = plain_base();
    let c = config(
        r#"{"ignition":{"version":"3.4.0"},"storage":{"files":[
            {"path":"/etc/dup-a.conf","append":[{"source":"data:,more%0A"}]}]}}"#,
    );
    let p = plan(&c, &view).expect("plan");
    assert_eq!(text(entry(&p, "etc/dup-a.conf")), "same\nmore\n");
    assert_eq!(
        entry(&p, "usr/share/dup-b").map(|e| &e.kind),
        Some(&EntryKind::HardLink("etc/dup-a.conf".into()))
    );
}

#[test]
fn directory_metadata_ostree_keeps_is_warned_about() {
    let (_dir, view) = ostree_base();
    let c = config(
        r#"{"ignition":{"version":"3.4.0"},"storage":{"directories":[
            {"path":"/etc/containers","mode":448},
            {"path":"/var/lib","mode":493},
            {"path":"/etc/new-dir","mode":448}]}}"#,
    );
    let p = plan(&c, &view).expect("plan");
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert_eq!(p.warnings[0].path, "$.storage.directories.0");
    assert!(
        p.warnings[0]
            .message
            .starts_with("directory /etc/containers exists in the ostree base image: ostree keeps its mode 0755 and owner 0:0"),
        "{}",
        p.warnings[0].message
    );
    // Without an object store, no warning: the container runtime applies it.
    let (_dir, plain) = plain_base();
    assert_eq!(plan(&c, &plain).expect("plan").warnings, []);
}

#[test]
fn var_content_gets_a_factory_copy_and_a_tmpfiles_line() {
    let (_dir, view) = ostree_base();
    let c = config(
        r#"{"ignition":{"version":"3.4.0"},"storage":{
            "directories":[{"path":"/var/lib/app","mode":488,"user":{"id":7},"group":{"id":8}}],
            "files":[{"path":"/var/lib/app/conf","mode":416,"contents":{"source":"data:,x%0A"}},
                     {"path":"/var/tmp/scratch","contents":{"source":"data:,y"}}],
            "links":[{"path":"/var/lib/app/current","target":"/usr/bin/true"}]}}"#,
    );
    let opts = PlanOptions {
        commit_cleanup: true,
        ..PlanOptions::default()
    };
    let p = plan_with(&c, &view, &opts).expect("plan");
    assert_eq!(text(entry(&p, "usr/share/factory/var/lib/app/conf")), "x\n");
    assert_eq!(
        entry(&p, "usr/share/factory/var/lib/app/conf").map(|e| (e.mode, e.uid, e.gid)),
        Some((0o640, 0, 0))
    );
    assert_eq!(
        entry(&p, "usr/share/factory/var/lib/app").map(|e| (e.mode, e.uid, e.gid)),
        Some((0o750, 7, 8))
    );
    assert_eq!(
        entry(&p, "usr/share/factory/var/lib/app/current").map(|e| &e.kind),
        Some(&EntryKind::Symlink("/usr/bin/true".into()))
    );
    assert!(entry(&p, "usr/share/factory/var/tmp/scratch").is_none());
    assert_eq!(
        text(entry(&p, "usr/lib/tmpfiles.d/machineos-var.conf"))
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        [
            "d /var/lib/app 0750 7 8 -",
            "C /var/lib/app/conf - - - - /usr/share/factory/var/lib/app/conf",
            "L /var/lib/app/current - - - - /usr/bin/true",
        ]
    );
    // No /var content, no snippet.
    let none =
        config(r#"{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x"}]}}"#);
    let p = plan(&none, &view).expect("plan");
    assert!(entry(&p, "usr/lib/tmpfiles.d/machineos-var.conf").is_none());
}
