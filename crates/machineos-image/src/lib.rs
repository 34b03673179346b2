//! Image references, platforms, manifests and configs, OCI layouts, registry credentials.
//!
//! Every error type implements [`machineos_diagnostics::Classify`]: parse and content errors
//! are permanent; only filesystem errors (of a layout, of an auth file) can be transient, as
//! [`machineos_diagnostics::io_retry`] says. An error's message carries its cause; none is
//! also its `source()`.

pub mod atomic;
pub mod auth;
pub mod config;
pub mod descriptor;
pub mod digest;
pub mod layout;
pub mod manifest;
pub mod platform;
pub mod reference;

pub use auth::{
    AuthEnv, AuthError, AuthFile, Credential, Credentials, Secret, auth_file_candidates,
};
pub use config::{
    ConfigError, ConfigPatch, ImageConfigView, parse_config, patch_config, rfc3339_from_unix,
};
pub use descriptor::{Descriptor, LayerCompression, media_type};
pub use digest::{
    Algorithm, Digest, DigestError, DigestReader, DigestWriter, Hasher, Sha256Reader, Sha256Writer,
    VerifyingReader,
};
pub use layout::{ANNOTATION_REF_NAME, BlobWriter, Layout, LayoutError};
pub use manifest::{
    ImageIndex, ImageManifest, Manifest, ManifestError, derive_manifest, layer_media_type_for,
    parse_manifest,
};
pub use platform::{Platform, PlatformError};
pub use reference::{ImageRef, LayoutRef, RefError, RegistryRef};
