//! Deterministic synthetic CoreOS-like base images, written as OCI layouts.
//!
//! Tests, the README's example run and the benchmarks need a base OS image shaped like
//! Fedora CoreOS, and none can be downloaded. This crate generates one from a [`SynthSpec`]:
//! a layered root filesystem (ostree compat symlinks, `/etc` and `/usr/lib` passwd/group,
//! os-release, vendor systemd units and presets, an enabled unit, setuid binaries, hard
//! links, non-root owners, a kernel under `/usr/lib/modules/<kver>`, firmware, libraries,
//! data), split over layers like an rpm-ostree chunked image, with a final layer that has
//! whiteouts and an opaque directory; plus the OCI config (bootc labels) and manifest, or an
//! index over several platforms. Equal specs give byte-identical blobs, hence the same
//! manifest digest; every pseudo-random choice comes from a seeded SplitMix64.
//!
//! Generation streams: each layer goes tar → sha256 (diff_id) → gzip → the layout's blob
//! writer, file contents are produced block by block, and only metadata is kept in memory.
//!
//! Errors: [`SynthError`] and its parts ([`SpecError`], [`TreeError`], [`LayerError`])
//! implement [`machineos_diagnostics::Classify`] — a bad spec or extra file is permanent,
//! an I/O failure is classified by its kind — and each message carries its cause, which is
//! not exposed again through `source()`.
//!
//! ```no_run
//! use machineos_image::Layout;
//! use machineos_synth::{SynthSpec, write_image};
//!
//! let layout = Layout::create(std::path::Path::new("/tmp/base"))?;
//! let manifest = write_image(&layout, &SynthSpec::example())?;
//! layout.set_tag("latest", &manifest)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The same from the command line, and the full-size benchmark image (the test suite only
//! checks the bench presets' declared parameters). The binary prints the digest on stdout and
//! the stats on stderr; for `bench-1g` they must read `40 layers, 60000 files` and
//! `contents 1024.0 MiB` (≥ 30 layers, ≥ 50 000 files, ≥ 1 GiB). The second-to-last
//! command checks that the two bench presets plan the same tree:
//!
//! ```sh
//! cargo run --release -p machineos-synth -- --out /tmp/base --tag latest
//! cargo run --release -p machineos-synth -- --out /tmp/base-1g --profile bench-1g
//! cargo test --release -p machineos-synth --lib -- --ignored
//! umoci stat --image /tmp/base-1g:latest
//! ```
//!
//! **Variants.** [`SynthSpec::variant`] shapes the tree like Fedora CoreOS (every preset but
//! two), CentOS Stream CoreOS ([`SynthSpec::scos`], profile `scos`) or RHEL CoreOS
//! ([`SynthSpec::rhcos`], profile `rhcos`): os-release and the `/etc/*-release` files, the
//! labels (`com.coreos.osname`, …), passwd/group, the kernel release and one package with
//! its unit differ; see [`SynthVariant`]. The Fedora CoreOS output is what it was before
//! variants existed, byte for byte (the pinned digests check it). [`write_four_arch`]
//! writes an index over `linux/{amd64,arm64,ppc64le,s390x}` of one spec
//! ([`SynthSpec::four_arch`]).
//!
//! **RUN steps.** [`SynthSpec::with_stub_tools`] adds a shell (the host's bash), coreutils
//! (the host's static busybox) and stubs of `rpm-ostree`, `rpm`, `dnf` and `ostree` that record what they are asked, so
//! buildah can run machineos's Containerfile on a synthetic base; [`write_extensions_image`]
//! writes the extensions image it mounts. Such a base depends on the host's binaries
//! (see [`stub`]); `machineos-synth --stub-tools` and `--extensions PKG` from
//! the command line.
//!
//! Speed (release, 2 CPUs): `example` ≈ 0.1 s; `bench-100m` ≈ 2 s; `bench-1g` ≈ 8 s
//! (1 GiB of contents, 1.05 GiB of tar, 0.6 GiB of gzip). The bench presets use gzip
//! level 1: blob size matters less there than generation time.

mod content;
mod image;
mod layer;
mod ostree;
mod rng;
mod spec;
pub mod stub;
mod tree;

pub use image::{
    CREATED, Generated, GeneratedIndex, SynthError, generate, generate_four_arch,
    generate_multi_arch, write_four_arch, write_image, write_multi_arch,
};
pub use layer::LayerError;
pub use spec::{
    DEFAULT_VERSION, ExtraFile, FOUR_ARCHES, MIN_FILES, Profile, RHCOS_VERSION, SCOS_VERSION,
    SpecError, SynthSpec, SynthVariant,
};
pub use stub::{
    APPLETS, BASE_PACKAGES, EXTENSIONS_PACKAGE_LIST, EXTENSIONS_REPO_DIR, HOST_BASH, HOST_BUSYBOX,
    STUB_STATE_DIR, StubError, host_program_files, stub_tool_files, write_extensions_image,
};
pub use tree::TreeError;

/// The file in every generated image whose contents are the image's architecture and a
/// newline (`amd64\n`), so multi-arch consumers can tell which image they unpacked.
pub const ARCH_FILE: &str = "/usr/lib/machineos-synth-arch";
