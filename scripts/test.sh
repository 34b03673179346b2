#!/usr/bin/env bash
# The test command: installs what the tests need when it is missing (Debian's ignition,
# the differential reference; docker-registry, which the registry tests start on loopback;
# skopeo, umoci and buildah, which check what we push and build; ostree and the C libraries
# the ostree-ext judge links against, which imports and deploys our images as nodes do;
# kubectl, which judges the test API server — preinstalled, Debian's 1.20 a last resort;
# busybox-static, the coreutils of the stub base machineos-synth builds for RUN steps;
# promtool, from the prometheus package, which checks and unit-tests the shipped alerts;
# mmdebstrap, which makes the machineos image's Debian root filesystem once — the one step
# here that reaches the Debian mirror — for tests/image.rs), then runs the whole
# workspace's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[ -x /usr/lib/dracut/modules.d/30ignition/ignition ] || missing+=(ignition)
[ -x /bin/busybox ] || missing+=(busybox-static)
command -v umoci >/dev/null || missing+=(umoci)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v buildah >/dev/null || missing+=(buildah)
command -v systemctl >/dev/null || missing+=(systemd)
command -v ostree >/dev/null || missing+=(ostree)
pkg-config --exists ostree-1 2>/dev/null || missing+=(libostree-dev libglib2.0-dev libgpgme-dev)
pkg-config --exists libzstd 2>/dev/null || missing+=(libzstd-dev)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v kubectl >/dev/null || missing+=(kubernetes-client)
command -v promtool >/dev/null || missing+=(prometheus)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
# The image's root filesystem (scripts/image.sh), made once and kept under target/.
export MACHINEOS_IMAGE_ROOTFS=${MACHINEOS_IMAGE_ROOTFS:-$PWD/target/image-rootfs.tar}
if [ ! -s "$MACHINEOS_IMAGE_ROOTFS" ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$(dirname "$MACHINEOS_IMAGE_ROOTFS")"
  bash scripts/image.sh --rootfs-only "$MACHINEOS_IMAGE_ROOTFS"
fi
cargo test --workspace --locked
# The ostree-ext judge is a workspace of its own (see its Cargo.toml).
cargo test --locked --manifest-path testing/machineos-ostree-judge/Cargo.toml \
  --target-dir target/ostree-judge
