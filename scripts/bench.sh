#!/usr/bin/env bash
# The benchmark command: installs what it needs when it is missing (the registry, skopeo and
# umoci, buildah, fuse-overlayfs (case (d)'s fallback where kernel overlayfs cannot mount),
# Debian's ignition, GNU time; apt needs root, and so does buildah's chroot isolation),
# builds the release binaries, and runs `xtask bench`, which prints the markdown report on
# stdout and writes it to target/bench/report.md. Arguments go to `xtask bench` (e.g.
# `--reps 9 --buildah-reps 3`, `--skip-buildah`, `--skip-mco-buildah`); see bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[ -x /usr/lib/dracut/modules.d/30ignition/ignition ] || missing+=(ignition)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v umoci >/dev/null || missing+=(umoci)
command -v buildah >/dev/null || missing+=(buildah)
[ -x /usr/bin/fuse-overlayfs ] || missing+=(fuse-overlayfs)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
cargo build --release --locked -p machineos -p xtask
exec "${CARGO_TARGET_DIR:-target}/release/xtask" bench "$@"
