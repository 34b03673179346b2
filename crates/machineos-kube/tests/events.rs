//! The Event recorder against the test API server: a repeated message is one Event whose
//! series counts up; a changed message is a new Event, never the first message kept.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};
use machineos_kube::Events;
use machineos_kubetest::http::{Server, new_store};

async fn client_of(server: &Server) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

/// (note, series count) of every Event with `reason`, oldest first.
async fn events(client: &Client, reason: &str) -> Vec<(String, i32)> {
    let api: Api<Event> = Api::all(client.clone());
    let mut evs: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect();
    evs.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    evs.iter()
        .map(|e| {
            (
                e.note.clone().unwrap_or_default(),
                e.series.as_ref().map_or(1, |s| s.count),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_message_is_a_new_event_and_a_repeat_counts_up() {
    let server = Server::start_tls(new_store(), 0).await.unwrap();
    let client = client_of(&server).await;
    let events_of = Events::new(client.clone(), "machineos-agent", "node-a");
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("node-a".into()),
        uid: Some("0000-node-a".into()),
        ..Default::default()
    };
    for note in [
        "attempt 1, retrying in 1s",
        "attempt 1, retrying in 1s",
        "attempt 2, retrying in 2s",
    ] {
        events_of.publish(&node, true, "DrainFailed", note).await;
    }
    events_of
        .publish(&node, false, "Drained", "node drained")
        .await;
    assert_eq!(
        events(&client, "DrainFailed").await,
        vec![
            ("attempt 1, retrying in 1s".to_owned(), 2),
            ("attempt 2, retrying in 2s".to_owned(), 1),
        ]
    );
    // The same message again, after another one: the open series counts up.
    events_of
        .publish(&node, true, "DrainFailed", "attempt 1, retrying in 1s")
        .await;
    assert_eq!(
        events(&client, "DrainFailed").await,
        vec![
            ("attempt 1, retrying in 1s".to_owned(), 3),
            ("attempt 2, retrying in 2s".to_owned(), 1),
        ]
    );
    assert_eq!(events(&client, "Drained").await.len(), 1);
    // A series whose Event was deleted starts again.
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    for e in api.list(&ListParams::default()).await.unwrap().items {
        api.delete(e.metadata.name.as_deref().unwrap(), &Default::default())
            .await
            .unwrap();
    }
    events_of
        .publish(&node, true, "DrainFailed", "attempt 2, retrying in 2s")
        .await;
    assert_eq!(
        events(&client, "DrainFailed").await,
        vec![("attempt 2, retrying in 2s".to_owned(), 1)]
    );
}
