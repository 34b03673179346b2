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
//! 4. [`render`](mod@render): order, merge, and name the result `rendered-<pool>-<hash>`.
//!
//! Every error ([`LoadError`], [`DecodeError`], [`SelectError`], [`SelectorError`],
//! [`ValidateError`], [`RenderError`]) implements [`machineos_diagnostics::Classify`]: all are
//! permanent (nothing here does I/O; reading the files is the caller's), with reasons such as
//! `InvalidManifest`, `NoMachineConfigSelected`, `InvalidMachineConfig`, or the Ignition
//! error's own (`InvalidConfig`, `UnsupportedSpecVersion`). Warnings stay typed: a
//! [`RenderWarning`] is the MachineConfig's name and its Ignition
//! [`Warning`](machineos_ignition::Warning).

pub mod load;
pub mod render;
pub mod select;
pub mod validate;

pub use load::{DecodeError, LoadError, Manifests, load_machine_configs, load_manifests};
pub use render::{
    RenderDefaults, RenderError, RenderWarning, Rendered, content_hash, merge_order, render,
    rendered_name,
};
pub use select::{SelectError, Selector, SelectorError, select_for_pool};
pub use validate::{
    Extension, KernelType, ValidMachineConfig, ValidateError, validate_machine_config,
};
