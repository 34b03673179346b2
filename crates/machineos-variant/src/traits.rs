//! What differs between variants, as one table keyed by [`VariantKind`]: the RPMs of each
//! `kernelType`, the extensions the MCO supports (name → RPMs), and where a node keeps the
//! pull secret. Code that needs one of these asks [`traits()`] (or, where it has always meant
//! RHCOS, reads the RHCOS/SCOS constants below), never a build flag.
//!
//! The data:
//! - RHCOS and SCOS share the MCO's lists: `GetPackagesForSupportedKernelType`
//!   ([`KERNEL_DEFAULT`], [`KERNEL_REALTIME`], [`KERNEL_64K_PAGES`]) and
//!   `getSupportedExtensions` ([`EL_EXTENSIONS`]), installed from the release's extensions
//!   image.
//! - Fedora CoreOS has the same default kernel packages, but publishes no extensions image,
//!   which is where the MCO takes the realtime and 64k-pages kernels and the extensions
//!   from: those are unsupported, with the reason.
//! - A bootc image that is none of them, and a plain container, have no known table.
//! - The pull secret: RHCOS and SCOS nodes keep the cluster pull secret in
//!   [`KUBELET_PULL_SECRET`] (the MCO's templates write it; the kubelet and CRI-O read it);
//!   Fedora CoreOS and other bootc hosts read image pull credentials from
//!   [`OSTREE_PULL_SECRET`] (ostree's and bootc's `auth.json`).

use crate::detect::{Variant, VariantKind};

/// Something a variant has, or why it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Support<T> {
    /// The variant has it.
    Supported(T),
    /// The variant does not have it.
    Unsupported {
        /// Why, in a sentence.
        reason: &'static str,
    },
}

impl<T> Support<T> {
    /// The value when supported.
    pub fn supported(&self) -> Option<&T> {
        match self {
            Support::Supported(t) => Some(t),
            Support::Unsupported { .. } => None,
        }
    }

    /// The reason when unsupported.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Support::Supported(_) => None,
            Support::Unsupported { reason } => Some(reason),
        }
    }
}

/// A MachineConfig's `spec.kernelType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kernel {
    /// `default` (or empty).
    Default,
    /// `realtime`.
    Realtime,
    /// `64k-pages`.
    SixtyFourKPages,
}

/// A supported extension: its name in `spec.extensions` and the RPMs it installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Extension {
    /// The name.
    pub name: &'static str,
    /// The RPMs, in the MCO's order.
    pub packages: &'static [&'static str],
}

/// The RPMs of the default kernel (RHCOS, SCOS and Fedora CoreOS alike).
pub const KERNEL_DEFAULT: &[&str] = &[
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
];
/// The RPMs of the realtime kernel (RHCOS and SCOS).
pub const KERNEL_REALTIME: &[&str] = &[
    "kernel-rt-core",
    "kernel-rt-modules",
    "kernel-rt-modules-extra",
    "kernel-rt-kvm",
];
/// The RPMs of the 64k-pages kernel (RHCOS and SCOS, arm64 only).
pub const KERNEL_64K_PAGES: &[&str] = &[
    "kernel-64k-core",
    "kernel-64k-modules",
    "kernel-64k-modules-core",
    "kernel-64k-modules-extra",
];

/// The extensions the MCO supports on RHCOS and SCOS (`getSupportedExtensions`), in its
/// order.
pub const EL_EXTENSIONS: &[Extension] = &[
    Extension {
        name: "two-node-ha",
        packages: &["pacemaker", "pcs", "fence-agents-all"],
    },
    Extension {
        name: "ipsec",
        packages: &[
            "NetworkManager-libreswan",
            "libreswan",
            "openvswitch3.5-ipsec",
        ],
    },
    Extension {
        name: "usbguard",
        packages: &["usbguard"],
    },
    Extension {
        name: "kerberos",
        packages: &["krb5-workstation", "libkadm5"],
    },
    Extension {
        name: "kernel-devel",
        packages: &["kernel-devel", "kernel-headers"],
    },
    Extension {
        name: "sandboxed-containers",
        packages: &["kata-containers"],
    },
    Extension {
        name: "sysstat",
        packages: &["sysstat"],
    },
];

/// The RPMs of extension `name` on RHCOS and SCOS; `None` for an unsupported name.
pub fn el_extension_packages(name: &str) -> Option<&'static [&'static str]> {
    EL_EXTENSIONS
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.packages)
}

/// Where RHCOS and SCOS nodes keep the cluster pull secret.
pub const KUBELET_PULL_SECRET: &str = "/var/lib/kubelet/config.json";
/// Where Fedora CoreOS and other bootc hosts read image pull credentials.
pub const OSTREE_PULL_SECRET: &str = "/etc/ostree/auth.json";

/// What differs for one kind.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VariantTraits {
    /// The kind these are for.
    pub kind: VariantKind,
    /// The RPMs of `kernelType: default`.
    pub kernel_default: Support<&'static [&'static str]>,
    /// The RPMs of `kernelType: realtime`.
    pub kernel_realtime: Support<&'static [&'static str]>,
    /// The RPMs of `kernelType: 64k-pages`.
    pub kernel_64k_pages: Support<&'static [&'static str]>,
    /// The supported extensions.
    pub extensions: Support<&'static [Extension]>,
    /// Where a node keeps the pull secret.
    pub pull_secret_path: Support<&'static str>,
}

impl VariantTraits {
    /// The RPMs of `kernel`.
    pub fn kernel(&self, kernel: Kernel) -> Support<&'static [&'static str]> {
        match kernel {
            Kernel::Default => self.kernel_default,
            Kernel::Realtime => self.kernel_realtime,
            Kernel::SixtyFourKPages => self.kernel_64k_pages,
        }
    }

    /// The RPMs of extension `name`: `Ok(None)` when the variant has extensions but not
    /// this one, `Err(reason)` when it has none.
    pub fn extension(&self, name: &str) -> Result<Option<&'static [&'static str]>, &'static str> {
        match self.extensions {
            Support::Supported(list) => {
                Ok(list.iter().find(|e| e.name == name).map(|e| e.packages))
            }
            Support::Unsupported { reason } => Err(reason),
        }
    }
}

const NO_FCOS_EXTENSIONS: &str = "Fedora CoreOS publishes no extensions image, where the MCO takes the extensions and the realtime and 64k-pages kernels from";
const UNKNOWN_BOOTC: &str =
    "a bootable image that is not Fedora, CentOS Stream or RHEL CoreOS has no known table";
const NOT_BOOTABLE: &str = "the image is not bootable: no node runs it";

/// The table row of `kind`.
pub fn traits_of(kind: VariantKind) -> VariantTraits {
    use Support::{Supported, Unsupported};
    let none = |reason| VariantTraits {
        kind,
        kernel_default: Unsupported { reason },
        kernel_realtime: Unsupported { reason },
        kernel_64k_pages: Unsupported { reason },
        extensions: Unsupported { reason },
        pull_secret_path: Unsupported { reason },
    };
    match kind {
        VariantKind::RHELCoreOS | VariantKind::CentOSStreamCoreOS => VariantTraits {
            kind,
            kernel_default: Supported(KERNEL_DEFAULT),
            kernel_realtime: Supported(KERNEL_REALTIME),
            kernel_64k_pages: Supported(KERNEL_64K_PAGES),
            extensions: Supported(EL_EXTENSIONS),
            pull_secret_path: Supported(KUBELET_PULL_SECRET),
        },
        VariantKind::FedoraCoreOS => VariantTraits {
            kind,
            kernel_default: Supported(KERNEL_DEFAULT),
            kernel_realtime: Unsupported {
                reason: NO_FCOS_EXTENSIONS,
            },
            kernel_64k_pages: Unsupported {
                reason: NO_FCOS_EXTENSIONS,
            },
            extensions: Unsupported {
                reason: NO_FCOS_EXTENSIONS,
            },
            pull_secret_path: Supported(OSTREE_PULL_SECRET),
        },
        VariantKind::Bootc => VariantTraits {
            pull_secret_path: Supported(OSTREE_PULL_SECRET),
            ..none(UNKNOWN_BOOTC)
        },
        VariantKind::Container => none(NOT_BOOTABLE),
    }
}

/// The table row of a detected variant (`traits_of(variant.kind)`).
pub fn traits(variant: &Variant) -> VariantTraits {
    traits_of(variant.kind)
}
