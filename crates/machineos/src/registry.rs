//! Command-line options for reaching registries (credentials, CAs, plain HTTP, timeouts),
//! shared by `build` and `inspect`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use machineos_image::auth::{AuthEnv, auth_file_candidates};
use machineos_registry::{CredentialSource, RegistryOptions, Timeouts};

/// Registry access options.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// Registry credentials (containers auth.json, docker config.json, or the payload of a
    /// `kubernetes.io/dockerconfigjson` Secret). Defaults to `$REGISTRY_AUTH_FILE`,
    /// `$XDG_RUNTIME_DIR/containers/auth.json`, then `~/.docker/config.json`. Read only when
    /// a registry is contacted.
    #[arg(long, value_name = "FILE")]
    authfile: Option<PathBuf>,
    /// A registry (`host[:port]`) that may be reached over plain HTTP when it does not answer
    /// HTTPS. Loopback registries always may. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,
    /// An extra CA certificate (PEM) to trust for registries. Repeatable.
    #[arg(long = "ca-file", value_name = "FILE")]
    ca_files: Vec<PathBuf>,
    /// Seconds to wait for a connection to a registry (TCP and TLS).
    #[arg(long, value_name = "SECONDS", default_value_t = Timeouts::default().connect.as_secs())]
    connect_timeout: u64,
    /// Seconds to wait for a registry's answer, or for the next bytes of one, before the
    /// request is retried (or fails).
    #[arg(long, value_name = "SECONDS", default_value_t = Timeouts::default().request.as_secs())]
    request_timeout: u64,
    /// Seconds all registry work of the command may take in total, retries included
    /// (0: no limit).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = Timeouts::default().total.map_or(0, |t| t.as_secs())
    )]
    registry_deadline: u64,
}

impl RegistryArgs {
    /// The registry client, made only when one of `refs` is in a registry (so a build
    /// between OCI layouts never reads auth files).
    pub fn client(
        &self,
        refs: &[&machineos_image::ImageRef],
    ) -> anyhow::Result<Option<machineos_registry::Registry>> {
        if !refs
            .iter()
            .any(|r| matches!(r, machineos_image::ImageRef::Registry(_)))
        {
            return Ok(None);
        }
        Ok(Some(machineos_registry::Registry::new(self.options()?)?))
    }

    /// The auth files credentials are read from, in order (see `--authfile`).
    pub fn auth_candidates(&self) -> Vec<PathBuf> {
        auth_file_candidates(self.authfile.as_deref(), &AuthEnv::from_process_env())
    }

    /// What buildah needs of these arguments to reach registries as machineos does.
    pub fn buildah_access(&self) -> machineos_pipeline::buildah::RegistryAccess {
        machineos_pipeline::buildah::RegistryAccess {
            auth_candidates: self.auth_candidates(),
            ca_files: self.ca_files.clone(),
            insecure_registries: self.insecure_registries.clone(),
        }
    }

    /// The registry options these arguments describe. Auth files are named here and read
    /// when a registry is contacted; CA files are read now.
    pub fn options(&self) -> anyhow::Result<RegistryOptions> {
        let candidates =
            auth_file_candidates(self.authfile.as_deref(), &AuthEnv::from_process_env());
        if let Some(explicit) = &self.authfile
            && !explicit.is_file()
        {
            anyhow::bail!("--authfile {}: no such file", explicit.display());
        }
        let ca_pems = self
            .ca_files
            .iter()
            .map(|f| std::fs::read(f).with_context(|| format!("--ca-file {}", f.display())))
            .collect::<anyhow::Result<_>>()?;
        let positive = |flag: &str, secs: u64| {
            if secs == 0 {
                anyhow::bail!("{flag}: must be at least 1 second");
            }
            Ok(Duration::from_secs(secs))
        };
        Ok(RegistryOptions {
            ca_pems,
            insecure_hosts: self.insecure_registries.clone(),
            credentials: CredentialSource::Files(candidates),
            timeouts: Timeouts {
                connect: positive("--connect-timeout", self.connect_timeout)?,
                request: positive("--request-timeout", self.request_timeout)?,
                total: (self.registry_deadline > 0)
                    .then(|| Duration::from_secs(self.registry_deadline)),
            },
            ..RegistryOptions::default()
        })
    }
}
