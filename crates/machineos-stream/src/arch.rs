//! Architecture names, mapped both ways in this one place: CoreOS stream metadata keys
//! architectures by the RPM/kernel spelling (`x86_64`, `aarch64`, `ppc64le`, `s390x`), OCI
//! platforms and Kubernetes' `kubernetes.io/arch` by GOARCH (`amd64`, `arm64`, `ppc64le`,
//! `s390x`). An [`Arch`] holds the GOARCH spelling and gives either; a name outside the
//! table (`riscv64`) is the same in both.

use std::fmt;

/// (GOARCH, CoreOS) pairs whose spellings differ or that CoreOS builds; any other name is
/// spelled the same both ways.
const TABLE: &[(&str, &str)] = &[
    ("amd64", "x86_64"),
    ("arm64", "aarch64"),
    ("ppc64le", "ppc64le"),
    ("s390x", "s390x"),
    ("riscv64", "riscv64"),
];

/// A CPU architecture, whichever way it was spelled.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch(String);

impl Arch {
    /// An architecture from either spelling (`x86_64` or `amd64`, `aarch64` or `arm64`;
    /// `x86-64` too), case-insensitively.
    pub fn new(name: &str) -> Arch {
        let lower = name.trim().to_ascii_lowercase();
        let lower = if lower == "x86-64" {
            "x86_64".to_owned()
        } else {
            lower
        };
        let oci = TABLE
            .iter()
            .find(|(oci, coreos)| *oci == lower || *coreos == lower)
            .map(|(oci, _)| (*oci).to_owned())
            .unwrap_or(lower);
        Arch(oci)
    }

    /// The OCI / GOARCH / `kubernetes.io/arch` spelling (`amd64`).
    pub fn oci(&self) -> &str {
        &self.0
    }

    /// The CoreOS stream metadata spelling (`x86_64`).
    pub fn coreos(&self) -> &str {
        TABLE
            .iter()
            .find(|(oci, _)| *oci == self.0)
            .map(|(_, coreos)| *coreos)
            .unwrap_or(&self.0)
    }

    /// Both spellings when they differ (`amd64 (x86_64)`), for messages.
    pub fn describe(&self) -> String {
        if self.oci() == self.coreos() {
            self.0.clone()
        } else {
            format!("{} ({})", self.oci(), self.coreos())
        }
    }
}

impl fmt::Display for Arch {
    /// The OCI spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_map_both_ways() {
        for (oci, coreos) in [
            ("amd64", "x86_64"),
            ("arm64", "aarch64"),
            ("ppc64le", "ppc64le"),
            ("s390x", "s390x"),
        ] {
            for input in [oci, coreos, &oci.to_uppercase()] {
                let a = Arch::new(input);
                assert_eq!((a.oci(), a.coreos()), (oci, coreos), "{input}");
            }
        }
        assert_eq!(Arch::new("x86-64").oci(), "amd64");
        let other = Arch::new("loong64");
        assert_eq!((other.oci(), other.coreos()), ("loong64", "loong64"));
        assert_eq!(Arch::new("x86_64").describe(), "amd64 (x86_64)");
        assert_eq!(Arch::new("s390x").describe(), "s390x");
        assert_eq!(Arch::new("aarch64").to_string(), "arm64");
    }
}
