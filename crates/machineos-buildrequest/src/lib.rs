//! What a RUN-step builder backend (a buildah Job, an OpenShift Build) is given, as data —
//! the MCO's `pkg/controller/build/buildrequest` re-done as pure functions:
//!
//! * [`containerfile`]: the Containerfile for a build (rendered from the template kept in
//!   `templates/`), or none when the pool's configuration needs no RUN step; and its
//!   validation (a syntax error fails the build at once, with the line).
//! * [`objects`]: the per-build ConfigMaps (`containerfile-<build>`, `mc-<build>`), the
//!   merged pull Secret `pull-<build>`, the Job `build-<build>` or, for OpenShift's build
//!   controller, the Build `build-<build>`, with the MCO's labels and annotations; and the
//!   mapping of a Job's and its pod's status, or a Build's, to the build's.
//! * [`tag`]: the intermediate native image's tag, one rule for the CLI and the controller.
//!
//! Pure: no I/O, no Kubernetes client. The controller's backends create what these return
//! and feed back what they observe.

pub mod containerfile;
pub mod objects;
pub mod tag;
