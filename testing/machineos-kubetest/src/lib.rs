//! A Kubernetes API server for tests: the pure, synchronous object store with
//! kube-apiserver's semantics, served over HTTP or HTTPS with a bearer token ([`http`]) to
//! the real `kubectl` and kube-rs, with test controls ([`control`]) and kubelet/Job
//! controller hooks ([`hooks`]) (issue 13). Test-only: never shipped, never started by
//! `machineos`.
//!
//! Pure core, decisions as data: every operation of the [`Store`] takes a request and
//! returns the stored object, a list, watch events, or an [`ApiError`] that renders as the
//! `Status` object a real server sends ([`ApiError::to_status`]). Time and randomness are
//! injected ([`clock`]), so uids, timestamps and generated names are reproducible.
//!
//! | module | what |
//! |---|---|
//! | [`store`] | objects, resourceVersions, create/get/update/status/patch/delete, list, watch, dryRun |
//! | [`gc`] | ownerReferences garbage collection (background, foreground, orphan), namespace deletion; inside each write or deferred to a background pass |
//! | [`resource`] | the registry of resources: built-in kinds and CRD-defined ones |
//! | [`builtin`] | built-in kinds as their typed registries treat them: Secret `stringData`, Pod/Job/Secret validation, which kinds refuse unconditional updates |
//! | [`meta`] | names, generateName, finalizers, owner references, generation, size limit |
//! | [`selector`] | label and field selectors |
//! | [`list`] | list/watch options, resourceVersion semantics, continue tokens |
//! | [`watch`] | watch events, selector transitions, bookmarks, streaming-list initial events |
//! | [`patch`] | JSON merge patch, JSON patch, strategic merge patch |
//! | [`apply`] | server-side apply: field sets, structured merge, conflicts, managedFields |
//! | [`store_apply`] | the apply verb of the store, field managers of requests |
//! | [`managed`] | managedFields bookkeeping of every write |
//! | [`error`] | `ApiError` and its `Status` |
//! | [`clock`] | injectable clock and id source |
//! | [`http`] | the HTTP/1.1 server (and HTTPS with a bearer token): discovery, REST verbs, watch streams |
//! | [`control`] | test controls: injected faults and delays, request counts per verb and resource |
//! | [`hooks`] | acting as the kubelet and the Job controller (pod phases, node readiness, Job pods and status) |
//! | [`buildexec`] | an OpenShift build controller that really runs `build.openshift.io/v1` Builds with buildah |
//! | [`podexec`] | a kubelet and Job controller that really run Job pods as host processes (volumes, env, termination messages, eviction) |
//! | [`disruption`] | PodDisruptionBudget status and eviction decisions |
//! | [`kubectl`] | test support: running the installed `kubectl` (or any child) with a deadline |
//!
//! Custom resources are validated by `machineos-crd-validation` (schema, defaults,
//! pruning, CEL) and rejected with its kube-apiserver-formatted field errors.

pub mod apply;
pub mod buildexec;
pub mod builtin;
pub mod clock;
pub mod control;
pub mod disruption;
pub mod error;
pub mod events;
pub mod gc;
pub mod hooks;
pub mod http;
pub mod json;
pub mod key;
pub mod kubectl;
pub mod list;
pub mod managed;
pub mod meta;
pub mod patch;
pub mod podexec;
pub mod resource;
pub mod selector;
pub mod store;
pub mod store_apply;
pub mod watch;

pub use error::ApiError;
pub use list::{ListOptions, WatchOptions};
pub use patch::PatchType;
pub use resource::{GroupResource, ObjectKey, Propagation, Registry, ResourceInfo};
pub use selector::Selectors;
pub use store::{
    DeleteOptions, Deleted, ListResult, Store, StoreConfig, Subresource, WriteOptions,
};
pub use store_apply::{ApplyOptions, FieldManager};
pub use watch::{EventType, WatchEvent};

#[cfg(test)]
mod builtin_tests;
#[cfg(test)]
mod store_apply_tests;
#[cfg(test)]
mod store_tests;
