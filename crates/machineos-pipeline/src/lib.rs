//! What a build decides — the base, the platforms, the stream, the RUN steps, the
//! intermediate tag — as library code: `machineos build` parses its arguments, calls these
//! and prints; the controller's RUN-step backends share the tag rule.
//!
//! * [`tag`]: the intermediate native image's tag (`<tag>-native`, fitted to a tag's 128
//!   characters) — one rule, `machineos_buildrequest::tag`'s, for the CLI and the
//!   controller — and the CLI's native output reference built on it.
//! * [`platform`]: what `--platform` asks for (one platform, every platform of the base, a
//!   list).
//! * [`base`]: which base each platform builds on (a stream, `--base`, the rendered
//!   `spec.osImageURL`), and which platforms `--platform all` means.
//! * [`stream`]: the base (and extensions image) for each platform from a stream source
//!   (CoreOS stream metadata, an `OSImageStream`, the `machine-config-osimageurl` ConfigMap).
//! * [`runsteps`]: what needs RUN steps and why, what refuses them before anything is
//!   pushed, the Containerfile buildah builds, the extensions image by digest.
//! * [`buildah`]: the local `buildah` runner — private storage, `auth.json`,
//!   `registries.conf`, `buildah bud` and `buildah push`.
//!
//! No command-line types: the binary turns its arguments into plain values
//! ([`buildah::RegistryAccess`], paths, platforms). Error messages name the command
//! line's flags, as `machineos build` reports them.

pub mod base;
pub mod buildah;
pub mod platform;
pub mod runsteps;
pub mod stream;
pub mod tag;

pub use tag::{MAX_TAG_LEN, NATIVE_TAG_SUFFIX, native_output, native_tag};
