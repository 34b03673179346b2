//! Registry transport for machineos: read base images and publish derived ones over the
//! distribution API, with bounded retries, credentials per repository, extra CAs, an
//! explicit plain-HTTP policy, timeouts, a total deadline, and a cap on every response read
//! into memory; and, for a controller, resolve what a reference names
//! ([`Registry::image_info`], absent being an answer) and delete a manifest by digest
//! ([`Registry::delete_manifest`], already gone or deletes disabled being outcomes).
//!
//! [`RegistryError`] and [`TransportError`] implement [`machineos_diagnostics::Classify`]
//! the way the retry loop decides: throttling, server errors, broken connections, timeouts
//! and the total deadline are transient; refusals, missing objects, wrong digests, oversized
//! or unreadable answers and a bad setup are permanent. An error's message carries its
//! cause; none is also its `source()`.

pub mod auth;
mod client;
pub mod http;
mod retry;
mod scheme;
pub mod stream;

pub use client::{
    CredentialSource, DeleteOutcome, ImageInfo, MAX_CONFIG, MONOLITHIC_MAX, Missing, PullAccess,
    PushCheck, Registry, RegistryError, RegistryOptions,
};
pub use http::{MAX_MANIFEST, Timeouts, TransportError};
pub use retry::RetryPolicy;
pub use scheme::Scheme;
