#!/usr/bin/env bash
# The main job on the embedded default: generate the small example base image (a
# deterministic CoreOS-shaped OCI layout, target/example-base), render the example
# MachineConfigs for pool "worker", build the layered image into the OCI layout
# ./machineos-out (tag "worker"), and describe the result. Needs only cargo: no registry,
# no container runtime, no privileges.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "building the release binaries (the first build compiles ~280 crates: a few minutes; later runs: seconds)" >&2
cargo build --release -p machineos -p machineos-synth
bin=target/release
$bin/machineos-synth --out target/example-base --tag latest --profile example >/dev/null
cache=target/machineos-cache
echo "== cold build (indexes the base, fills $cache)" >&2
$bin/machineos build --base oci:target/example-base:latest --output oci:machineos-out:worker \
  --cache-dir "$cache" --layer-out machineos-out-layer.tar \
  --pool worker examples/machineconfigs
echo "== warm build (reads no base layer)" >&2
$bin/machineos build --base oci:target/example-base:latest --output oci:machineos-out:worker \
  --cache-dir "$cache" -o json --pool worker examples/machineconfigs
echo "== machineos inspect oci:machineos-out:worker" >&2
$bin/machineos inspect oci:machineos-out:worker
echo "== the added layer (machineos-out-layer.tar)" >&2
tar -tvf machineos-out-layer.tar --numeric-owner
