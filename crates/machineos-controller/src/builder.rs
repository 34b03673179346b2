//! One interface for the builder backends: the in-process native builder
//! ([`crate::native`]), the buildah Job and the OpenShift Build ([`crate::runsteps`]).
//!
//! The lifecycle (`machineos_build_lifecycle::decide`) asks for
//! `StartBuild { backend, … }` / `CancelBuild`, and reads one [`BackendStatus`] per build;
//! it never knows which backend runs. A backend is a [`Builder`]:
//!
//! * [`Builder::start`] — *prepare* (the ephemeral objects a backend needs) and *start*, in
//!   one call that returns at once (the work goes on in a task). Idempotent: a build the
//!   backend already follows, in this process or through its objects in the API server, is
//!   adopted, never started twice.
//! * [`Builder::observe`] — what every build the backend knows is doing, from its
//!   in-process state and the API objects in the [`Snapshot`]. The *result* (the image by
//!   digest, per architecture) is part of the observed
//!   [`BackendStatus::Succeeded`], so it cannot be read without the success.
//! * [`Builder::cancel`] — stop a build (it was interrupted or deleted).
//! * [`Builder::clean_up`] — remove a finished build's ephemeral objects once its terminal
//!   status is recorded: after a success and an interruption; kept after a failure, for
//!   inspection.
//!
//! Backend state that must survive a restart lives in the API server (the Job or Builds,
//! their labels, annotations and owner reference), so a restarted controller re-attaches to
//! a running build by observing it (or, for an OpenShift Build backend's build between its
//! two Builds, by starting it again: the objects made are found and followed); what lives
//! only in memory (a native build) is recomputed deterministically when the lifecycle asks
//! for the build again.
//!
//! [`Builders`] holds one backend per [`Backend`] kind and composes their observations into
//! the one map the lifecycle reads.

use std::collections::HashMap;
use std::sync::Arc;

use machineos_build_lifecycle::{Backend, BackendStatus, BuildInputs, Phase, PushTarget};

use crate::observe::Snapshot;

/// Everything a backend needs to run one build.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// The controller's namespace (the Secrets', the ephemeral objects').
    pub namespace: String,
    /// The MachineOSBuild's name.
    pub build: String,
    /// Its `metadata.uid` (owner of the ephemeral objects).
    pub build_uid: String,
    /// Its MachineOSConfig (the pool's name for a legacy opt-in).
    pub machine_os_config: String,
    /// Its pool.
    pub pool: String,
    /// The rendered MachineConfig, as stored.
    pub rendered: machineos_api::v1::MachineConfig,
    /// The rendered MachineConfig as the API server stores it (JSON), for the
    /// MachineConfig ConfigMap.
    pub rendered_json: Vec<u8>,
    /// The inputs (base and extensions images by digest, Containerfiles).
    pub inputs: BuildInputs,
    /// Where to push.
    pub push: PushTarget,
    /// The push Secret: (name, `.dockerconfigjson`).
    pub push_secret: (String, Vec<u8>),
    /// The base image pull Secret, if one is named: (name, `.dockerconfigjson`).
    pub pull_secret: Option<(String, Vec<u8>)>,
    /// The architectures to build (OCI names, sorted): the MachineOSConfig's
    /// `machineos.io/architectures`, else those of the pool's nodes; empty when neither
    /// says (the backend's own platform then).
    pub architectures: Vec<String>,
    /// Whether the image gets the boot guard: unless the MachineOSConfig's
    /// `machineos.io/boot-guard` says `off`.
    pub boot_guard: bool,
}

impl BuildRequest {
    /// Registry credentials for an in-process build: (source for messages, bytes), the push
    /// Secret first.
    pub fn credentials(&self) -> Vec<(String, Vec<u8>)> {
        let ns = &self.namespace;
        std::iter::once(&self.push_secret)
            .chain(self.pull_secret.as_ref())
            .map(|(name, bytes)| (format!("Secret {ns}/{name}"), bytes.clone()))
            .collect()
    }
}

impl BuildRequest {
    /// What of the request needs RUN steps on architecture `arch` (`GOARCH` spelling): the
    /// rendered MachineConfig's extensions and kernelType, the Containerfile for `arch`.
    pub fn run_steps(
        &self,
        arch: &str,
    ) -> Result<
        machineos_buildrequest::containerfile::RunSteps,
        machineos_buildrequest::containerfile::RunStepsError,
    > {
        // The inputs key Containerfiles by `containerfileArch` (`NoArch`, `AMD64`, …); an
        // unknown key, which the lifecycle's validation prevents, counts as `NoArch`.
        let entries: Vec<(machineos_api::v1::ContainerfileArch, &str)> = self
            .inputs
            .containerfiles
            .iter()
            .map(|(a, c)| {
                (
                    serde_json::from_value(serde_json::Value::String(a.clone()))
                        .unwrap_or_default(),
                    c.as_str(),
                )
            })
            .collect();
        machineos_buildrequest::containerfile::RunSteps::new(&self.rendered, &entries, arch)
    }
}

/// A builder backend (see the module documentation).
pub trait Builder: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> Backend;
    /// Prepare and start `request`, or adopt it; returns at once.
    fn start(&self, request: BuildRequest);
    /// What every build this backend knows is doing.
    fn observe(&self, s: &Snapshot) -> HashMap<String, BackendStatus>;
    /// Stop `build` (interrupted or deleted); forget it.
    fn cancel(&self, build: &str);
    /// Remove the ephemeral objects of `build`, whose recorded phase is `phase` (terminal);
    /// forget it. Failed builds keep theirs.
    fn clean_up(&self, s: &Snapshot, build: &str, phase: Phase);
    /// Builds of this backend the snapshot shows ephemeral objects of.
    fn leftovers(&self, s: &Snapshot) -> Vec<String>;
    /// Forget in-process state of builds for which `keep` is false.
    fn retain(&self, keep: &dyn Fn(&str) -> bool);
    /// Stop everything (shutdown, lost leadership).
    fn cancel_all(&self);
    /// Builds running or waiting in this process.
    fn active(&self) -> usize;
}

/// One backend per kind.
#[derive(Clone, Default)]
pub struct Builders {
    backends: Vec<Arc<dyn Builder>>,
}

impl Builders {
    /// The given backends (one per kind; a later one of the same kind replaces an earlier).
    pub fn new(backends: Vec<Arc<dyn Builder>>) -> Self {
        let mut b = Builders::default();
        for x in backends {
            b.backends.retain(|y| y.kind() != x.kind());
            b.backends.push(x);
        }
        b
    }

    /// The backend of `kind`, if this controller has one.
    pub fn get(&self, kind: Backend) -> Option<&Arc<dyn Builder>> {
        self.backends.iter().find(|b| b.kind() == kind)
    }

    /// The kinds available (the lifecycle's `supported_backends`).
    pub fn kinds(&self) -> Vec<Backend> {
        let mut k: Vec<Backend> = self.backends.iter().map(|b| b.kind()).collect();
        k.sort();
        k
    }

    /// Every backend's observation, in one map. The native backend comes first, and a
    /// backend outside the process that reports a build overrides it (a build is on one
    /// backend; the order only settles a name two backends report, which a switch of
    /// builder type mid-build can briefly make).
    pub fn observe(&self, s: &Snapshot) -> HashMap<String, BackendStatus> {
        let mut all = HashMap::new();
        let mut ordered: Vec<&Arc<dyn Builder>> = self.backends.iter().collect();
        ordered.sort_by_key(|b| b.kind() != Backend::Native);
        for b in ordered {
            all.extend(b.observe(s));
        }
        all
    }

    /// Cancel `build` on every backend (only the one running it has anything to stop).
    pub fn cancel(&self, build: &str) {
        for b in &self.backends {
            b.cancel(build);
        }
    }

    /// Cancel everything.
    pub fn cancel_all(&self) {
        for b in &self.backends {
            b.cancel_all();
        }
    }

    /// Forget in-process state of builds for which `keep` is false.
    pub fn retain(&self, keep: &dyn Fn(&str) -> bool) {
        for b in &self.backends {
            b.retain(keep);
        }
    }

    /// Builds running or waiting in this process.
    pub fn active(&self) -> usize {
        self.backends.iter().map(|b| b.active()).sum()
    }

    /// Clean up the ephemeral objects of builds whose recorded phase `phase_of` says is
    /// terminal.
    pub fn clean_up(&self, s: &Snapshot, phase_of: &dyn Fn(&str) -> Option<Phase>) {
        for b in &self.backends {
            for build in b.leftovers(s) {
                if let Some(p) = phase_of(&build).filter(|p| p.is_terminal()) {
                    b.clean_up(s, &build, p);
                }
            }
        }
    }
}
