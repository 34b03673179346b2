//! The index of a tar of a directory tree answers like `DirView` over that tree.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use common::Mem;
use machineos_baseindex::{IndexBuilder, KEEP_LIMIT, LayerCompression};
use machineos_layer::{BaseError, BaseView, DirView, NodeKind};

fn write(root: &Path, p: &str, data: &[u8], mode: u32) {
    let host = root.join(p);
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::write(&host, data).unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn dir(root: &Path, p: &str, mode: u32) {
    let host = root.join(p);
    std::fs::create_dir_all(&host).unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn symlink(root: &Path, p: &str, target: &str) {
    let host = root.join(p);
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, host).unwrap();
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

#[test]
fn index_answers_like_dirview() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("rootfs");
    dir(&root, "", 0o755);
    write(
        &root,
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/var/home/core:/bin/bash\n",
        0o644,
    );
    write(&root, "etc/group", b"root:x:0:\nwheel:x:10:core\n", 0o644);
    write(&root, "etc/shadow", b"root:!::0:99999:7:::\n", 0o600);
    write(
        &root,
        "etc/systemd/system-preset/20-ignition.preset",
        b"enable a.service\n",
        0o644,
    );
    dir(&root, "etc/systemd/system/multi-user.target.wants", 0o755);
    symlink(
        &root,
        "etc/systemd/system/multi-user.target.wants/a.service",
        "/usr/lib/systemd/system/a.service",
    );
    symlink(&root, "etc/systemd/system/masked.service", "/dev/null");
    write(
        &root,
        "etc/big.conf",
        &vec![b'#'; (KEEP_LIMIT + 10) as usize],
        0o640,
    );
    write(
        &root,
        "usr/lib/passwd",
        b"bin:x:1:1::/:/sbin/nologin\n",
        0o644,
    );
    write(&root, "usr/lib/group", b"bin:x:1:\n", 0o644);
    write(
        &root,
        "usr/lib/systemd/system/a.service",
        b"[Unit]\n[Install]\nWantedBy=multi-user.target\n",
        0o644,
    );
    write(&root, "usr/bin/tool", b"\x7fELF not really", 0o755);
    write(&root, "usr/bin/suid", b"suid", 0o4755);
    write(&root, "usr/share/empty", b"", 0o644);
    write(&root, "usr/share/doc/a-b", b"dash", 0o444);
    write(&root, "usr/share/doc/a/b", b"nested", 0o644);
    dir(&root, "var/tmp", 0o1777);
    dir(&root, "root", 0o700);
    dir(&root, "usr/share/private", 0o750);
    symlink(&root, "bin", "usr/bin");
    symlink(&root, "usr/bin/dangling", "../nowhere");
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("run-fifo"))
        .status()
        .is_ok_and(|s| s.success());

    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    b.append_dir_all(".", &root).unwrap();
    let layer = b.into_inner().unwrap();

    let mut builder = IndexBuilder::new();
    builder
        .apply_layer(0, LayerCompression::None, layer.as_slice())
        .unwrap();
    let mut idx = builder.finish().unwrap();
    idx.set_layer_source(Arc::new(Mem(vec![layer])));
    let view = DirView::new(&root);

    let mut seen = 0;
    let mut stack = vec!["/".to_string()];
    while let Some(p) = stack.pop() {
        seen += 1;
        let want = view.lstat(&p).unwrap().unwrap();
        let got = idx
            .lstat(&p)
            .unwrap()
            .unwrap_or_else(|| panic!("{p} missing"));
        // tar records the owner the files really have, so uid/gid compare too.
        assert_eq!(got, want, "{p}");
        match want.kind {
            NodeKind::Dir => {
                let names = view.children(&p).unwrap();
                assert_eq!(idx.children(&p).unwrap(), names, "{p}");
                stack.extend(names.iter().map(|n| join(&p, n)));
            }
            NodeKind::File { .. } => {
                assert_eq!(idx.read(&p).unwrap(), view.read(&p).unwrap(), "{p}");
            }
            NodeKind::Symlink { .. } | NodeKind::Other => {
                assert!(
                    matches!(idx.read(&p), Err(BaseError::NotAFile { .. })),
                    "{p}"
                );
            }
        }
    }
    assert_eq!(seen, idx.len());
    if fifo {
        assert_eq!(
            idx.lstat("/run-fifo").unwrap().unwrap().kind,
            NodeKind::Other
        );
    }
    // The files the planner reads need no layer source.
    let kept = idx.stats().kept_bytes;
    assert!(kept > 0 && kept < KEEP_LIMIT, "{kept}");
    for p in ["/nope", "/etc/passwd/x"] {
        assert_eq!(idx.lstat(p).unwrap(), view.lstat(p).unwrap(), "{p}");
    }
}
