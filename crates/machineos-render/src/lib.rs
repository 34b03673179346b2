//! Rendering: a pool's MachineConfigs in, one rendered MachineConfig out, by the Machine
//! Config Operator's rules (its `MergeMachineConfigs` and render controller), so an image
//! built from it carries what the MCO would have applied.
//!
//! The steps, each a pure function of bytes and values:
//!
//! 1. [`load`]: parse manifests (YAML, multi-document, `kind: List`, or JSON) into
//!    MachineConfigs and MachineConfigPools, errors naming the file, document and JSON path.
//! 2. [`select`]: the MachineConfigs of a pool — its `machineConfigSelector`, or the role-label
//!    convention when there is no pool manifest.
//! 3. [`validate`]: each MachineConfig on its own — kernelType, extensions, Ignition parse and
//!    validation, file modes — into typed values.
//! 4. [`render`](mod@render): order, merge, and name the result `rendered-<pool>-<hash>` as
//!    the MCO names it ([`go_json`], the spec as Go encodes it).
//! 5. [`diff`](mod@diff): what differs between that and a MachineConfig the MCO rendered.
//!
//! Every error ([`LoadError`], [`DecodeError`], [`SelectError`], [`SelectorError`],
//! [`ValidateError`], [`RenderError`]) implements [`machineos_diagnostics::Classify`]: all are
//! permanent (nothing here does I/O; reading the files is the caller's), with reasons such as
//! `InvalidManifest`, `NoMachineConfigSelected`, `InvalidMachineConfig`, or the Ignition
//! error's own (`InvalidConfig`, `UnsupportedSpecVersion`). Warnings stay typed: a
//! [`RenderWarning`] is the MachineConfig's name and its Ignition
//! [`Warning`](machineos_ignition::Warning).

pub mod diff;
pub mod go_json;
pub mod load;
pub mod render;
pub mod select;
pub mod validate;

pub use diff::{Difference, diff};
pub use load::{DecodeError, LoadError, Manifests, load_machine_configs, load_manifests};
pub use render::{
    MAX_RENDERED_SIZE, RenderDefaults, RenderError, RenderWarning, Rendered, merge_order, render,
    rendered_name,
};
pub use select::{SelectError, Selector, SelectorError, select_for_pool};
pub use validate::{
    Extension, KernelType, ValidMachineConfig, ValidateError, validate_machine_config,
};

/// Why a pool cannot be rendered from a set of manifests: its MachineConfigs cannot be
/// selected, or they do not render.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Selecting the pool's MachineConfigs.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// Rendering them.
    #[error(transparent)]
    Render(#[from] RenderError),
}

impl machineos_diagnostics::Classify for PoolError {
    fn reason(&self) -> &'static str {
        match self {
            PoolError::Select(e) => e.reason(),
            PoolError::Render(e) => e.reason(),
        }
    }

    fn retry(&self) -> machineos_diagnostics::Retry {
        match self {
            PoolError::Select(e) => e.retry(),
            PoolError::Render(e) => e.retry(),
        }
    }
}

/// Renders the pool named `pool` from `manifests`: its MachineConfigs are those the
/// MachineConfigPool of that name among the manifests selects, else those labelled with the
/// role `pool` (see [`select_for_pool`]); then [`render()`], with the pool manifest's
/// `spec.osImageStream.name` when `defaults` names no stream.
pub fn render_pool(
    manifests: &Manifests,
    pool: &str,
    defaults: &RenderDefaults,
) -> Result<Rendered, PoolError> {
    let manifest = manifests
        .pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(pool));
    let selected = select_for_pool(manifest, pool, &manifests.machine_configs)?;
    let mut defaults = defaults.clone();
    if defaults.os_image_stream.is_empty()
        && let Some(stream) = manifest.and_then(|p| p.spec.os_image_stream.as_ref())
    {
        defaults.os_image_stream = stream.name.clone();
    }
    Ok(render(pool, &selected, &defaults)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_diagnostics::Classify;

    const MANIFESTS: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 00-worker
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config: {ignition: {version: 3.4.0}}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-infra
  labels: {machineconfiguration.openshift.io/role: infra}
spec:
  config: {ignition: {version: 3.4.0}}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector:
    matchExpressions:
    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
"#;

    fn sources(r: &Rendered) -> Vec<String> {
        r.source.iter().filter_map(|s| s.name.clone()).collect()
    }

    #[test]
    fn a_pool_renders_what_its_manifest_selects_else_its_role() {
        let m = load_manifests("m.yaml", MANIFESTS.as_bytes()).expect("manifests");
        let d = RenderDefaults::default();
        let infra = render_pool(&m, "infra", &d).expect("infra");
        assert_eq!(sources(&infra), ["00-worker", "50-infra"]);
        let worker = render_pool(&m, "worker", &d).expect("worker");
        assert_eq!(sources(&worker), ["00-worker"]);
        let e = render_pool(&m, "master", &d).expect_err("nothing for master");
        assert_eq!(e.reason(), "NoMachineConfigSelected", "{e}");
    }
}
