//! kube-rs as the judge: its `Api`, `watcher` + `reflector`, `Controller` and leader
//! election with Lease objects, over TLS with the server's generated CA and bearer token
//! (the client is built from [`Server::kubeconfig`] exactly as from a file), under the
//! faults the test controls inject.
//!
//! kube-rs's watcher (kube-runtime 5, `watcher.rs` `step_trampolined`) re-watches from the
//! last resourceVersion it saw when a watch stream ends, and re-lists only after a watch
//! `ERROR` event with code 410: the request counts are asserted against exactly that.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store as Reader};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use machineos_kubetest::control::{Fault, RequestMatch};
use machineos_kubetest::hooks;
use machineos_kubetest::http::{Server, new_store};
use machineos_kubetest::{GroupResource, WriteOptions};
use serde_json::json;

/// A generous deadline for "eventually".
const EVENTUALLY: Duration = Duration::from_secs(60);

async fn tls_server() -> Server {
    Server::start_tls(new_store(), 0).await.unwrap()
}

/// A kube client configured from the server's kubeconfig (CA data and token), as from a
/// `KUBECONFIG` file.
async fn client(s: &Server) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&s.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(cfg.default_namespace, "default");
    Client::try_from(cfg).unwrap()
}

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn api_crud_on_config_maps() {
    let s = tls_server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client(&s).await);
    let pp = PostParams::default();
    let a = api.create(&pp, &cm("a", &[("k", "1")])).await.unwrap();
    assert!(a.metadata.uid.is_some());
    assert_eq!(
        api_code(&api.create(&pp, &cm("a", &[])).await.unwrap_err()),
        Some(409)
    );
    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "1");
    // Replace with the current resourceVersion, then with the stale one: 409 Conflict.
    let mut new = got.clone();
    new.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let replaced = api.replace("a", &pp, &new).await.unwrap();
    assert_ne!(replaced.resource_version(), got.resource_version());
    let e = api.replace("a", &pp, &new).await.unwrap_err();
    match &e {
        kube::Error::Api(st) => {
            assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"), "{st:?}")
        }
        other => panic!("{other:?}"),
    }
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"m": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["m"], "x");
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"l": "v"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.labels()["l"], "v");
    api.create(&pp, &cm("b", &[])).await.unwrap();
    let list = api
        .list(&ListParams::default().labels("l=v"))
        .await
        .unwrap();
    assert_eq!(
        list.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["a"]
    );
    let all = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(all.items.len(), 1);
    assert!(all.metadata.continue_.is_some());
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(&api.get("a").await.unwrap_err()), Some(404));
    assert!(api.get_opt("a").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn api_crud_on_a_machineos_custom_resource() {
    use machineos_api::v1::{MachineConfig, MachineConfigSpec};
    let s = tls_server().await;
    {
        let st = s.store();
        let mut st = st.lock().unwrap();
        let crd_gr = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
        for crd in machineos_api::crds() {
            st.create(
                &crd_gr,
                None,
                &serde_json::to_value(&crd).unwrap(),
                WriteOptions::default(),
            )
            .unwrap();
        }
    }
    let c = client(&s).await;
    let api: Api<MachineConfig> = Api::all(c);
    let spec = MachineConfigSpec {
        config: serde_json::from_value(json!({"ignition": {"version": "3.4.0"}})).unwrap(),
        kernel_arguments: vec!["quiet".into()],
        ..MachineConfigSpec::default()
    };
    let mc = MachineConfig::new("00-worker", spec);
    let created = api.create(&PostParams::default(), &mc).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.spec.kernel_arguments, ["quiet"]);
    let patched = api
        .patch(
            "00-worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kernelArguments": ["quiet", "nosmt"]}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(patched.spec.kernel_arguments, ["quiet", "nosmt"]);
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    // The schema is enforced: a kernel argument must be a string.
    let e = api
        .patch(
            "00-worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kernelArguments": [1]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some(422), "{e:?}");
    api.delete("00-worker", &DeleteParams::default())
        .await
        .unwrap();
    assert!(api.get_opt("00-worker").await.unwrap().is_none());
}

/// `(name, resourceVersion)` of every ConfigMap in `default`, from the server's store.
fn server_state(s: &Server) -> BTreeMap<String, String> {
    let st = s.store();
    let st = st.lock().unwrap();
    st.objects()
        .filter(|(k, _)| k.gr.resource == "configmaps" && k.namespace.as_deref() == Some("default"))
        .map(|(k, v)| {
            (
                k.name.clone(),
                v["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

fn reader_state(r: &Reader<ConfigMap>) -> BTreeMap<String, String> {
    r.state()
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap_or_default()))
        .collect()
}

async fn converge(s: &Server, r: &Reader<ConfigMap>, what: &str) {
    let end = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        let want = server_state(s);
        if reader_state(r) == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{what}: the reflector did not converge: {:?} vs {want:?}",
            reader_state(r)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn watcher_and_reflector_survive_watch_drops_and_410s() {
    let s = tls_server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client(&s).await);
    let pp = PostParams::default();
    for n in ["a", "b", "c"] {
        api.create(&pp, &cm(n, &[("v", "0")])).await.unwrap();
    }
    let (reader, writer) = reflector::store();
    // Every event the watcher delivers, as (kind, name, resourceVersion).
    let seen: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let log = seen.clone();
    let task = tokio::spawn(
        watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(move |e| {
                if let Ok(e) = e {
                    let (kind, obj) = match &e {
                        watcher::Event::Apply(o) => ("apply", Some(o)),
                        watcher::Event::InitApply(o) => ("init", Some(o)),
                        watcher::Event::Delete(o) => ("delete", Some(o)),
                        _ => ("", None),
                    };
                    if let Some(o) = obj {
                        log.lock().unwrap().push((
                            kind.into(),
                            o.name_any(),
                            o.resource_version().unwrap_or_default(),
                        ));
                    }
                }
                futures_util::future::ready(())
            }),
    );
    converge(&s, &reader, "initial list").await;

    // A plain drop: the watcher re-watches from its resourceVersion, no re-list, and
    // every change made while it reconnected arrives as its own event.
    let before = s.controls().counts();
    s.close_watches();
    let d = api.create(&pp, &cm("d", &[])).await.unwrap();
    let a = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "1"}})),
        )
        .await
        .unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    converge(&s, &reader, "after a watch drop").await;
    let since = s.controls().counts().since(&before);
    assert_eq!(
        since.get("list", "configmaps"),
        0,
        "no re-list after a drop: {since:?}"
    );
    assert_eq!(
        since.get("watch", "configmaps"),
        1,
        "one re-watch: {since:?}"
    );
    {
        let seen = seen.lock().unwrap();
        for (kind, name, rv) in [
            ("apply", "d", d.resource_version().unwrap()),
            ("apply", "a", a.resource_version().unwrap()),
        ] {
            assert!(
                seen.contains(&(kind.into(), name.into(), rv.clone())),
                "{kind} {name}@{rv} not seen: {seen:?}"
            );
        }
        assert!(
            seen.iter().any(|(k, n, _)| k == "delete" && n == "b"),
            "{seen:?}"
        );
    }

    // A drop while history is compacted: the watcher cannot re-watch until the fault is
    // lifted (its watch requests get 503), the changes it missed fall out of history, so
    // its re-watch gets a 410 and it re-lists — once.
    let before = s.controls().counts();
    s.controls().fail_next(
        RequestMatch::path("/api/v1/namespaces/default/configmaps").verb("watch"),
        u32::MAX,
        Fault::service_unavailable(),
    );
    s.close_watches();
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.create(&pp, &cm("e", &[])).await.unwrap();
    api.delete("d", &DeleteParams::default()).await.unwrap();
    s.compact_history();
    s.controls().clear();
    converge(&s, &reader, "after a 410").await;
    let since = s.controls().counts().since(&before);
    assert_eq!(
        since.get("list", "configmaps"),
        1,
        "one re-list per 410: {since:?}"
    );

    // And it keeps following changes afterwards.
    api.create(&pp, &cm("f", &[])).await.unwrap();
    converge(&s, &reader, "after the re-list").await;
    task.abort();
}

/// Reconciles a ConfigMap: copies `data.want` into the annotation `observed`.
async fn reconcile(cm: Arc<ConfigMap>, api: Arc<Api<ConfigMap>>) -> Result<Action, kube::Error> {
    let want = cm
        .data
        .as_ref()
        .and_then(|d| d.get("want"))
        .cloned()
        .unwrap_or_default();
    if cm.annotations().get("observed") != Some(&want) {
        api.patch(
            &cm.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"observed": want}}})),
        )
        .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Arc<Api<ConfigMap>>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

fn start_controller(api: &Api<ConfigMap>) -> tokio::task::JoinHandle<()> {
    let ctx = Arc::new(api.clone());
    tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| futures_util::future::ready(())),
    )
}

/// Waits until every ConfigMap named in `want` has `observed` = its value.
async fn reconciled(s: &Server, want: &[(&str, &str)]) -> bool {
    hooks::wait_for(s.shared(), EVENTUALLY, |st| {
        let gr = GroupResource::new("", "configmaps");
        want.iter()
            .all(|(n, v)| {
                st.get(&gr, Some("default"), n)
                    .is_ok_and(|o| o["metadata"]["annotations"]["observed"] == *v)
            })
            .then_some(())
    })
    .await
    .is_some()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_reconciles_again_after_a_restart() {
    let s = tls_server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client(&s).await);
    let pp = PostParams::default();
    api.create(&pp, &cm("x", &[("want", "1")])).await.unwrap();
    let first = start_controller(&api);
    assert!(reconciled(&s, &[("x", "1")]).await, "first controller");
    // The controller process "restarts": it is stopped, the world changes meanwhile.
    first.abort();
    let _ = first.await;
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"want": "2"}})),
    )
    .await
    .unwrap();
    api.create(&pp, &cm("y", &[("want", "7")])).await.unwrap();
    let before = s.controls().counts();
    let second = start_controller(&api);
    assert!(
        reconciled(&s, &[("x", "2"), ("y", "7")]).await,
        "after the restart"
    );
    // The new controller started from a fresh list, as a restarted process does.
    assert!(
        s.controls()
            .counts()
            .since(&before)
            .get("list", "configmaps")
            >= 1
    );
    second.abort();
}

/// One candidate of a Lease-based election, written with kube's `Api` and optimistic
/// concurrency (a `replace` carrying the read resourceVersion; 409 means another
/// candidate wrote first), as client-go's `leaderelection` with a `LeaseLock` does.
/// Returns whether `id` holds the lease after this attempt.
async fn try_acquire(api: &Api<Lease>, name: &str, id: &str, duration: i32) -> bool {
    let now = k8s_openapi::jiff::Timestamp::now();
    let spec = |transitions: i32| LeaseSpec {
        holder_identity: Some(id.into()),
        lease_duration_seconds: Some(duration),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let current = match api.get_opt(name).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            let l = Lease {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec(0)),
            };
            return api.create(&PostParams::default(), &l).await.is_ok();
        }
        Err(_) => return false,
    };
    let old = current.spec.clone().unwrap_or_default();
    let mine = old.holder_identity.as_deref() == Some(id);
    let expired = match (&old.renew_time, old.lease_duration_seconds) {
        (Some(t), Some(d)) => t.0.as_second() + i64::from(d) < now.as_second(),
        _ => true,
    };
    if !mine && !expired {
        return false;
    }
    let mut next = current.clone();
    let mut s = spec(old.lease_transitions.unwrap_or(0) + i32::from(!mine));
    if mine {
        s.acquire_time = old.acquire_time.clone();
    }
    next.spec = Some(s);
    api.replace(name, &PostParams::default(), &next)
        .await
        .is_ok()
}

fn candidate(
    api: Api<Lease>,
    id: &'static str,
    leader: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let held = try_acquire(&api, "machineos-controller", id, 2).await;
            leader.store(held, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn two_lease_candidates_elect_one_leader_and_the_other_takes_over() {
    let s = tls_server().await;
    let c = client(&s).await;
    let api: Api<Lease> = Api::namespaced(c, "kube-system");
    let (la, lb) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let a = candidate(api.clone(), "a", la.clone());
    let b = candidate(api.clone(), "b", lb.clone());
    let holder = |s: &Server| -> Option<String> {
        let st = s.store();
        let st = st.lock().unwrap();
        st.get(
            &GroupResource::new("coordination.k8s.io", "leases"),
            Some("kube-system"),
            "machineos-controller",
        )
        .ok()
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
    };
    // Eventually one leader, the lease's holder; never two at once.
    let end = tokio::time::Instant::now() + EVENTUALLY;
    let first = loop {
        let (x, y) = (la.load(Ordering::SeqCst), lb.load(Ordering::SeqCst));
        assert!(!(x && y), "two leaders");
        if x || y {
            break if x { "a" } else { "b" };
        }
        assert!(tokio::time::Instant::now() < end, "no leader elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(holder(&s).as_deref(), Some(first));
    // Several renewals later the same one still leads, alone.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !(la.load(Ordering::SeqCst) && lb.load(Ordering::SeqCst)),
            "two leaders"
        );
    }
    // The leader stops renewing; the other takes over once the lease expires.
    let (stop, other, other_flag) = if first == "a" {
        (a, "b", lb.clone())
    } else {
        (b, "a", la.clone())
    };
    stop.abort();
    let _ = stop.await;
    let end = tokio::time::Instant::now() + EVENTUALLY;
    while !other_flag.load(Ordering::SeqCst) {
        assert!(tokio::time::Instant::now() < end, "{other} never took over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(holder(&s).as_deref(), Some(other));
    let lease = api.get("machineos-controller").await.unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
}

/// kube-lease-manager locks an orphaned lease with a server-side apply patch and relies on
/// its field-manager conflicts.
#[tokio::test(flavor = "multi_thread")]
async fn kube_lease_manager_elects_one_leader_of_two() {
    use kube_lease_manager::LeaseManagerBuilder;
    let s = tls_server().await;
    let c = client(&s).await;
    let mut managers = Vec::new();
    for id in ["a", "b"] {
        let m = LeaseManagerBuilder::new(c.clone(), "machineos-lease")
            .with_namespace("kube-system")
            .with_identity(id)
            .with_duration(2)
            .with_grace(1)
            .build()
            .await
            .unwrap();
        managers.push(m.watch().await);
    }
    let end = tokio::time::Instant::now() + EVENTUALLY;
    let leader = loop {
        let held: Vec<bool> = managers.iter().map(|(rx, _)| *rx.borrow()).collect();
        assert!(!(held[0] && held[1]), "two leaders");
        if let Some(i) = held.iter().position(|h| *h) {
            break i;
        }
        assert!(tokio::time::Instant::now() < end, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (rx, task) = managers.remove(leader);
    drop(rx);
    let _ = task.await;
    let (rx, _task) = &managers[0];
    let end = tokio::time::Instant::now() + EVENTUALLY;
    while !*rx.borrow() {
        assert!(tokio::time::Instant::now() < end, "no take-over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Server-side apply from kube-rs (`Patch::Apply`): ownership, a conflict with another
/// manager (409), `force`, and a field the manager stops applying removed.
#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_from_kube_rs() {
    let s = tls_server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client(&s).await);
    let pp = PatchParams::apply("machineos-test");
    let o = api
        .patch(
            "ssa",
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa"}, "data": {"k": "v"}})),
        )
        .await
        .unwrap();
    assert_eq!(o.data.unwrap()["k"], "v");
    let mf = o.metadata.managed_fields.unwrap();
    assert!(
        mf.iter()
            .any(|m| m.manager.as_deref() == Some("machineos-test"))
    );
    let other = Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ssa"}, "data": {"k": "w"}}));
    let err = api
        .patch("ssa", &PatchParams::apply("other"), &other)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}");
            assert!(
                s.message.contains("conflict with \"machineos-test\""),
                "{s:?}"
            );
        }
        e => panic!("expected a 409, got {e}"),
    }
    let o = api
        .patch("ssa", &PatchParams::apply("other").force(), &other)
        .await
        .unwrap();
    assert_eq!(o.data.unwrap()["k"], "w");
    // The first manager now applies another key only: `k` belongs to "other" and stays.
    let o = api
        .patch(
            "ssa",
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa"}, "data": {"j": "x"}})),
        )
        .await
        .unwrap();
    let data = o.data.unwrap();
    assert_eq!((data["k"].as_str(), data["j"].as_str()), ("w", "x"));
    // ... and then stops applying `j`: it is removed.
    let o = api
        .patch(
            "ssa",
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa"}})),
        )
        .await
        .unwrap();
    let data = o.data.unwrap();
    assert!(!data.contains_key("j"), "{data:?}");
    assert_eq!(data["k"], "w");
}
