//! Layer 0, the skeleton every CoreOS image has before any package: the top-level and
//! `/var` directories, ostree's compatibility symlinks, passwd/group/shadow in `/etc` and
//! `/usr/lib`, os-release, systemd presets and one enabled unit, and the files the final
//! layer later removes or replaces.
use super::TreeError;
use super::entry::{DIR, REG, meta};
use super::final_layer::{OPAQUE_DIR, WHITEOUT_DIR, WHITEOUT_FILE};
use super::planner::{Item, Planner};
use crate::spec::SynthVariant;

impl<'s> Planner<'s> {
    /// The items of layer 0.
    pub(super) fn skeleton(&mut self) -> Result<Vec<Item<'s>>, TreeError> {
        let mut out = Vec::new();
        let o = &mut out;
        for d in [
            "boot",
            "dev",
            "etc",
            "proc",
            "run",
            "sys",
            "sysroot",
            "usr",
            "var",
            "usr/bin",
            "usr/sbin",
            "usr/lib",
            "usr/lib64",
            "usr/libexec",
            "usr/share",
            "usr/include",
            "usr/src",
            "usr/lib/systemd/system",
            "usr/lib/sysusers.d",
            "usr/lib/tmpfiles.d",
            "etc/systemd/system/multi-user.target.wants",
            "etc/systemd/system-preset",
            "etc/issue.d",
            "etc/motd.d",
            "var/home",
            "var/opt",
            "var/srv",
            "var/mnt",
            "var/usrlocal",
            "var/usrlocal/bin",
            "var/usrlocal/sbin",
            "var/usrlocal/lib",
            "var/usrlocal/share",
            "var/lib",
            "var/log",
            "var/cache",
            "var/spool",
        ] {
            self.dir(o, d, DIR)?;
        }
        self.dir(o, "tmp", meta(0o1777, 0, 0))?;
        self.dir(o, "var/tmp", meta(0o1777, 0, 0))?;
        self.dir(o, "var/roothome", meta(0o700, 0, 0))?;
        // ostree's compatibility symlinks (the real data lives in /usr and /var).
        for (path, target) in [
            ("bin", "usr/bin"),
            ("lib", "usr/lib"),
            ("lib64", "usr/lib64"),
            ("sbin", "usr/sbin"),
            ("home", "var/home"),
            ("root", "var/roothome"),
            ("opt", "var/opt"),
            ("srv", "var/srv"),
            ("mnt", "var/mnt"),
            ("media", "run/media"),
            ("ostree", "sysroot/ostree"),
            ("usr/local", "../var/usrlocal"),
            ("etc/os-release", "../usr/lib/os-release"),
        ] {
            self.symlink(o, path, target)?;
        }
        let variant = self.spec.variant;
        let release = release_file(variant);
        let others = [
            "fedora-release",
            "system-release",
            "redhat-release",
            "centos-release",
        ];
        self.symlink(
            o,
            &format!("etc/{release}"),
            &format!("../usr/lib/{release}"),
        )?;
        for other in others.into_iter().filter(|&r| r != release) {
            // Fedora and CentOS Stream ship the two compatibility names; RHEL only
            // `system-release`.
            if variant == SynthVariant::Rhcos && other != "system-release" {
                continue;
            }
            if variant != SynthVariant::Rhcos && other == "centos-release" {
                continue;
            }
            self.symlink(o, &format!("etc/{other}"), release)?;
        }
        let v = &self.spec.version;
        let major = v.split('.').next().unwrap_or(v);
        self.text(o, "usr/lib/os-release", REG, os_release(variant, v, major))?;
        self.text(
            o,
            &format!("usr/lib/{release}"),
            REG,
            release_text(variant, v, major),
        )?;
        self.text(o, "etc/passwd", REG, ETC_PASSWD)?;
        self.text(o, "etc/group", REG, ETC_GROUP)?;
        self.text(o, "etc/shadow", meta(0, 0, 0), ETC_SHADOW)?;
        self.text(o, "etc/gshadow", meta(0, 0, 0), ETC_GSHADOW)?;
        let (passwd, group) = match variant {
            SynthVariant::Fcos => (USR_LIB_PASSWD.to_owned(), USR_LIB_GROUP.to_owned()),
            // No zincati; the `containers` user whose sub-ID ranges user namespaces use.
            SynthVariant::Scos | SynthVariant::Rhcos => (
                USR_LIB_PASSWD.replace(
                    "zincati:x:995:993:Zincati user:/var/lib/zincati:/sbin/nologin\n",
                    "containers:x:995:993:User for housing the sub ID range for containers:/var/home/containers:/sbin/nologin\n",
                ),
                USR_LIB_GROUP.replace("zincati:x:993:\n", "containers:x:993:\n"),
            ),
        };
        self.text(o, "usr/lib/passwd", REG, passwd)?;
        self.text(o, "usr/lib/group", REG, group)?;
        self.text(o, "etc/nsswitch.conf", REG, NSSWITCH)?;
        self.text(
            o,
            "etc/hosts",
            REG,
            "127.0.0.1   localhost localhost.localdomain\n::1         localhost localhost.localdomain\n",
        )?;
        self.text(
            o,
            "etc/shells",
            REG,
            "/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n",
        )?;
        self.text(
            o,
            "etc/issue.d/20-coreos.issue",
            REG,
            format!("{} \\r (\\m)\n", variant_issue_name(variant)),
        )?;
        self.text(
            o,
            "usr/lib/systemd/system-preset/90-default.preset",
            REG,
            match variant {
                SynthVariant::Fcos => PRESET_DEFAULT.to_owned(),
                SynthVariant::Scos | SynthVariant::Rhcos => {
                    PRESET_DEFAULT.replace("enable zincati.service\n", "enable crio.service\n")
                }
            },
        )?;
        self.text(
            o,
            "usr/lib/systemd/system-preset/99-default-disable.preset",
            REG,
            "disable *\n",
        )?;
        self.text(
            o,
            "etc/systemd/system-preset/20-ignition.preset",
            REG,
            "enable ostree-remount.service\n",
        )?;
        let unit = enabled_unit(variant);
        self.symlink(
            o,
            &format!("etc/systemd/system/multi-user.target.wants/{unit}"),
            &format!("/usr/lib/systemd/system/{unit}"),
        )?;
        // Removed or replaced by the final layer.
        self.text(
            o,
            WHITEOUT_FILE,
            REG,
            "This file is removed by a whiteout in the final layer.\n",
        )?;
        self.text(
            o,
            &format!("{WHITEOUT_DIR}/notes.txt"),
            REG,
            "Legacy notes, removed with their directory by the final layer.\n",
        )?;
        self.text(
            o,
            &format!("{WHITEOUT_DIR}/compat.json"),
            REG,
            "{\"legacy\": true}\n",
        )?;
        self.text(
            o,
            &format!("{OPAQUE_DIR}/stable"),
            REG,
            "stream=stable\nrevision=1\n",
        )?;
        self.text(
            o,
            &format!("{OPAQUE_DIR}/testing"),
            REG,
            "stream=testing\nrevision=1\n",
        )?;
        Ok(out)
    }
}

/// The unit the skeleton enables in `/etc/systemd/system/multi-user.target.wants`.
fn enabled_unit(variant: SynthVariant) -> &'static str {
    match variant {
        SynthVariant::Fcos => "zincati.service",
        SynthVariant::Scos | SynthVariant::Rhcos => "crio.service",
    }
}

/// The name `/etc/issue.d` greets with.
fn variant_issue_name(variant: SynthVariant) -> &'static str {
    match variant {
        SynthVariant::Fcos => "Fedora CoreOS",
        SynthVariant::Scos => "CentOS Stream CoreOS",
        SynthVariant::Rhcos => "Red Hat Enterprise Linux CoreOS",
    }
}

/// The distribution's own release file in `/usr/lib` (with a symlink from `/etc`).
fn release_file(variant: SynthVariant) -> &'static str {
    match variant {
        SynthVariant::Fcos => "fedora-release",
        SynthVariant::Scos => "centos-release",
        SynthVariant::Rhcos => "redhat-release",
    }
}

/// The release file's one line.
fn release_text(variant: SynthVariant, version: &str, major: &str) -> String {
    match variant {
        SynthVariant::Fcos => format!("Fedora release {major} (CoreOS)\n"),
        SynthVariant::Scos => format!("CentOS Stream release {major}\n"),
        SynthVariant::Rhcos => format!(
            "Red Hat Enterprise Linux CoreOS release {}\n",
            openshift_version(version)
        ),
    }
}

/// RHCOS's OpenShift version from its version string: `416.94.…` → `4.16`.
fn openshift_version(version: &str) -> String {
    dotted(version.split('.').next().unwrap_or(version))
}

/// RHCOS's RHEL version from its version string: `416.94.…` → `9.4`.
fn rhel_version(version: &str) -> String {
    dotted(version.split('.').nth(1).unwrap_or(""))
}

/// `416` → `4.16`, `94` → `9.4` (a single digit stays as it is).
fn dotted(s: &str) -> String {
    match s.char_indices().nth(1) {
        Some((i, _)) => format!("{}.{}", &s[..i], &s[i..]),
        None => s.to_owned(),
    }
}

/// `/usr/lib/os-release` of `variant` at version `version` (first component `major`).
fn os_release(variant: SynthVariant, version: &str, major: &str) -> String {
    match variant {
        SynthVariant::Fcos => fedora_os_release(version, major),
        SynthVariant::Scos => format!(
            "NAME=\"CentOS Stream CoreOS\"\nVERSION=\"{version}\"\nID=\"centos\"\nID_LIKE=\"rhel fedora\"\nVERSION_ID=\"{major}\"\nPLATFORM_ID=\"platform:el{major}\"\nPRETTY_NAME=\"CentOS Stream CoreOS {version}\"\nANSI_COLOR=\"0;31\"\nLOGO=\"fedora-logo-icon\"\nCPE_NAME=\"cpe:/o:centos:centos:{major}::coreos\"\nHOME_URL=\"https://centos.org/\"\nBUG_REPORT_URL=\"https://issues.redhat.com/\"\nREDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux {major}\"\nREDHAT_SUPPORT_PRODUCT_VERSION=\"CentOS Stream\"\nVARIANT=\"CoreOS\"\nVARIANT_ID=coreos\nOSTREE_VERSION='{version}'\n"
        ),
        SynthVariant::Rhcos => {
            let (ocp, rhel) = (openshift_version(version), rhel_version(version));
            let rhel_major = rhel.split('.').next().unwrap_or(&rhel).to_owned();
            format!(
                "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\nID_LIKE=\"rhel fedora\"\nVERSION=\"{version}\"\nVERSION_ID=\"{ocp}\"\nVARIANT=\"CoreOS\"\nVARIANT_ID=coreos\nPLATFORM_ID=\"platform:el{rhel_major}\"\nPRETTY_NAME=\"Red Hat Enterprise Linux CoreOS {version} (Plow)\"\nANSI_COLOR=\"0;31\"\nCPE_NAME=\"cpe:/o:redhat:enterprise_linux:{rhel_major}::coreos\"\nHOME_URL=\"https://www.redhat.com/\"\nDOCUMENTATION_URL=\"https://docs.openshift.com/container-platform/{ocp}/\"\nBUG_REPORT_URL=\"https://issues.redhat.com/\"\nREDHAT_BUGZILLA_PRODUCT=\"OpenShift Container Platform\"\nREDHAT_BUGZILLA_PRODUCT_VERSION=\"{ocp}\"\nREDHAT_SUPPORT_PRODUCT=\"OpenShift Container Platform\"\nREDHAT_SUPPORT_PRODUCT_VERSION=\"{ocp}\"\nOPENSHIFT_VERSION=\"{ocp}\"\nRHEL_VERSION=\"{rhel}\"\nOSTREE_VERSION=\"{version}\"\n"
            )
        }
    }
}

/// Fedora CoreOS's `/usr/lib/os-release` for version `version` of Fedora `major`.
fn fedora_os_release(version: &str, major: &str) -> String {
    format!(
        "NAME=\"Fedora Linux\"\nVERSION=\"{version} (CoreOS)\"\nRELEASE_TYPE=stable\nID=fedora\nVERSION_ID={major}\nVERSION_CODENAME=\"\"\nPLATFORM_ID=\"platform:f{major}\"\nPRETTY_NAME=\"Fedora CoreOS {version}\"\nANSI_COLOR=\"0;38;2;60;110;180\"\nLOGO=fedora-logo-icon\nCPE_NAME=\"cpe:/o:fedoraproject:fedora:{major}\"\nHOME_URL=\"https://getfedora.org/coreos/\"\nDOCUMENTATION_URL=\"https://docs.fedoraproject.org/en-US/fedora-coreos/\"\nSUPPORT_URL=\"https://github.com/coreos/fedora-coreos-tracker/\"\nBUG_REPORT_URL=\"https://github.com/coreos/fedora-coreos-tracker/\"\nREDHAT_BUGZILLA_PRODUCT=\"Fedora\"\nREDHAT_BUGZILLA_PRODUCT_VERSION={major}\nREDHAT_SUPPORT_PRODUCT=\"Fedora\"\nREDHAT_SUPPORT_PRODUCT_VERSION={major}\nVARIANT=\"CoreOS\"\nVARIANT_ID=coreos\nOSTREE_VERSION='{version}'\n"
    )
}

const ETC_PASSWD: &str =
    "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n";
const ETC_GROUP: &str = "root:x:0:\nwheel:x:10:core\nsudo:x:16:core\nadm:x:4:core\nsystemd-journal:x:190:core\ncore:x:1000:\n";
const ETC_SHADOW: &str = "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n";
const ETC_GSHADOW: &str =
    "root:::\nwheel:::core\nsudo:::core\nadm:::core\nsystemd-journal:::core\ncore:!::\n";
const USR_LIB_PASSWD: &str = "bin:x:1:1:bin:/bin:/sbin/nologin\ndaemon:x:2:2:daemon:/sbin:/sbin/nologin\nadm:x:3:4:adm:/var/adm:/sbin/nologin\nnobody:x:65534:65534:Kernel Overflow User:/:/sbin/nologin\ndbus:x:81:81:System message bus:/:/usr/sbin/nologin\nsshd:x:74:74:Privilege-separated SSH:/usr/share/empty.sshd:/sbin/nologin\ntss:x:59:59:Account used for TPM access:/:/usr/sbin/nologin\nsystemd-network:x:192:192:systemd Network Management:/:/usr/sbin/nologin\nsystemd-resolve:x:193:193:systemd Resolver:/:/usr/sbin/nologin\nchrony:x:994:992:chrony system user:/var/lib/chrony:/sbin/nologin\nzincati:x:995:993:Zincati user:/var/lib/zincati:/sbin/nologin\npolkitd:x:998:996:User for polkitd:/:/sbin/nologin\n";
const USR_LIB_GROUP: &str = "bin:x:1:\ndaemon:x:2:\nsys:x:3:\ntty:x:5:\ndisk:x:6:\nlp:x:7:\nmem:x:8:\nkmem:x:9:\nutmp:x:22:\nutempter:x:35:\ntss:x:59:\nsshd:x:74:\ndbus:x:81:\nsystemd-network:x:192:\nsystemd-resolve:x:193:\ninput:x:104:\nkvm:x:36:\nrender:x:105:\naudio:x:63:\nvideo:x:39:\nchrony:x:992:\nzincati:x:993:\npolkitd:x:996:\nnobody:x:65534:\n";
const NSSWITCH: &str = "passwd:     files altfiles systemd\nshadow:     files\ngroup:      files altfiles systemd\nhosts:      files myhostname resolve [!UNAVAIL=return] dns\nservices:   files\nnetgroup:   files\nautomount:  files\naliases:    files\n";
const PRESET_DEFAULT: &str = "enable chronyd.service\nenable sshd.service\nenable NetworkManager.service\nenable zincati.service\nenable podman.socket\nenable fstrim.timer\nenable systemd-resolved.service\nenable rpm-ostree-countme.timer\n";
