//! Which OS a base image is, read from the image itself, and what differs between them.
//!
//! No code path asks "which distribution is this" of a flag: [`detect`] decides a
//! [`Variant`] — Fedora CoreOS, CentOS Stream CoreOS, RHEL CoreOS, another bootable (bootc)
//! image, or a plain container — from the image's `/usr/lib/os-release` and its config
//! labels (`containers.bootc`, `ostree.bootable`, `ostree.commit`, `com.coreos.osname`);
//! [`traits()`] gives what differs for that kind (kernel RPMs per `kernelType`, the supported
//! extensions, the node's pull secret path) from one table ([`mod@traits`]).
//!
//! Contract:
//! - Pure: no I/O. The caller reads os-release from the image (or passes `None`).
//! - Never fails: an os-release line that breaks os-release(5)'s rules is skipped and
//!   reported as a [`machineos_diagnostics::Warning`] in [`Variant::warnings`] (see
//!   [`mod@os_release`] for the rules and why the parser is hand-written).
//! - [`Variant`] and [`VariantTraits`] serialize with serde in camelCase, for `-o json`.
//!
//! ```
//! use std::collections::BTreeMap;
//! use machineos_variant::{VariantKind, detect, traits};
//!
//! let labels = BTreeMap::from([("containers.bootc".to_owned(), "1".to_owned())]);
//! let v = detect(Some("ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=41\n"), &labels);
//! assert_eq!(v.kind, VariantKind::FedoraCoreOS);
//! assert!(traits(&v).kernel_realtime.supported().is_none());
//! ```

mod detect;
pub mod os_release;
pub mod traits;

pub use detect::{OS_RELEASE_PATH, Source, Variant, VariantKind, detect};
pub use os_release::{OsRelease, parse};
pub use traits::{
    EL_EXTENSIONS, Extension, KERNEL_64K_PAGES, KERNEL_DEFAULT, KERNEL_REALTIME,
    KUBELET_PULL_SECRET, Kernel, OSTREE_PULL_SECRET, Support, VariantTraits, el_extension_packages,
    traits, traits_of,
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const FCOS_41: &str = r#"NAME="Fedora Linux"
VERSION="41.20241027.3.0 (CoreOS)"
RELEASE_TYPE=stable
ID=fedora
VERSION_ID=41
VERSION_CODENAME=""
PLATFORM_ID="platform:f41"
PRETTY_NAME="Fedora CoreOS 41.20241027.3.0"
ANSI_COLOR="0;38;2;60;110;180"
LOGO=fedora-logo-icon
CPE_NAME="cpe:/o:fedoraproject:fedora:41"
HOME_URL="https://getfedora.org/coreos/"
VARIANT="CoreOS"
VARIANT_ID=coreos
OSTREE_VERSION='41.20241027.3.0'
"#;

    /// OKD's SCOS up to 4.15: its own ID.
    const SCOS_412: &str = r#"NAME="CentOS Stream CoreOS"
ID="scos"
ID_LIKE="rhel fedora"
VERSION="412.9.202211241749-0"
VERSION_ID="4.12"
VARIANT="CoreOS"
VARIANT_ID=coreos
PLATFORM_ID="platform:el9"
PRETTY_NAME="CentOS Stream CoreOS 412.9.202211241749-0"
CPE_NAME="cpe:/o:centos:centos:9::coreos"
"#;

    /// openshift/os c9s builds: CentOS Stream's ID, CoreOS variant.
    const SCOS_C9S: &str = r#"NAME="CentOS Stream CoreOS"
VERSION="9.0.20250411-0"
ID="centos"
ID_LIKE="rhel fedora"
VERSION_ID="9"
PLATFORM_ID="platform:el9"
PRETTY_NAME="CentOS Stream CoreOS 9.0.20250411-0"
VARIANT="CoreOS"
VARIANT_ID=coreos
OSTREE_VERSION='9.0.20250411-0'
"#;

    const SCOS_C10S: &str = r#"NAME="CentOS Stream CoreOS"
VERSION="10.0.20250411-0"
ID="centos"
ID_LIKE="rhel fedora"
VERSION_ID="10"
PLATFORM_ID="platform:el10"
PRETTY_NAME="CentOS Stream CoreOS 10.0.20250411-0"
VARIANT="CoreOS"
VARIANT_ID=coreos
"#;

    const RHCOS_416: &str = r#"NAME="Red Hat Enterprise Linux CoreOS"
ID="rhcos"
ID_LIKE="rhel fedora"
VERSION="416.94.202410211619-0"
VERSION_ID="4.16"
VARIANT="CoreOS"
VARIANT_ID=coreos
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux CoreOS 416.94.202410211619-0 (Plow)"
ANSI_COLOR="0;31"
CPE_NAME="cpe:/o:redhat:enterprise_linux:9::coreos"
OPENSHIFT_VERSION="4.16"
RHEL_VERSION="9.4"
OSTREE_VERSION="416.94.202410211619-0"
"#;

    /// RHEL 9.6-based RHCOS: RHEL's ID, CoreOS variant.
    const RHCOS_96: &str = r#"NAME="Red Hat Enterprise Linux CoreOS"
VERSION="9.6.20250701-0 (Plow)"
ID="rhel"
ID_LIKE="centos fedora"
VERSION_ID="9.6"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux CoreOS 9.6.20250701-0 (Plow)"
VARIANT="CoreOS"
VARIANT_ID=coreos
OPENSHIFT_VERSION="4.19"
"#;

    /// quay.io/fedora/fedora-bootc: Fedora, no CoreOS variant.
    const FEDORA_BOOTC: &str = r#"NAME="Fedora Linux"
VERSION="41 (Forty One)"
ID=fedora
VERSION_ID=41
PLATFORM_ID="platform:f41"
PRETTY_NAME="Fedora Linux 41 (Forty One)"
"#;

    const FEDORA_CONTAINER: &str = r#"NAME="Fedora Linux"
VERSION="41 (Container Image)"
ID=fedora
VERSION_ID=41
PRETTY_NAME="Fedora Linux 41 (Container Image)"
VARIANT="Container Image"
VARIANT_ID=container
"#;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn detection_table() {
        let coreos = labels(&[
            ("containers.bootc", "1"),
            ("ostree.bootable", "true"),
            ("ostree.commit", "abc"),
        ]);
        let bootc = labels(&[("containers.bootc", "1")]);
        let none = BTreeMap::new();
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            &'a BTreeMap<String, String>,
            VariantKind,
            Source,
            Option<&'a str>,
            Option<&'a str>,
        );
        let cases: [Case; 11] = [
            (
                "fcos 41",
                Some(FCOS_41),
                &coreos,
                VariantKind::FedoraCoreOS,
                Source::OsRelease,
                Some("fedora"),
                Some("41"),
            ),
            (
                "scos 4.12 (ID=scos)",
                Some(SCOS_412),
                &coreos,
                VariantKind::CentOSStreamCoreOS,
                Source::OsRelease,
                Some("scos"),
                Some("4.12"),
            ),
            (
                "scos c9s",
                Some(SCOS_C9S),
                &coreos,
                VariantKind::CentOSStreamCoreOS,
                Source::OsRelease,
                Some("centos"),
                Some("9"),
            ),
            (
                "scos c10s",
                Some(SCOS_C10S),
                &coreos,
                VariantKind::CentOSStreamCoreOS,
                Source::OsRelease,
                Some("centos"),
                Some("10"),
            ),
            (
                "rhcos 4.16",
                Some(RHCOS_416),
                &coreos,
                VariantKind::RHELCoreOS,
                Source::OsRelease,
                Some("rhcos"),
                Some("4.16"),
            ),
            (
                "rhcos 9.6",
                Some(RHCOS_96),
                &coreos,
                VariantKind::RHELCoreOS,
                Source::OsRelease,
                Some("rhel"),
                Some("9.6"),
            ),
            (
                "rhcos, labels dropped by a rebuild",
                Some(RHCOS_416),
                &none,
                VariantKind::RHELCoreOS,
                Source::OsRelease,
                Some("rhcos"),
                Some("4.16"),
            ),
            (
                "fedora-bootc",
                Some(FEDORA_BOOTC),
                &bootc,
                VariantKind::Bootc,
                Source::Bootability,
                Some("fedora"),
                Some("41"),
            ),
            (
                "fedora container",
                Some(FEDORA_CONTAINER),
                &none,
                VariantKind::Container,
                Source::Bootability,
                Some("fedora"),
                Some("41"),
            ),
            (
                "no os-release, bootable",
                None,
                &bootc,
                VariantKind::Bootc,
                Source::Bootability,
                None,
                None,
            ),
            (
                "no os-release at all",
                None,
                &none,
                VariantKind::Container,
                Source::Bootability,
                None,
                None,
            ),
        ];
        for (name, text, labels, kind, source, id, version) in cases {
            let v = detect(text, labels);
            assert_eq!(v.kind, kind, "{name}: {v:?}");
            assert_eq!(v.source, source, "{name}");
            assert_eq!(v.id.as_deref(), id, "{name}");
            assert_eq!(v.version_id.as_deref(), version, "{name}");
            assert_eq!(v.has_os_release, text.is_some(), "{name}");
            assert_eq!(v.warnings, vec![], "{name}");
        }
    }

    #[test]
    fn facts_are_reported() {
        let v = detect(
            Some(RHCOS_416),
            &labels(&[
                ("containers.bootc", "1"),
                ("ostree.bootable", "true"),
                ("ostree.commit", "abc"),
            ]),
        );
        assert_eq!(v.id_like, ["rhel", "fedora"]);
        assert_eq!(v.variant_id.as_deref(), Some("coreos"));
        assert_eq!(v.name.as_deref(), Some("Red Hat Enterprise Linux CoreOS"));
        assert_eq!(
            v.pretty_name.as_deref(),
            Some("Red Hat Enterprise Linux CoreOS 416.94.202410211619-0 (Plow)")
        );
        assert!(v.bootable && v.ostree);
        assert_eq!(
            v.bootable_labels,
            ["containers.bootc=1", "ostree.bootable=true"]
        );
        assert_eq!(
            v.summary(),
            "RHEL CoreOS (rhcos 4.16, VARIANT_ID=coreos; bootable: containers.bootc=1, ostree.bootable=true; ostree)"
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["kind"], "RHELCoreOS");
        assert_eq!(json["versionId"], "4.16");
        assert_eq!(json["bootableLabels"][1], "ostree.bootable=true");
        assert_eq!(json["source"], "osRelease");
        assert!(json.get("warnings").is_none());
    }

    #[test]
    fn bootable_labels_need_their_values() {
        for (l, bootable) in [
            (&[("containers.bootc", "1")][..], true),
            (&[("ostree.bootable", "true")][..], true),
            (&[("ostree.bootable", "1")][..], true),
            (&[("ostree.bootable", "false")][..], false),
            (&[("containers.bootc", "true")][..], false),
            (&[("containers.bootc", "0")][..], false),
        ] {
            let v = detect(Some(FEDORA_BOOTC), &labels(l));
            assert_eq!(v.bootable, bootable, "{l:?}");
            let want = if bootable {
                VariantKind::Bootc
            } else {
                VariantKind::Container
            };
            assert_eq!(v.kind, want, "{l:?}");
            assert!(!v.ostree);
        }
    }

    #[test]
    fn labels_decide_only_without_os_release() {
        for (osname, kind) in [
            ("fedora-coreos", VariantKind::FedoraCoreOS),
            ("scos", VariantKind::CentOSStreamCoreOS),
            ("rhcos", VariantKind::RHELCoreOS),
        ] {
            let l = labels(&[("containers.bootc", "1"), ("com.coreos.osname", osname)]);
            let v = detect(None, &l);
            assert_eq!((v.kind, v.source), (kind, Source::Label), "{osname}");
            // An os-release that says otherwise wins.
            assert_eq!(detect(Some(FEDORA_BOOTC), &l).kind, VariantKind::Bootc);
        }
        let l = labels(&[(
            "io.openshift.build.version-display-names",
            "machine-os=CentOS Stream CoreOS",
        )]);
        assert_eq!(detect(None, &l).kind, VariantKind::CentOSStreamCoreOS);
    }

    #[test]
    fn malformed_lines_are_warnings_and_do_not_hide_the_rest() {
        let text =
            "ID=\"rhcos\"\nthis is not an assignment\nVERSION_ID=\"4.16\nVARIANT_ID=coreos\n";
        let v = detect(Some(text), &BTreeMap::new());
        assert_eq!(v.kind, VariantKind::RHELCoreOS);
        assert_eq!(v.version_id, None);
        let paths: Vec<&str> = v.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/usr/lib/os-release:2", "/usr/lib/os-release:3"]);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["warnings"][0]["path"], "/usr/lib/os-release:2");
        // An empty or all-comment file is an os-release without an ID.
        let v = detect(Some("# nothing\n\n"), &BTreeMap::new());
        assert_eq!((v.kind, v.has_os_release), (VariantKind::Container, true));
        assert!(
            v.summary().contains("os-release without ID"),
            "{}",
            v.summary()
        );
    }

    #[test]
    fn traits_table() {
        let rhcos = traits_of(VariantKind::RHELCoreOS);
        assert_eq!(
            traits_of(VariantKind::CentOSStreamCoreOS).extensions,
            rhcos.extensions
        );
        assert_eq!(
            rhcos.kernel(Kernel::Realtime).supported(),
            Some(&KERNEL_REALTIME)
        );
        assert_eq!(rhcos.extension("usbguard"), Ok(Some(&["usbguard"][..])));
        assert_eq!(rhcos.extension("wasm"), Ok(None));
        assert_eq!(
            rhcos.pull_secret_path.supported(),
            Some(&"/var/lib/kubelet/config.json")
        );
        let fcos = traits_of(VariantKind::FedoraCoreOS);
        assert_eq!(
            fcos.kernel(Kernel::Default).supported(),
            Some(&KERNEL_DEFAULT)
        );
        for k in [Kernel::Realtime, Kernel::SixtyFourKPages] {
            assert!(
                fcos.kernel(k)
                    .reason()
                    .is_some_and(|r| r.contains("extensions image"))
            );
        }
        assert!(fcos.extension("usbguard").is_err());
        assert_eq!(
            fcos.pull_secret_path.supported(),
            Some(&"/etc/ostree/auth.json")
        );
        let container = traits_of(VariantKind::Container);
        assert!(container.pull_secret_path.reason().is_some());
        assert!(
            traits_of(VariantKind::Bootc)
                .kernel_default
                .reason()
                .is_some()
        );
        for kind in VariantKind::ALL {
            let json = serde_json::to_value(traits_of(kind)).unwrap();
            assert!(json["pullSecretPath"].is_object(), "{json}");
        }
        let json = serde_json::to_value(&rhcos).unwrap();
        assert_eq!(json["extensions"]["supported"][2]["name"], "usbguard");
        assert_eq!(
            serde_json::to_value(&fcos).unwrap()["kernelRealtime"]["unsupported"]["reason"],
            fcos.kernel_realtime.reason().unwrap()
        );
        assert_eq!(
            el_extension_packages("kernel-devel"),
            Some(&["kernel-devel", "kernel-headers"][..])
        );
    }
}
