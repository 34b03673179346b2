#!/usr/bin/env bash
# Build the machineos container image — `machineos controller`, `machineos agent` and the
# tools the build pods and the agent run (buildah, nsenter) — from Debian packages and a
# machineos binary, with buildah. No Docker daemon, no base image from a registry.
#
#   bash scripts/image.sh                      # cargo build --release, then the image
#   bash scripts/image.sh --tag registry.example.com/infra/machineos:v0.1.0 --push
#
# Steps: a minimal Debian root filesystem with buildah, util-linux (nsenter),
# ca-certificates and uidmap, the build pods' user `build` (uid 1000, subordinate ids
# 100000–165535), made by mmdebstrap from the Debian mirror in /etc/apt (the one step that
# needs the network; `--rootfs-only FILE` stops after it, `--rootfs FILE` reuses one); then
# `buildah from scratch`, the root filesystem and the binary added, the entrypoint
# `machineos`, committed with every timestamp at SOURCE_DATE_EPOCH (default: the last
# commit's time), so the same inputs give the same image.
#
# Options:
#   --binary PATH      the machineos binary (default: target/release/machineos, built if missing)
#   --tag NAME         the image name (default: localhost/machineos:<version>)
#   --suite SUITE      the Debian release (default: this machine's, else bookworm)
#   --rootfs FILE      use this root filesystem tarball instead of running mmdebstrap
#   --rootfs-only FILE only make the root filesystem tarball, at FILE
#   --push             push NAME to its registry after the commit (buildah push)
# Environment: BUILDAH (default `buildah`; e.g. `buildah --root DIR --runroot DIR
# --storage-driver vfs` for a private store), SOURCE_DATE_EPOCH.
#
# Deploy it with kustomize's `images:` (deploy/README.md, "Use another image").
set -euo pipefail
cd "$(dirname "$0")/.."

binary=
tag=
suite=
rootfs=
rootfs_only=
push=
while [[ $# -gt 0 ]]; do
  case $1 in
  --binary) binary=$2; shift ;;
  --tag) tag=$2; shift ;;
  --suite) suite=$2; shift ;;
  --rootfs) rootfs=$2; shift ;;
  --rootfs-only) rootfs_only=$2; shift ;;
  --push) push=1 ;;
  -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
  *) echo "image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
export SOURCE_DATE_EPOCH
if [[ -z $suite ]]; then
  suite=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
  suite=${suite:-bookworm}
fi

make_rootfs() { # FILE
  command -v mmdebstrap >/dev/null || {
    echo "image.sh: mmdebstrap is needed for the root filesystem (apt-get install mmdebstrap)" >&2
    exit 1
  }
  local mode=unshare
  [[ $(id -u) == 0 ]] && mode=root
  echo "image.sh: Debian $suite root filesystem with buildah, util-linux, ca-certificates, uidmap → $1" >&2
  # The build Jobs' pods run as uid 1000 `build` with rootless buildah: the user, its
  # subordinate uid/gid ranges, and newuidmap/newgidmap (uidmap).
  mmdebstrap --quiet --mode="$mode" --variant=essential \
    --include=buildah,util-linux,ca-certificates,uidmap,passwd \
    --customize-hook='chroot "$1" useradd --uid 1000 --user-group --create-home --home-dir /home/build --shell /bin/sh build' \
    --customize-hook='echo build:100000:65536 >"$1/etc/subuid"; echo build:100000:65536 >"$1/etc/subgid"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$1"
}

if [[ -n $rootfs_only ]]; then
  make_rootfs "$rootfs_only"
  exit 0
fi

if [[ -z $binary ]]; then
  binary=target/release/machineos
  [[ -x $binary ]] || cargo build --release --locked -p machineos
fi
[[ -x $binary ]] || { echo "image.sh: $binary is not an executable" >&2; exit 1; }
tag=${tag:-localhost/machineos:$version}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -z $rootfs ]]; then
  rootfs=$tmp/rootfs.tar
  make_rootfs "$rootfs"
fi

read -r -a bh <<<"${BUILDAH:-buildah}"
ctr=$("${bh[@]}" from --quiet scratch)
trap '"${bh[@]}" rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
"${bh[@]}" add --quiet "$ctr" "$rootfs" /
"${bh[@]}" copy --quiet --chmod 0755 "$ctr" "$binary" /usr/bin/machineos
"${bh[@]}" config \
  --entrypoint '["/usr/bin/machineos"]' --cmd '' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --label org.opencontainers.image.title=machineos \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.description="machineos: layered OS images for Kubernetes nodes (controller, agent, build tools)" \
  --label io.machineos.debian-suite="$suite" \
  "$ctr"
"${bh[@]}" commit --quiet --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "$tag" >/dev/null
echo "image.sh: built $tag" >&2
if [[ -n $push ]]; then
  "${bh[@]}" push "$tag"
fi
echo "$tag"
