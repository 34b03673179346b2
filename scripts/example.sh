#!/usr/bin/env bash
# The main job on the embedded default: render the example MachineConfigs for pool
# "worker" and build their layer over the example base root filesystem, into
# ./machineos-out. Needs only cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(bash scripts/example-base.sh target/example-base)
mkdir -p machineos-out
cargo run --quiet --release -p machineos -- build \
  --base-dir "$base" \
  --layer-out machineos-out/layer.tar \
  --blob-out machineos-out/layer.tar.gz \
  -o json --pool worker examples/machineconfigs
echo "layer contents (machineos-out/layer.tar):"
tar -tvf machineos-out/layer.tar --numeric-owner
