#!/usr/bin/env bash
# The checks that run before the tests (in CI too): formatting, clippy with every warning an
# error (the workspace's lints are at deny), rustdoc with warnings as errors, and no unused
# dependency (cargo-machete, installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
judge=(--manifest-path testing/machineos-ostree-judge/Cargo.toml)
cargo fmt "${judge[@]}" --all --check
cargo clippy "${judge[@]}" --all-targets --locked --target-dir target/ostree-judge -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked
if ! command -v cargo-machete >/dev/null; then
  cargo install cargo-machete --locked --version 0.9.2
fi
cargo machete
