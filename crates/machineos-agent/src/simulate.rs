//! A simulated machine: the agent on a [`FakeHost`] whose reboots are carried out in
//! process — the agent is stopped, the Node reported NotReady (as its kubelet would while the
//! machine is down), the fake host booted into its staged image, the Node Ready again, and a
//! new agent started, which resumes from the node's annotations exactly as after a real
//! reboot. For demos (`machineos agent --host fake`, `scripts/cluster-demo.sh`) and tests:
//! nothing on the machine running it is touched.
//!
//! Contract: the fake host starts booted into the node's `currentImage` annotation (none:
//! an unknown image); it writes the Node's `Ready` condition through the status
//! subresource, which a real agent never does (the kubelet owns it) — and, like a kubelet
//! that keeps reporting, tries again after a failed write (a 409 from a concurrent writer, a
//! 5xx), so a machine never stays NotReady because one status write lost a race.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use machineos_host::{FakeHost, Host};
use machineos_rollout::vocab;
use tokio_util::sync::CancellationToken;

use crate::{AgentError, AgentOptions, run};

/// Run a simulated machine for `opts.node` until `shutdown`; each reboot keeps the Node
/// NotReady for `down`.
pub async fn run_simulated(
    client: Client,
    opts: AgentOptions,
    down: Duration,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(&opts.node)
        .await
        .map_err(machineos_kube::api_err(
            "reading",
            format!("Node/{}", opts.node),
        ))?;
    let host = match node.annotations().get(vocab::CURRENT_IMAGE) {
        Some(image) => FakeHost::booted(image),
        None => FakeHost::default(),
    };
    loop {
        let stop = shutdown.child_token();
        let agent = tokio::spawn(run(
            client.clone(),
            Arc::new(host.clone()) as Arc<dyn Host>,
            opts.clone(),
            stop.clone(),
        ));
        // Wait for a reboot request (or the end).
        loop {
            if shutdown.is_cancelled() {
                stop.cancel();
                return agent.await.unwrap_or(Ok(()));
            }
            if std::mem::take(&mut host.lock().reboot_requested) {
                break;
            }
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        stop.cancel();
        let _ = agent.await;
        tracing::info!(node = %opts.node, "simulated reboot");
        set_ready(&nodes, &opts.node, false, &shutdown).await;
        tokio::time::sleep(down).await;
        host.boot();
        set_ready(&nodes, &opts.node, true, &shutdown).await;
    }
}

/// How a failed `Ready` write is repeated: 100 ms doubling to 2 s.
const READY_RETRY: machineos_diagnostics::Backoff =
    machineos_diagnostics::Backoff::doubling(Duration::from_millis(100), Duration::from_secs(2));

/// Set the Node's `Ready` condition, trying again (read, modify, write) until it is written,
/// the error is permanent (logged; the simulation goes on), or `shutdown`.
async fn set_ready(nodes: &Api<Node>, name: &str, ready: bool, shutdown: &CancellationToken) {
    use machineos_diagnostics::Classify as _;
    let mut failures = 0;
    loop {
        let Err(e) = write_ready(nodes, name, ready).await else {
            return;
        };
        let e = machineos_kube::api_err("setting Ready on", format!("Node/{name}"))(e);
        failures += 1;
        if e.retry() == machineos_diagnostics::Retry::Permanent {
            tracing::warn!(node = name, ready, error = %e, "setting the simulated Node's Ready condition");
            return;
        }
        tracing::debug!(node = name, ready, error = %e, failures, "setting Ready again");
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(READY_RETRY.delay(failures)) => {}
        }
    }
}

/// One read-modify-write of the Node's `Ready` condition.
async fn write_ready(nodes: &Api<Node>, name: &str, ready: bool) -> Result<(), kube::Error> {
    async {
        let mut node = nodes.get_status(name).await?;
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let status = node.status.get_or_insert_with(Default::default);
        let conds = status.conditions.get_or_insert_with(Vec::new);
        let want = if ready { "True" } else { "False" };
        match conds.iter_mut().find(|c| c.type_ == "Ready") {
            Some(c) => {
                if c.status != want {
                    c.last_transition_time = Some(now.clone());
                }
                c.status = want.into();
                c.last_heartbeat_time = Some(now);
            }
            None => conds.push(k8s_openapi::api::core::v1::NodeCondition {
                type_: "Ready".into(),
                status: want.into(),
                last_transition_time: Some(now.clone()),
                last_heartbeat_time: Some(now),
                reason: Some(
                    if ready {
                        "KubeletReady"
                    } else {
                        "KubeletNotReady"
                    }
                    .into(),
                ),
                ..Default::default()
            }),
        }
        node.metadata.managed_fields = None;
        nodes
            .replace_status(name, &PostParams::default(), &node)
            .await
            .map(|_| ())
    }
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use machineos_kubetest::control::{Fault, RequestMatch};
    use machineos_kubetest::hooks::ensure_node;
    use machineos_kubetest::http::{Server, new_store};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ready_write_that_conflicts_is_made_again() {
        let server = Server::start_tls(new_store(), 0).await.unwrap();
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        let client = Client::try_from(crate::client_config(cfg)).unwrap();
        ensure_node(server.shared(), "n1").unwrap();
        // The next two status writes lose to a concurrent writer.
        server.controls().fail_next(
            RequestMatch::path("/api/v1/nodes/n1/status").method("PUT"),
            2,
            Fault {
                code: 409,
                retry_after: None,
            },
        );
        let nodes: Api<Node> = Api::all(client);
        set_ready(&nodes, "n1", false, &CancellationToken::new()).await;
        let node = nodes.get_status("n1").await.unwrap();
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status);
        assert_eq!(ready.as_deref(), Some("False"));
        assert_eq!(server.controls().counts().get("update", "nodes/status"), 3);
    }
}
