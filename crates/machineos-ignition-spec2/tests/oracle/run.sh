#!/bin/sh
# Builds the oracle (main.go) against an MCO checkout's vendored Go packages and runs it.
#
#   tests/oracle/run.sh VENDOR_DIR [MORE_VENDOR_DIRS...] < cases.json > expected.json
#
# VENDOR_DIR is the `vendor/` directory of a machine-config-operator checkout; further
# directories fill in packages the first lacks. Needs Go 1.19 or later; GOPATH mode, no
# network. Work files go to $ORACLE_WORK (default: a temporary directory).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 VENDOR_DIR [MORE_VENDOR_DIRS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=${ORACLE_WORK:-$(mktemp -d)}
mkdir -p "$work/src/oracle"
for vendor in "$@"; do
    vendor=$(cd "$vendor" && pwd)
    # A tree of symlinks to the vendored files; the first directory to have a file wins.
    cp -rsn "$vendor/." "$work/src/"
done
# go-systemd v22 ranges over an int (Go 1.22); give older Go a plain loop.
opt="$work/src/github.com/coreos/go-systemd/v22/unit/option.go"
if [ -L "$opt" ]; then
    src=$(readlink "$opt")
    rm "$opt"
    sed 's/for i := range length {/for i := 0; i < length; i++ {/' "$src" > "$opt"
fi
cp "$here/main.go" "$work/src/oracle/main.go"
(cd "$work/src/oracle" && GOPATH="$work" GO111MODULE=off GOFLAGS= go build -o "$work/oracle" .)
"$work/oracle"
