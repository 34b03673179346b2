//! What needs RUN steps, and why: what the native engine cannot do (RPM installs from
//! `spec.extensions`, a `spec.kernelType` kernel swap, a user Containerfile), done by
//! `buildah` on top of the native image ([`crate::buildah`]).
//!
//! **Contract.** [`plan`] reads what needs RUN from the rendered MachineConfig and
//! `--containerfile` (`machineos_buildrequest::containerfile::RunSteps`; its errors name the
//! field, a Containerfile error its line); nothing to RUN is `None` (no buildah).
//! [`Plan::check`] then refuses, before anything is pushed, what cannot work:
//! an OCI-layout `--output` or `--base` (buildah pulls the native image from the registry
//! by digest, and the `baseOSContainerImage` label needs a registry reference), a
//! `--platform` that is not this machine's (RUN steps execute here), no `buildah` on `PATH`.
//! The extensions image (the rendered `spec.baseOSExtensionsContainerImage`, as
//! `--extensions-image` sets it) is resolved to the platform's manifest digest
//! ([`resolve_extensions_image`]) and the Containerfile rendered once with a placeholder
//! FROM ([`Plan::containerfile`]), so a missing extensions image or a Containerfile the
//! local step cannot run fails first too. Then the native image is pushed to
//! `<output repository>:<output tag>-native` ([`crate::tag::native_output`]) — a tag, not
//! only a digest: a registry may garbage-collect an untagged manifest, and the intermediate
//! stays inspectable next to the result — the Containerfile rendered `FROM` it by digest,
//! and [`crate::buildah::build_and_push`] builds and pushes the output reference itself.
//!
//! **Heredocs.** The rendered Containerfile is passed through [`machineos_buildrequest::containerfile::heredoc::lower`]
//! (RUN heredocs to the exec form), since Debian's buildah (1.28) predates heredoc support.
//!
//! Error messages name the command line's flags (`--containerfile`, `--platform`,
//! `--output`, `--base`): this is `machineos build`'s decision, kept out of its binary.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use machineos_api::v1::{ContainerfileArch, MachineConfig};
use machineos_buildrequest::containerfile::{ContainerfileInputs, RunSteps, RunStepsError, render};
use machineos_image::{Digest, ImageRef, Platform, RegistryRef};

use crate::buildah::Buildah;

/// What needs RUN for one build, and for what.
#[derive(Debug)]
pub struct Plan {
    /// The steps.
    pub steps: RunSteps,
    /// What needs them, for messages: `spec.extensions [usbguard]`, `spec.kernelType
    /// realtime`, `--containerfile FILE`.
    pub needs: Vec<String>,
    /// The input's name (`MachineConfig rendered-worker-…`).
    pub source_name: String,
    /// The rendered MachineConfig's name (label `machineconfig`).
    pub machine_config: String,
    /// The pool (label `machineconfigpool`).
    pub pool: String,
    /// The rendered `spec.baseOSExtensionsContainerImage` (may be empty).
    pub extensions_image: String,
    /// `--containerfile`.
    pub containerfile: Option<PathBuf>,
}

/// What needs RUN: `None` when nothing does. `mc` is the rendered MachineConfig (`None` for
/// an Ignition input), `containerfile` the `--containerfile` file.
pub fn plan(
    mc: Option<&MachineConfig>,
    source_name: &str,
    containerfile: Option<&Path>,
    pool: &str,
    platform: &Platform,
) -> anyhow::Result<Option<Plan>> {
    let Some(mc) = mc else {
        if let Some(path) = containerfile {
            bail!(
                "--containerfile {}: needs MachineConfig inputs (the image's labels name the rendered MachineConfig and pool); {source_name} is an Ignition config",
                path.display()
            );
        }
        return Ok(None);
    };
    // Nothing that needs RUN: not even the target architecture is checked (a native build
    // for any platform stays as it was).
    let default_kernel = matches!(mc.spec.kernel_type.as_str(), "" | "default");
    if containerfile.is_none() && mc.spec.extensions.is_empty() && default_kernel {
        return Ok(None);
    }
    let content = containerfile
        .map(|p| {
            std::fs::read_to_string(p).with_context(|| format!("--containerfile {}", p.display()))
        })
        .transpose()?;
    let entries: Vec<(ContainerfileArch, &str)> = content
        .as_deref()
        .map(|c| (ContainerfileArch::NoArch, c))
        .into_iter()
        .collect();
    let steps = RunSteps::new(mc, &entries, &platform.architecture).map_err(|e| {
        match (e, containerfile) {
            (RunStepsError::Containerfile { error, .. }, Some(path)) => {
                anyhow::anyhow!("--containerfile {}: {error}", path.display())
            }
            (RunStepsError::Architecture { value }, _) => anyhow::anyhow!(
                "--platform: RUN steps are built for amd64, arm64, ppc64le or s390x, not {value:?}"
            ),
            (e, _) => anyhow::Error::new(e),
        }
    })?;
    if steps.is_empty() {
        return Ok(None);
    }
    // What the local step cannot run, with the user's own line numbers.
    if let (Some(path), Some((_, user))) = (containerfile, steps.user_containerfile()) {
        machineos_buildrequest::containerfile::heredoc::lower(user)
            .map_err(|e| anyhow::anyhow!("--containerfile {}: {e}", path.display()))?;
    }
    let mut needs = Vec::new();
    if !steps.extensions().is_empty() {
        needs.push(format!(
            "spec.extensions [{}]",
            mc.spec.extensions.join(", ")
        ));
    }
    if let Some(k) = steps.kernel_swap() {
        needs.push(format!("spec.kernelType {}", k.as_str()));
    }
    if let (Some(path), Some(_)) = (containerfile, steps.user_containerfile()) {
        needs.push(format!("--containerfile {}", path.display()));
    }
    Ok(Some(Plan {
        steps,
        needs,
        source_name: source_name.to_owned(),
        machine_config: mc.name().to_owned(),
        pool: pool.to_owned(),
        extensions_image: mc.spec.base_os_extensions_container_image.clone(),
        containerfile: containerfile.map(Path::to_path_buf),
    }))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
impl Plan {
    /// `MachineConfig X: spec.extensions [a] and … need(s) RUN steps`.
    fn what(&self) -> String {
        let verb = if self.needs.len() == 1 {
            "needs"
        } else {
            "need"
        };
        format!(
            "{}: {} {verb} RUN steps",
            self.source_name,
            and_list(&self.needs)
        )
    }

    /// Refuse, before anything is built, what the local RUN step cannot do; the buildah to
    /// run.
    pub fn check(
        &self,
        base: &ImageRef,
        output: &ImageRef,
        platform: &Platform,
    ) -> anyhow::Result<Buildah> {
        if !matches!(output, ImageRef::Registry(_)) {
            bail!(
                "{}, which machineos build runs with buildah for a registry --output only (buildah pulls the native image from it): give --output HOST/REPO[:TAG]",
                self.what()
            );
        }
        if !matches!(base, ImageRef::Registry(_)) {
            bail!(
                "{}, which need a registry --base (its reference is the image's baseOSContainerImage label)",
                self.what()
            );
        }
        let host = Platform::host();
        if platform.architecture != host.architecture {
            bail!(
                "{}, which run on this machine ({host}): --platform {platform} cannot be built here",
                self.what()
            );
        }
        let Some(buildah) = Buildah::find() else {
            bail!(
                "{}: buildah not found in PATH (install buildah)",
                self.what()
            );
        };
        Ok(buildah)
    }

    /// The Containerfile buildah builds: rendered `FROM from_image` (by digest), its RUN
    /// heredocs lowered.
    pub fn containerfile(
        &self,
        from_image: &str,
        extensions_image: Option<&str>,
        base_image: &str,
    ) -> anyhow::Result<String> {
        let rendered = render(&ContainerfileInputs {
            run_steps: &self.steps,
            from_image,
            extensions_image,
            machine_config: &self.machine_config,
            pool: &self.pool,
            base_image,
        })
        .with_context(|| self.what())?
        .with_context(|| format!("{}: nothing rendered", self.what()))?;
        let (lowered, _) = machineos_buildrequest::containerfile::heredoc::lower(&rendered)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: the rendered Containerfile (user Containerfile appended): {e}",
                    self.what()
                )
            })?;
        Ok(lowered)
    }

    /// What ran, for the summary: `extensions [usbguard]`, `kernel realtime`,
    /// `Containerfile FILE`.
    pub fn steps_ran(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.steps.extensions().is_empty() {
            out.push(format!(
                "rpm-ostree install {}",
                self.steps.extension_packages().join(" ")
            ));
        }
        if let Some(k) = self.steps.kernel_swap() {
            out.push(format!("kernel swap to {}", k.as_str()));
        }
        if let (Some(path), Some(_)) = (&self.containerfile, self.steps.user_containerfile()) {
            out.push(format!("Containerfile {}", path.display()));
        }
        out
    }
}

/// The extensions image by digest (the `platform` manifest of an index), when the steps
/// need it and it is given; `None` otherwise (rendering then names what is missing).
pub async fn resolve_extensions_image(
    plan: &Plan,
    registry: Option<&machineos_registry::Registry>,
    platform: &Platform,
) -> anyhow::Result<Option<String>> {
    if !plan.steps.needs_extensions_image() || plan.extensions_image.is_empty() {
        return Ok(None);
    }
    let field = "spec.baseOSExtensionsContainerImage (--extensions-image)";
    let image = &plan.extensions_image;
    let reference = match ImageRef::parse(image).with_context(|| format!("{field} {image:?}"))? {
        ImageRef::Registry(r) => r,
        ImageRef::Layout(_) => {
            bail!(
                "{field} {image:?}: buildah mounts it from a registry; give HOST/REPO[:TAG|@DIGEST]"
            )
        }
    };
    if reference.digest().is_some() {
        return Ok(Some(
            reference.by_digest(reference.digest().context("digest")?),
        ));
    }
    let registry = registry.context("no registry client for the extensions image")?;
    let info = registry
        .image_info(&reference)
        .await
        .with_context(|| format!("{field} {image}"))?
        .with_context(|| format!("{field} {image}: not found"))?;
    let digest: Digest = if info.is_index() {
        info.architectures
            .iter()
            .find(|(arch, _)| *arch == platform.architecture)
            .map(|(_, d)| d.clone())
            .with_context(|| {
                format!(
                    "{field} {image}: no {} image in the index",
                    platform.architecture
                )
            })?
    } else {
        info.digest
    };
    Ok(Some(reference.by_digest(&digest)))
}

/// Refuses RUN steps in a multi-platform build: they run through buildah on this machine's
/// architecture. Arguments as for [`plan`].
pub fn refuse_multi_platform(
    mc: Option<&MachineConfig>,
    source_name: &str,
    containerfile: Option<&Path>,
    pool: &str,
) -> anyhow::Result<()> {
    // RUN steps are planned for some platform; whether there are any does not depend on it.
    if let Some(plan) = plan(mc, source_name, containerfile, pool, &Platform::host())? {
        bail!(
            "{}: RUN steps ({}) run through buildah on this machine's architecture: a \
             multi-platform build cannot apply them; build each platform on a machine of its \
             architecture, or use the controller's Job backend",
            source_name,
            plan.steps_ran().join(", ")
        );
    }
    Ok(())
}

/// A build's RUN steps once everything that can fail before the native image is pushed
/// has been checked ([`prepare`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The buildah to run.
    pub buildah: Buildah,
    /// The extensions image by digest, when the steps need it.
    pub extensions: Option<String>,
    /// The final image's reference (`--output`).
    pub output: RegistryRef,
    /// Where the native image goes ([`crate::tag::native_output`]).
    pub native: RegistryRef,
}

/// Everything that can fail before the native image is pushed: [`Plan::check`], the
/// extensions image resolved ([`resolve_extensions_image`]), the Containerfile rendered once
/// with a placeholder FROM, the native image's reference.
pub async fn prepare(
    plan: &Plan,
    base: &ImageRef,
    output: &ImageRef,
    platform: &Platform,
    registry: Option<&machineos_registry::Registry>,
) -> anyhow::Result<Prepared> {
    let buildah = plan.check(base, output, platform)?;
    let extensions = resolve_extensions_image(plan, registry, platform).await?;
    let ImageRef::Registry(final_output) = output else {
        bail!("--output: not a registry reference");
    };
    let placeholder = final_output.by_digest(&Digest::sha256(b""));
    plan.containerfile(&placeholder, extensions.as_deref(), &placeholder)?;
    let native = crate::tag::native_output(final_output)?;
    Ok(Prepared {
        buildah,
        extensions,
        output: final_output.clone(),
        native,
    })
}

impl Prepared {
    /// The RUN steps on the native image `native_pullspec` (built on `base_pullspec`): the
    /// Containerfile rendered `FROM` it, built and pushed to the output by
    /// [`crate::buildah::build_and_push`]. Errors name `plan`'s input and the native image.
    pub fn run(
        &self,
        plan: &Plan,
        native_pullspec: &str,
        base_pullspec: &str,
        access: &crate::buildah::RegistryAccess,
    ) -> anyhow::Result<crate::buildah::Built> {
        let containerfile =
            plan.containerfile(native_pullspec, self.extensions.as_deref(), base_pullspec)?;
        let mut registries = vec![&self.output];
        let extensions_ref = self
            .extensions
            .as_deref()
            .map(RegistryRef::parse)
            .transpose()
            .context("the extensions image")?;
        registries.extend(extensions_ref.as_ref());
        crate::buildah::build_and_push(
            &self.buildah,
            &containerfile,
            &self.output,
            &registries,
            access,
        )
        .with_context(|| {
            format!(
                "{}: RUN steps on the native image {native_pullspec} (pushed as {})",
                plan.source_name, self.native
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mc(extensions: &[&str], kernel_type: &str) -> MachineConfig {
        let mut mc = MachineConfig::new(
            "rendered-worker-0",
            machineos_api::v1::MachineConfigSpec::default(),
        );
        mc.spec.extensions = extensions.iter().map(|e| e.to_string()).collect();
        mc.spec.kernel_type = kernel_type.to_owned();
        mc
    }

    #[test]
    fn plan_table() {
        let amd64 = Platform::new("linux", "amd64", None);
        let i386 = Platform::new("linux", "386", None);
        let name = "MachineConfig rendered-worker-0";
        let plan_of = |m: &MachineConfig, p: &Platform| plan(Some(m), name, None, "worker", p);
        // Nothing to RUN, whatever the platform.
        assert!(plan_of(&mc(&[], ""), &i386).unwrap().is_none());
        assert!(plan_of(&mc(&[], "default"), &amd64).unwrap().is_none());
        // What needs RUN, named.
        let p = plan_of(&mc(&["usbguard", "usbguard"], "realtime"), &amd64)
            .unwrap()
            .unwrap();
        assert_eq!(
            p.needs,
            [
                "spec.extensions [usbguard, usbguard]",
                "spec.kernelType realtime"
            ]
        );
        assert_eq!(
            p.steps_ran(),
            ["rpm-ostree install usbguard", "kernel swap to realtime"]
        );
        assert_eq!(
            p.what(),
            "MachineConfig rendered-worker-0: spec.extensions [usbguard, usbguard] and spec.kernelType realtime need RUN steps"
        );
        // The MCO's refusals.
        let e = plan_of(&mc(&[], "64k-pages"), &amd64).unwrap_err();
        assert!(
            e.to_string()
                .contains("64k-pages is only supported for arm64"),
            "{e}"
        );
        let e = plan_of(&mc(&["usbguard"], ""), &i386).unwrap_err();
        assert!(e.to_string().contains("--platform"), "{e}");
        // An Ignition input has no labels to give a Containerfile.
        let e = plan(None, "x.ign", Some(Path::new("C")), "worker", &amd64).unwrap_err();
        assert!(e.to_string().contains("needs MachineConfig inputs"), "{e}");
        assert!(
            plan(None, "x.ign", None, "worker", &amd64)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn and_list_table() {
        assert_eq!(and_list(&["a".into()]), "a");
        assert_eq!(
            and_list(&["a".into(), "b".into(), "c".into()]),
            "a, b and c"
        );
    }
}
