//! `POST /api/v1/namespaces/{ns}/pods/{name}/eviction`: the pod eviction subresource,
//! honouring PodDisruptionBudgets by [`crate::disruption::decide`].
//!
//! Contract (as `pkg/registry/core/pod/storage/eviction.go`): the body is a policy/v1 (or
//! policy/v1beta1) `Eviction` whose `metadata.name` must be the pod's (else 400); under one
//! store lock the pod, the budgets and the pods of its namespace are read, the decision
//! taken, the budget's status written through its `/status` (the recomputed status on a
//! refusal, the decremented one with the pod in `disruptedPods` on success), and the pod
//! deleted with the Eviction's `deleteOptions` (propagation, preconditions, dryRun) — so
//! finalizers hold it as a delete would. Success is 201 with a `Status` of success; a
//! refusal is the decision's 429 `TooManyRequests` (or 500 for several budgets); a
//! missing pod is a 404. `dryRun` (query or `deleteOptions.dryRun`) changes nothing.

use std::sync::Arc;

use hyper::Response;
use serde_json::{Value, json};

use super::Shared;
use super::body::{RespBody, json_response};
use crate::disruption::{Decision, decide};
use crate::error::ApiError;
use crate::list::ListOptions;
use crate::resource::GroupResource;
use crate::store::{DeleteOptions, WriteOptions};

/// Seconds since the epoch, now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Evicts pod `name` in `ns` as `eviction` (its JSON) asks; `delete` holds the delete
/// options already read from `eviction.deleteOptions` and the query.
pub fn evict(
    shared: &Arc<Shared>,
    ns: &str,
    name: &str,
    eviction: &Value,
    delete: &DeleteOptions,
) -> Result<Response<RespBody>, ApiError> {
    let ev_name = eviction
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if ev_name != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let kind = eviction.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != "Eviction" {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Eviction)"
        )));
    }
    let pods_gr = GroupResource::new("", "pods");
    let pdb_gr = GroupResource::new("policy", "poddisruptionbudgets");
    let now = now_secs();
    let now_text = crate::clock::rfc3339(now);
    let mut s = shared.lock();
    let pod = s.get(&pods_gr, Some(ns), name)?;
    let pdbs = s.list(&pdb_gr, Some(ns), &ListOptions::default())?.items;
    let pods = s.list(&pods_gr, Some(ns), &ListOptions::default())?.items;
    let decision = decide(
        &pod,
        &pdbs,
        &pods,
        now,
        &now_text,
        &super::table::parse_rfc3339,
    );
    let write = |s: &mut crate::Store, pdb: &str, status: Value| -> Result<(), ApiError> {
        if delete.dry_run {
            return Ok(());
        }
        let mut obj = s.get(&pdb_gr, Some(ns), pdb)?;
        if obj.get("status") == Some(&status) {
            return Ok(());
        }
        obj["status"] = status;
        s.update_status(&pdb_gr, Some(ns), pdb, &obj, WriteOptions::default())?;
        Ok(())
    };
    let out = match decision {
        Decision::Refuse {
            code,
            refusal,
            update,
        } => {
            if let Some((pdb, status)) = update {
                write(&mut s, &pdb, status)?;
            }
            Ok(json_response(code, &refusal))
        }
        Decision::Delete | Decision::DeleteAndUpdate { .. } => {
            if let Decision::DeleteAndUpdate { pdb, status } = decision {
                write(&mut s, &pdb, status)?;
            }
            s.delete(&pods_gr, Some(ns), name, delete)?;
            Ok(json_response(
                201,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Success", "code": 201}),
            ))
        }
    };
    shared.notify(s.resource_version());
    out
}
