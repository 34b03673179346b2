//! Test harness: real registries on loopback, a fault-injecting proxy, skopeo and umoci helpers.
//!
//! Integration tests of the registry, publish and image crates need a real OCI registry to
//! talk to, a way to make that registry misbehave on cue, reference tools (`skopeo`, `umoci`)
//! to cross-check what was pushed, and a way to compare unpacked root filesystems. This crate
//! bundles those pieces; it is never shipped.
//!
//! - [`TestRegistry`]: a CNCF distribution (`docker-registry`) process on `127.0.0.1`, with
//!   optional htpasswd auth and TLS signed by a per-registry CA; killed on drop.
//! - [`FaultProxy`]: an HTTP/1 reverse proxy that injects statuses, delays and connection
//!   resets according to [`FaultRule`]s, and records every request.
//! - [`tools`]: `skopeo`, `umoci` and `buildah` runners that fail with the tool's stderr.
//! - [`tree`]: snapshots and diffs of directory trees.

pub mod proxy;
pub mod registry;
pub mod tools;
pub mod tree;

pub use proxy::{FaultAction, FaultProxy, FaultRule, SeenRequest};
pub use registry::{RegistryOptions, TestRegistry};
pub use tools::{
    BuildahRoot, CopyOptions, buildah_mount, require_tool, skopeo, skopeo_copy, skopeo_inspect_raw,
    umoci, umoci_unpack,
};
pub use tree::{EntryKind, TreeEntry, diff, snapshot, try_snapshot};
