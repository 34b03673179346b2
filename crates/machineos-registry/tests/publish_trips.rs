//! The round trips of publishing, counted through the fault proxy in front of the real
//! `docker-registry`: a small blob goes up in the `PUT` that closes its session (no
//! `PATCH`), its existence check and the session's opening go out together (a present blob
//! costs a cancelled session, not an upload), and a manifest pushed by digest is read back
//! only when the registry's answer does not name the digest it stored.

use bytes::Bytes;
use machineos_image::{Digest, RegistryRef, media_type};
use machineos_registry::{Registry, RegistryOptions, RetryPolicy};
use machineos_testkit::{FaultAction, FaultProxy, FaultRule, TestRegistry, runtime};

fn client() -> Registry {
    Registry::new(RegistryOptions {
        retry: RetryPolicy::fast(),
        ..RegistryOptions::default()
    })
    .unwrap()
}

fn manifest(config: &Bytes, layer: &Bytes) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media_type::OCI_MANIFEST,
        "config": {
            "mediaType": media_type::OCI_CONFIG,
            "digest": Digest::sha256(config).to_string(),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": media_type::OCI_LAYER_GZIP,
            "digest": Digest::sha256(layer).to_string(),
            "size": layer.len(),
        }],
    }))
    .unwrap()
}

#[test]
fn a_small_blob_takes_two_round_trips_and_a_present_one_no_upload() {
    let reg = TestRegistry::start_plain().expect("registry");
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let r = RegistryRef::parse(&format!("{}/trips/blob:1", proxy.host())).unwrap();
    let c = client();
    let blob = Bytes::from(vec![7u8; 200_000]);
    let digest = Digest::sha256(&blob);
    runtime().block_on(async {
        c.push_blob(&r, blob.clone(), &digest).await.unwrap();
    });
    // HEAD and POST side by side, then the bytes in the closing PUT.
    assert_eq!(proxy.count("HEAD", "/blobs/"), 1);
    assert_eq!(proxy.count("POST", "/blobs/uploads/"), 1);
    assert_eq!(proxy.count("PATCH", ""), 0);
    assert_eq!(proxy.count("PUT", "/blobs/uploads/"), 1);
    assert_eq!(proxy.count("DELETE", ""), 0);
    let direct = RegistryRef::parse(&format!("{}/trips/blob:1", reg.host())).unwrap();
    assert!(runtime().block_on(c.has_blob(&direct, &digest)).unwrap());

    // Again: present, so the opened session is cancelled and nothing is uploaded.
    proxy.clear_requests();
    runtime().block_on(async {
        c.push_blob(&r, blob.clone(), &digest).await.unwrap();
    });
    assert_eq!(proxy.count("PUT", ""), 0, "{:#?}", proxy.requests());
    assert_eq!(proxy.count("PATCH", ""), 0);
    assert_eq!(proxy.count("DELETE", "/blobs/uploads/"), 1);
}

#[test]
fn a_manifest_is_read_back_only_when_the_answer_does_not_prove_its_digest() {
    let reg = TestRegistry::start_plain().expect("registry");
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).expect("proxy");
    let c = client();
    let (config, layer) = (Bytes::from_static(b"{}"), Bytes::from_static(b"layer"));
    let body = manifest(&config, &layer);
    let want = Digest::sha256(&body);
    let r = RegistryRef::parse(&format!("{}/trips/manifest:v1", proxy.host())).unwrap();
    runtime().block_on(async {
        for b in [&config, &layer] {
            c.push_blob(&r, b.clone(), &Digest::sha256(b))
                .await
                .unwrap();
        }
    });

    // docker-registry names the digest (Docker-Content-Digest and the Location): no HEAD
    // or GET of the manifest, the PUT by digest then the PUT of the tag.
    proxy.clear_requests();
    let got = runtime()
        .block_on(c.push_manifest(&r, &body, media_type::OCI_MANIFEST, Some("v1")))
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(proxy.count("PUT", "/manifests/"), 2);
    assert_eq!(proxy.count("HEAD", "/manifests/"), 0);
    assert_eq!(proxy.count("GET", "/manifests/"), 0);

    // An answer that names nothing: what the registry serves is read back before the tag.
    proxy
        .set_rules(vec![
            FaultRule::new(
                "/manifests/",
                FaultAction::StripHeaders(vec!["docker-content-digest".into(), "location".into()]),
            )
            .method("PUT")
            .times(10),
        ])
        .unwrap();
    proxy.clear_requests();
    let r2 = RegistryRef::parse(&format!("{}/trips/manifest:v2", proxy.host())).unwrap();
    let got = runtime()
        .block_on(c.push_manifest(&r2, &body, media_type::OCI_MANIFEST, Some("v2")))
        .unwrap();
    assert_eq!(got, want);
    let seen: Vec<String> = proxy
        .requests()
        .iter()
        .map(|q| format!("{} {}", q.method, q.path))
        .collect();
    assert_eq!(proxy.count("HEAD", "/manifests/"), 1, "{seen:#?}");
    let by_digest = seen
        .iter()
        .position(|s| s.starts_with("PUT") && s.contains(want.as_str()));
    let read_back = seen.iter().position(|s| s.starts_with("HEAD"));
    let tag = seen
        .iter()
        .position(|s| s.starts_with("PUT") && s.ends_with("/manifests/v2"));
    assert!(
        by_digest < read_back && read_back < tag && by_digest.is_some(),
        "{seen:#?}"
    );
}
