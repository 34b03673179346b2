//! The pod statuses the test kubelet writes beyond [`crate::hooks::pod_status`]'s phases
//! (pure): a container waiting with a reason (`CreateContainerConfigError`), a container
//! that could not start (`StartError`, exit code 128, as containerd reports it), and an
//! eviction by the kubelet's eviction manager (phase `Failed`, reason `Evicted`, the
//! container killed with exit code 137, and the `DisruptionTarget` condition with reason
//! `TerminationByKubelet` that Kubernetes 1.26+ adds).

use serde_json::{Value, json};

use crate::hooks::{PodPhase, pod_status};

/// The exit code of a container killed by SIGKILL (128 + 9).
pub const KILLED_EXIT_CODE: i32 = 137;
/// The exit code containerd reports for a container that could not start.
pub const START_ERROR_EXIT_CODE: i32 = 128;

/// The message the kubelet's eviction manager writes for a pod evicted under
/// ephemeral-storage pressure whose container `container` used more than it requested.
pub fn eviction_message(container: &str) -> String {
    format!(
        "The node was low on resource: ephemeral-storage. Threshold quantity: 4Gi, available: 3512Mi. \
         Container {container} was using 12Gi, request is 0, has larger consumption of ephemeral-storage. "
    )
}

fn first_container_state(status: &mut Value) -> Option<&mut Value> {
    status.pointer_mut("/containerStatuses/0/state")
}

/// Pod `pod` `Pending` at `now`, its first container waiting with `reason` and `message`.
pub fn waiting_status(pod: &Value, reason: &str, message: &str, now: &str) -> Value {
    let mut st = pod_status(pod, &PodPhase::Pending, now);
    if let Some(state) = first_container_state(&mut st) {
        *state = json!({"waiting": {"reason": reason, "message": message}});
    }
    st
}

/// Pod `pod` `Failed` at `now` because its first container could not start.
pub fn start_error_status(pod: &Value, message: &str, now: &str) -> Value {
    let mut st = pod_status(
        pod,
        &PodPhase::Failed {
            exit_code: START_ERROR_EXIT_CODE,
            message: message.to_string(),
        },
        now,
    );
    if let Some(t) = st.pointer_mut("/containerStatuses/0/state/terminated/reason") {
        *t = json!("StartError");
    }
    st
}

/// Pod `pod` evicted at `now`: `Failed` with reason `Evicted` and `message`, the first
/// container killed (exit code 137) with `container_message` as its termination message.
pub fn evicted_status(pod: &Value, message: &str, container_message: &str, now: &str) -> Value {
    let mut st = pod_status(
        pod,
        &PodPhase::Failed {
            exit_code: KILLED_EXIT_CODE,
            message: container_message.to_string(),
        },
        now,
    );
    if let Some(m) = st.as_object_mut() {
        m.insert("reason".into(), json!("Evicted"));
        m.insert("message".into(), json!(message));
        if let Some(Value::Array(c)) = m.get_mut("conditions") {
            c.push(json!({"type": "DisruptionTarget", "status": "True",
                "lastProbeTime": null, "lastTransitionTime": now,
                "reason": "TerminationByKubelet", "message": message}));
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "build", "image": "x"}]}})
    }

    #[test]
    fn statuses() {
        let w = waiting_status(
            &pod(),
            "CreateContainerConfigError",
            "configmap \"a\" not found",
            "t",
        );
        assert_eq!(w["phase"], "Pending");
        assert_eq!(
            w["containerStatuses"][0]["state"]["waiting"],
            json!({"reason": "CreateContainerConfigError", "message": "configmap \"a\" not found"})
        );
        let s = start_error_status(&pod(), "exec: no such file", "t");
        let t = &s["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(
            (t["exitCode"].as_i64(), t["reason"].as_str()),
            (Some(128), Some("StartError"))
        );
        let e = evicted_status(&pod(), &eviction_message("build"), "", "t");
        assert_eq!(
            (e["phase"].as_str(), e["reason"].as_str()),
            (Some("Failed"), Some("Evicted"))
        );
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("The node was low on resource: ephemeral-storage.")
        );
        assert_eq!(
            e["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            137
        );
        let dt = e["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "DisruptionTarget")
            .unwrap();
        assert_eq!(dt["reason"], "TerminationByKubelet");
    }
}
