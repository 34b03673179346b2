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
//! - [`binary`]: the `machineos` binary, for tests that run it inside a (test) build pod.

pub mod binary;
pub mod golden;
pub mod proxy;

/// The capped allocator [`capped_allocator!`] installs.
pub use cap;

/// Installs a capped global allocator in a test binary and defines `fn cap_memory()`, which
/// (once per process) limits the binary's live allocations to what it holds then plus
/// `$headroom` bytes: a test that holds more fails an allocation and aborts, so a memory
/// bound is an assertion, not an observation. Every test of the binary should call
/// `cap_memory()` first.
#[macro_export]
macro_rules! capped_allocator {
    ($headroom:expr) => {
        #[global_allocator]
        static ALLOC: $crate::cap::Cap<std::alloc::System> =
            $crate::cap::Cap::new(std::alloc::System, usize::MAX);

        /// Caps this binary's allocations (see `machineos_testkit::capped_allocator!`).
        fn cap_memory() {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                ALLOC
                    .set_limit(ALLOC.allocated() + $headroom)
                    .expect("set the allocation limit");
            });
        }
    };
}
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

/// A two-worker multi-thread runtime for one test (the size of the machines CI runs on).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
