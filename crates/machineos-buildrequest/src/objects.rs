//! The per-build objects a RUN-step backend creates, as JSON (`serde_json::Value`), and
//! the mapping of their state back to the build's — the MCO's
//! `buildrequest.go`/`toBuildahPod`/`podToJob` re-done as pure functions, plus the
//! OpenShift Build the MCO's first builder used.
//!
//! * [`names`]: `containerfile-<build>`, `mc-<build>`, `pull-<build>`, `build-<build>`,
//!   fitted to Kubernetes' name limits; the MCO's labels and annotations; owner references.
//! * [`configmaps`]: the Containerfile ConfigMap (the Job's inputs: the user's Containerfile
//!   and the registry CA bundle); the MachineConfig ConfigMap(s), split when over 1 MiB and
//!   refused above 8 parts; [`configmaps::reassemble`] and [`configmaps::from_mounted_keys`]
//!   (what the build pod reads), the inverse.
//! * [`secrets`]: the merged pull Secret `pull-<build>` (the push Secret's and the base pull
//!   Secret's credentials in one `.dockerconfigjson`, since a build takes one pull
//!   authfile), canonicalized as the MCO canonicalizes its per-build copies.
//! * [`job`]: the `batch/v1` Job running the whole build, `machineos build` then rootless
//!   buildah for RUN steps, the digest coming back through the container's termination
//!   message (no API credentials in the pod).
//! * [`state`]: [`state::job_state`], the Job's and its pods' status → [`state::JobState`].
//! * [`build`]: the `build.openshift.io/v1` Build (Docker strategy, the Containerfile
//!   inline) for clusters that run OpenShift's build controller: the RUN steps, `FROM` the
//!   native image.
//! * [`mod@native_build`]: the Build before it, `native-<build>`, running `machineos build
//!   --native-only` in the machineos image (why two Builds: there).
//! * [`build_state`](mod@build_state): [`build_state::build_state`], the Build's status → the same
//!   [`state::JobState`].
//!
//! Why JSON values and not `k8s-openapi` types: the objects read like the YAML they become
//! (the golden files), the controller applies them with server-side apply as they are, and
//! [`state::job_state`] reads what a watch delivers without a typed round trip. The tests
//! deserialize every Kubernetes object into `k8s-openapi`'s types and back to check that
//! every field is a real one; the Build, which `k8s-openapi` does not have, is checked
//! against the field list of openshift/api's Go types.
//!
//! Every object carries an owner reference to the MachineOSBuild (the Job and the Build as
//! controller), so deleting the build deletes them; the MCO instead points the ConfigMaps
//! and Secrets at the Job after creating it (machineos needs no second write).

pub mod build;
pub mod build_state;
pub mod configmaps;
pub mod job;
pub mod names;
pub mod native_build;
pub mod secrets;
pub mod state;

pub use build::{BuildApiError, BuildApiInputs, build_build};
pub use build_state::build_state;
pub use configmaps::{
    McError, McLimits, ReassembleError, build_inputs_config_map, containerfile_config_map,
    from_mounted_keys, machine_config_config_maps, machine_config_config_maps_with, reassemble,
};
pub use job::{JobInputs, build_job};
pub use names::BuildMeta;
pub use native_build::{NativeBuildInputs, native_build, native_build_name};
pub use secrets::{RegistrySecret, SecretError, merged_auths, merged_pull_secret};
pub use state::{JobState, job_state};
