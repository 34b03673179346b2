#!/usr/bin/env bash
# The whole cluster side on this machine, without a cluster: the test API server
# (kubetest serve), a loopback registry (Debian's docker-registry) holding a synthetic
# CoreOS-shaped base image, `machineos controller`, and a dozen simulated nodes — each a
# `machineos agent --host fake` whose reboots happen in process. It applies a pool, a
# MachineConfig and a MachineOSConfig with kubectl, shows the build, the MachineOSBuild's
# conditions, the rollout plan, and the nodes moving batch by batch onto the built image.
# Then what a change costs: with the cluster's MachineConfiguration saying /etc/motd needs
# nothing, a change to it moves every node at once with no cordon and no reboot (applied to
# the running node); a new file no policy covers, and a kernel argument, reboot each node,
# maxUnavailable at a time; a newer base whose kernel is the same soft-reboots each node
# (decided by the two images' measured difference).
# Each rollout's time and its node-seconds out of service (cordoned or NotReady, sampled about
# every 0.5 s) are printed side by side.
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

# Follow a rollout onto $1 until every node runs it; prints the moves as they change, then
# sets $elapsed (seconds) and $out_of_service (node-seconds cordoned or NotReady: each
# sample's count times the time since the previous sample).
follow() {
  local img=$1 start prev now last line down_ns=0 down
  start=$(date +%s%N)
  prev=$start
  last=""
  while :; do
    line=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.metadata.annotations.machineconfiguration\.openshift\.io/state}{"|"}{.metadata.annotations.machineconfiguration\.openshift\.io/currentImage}{"|"}{.metadata.annotations.machineconfiguration\.openshift\.io/desiredImage}{"|"}{.spec.unschedulable}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
      awk -F'|' -v img="$img" '
        { if ($5 == "true" || $6 != "True") down++
          if ($3 == img && $2 == "Done" && $5 != "true") done++; else if ($4 == img) moving = moving " " $1 "(" $2 ")" }
        END { printf "%d|updated %d/%d |%s", down, done, NR, (moving == "" ? " -" : moving) }')
    down=${line%%|*}
    line=${line#*|}
    now=$(date +%s%N)
    down_ns=$((down_ns + down * (now - prev)))
    prev=$now
    if [ "$line" != "$last" ]; then
      printf '%6ss %s\n' "$(awk -v ns="$(( $(date +%s%N) - start ))" 'BEGIN { printf "%.1f", ns / 1e9 }')" "$line"
      last=$line
    fi
    case $line in "updated $nodes/$nodes "*) break ;; esac
    if [ $(( ($(date +%s%N) - start) / 1000000000 )) -gt 300 ]; then echo "cluster-demo: the rollout did not finish; see $work/*.log" >&2; exit 1; fi
    sleep 0.5
  done
  elapsed=$(awk -v ns="$(( $(date +%s%N) - start ))" 'BEGIN { printf "%.1f", ns / 1e9 }')
  out_of_service=$(awk -v ns="$down_ns" 'BEGIN { printf "%.1f", ns / 1e9 }')
}

# Wait for the MachineOSConfig's current image to differ from $1; prints it.
next_image() {
  local img
  for _ in $(seq 1 600); do
    img=$(kubectl get machineosconfig worker -o jsonpath='{.status.currentImagePullSpec}')
    if [ -n "$img" ] && [ "$img" != "$1" ]; then echo "$img"; return; fi
    sleep 0.2
  done
  echo "cluster-demo: no new image was built; see $work/controller.log" >&2
  exit 1
}

boot_ids() { kubectl get nodes -o jsonpath='{range .items[*]}{.status.nodeInfo.bootID}{" "}{end}'; }

say "kubectl patch mcp worker: unpause; the nodes move batch by batch"
kubectl patch mcp worker --type=merge -p '{"spec":{"paused":false}}' >/dev/null
follow "$image"
first_elapsed=$elapsed first_down=$out_of_service

say "the result (once the last nodes have soaked: --min-ready-seconds 2)"
kubectl wait mcp/worker --for=condition=Updated --timeout=60s
kubectl get mcp worker -o custom-columns='NAME:.metadata.name,MACHINES:.status.machineCount,UPDATED:.status.updatedMachineCount,UNAVAILABLE:.status.unavailableMachineCount,DEGRADED:.status.degradedMachineCount,UPDATED?:.status.conditions[?(@.type=="Updated")].status'
kubectl get machineconfignodes
kubectl get machineosimages

say "what a change costs: the cluster's MachineConfiguration says /etc/motd needs nothing"
# `machineos crds` installed its CRD (operator.openshift.io/v1, as OpenShift serves it).
kubectl apply -f - <<EOF
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster}
spec:
  nodeDisruptionPolicy:
    files:
      - path: /etc/motd
        actions: [{type: None}]
EOF
sleep 31  # the controller reads the policies at most every 30 s

say "an /etc/motd change: planned (the pool paused), then moved live"
boots_before=$(boot_ids)
kubectl patch mcp worker --type=merge -p '{"spec":{"paused":true}}' >/dev/null
kubectl patch mc 50-worker-motd --type=json \
  -p '[{"op":"replace","path":"/spec/config/storage/files/0/contents/source","value":"data:,changed%20live%0A"}]' >/dev/null
live_image=$(next_image "$image")
"$bin/machineos" rollout plan --pool worker
kubectl patch mcp worker --type=merge -p '{"spec":{"paused":false}}' >/dev/null
follow "$live_image"
live_elapsed=$elapsed live_down=$out_of_service
if [ "$boots_before" = "$(boot_ids)" ]; then echo "no node rebooted (boot ids unchanged)"; else echo "boot ids changed"; fi
echo "reboot pending (the image boots at the next reboot) on $(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.annotations.machineos\.io/reboot-pending}{"\n"}{end}' | grep -c .) nodes"

say "a new file no policy covers (/etc/chrony.conf): the MCO's default, a reboot per node"
kubectl apply -f - >/dev/null <<EOF
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 51-worker-chrony
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - path: /etc/chrony.conf
          mode: 420
          contents: {source: "data:,server%20time.example.com%20iburst%0A"}
EOF
reboot_image=$(next_image "$live_image")
follow "$reboot_image"
reboot_elapsed=$elapsed reboot_down=$out_of_service

say "a kernel argument (nosmt): always a reboot, each node once"
kubectl apply -f - >/dev/null <<EOF
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 52-worker-nosmt
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  kernelArguments: [nosmt]
EOF
kargs_image=$(next_image "$reboot_image")
follow "$kargs_image"
kargs_elapsed=$elapsed kargs_down=$out_of_service

say "a newer base whose kernel is the same (one more file under /usr): a soft reboot per node"
printf '#!/bin/sh\n' > "$work/new-tool"
chmod 755 "$work/new-tool"
"$bin/machineos-synth" --out "$work/base2" --tag latest --profile example \
  --extra-file "$work/new-tool:/usr/bin/new-tool" >/dev/null 2>&1
skopeo copy --quiet --dest-tls-verify=false "oci:$work/base2:latest" "docker://$registry/base/os:2"
kubectl patch mcp worker --type=merge -p '{"spec":{"paused":true}}' >/dev/null
kubectl patch configmap machine-config-osimageurl -n machineos --type=merge \
  -p "{\"data\":{\"baseOSContainerImage\":\"$registry/base/os:2\"}}" >/dev/null
base_image=$(next_image "$kargs_image")
# The controller compares the new image with the one the nodes run (status.changes), and the
# rollout decides the move by that difference: wait for it, then show the plan.
for _ in $(seq 1 300); do
  class=$(kubectl get machineosimages -o jsonpath="{range .items[?(@.spec.image==\"$base_image\")]}{.status.changes.pathClass}{end}")
  [ -n "$class" ] && break
  sleep 0.2
done
kubectl get machineosimages -o jsonpath="{range .items[?(@.spec.image==\"$base_image\")]}changes from {.status.changes.from}: {.status.changes.added} added, {.status.changes.modified} modified, {.status.changes.removed} removed, kernel changed {.status.changes.kernelChanged}, the paths need {.status.changes.pathClass}{\"\\n\"}{end}"
boots_before=$(boot_ids)
"$bin/machineos" rollout plan --pool worker
kubectl patch mcp worker --type=merge -p '{"spec":{"paused":false}}' >/dev/null
follow "$base_image"
base_elapsed=$elapsed base_down=$out_of_service
if [ "$boots_before" = "$(boot_ids)" ]; then echo "no node rebooted its kernel (boot ids unchanged)"; else echo "boot ids changed"; fi

say "what each change cost ($nodes nodes, maxUnavailable $max_unavailable, a simulated reboot keeps a node down 1 s)"
printf '%-32s %-7s %9s %28s\n' change class seconds "node-seconds out of service"
printf '%-32s %-7s %9s %28s\n' "first image (no currentConfig)" Reboot "$first_elapsed" "$first_down"
printf '%-32s %-7s %9s %28s\n' "/etc/motd, policy None" None "$live_elapsed" "$live_down"
printf '%-32s %-7s %9s %28s\n' "/etc/chrony.conf, no policy" Reboot "$reboot_elapsed" "$reboot_down"
printf '%-32s %-7s %9s %28s\n' "kernel argument nosmt" Reboot "$kargs_elapsed" "$kargs_down"
printf '%-32s %-7s %9s %28s\n' "newer base, same kernel" SoftReboot "$base_elapsed" "$base_down"
