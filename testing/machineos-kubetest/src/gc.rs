//! The garbage collector and namespace controller, run synchronously by the store after
//! every change until nothing more changes (a real cluster runs them asynchronously; here
//! a client sees their result as soon as its request returns, and the watch log shows the
//! same sequence of events a real cluster produces) — or, when the store defers them
//! (`Store::set_gc_deferred`), in a background pass after the request, as a real cluster's.
//!
//! Rules, as kube-controller-manager's garbage collector applies them to
//! `metadata.ownerReferences` (owners are found by uid, in any namespace):
//!
//! * an object being deleted with the `orphan` finalizer: its dependents lose their owner
//!   references to it, then the finalizer is removed;
//! * an object being deleted with the `foregroundDeletion` finalizer: each dependent not
//!   yet being deleted is deleted in the foreground too, unless it has another owner that
//!   is not itself waiting for its dependents (then only the reference is removed); once no
//!   remaining dependent has `blockOwnerDeletion: true`, the finalizer is removed;
//! * an object none of whose owners exist any more is deleted in the background; one with
//!   some owners gone loses the references to them;
//! * a namespace being deleted has its content deleted (background) and goes when empty.
//!
//! Simplifications: no `orphan`-finalizer handling of a dependent's own dependents beyond
//! the rules above, no per-kind default GC policy for dependents, and the whole store is
//! scanned per pass (fine for tests; a later benchmark may want an owner index). The store
//! runs the collector only after a write that touches deletion or ownership (a deleting
//! object, or owner references before or after the write) and after every delete.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::meta::{self, finalizers, is_deleting, owner_refs};
use crate::resource::{GroupResource, ObjectKey, Propagation};
use crate::store::{FOREGROUND, ORPHAN, Store};
use crate::watch::EventType;

impl Store {
    /// Runs the garbage collector and the namespace controller to a fixpoint.
    pub(crate) fn collect_garbage(&mut self) {
        // Each pass either changes something (bumping the resourceVersion) or ends the loop;
        // the bound guards against a rule that keeps undoing another.
        for _ in 0..10_000 {
            if !self.gc_pass() {
                return;
            }
        }
    }

    fn uids(&self) -> HashMap<String, ObjectKey> {
        self.objects
            .iter()
            .filter_map(|(k, v)| Some((meta::meta_str(v, "uid")?.to_string(), k.clone())))
            .collect()
    }

    fn dependents(&self, uid: &str) -> Vec<ObjectKey> {
        self.objects
            .iter()
            .filter(|(_, v)| owner_refs(v).iter().any(|r| r.uid == uid))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Replaces `key`'s object by `new` (removing it when it is deleting and has no
    /// finalizers left).
    fn gc_write(&mut self, key: &ObjectKey, new: Value) {
        if is_deleting(&new) && finalizers(&new).is_empty() && key.gr != ns_gr() {
            self.remove(key, new);
        } else {
            self.put(key.clone(), new, EventType::Modified);
        }
    }

    fn drop_finalizer(&mut self, key: &ObjectKey, f: &str) {
        if let Some(mut o) = self.objects.get(key).cloned() {
            let fins: Vec<String> = finalizers(&o).into_iter().filter(|x| x != f).collect();
            meta::set_finalizers(&mut o, &fins);
            self.gc_write(key, o);
        }
    }

    fn drop_refs(&mut self, key: &ObjectKey, uids: &BTreeSet<String>) {
        if let Some(mut o) = self.objects.get(key).cloned() {
            meta::retain_owner_refs(&mut o, |u| uids.contains(u));
            self.gc_write(key, o);
        }
    }

    fn gc_delete(&mut self, key: &ObjectKey, policy: Propagation) {
        self.delete_key(key, policy, false);
    }

    /// One pass; whether anything changed.
    fn gc_pass(&mut self) -> bool {
        let uids = self.uids();
        let deleting: Vec<(ObjectKey, Value)> = self
            .objects
            .iter()
            .filter(|(_, v)| is_deleting(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, obj) in &deleting {
            let uid = meta::meta_str(obj, "uid").unwrap_or("").to_string();
            let fins = finalizers(obj);
            if fins.iter().any(|f| f == ORPHAN) {
                let one = BTreeSet::from([uid.clone()]);
                for d in self.dependents(&uid) {
                    self.drop_refs(&d, &one);
                }
                self.drop_finalizer(key, ORPHAN);
                return true;
            }
            if fins.iter().any(|f| f == FOREGROUND) {
                let mut changed = false;
                for d in self.dependents(&uid) {
                    let Some(dep) = self.objects.get(&d).cloned() else {
                        continue;
                    };
                    if is_deleting(&dep) {
                        continue;
                    }
                    let solid_other_owner = owner_refs(&dep).iter().any(|r| {
                        r.uid != uid
                            && uids
                                .get(&r.uid)
                                .and_then(|k| self.objects.get(k))
                                .is_some_and(|o| !finalizers(o).iter().any(|f| f == FOREGROUND))
                    });
                    if solid_other_owner {
                        self.drop_refs(&d, &BTreeSet::from([uid.clone()]));
                    } else {
                        self.gc_delete(&d, Propagation::Foreground);
                    }
                    changed = true;
                }
                if changed {
                    return true;
                }
                let blocked = self
                    .objects
                    .values()
                    .any(|v| owner_refs(v).iter().any(|r| r.uid == uid && r.block));
                if !blocked {
                    self.drop_finalizer(key, FOREGROUND);
                    return true;
                }
            }
            if key.gr == ns_gr() {
                let content: Vec<ObjectKey> = self
                    .objects
                    .keys()
                    .filter(|k| k.namespace.as_deref() == Some(key.name.as_str()))
                    .cloned()
                    .collect();
                let mut changed = false;
                for k in &content {
                    if self.objects.get(k).is_some_and(|v| !is_deleting(v)) {
                        self.gc_delete(k, Propagation::Background);
                        changed = true;
                    }
                }
                if changed {
                    return true;
                }
                if content.is_empty() && finalizers(obj).is_empty() {
                    self.remove(key, obj.clone());
                    return true;
                }
            }
        }
        let with_owners: Vec<(ObjectKey, Value)> = self
            .objects
            .iter()
            .filter(|(_, v)| !owner_refs(v).is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, obj) in with_owners {
            let refs = owner_refs(&obj);
            let dangling: BTreeSet<String> = refs
                .iter()
                .filter(|r| !uids.contains_key(&r.uid))
                .map(|r| r.uid.clone())
                .collect();
            if dangling.is_empty() {
                continue;
            }
            if dangling.len() == refs.len() {
                if !is_deleting(&obj) {
                    self.gc_delete(&key, Propagation::Background);
                    return true;
                }
            } else {
                self.drop_refs(&key, &dangling);
                return true;
            }
        }
        false
    }
}

fn ns_gr() -> GroupResource {
    GroupResource::new("", "namespaces")
}
