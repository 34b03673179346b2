#!/usr/bin/env bash
# What large file contents cost a build: builds the release binaries and runs `xtask
# contents`, which times `machineos build --base-dir` (peak RSS from GNU time) on a config
# holding a gzip bomb and on one holding a large data: URL, and measures the decoding rate.
# Arguments go to `xtask contents` (e.g. `--baseline path/to/older/machineos`,
# `--bomb-mib 512`). Needs about 1 GiB free in target/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/time ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y time
fi
cargo build --release --locked -p machineos -p xtask
exec "${CARGO_TARGET_DIR:-target}/release/xtask" contents "$@"
