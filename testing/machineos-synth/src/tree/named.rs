//! The named packages: those whose important files are spelled out because node
//! configuration cares about them — the kernel, glibc's loader, setuid and setgid binaries,
//! hard-linked tools, units and presets, configs with non-root owners.

use super::TreeError;
use super::entry::{DIR, ELF, EXE, REG, meta};
use super::packages::{Package, PkgKind};
use super::planner::{Item, Planner};
use crate::content::Style;
use crate::rng::{Rng, derive};
use crate::spec::SynthVariant;

// Numeric ids, as Fedora's `setup` package and the packages' sysusers files assign them.
const GID_TTY: u32 = 5;
const GID_UTEMPTER: u32 = 35;
const GID_SYSTEMD_JOURNAL: u32 = 190;
const UID_CHRONY: u32 = 994;
const GID_CHRONY: u32 = 992;
const UID_POLKITD: u32 = 998;

/// A package whose important files are spelled out.
pub(super) struct Named {
    /// The rpm name.
    pub(super) name: &'static str,
    /// What its generated files are like.
    kind: PkgKind,
    /// Relative share of the generated files.
    share: u64,
    /// Executables (ELF files with a random size).
    bins: &'static [&'static str],
    /// Unit file name and its `WantedBy=` (empty: a static unit).
    units: &'static [(&'static str, &'static str)],
    /// Configuration files (short text).
    configs: &'static [&'static str],
}

/// A [`Named`] in one line of the table.
const fn named(
    name: &'static str,
    kind: PkgKind,
    share: u64,
    bins: &'static [&'static str],
    units: &'static [(&'static str, &'static str)],
    configs: &'static [&'static str],
) -> Named {
    Named {
        name,
        kind,
        share,
        bins,
        units,
        configs,
    }
}

/// The named packages, in the order they are planned.
pub(super) const NAMED: &[Named] = &[
    named("kernel-core", PkgKind::Kernel, 240, &[], &[], &[]),
    named("linux-firmware", PkgKind::Firmware, 120, &[], &[], &[]),
    named("glibc", PkgKind::Library, 16, &[], &[], &[]),
    named(
        "bash",
        PkgKind::Tool,
        4,
        &["usr/bin/bash"],
        &[],
        &["etc/bashrc", "etc/profile"],
    ),
    named(
        "coreutils",
        PkgKind::Tool,
        8,
        &[
            "usr/bin/cat",
            "usr/bin/chmod",
            "usr/bin/chown",
            "usr/bin/cp",
            "usr/bin/date",
            "usr/bin/df",
            "usr/bin/du",
            "usr/bin/echo",
            "usr/bin/env",
            "usr/bin/id",
            "usr/bin/ln",
            "usr/bin/ls",
            "usr/bin/mkdir",
            "usr/bin/mv",
            "usr/bin/rm",
            "usr/bin/sort",
            "usr/bin/stat",
            "usr/bin/tail",
            "usr/bin/touch",
            "usr/bin/wc",
        ],
        &[],
        &[],
    ),
    named(
        "util-linux",
        PkgKind::Tool,
        8,
        &[
            "usr/bin/lsblk",
            "usr/bin/findmnt",
            "usr/sbin/blkid",
            "usr/sbin/fdisk",
        ],
        &[("fstrim.timer", "timers.target"), ("fstrim.service", "")],
        &[],
    ),
    named("sudo", PkgKind::Tool, 3, &[], &[], &[]),
    named(
        "shadow-utils",
        PkgKind::Tool,
        3,
        &["usr/sbin/useradd", "usr/sbin/usermod", "usr/sbin/groupadd"],
        &[],
        &["etc/login.defs"],
    ),
    named("passwd", PkgKind::Tool, 1, &[], &[], &[]),
    named("e2fsprogs", PkgKind::Tool, 3, &[], &[], &[]),
    named("bzip2", PkgKind::Tool, 1, &[], &[], &[]),
    named(
        "systemd",
        PkgKind::Tool,
        24,
        &[
            "usr/bin/systemctl",
            "usr/bin/journalctl",
            "usr/bin/loginctl",
            "usr/bin/hostnamectl",
            "usr/lib/systemd/systemd",
            "usr/lib/systemd/systemd-journald",
            "usr/lib/systemd/systemd-logind",
            "usr/lib/systemd/systemd-udevd",
            "usr/lib/systemd/systemd-resolved",
        ],
        &[
            ("basic.target", ""),
            ("getty@.service", "getty.target"),
            ("multi-user.target", ""),
            ("sysinit.target", ""),
            ("systemd-journald.service", ""),
            ("systemd-logind.service", ""),
            ("systemd-resolved.service", "multi-user.target"),
            ("systemd-udevd.service", ""),
        ],
        &[],
    ),
    named(
        "chrony",
        PkgKind::Tool,
        2,
        &["usr/sbin/chronyd", "usr/bin/chronyc"],
        &[("chronyd.service", "multi-user.target")],
        &["etc/chrony.conf"],
    ),
    named(
        "openssh-server",
        PkgKind::Tool,
        2,
        &["usr/sbin/sshd", "usr/libexec/openssh/sshd-session"],
        &[
            ("sshd.service", "multi-user.target"),
            ("sshd.socket", "sockets.target"),
            ("sshd@.service", ""),
        ],
        &[],
    ),
    named(
        "openssh-clients",
        PkgKind::Tool,
        2,
        &["usr/bin/ssh", "usr/bin/scp", "usr/bin/ssh-keygen"],
        &[],
        &["etc/ssh/ssh_config"],
    ),
    named(
        "zincati",
        PkgKind::Tool,
        1,
        &["usr/libexec/zincati"],
        &[("zincati.service", "multi-user.target")],
        &[],
    ),
    named(
        "podman",
        PkgKind::Tool,
        6,
        &[],
        &[
            ("podman.service", ""),
            ("podman.socket", "sockets.target"),
            ("podman-auto-update.service", ""),
            ("podman-auto-update.timer", "timers.target"),
        ],
        &[],
    ),
    named(
        "containers-common",
        PkgKind::Data,
        2,
        &[],
        &[],
        &[
            "etc/containers/policy.json",
            "etc/containers/registries.conf",
            "etc/containers/storage.conf",
        ],
    ),
    named(
        "NetworkManager",
        PkgKind::Tool,
        8,
        &["usr/sbin/NetworkManager", "usr/bin/nmcli"],
        &[
            ("NetworkManager.service", "multi-user.target"),
            (
                "NetworkManager-wait-online.service",
                "network-online.target",
            ),
        ],
        &["etc/NetworkManager/NetworkManager.conf"],
    ),
    named(
        "rpm-ostree",
        PkgKind::Tool,
        3,
        &["usr/bin/rpm-ostree"],
        &[
            ("rpm-ostreed.service", ""),
            ("rpm-ostree-countme.timer", "timers.target"),
        ],
        &[],
    ),
    named(
        "ostree",
        PkgKind::Tool,
        3,
        &["usr/bin/ostree", "usr/lib/ostree/ostree-prepare-root"],
        &[("ostree-remount.service", "local-fs.target")],
        &[],
    ),
    named(
        "ignition",
        PkgKind::Tool,
        2,
        &["usr/lib/dracut/modules.d/30ignition/ignition"],
        &[],
        &[],
    ),
    named(
        "afterburn",
        PkgKind::Tool,
        1,
        &["usr/bin/afterburn"],
        &[
            ("afterburn.service", ""),
            ("afterburn-sshkeys@.service", ""),
        ],
        &[],
    ),
    named("libutempter", PkgKind::Library, 1, &[], &[], &[]),
    named(
        "polkit",
        PkgKind::Tool,
        3,
        &["usr/lib/polkit-1/polkitd"],
        &[("polkit.service", "")],
        &[],
    ),
    named("ca-certificates", PkgKind::Data, 2, &[], &[], &[]),
    named("tzdata", PkgKind::Data, 8, &[], &[], &[]),
    named(
        "dbus-broker",
        PkgKind::Tool,
        2,
        &["usr/bin/dbus-broker"],
        &[("dbus-broker.service", "")],
        &[],
    ),
];

/// CentOS Stream and RHEL CoreOS's package in zincati's place (they update through the
/// MCO, not zincati, and ship the container runtime the kubelet uses).
const CRIO: Named = named(
    "cri-o",
    PkgKind::Tool,
    1,
    &["usr/bin/crio"],
    &[("crio.service", "multi-user.target")],
    &["etc/crio/crio.conf"],
);

/// The named packages of `variant`, in the order they are planned: [`NAMED`], with
/// `cri-o` in `zincati`'s place on CentOS Stream and RHEL CoreOS.
pub(super) fn named_packages(variant: SynthVariant) -> impl Iterator<Item = &'static Named> {
    NAMED.iter().map(move |n| match variant {
        SynthVariant::Scos | SynthVariant::Rhcos if n.name == "zincati" => &CRIO,
        _ => n,
    })
}

impl<'s> Planner<'s> {
    /// The items of named package `def`.
    pub(super) fn named(&mut self, def: &Named) -> Result<Package<'s>, TreeError> {
        let mut out = Vec::new();
        let o = &mut out;
        for bin in def.bins {
            self.elf(o, bin, EXE)?;
        }
        for (unit, wanted_by) in def.units {
            self.unit(o, def.name, unit, wanted_by)?;
        }
        for conf in def.configs {
            let body = config_text(def.name, conf);
            self.text(o, conf, REG, body)?;
        }
        self.special(def.name, o)?;
        Ok(Package {
            name: def.name.to_owned(),
            kind: def.kind,
            share: def.share,
            items: out,
        })
    }

    /// The files that make a named package interesting to node configuration.
    fn special(&mut self, name: &str, o: &mut Vec<Item<'s>>) -> Result<(), TreeError> {
        match name {
            "kernel-core" => {
                let k = format!("usr/lib/modules/{}", self.kver);
                self.synth(
                    o,
                    &format!("{k}/vmlinuz"),
                    EXE,
                    16 << 20,
                    Style::Random,
                    b"MZ",
                )?;
                self.synth(
                    o,
                    &format!("{k}/initramfs.img"),
                    REG,
                    64 << 20,
                    Style::Random,
                    b"070701",
                )?;
                let hmac = format!(
                    "{:016x}{:016x}  vmlinuz\n",
                    derive(self.content_seed, "h1"),
                    derive(self.content_seed, "h2")
                );
                self.text(o, &format!("{k}/.vmlinuz.hmac"), REG, hmac)?;
                self.synth(
                    o,
                    &format!("{k}/config"),
                    REG,
                    260 << 10,
                    Style::Text,
                    b"#\n# Automatically generated file; DO NOT EDIT.\n",
                )?;
                self.synth(
                    o,
                    &format!("{k}/System.map"),
                    REG,
                    6 << 20,
                    Style::Text,
                    b"",
                )?;
                for (f, w) in [
                    ("modules.dep", 1 << 20),
                    ("modules.alias", 1300 << 10),
                    ("modules.builtin", 60 << 10),
                    ("modules.order", 200 << 10),
                ] {
                    self.synth(o, &format!("{k}/{f}"), REG, w, Style::Text, b"")?;
                }
            }
            "linux-firmware" => {
                self.synth(
                    o,
                    "usr/share/licenses/linux-firmware/WHENCE",
                    REG,
                    900 << 10,
                    Style::Text,
                    b"",
                )?;
            }
            "glibc" => {
                let loader = format!("usr/lib64/{}", self.arch.loader);
                self.synth(o, &loader, EXE, 1 << 20, Style::Binary, ELF)?;
                self.synth(o, "usr/lib64/libc.so.6", EXE, 2 << 20, Style::Binary, ELF)?;
                self.elf(o, "usr/lib64/libm.so.6", EXE)?;
                self.elf(o, "usr/sbin/ldconfig", EXE)?;
                self.text(o, "etc/ld.so.conf", REG, "include ld.so.conf.d/*.conf\n")?;
                self.dir(o, "etc/ld.so.conf.d", DIR)?;
            }
            "bash" => self.symlink(o, "usr/bin/sh", "bash")?,
            "util-linux" => {
                for setuid in ["usr/bin/su", "usr/bin/mount", "usr/bin/umount"] {
                    self.elf(o, setuid, meta(0o4755, 0, 0))?;
                }
                self.elf(o, "usr/bin/write", meta(0o2755, 0, GID_TTY))?;
            }
            "sudo" => {
                self.elf(o, "usr/bin/sudo", meta(0o4111, 0, 0))?;
                self.text(o, "etc/sudoers", meta(0o440, 0, 0), SUDOERS)?;
                self.dir(o, "etc/sudoers.d", meta(0o750, 0, 0))?;
            }
            "passwd" => self.elf(o, "usr/bin/passwd", meta(0o4755, 0, 0))?,
            "e2fsprogs" => {
                let w = Rng::labelled(self.spec.seed, "mke2fs").log_uniform(128 << 10, 512 << 10);
                self.hardlinks(
                    o,
                    &[
                        "usr/sbin/mke2fs",
                        "usr/sbin/mkfs.ext2",
                        "usr/sbin/mkfs.ext3",
                        "usr/sbin/mkfs.ext4",
                    ],
                    w,
                )?;
                self.hardlinks(
                    o,
                    &[
                        "usr/sbin/e2fsck",
                        "usr/sbin/fsck.ext2",
                        "usr/sbin/fsck.ext3",
                        "usr/sbin/fsck.ext4",
                    ],
                    w,
                )?;
            }
            "bzip2" => self.hardlinks(
                o,
                &["usr/bin/bzip2", "usr/bin/bunzip2", "usr/bin/bzcat"],
                40 << 10,
            )?,
            "systemd" => {
                self.dir(o, "var/log/journal", meta(0o2755, 0, GID_SYSTEMD_JOURNAL))?;
                self.text(o, "usr/lib/sysusers.d/systemd.conf", REG, "g systemd-journal 190 -\nu systemd-network 192 \"systemd Network Management\"\nu systemd-resolve 193 \"systemd Resolver\"\n")?;
                self.text(o, "usr/lib/tmpfiles.d/systemd.conf", REG, "d /run/user 0755 root root -\nz /var/log/journal 2755 root systemd-journal - -\n")?;
            }
            "chrony" => {
                self.text(
                    o,
                    "etc/chrony.keys",
                    meta(0o640, 0, GID_CHRONY),
                    "#1 MD5 HEX:0000\n",
                )?;
                self.dir(o, "var/lib/chrony", meta(0o755, UID_CHRONY, GID_CHRONY))?;
            }
            "openssh-server" => {
                self.text(o, "etc/ssh/sshd_config", meta(0o600, 0, 0), SSHD_CONFIG)?;
                self.dir(o, "etc/ssh/sshd_config.d", meta(0o700, 0, 0))?;
            }
            "zincati" => {
                self.text(
                    o,
                    "usr/lib/zincati/config.d/10-auto-updates.toml",
                    REG,
                    "[updates]\nenabled = true\nstrategy = \"immediate\"\n",
                )?;
            }
            "podman" => {
                self.synth(o, "usr/bin/podman", EXE, 40 << 20, Style::Binary, ELF)?;
            }
            "containers-common" => {
                self.dir(o, "etc/containers/registries.conf.d", DIR)?;
            }
            "libutempter" => {
                self.elf(
                    o,
                    "usr/libexec/utempter/utempter",
                    meta(0o2711, 0, GID_UTEMPTER),
                )?;
                self.elf(o, "usr/lib64/libutempter.so.1.2.1", EXE)?;
                self.symlink(o, "usr/lib64/libutempter.so.0", "libutempter.so.1.2.1")?;
            }
            "polkit" => {
                self.dir(o, "usr/share/polkit-1/rules.d", meta(0o700, UID_POLKITD, 0))?;
                self.text(o, "usr/share/polkit-1/rules.d/50-default.rules", REG, "polkit.addAdminRule(function(action, subject) {\n    return [\"unix-group:wheel\"];\n});\n")?;
            }
            "ca-certificates" => {
                self.synth(
                    o,
                    "usr/share/pki/ca-trust-source/ca-bundle.trust.p11-kit",
                    REG,
                    900 << 10,
                    Style::Text,
                    b"# This is a bundle of X.509 certificates of public Certificate Authorities\n",
                )?;
                self.symlink(o, "etc/ssl/certs", "../pki/tls/certs")?;
                self.dir(o, "etc/pki/tls/certs", DIR)?;
            }
            "tzdata" => {
                self.synth(
                    o,
                    "usr/share/zoneinfo/UTC",
                    REG,
                    114,
                    Style::Binary,
                    b"TZif2",
                )?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The contents of configuration file `path` of package `pkg`.
fn config_text(pkg: &str, path: &str) -> String {
    match path {
        "etc/chrony.conf" => "pool 2.fedora.pool.ntp.org iburst\nsourcedir /run/chrony-dhcp\ndriftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\nntsdumpdir /var/lib/chrony\nleapsectz right/UTC\nlogdir /var/log/chrony\n".to_owned(),
        "etc/containers/registries.conf" => "unqualified-search-registries = [\"registry.fedoraproject.org\", \"registry.access.redhat.com\", \"docker.io\"]\nshort-name-mode = \"enforcing\"\n".to_owned(),
        "etc/containers/policy.json" => "{\n    \"default\": [\n        {\n            \"type\": \"insecureAcceptAnything\"\n        }\n    ]\n}\n".to_owned(),
        "etc/login.defs" => "MAIL_DIR\t/var/spool/mail\nUID_MIN\t\t\t 1000\nUID_MAX\t\t\t60000\nSYS_UID_MIN\t\t  201\nSYS_UID_MAX\t\t  999\nGID_MIN\t\t\t 1000\nGID_MAX\t\t\t60000\nENCRYPT_METHOD YESCRYPT\n".to_owned(),
        "etc/NetworkManager/NetworkManager.conf" => "[main]\n#plugins=keyfile\n\n[logging]\n#level=INFO\n".to_owned(),
        _ => format!("# /{path}: configuration of {pkg}\n# (generated by machineos-synth)\n"),
    }
}

const SUDOERS: &str = "Defaults   !visiblepw\nDefaults    always_set_home\nroot\tALL=(ALL) \tALL\n%wheel\tALL=(ALL)\tALL\n#includedir /etc/sudoers.d\n";
const SSHD_CONFIG: &str = "Include /etc/ssh/sshd_config.d/*.conf\nAuthorizedKeysFile\t.ssh/authorized_keys\nSubsystem\tsftp\t/usr/libexec/openssh/sftp-server\n";
