//! A deterministic, RHCOS-like base tree that both the real `ignition-apply` and our engine
//! run against: compat symlinks into /var, passwd/group databases in /etc and /usr/lib,
//! vendor and enabled units, a pre-masked unit, an existing preset file, files and
//! directories with non-default owners and modes, symlinks and hard links.
//!
//! Everything is created with explicit modes and owners, so the result does not depend on
//! the umask or on who runs the build (it must be root to chown).

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, lchown, symlink};
use std::path::Path;

/// One node of the base tree.
enum Spec {
    Dir(u32, u32, u32),
    File(u32, u32, u32, &'static str),
    Symlink(&'static str),
    HardLink(&'static str),
}

use Spec::{Dir, File, HardLink, Symlink};

const VENDOR_INSTALL: &str = "[Unit]\nDescription=Vendor unit with an install section\n\n\
[Service]\nExecStart=/usr/bin/true\n\n[Install]\nWantedBy=multi-user.target\n";
const VENDOR_STATIC: &str = "[Unit]\nDescription=Vendor unit without an install section\n\n[Service]\nExecStart=/usr/bin/true\n";
const VENDOR_SOCKET: &str = "[Unit]\nDescription=Vendor socket\n\n[Socket]\nListenStream=/run/x.sock\n\n[Install]\nWantedBy=sockets.target\n";

/// The tree, in creation order (parents before children).
const TREE: &[(&str, Spec)] = &[
    ("etc", Dir(0o755, 0, 0)),
    (
        "etc/passwd",
        File(
            0o644,
            0,
            0,
            "root:x:0:0:root:/root:/bin/bash\n\
             core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n\
             svcuser:x:900:900:Service user:/var/lib/svc:/sbin/nologin\n",
        ),
    ),
    (
        "etc/group",
        File(
            0o644,
            0,
            0,
            "root:x:0:\nwheel:x:10:core\nsvcgroup:x:900:\ncore:x:1000:\n",
        ),
    ),
    (
        "etc/nsswitch.conf",
        File(
            0o644,
            0,
            0,
            "passwd: files altfiles systemd\nshadow: files\ngroup: files altfiles systemd\nhosts: files dns\n",
        ),
    ),
    (
        "etc/existing.conf",
        File(0o600, 1000, 1000, "existing line\n"),
    ),
    (
        "etc/to-overwrite.conf",
        File(0o640, 0, 900, "old content\n"),
    ),
    ("etc/setuid-tool", File(0o4755, 0, 0, "#!/bin/sh\n")),
    ("etc/hard-a", File(0o644, 0, 0, "hard linked pair\n")),
    ("etc/hard-b", HardLink("etc/hard-a")),
    ("etc/existing-link", Symlink("existing.conf")),
    ("etc/reldotdot", Symlink("../../../../var/abs")),
    ("etc/existing-dir", Dir(0o750, 1000, 1000)),
    (
        "etc/existing-dir/inner.conf",
        File(0o644, 1000, 1000, "inner\n"),
    ),
    ("etc/replace-dir", Dir(0o755, 0, 0)),
    ("etc/replace-dir/a.conf", File(0o644, 0, 0, "a\n")),
    ("etc/replace-dir/sub", Dir(0o700, 900, 900)),
    ("etc/replace-dir/sub/b.conf", File(0o600, 900, 900, "b\n")),
    ("etc/systemd", Dir(0o755, 0, 0)),
    ("etc/systemd/system", Dir(0o755, 0, 0)),
    ("etc/systemd/system/masked.service", Symlink("/dev/null")),
    (
        "etc/systemd/system/local.service",
        File(
            0o644,
            0,
            0,
            "[Unit]\nDescription=Local unit\n\n[Service]\nExecStart=/usr/bin/true\n",
        ),
    ),
    (
        "etc/systemd/system/multi-user.target.wants",
        Dir(0o755, 0, 0),
    ),
    (
        "etc/systemd/system/multi-user.target.wants/vendor-enabled.service",
        Symlink("/usr/lib/systemd/system/vendor-enabled.service"),
    ),
    ("etc/systemd/system/sockets.target.wants", Dir(0o755, 0, 0)),
    (
        "etc/systemd/system/sockets.target.wants/vendor-two.socket",
        Symlink("/usr/lib/systemd/system/vendor-two.socket"),
    ),
    (
        "etc/systemd/system/sockets.target.wants/vendor-keep.socket",
        Symlink("/usr/lib/systemd/system/vendor-keep.socket"),
    ),
    ("etc/systemd/system-preset", Dir(0o755, 0, 0)),
    (
        "etc/systemd/system-preset/20-ignition.preset",
        File(0o644, 0, 0, "enable preexisting.service\n"),
    ),
    ("usr", Dir(0o755, 0, 0)),
    ("usr/bin", Dir(0o755, 0, 0)),
    ("usr/bin/tool", File(0o755, 0, 0, "#!/bin/sh\necho tool\n")),
    ("usr/bin/tool-alias", HardLink("usr/bin/tool")),
    ("usr/lib", Dir(0o755, 0, 0)),
    (
        "usr/lib/passwd",
        File(0o644, 0, 0, "altuser:x:990:990:Alt user:/:/sbin/nologin\n"),
    ),
    (
        "usr/lib/group",
        File(0o644, 0, 0, "altuser:x:990:\naltgroup:x:991:\n"),
    ),
    ("usr/lib/systemd", Dir(0o755, 0, 0)),
    ("usr/lib/systemd/system", Dir(0o755, 0, 0)),
    (
        "usr/lib/systemd/system/vendor.service",
        File(0o644, 0, 0, VENDOR_INSTALL),
    ),
    (
        "usr/lib/systemd/system/vendor-enabled.service",
        File(0o644, 0, 0, VENDOR_INSTALL),
    ),
    (
        "usr/lib/systemd/system/vendor-static.service",
        File(0o644, 0, 0, VENDOR_STATIC),
    ),
    (
        "usr/lib/systemd/system/masked.service",
        File(0o644, 0, 0, VENDOR_INSTALL),
    ),
    (
        "usr/lib/systemd/system/vendor-two.socket",
        File(0o644, 0, 0, VENDOR_SOCKET),
    ),
    (
        "usr/lib/systemd/system/vendor-keep.socket",
        File(0o644, 0, 0, VENDOR_SOCKET),
    ),
    ("usr/local", Symlink("../var/usrlocal")),
    ("var", Dir(0o755, 0, 0)),
    ("var/usrlocal", Dir(0o755, 0, 0)),
    ("var/usrlocal/bin", Dir(0o755, 0, 0)),
    ("var/home", Dir(0o755, 0, 0)),
    ("var/home/core", Dir(0o700, 1000, 1000)),
    (
        "var/home/core/.bashrc",
        File(0o644, 1000, 1000, "# bashrc\n"),
    ),
    ("var/opt", Dir(0o755, 0, 0)),
    ("var/roothome", Dir(0o700, 0, 0)),
    ("var/mnt", Dir(0o755, 0, 0)),
    ("var/srv", Dir(0o755, 0, 0)),
    ("var/abs", Dir(0o755, 0, 0)),
    ("var/lib", Dir(0o755, 0, 0)),
    ("var/lib/app", Dir(0o750, 900, 900)),
    ("var/lib/app/state", File(0o640, 900, 900, "state\n")),
    ("var/lib/shared-sgid", Dir(0o2775, 0, 900)),
    ("tmp", Dir(0o1777, 0, 0)),
    ("home", Symlink("var/home")),
    ("opt", Symlink("var/opt")),
    ("root", Symlink("var/roothome")),
    ("mnt", Symlink("var/mnt")),
    ("srv", Symlink("var/srv")),
    ("abslink", Symlink("/var/abs")),
];

/// Build the base tree into `root`, which must be an existing empty directory.
pub fn build(root: &Path) -> io::Result<()> {
    for (rel, spec) in TREE {
        let path = root.join(rel);
        match spec {
            Dir(mode, uid, gid) => {
                fs::create_dir(&path)?;
                set_meta(&path, *mode, *uid, *gid)?;
            }
            File(mode, uid, gid, content) => {
                fs::write(&path, content)?;
                set_meta(&path, *mode, *uid, *gid)?;
            }
            Symlink(target) => {
                symlink(target, &path)?;
                lchown(&path, Some(0), Some(0))?;
            }
            HardLink(target) => fs::hard_link(root.join(target), &path)?,
        }
    }
    set_meta(root, 0o755, 0, 0)
}

/// chown first, then chmod: chown clears setuid/setgid bits.
fn set_meta(path: &Path, mode: u32, uid: u32, gid: u32) -> io::Result<()> {
    lchown(path, Some(uid), Some(gid))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}
