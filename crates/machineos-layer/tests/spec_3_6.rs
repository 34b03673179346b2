//! Ignition spec 3.6.0 applied as current Ignition applies it: setuid, setgid and sticky bits
//! of files and directories reach the layer from 3.6.0 on, and are masked below it with
//! Ignition's warning — the case a rendered MachineConfig keeps its modes as written for.

use machineos_layer::{DirView, plan::EntryKind, plan_ignition};

fn config(version: &str) -> String {
    format!(
        r#"{{"ignition":{{"version":"{version}"}},"storage":{{
            "files":[{{"path":"/usr/local/bin/tool","mode":{file},"contents":{{"source":"data:,x"}}}}],
            "directories":[{{"path":"/var/srv/drop","mode":{dir}}}]}}}}"#,
        file = 0o4755,
        dir = 0o3775
    )
}

#[test]
fn special_bits_are_applied_from_3_6_and_masked_below() {
    let root = tempfile::tempdir().expect("a base");
    std::fs::create_dir_all(root.path().join("etc")).expect("etc");
    let base = DirView::new(root.path());
    for (version, file, dir, warned) in [
        ("3.6.0", 0o4755, 0o3775, false),
        ("3.5.0", 0o755, 0o775, true),
    ] {
        let plan = plan_ignition(config(version).as_bytes(), "t.ign", &base).expect("plans");
        let mode = |path: &str| {
            plan.entries
                .iter()
                .find(|e| e.path == path)
                .map(|e| (e.mode, matches!(e.kind, EntryKind::Dir)))
        };
        assert_eq!(mode("usr/local/bin/tool"), Some((file, false)), "{version}");
        assert_eq!(mode("var/srv/drop"), Some((dir, true)), "{version}");
        let special = plan
            .warnings
            .iter()
            .filter(|w| {
                w.message
                    .contains("setuid/setgid/sticky bits are not supported")
            })
            .count();
        assert_eq!(special > 0, warned, "{version}: {:?}", plan.warnings);
    }
}
