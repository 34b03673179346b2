//! Registry transport for machineos: read base images and publish derived ones over the
//! distribution API, with bounded retries, credentials per repository, extra CAs, an
//! explicit plain-HTTP policy, timeouts, a total deadline, and a cap on every response read
//! into memory.

pub mod auth;
pub mod client;
pub mod http;
pub mod retry;
pub mod scheme;
pub mod stream;

pub use client::{CredentialSource, Registry, RegistryError, RegistryOptions};
pub use http::{MAX_MANIFEST, Timeouts, TransportError};
pub use retry::RetryPolicy;
