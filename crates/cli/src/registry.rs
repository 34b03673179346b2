//! Command-line options for reaching registries (credentials, CAs, plain HTTP), shared by
//! `build` and `inspect`.

use std::path::PathBuf;

use anyhow::Context;
use machineos_image::auth::{AuthEnv, Credentials, auth_file_candidates};
use machineos_registry::RegistryOptions;

/// Registry access options.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// Registry credentials (containers auth.json, docker config.json, or the payload of a
    /// `kubernetes.io/dockerconfigjson` Secret). Defaults to `$REGISTRY_AUTH_FILE`,
    /// `$XDG_RUNTIME_DIR/containers/auth.json`, then `~/.docker/config.json`.
    #[arg(long, value_name = "FILE")]
    authfile: Option<PathBuf>,
    /// A registry (`host[:port]`) that may be reached over plain HTTP when it does not answer
    /// HTTPS. Loopback registries always may. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,
    /// An extra CA certificate (PEM) to trust for registries. Repeatable.
    #[arg(long = "ca-file", value_name = "FILE")]
    ca_files: Vec<PathBuf>,
}

impl RegistryArgs {
    /// The registry options these arguments describe.
    pub fn options(&self) -> anyhow::Result<RegistryOptions> {
        let candidates =
            auth_file_candidates(self.authfile.as_deref(), &AuthEnv::from_process_env());
        if let Some(explicit) = &self.authfile
            && !explicit.is_file()
        {
            anyhow::bail!("--authfile {}: no such file", explicit.display());
        }
        let credentials = Credentials::load(&candidates)?;
        let ca_pems = self
            .ca_files
            .iter()
            .map(|f| std::fs::read(f).with_context(|| format!("--ca-file {}", f.display())))
            .collect::<anyhow::Result<_>>()?;
        Ok(RegistryOptions {
            ca_pems,
            insecure_hosts: self.insecure_registries.clone(),
            credentials,
            ..RegistryOptions::default()
        })
    }
}
