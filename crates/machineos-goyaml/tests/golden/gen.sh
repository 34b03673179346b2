#!/bin/bash
# Regenerates expected.jsonl from cases.jsonl with the Go libraries the MCO vendors.
# Usage: gen.sh MCO_CHECKOUT [DIR...]   (a checkout of openshift/machine-config-operator,
# Go >= 1.19; every DIR/*.cases.jsonl, by default this directory's, gets its
# *.expected.jsonl)
# Nothing of the MCO is copied into this repository: the GOPATH is assembled in a temporary
# directory from the checkout's vendor/ tree (gopkg.in/yaml.v2, github.com/ghodss/yaml,
# github.com/clarketm/json, and Ignition's generated v3_5 types/schema.go for typed specs).
set -euo pipefail
mco=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$gopath/src/gopkg.in" "$gopath/src/github.com/ghodss" "$gopath/src/github.com/clarketm" "$gopath/src/oracle/ign35" "$gopath/src/oracle/cmd"
ln -s "$mco/vendor/gopkg.in/yaml.v2" "$gopath/src/gopkg.in/yaml.v2"
ln -s "$mco/vendor/github.com/ghodss/yaml" "$gopath/src/github.com/ghodss/yaml"
ln -s "$mco/vendor/github.com/clarketm/json" "$gopath/src/github.com/clarketm/json"
ln -s "$mco/vendor/github.com/coreos/ignition/v2/config/v3_5/types/schema.go" "$gopath/src/oracle/ign35/schema.go"
cp "$here/oracle/main.go" "$gopath/src/oracle/cmd/"
(cd "$gopath/src/oracle/cmd" && GO111MODULE=off GOPATH="$gopath" GOCACHE="$gopath/cache" go build -o "$gopath/oracle" .)
shift
for dir in "${@:-$here}"; do
  for f in "$dir"/*.cases.jsonl; do
    "$gopath/oracle" < "$f" > "${f%.cases.jsonl}.expected.jsonl"
  done
done
