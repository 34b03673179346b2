use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::*;

fn write(path: &Path, text: &str, mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A booted deployment, a staged one sharing its unchanged files by hard link (as two
/// ostree checkouts of one repository do), and the live root whose /etc came from the
/// booted one plus the node's own files.
struct Host {
    _dir: tempfile::TempDir,
    root: PathBuf,
    booted: PathBuf,
    staged: PathBuf,
    record: AppliedRecord,
}

fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let booted = dir.path().join("booted");
    let staged = dir.path().join("staged");
    for (p, text, mode) in [
        ("usr/etc/chrony.conf", "server a\n", 0o644),
        ("usr/etc/hosts", "127.0.0.1 localhost\n", 0o644),
        ("usr/etc/systemd/system/app.service", "[Service]\n", 0o644),
        ("usr/lib/os-release", "ID=fedora\n", 0o644),
        ("usr/lib/tmpfiles.d/tmp.conf", "d /tmp\n", 0o644),
        ("usr/bin/true", "ELF", 0o755),
        ("usr/share/factory/var/lib/app/conf", "v1\n", 0o600),
    ] {
        write(&booted.join(p), text, mode);
        fs::create_dir_all(staged.join(p).parent().unwrap()).unwrap();
        fs::hard_link(booted.join(p), staged.join(p)).unwrap();
        if let Some(rest) = p.strip_prefix("usr/etc/") {
            write(&root.join("etc").join(rest), text, mode);
        }
        if let Some(rest) = p.strip_prefix("usr/share/factory/var/") {
            write(&root.join("var").join(rest), text, mode);
        }
    }
    write(&root.join("etc/machine-id"), "0123\n", 0o444);
    let state = dir.path().join("run");
    fs::create_dir_all(&state).unwrap();
    Host {
        record: AppliedRecord::new(&state),
        _dir: dir,
        root,
        booted,
        staged,
    }
}

fn replace(path: &Path, text: &str, mode: u32) {
    // A new object in the new checkout: never write through a shared hard link.
    let _ = fs::remove_file(path);
    write(path, text, mode);
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_live_etc_and_var_become_the_staged_images_and_the_nodes_own_files_stay() {
    let h = host();
    replace(&h.staged.join("usr/etc/chrony.conf"), "server b\n", 0o600);
    fs::remove_file(h.staged.join("usr/etc/hosts")).unwrap();
    write(
        &h.staged.join("usr/etc/app/conf.d/10-x.conf"),
        "x=1\n",
        0o640,
    );
    symlink(
        "/etc/systemd/system/app.service",
        h.staged.join("usr/etc/systemd/system/app.link"),
    )
    .unwrap();
    replace(
        &h.staged.join("usr/share/factory/var/lib/app/conf"),
        "v2\n",
        0o600,
    );
    replace(
        &h.staged.join("usr/lib/tmpfiles.d/machineos-var.conf"),
        "C /var/lib/app/conf\n",
        0o644,
    );
    let done = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(
        done.written,
        [
            "/etc/app",
            "/etc/app/conf.d",
            "/etc/app/conf.d/10-x.conf",
            "/etc/chrony.conf",
            "/etc/systemd/system/app.link",
            "/var/lib/app/conf",
        ]
    );
    assert_eq!(done.removed, ["/etc/hosts"]);
    let etc = h.root.join("etc");
    assert_eq!(read(&etc.join("chrony.conf")), "server b\n");
    assert_eq!(mode(&etc.join("chrony.conf")), 0o600);
    assert_eq!(read(&etc.join("app/conf.d/10-x.conf")), "x=1\n");
    assert_eq!(mode(&etc.join("app/conf.d/10-x.conf")), 0o640);
    assert_eq!(
        fs::read_link(etc.join("systemd/system/app.link")).unwrap(),
        Path::new("/etc/systemd/system/app.service")
    );
    assert!(!etc.join("hosts").exists());
    assert_eq!(
        read(&etc.join("machine-id")),
        "0123\n",
        "the node's own file stays"
    );
    assert_eq!(read(&h.root.join("var/lib/app/conf")), "v2\n");
    // No temporary file is left beside what was written.
    let left: Vec<_> = fs::read_dir(&etc)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("machineos-live"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Again: nothing more to do.
    let again = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(again, Applied::default());
}

#[test]
fn a_later_image_that_reverts_a_live_change_reverts_it_live_too() {
    let h = host();
    replace(&h.staged.join("usr/etc/chrony.conf"), "server b\n", 0o644);
    apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(read(&h.root.join("etc/chrony.conf")), "server b\n");
    // The next image (staged in place of the first) has the booted file again: the
    // booted→staged comparison no longer names it, the record does.
    replace(&h.staged.join("usr/etc/chrony.conf"), "server a\n", 0o644);
    let done = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(done.written, ["/etc/chrony.conf"]);
    assert_eq!(read(&h.root.join("etc/chrony.conf")), "server a\n");
}

#[test]
fn a_change_outside_etc_and_var_is_refused_before_anything_is_written() {
    let h = host();
    replace(&h.staged.join("usr/etc/chrony.conf"), "server b\n", 0o644);
    replace(&h.staged.join("usr/bin/true"), "ELF2", 0o755);
    write(&h.staged.join("usr/lib/new/x"), "x", 0o644);
    let e = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("outside /etc and /var (/usr/bin/true, /usr/lib/new, /usr/lib/new/x)"),
        "{msg}"
    );
    assert_eq!(read(&h.root.join("etc/chrony.conf")), "server a\n");
}

#[test]
fn a_mode_or_owner_change_alone_is_a_change() {
    let h = host();
    replace(&h.staged.join("usr/etc/chrony.conf"), "server a\n", 0o600);
    let done = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(done.written, ["/etc/chrony.conf"]);
    assert_eq!(mode(&h.root.join("etc/chrony.conf")), 0o600);
}

#[test]
fn a_deployment_is_found_where_ostree_checks_it_out() {
    let d = Deployment {
        stateroot: "fedora-coreos".into(),
        checksum: "ab12".into(),
        serial: 0,
    };
    assert_eq!(
        d.dir(Path::new("/host")),
        Path::new("/host/sysroot/ostree/deploy/fedora-coreos/deploy/ab12.0")
    );
}

#[test]
fn var_is_data_nothing_there_is_removed_and_etc_keeps_what_the_node_put_in_a_removed_directory() {
    let h = host();
    // The next image drops its /var content and an /etc directory the node added a file to.
    write(&h.booted.join("usr/etc/app/a.conf"), "a\n", 0o644);
    write(&h.root.join("etc/app/a.conf"), "a\n", 0o644);
    write(&h.root.join("etc/app/local.conf"), "mine\n", 0o644);
    write(&h.root.join("var/lib/app/state.db"), "data\n", 0o600);
    fs::remove_dir_all(h.staged.join("usr/share/factory")).unwrap();
    let done = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(done.removed, ["/etc/app/a.conf"], "{done:?}");
    assert_eq!(read(&h.root.join("var/lib/app/conf")), "v1\n", "kept");
    assert_eq!(read(&h.root.join("var/lib/app/state.db")), "data\n");
    assert_eq!(read(&h.root.join("etc/app/local.conf")), "mine\n");
    // The directory went once it was empty.
    fs::remove_file(h.root.join("etc/app/local.conf")).unwrap();
    let again = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    assert_eq!(again.removed, ["/etc/app"], "{again:?}");
}

#[test]
fn a_write_never_follows_a_link_on_the_running_system() {
    let h = host();
    let outside = h.root.parent().unwrap().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::remove_dir_all(h.root.join("etc/systemd")).unwrap();
    symlink(&outside, h.root.join("etc/systemd")).unwrap();
    replace(
        &h.staged.join("usr/etc/systemd/system/app.service"),
        "[Service]\nX=1\n",
        0o644,
    );
    let e = apply(&h.root, &h.booted, &h.staged, &h.record).unwrap_err();
    assert!(e.to_string().contains("is a link or a file"), "{e}");
    assert!(
        fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing written out there"
    );
}

#[test]
fn before_a_reboot_into_another_image_the_recorded_paths_are_made_that_images() {
    let h = host();
    replace(&h.staged.join("usr/etc/chrony.conf"), "server b\n", 0o644);
    apply(&h.root, &h.booted, &h.staged, &h.record).unwrap();
    // The next image, booted by a reboot, has its own chrony.conf: made live first, so the
    // merge at the reboot takes it, not the live-applied one.
    let next = h.root.parent().unwrap().join("next");
    write(&next.join("usr/etc/chrony.conf"), "server c\n", 0o644);
    let done = sync_recorded(&h.root, &next, &h.record).unwrap();
    assert_eq!(done.written, ["/etc/chrony.conf"]);
    assert_eq!(read(&h.root.join("etc/chrony.conf")), "server c\n");
    // Going back to the booted image: its file again.
    sync_recorded(&h.root, &h.booted, &h.record).unwrap();
    assert_eq!(read(&h.root.join("etc/chrony.conf")), "server a\n");
    // Nothing recorded: nothing to do.
    let fresh = AppliedRecord::new(&h.root.parent().unwrap().join("nothing"));
    assert_eq!(
        sync_recorded(&h.root, &next, &fresh).unwrap(),
        Applied::default()
    );
}
