//! What to generate: the parameters of a synthetic base image and the named presets the
//! README, the tests and the benchmark use, so every caller asks for the same shapes.

use machineos_diagnostics::{Classify, Retry};
use machineos_image::Platform;

/// The version string the presets put in `os-release` and the image labels.
pub const DEFAULT_VERSION: &str = "41.20241027.3.0";
/// The version of the `scos` preset (openshift/os c9s builds: `<el major>.0.<date>-<n>`).
pub const SCOS_VERSION: &str = "9.0.20241027-0";
/// The version of the `rhcos` preset (`<OCP 4.x as 4x>.<RHEL as 9x>.<date+time>-<n>`).
pub const RHCOS_VERSION: &str = "416.94.202410270000-0";

/// Which CoreOS the generated tree is shaped like: its os-release and `/etc/*-release`
/// files, image labels, passwd/group, kernel release and a package with a unit
/// (`zincati` on Fedora CoreOS, `cri-o` on CentOS Stream and RHEL CoreOS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SynthVariant {
    /// Fedora CoreOS (`ID=fedora`, `VARIANT_ID=coreos`): every preset but `scos`/`rhcos`.
    #[default]
    Fcos,
    /// CentOS Stream CoreOS as openshift/os builds it for c9s (`ID="centos"`,
    /// `VARIANT_ID=coreos`, label `com.coreos.osname=scos`).
    Scos,
    /// RHEL CoreOS 4.x (`ID="rhcos"`, `ID_LIKE="rhel fedora"`, `OPENSHIFT_VERSION`,
    /// `RHEL_VERSION`, label `com.coreos.osname=rhcos`).
    Rhcos,
}

impl SynthVariant {
    /// Every variant.
    pub const ALL: [SynthVariant; 3] =
        [SynthVariant::Fcos, SynthVariant::Scos, SynthVariant::Rhcos];

    /// The command-line name: `fcos`, `scos`, `rhcos`.
    pub fn name(self) -> &'static str {
        match self {
            SynthVariant::Fcos => "fcos",
            SynthVariant::Scos => "scos",
            SynthVariant::Rhcos => "rhcos",
        }
    }

    /// The variant with command-line name `name`.
    pub fn from_name(name: &str) -> Option<SynthVariant> {
        SynthVariant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The version its preset uses: [`DEFAULT_VERSION`], [`SCOS_VERSION`] or
    /// [`RHCOS_VERSION`].
    pub fn default_version(self) -> &'static str {
        match self {
            SynthVariant::Fcos => DEFAULT_VERSION,
            SynthVariant::Scos => SCOS_VERSION,
            SynthVariant::Rhcos => RHCOS_VERSION,
        }
    }

    /// The OS's name as titles and the ostree commit subject spell it.
    pub fn os_name(self) -> &'static str {
        match self {
            SynthVariant::Fcos => "Fedora CoreOS",
            SynthVariant::Scos => "CentOS Stream CoreOS",
            SynthVariant::Rhcos => "Red Hat Enterprise Linux CoreOS",
        }
    }
}

/// The four architectures OpenShift ships CoreOS for, as OCI names them.
pub const FOUR_ARCHES: [&str; 4] = ["amd64", "arm64", "ppc64le", "s390x"];

/// The smallest `files` any spec may ask for: the fixed skeleton (passwd, os-release, the
/// named packages' key files, …) needs this many regular files.
pub const MIN_FILES: u32 = 200;

/// Why a [`SynthSpec`] cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Fewer than two layers (the skeleton and the final layer with whiteouts).
    #[error("validating synthetic image spec: layers = {0}, need at least 2")]
    TooFewLayers(u32),
    /// More layers than a manifest should reasonably carry.
    #[error("validating synthetic image spec: layers = {0}, at most 127 are supported")]
    TooManyLayers(u32),
    /// Fewer files than the fixed skeleton has.
    #[error("validating synthetic image spec: files = {got}, need at least {min}")]
    TooFewFiles {
        /// The requested count.
        got: u32,
        /// The minimum.
        min: u32,
    },
    /// gzip levels are 0 to 9.
    #[error("validating synthetic image spec: gzip_level = {0}, must be 0 to 9")]
    GzipLevel(u32),
    /// The version string is empty or contains characters that do not belong in os-release.
    #[error("validating synthetic image spec: version {0:?} must be non-empty [A-Za-z0-9._+~-]")]
    Version(String),
    /// An extra file's path is not a normalised absolute path of a file.
    #[error(
        "validating synthetic image spec: extra file path {0:?} must be absolute, normalised (no `.`, `..`, `//`, trailing `/`) and not `/`"
    )]
    ExtraPath(String),
    /// Two extra files have the same path.
    #[error("validating synthetic image spec: extra file {0:?} is given twice")]
    DuplicateExtra(String),
    /// An extra file's mode has bits beyond the permission bits.
    #[error(
        "validating synthetic image spec: extra file {path:?} mode {mode:#o} has bits beyond 0o7777"
    )]
    ExtraMode {
        /// The file.
        path: String,
        /// The mode given.
        mode: u32,
    },
}

impl Classify for SpecError {
    /// Always `InvalidSynthSpec`: every variant is a parameter out of range.
    fn reason(&self) -> &'static str {
        "InvalidSynthSpec"
    }

    /// Always permanent: the spec must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// A file copied verbatim into the final layer of the generated image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraFile {
    /// Absolute path inside the image, e.g. `/usr/bin/tool`. Its parent directories are
    /// created (0755 root) when the generated tree lacks them; it must not lie below a
    /// symlink of the tree (e.g. `/usr/local/...`: use `/var/usrlocal/...`).
    pub path: String,
    /// The file's contents.
    pub contents: Vec<u8>,
    /// Permission bits (`0o755`, `0o4755`, …), owner root:root.
    pub mode: u32,
}

/// The parameters of a synthetic CoreOS-like base image. Equal specs give byte-identical
/// blobs and therefore the same manifest digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthSpec {
    /// Seed of every pseudo-random choice (paths, sizes, contents).
    pub seed: u64,
    /// Number of layers, at least 2: a skeleton layer (filesystem, passwd, os-release), the
    /// package layers, and a final layer with the whiteouts, the opaque directory, the
    /// per-architecture marker and the extra files.
    pub layers: u32,
    /// Number of regular files written, extra files not counted (at least [`MIN_FILES`]).
    pub files: u32,
    /// Sum of the sizes of those regular files, in bytes. Small fixed text files (passwd,
    /// units, …) keep their natural size; the rest is spread over the generated binaries,
    /// libraries, kernel, firmware and data files with a heavy-tailed distribution.
    pub total_bytes: u64,
    /// The image's platform. The kernel version, the loader's name and file contents
    /// depend on it, and `/usr/lib/machineos-synth-arch` holds the architecture.
    pub platform: Platform,
    /// Version string (`os-release` `VERSION`, label `org.opencontainers.image.version`).
    pub version: String,
    /// gzip level 0–9 of the layer blobs. The presets use 6 for `example` and 1 for the
    /// benchmark profiles, where generation speed matters more than blob size.
    pub gzip_level: u32,
    /// Emit Docker schema2 media types (manifest, config, layers, manifest list) instead of
    /// OCI ones. Docker manifests carry no annotations.
    pub docker_media_types: bool,
    /// Encapsulate the tree as ostree-ext does (Fedora CoreOS's and RHEL CoreOS's chunked
    /// images): one ostree commit of the merged tree, `/etc` as `/usr/etc`, content objects
    /// under `sysroot/ostree/repo/objects` hard-linked to their paths, labels
    /// `ostree.commit` and `ostree.final-diffid`. What nodes (`rpm-ostree rebase`, bootc)
    /// can import. `false` gives a plain container image with the planned layers as they
    /// are (whiteouts and an opaque directory in the last one).
    pub ostree: bool,
    /// Files added verbatim to the final layer.
    pub extra_files: Vec<ExtraFile>,
    /// Which CoreOS the tree is shaped like ([`SynthVariant::Fcos`] in every preset but
    /// [`SynthSpec::scos`] and [`SynthSpec::rhcos`]).
    pub variant: SynthVariant,
}

/// A named preset, as the `--profile` flag spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// [`SynthSpec::example`].
    Example,
    /// [`SynthSpec::bench_100m`].
    Bench100m,
    /// [`SynthSpec::bench_1g`].
    Bench1g,
    /// [`SynthSpec::scos`].
    Scos,
    /// [`SynthSpec::rhcos`].
    Rhcos,
}

impl Profile {
    /// Every profile, in the order `--help` lists them.
    pub const ALL: [Profile; 5] = [
        Profile::Example,
        Profile::Bench100m,
        Profile::Bench1g,
        Profile::Scos,
        Profile::Rhcos,
    ];

    /// The profile's command-line name (`example`, `bench-100m`, `bench-1g`, `scos`,
    /// `rhcos`).
    pub fn name(self) -> &'static str {
        match self {
            Profile::Example => "example",
            Profile::Bench100m => "bench-100m",
            Profile::Bench1g => "bench-1g",
            Profile::Scos => "scos",
            Profile::Rhcos => "rhcos",
        }
    }

    /// The profile with command-line name `name`.
    pub fn from_name(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The profile's spec for `platform`.
    pub fn spec(self, platform: Platform) -> SynthSpec {
        let spec = match self {
            Profile::Example => SynthSpec::example(),
            Profile::Bench100m => SynthSpec::bench_100m(),
            Profile::Bench1g => SynthSpec::bench_1g(),
            Profile::Scos => SynthSpec::scos(),
            Profile::Rhcos => SynthSpec::rhcos(),
        };
        SynthSpec { platform, ..spec }
    }
}

/// Seed of the presets.
const PRESET_SEED: u64 = 0x6d61_6368_696e_656f; // "machineo"

impl SynthSpec {
    /// The small image of the README's main job and of the tests: 5 layers, 400 files,
    /// 2 MiB of file contents (2.5 MiB of tar, 1.5 MiB of gzip), linux/amd64, gzip level 6.
    /// Generates in about 0.1 s in release, most of it syncing blobs to disk.
    pub fn example() -> SynthSpec {
        SynthSpec {
            seed: PRESET_SEED,
            layers: 5,
            files: 400,
            total_bytes: 2 << 20,
            platform: Platform::new("linux", "amd64", None),
            version: DEFAULT_VERSION.to_owned(),
            gzip_level: 6,
            docker_media_types: false,
            ostree: true,
            extra_files: Vec::new(),
            variant: SynthVariant::Fcos,
        }
    }

    /// The benchmark shape at 100 MiB: the same tree as [`SynthSpec::bench_1g`] (40 layers,
    /// 60 000 files, same paths and layer split) with every generated file about ten times
    /// smaller. gzip level 1.
    pub fn bench_100m() -> SynthSpec {
        SynthSpec {
            total_bytes: 100 << 20,
            ..SynthSpec::bench_1g()
        }
    }

    /// The benchmark shape at full size: 40 layers, 60 000 files, 1 GiB of file contents,
    /// gzip level 1 — roughly the shape of a Fedora CoreOS chunked image.
    pub fn bench_1g() -> SynthSpec {
        SynthSpec {
            seed: PRESET_SEED,
            layers: 40,
            files: 60_000,
            total_bytes: 1 << 30,
            platform: Platform::new("linux", "amd64", None),
            version: DEFAULT_VERSION.to_owned(),
            gzip_level: 1,
            docker_media_types: false,
            ostree: true,
            extra_files: Vec::new(),
            variant: SynthVariant::Fcos,
        }
    }

    /// [`SynthSpec::example`]'s shape as CentOS Stream CoreOS ([`SynthVariant::Scos`],
    /// version [`SCOS_VERSION`]).
    pub fn scos() -> SynthSpec {
        SynthSpec {
            version: SynthVariant::Scos.default_version().to_owned(),
            ..SynthSpec::example().with_variant(SynthVariant::Scos)
        }
    }

    /// [`SynthSpec::example`]'s shape as RHEL CoreOS ([`SynthVariant::Rhcos`], version
    /// [`RHCOS_VERSION`]).
    pub fn rhcos() -> SynthSpec {
        SynthSpec {
            version: SynthVariant::Rhcos.default_version().to_owned(),
            ..SynthSpec::example().with_variant(SynthVariant::Rhcos)
        }
    }

    /// This spec shaped like another CoreOS (everything else, the version included,
    /// unchanged).
    pub fn with_variant(&self, variant: SynthVariant) -> SynthSpec {
        SynthSpec {
            variant,
            ..self.clone()
        }
    }

    /// This spec for each of the [`FOUR_ARCHES`] (`linux/amd64`, `linux/arm64`,
    /// `linux/ppc64le`, `linux/s390x`), in that order: what [`crate::write_four_arch`]
    /// writes an index of.
    pub fn four_arch(&self) -> Vec<SynthSpec> {
        FOUR_ARCHES
            .iter()
            .map(|a| self.with_platform(Platform::new(&self.platform.os, a, None)))
            .collect()
    }

    /// This spec as a plain container image, not ostree-encapsulated (see
    /// [`SynthSpec::ostree`]): the generic-container case, and the one whose last layer
    /// carries whiteouts and an opaque directory.
    pub fn plain(&self) -> SynthSpec {
        SynthSpec {
            ostree: false,
            ..self.clone()
        }
    }

    /// This spec for another platform (everything else unchanged).
    pub fn with_platform(&self, platform: Platform) -> SynthSpec {
        SynthSpec {
            platform,
            ..self.clone()
        }
    }

    /// Check the parameters without generating anything.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.layers < 2 {
            return Err(SpecError::TooFewLayers(self.layers));
        }
        if self.layers > 127 {
            return Err(SpecError::TooManyLayers(self.layers));
        }
        if self.files < MIN_FILES {
            return Err(SpecError::TooFewFiles {
                got: self.files,
                min: MIN_FILES,
            });
        }
        if self.gzip_level > 9 {
            return Err(SpecError::GzipLevel(self.gzip_level));
        }
        if self.version.is_empty()
            || !self
                .version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c))
        {
            return Err(SpecError::Version(self.version.clone()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for x in &self.extra_files {
            if !is_normal_absolute(&x.path) {
                return Err(SpecError::ExtraPath(x.path.clone()));
            }
            if x.mode & !0o7777 != 0 {
                return Err(SpecError::ExtraMode {
                    path: x.path.clone(),
                    mode: x.mode,
                });
            }
            if !seen.insert(x.path.as_str()) {
                return Err(SpecError::DuplicateExtra(x.path.clone()));
            }
        }
        Ok(())
    }
}

/// `/a/b` with no empty, `.` or `..` components and not `/` itself.
fn is_normal_absolute(path: &str) -> bool {
    match path.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => rest
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0')),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for p in Profile::ALL {
            let spec = p.spec(Platform::new("linux", "arm64", None));
            assert_eq!(spec.validate(), Ok(()), "{}", p.name());
            assert_eq!(Profile::from_name(p.name()), Some(p));
        }
        assert_eq!(Profile::from_name("nope"), None);
        for v in SynthVariant::ALL {
            assert_eq!(SynthVariant::from_name(v.name()), Some(v));
        }
        assert_eq!(SynthVariant::from_name("nope"), None);
    }

    #[test]
    fn variants_and_four_arch() {
        for p in [Profile::Example, Profile::Bench100m, Profile::Bench1g] {
            assert_eq!(
                p.spec(Platform::new("linux", "amd64", None)).variant,
                SynthVariant::Fcos
            );
        }
        let scos = SynthSpec::scos();
        assert_eq!(
            (scos.variant, scos.version.as_str()),
            (SynthVariant::Scos, SCOS_VERSION)
        );
        assert_eq!(
            scos,
            SynthSpec {
                variant: SynthVariant::Scos,
                version: SCOS_VERSION.into(),
                ..SynthSpec::example()
            }
        );
        assert_eq!(SynthSpec::rhcos().variant, SynthVariant::Rhcos);
        let four = SynthSpec::rhcos().four_arch();
        let arches: Vec<&str> = four
            .iter()
            .map(|s| s.platform.architecture.as_str())
            .collect();
        assert_eq!(arches, FOUR_ARCHES);
        assert!(
            four.iter()
                .all(|s| s.variant == SynthVariant::Rhcos && s.platform.os == "linux")
        );
    }

    #[test]
    fn validation_table() {
        let base = SynthSpec::example();
        let extra = |path: &str, mode: u32| ExtraFile {
            path: path.to_owned(),
            contents: vec![],
            mode,
        };
        let with_extras = |extra_files: Vec<ExtraFile>| SynthSpec {
            extra_files,
            ..base.clone()
        };
        let cases: Vec<(SynthSpec, SpecError, &str)> = vec![
            (
                SynthSpec {
                    layers: 1,
                    ..base.clone()
                },
                SpecError::TooFewLayers(1),
                "layers = 1",
            ),
            (
                SynthSpec {
                    layers: 128,
                    ..base.clone()
                },
                SpecError::TooManyLayers(128),
                "at most 127",
            ),
            (
                SynthSpec {
                    files: 10,
                    ..base.clone()
                },
                SpecError::TooFewFiles {
                    got: 10,
                    min: MIN_FILES,
                },
                "files = 10",
            ),
            (
                SynthSpec {
                    gzip_level: 10,
                    ..base.clone()
                },
                SpecError::GzipLevel(10),
                "gzip_level",
            ),
            (
                SynthSpec {
                    version: "4 1".into(),
                    ..base.clone()
                },
                SpecError::Version("4 1".into()),
                "version",
            ),
            (
                SynthSpec {
                    version: String::new(),
                    ..base.clone()
                },
                SpecError::Version(String::new()),
                "non-empty",
            ),
            (
                with_extras(vec![extra("usr/bin/x", 0o755)]),
                SpecError::ExtraPath("usr/bin/x".into()),
                "must be absolute",
            ),
            (
                with_extras(vec![extra("/usr/../x", 0o755)]),
                SpecError::ExtraPath("/usr/../x".into()),
                "normalised",
            ),
            (
                with_extras(vec![extra("/usr/bin/x/", 0o755)]),
                SpecError::ExtraPath("/usr/bin/x/".into()),
                "normalised",
            ),
            (
                with_extras(vec![extra("/", 0o755)]),
                SpecError::ExtraPath("/".into()),
                "not `/`",
            ),
            (
                with_extras(vec![extra("/x", 0o100755)]),
                SpecError::ExtraMode {
                    path: "/x".into(),
                    mode: 0o100755,
                },
                "mode",
            ),
            (
                with_extras(vec![extra("/x", 0o755), extra("/x", 0o644)]),
                SpecError::DuplicateExtra("/x".into()),
                "twice",
            ),
        ];
        assert_eq!(base.validate(), Ok(()));
        for (spec, want, text) in cases {
            let got = spec.validate();
            assert_eq!(got, Err(want), "{spec:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains(text), "{e}");
            }
        }
    }
}
