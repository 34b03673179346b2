#!/usr/bin/env bash
# The whole cluster side on this machine, without a cluster: the test API server
# (kubetest serve), a loopback registry (Debian's docker-registry) holding a synthetic
# CoreOS-shaped base image, `machineos controller`, and a dozen simulated nodes — each a
# `machineos agent --host fake` whose reboots happen in process. It applies a pool, a
# MachineConfig and a MachineOSConfig with kubectl, shows the build, the MachineOSBuild's
# conditions, the rollout plan, and the nodes moving batch by batch onto the built image.
#
# Needs: cargo, kubectl, docker-registry, skopeo (apt-get install -y docker-registry skopeo).
# Everything listens on 127.0.0.1 and is stopped on exit. NODES=12 MAX_UNAVAILABLE=3.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-12}
max_unavailable=${MAX_UNAVAILABLE:-3}
for tool in kubectl docker-registry skopeo; do
  command -v "$tool" >/dev/null || { echo "cluster-demo: $tool is missing (apt-get install -y docker-registry skopeo; kubectl)" >&2; exit 1; }
done
echo "building the release binaries (the first build compiles ~280 crates: a few minutes; later runs: seconds)" >&2
cargo build --release -p machineos -p machineos-synth -p machineos-kubetest
bin=$PWD/target/release
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

say "the test API server and a loopback registry"
"$bin/kubetest" serve --port 0 --kubeconfig-out "$work/kubeconfig" < <(sleep infinity) > "$work/kubetest.url" &
pids+=($!)
until [ -s "$work/kubeconfig" ]; do sleep 0.1; done
export KUBECONFIG=$work/kubeconfig
port=$(free_port)
registry=127.0.0.1:$port
cat > "$work/registry.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/registry}, delete: {enabled: true}}
http: {addr: "$registry", secret: demo}
EOF
docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
pids+=($!)
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.1; done
echo "API server $(cat "$work/kubetest.url"), registry $registry"
"$bin/machineos-synth" --out "$work/base" --tag latest --profile example >/dev/null 2>&1
skopeo copy --quiet --dest-tls-verify=false "oci:$work/base:latest" "docker://$registry/base/os:latest"
echo "base image $registry/base/os:latest"

say "CRDs, namespace, push secret, base image ConfigMap"
"$bin/machineos" crds | kubectl apply -f - >/dev/null
kubectl create namespace machineos
kubectl create secret docker-registry push-secret -n machineos --docker-server="$registry" \
  --docker-username=demo --docker-password=demo
kubectl create configmap machine-config-osimageurl -n machineos \
  --from-literal=baseOSContainerImage="$registry/base/os:latest"

say "$nodes nodes in 3 zones, each with a simulated machine (machineos agent --host fake)"
for i in $(seq 0 $((nodes - 1))); do
  name=$(printf 'worker-%02d' "$i")
  zone=zone-$(printf '%s' abc | cut -c$((i % 3 + 1)))
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {node-role.kubernetes.io/worker: "", topology.kubernetes.io/zone: $zone, kubernetes.io/hostname: $name}
EOF
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  kubectl patch node "$name" --subresource=status --type=merge -p \
    "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"demo\",\"lastHeartbeatTime\":\"$now\",\"lastTransitionTime\":\"$now\"}]}}" >/dev/null
  MACHINEOS_LOG=warn "$bin/machineos" agent --host fake --node "$name" --namespace machineos \
    --drain-retry 1s > "$work/agent-$name.log" 2>&1 &
  pids+=($!)
done
kubectl get nodes -L topology.kubernetes.io/zone

say "machineos controller"
MACHINEOS_LOG=warn "$bin/machineos" controller --namespace machineos --no-leader-election --no-listen \
  --insecure-registry "$registry" --cache-dir "$work/cache" --min-ready-seconds 2 > "$work/controller.log" 2>&1 &
pids+=($!)

say "kubectl apply: pool worker (paused, maxUnavailable $max_unavailable), a MachineConfig, a MachineOSConfig"
kubectl apply -f - <<EOF
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: worker}
spec:
  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: worker}}
  nodeSelector: {matchLabels: {node-role.kubernetes.io/worker: ""}}
  maxUnavailable: $max_unavailable
  paused: true
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-worker-motd
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - path: /etc/motd
          mode: 420
          contents: {source: "data:,built%20by%20machineos%0A"}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata: {name: worker}
spec:
  machineConfigPool: {name: worker}
  imageBuilder: {imageBuilderType: Native}
  renderedImagePushSecret: {name: push-secret}
  renderedImagePushSpec: $registry/machineos/worker:latest
EOF

say "the build"
for _ in $(seq 1 300); do
  build=$(kubectl get machineosbuilds -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
  [ -n "$build" ] && break
  sleep 0.2
done
kubectl wait "machineosbuild/$build" --for=condition=Succeeded --timeout=120s
kubectl get machineosbuilds
kubectl get machineosbuild "$build" \
  -o custom-columns='TYPE:.status.conditions[*].type,STATUS:.status.conditions[*].status'
for _ in $(seq 1 100); do
  image=$(kubectl get machineosconfig worker -o jsonpath='{.status.currentImagePullSpec}')
  [ -n "$image" ] && break
  sleep 0.2
done
echo "image: $image"

say "machineos rollout plan --pool worker (the pool is still paused: nothing has moved)"
"$bin/machineos" rollout plan --pool worker

say "kubectl patch mcp worker: unpause; the nodes move batch by batch"
kubectl patch mcp worker --type=merge -p '{"spec":{"paused":false}}' >/dev/null
start=$(date +%s)
last=""
while :; do
  line=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.metadata.annotations.machineconfiguration\.openshift\.io/state}{"|"}{.metadata.annotations.machineconfiguration\.openshift\.io/currentImage}{"|"}{.metadata.annotations.machineconfiguration\.openshift\.io/desiredImage}{"|"}{.spec.unschedulable}{"\n"}{end}' |
    awk -F'|' -v img="$image" '
      { if ($3 == img && $2 == "Done" && $5 != "true") done++; else if ($4 == img) moving = moving " " $1 "(" $2 ")" }
      END { printf "updated %d/%d |%s", done, NR, (moving == "" ? " -" : moving) }')
  if [ "$line" != "$last" ]; then
    printf '%4ss %s\n' "$(( $(date +%s) - start ))" "$line"
    last=$line
  fi
  case $line in "updated $nodes/$nodes "*) break ;; esac
  if [ $(( $(date +%s) - start )) -gt 300 ]; then echo "cluster-demo: the rollout did not finish; see $work/*.log" >&2; exit 1; fi
  sleep 0.5
done

say "the result (once the last nodes have soaked: --min-ready-seconds 2)"
kubectl wait mcp/worker --for=condition=Updated --timeout=60s
kubectl get mcp worker -o custom-columns='NAME:.metadata.name,MACHINES:.status.machineCount,UPDATED:.status.updatedMachineCount,UNAVAILABLE:.status.unavailableMachineCount,DEGRADED:.status.degradedMachineCount,UPDATED?:.status.conditions[?(@.type=="Updated")].status'
kubectl get machineconfignodes
kubectl get machineosimages
