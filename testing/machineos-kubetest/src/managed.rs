//! managedFields bookkeeping of every write (the store calls `track` just before a
//! create, update or status update commits): who the current write is by ([`Tracking`]), and
//! the entries that gives the object — kept as they were for writes by no manager (the
//! library API), the entries a server-side apply computed, or an `Update` entry for the
//! fields a create, update or non-apply patch changed (kube-apiserver's fieldmanager,
//! `decodeLiveOrNew` included). The field sets themselves are [`crate::apply`]'s; the
//! apply verb is [`crate::store_apply`]'s.

use serde_json::{Value, json};

use crate::apply::{self, Managed, Manager, Operation, Schema, Scope};
use crate::key::Subresource;
use crate::meta::meta_mut;
use crate::resource::ResourceInfo;

/// Who the store's current write is by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tracking {
    /// A create, update or non-apply patch by this manager.
    Update(String),
    /// A server-side apply: the entries it computed, stored as they are.
    Applied(Managed),
}

pub(crate) fn scope(info: &ResourceInfo, sub: Subresource) -> Scope {
    match (sub, info.status_subresource) {
        (Subresource::Status, _) => Scope::Status,
        (Subresource::Main, true) => Scope::NotStatus,
        (Subresource::Main, false) => Scope::All,
    }
}

pub(crate) fn subresource_name(sub: Subresource) -> String {
    match sub {
        Subresource::Main => String::new(),
        Subresource::Status => "status".into(),
    }
}

pub(crate) fn set_managed_fields(obj: &mut Value, v: Option<Value>) {
    let m = meta_mut(obj);
    match v {
        Some(v) => m.insert("managedFields".into(), v),
        None => m.remove("managedFields"),
    };
}

/// The entries a non-apply write starts from (`decodeLiveOrNew`).
pub(crate) fn live_or_new(old: Option<&Value>, new: &Value, sub: Subresource) -> Managed {
    let live = || {
        Managed::decode(old.and_then(|o| o.pointer("/metadata/managedFields"))).unwrap_or_default()
    };
    if sub == Subresource::Status {
        return live();
    }
    let sent = new.pointer("/metadata/managedFields");
    if let Some(Value::Array(a)) = sent
        && (a.is_empty() || (a.len() == 1 && a[0] == json!({})))
    {
        return Managed::default();
    }
    match Managed::decode(sent) {
        Ok(m) if !m.0.is_empty() => m,
        _ => live(),
    }
}

/// Sets `new`'s `metadata.managedFields` for the write of `old` (none: a create)
/// into `new` through `sub`, as `tracking` says (`schema`: the merge types of a version). Called by the store's
/// create, update and status update just before they commit.
pub(crate) fn track(
    tracking: Option<&Tracking>,
    schema: impl FnOnce(&str) -> Schema,
    now: &str,
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    sub: Subresource,
) {
    match tracking {
        None => {
            let sent = new.pointer("/metadata/managedFields").map(|v| !v.is_null());
            if sent != Some(true) {
                let kept = old
                    .and_then(|o| o.pointer("/metadata/managedFields"))
                    .cloned();
                if kept.is_some() || sent.is_some() {
                    set_managed_fields(new, kept);
                }
            }
        }
        Some(Tracking::Applied(m)) => set_managed_fields(new, m.encode()),
        Some(Tracking::Update(manager)) => {
            let mut managed = live_or_new(old, new, sub);
            let api_version = new
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let version = api_version
                .rsplit_once('/')
                .map_or(api_version.as_str(), |(_, v)| v);
            let schema = schema(version);
            let who = Manager {
                name: manager.clone(),
                operation: Operation::Update,
                api_version: api_version.clone(),
                subresource: subresource_name(sub),
            };
            let empty = json!({});
            apply::update(
                &schema,
                old.unwrap_or(&empty),
                new,
                &mut managed,
                &who,
                scope(info, sub),
                now,
            );
            set_managed_fields(new, managed.encode());
        }
    }
}
