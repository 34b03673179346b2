//! Registry transport for machineos: read base images and publish derived ones, on
//! oci-client with bounded retries, credentials per registry, extra CAs and an explicit
//! plain-HTTP policy.

pub mod client;
pub mod retry;
pub mod scheme;

pub use client::{Registry, RegistryError, RegistryOptions};
pub use retry::RetryPolicy;
