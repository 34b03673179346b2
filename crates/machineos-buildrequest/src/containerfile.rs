//! The Containerfile a RUN-step backend (a buildah Job, an OpenShift Build) builds, and its
//! validation — the MCO's `Containerfile.on-cluster-build-template` stages 3–7
//! (`docs/mco-behaviour.md` §2.4), re-done on top of machineos's native image.
//!
//! **What needs RUN.** [`RunSteps::new`] reads a rendered MachineConfig (`spec.extensions`,
//! `spec.kernelType`), the MachineOSConfig's `containerFile` entries and the target
//! architecture, and keeps what the native engine cannot do itself: RPM installs
//! (extensions, a kernel swap) and the user's Containerfile. Errors name the field.
//!
//! * **The target's architecture decides `64k-pages`.** The 64k-pages kernel is refused on
//!   a target that is not `arm64`. The MCO checks the *controller's* own `GOARCH`
//!   (`buildrequestopts.go:getKernelPackages`), so an amd64 controller refuses a build for
//!   an arm64 pool and an arm64 controller accepts one for amd64; machineos checks the
//!   architecture the image is built for.
//! * **Which user Containerfile.** An entry for the target's architecture (`AMD64`,
//!   `ARM64`, `PPC64LE`, `S390X`) *replaces* the `NoArch` entry; without one, `NoArch`
//!   applies. The two are never concatenated: each must continue with `FROM configs AS
//!   final`, and two stages named `final` do not build. (The MCO reads the `NoArch` entry
//!   only.) Content that is only blank lines and comments counts as none (so an empty
//!   entry for an architecture turns the `NoArch` one off for it). Two entries for one
//!   architecture are refused (the API server's list-map refuses them too). The chosen
//!   Containerfile is validated on its own ([`validate`], the stage `configs` known, a
//!   `FROM configs` required, the `escape` parser directive refused because appended it
//!   would be a comment), so its errors carry the user's own line numbers.
//! * Extension packages are the MCO's lists ([`Extension::packages`]), in order, without
//!   repeats. The kernel is swapped only for `realtime` and `64k-pages`: as in the MCO, a
//!   `default` kernelType installs nothing (a base that ships another kernel keeps it).
//!
//! **The template.** [`render`] fills `templates/Containerfile.tmpl` (embedded with
//! `include_str!`). The improvement over the MCO: the Containerfile starts `FROM` the image
//! the native engine already built and pushed (by digest), where the Ignition config is
//! applied and `currentconfig` is in place, so there is no `extract` stage and no
//! ignition-apply; the stage is named `configs`, which keeps the MCO's contract for the
//! user's Containerfile (`FROM configs AS final`). Then, as the MCO: the extensions image
//! (by digest, `RUN --mount=type=bind,from=<image>` as the MCO, no extra stage)
//! bind-mounted as a local rpm-md repository (`coreos-extensions.repo`, `gpgcheck=0`),
//! `rpm-ostree install` of the packages, the kernel swap the MCO's template does (detect
//! the installed kernel with `rpm -q`, `remove`/`install` in one `dnf -y shell`
//! transaction), the usbguard/ipsec tmpfiles workaround, the repository file removed,
//! `ostree container commit`; the labels `machineconfig`, `machineconfigpool`,
//! `baseOSContainerImage` (the native image has them already; repeating them costs
//! nothing and keeps them whatever the FROM image carries); the user's Containerfile
//! appended. The tmpfiles workaround runs only with the extensions step (the MCO runs it
//! in every build; it matters only once the usbguard or ipsec packages are installed, and
//! a user-Containerfile-only build then changes no more than the user asked for). Nothing
//! to RUN gives `None`:
//! the backend creates no Job and the native image is the result. The rendered text is
//! validated before it is returned.
//!
//! The template language is a dozen lines written here: `{{name}}` substitutes a value,
//! a line `{{#if name}}` … `{{/if}}` keeps its lines when the value is not empty. A
//! template crate (handlebars, minijinja, tera) would bring an expression language, HTML
//! escaping to turn off and a dependency tree for two constructs; unknown names and
//! unbalanced blocks are errors here, never an empty string. Substituted values are
//! checked to be one line without spaces (image references by digest, Kubernetes names),
//! so no value can add an instruction; only the user's Containerfile is multi-line.
//!
//! **Validation.** [`validate`] is a Containerfile syntax check written here, not a crate:
//! `dockerfile-parser` (the one Dockerfile parser on crates.io) does not parse heredocs,
//! which the template itself uses, nor the `escape` directive, and depends on snafu 0.6.
//! It follows BuildKit's rules: parser directives (`syntax`, `escape`, `check`) at the top
//! only, once each, `escape` being `\` or `` ` ``; line continuations (comment and blank
//! lines inside one are skipped, a continuation at the end of the file is an error);
//! heredocs (`<<EOF`, `<<-EOF`, `<<'EOF'`, `<<"EOF"`) in RUN, COPY and ADD, their bodies
//! skipped up to the terminator (an unterminated one is an error); known instructions
//! only, none with empty arguments; only ARG before the first FROM; `FROM image [AS
//! name]`, stage names as BuildKit's (`[a-z][a-z0-9-_.]*`, case-insensitive, unique); the
//! flags each instruction takes, and nothing else; `--from` and `--mount …,from=` naming an
//! earlier stage (by name or index), or else a well-formed image reference (a stage
//! referring to itself is an error); SHELL a JSON array; ENV/LABEL/ARG keys not empty;
//! EXPOSE ports well-formed; ONBUILD not chaining ONBUILD, FROM or MAINTAINER. Errors carry
//! the 1-based line where the instruction starts and that line.
//!
//! Simplified: words are split on blanks outside quotes, without BuildKit's full shell
//! lexer (a heredoc marker inside quotes is not a heredoc here; BuildKit's quirks around
//! it are not reproduced); values with `$` (ARG expansion) are not checked; `--mount`
//! checks `type`, `target` for bind/cache/tmpfs and `from`, not every option; `--network`
//! and `--security` values are not checked; an image reference is checked against the
//! distribution grammar without IPv6 hosts. The MCO's stage 5 (the cluster's additional
//! CA bundle copied in and `update-ca-trust`) is not in the template: it needs a build
//! context file this crate's inputs do not carry yet.

use std::collections::HashSet;

use machineos_api::v1::{ContainerfileArch, MachineConfig, MachineOSConfigSpec};
use machineos_diagnostics::{Classify, Retry};
pub use machineos_render::{Extension, KernelType};

/// The template, `templates/Containerfile.tmpl`.
pub const TEMPLATE: &str = include_str!("../templates/Containerfile.tmpl");

/// An architecture an image is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// `amd64` (x86_64).
    Amd64,
    /// `arm64` (aarch64).
    Arm64,
    /// `ppc64le`.
    Ppc64le,
    /// `s390x`.
    S390x,
}

impl Arch {
    /// Every architecture.
    pub const ALL: [Arch; 4] = [Arch::Amd64, Arch::Arm64, Arch::Ppc64le, Arch::S390x];

    /// Parse Go's `GOARCH` spelling (`amd64`, `arm64`, `ppc64le`, `s390x`).
    pub fn from_goarch(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.goarch() == value)
    }

    /// Go's `GOARCH` spelling.
    pub fn goarch(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
            Arch::Ppc64le => "ppc64le",
            Arch::S390x => "s390x",
        }
    }

    /// The MachineOSConfig's `containerfileArch` for this architecture.
    pub fn containerfile_arch(self) -> ContainerfileArch {
        match self {
            Arch::Amd64 => ContainerfileArch::Amd64,
            Arch::Arm64 => ContainerfileArch::Arm64,
            Arch::Ppc64le => ContainerfileArch::Ppc64le,
            Arch::S390x => ContainerfileArch::S390x,
        }
    }
}

/// The spelling of a `containerfileArch` in the API (`NoArch`, `AMD64`, …).
pub fn containerfile_arch_name(arch: ContainerfileArch) -> &'static str {
    match arch {
        ContainerfileArch::Arm64 => "ARM64",
        ContainerfileArch::Amd64 => "AMD64",
        ContainerfileArch::Ppc64le => "PPC64LE",
        ContainerfileArch::S390x => "S390X",
        ContainerfileArch::NoArch => "NoArch",
    }
}

/// A MachineOSConfig's `spec.containerFile` entries as the (arch, content) pairs
/// [`RunSteps::new`] takes.
pub fn containerfile_entries(spec: &MachineOSConfigSpec) -> Vec<(ContainerfileArch, &str)> {
    spec.containerfile
        .iter()
        .map(|c| (c.containerfile_arch, c.content.as_str()))
        .collect()
}

/// Why a MachineConfig and MachineOSConfig cannot give [`RunSteps`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunStepsError {
    /// An entry of `spec.extensions` that is not a supported extension.
    #[error(
        "MachineConfig {machine_config:?}: error at $.spec.extensions[{index}]: unsupported extension {value:?}"
    )]
    Extension {
        /// The MachineConfig.
        machine_config: String,
        /// Index in `spec.extensions`.
        index: usize,
        /// The value given.
        value: String,
    },
    /// `spec.kernelType` is not `default`, `realtime` or `64k-pages`.
    #[error(
        "MachineConfig {machine_config:?}: error at $.spec.kernelType: kernelType={value} is invalid"
    )]
    KernelType {
        /// The MachineConfig.
        machine_config: String,
        /// The value given.
        value: String,
    },
    /// `spec.kernelType` is `64k-pages` and the target is not arm64.
    #[error(
        "MachineConfig {machine_config:?}: error at $.spec.kernelType: 64k-pages is only supported for arm64 targets, this build is for {target}"
    )]
    KernelTypeArch {
        /// The MachineConfig.
        machine_config: String,
        /// The target architecture (`GOARCH` spelling).
        target: String,
    },
    /// The target architecture is not one machineos builds for.
    #[error("target architecture {value:?} is not one of amd64, arm64, ppc64le, s390x")]
    Architecture {
        /// The value given.
        value: String,
    },
    /// Two `spec.containerFile` entries for one architecture.
    #[error(
        "MachineOSConfig: error at $.spec.containerFile[{index}].containerfileArch: a second Containerfile for {}",
        containerfile_arch_name(*.arch)
    )]
    DuplicateContainerfile {
        /// Index of the second entry.
        index: usize,
        /// The architecture.
        arch: ContainerfileArch,
    },
    /// The user's Containerfile for the target does not validate.
    #[error(
        "MachineOSConfig: error at $.spec.containerFile[{index}].content ({}): {error}",
        containerfile_arch_name(*.arch)
    )]
    Containerfile {
        /// Index of the entry.
        index: usize,
        /// Its architecture.
        arch: ContainerfileArch,
        /// What is wrong, line numbers counted in the entry's content.
        error: ContainerfileError,
    },
}

impl Classify for RunStepsError {
    /// `UnsupportedExtension`, `InvalidKernelType`, `UnsupportedArchitecture` or
    /// `InvalidContainerfile`.
    fn reason(&self) -> &'static str {
        match self {
            RunStepsError::Extension { .. } => "UnsupportedExtension",
            RunStepsError::KernelType { .. } | RunStepsError::KernelTypeArch { .. } => {
                "InvalidKernelType"
            }
            RunStepsError::Architecture { .. } => "UnsupportedArchitecture",
            RunStepsError::DuplicateContainerfile { .. } | RunStepsError::Containerfile { .. } => {
                "InvalidContainerfile"
            }
        }
    }

    /// Always permanent: the MachineConfig or MachineOSConfig must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// What of a rendered MachineConfig and a MachineOSConfig needs a RUN step for one target
/// architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSteps {
    arch: Arch,
    extensions: Vec<Extension>,
    kernel_type: KernelType,
    user_containerfile: Option<(ContainerfileArch, String)>,
}

impl RunSteps {
    /// Read `spec.extensions` and `spec.kernelType` of the rendered MachineConfig `mc`, pick
    /// the user's Containerfile for `target` (a `GOARCH` spelling) from `containerfiles`
    /// (the MachineOSConfig's entries, see [`containerfile_entries`]) and validate it.
    pub fn new(
        mc: &MachineConfig,
        containerfiles: &[(ContainerfileArch, &str)],
        target: &str,
    ) -> Result<Self, RunStepsError> {
        let name = mc.name();
        let arch = Arch::from_goarch(target).ok_or_else(|| RunStepsError::Architecture {
            value: target.to_owned(),
        })?;
        let mut extensions = Vec::new();
        for (index, value) in mc.spec.extensions.iter().enumerate() {
            let ext = Extension::parse(value).ok_or_else(|| RunStepsError::Extension {
                machine_config: name.to_owned(),
                index,
                value: value.clone(),
            })?;
            if !extensions.contains(&ext) {
                extensions.push(ext);
            }
        }
        let kernel_type =
            KernelType::parse(&mc.spec.kernel_type).ok_or_else(|| RunStepsError::KernelType {
                machine_config: name.to_owned(),
                value: mc.spec.kernel_type.clone(),
            })?;
        if kernel_type == KernelType::SixtyFourKPages && arch != Arch::Arm64 {
            return Err(RunStepsError::KernelTypeArch {
                machine_config: name.to_owned(),
                target: target.to_owned(),
            });
        }

        let mut seen = HashSet::new();
        let (mut no_arch, mut specific) = (None, None);
        for (index, (entry_arch, content)) in containerfiles.iter().enumerate() {
            if !seen.insert(containerfile_arch_name(*entry_arch)) {
                return Err(RunStepsError::DuplicateContainerfile {
                    index,
                    arch: *entry_arch,
                });
            }
            if *entry_arch == ContainerfileArch::NoArch {
                no_arch = Some((index, *entry_arch, *content));
            } else if *entry_arch == arch.containerfile_arch() {
                specific = Some((index, *entry_arch, *content));
            }
        }
        let user_containerfile = match specific.or(no_arch) {
            Some((index, entry_arch, content)) if !only_comments(content) => {
                validate_user(content).map_err(|error| RunStepsError::Containerfile {
                    index,
                    arch: entry_arch,
                    error,
                })?;
                Some((entry_arch, content.trim_end().to_owned()))
            }
            _ => None,
        };
        Ok(RunSteps {
            arch,
            extensions,
            kernel_type,
            user_containerfile,
        })
    }

    /// The target architecture.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The extensions to install, in order, without repeats.
    pub fn extensions(&self) -> &[Extension] {
        &self.extensions
    }

    /// Their packages, in order, without repeats.
    pub fn extension_packages(&self) -> Vec<&'static str> {
        let mut packages: Vec<&'static str> = Vec::new();
        for p in self.extensions.iter().flat_map(|e| e.packages()) {
            if !packages.contains(p) {
                packages.push(p);
            }
        }
        packages
    }

    /// The MachineConfig's kernel type.
    pub fn kernel_type(&self) -> KernelType {
        self.kernel_type
    }

    /// The kernel to swap in: `Some` for `realtime` and `64k-pages`, `None` for `default`.
    pub fn kernel_swap(&self) -> Option<KernelType> {
        (self.kernel_type != KernelType::Default).then_some(self.kernel_type)
    }

    /// The user's Containerfile for the target and the entry it came from (`NoArch` or the
    /// target's own), trailing blank lines removed.
    pub fn user_containerfile(&self) -> Option<(ContainerfileArch, &str)> {
        self.user_containerfile
            .as_ref()
            .map(|(a, c)| (*a, c.as_str()))
    }

    /// Whether the build needs the extensions image (extensions or a kernel swap).
    pub fn needs_extensions_image(&self) -> bool {
        !self.extensions.is_empty() || self.kernel_swap().is_some()
    }

    /// Whether nothing needs RUN: the native image is the result.
    pub fn is_empty(&self) -> bool {
        !self.needs_extensions_image() && self.user_containerfile.is_none()
    }
}

/// What [`render`] fills the template with.
#[derive(Debug, Clone, Copy)]
pub struct ContainerfileInputs<'a> {
    /// What needs RUN.
    pub run_steps: &'a RunSteps,
    /// The image the native engine built and pushed, by digest (`repo@sha256:…`).
    pub from_image: &'a str,
    /// The extensions image (`spec.baseOSExtensionsContainerImage`), by digest; required
    /// when [`RunSteps::needs_extensions_image`].
    pub extensions_image: Option<&'a str>,
    /// The rendered MachineConfig's name (label `machineconfig`).
    pub machine_config: &'a str,
    /// The pool's name (label `machineconfigpool`).
    pub pool: &'a str,
    /// The base OS image (`spec.osImageURL`, label `baseOSContainerImage`).
    pub base_image: &'a str,
}

/// Why [`render`] gives no Containerfile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// Extensions or a kernel swap, and no extensions image.
    #[error(
        "the MachineConfig needs the extensions image ({what}) and spec.baseOSExtensionsContainerImage is empty"
    )]
    MissingExtensionsImage {
        /// What needs it: `extensions`, `kernelType realtime`, ….
        what: String,
    },
    /// An image that must be given by digest is not.
    #[error("{field} must be an image reference by digest (name@sha256:<64 hex>), got {value:?}")]
    NotByDigest {
        /// The input: `from_image` or `extensions_image`.
        field: &'static str,
        /// The value given.
        value: String,
    },
    /// A value that is empty, or has blanks or characters a Containerfile line cannot carry.
    #[error("{field} {value:?} is not a valid {what}")]
    InvalidValue {
        /// The input: `machine_config`, `pool` or `base_image`.
        field: &'static str,
        /// The value given.
        value: String,
        /// What it should be.
        what: &'static str,
    },
    /// The template is malformed (a machineos bug, caught by the tests).
    #[error("templates/Containerfile.tmpl: {0}")]
    Template(String),
    /// The rendered Containerfile does not validate.
    #[error("the rendered Containerfile: {0}")]
    Invalid(ContainerfileError),
}

impl Classify for RenderError {
    /// `MissingExtensionsImage`, `InvalidBuildInput` or `InvalidContainerfile`.
    fn reason(&self) -> &'static str {
        match self {
            RenderError::MissingExtensionsImage { .. } => "MissingExtensionsImage",
            RenderError::NotByDigest { .. } | RenderError::InvalidValue { .. } => {
                "InvalidBuildInput"
            }
            RenderError::Template(_) | RenderError::Invalid(_) => "InvalidContainerfile",
        }
    }

    /// Always permanent.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// The Containerfile for `inputs`, validated, or `None` when nothing needs RUN.
pub fn render(inputs: &ContainerfileInputs<'_>) -> Result<Option<String>, RenderError> {
    let steps = inputs.run_steps;
    if steps.is_empty() {
        return Ok(None);
    }
    check_digest("from_image", inputs.from_image)?;
    let extensions_image = if steps.needs_extensions_image() {
        let Some(image) = inputs.extensions_image.filter(|i| !i.is_empty()) else {
            let mut what = Vec::new();
            if !steps.extensions.is_empty() {
                what.push("extensions".to_owned());
            }
            if let Some(k) = steps.kernel_swap() {
                what.push(format!("kernelType {}", k.as_str()));
            }
            return Err(RenderError::MissingExtensionsImage {
                what: what.join(", "),
            });
        };
        check_digest("extensions_image", image)?;
        image
    } else {
        ""
    };
    check_name("machine_config", inputs.machine_config)?;
    check_name("pool", inputs.pool)?;
    if !is_image_reference(inputs.base_image) {
        return Err(RenderError::InvalidValue {
            field: "base_image",
            value: inputs.base_image.to_owned(),
            what: "image reference",
        });
    }

    let packages = steps.extension_packages().join(" ");
    let (kernel_type, kernel_packages) = match steps.kernel_swap() {
        Some(k) => (k.as_str(), k.packages().join(" ")),
        None => ("", String::new()),
    };
    let (user_arch, user) = match steps.user_containerfile() {
        Some((a, c)) => (containerfile_arch_name(a), c),
        None => ("", ""),
    };
    let default_packages = KernelType::Default.packages().join(" ");
    let realtime_packages = KernelType::Realtime.packages().join(" ");
    let sixty_four_packages = KernelType::SixtyFourKPages.packages().join(" ");
    let vars: [(&str, &str); 14] = [
        ("machine_config", inputs.machine_config),
        ("pool", inputs.pool),
        ("from_image", inputs.from_image),
        ("base_image", inputs.base_image),
        ("extensions_image", extensions_image),
        ("extension_packages", &packages),
        ("kernel_type", kernel_type),
        ("kernel_packages", &kernel_packages),
        ("kernel_default_packages", &default_packages),
        ("kernel_realtime_packages", &realtime_packages),
        ("kernel_64k_packages", &sixty_four_packages),
        ("user_containerfile", user),
        ("arch", user_arch),
        ("target", steps.arch.goarch()),
    ];
    let text = fill(TEMPLATE, &vars).map_err(RenderError::Template)?;
    validate(&text).map_err(RenderError::Invalid)?;
    Ok(Some(text))
}

fn check_digest(field: &'static str, value: &str) -> Result<(), RenderError> {
    let by_digest = value.split_once('@').is_some_and(|(name, digest)| {
        !name.is_empty()
            && digest
                .strip_prefix("sha256:")
                .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if by_digest && is_image_reference(value) {
        Ok(())
    } else {
        Err(RenderError::NotByDigest {
            field,
            value: value.to_owned(),
        })
    }
}

/// A Kubernetes object name: a DNS subdomain (lowercase alphanumerics, `-`, `.`).
fn check_name(field: &'static str, value: &str) -> Result<(), RenderError> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(RenderError::InvalidValue {
            field,
            value: value.to_owned(),
            what: "Kubernetes object name",
        })
    }
}

/// The template language: `{{name}}` substitutes, a line that is only `{{#if name}}` or
/// `{{/if}}` keeps the lines between when the value is not empty.
fn fill(template: &str, vars: &[(&str, &str)]) -> Result<String, String> {
    let lookup = |name: &str, line: usize| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("line {line}: unknown name {name:?}"))
    };
    let mut out = String::new();
    let mut stack: Vec<bool> = Vec::new();
    for (i, line) in template.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim();
        if let Some(name) = trimmed
            .strip_prefix("{{#if ")
            .and_then(|r| r.strip_suffix("}}"))
        {
            stack.push(!lookup(name.trim(), n)?.is_empty());
            continue;
        }
        if trimmed == "{{/if}}" {
            stack
                .pop()
                .ok_or_else(|| format!("line {n}: {{{{/if}}}} without {{{{#if}}}}"))?;
            continue;
        }
        if !stack.iter().all(|&keep| keep) {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find("}}")
                .ok_or_else(|| format!("line {n}: unclosed {{{{"))?;
            out.push_str(lookup(after[..end].trim(), n)?);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    if stack.is_empty() {
        Ok(out)
    } else {
        Err("unclosed {{#if}}".to_owned())
    }
}

pub mod heredoc;
mod validate;
pub use validate::{
    CONFIGS_STAGE, ContainerfileError, ContainerfileErrorKind, is_image_reference, validate,
};
use validate::{only_comments, validate_user};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_substitutes_keeps_and_drops_blocks() {
        let vars = [("a", "1"), ("e", ""), ("m", "x\ny")];
        let t = "A={{a}} {{ a }}\n{{#if a}}\nkept {{m}}\n  {{#if e}}\ndropped\n  {{/if}}\n{{/if}}\n{{#if e}}\nno\n{{/if}}\nend\n";
        assert_eq!(fill(t, &vars).unwrap(), "A=1 1\nkept x\ny\nend\n");
        // A substituted value is not read again as template.
        assert_eq!(fill("{{v}}\n", &[("v", "{{a}}")]).unwrap(), "{{a}}\n");
    }

    #[test]
    fn fill_refuses_unknown_names_and_unbalanced_blocks() {
        assert_eq!(
            fill("x\n{{nope}}\n", &[]).unwrap_err(),
            "line 2: unknown name \"nope\""
        );
        assert!(fill("{{#if nope}}\n{{/if}}\n", &[]).is_err());
        assert!(fill("{{/if}}\n", &[]).is_err());
        assert!(fill("{{#if a}}\n", &[("a", "1")]).is_err());
        assert!(fill("{{a\n", &[("a", "1")]).is_err());
    }

    #[test]
    fn the_template_uses_only_known_names() {
        // Every name the template uses is one render() gives (all set, all blocks kept).
        let names = [
            "machine_config",
            "pool",
            "from_image",
            "base_image",
            "extensions_image",
            "extension_packages",
            "kernel_type",
            "kernel_packages",
            "kernel_default_packages",
            "kernel_realtime_packages",
            "kernel_64k_packages",
            "user_containerfile",
            "arch",
            "target",
        ];
        let vars: Vec<(&str, &str)> = names.iter().map(|n| (*n, "v")).collect();
        fill(TEMPLATE, &vars).unwrap();
    }
}
