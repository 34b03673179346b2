//! Which OS an image is, decided from what the image says about itself.
//!
//! The decision ([`detect`]), in order:
//! 1. os-release (`/usr/lib/os-release`), when there is one:
//!    - `ID=fedora` and `VARIANT_ID=coreos` → [`VariantKind::FedoraCoreOS`];
//!    - `ID=scos` (OKD's CentOS Stream CoreOS up to 4.15, which sets `VARIANT_ID=coreos`
//!      too), or `ID=centos` and `VARIANT_ID=coreos` (the c9s/c10s builds of
//!      openshift/os) → [`VariantKind::CentOSStreamCoreOS`];
//!    - `ID=rhcos` (RHCOS 4.x; RHCOS 8 had no `VARIANT_ID`), or `ID=rhel` and
//!      `VARIANT_ID=coreos` (RHEL 9.6-based and later RHCOS) → [`VariantKind::RHELCoreOS`].
//!
//!    These are the MCO's `osrelease` rules (`IsFCOS`, `IsSCOS`, `IsEL`) extended to the
//!    newer `ID`s. A CoreOS os-release decides the kind whatever the labels say (a CoreOS
//!    tree is bootable; its labels may have been dropped by a rebuild).
//! 2. Without an os-release file only: the label `com.coreos.osname` (`fedora-coreos`,
//!    `scos`, `rhcos`, as coreos-assembler sets it) or `io.openshift.build.version-display-names`
//!    (`machine-os=Fedora CoreOS` / `machine-os=CentOS Stream CoreOS`).
//! 3. Otherwise [`VariantKind::Bootc`] when the image is bootable — label
//!    `containers.bootc=1`, or `ostree.bootable` `true` or `1` — and
//!    [`VariantKind::Container`] when it is not.
//!
//! [`Variant::source`] says which of these decided. Nothing here reads files: the caller
//! passes the os-release text it found (or `None`) and the image config's labels.

use std::collections::BTreeMap;

use machineos_diagnostics::Warning;

use crate::os_release::{self, OsRelease};

/// The file os-release is read from, as warnings name it.
pub const OS_RELEASE_PATH: &str = "/usr/lib/os-release";

/// What kind of OS an image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum VariantKind {
    /// Fedora CoreOS.
    FedoraCoreOS,
    /// CentOS Stream CoreOS (OKD's node OS).
    CentOSStreamCoreOS,
    /// Red Hat Enterprise Linux CoreOS (OpenShift's node OS).
    RHELCoreOS,
    /// A bootable image (bootc or ostree labels) that is none of the three CoreOS.
    Bootc,
    /// An image that is not bootable.
    Container,
}

impl VariantKind {
    /// Every kind.
    pub const ALL: [VariantKind; 5] = [
        VariantKind::FedoraCoreOS,
        VariantKind::CentOSStreamCoreOS,
        VariantKind::RHELCoreOS,
        VariantKind::Bootc,
        VariantKind::Container,
    ];

    /// The short name: `fcos`, `scos`, `rhcos`, `bootc` or `container`.
    pub fn short_name(self) -> &'static str {
        match self {
            VariantKind::FedoraCoreOS => "fcos",
            VariantKind::CentOSStreamCoreOS => "scos",
            VariantKind::RHELCoreOS => "rhcos",
            VariantKind::Bootc => "bootc",
            VariantKind::Container => "container",
        }
    }

    /// Whether this is one of the three CoreOS.
    pub fn is_coreos(self) -> bool {
        matches!(
            self,
            VariantKind::FedoraCoreOS | VariantKind::CentOSStreamCoreOS | VariantKind::RHELCoreOS
        )
    }
}

impl std::fmt::Display for VariantKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VariantKind::FedoraCoreOS => "Fedora CoreOS",
            VariantKind::CentOSStreamCoreOS => "CentOS Stream CoreOS",
            VariantKind::RHELCoreOS => "RHEL CoreOS",
            VariantKind::Bootc => "bootable container",
            VariantKind::Container => "container (not bootable)",
        })
    }
}

/// What decided [`Variant::kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// The os-release file.
    OsRelease,
    /// A label (there was no os-release file).
    Label,
    /// Neither: the bootable labels alone (Bootc or Container).
    Bootability,
}

/// What an image is, and the facts the decision was made from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    /// The kind.
    pub kind: VariantKind,
    /// What decided it.
    pub source: Source,
    /// os-release `ID`.
    pub id: Option<String>,
    /// os-release `ID_LIKE`, split on blanks.
    pub id_like: Vec<String>,
    /// os-release `VERSION_ID`.
    pub version_id: Option<String>,
    /// os-release `VARIANT_ID`.
    pub variant_id: Option<String>,
    /// os-release `NAME`.
    pub name: Option<String>,
    /// os-release `PRETTY_NAME`.
    pub pretty_name: Option<String>,
    /// Whether the labels say the image is bootable.
    pub bootable: bool,
    /// The labels that say so, as `key=value` (`containers.bootc=1`, `ostree.bootable=true`).
    pub bootable_labels: Vec<String>,
    /// Whether the image is an ostree commit (label `ostree.commit`).
    pub ostree: bool,
    /// Whether the image had an os-release file at all.
    pub has_os_release: bool,
    /// The os-release lines skipped as invalid.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

impl Variant {
    /// A one-line description, e.g. `RHEL CoreOS (rhcos 4.16, VARIANT_ID=coreos; bootable:
    /// containers.bootc=1, ostree.bootable=true; ostree)`.
    pub fn summary(&self) -> String {
        let mut facts = Vec::new();
        match (&self.id, &self.version_id) {
            (Some(id), Some(v)) => facts.push(format!("{id} {v}")),
            (Some(id), None) => facts.push(id.clone()),
            (None, _) if !self.has_os_release => facts.push("no os-release".into()),
            (None, _) => facts.push("os-release without ID".into()),
        }
        if let Some(v) = &self.variant_id {
            facts.push(format!("VARIANT_ID={v}"));
        }
        let mut parts = vec![facts.join(", ")];
        if self.bootable {
            parts.push(format!("bootable: {}", self.bootable_labels.join(", ")));
        } else {
            parts.push("not bootable".into());
        }
        if self.ostree {
            parts.push("ostree".into());
        }
        format!("{} ({})", self.kind, parts.join("; "))
    }
}

/// Decides what an image is from its os-release text (`None` when the image has no
/// `/usr/lib/os-release`) and its config labels; see the module documentation.
pub fn detect(os_release: Option<&str>, labels: &BTreeMap<String, String>) -> Variant {
    let parsed = os_release.map(|t| os_release::parse(OS_RELEASE_PATH, t));
    let empty = OsRelease::default();
    let r = parsed.as_ref().unwrap_or(&empty);
    let label = |k: &str| labels.get(k).map(String::as_str);

    let mut bootable_labels = Vec::new();
    if let Some(v @ "1") = label("containers.bootc") {
        bootable_labels.push(format!("containers.bootc={v}"));
    }
    if let Some(v @ ("true" | "1")) = label("ostree.bootable") {
        bootable_labels.push(format!("ostree.bootable={v}"));
    }
    let bootable = !bootable_labels.is_empty();

    let id = r.non_empty("ID");
    let coreos = r.non_empty("VARIANT_ID") == Some("coreos");
    let from_os_release = match id {
        Some("fedora") if coreos => Some(VariantKind::FedoraCoreOS),
        Some("scos") => Some(VariantKind::CentOSStreamCoreOS),
        Some("centos") if coreos => Some(VariantKind::CentOSStreamCoreOS),
        Some("rhcos") => Some(VariantKind::RHELCoreOS),
        Some("rhel") if coreos => Some(VariantKind::RHELCoreOS),
        _ => None,
    };
    let from_label = || {
        match label("com.coreos.osname") {
            Some("fedora-coreos") => return Some(VariantKind::FedoraCoreOS),
            Some("scos") => return Some(VariantKind::CentOSStreamCoreOS),
            Some("rhcos") => return Some(VariantKind::RHELCoreOS),
            _ => {}
        }
        match label("io.openshift.build.version-display-names")
            .map(|v| v.trim_start_matches("machine-os="))
        {
            Some("Fedora CoreOS") => Some(VariantKind::FedoraCoreOS),
            Some("CentOS Stream CoreOS") => Some(VariantKind::CentOSStreamCoreOS),
            _ => None,
        }
    };
    let (kind, source) = match (from_os_release, parsed.is_some()) {
        (Some(k), _) => (k, Source::OsRelease),
        (None, false) => match from_label() {
            Some(k) => (k, Source::Label),
            None => (fallback(bootable), Source::Bootability),
        },
        (None, true) => (fallback(bootable), Source::Bootability),
    };
    let owned = |k: &str| r.non_empty(k).map(str::to_owned);
    Variant {
        kind,
        source,
        id: owned("ID"),
        id_like: r
            .get("ID_LIKE")
            .map(|v| v.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        version_id: owned("VERSION_ID"),
        variant_id: owned("VARIANT_ID"),
        name: owned("NAME"),
        pretty_name: owned("PRETTY_NAME"),
        bootable,
        bootable_labels,
        ostree: labels.contains_key("ostree.commit"),
        has_os_release: parsed.is_some(),
        warnings: parsed.map(|p| p.warnings).unwrap_or_default(),
    }
}

fn fallback(bootable: bool) -> VariantKind {
    if bootable {
        VariantKind::Bootc
    } else {
        VariantKind::Container
    }
}
