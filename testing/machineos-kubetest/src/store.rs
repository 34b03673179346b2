//! The object store: every object of every resource, one cluster-wide resourceVersion, and
//! the event log watches are served from. Synchronous and single-threaded (a server wraps
//! it in a lock); every operation either fails with an [`ApiError`] and changes nothing, or
//! commits and appends its events.
//!
//! Semantics, as kube-apiserver's generic registry and etcd3 store implement them:
//!
//! * **create** fills `metadata.uid` (random), `creationTimestamp` (the [`Clock`]),
//!   `generation: 1` (kinds that track it), the name from `generateName` plus five random
//!   characters, `apiVersion`/`kind` when absent; drops `status` on kinds with a status
//!   subresource (Namespace gets `phase: Active`, Pod `phase: Pending`; Node keeps its
//!   status, as on a real server); validates the name (DNS subdomain, or label for
//!   namespaces) and, for custom resources, the CRD schema and CEL rules in one 422;
//!   refuses an existing name (409 AlreadyExists), a missing namespace (404), a
//!   terminating one (403), a set `resourceVersion` (400), a body over 1.5 MiB (413).
//!   Built-in kinds are first rewritten and checked as their typed registries do
//!   ([`crate::builtin`]: Secret `stringData` folded into `data`, an empty `generateName`
//!   dropped; Pod containers and images, a Job's template and `restartPolicy`, a docker
//!   config Secret's key, in the same 422 as the name's errors).
//! * **resourceVersion**: one counter for the whole store, bumped by every committed
//!   change, written as a decimal string; a write that changes nothing (an update equal to
//!   the stored object) commits nothing.
//! * **update** with a `resourceVersion` is conditional (409 Conflict when stale), without
//!   one unconditional — except for custom resources, CRDs and Builds, whose strategies
//!   refuse it: 422 `metadata.resourceVersion: Invalid value: 0x0: must be specified for
//!   an update`, through `/status` too (patches and applies carry the stored
//!   resourceVersion, so they pass); a uid different from the stored one is a 409
//!   precondition failure (checked first); the [`crate::builtin`] rewrites and checks
//!   apply as on create;
//!   `uid`, `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds` and
//!   `generation` are kept from the stored object; `generation` is bumped when anything
//!   outside `metadata` (and `status`, with a status subresource) changes; with a status
//!   subresource the stored `status` is kept. A missing object is a 404 (no
//!   create-on-update, which a real server allows for a few kinds such as Lease).
//! * **status updates** ([`Store::update_status`]) change only `status`; everything else,
//!   `metadata` included, is kept from the stored object (the resourceVersion precondition
//!   still applies).
//! * **delete** of an object without finalizers removes it; with finalizers (or with
//!   `propagationPolicy` Foreground/Orphan, which add `foregroundDeletion`/`orphan`) it
//!   sets `deletionTimestamp`, `deletionGracePeriodSeconds: 0` and bumps `generation`; the
//!   object goes when an update removes its last finalizer. Adding a finalizer to a
//!   deleting object is a 422. Namespaces are marked `Terminating`, their content deleted,
//!   and go when empty. Deleting a CRD removes its resource and all its objects.
//! * **garbage collection** runs synchronously after each change, to a fixpoint (see
//!   [`crate::gc`]) — or, deferred ([`Store::set_gc_deferred`]), only when
//!   [`Store::collect_deferred_garbage`] is called (the server's background collector,
//!   `Shared::defer_garbage_collection`), as a real cluster's runs after the request.
//! * **dryRun**: every write takes [`WriteOptions::dry_run`] and returns what would be
//!   stored (for a create without a resourceVersion) without storing it or logging events.
//! * **list** reads the state [`ListOptions`] selects (the most recent, not older than,
//!   or exactly at a resourceVersion, reconstructed from the event log), filtered by
//!   label and field selectors, in key order, paged with `limit` and `continue`.
//! * **watch**: [`Store::watch`] starts a watch as [`WatchOptions`] say (current state as
//!   `ADDED`, a streaming list ending in the `k8s.io/initial-events-end` bookmark, or the
//!   changes after a resourceVersion); [`Store::watch_from`] gives the events after a
//!   resourceVersion, or 410 `too old resource version: X (Y)` when X is older than the
//!   retained history (`Y` is the compaction point). The log keeps the last
//!   [`StoreConfig::history`] events; [`Store::compact`] drops history on demand.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use machineos_crd_validation::{BadValue, ErrorType, Errors, FieldError};
use serde_json::{Map, Value, json};

use crate::apply::Schema;
use crate::builtin;
use crate::clock::{Clock, Ids, ManualClock, rfc3339};
use crate::error::ApiError;
pub use crate::key::Subresource;
use crate::list::{
    CONTINUE_EXPIRED, ContinueToken, ListOptions, ReadAt, WatchOptions, WatchStart, parse_rv,
};
use crate::managed;
use crate::meta::{
    self, MAX_GENERATE_NAME_PREFIX, check_size, finalizers, is_deleting, meta_mut, meta_str,
};
use crate::patch::{self, PatchType};
use crate::resource::{GroupResource, ObjectKey, Propagation, Registry, ResourceInfo, crd_gr};
use crate::selector::Selectors;
use crate::watch::{self, EventType, WatchEvent};

/// The finalizer foreground deletion adds.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer orphaning deletion adds.
pub const ORPHAN: &str = "orphan";

/// How a store is set up.
#[derive(Clone)]
pub struct StoreConfig {
    /// The time source.
    pub clock: Arc<dyn Clock>,
    /// The seed of uids and generated names.
    pub seed: u64,
    /// How many events the log keeps (older ones are compacted away).
    pub history: usize,
}

impl Default for StoreConfig {
    /// A manual clock at 2024-01-01T00:00:00Z, seed 0, 100 000 events of history.
    fn default() -> StoreConfig {
        StoreConfig {
            clock: Arc::new(ManualClock::new(1_704_067_200)),
            seed: 0,
            history: 100_000,
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("seed", &self.seed)
            .field("history", &self.history)
            .finish_non_exhaustive()
    }
}

/// Options of every write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and return the result without storing it.
    pub dry_run: bool,
}

impl WriteOptions {
    /// `dryRun=All`.
    pub const DRY_RUN: WriteOptions = WriteOptions { dry_run: true };
}

/// Options of a delete (`DeleteOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `propagationPolicy`; `None` is the resource's default.
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// The object is marked for deletion (finalizers remain); its new state.
    Pending(Value),
}

impl Deleted {
    /// The object, either way.
    pub fn object(&self) -> &Value {
        match self {
            Deleted::Gone(o) | Deleted::Pending(o) => o,
        }
    }
}

/// A page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult {
    /// The list's apiVersion.
    pub api_version: String,
    /// The list kind (`ConfigMapList`).
    pub kind: String,
    /// The objects.
    pub items: Vec<Value>,
    /// The resourceVersion the list was read at.
    pub resource_version: u64,
    /// The continue token when more items remain.
    pub continue_token: Option<String>,
    /// How many matching items remain (set when paging without selectors).
    pub remaining_item_count: Option<u64>,
}

impl ListResult {
    /// The list object's JSON.
    pub fn to_json(&self) -> Value {
        let mut md = Map::new();
        md.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        if let Some(c) = &self.continue_token {
            md.insert("continue".into(), json!(c));
        }
        if let Some(n) = self.remaining_item_count {
            md.insert("remainingItemCount".into(), json!(n));
        }
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": md, "items": self.items})
    }
}

/// The start of a watch: the events to send now, and the resourceVersion to continue from
/// with [`Store::watch_from`].
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    /// The events to send first.
    pub events: Vec<WatchEvent>,
    /// The resourceVersion the events reach.
    pub resource_version: u64,
}

/// One logged change.
#[derive(Debug, Clone)]
pub(crate) struct LogEntry {
    pub(crate) rv: u64,
    pub(crate) key: ObjectKey,
    pub(crate) kind: EventType,
    pub(crate) object: Value,
    pub(crate) prev: Option<Value>,
}

/// The object store.
pub struct Store {
    pub(crate) registry: Registry,
    pub(crate) objects: BTreeMap<ObjectKey, Value>,
    rv: u64,
    log: VecDeque<LogEntry>,
    compacted: u64,
    clock: Arc<dyn Clock>,
    ids: Ids,
    history: usize,
    /// managedFields: who the current write is by (see `store_apply.rs`).
    pub(crate) tracking: Option<crate::managed::Tracking>,
    /// Garbage collection deferred to [`Store::collect_deferred_garbage`] (a real cluster's
    /// asynchronous collector) instead of run inside each write.
    gc_deferred: bool,
    /// A write since the last collection may have left the collector work.
    gc_pending: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("objects", &self.objects.len())
            .field("resource_version", &self.rv)
            .field("events", &self.log.len())
            .field("compacted", &self.compacted)
            .finish_non_exhaustive()
    }
}

fn ns_gr() -> GroupResource {
    GroupResource::new("", "namespaces")
}

/// The `Precondition failed` conflict detail.
fn precondition(what: &str, want: &str, have: &str) -> String {
    format!("Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}")
}

impl Store {
    /// A store with the built-in resources and the namespaces a new cluster has
    /// (`default`, `kube-system`, `kube-public`, `kube-node-lease`).
    pub fn new(config: StoreConfig) -> Store {
        let mut s = Store {
            registry: Registry::builtin(),
            objects: BTreeMap::new(),
            rv: 0,
            log: VecDeque::new(),
            compacted: 0,
            clock: config.clock,
            ids: Ids::new(config.seed),
            history: config.history.max(1),
            tracking: None, // managedFields (store_apply.rs)
            gc_deferred: false,
            gc_pending: false,
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let r = s.create(
                &ns_gr(),
                None,
                &json!({"metadata": {"name": ns}}),
                WriteOptions::default(),
            );
            debug_assert!(r.is_ok(), "creating namespace {ns}: {r:?}");
        }
        s
    }

    /// The resources served.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Defer garbage collection (`true`): writes no longer run the collector; it runs when
    /// [`Store::collect_deferred_garbage`] is called — as kube-controller-manager's collector
    /// runs after the owner's DELETE returned, so dependents (and objects created with an
    /// owner already gone) outlive it for a while. `false`: back to collecting inside each
    /// write, starting with what is pending.
    pub fn set_gc_deferred(&mut self, deferred: bool) {
        self.gc_deferred = deferred;
        if !deferred && self.gc_pending {
            self.gc_pending = false;
            self.collect_garbage();
        }
    }

    /// In deferred mode: run the collector to a fixpoint if a write since the last run may
    /// have given it work; whether it ran.
    pub fn collect_deferred_garbage(&mut self) -> bool {
        if !std::mem::take(&mut self.gc_pending) {
            return false;
        }
        self.collect_garbage();
        true
    }

    fn garbage_may_exist(&mut self) {
        if self.gc_deferred {
            self.gc_pending = true;
        } else {
            self.collect_garbage();
        }
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The oldest resourceVersion a watch or an exact list can start from.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Every stored object, in key order.
    pub fn objects(&self) -> impl Iterator<Item = (&ObjectKey, &Value)> {
        self.objects.iter()
    }

    /// The store clock's time, RFC 3339 (as timestamps are stamped).
    pub fn now(&self) -> String {
        rfc3339(self.clock.now())
    }

    pub(crate) fn info(&self, gr: &GroupResource) -> Result<ResourceInfo, ApiError> {
        self.registry.require(gr).cloned()
    }

    pub(crate) fn key(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<ObjectKey, ApiError> {
        let namespace = match (info.namespaced, ns) {
            (true, Some(ns)) if !ns.is_empty() => Some(ns.to_string()),
            (true, _) => {
                return Err(ApiError::bad_request(
                    "the server could not find the requested resource (a namespace is required)",
                ));
            }
            (false, None) => None,
            (false, Some(_)) => return Err(ApiError::UnknownResource { gr: info.gr() }),
        };
        Ok(ObjectKey {
            gr: info.gr(),
            namespace,
            name: name.to_string(),
        })
    }

    /// The merge types of `info`'s objects in `version`: the CRD's schema for a custom
    /// resource, the built-in table otherwise.
    pub(crate) fn merge_schema(&self, info: &ResourceInfo, version: &str) -> Schema {
        if !info.is_custom() {
            return Schema::Builtin;
        }
        let key = ObjectKey {
            gr: crd_gr(),
            namespace: None,
            name: format!("{}.{}", info.plural, info.group),
        };
        let schema = self.objects.get(&key).and_then(|crd| {
            crd.pointer("/spec/versions")?
                .as_array()?
                .iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
                .pointer("/schema/openAPIV3Schema")
                .cloned()
        });
        Schema::custom_resource(&schema.unwrap_or_else(|| json!({})))
    }

    /// Sets `new`'s `metadata.managedFields` for this write (see [`crate::managed`]).
    fn track_managed_fields(
        &self,
        info: &ResourceInfo,
        old: Option<&Value>,
        new: &mut Value,
        sub: Subresource,
    ) {
        let now = self.now();
        managed::track(
            self.tracking.as_ref(),
            |version| self.merge_schema(info, version),
            &now,
            info,
            old,
            new,
            sub,
        );
    }

    /// The stored object, or 404.
    pub fn get(&self, gr: &GroupResource, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let info = self.registry.require(gr)?;
        let key = self.key(info, ns, name)?;
        self.objects.get(&key).cloned().ok_or(ApiError::NotFound {
            gr: gr.clone(),
            name: name.to_string(),
        })
    }

    /// Checks `apiVersion`/`kind` against the resource and fills them when absent; returns
    /// the version written.
    fn type_meta(info: &ResourceInfo, obj: &mut Value) -> Result<String, ApiError> {
        let Value::Object(m) = obj else {
            return Err(ApiError::bad_request(
                "the body of the request is not a JSON object",
            ));
        };
        let version = match m.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => info.versions.first().cloned().unwrap_or_default(),
            Some(av) => {
                let (g, v) = av.rsplit_once('/').unwrap_or(("", av));
                if g != info.group || !info.versions.iter().any(|x| x == v) {
                    return Err(ApiError::bad_request(format!(
                        "the API version in the data ({av}) does not match the expected API version ({})",
                        info.storage_api_version()
                    )));
                }
                v.to_string()
            }
        };
        match m.get("kind").and_then(Value::as_str) {
            None | Some("") => {}
            Some(k) if k == info.kind => {}
            Some(k) => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    info.kind
                )));
            }
        }
        m.insert("apiVersion".into(), json!(info.api_version(&version)));
        m.insert("kind".into(), json!(info.kind));
        Ok(version)
    }

    fn invalid(info: &ResourceInfo, name: &str, errs: Vec<FieldError>) -> ApiError {
        ApiError::invalid(&info.group, &info.kind, name, errs)
    }

    /// Creates an object (see the module documentation).
    pub fn create(
        &mut self,
        gr: &GroupResource,
        ns: Option<&str>,
        obj: &Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let info = self.info(gr)?;
        let mut obj = obj.clone();
        let version = Self::type_meta(&info, &mut obj)?;
        builtin::prepare(&info, &mut obj);
        if meta_str(&obj, "resourceVersion").is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut name = meta_str(&obj, "name").unwrap_or("").to_string();
        if name.is_empty()
            && let Some(base) = meta_str(&obj, "generateName").filter(|s| !s.is_empty())
        {
            let base: String = base.chars().take(MAX_GENERATE_NAME_PREFIX).collect();
            name = format!("{base}{}", self.ids.suffix(5));
        }
        let mut errs = if name.is_empty() {
            vec![meta::name_required()]
        } else {
            meta::validate_name(&name, info.name_rule)
        };
        let body_ns = meta_str(&obj, "namespace").filter(|s| !s.is_empty());
        if info.namespaced && body_ns.is_some() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let now = self.now();
        let uid = self.ids.uuid();
        {
            let m = meta_mut(&mut obj);
            m.insert("name".into(), json!(name));
            match ns.filter(|_| info.namespaced) {
                Some(ns) => m.insert("namespace".into(), json!(ns)),
                None => m.remove("namespace"),
            };
            m.insert("uid".into(), json!(uid));
            m.insert("creationTimestamp".into(), json!(now));
            for f in [
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "resourceVersion",
            ] {
                m.remove(f);
            }
            if info.tracks_generation {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        if info.status_subresource
            && info.kind != "Node"
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
            match (info.group.as_str(), info.kind.as_str()) {
                ("", "Namespace") => {
                    m.insert("status".into(), json!({"phase": "Active"}));
                }
                ("", "Pod") => {
                    m.insert("status".into(), json!({"phase": "Pending"}));
                }
                _ => {}
            }
        }
        errs.extend(builtin::validate(&info, &obj));
        if let Some(v) = info.validators.get(&version) {
            match v.validate_create(&obj) {
                Ok(o) if errs.is_empty() => obj = o,
                Ok(_) => {}
                Err(Errors(mut e)) => errs.append(&mut e),
            }
        }
        if !errs.is_empty() {
            return Err(Self::invalid(&info, &name, errs));
        }
        let crd = if *gr == crd_gr() {
            let ri = ResourceInfo::from_crd(&obj)?;
            self.crd_status(&mut obj, &ri);
            Some(ri)
        } else {
            None
        };
        check_size(&obj)?;
        let key = self.key(&info, ns, &name)?;
        if self.objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                gr: gr.clone(),
                name,
            });
        }
        if let Some(ns) = &key.namespace {
            let nskey = ObjectKey {
                gr: ns_gr(),
                namespace: None,
                name: ns.clone(),
            };
            match self.objects.get(&nskey) {
                None => {
                    return Err(ApiError::NotFound {
                        gr: ns_gr(),
                        name: ns.clone(),
                    });
                }
                Some(n) if is_deleting(n) => {
                    return Err(ApiError::Forbidden {
                        gr: gr.clone(),
                        name,
                        detail: format!(
                            "unable to create new content in namespace {ns} because it is being terminated"
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        self.track_managed_fields(&info, None, &mut obj, Subresource::Main); // managedFields (store_apply.rs)
        if opts.dry_run {
            return Ok(obj);
        }
        let out = self.put(key, obj, EventType::Added);
        if let Some(ri) = crd {
            self.registry.insert(ri);
        }
        Ok(out)
    }

    /// A CRD's status as an API server's CRD controllers set it: names accepted,
    /// established, the storage version stored.
    fn crd_status(&self, crd: &mut Value, ri: &ResourceInfo) {
        let now = self.now();
        let status = json!({
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
            "acceptedNames": {
                "kind": ri.kind, "listKind": ri.list_kind, "plural": ri.plural,
                "singular": ri.singular, "shortNames": ri.short_names, "categories": ri.categories,
            },
            "storedVersions": [ri.versions.first()],
        });
        if let Some(m) = crd.as_object_mut() {
            m.insert("status".into(), status);
        }
    }

    /// The stored object an update of `key` addresses, after the resourceVersion and uid
    /// preconditions of `new`, and the resourceVersion a kind without unconditional
    /// updates requires ([`builtin::allows_unconditional_update`]).
    fn preconditions(
        &self,
        info: &ResourceInfo,
        key: &ObjectKey,
        new: &Value,
    ) -> Result<Value, ApiError> {
        let old = self.objects.get(key).cloned().ok_or(ApiError::NotFound {
            gr: key.gr.clone(),
            name: key.name.clone(),
        })?;
        if let Some(rv) = meta_str(new, "resourceVersion").filter(|s| !s.is_empty()) {
            let want = parse_rv(rv)?;
            if Some(want.to_string().as_str()) != meta_str(&old, "resourceVersion") {
                return Err(ApiError::stale(&key.gr, &key.name));
            }
        }
        if let Some(uid) = meta_str(new, "uid").filter(|s| !s.is_empty()) {
            let have = meta_str(&old, "uid").unwrap_or("");
            if uid != have {
                return Err(ApiError::Conflict {
                    gr: key.gr.clone(),
                    name: key.name.clone(),
                    detail: precondition("UID", uid, have),
                });
            }
        }
        if meta_str(new, "resourceVersion").is_none_or(str::is_empty)
            && !builtin::allows_unconditional_update(info)
        {
            return Err(builtin::resource_version_required(&key.gr, &key.name));
        }
        Ok(old)
    }

    fn check_name_and_ns(key: &ObjectKey, new: &Value) -> Result<(), ApiError> {
        if let Some(n) = meta_str(new, "name").filter(|s| !s.is_empty())
            && n != key.name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({})",
                key.name
            )));
        }
        if let Some(n) = meta_str(new, "namespace").filter(|s| !s.is_empty())
            && key.namespace.as_deref().is_some_and(|k| k != n)
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        Ok(())
    }

    /// Replaces an object through the main endpoint (see the module documentation).
    pub fn update(
        &mut self,
        gr: &GroupResource,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let info = self.info(gr)?;
        let key = self.key(&info, ns, name)?;
        let mut new = obj.clone();
        let version = Self::type_meta(&info, &mut new)?;
        builtin::prepare(&info, &mut new);
        Self::check_name_and_ns(&key, &new)?;
        let old = self.preconditions(&info, &key, &new)?;
        {
            let m = meta_mut(&mut new);
            m.insert("name".into(), json!(key.name));
            match &key.namespace {
                Some(ns) => m.insert("namespace".into(), json!(ns)),
                None => m.remove("namespace"),
            };
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                match old.get("metadata").and_then(|m| m.get(f)) {
                    Some(v) => m.insert(f.into(), v.clone()),
                    None => m.remove(f),
                };
            }
            m.remove("selfLink");
        }
        if info.status_subresource
            && let Some(m) = new.as_object_mut()
        {
            match old.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
        let mut errs = Vec::new();
        if is_deleting(&old) {
            let had = finalizers(&old);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !had.contains(f))
                .collect();
            if !added.is_empty() {
                let list: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                errs.push(FieldError::new(
                    ErrorType::Forbidden,
                    Some("metadata.finalizers".into()),
                    BadValue::Omit,
                    format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        list.join(", ")
                    ),
                ));
            }
        }
        errs.extend(builtin::validate(&info, &new));
        if let Some(v) = info.validators.get(&version) {
            match v.validate_update(&old, &new) {
                Ok(o) => new = o,
                Err(Errors(mut e)) => errs.append(&mut e),
            }
        }
        if !errs.is_empty() {
            return Err(Self::invalid(&info, name, errs));
        }
        if info.tracks_generation && meta::generation_changes(&old, &new, info.status_subresource) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let crd = if *gr == crd_gr() {
            Some(ResourceInfo::from_crd(&new)?)
        } else {
            None
        };
        self.track_managed_fields(&info, Some(&old), &mut new, Subresource::Main); // managedFields (store_apply.rs)
        self.write(key, old, new, crd, opts)
    }

    /// The common end of an update: no-op detection, size, dry run, commit (or removal
    /// when a deleting object lost its last finalizer), CRD re-registration, GC.
    fn write(
        &mut self,
        key: ObjectKey,
        old: Value,
        new: Value,
        crd: Option<ResourceInfo>,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        if new == old {
            return Ok(old);
        }
        check_size(&new)?;
        if opts.dry_run {
            return Ok(new);
        }
        // Only a write that touches deletion or ownership can give the collector work: a
        // deleting object, or owner references before or after. (Scanning the whole store
        // after every status write made a 7 000-object store spend most of its CPU in GC.)
        let gc = is_deleting(&new)
            || !crate::meta::owner_refs(&new).is_empty()
            || !crate::meta::owner_refs(&old).is_empty();
        let out = if is_deleting(&new) && finalizers(&new).is_empty() {
            self.remove(&key, new)
        } else {
            let out = self.put(key, new, EventType::Modified);
            if let Some(ri) = crd {
                self.registry.insert(ri);
            }
            out
        };
        if gc {
            self.garbage_may_exist();
        }
        Ok(out)
    }

    /// Writes `status` through the `/status` subresource: only `status` changes.
    pub fn update_status(
        &mut self,
        gr: &GroupResource,
        ns: Option<&str>,
        name: &str,
        obj: &Value,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let info = self.info(gr)?;
        if !info.status_subresource {
            return Err(ApiError::UnknownResource { gr: gr.clone() });
        }
        let key = self.key(&info, ns, name)?;
        let mut body = obj.clone();
        let version = Self::type_meta(&info, &mut body)?;
        Self::check_name_and_ns(&key, &body)?;
        let old = self.preconditions(&info, &key, &body)?;
        let mut new = old.clone();
        if let Some(m) = new.as_object_mut() {
            match body.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
        if let Some(v) = info.validators.get(&version) {
            new = v
                .validate_status_update(&old, &body)
                .map_err(|e| Self::invalid(&info, name, e.0))?;
        }
        self.track_managed_fields(&info, Some(&old), &mut new, Subresource::Status); // managedFields (store_apply.rs)
        self.write(key, old, new, None, opts)
    }

    /// Patches an object (main endpoint or `/status`).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        gr: &GroupResource,
        ns: Option<&str>,
        name: &str,
        kind: PatchType,
        patch: &Value,
        sub: Subresource,
        opts: WriteOptions,
    ) -> Result<Value, ApiError> {
        let info = self.info(gr)?;
        if kind == PatchType::Strategic && !info.strategic_merge {
            return Err(ApiError::UnsupportedPatch);
        }
        let old = self.get(gr, ns, name)?;
        let new = patch::apply(kind, &old, patch)?;
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the patched object is not a JSON object",
            ));
        }
        match sub {
            Subresource::Main => self.update(gr, ns, name, &new, opts),
            Subresource::Status => self.update_status(gr, ns, name, &new, opts),
        }
    }

    /// Deletes an object (see the module documentation).
    pub fn delete(
        &mut self,
        gr: &GroupResource,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let info = self.info(gr)?;
        let key = self.key(&info, ns, name)?;
        let old = self.objects.get(&key).cloned().ok_or(ApiError::NotFound {
            gr: gr.clone(),
            name: name.to_string(),
        })?;
        let have = |f: &str| meta_str(&old, f).unwrap_or("").to_string();
        if let Some(uid) = &opts.uid
            && *uid != have("uid")
        {
            return Err(ApiError::Conflict {
                gr: gr.clone(),
                name: name.into(),
                detail: precondition("UID", uid, &have("uid")),
            });
        }
        if let Some(rv) = &opts.resource_version
            && *rv != have("resourceVersion")
        {
            return Err(ApiError::Conflict {
                gr: gr.clone(),
                name: name.into(),
                detail: precondition("ResourceVersion", rv, &have("resourceVersion")),
            });
        }
        let policy = opts.propagation.unwrap_or(info.default_propagation);
        let out = self.delete_key(&key, policy, opts.dry_run);
        if !opts.dry_run {
            self.garbage_may_exist();
        }
        Ok(out)
    }

    /// Deletes the object at `key` (which exists) with `policy`.
    pub(crate) fn delete_key(
        &mut self,
        key: &ObjectKey,
        policy: Propagation,
        dry_run: bool,
    ) -> Deleted {
        let Some(old) = self.objects.get(key).cloned() else {
            return Deleted::Gone(Value::Null);
        };
        let mut fins = finalizers(&old);
        let mut add = |f: &str| {
            if !fins.iter().any(|x| x == f) {
                fins.push(f.to_string());
            }
        };
        match policy {
            Propagation::Foreground => add(FOREGROUND),
            Propagation::Orphan => add(ORPHAN),
            Propagation::Background => {}
        }
        let is_namespace = key.gr == ns_gr();
        if fins.is_empty() && !is_namespace {
            if dry_run {
                return Deleted::Gone(old);
            }
            return Deleted::Gone(self.remove(key, old));
        }
        let mut new = old.clone();
        meta::set_finalizers(&mut new, &fins);
        if !is_deleting(&old) {
            let now = self.now();
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), json!(now));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if let Some(g) = m
                .get("generation")
                .and_then(Value::as_i64)
                .filter(|g| *g > 0)
            {
                m.insert("generation".into(), json!(g + 1));
            }
            if is_namespace && let Some(o) = new.as_object_mut() {
                o.insert("status".into(), json!({"phase": "Terminating"}));
            }
        }
        if new == old || dry_run {
            return Deleted::Pending(new);
        }
        Deleted::Pending(self.put(key.clone(), new, EventType::Modified))
    }

    /// Commits `obj` at `key` with a new resourceVersion and logs the event (an
    /// `events.k8s.io` Event is mirrored as a core `v1` one: [`crate::events`]).
    pub(crate) fn put(&mut self, key: ObjectKey, mut obj: Value, kind: EventType) -> Value {
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        let prev = self.objects.insert(key.clone(), obj.clone());
        self.append(key.clone(), kind, obj.clone(), prev);
        if let Some(core) = core_event_key(&key) {
            let kind = if self.objects.contains_key(&core) {
                EventType::Modified
            } else {
                EventType::Added
            };
            self.put(core, crate::events::core_event_of(&obj), kind);
        }
        obj
    }

    /// Removes the object at `key`, logging `DELETED` with `last` (its final state) at a new
    /// resourceVersion. Removing a CRD removes its resource and objects; removing a
    /// namespace's last content lets the GC remove the namespace.
    pub(crate) fn remove(&mut self, key: &ObjectKey, mut last: Value) -> Value {
        self.rv += 1;
        meta_mut(&mut last).insert("resourceVersion".into(), json!(self.rv.to_string()));
        let prev = self.objects.remove(key);
        self.append(key.clone(), EventType::Deleted, last.clone(), prev);
        if let Some(core) = core_event_key(key)
            && let Some(mirror) = self.objects.get(&core).cloned()
        {
            self.remove(&core, mirror);
        }
        if key.gr == crd_gr()
            && let Ok(ri) = ResourceInfo::from_crd(&last)
        {
            let gr = ri.gr();
            let keys: Vec<ObjectKey> = self
                .objects
                .keys()
                .filter(|k| k.gr == gr)
                .cloned()
                .collect();
            for k in keys {
                if let Some(o) = self.objects.get(&k).cloned() {
                    self.remove(&k, o);
                }
            }
            self.registry.remove(&gr);
        }
        last
    }

    fn append(&mut self, key: ObjectKey, kind: EventType, object: Value, prev: Option<Value>) {
        self.log.push_back(LogEntry {
            rv: self.rv,
            key,
            kind,
            object,
            prev,
        });
        while self.log.len() > self.history {
            if let Some(e) = self.log.pop_front() {
                self.compacted = e.rv;
            }
        }
    }

    /// Drops the history up to and including `upto` (capped at the current
    /// resourceVersion): watches and exact lists from before it then get 410 Gone.
    pub fn compact(&mut self, upto: u64) {
        let upto = upto.min(self.rv);
        while self.log.front().is_some_and(|e| e.rv <= upto) {
            self.log.pop_front();
        }
        self.compacted = self.compacted.max(upto);
    }

    fn too_old(&self, rv: u64) -> ApiError {
        ApiError::Gone {
            message: format!("too old resource version: {rv} ({})", self.compacted),
        }
    }

    /// The objects of `gr` (in `ns`, or all namespaces) as they were at `rv`, rebuilt by
    /// undoing the logged changes after it.
    fn state_at(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        rv: u64,
    ) -> BTreeMap<ObjectKey, Value> {
        let in_scope =
            |k: &ObjectKey| k.gr == *gr && (ns.is_none() || k.namespace.as_deref() == ns);
        let mut state: BTreeMap<ObjectKey, Value> = self
            .objects
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for e in self.log.iter().rev().take_while(|e| e.rv > rv) {
            if in_scope(&e.key) {
                match &e.prev {
                    Some(p) => state.insert(e.key.clone(), p.clone()),
                    None => state.remove(&e.key),
                };
            }
        }
        state
    }

    /// The key a continue token's `ns/name` (or `name`) text names.
    fn token_key(gr: &GroupResource, namespaced: bool, text: &str) -> ObjectKey {
        let (namespace, name) = match text.split_once('/') {
            Some((ns, name)) if namespaced => (Some(ns.to_string()), name.to_string()),
            _ => (None, text.to_string()),
        };
        ObjectKey {
            gr: gr.clone(),
            namespace,
            name,
        }
    }

    fn key_text(k: &ObjectKey) -> String {
        match &k.namespace {
            Some(ns) => format!("{ns}/{}", k.name),
            None => k.name.clone(),
        }
    }

    /// Lists the objects of `gr` in `ns` (or in all namespaces).
    pub fn list(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let info = self.registry.require(gr)?;
        let ns = ns.filter(|_| info.namespaced);
        let sel = Selectors::parse(
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
            info,
        )?;
        let read_at = opts.read_at()?;
        let cont = opts
            .continue_token
            .as_deref()
            .filter(|c| !c.is_empty())
            .map(ContinueToken::decode)
            .transpose()?;
        let (list_rv, start) = match (&cont, read_at) {
            (Some(t), _) => {
                if t.rv < self.compacted {
                    return Err(ApiError::Gone {
                        message: CONTINUE_EXPIRED.into(),
                    });
                }
                (t.rv.min(self.rv), Some(t.start.clone()))
            }
            (None, ReadAt::Latest) => (self.rv, None),
            (None, ReadAt::NotOlderThan(x) | ReadAt::Exact(x)) if x > self.rv => {
                return Err(ApiError::TooLargeResourceVersion {
                    requested: x,
                    current: self.rv,
                });
            }
            (None, ReadAt::NotOlderThan(_)) => (self.rv, None),
            (None, ReadAt::Exact(x)) => {
                if x < self.compacted {
                    return Err(self.too_old(x));
                }
                (x, None)
            }
        };
        // Where the page starts: after the continue token's key, else at the first key of
        // the resource (in the namespace). Keys, not their "ns/name" text, are compared:
        // the text order differs ("a-b/x" < "a/x", but namespace "a" < "a-b").
        let lower = match &start {
            Some(text) => Bound::Excluded(Self::token_key(gr, info.namespaced, text)),
            None => Bound::Included(ObjectKey {
                gr: gr.clone(),
                namespace: ns.map(str::to_string),
                name: String::new(),
            }),
        };
        let in_scope =
            |k: &ObjectKey| k.gr == *gr && (ns.is_none() || k.namespace.as_deref() == ns);
        let state;
        let objects: Box<dyn Iterator<Item = (&ObjectKey, &Value)>> = if list_rv == self.rv {
            Box::new(
                self.objects
                    .range((lower, Bound::Unbounded))
                    .take_while(|(k, _)| in_scope(k)),
            )
        } else {
            state = self.state_at(gr, ns, list_rv);
            Box::new(state.range((lower, Bound::Unbounded)))
        };
        let limit = opts
            .limit
            .filter(|l| *l > 0)
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let mut items = Vec::new();
        let mut last = None;
        let mut remaining = 0u64;
        for (k, v) in objects {
            if !sel.matches(v) {
                continue;
            }
            if items.len() < limit {
                items.push(v.clone());
                last = Some(k);
            } else {
                remaining += 1;
            }
        }
        let more = remaining > 0;
        let selectors_empty = sel == Selectors::default();
        Ok(ListResult {
            api_version: info.storage_api_version(),
            kind: info.list_kind.clone(),
            items,
            resource_version: list_rv,
            continue_token: match (more, last) {
                (true, Some(k)) => Some(
                    ContinueToken {
                        rv: list_rv,
                        start: Self::key_text(k),
                    }
                    .encode(),
                ),
                _ => None,
            },
            remaining_item_count: (more && selectors_empty).then_some(remaining),
        })
    }

    /// Starts a watch of `gr` in `ns` (or all namespaces) as `opts` say.
    pub fn watch(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        opts: &WatchOptions,
    ) -> Result<Watch, ApiError> {
        let info = self.registry.require(gr)?;
        let sel = Selectors::parse(
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
            info,
        )?;
        let current = |sel: &Selectors| -> Vec<Value> {
            let ns = ns.filter(|_| info.namespaced);
            self.objects
                .iter()
                .filter(|(k, v)| {
                    k.gr == *gr && (ns.is_none() || k.namespace.as_deref() == ns) && sel.matches(v)
                })
                .map(|(_, v)| v.clone())
                .collect()
        };
        let events = match opts.start()? {
            WatchStart::InitialEvents(Some(x)) if x > self.rv => {
                return Err(ApiError::TooLargeResourceVersion {
                    requested: x,
                    current: self.rv,
                });
            }
            WatchStart::InitialEvents(_) => watch::initial_events(
                &current(&sel),
                &info.storage_api_version(),
                &info.kind,
                self.rv,
            ),
            WatchStart::CurrentState => current(&sel)
                .into_iter()
                .map(|object| WatchEvent {
                    kind: EventType::Added,
                    object,
                })
                .collect(),
            WatchStart::After(x) => self.watch_from(gr, ns, x, &sel)?,
        };
        Ok(Watch {
            events,
            resource_version: self.rv,
        })
    }

    /// The events of `gr` in `ns` (or all namespaces) after `rv` that `sel` sees, or 410
    /// when `rv` is older than the retained history.
    pub fn watch_from(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        rv: u64,
        sel: &Selectors,
    ) -> Result<Vec<WatchEvent>, ApiError> {
        if rv < self.compacted {
            return Err(self.too_old(rv));
        }
        let start = self.log.partition_point(|e| e.rv <= rv);
        Ok(self
            .log
            .range(start..)
            .filter(|e| e.key.gr == *gr && (ns.is_none() || e.key.namespace.as_deref() == ns))
            .filter_map(|e| watch::filter_change(sel, e.kind, &e.object, e.prev.as_ref()))
            .collect())
    }

    /// Every logged change after `rv`, of every resource, with its key: what a server fans
    /// out to watchers, and what tests replay.
    pub fn changes_after(&self, rv: u64) -> Result<Vec<(ObjectKey, WatchEvent)>, ApiError> {
        if rv < self.compacted {
            return Err(self.too_old(rv));
        }
        let start = self.log.partition_point(|e| e.rv <= rv);
        Ok(self
            .log
            .range(start..)
            .map(|e| {
                (
                    e.key.clone(),
                    WatchEvent {
                        kind: e.kind,
                        object: e.object.clone(),
                    },
                )
            })
            .collect())
    }

    /// A bookmark for `gr` at the current resourceVersion.
    pub fn bookmark(&self, gr: &GroupResource) -> Result<WatchEvent, ApiError> {
        let info = self.registry.require(gr)?;
        Ok(watch::bookmark(
            &info.storage_api_version(),
            &info.kind,
            self.rv,
        ))
    }
}

/// The core `v1` Event that mirrors the `events.k8s.io` Event at `key`, if it is one.
fn core_event_key(key: &ObjectKey) -> Option<ObjectKey> {
    (key.gr.group == "events.k8s.io" && key.gr.resource == "events").then(|| ObjectKey {
        gr: GroupResource::new("", "events"),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    })
}
