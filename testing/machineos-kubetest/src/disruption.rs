//! PodDisruptionBudgets and the pod `eviction` subresource, as decisions over data: which
//! budgets cover a pod, the status the disruption controller would compute for a budget,
//! and whether an eviction may go ahead — no I/O, no store; the HTTP layer
//! (`http::eviction`) reads the objects, calls [`decide`] and writes what it says.
//!
//! Follows `pkg/controller/disruption/disruption.go` (status) and
//! `pkg/registry/core/pod/storage/eviction.go` (the eviction REST) of Kubernetes 1.32:
//! * a budget covers a pod when it is in the pod's namespace and its `spec.selector`
//!   matches the pod's labels (policy/v1: an empty selector matches every pod, a missing
//!   one none);
//! * status: `expectedPods` = the covered pods; `currentHealthy` = those with the `Ready`
//!   condition `True`, not being deleted and not in `disruptedPods`; `desiredHealthy` from
//!   `minAvailable` (an int, or a percentage of `expectedPods` rounded up) or
//!   `expectedPods - maxUnavailable` (same rounding, floored at 0);
//!   `disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`; `disruptedPods`
//!   entries are dropped when their pod is gone, is being deleted, or the entry is older
//!   than the controller's two minutes; `observedGeneration` = `metadata.generation`; the
//!   `DisruptionAllowed` condition (`SufficientPods`/`InsufficientPods`);
//! * eviction: a pod that is `Succeeded`, `Failed`, `Pending` or already being deleted is
//!   deleted without looking at budgets; more than one covering budget is a 500; an
//!   unhealthy pod may go without using the budget when the budget is satisfied
//!   (`unhealthyPodEvictionPolicy` `IfHealthyBudget`, the default) or always
//!   (`AlwaysAllow`); otherwise `disruptionsAllowed == 0` is a 429 `TooManyRequests`
//!   with the apiserver's message and a `DisruptionBudget` cause, and an allowed
//!   eviction decrements `disruptionsAllowed` and records the pod in `disruptedPods`.
//!
//! Simplification: there is no disruption controller running; the budget's status is
//! computed afresh from the pods at each eviction (as if the controller had just synced),
//! so the "still being processed" refusal of a real server never happens, and
//! `expectedPods` counts the covered pods rather than the scale of their controllers.

use serde_json::{Value, json};

use crate::selector::{LabelOp, LabelSelector, Requirement};

/// How long a `disruptedPods` entry lives (the disruption controller's `DeletionTimeout`).
pub const DELETION_TIMEOUT_SECS: i64 = 120;

/// The message of a refused eviction (eviction.go).
pub const REFUSAL: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) as a [`LabelSelector`];
/// `None` for a missing selector (matches nothing) or an unknown operator.
pub fn label_selector(sel: Option<&Value>) -> Option<LabelSelector> {
    let sel = sel.filter(|v| v.is_object())?;
    let mut reqs = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push(Requirement {
                key: k.clone(),
                op: LabelOp::In([v.as_str().unwrap_or("").to_string()].into()),
            });
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let values = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        let op = match s(e, "/operator") {
            "In" => LabelOp::In(values),
            "NotIn" => LabelOp::NotIn(values),
            "Exists" => LabelOp::Exists,
            "DoesNotExist" => LabelOp::DoesNotExist,
            _ => return None,
        };
        reqs.push(Requirement {
            key: s(e, "/key").to_string(),
            op,
        });
    }
    Some(LabelSelector(reqs))
}

/// Whether `pdb` covers `pod`.
pub fn covers(pdb: &Value, pod: &Value) -> bool {
    s(pdb, "/metadata/namespace") == s(pod, "/metadata/namespace")
        && label_selector(pdb.pointer("/spec/selector")).is_some_and(|sel| sel.matches(pod))
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True")
}

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`; `None` for a bad value.
pub fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(p) => {
            let pct: i64 = p.strip_suffix('%')?.parse().ok()?;
            Some((pct * total + 99).div_euclid(100))
        }
        _ => None,
    }
}

/// The status the disruption controller computes for `pdb` over `pods` (all pods of its
/// namespace or more; those it does not cover are ignored) at time `now` (seconds since
/// the epoch; `parse_time` reads a `disruptedPods` timestamp).
pub fn status(
    pdb: &Value,
    pods: &[Value],
    now: i64,
    parse_time: &dyn Fn(&str) -> Option<i64>,
) -> Value {
    let covered: Vec<&Value> = pods.iter().filter(|p| covers(pdb, p)).collect();
    let mut disrupted = serde_json::Map::new();
    if let Some(m) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    {
        for (name, t) in m {
            let alive = covered
                .iter()
                .any(|p| s(p, "/metadata/name") == name && !deleting(p));
            let fresh = t
                .as_str()
                .and_then(parse_time)
                .is_some_and(|t| now - t < DELETION_TIMEOUT_SECS);
            if alive && fresh {
                disrupted.insert(name.clone(), t.clone());
            }
        }
    }
    let expected = covered.len() as i64;
    let healthy = covered
        .iter()
        .filter(|p| is_ready(p) && !deleting(p) && !disrupted.contains_key(s(p, "/metadata/name")))
        .count() as i64;
    let desired = if let Some(mu) = pdb.pointer("/spec/maxUnavailable") {
        (expected - scaled(mu, expected).unwrap_or(0)).max(0)
    } else if let Some(ma) = pdb.pointer("/spec/minAvailable") {
        scaled(ma, expected).unwrap_or(0)
    } else {
        0
    };
    let allowed = (healthy - desired).max(0);
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut st = json!({
        "observedGeneration": generation,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "conditions": [condition(pdb, allowed, generation)],
    });
    if !disrupted.is_empty() {
        st["disruptedPods"] = Value::Object(disrupted);
    }
    st
}

/// The `DisruptionAllowed` condition for `allowed`, keeping the stored transition time
/// when the status does not change.
fn condition(pdb: &Value, allowed: i64, generation: i64) -> Value {
    let (status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let old = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| s(c, "/type") == "DisruptionAllowed");
    let mut c = json!({"type": "DisruptionAllowed", "status": status, "reason": reason,
        "message": "", "observedGeneration": generation});
    if let Some(old) = old
        && s(old, "/status") == status
        && let Some(t) = old.get("lastTransitionTime")
    {
        c["lastTransitionTime"] = t.clone();
    }
    c
}

/// What to do with an eviction request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Delete the pod; no budget involved (terminal, pending or deleting pod, no budget,
    /// or an unhealthy pod the budget lets go without counting it).
    Delete,
    /// Delete the pod and store `status` as the budget `pdb`'s new status.
    DeleteAndUpdate {
        /// The budget's name.
        pdb: String,
        /// Its new status (decremented `disruptionsAllowed`, the pod in `disruptedPods`).
        status: Value,
    },
    /// Refuse: store `status` as the budget's status (freshly computed) and answer with
    /// the `Status` object `refusal` and its HTTP `code`.
    Refuse {
        /// The HTTP code (429, or 500 for several budgets).
        code: u16,
        /// The `Status` object.
        refusal: Value,
        /// The budget's name and recomputed status, when there is one budget.
        update: Option<(String, Value)>,
    },
}

fn refusal_status(code: u16, reason: &str, message: &str, causes: Value) -> Value {
    let mut details = json!({"causes": causes});
    if code == 429 {
        details["retryAfterSeconds"] = json!(0);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code})
}

/// Whether `pod` may be evicted given the budgets of its namespace (`pdbs`) and its
/// namespace's pods (`pods`, the evicted one included), at `now` (epoch seconds, written
/// into `disruptedPods` as `now_text`).
pub fn decide(
    pod: &Value,
    pdbs: &[Value],
    pods: &[Value],
    now: i64,
    now_text: &str,
    parse_time: &dyn Fn(&str) -> Option<i64>,
) -> Decision {
    if matches!(s(pod, "/status/phase"), "Succeeded" | "Failed" | "Pending") || deleting(pod) {
        return Decision::Delete;
    }
    let covering: Vec<&Value> = pdbs.iter().filter(|b| covers(b, pod)).collect();
    let pdb = match covering.as_slice() {
        [] => return Decision::Delete,
        [one] => *one,
        _ => {
            return Decision::Refuse {
                code: 500,
                refusal: refusal_status(
                    500,
                    "InternalError",
                    "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    json!([{"message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}]),
                ),
                update: None,
            };
        }
    };
    let name = s(pdb, "/metadata/name").to_string();
    let mut st = status(pdb, pods, now, parse_time);
    let get = |st: &Value, k: &str| st.get(k).and_then(Value::as_i64).unwrap_or(0);
    if !is_ready(pod) {
        let policy = s(pdb, "/spec/unhealthyPodEvictionPolicy");
        let satisfied = get(&st, "currentHealthy") >= get(&st, "desiredHealthy")
            && get(&st, "desiredHealthy") > 0;
        if policy == "AlwaysAllow" || satisfied {
            return Decision::Delete;
        }
    }
    if get(&st, "disruptionsAllowed") == 0 {
        let cause = format!(
            "The disruption budget {name} needs {} healthy pods and has {} currently",
            get(&st, "desiredHealthy"),
            get(&st, "currentHealthy")
        );
        return Decision::Refuse {
            code: 429,
            refusal: refusal_status(
                429,
                "TooManyRequests",
                REFUSAL,
                json!([{"reason": "DisruptionBudget", "message": cause}]),
            ),
            update: Some((name, st)),
        };
    }
    let allowed = get(&st, "disruptionsAllowed") - 1;
    st["disruptionsAllowed"] = json!(allowed);
    if allowed == 0 {
        st["conditions"] = json!([condition(pdb, 0, get(&st, "observedGeneration"))]);
    }
    let pod_name = s(pod, "/metadata/name").to_string();
    if !st.get("disruptedPods").is_some_and(Value::is_object) {
        st["disruptedPods"] = json!({});
    }
    st["disruptedPods"][pod_name] = json!(now_text);
    Decision::DeleteAndUpdate {
        pdb: name,
        status: st,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn parse(t: &str) -> Option<i64> {
        t.parse().ok()
    }

    fn pod(name: &str, ready: bool, phase: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        if spec.get("selector").is_none() {
            spec["selector"] = json!({"matchLabels": {"app": "web"}});
        }
        json!({"metadata": {"name": "b", "namespace": "ns", "generation": 2}, "spec": spec})
    }

    #[test]
    fn status_as_the_disruption_controller() {
        let pods = vec![
            pod("a", true, "Running"),
            pod("b", true, "Running"),
            pod("c", false, "Running"),
            json!({"metadata": {"name": "other", "namespace": "ns", "labels": {"app": "db"}}}),
        ];
        // (spec, currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed)
        let cases = vec![
            (json!({"minAvailable": 1}), 2, 1, 3, 1),
            (json!({"minAvailable": 2}), 2, 2, 3, 0),
            (json!({"minAvailable": 5}), 2, 5, 3, 0),
            (json!({"minAvailable": "50%"}), 2, 2, 3, 0),
            (json!({"minAvailable": "30%"}), 2, 1, 3, 1),
            (json!({"maxUnavailable": 1}), 2, 2, 3, 0),
            (json!({"maxUnavailable": 2}), 2, 1, 3, 1),
            (json!({"maxUnavailable": "100%"}), 2, 0, 3, 2),
            (json!({"maxUnavailable": "34%"}), 2, 1, 3, 1),
            (json!({}), 2, 0, 3, 2),
            (json!({"minAvailable": 0, "selector": {}}), 2, 0, 4, 2),
            (
                json!({"minAvailable": 0, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}),
                0,
                0,
                1,
                0,
            ),
        ];
        for (spec, healthy, desired, expected, allowed) in cases {
            let b = pdb(spec.clone());
            let st = status(&b, &pods, NOW, &parse);
            assert_eq!(
                (
                    st["currentHealthy"].as_i64().unwrap(),
                    st["desiredHealthy"].as_i64().unwrap(),
                    st["expectedPods"].as_i64().unwrap(),
                    st["disruptionsAllowed"].as_i64().unwrap()
                ),
                (healthy, desired, expected, allowed),
                "{spec}"
            );
            assert_eq!(st["observedGeneration"], 2);
            let cond = &st["conditions"][0];
            assert_eq!(cond["status"], if allowed > 0 { "True" } else { "False" });
        }
        // A missing selector covers nothing.
        let mut b = pdb(json!({"minAvailable": 1}));
        b["spec"].as_object_mut().unwrap().remove("selector");
        assert_eq!(status(&b, &pods, NOW, &parse)["expectedPods"], 0);
    }

    #[test]
    fn disrupted_pods_count_as_unhealthy_until_they_expire() {
        let pods = vec![pod("a", true, "Running"), pod("b", true, "Running")];
        let mut b = pdb(json!({"minAvailable": 1}));
        b["status"] =
            json!({"disruptedPods": {"a": (NOW - 10).to_string(), "gone": (NOW - 10).to_string()}});
        let st = status(&b, &pods, NOW, &parse);
        assert_eq!(st["currentHealthy"], 1);
        assert_eq!(st["disruptedPods"], json!({"a": (NOW - 10).to_string()}));
        b["status"]["disruptedPods"] = json!({"a": (NOW - 500).to_string()});
        let st = status(&b, &pods, NOW, &parse);
        assert_eq!(st["currentHealthy"], 2);
        assert!(st.get("disruptedPods").is_none());
    }

    #[test]
    fn eviction_decisions() {
        let pods = vec![pod("a", true, "Running"), pod("b", true, "Running")];
        let now_text = NOW.to_string();
        let d = |p: &Value, pdbs: &[Value], pods: &[Value]| {
            decide(p, pdbs, pods, NOW, &now_text, &parse)
        };
        // No budget; terminal and pending pods skip budgets.
        assert_eq!(d(&pods[0], &[], &pods), Decision::Delete);
        let strict = pdb(json!({"minAvailable": 2}));
        for phase in ["Succeeded", "Failed", "Pending"] {
            assert_eq!(
                d(&pod("a", true, phase), std::slice::from_ref(&strict), &pods),
                Decision::Delete
            );
        }
        // Refused: 429 with the apiserver's words and a DisruptionBudget cause.
        match d(&pods[0], std::slice::from_ref(&strict), &pods) {
            Decision::Refuse {
                code,
                refusal,
                update,
            } => {
                assert_eq!(code, 429);
                assert_eq!(refusal["message"], REFUSAL);
                assert_eq!(refusal["reason"], "TooManyRequests");
                assert_eq!(
                    refusal["details"]["causes"][0]["reason"],
                    "DisruptionBudget"
                );
                assert_eq!(
                    refusal["details"]["causes"][0]["message"],
                    "The disruption budget b needs 2 healthy pods and has 2 currently"
                );
                assert_eq!(update.unwrap().1["disruptionsAllowed"], 0);
            }
            other => panic!("{other:?}"),
        }
        // Allowed: decremented, the pod recorded.
        match d(&pods[0], &[pdb(json!({"minAvailable": 1}))], &pods) {
            Decision::DeleteAndUpdate { pdb, status } => {
                assert_eq!(pdb, "b");
                assert_eq!(status["disruptionsAllowed"], 0);
                assert_eq!(status["disruptedPods"]["a"], now_text.as_str());
                assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
            }
            other => panic!("{other:?}"),
        }
        // An unhealthy pod goes without using a satisfied budget, or always with AlwaysAllow.
        let three = vec![pods[0].clone(), pods[1].clone(), pod("c", false, "Running")];
        assert_eq!(
            d(&three[2], std::slice::from_ref(&strict), &three),
            Decision::Delete
        );
        let strict3 = pdb(json!({"minAvailable": 3}));
        assert!(matches!(
            d(&three[2], std::slice::from_ref(&strict3), &three),
            Decision::Refuse { code: 429, .. }
        ));
        let mut always = strict3;
        always["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        assert_eq!(d(&three[2], &[always], &three), Decision::Delete);
        // Two budgets: 500.
        assert!(matches!(
            d(&pods[0], &[strict.clone(), strict], &pods),
            Decision::Refuse {
                code: 500,
                update: None,
                ..
            }
        ));
    }
}
