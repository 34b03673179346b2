#!/usr/bin/env bash
# What building every architecture costs against building one: a four-architecture synthetic
# base (bench-100m per platform: 40 layers, 60 000 files, as an OCI index) and the example
# MachineConfigs, built into an OCI layout by the release binary:
#   cold: no base index cache — `--platform linux/amd64` indexes one base, `--platform all`
#         indexes four (concurrently);
#   warm: the indexes cached — the same two builds again, RUNS times each, alternated.
# Prints the median wall time of each case (ms) and the ratios all/one. Timings are noisy
# here: the ratios, taken side by side in one run, are the figures. Needs ~2 GiB in WORK.
# Usage: scripts/multiarch-bench.sh [WORK_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
runs=${2:-7}
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p machineos -p machineos-synth >&2
mkdir -p "$work"
if [ ! -e "$work/base/index.json" ]; then
  "$target/release/machineos-synth" --out "$work/base" --tag latest --profile bench-100m \
    --four-arch >/dev/null
fi
ms() { # run the command, print its wall time in ms
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
build() { # PLATFORM CACHE-FLAG...
  local platform=$1
  shift
  "$target/release/machineos" build --base "oci:$work/base:latest" \
    --output "oci:$work/out:$(echo "$platform" | tr '/,' '--')" --platform "$platform" "$@" \
    examples/machineconfigs
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cache="$work/cache"
rm -rf "$cache"
cold_one=$(ms build linux/amd64 --cache-dir "$cache/one")
cold_all=$(ms build all --cache-dir "$cache/all")
one=()
all=()
for _ in $(seq "$runs"); do
  one+=("$(ms build linux/amd64 --cache-dir "$cache/all")")
  all+=("$(ms build all --cache-dir "$cache/all")")
done
warm_one=$(printf '%s\n' "${one[@]}" | median)
warm_all=$(printf '%s\n' "${all[@]}" | median)
awk -v a="$cold_one" -v b="$cold_all" \
  'BEGIN {printf "cold: one platform %d ms, four platforms %d ms, ratio %.2f\n", a, b, b / a}'
awk -v n="$runs" -v a="$warm_one" -v b="$warm_all" \
  'BEGIN {printf "warm (median of %d): one platform %d ms, four platforms %d ms, ratio %.2f\n", n, a, b, b / a}'
