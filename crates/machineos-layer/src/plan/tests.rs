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
