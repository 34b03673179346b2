# The build pod's script (machineos-buildrequest `objects::job`; run as `bash -c`).
#
# Inputs (environment, set by the Job): TAG, CONTAINERFILE_DIR, MACHINECONFIG_DIR, MC_PARTS,
# CONTEXT_DIR, PULL_AUTHFILE, PUSH_AUTHFILE, TERMINATION_LOG (and BUILDAH_ISOLATION,
# STORAGE_DRIVER, HOME for buildah itself).
#
# 1. Lays out the build context: $CONTEXT_DIR/Containerfile and
#    $CONTEXT_DIR/machineconfig/machineconfig.json.gz (base64 of gzip: the MCO's build
#    context; the Containerfile starts FROM the native image and does not read it). A
#    MachineConfig split across MC_PARTS > 1 ConfigMaps is reassembled here: the parts
#    machineconfig.json.gz.part0 .. part<N-1> concatenated in that order (a missing part
#    fails the build, naming it).
# 2. buildah bud with PULL_AUTHFILE, the merged pull Secret (the push credentials read the
#    native image, the base pull credentials the extensions image), then buildah push with
#    PUSH_AUTHFILE --digestfile "$TERMINATION_LOG": on success the
#    container's termination message is exactly the pushed digest (sha256:<64 hex>).
#    On failure nothing is written there, so the kubelet's FallbackToLogsOnError makes the
#    termination message the last lines of this script's output.
set -euo pipefail

log() { printf 'machineos-build: %s\n' "$*" >&2; }

mkdir -p "$CONTEXT_DIR/machineconfig"
cp "$CONTAINERFILE_DIR/Containerfile" "$CONTEXT_DIR/Containerfile"
mc="$CONTEXT_DIR/machineconfig/machineconfig.json.gz"
if [[ "$MC_PARTS" == 1 ]]; then
	cp "$MACHINECONFIG_DIR/machineconfig.json.gz" "$mc"
else
	: >"$mc"
	for ((i = 0; i < MC_PARTS; i++)); do
		part="$MACHINECONFIG_DIR/machineconfig.json.gz.part$i"
		if [[ ! -f "$part" ]]; then
			log "part $i of $MC_PARTS of the MachineConfig is missing ($part)"
			exit 1
		fi
		cat "$part" >>"$mc"
	done
	log "reassembled the MachineConfig from $MC_PARTS parts"
fi

log "building $TAG"
buildah bud --storage-driver vfs --authfile "$PULL_AUTHFILE" --tag "$TAG" \
	--file "$CONTEXT_DIR/Containerfile" "$CONTEXT_DIR"

log "pushing $TAG"
buildah push --storage-driver vfs --authfile "$PUSH_AUTHFILE" \
	--digestfile "$TERMINATION_LOG" "$TAG"
log "pushed $TAG@$(cat "$TERMINATION_LOG")"
