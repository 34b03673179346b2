//! The OCI platform triple (`os/architecture[/variant]`) used to pick one image out of a
//! multi-arch index, with the same normalisation containerd applies when matching.

use std::fmt;
use std::str::FromStr;

use machineos_diagnostics::{Classify, Retry};
use serde::{Deserialize, Serialize};

/// Why a string is not a platform.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    /// Not two or three non-empty `/`-separated parts.
    #[error(
        "parsing platform {0:?}: expected os/architecture[/variant], e.g. linux/amd64 or linux/arm64/v8"
    )]
    BadForm(String),
}

impl Classify for PlatformError {
    /// Always `InvalidPlatform`: the platform must change.
    fn reason(&self) -> &'static str {
        "InvalidPlatform"
    }

    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// An OCI platform. `os.version` and `os.features` are not modelled: nodes are Linux and those
/// fields only matter for Windows images; they are ignored when read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Platform {
    /// Operating system, GOOS spelling (`linux`).
    pub os: String,
    /// CPU architecture, GOARCH spelling (`amd64`, `arm64`, `ppc64le`, `s390x`).
    pub architecture: String,
    /// CPU variant (`v8` for arm64, `v7` for arm), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Platform {
    /// A platform from its parts.
    pub fn new(os: &str, architecture: &str, variant: Option<&str>) -> Platform {
        Platform {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.map(str::to_owned),
        }
    }

    /// The platform this program was compiled for, as `linux/<GOARCH>`.
    pub fn host() -> Platform {
        let arch = if cfg!(target_arch = "x86_64") {
            "amd64"
        } else if cfg!(target_arch = "aarch64") {
            "arm64"
        } else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
            "ppc64le"
        } else if cfg!(target_arch = "powerpc64") {
            "ppc64"
        } else if cfg!(target_arch = "s390x") {
            "s390x"
        } else if cfg!(target_arch = "arm") {
            "arm"
        } else if cfg!(target_arch = "x86") {
            "386"
        } else {
            std::env::consts::ARCH
        };
        Platform::new("linux", arch, None)
    }

    /// The platform with containerd's normalisation applied: lowercase OS, GOARCH spelling of
    /// the architecture, and the default variant made explicit or dropped the way containerd
    /// does (`arm64` → no variant for `v8`, `amd64` → no variant for `v1`, `arm` → `v7` when
    /// none is given).
    pub fn normalized(&self) -> Platform {
        let os = match self.os.to_ascii_lowercase().as_str() {
            "macos" => "darwin".to_owned(),
            other => other.to_owned(),
        };
        let arch = self.architecture.to_ascii_lowercase();
        let variant = self.variant.as_deref().map(str::to_ascii_lowercase);
        let (architecture, variant) = match arch.as_str() {
            "i386" => ("386".to_owned(), None),
            "x86_64" | "x86-64" | "amd64" => {
                let v = match variant.as_deref() {
                    None | Some("") | Some("v1") => None,
                    Some(v) => Some(v.to_owned()),
                };
                ("amd64".to_owned(), v)
            }
            "aarch64" | "arm64" => {
                let v = match variant.as_deref() {
                    None | Some("") | Some("8") | Some("v8") => None,
                    Some(v) => Some(v.to_owned()),
                };
                ("arm64".to_owned(), v)
            }
            "armhf" => ("arm".to_owned(), Some("v7".to_owned())),
            "armel" => ("arm".to_owned(), Some("v6".to_owned())),
            "arm" => {
                let v = match variant.as_deref() {
                    None | Some("") | Some("7") => "v7".to_owned(),
                    Some("5") => "v5".to_owned(),
                    Some("6") => "v6".to_owned(),
                    Some("8") => "v8".to_owned(),
                    Some(v) => v.to_owned(),
                };
                ("arm".to_owned(), Some(v))
            }
            _ => (arch, variant.filter(|v| !v.is_empty())),
        };
        Platform {
            os,
            architecture,
            variant,
        }
    }

    /// Whether the two platforms name the same target once both are normalised
    /// (see [`Platform::normalized`]).
    pub fn matches(&self, other: &Platform) -> bool {
        self.normalized() == other.normalized()
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

impl FromStr for Platform {
    type Err = PlatformError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('/').collect();
        let bad = || PlatformError::BadForm(s.to_owned());
        if !(2..=3).contains(&parts.len())
            || parts
                .iter()
                .any(|p| p.is_empty() || p.chars().any(char::is_whitespace))
        {
            return Err(bad());
        }
        Ok(Platform::new(parts[0], parts[1], parts.get(2).copied()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parts = (&'static str, &'static str, Option<&'static str>);

    #[test]
    fn parse_table() {
        let cases: &[(&str, Option<Parts>)] = &[
            ("linux/amd64", Some(("linux", "amd64", None))),
            ("linux/arm64/v8", Some(("linux", "arm64", Some("v8")))),
            ("linux", None),
            ("linux/", None),
            ("/amd64", None),
            ("linux/arm/v7/x", None),
            ("linux/am d64", None),
            ("", None),
        ];
        for (input, want) in cases {
            let got = input.parse::<Platform>();
            match want {
                Some((os, arch, v)) => {
                    let p = got.unwrap();
                    assert_eq!(p, Platform::new(os, arch, *v), "{input}");
                    assert_eq!(p.to_string(), *input);
                }
                None => {
                    let err = got.unwrap_err().to_string();
                    assert!(err.contains(&format!("{input:?}")), "{err}");
                    assert!(err.contains("os/architecture"), "{err}");
                }
            }
        }
    }

    #[test]
    fn matches_table() {
        let cases = [
            ("linux/arm64", "linux/arm64/v8", true),
            ("linux/aarch64", "linux/arm64", true),
            ("linux/amd64", "linux/amd64/v1", true),
            ("linux/x86_64", "linux/amd64", true),
            ("linux/amd64", "linux/amd64/v2", false),
            ("linux/arm", "linux/arm/v7", true),
            ("linux/arm", "linux/arm/v6", false),
            ("linux/armhf", "linux/arm/v7", true),
            ("linux/amd64", "linux/arm64", false),
            ("linux/amd64", "windows/amd64", false),
            ("Linux/ppc64le", "linux/ppc64le", true),
            ("linux/s390x", "linux/s390x", true),
        ];
        for (a, b, want) in cases {
            let (a, b): (Platform, Platform) = (a.parse().unwrap(), b.parse().unwrap());
            assert_eq!(a.matches(&b), want, "{a} vs {b}");
            assert_eq!(b.matches(&a), want, "{b} vs {a}");
        }
    }

    #[test]
    fn host_is_linux() {
        let h = Platform::host();
        assert_eq!(h.os, "linux");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(h.architecture, "amd64");
        }
    }

    #[test]
    fn serde_oci_names() {
        let p: Platform = serde_json::from_str(
            r#"{"architecture":"arm64","os":"linux","variant":"v8","os.features":["x"]}"#,
        )
        .unwrap();
        assert_eq!(p, Platform::new("linux", "arm64", Some("v8")));
        assert_eq!(
            serde_json::to_string(&Platform::new("linux", "amd64", None)).unwrap(),
            r#"{"os":"linux","architecture":"amd64"}"#
        );
    }
}
