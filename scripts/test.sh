#!/usr/bin/env bash
# The test command: installs what the tests need when it is missing (Debian's ignition,
# the differential reference; docker-registry, which the registry tests start on loopback;
# skopeo, umoci and buildah, which check what we push and build), then runs the whole
# workspace's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[ -x /usr/lib/dracut/modules.d/30ignition/ignition ] || missing+=(ignition)
command -v umoci >/dev/null || missing+=(umoci)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v buildah >/dev/null || missing+=(buildah)
command -v systemctl >/dev/null || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
cargo test --workspace --locked
