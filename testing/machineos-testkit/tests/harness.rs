//! Checks the harness against the real tools: a TLS + auth registry, the fault proxy's
//! actions and request log, skopeo/umoci round trips, and cleanup on drop.

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use machineos_testkit::{
    CopyOptions, FaultAction, FaultProxy, FaultRule, RegistryOptions, SeenRequest, TestRegistry,
    diff, skopeo_copy, skopeo_inspect_raw, snapshot, umoci, umoci_unpack,
};

fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// An OCI layout at `layout` with tag `v1`: one layer holding `/hello` and `/etc/motd`.
fn make_layout(layout: &Path, scratch: &Path) {
    let layout_s = layout.to_str().unwrap();
    umoci(&["init", "--layout", layout_s]).unwrap();
    umoci(&["new", "--image", &format!("{layout_s}:v1")]).unwrap();
    std::fs::create_dir_all(scratch.join("etc")).unwrap();
    std::fs::write(scratch.join("etc/motd"), "welcome\n").unwrap();
    std::fs::write(scratch.join("hello"), "hello world\n").unwrap();
    for (src, dest) in [("etc", "/etc"), ("hello", "/hello")] {
        umoci(&[
            "insert",
            "--image",
            &format!("{layout_s}:v1"),
            scratch.join(src).to_str().unwrap(),
            dest,
        ])
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_auth_registry_serves_skopeo_and_rejects_wrong_credentials() {
    let registry = TestRegistry::start(
        RegistryOptions::new()
            .with_tls()
            .with_auth("alice", "s3cret"),
    )
    .unwrap();
    assert!(registry.url().starts_with("https://127.0.0.1:"));
    assert_eq!(registry.host(), registry.addr().to_string());
    assert_eq!(registry.credentials(), Some(("alice", "s3cret")));
    let cert_dir = registry.cert_dir().unwrap();
    assert_eq!(registry.ca_path().unwrap(), cert_dir.join("ca.crt"));
    assert_eq!(
        std::fs::read(cert_dir.join("ca.crt")).unwrap(),
        registry.ca_pem()
    );
    assert!(
        registry
            .ca_pem()
            .starts_with(b"-----BEGIN CERTIFICATE-----")
    );

    // skopeo trusts the CA via --cert-dir and logs in; the image itself is missing.
    let missing = registry.reference("missing/image:v1");
    let err =
        skopeo_inspect_raw(&missing, Some(cert_dir), registry.credentials(), true).unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("missing/image"), "{message}");
    assert!(message.contains("manifest unknown"), "{message}");

    let client = registry.http_client().unwrap();
    let v2 = format!("{}/v2/", registry.url());
    let wrong = client
        .get(&v2)
        .basic_auth("alice", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let challenge = wrong.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("machineos-test"), "{challenge}");
    let right = client
        .get(&v2)
        .basic_auth("alice", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);

    // A client without the CA must not get through.
    let e = plain_client().get(&v2).send().await.unwrap_err();
    assert!(e.is_connect(), "a TLS failure on connecting, not {e:?}");
}

#[test]
fn skopeo_round_trip_through_proxy_and_tls_registry() {
    let work = tempfile::tempdir().unwrap();
    let layout = work.path().join("layout");
    make_layout(&layout, &work.path().join("scratch"));
    let src = format!("oci:{}:v1", layout.display());

    // Push through the proxy to a plain registry: uploads, HEADs, Location headers.
    let plain = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(plain.addr(), Vec::new()).unwrap();
    skopeo_copy(
        &src,
        &proxy.reference("test/img:v1"),
        &CopyOptions::new().dest_tls_verify(false),
    )
    .unwrap();
    assert!(proxy.count("PUT", "/manifests/v1") >= 1);
    assert!(proxy.count("", "/blobs/") >= 1);
    assert!(
        proxy
            .requests()
            .iter()
            .all(|r| !r.faulted && r.status.is_some())
    );
    let raw = skopeo_inspect_raw(&plain.reference("test/img:v1"), None, None, false).unwrap();
    assert!(raw.contains("\"layers\""), "{raw}");

    // Copy it on to a TLS + auth registry and back into a layout, then unpack both.
    let secure =
        TestRegistry::start(RegistryOptions::new().with_tls().with_auth("bob", "pw")).unwrap();
    skopeo_copy(
        &plain.reference("test/img:v1"),
        &secure.reference("test/img:v1"),
        &CopyOptions::new()
            .src_registry(&plain)
            .dest_registry(&secure),
    )
    .unwrap();
    let back = work.path().join("back");
    skopeo_copy(
        &secure.reference("test/img:v1"),
        &format!("oci:{}:v1", back.display()),
        &CopyOptions::new().src_registry(&secure),
    )
    .unwrap();

    umoci_unpack(&layout, "v1", &work.path().join("unpacked-a")).unwrap();
    umoci_unpack(&back, "v1", &work.path().join("unpacked-b")).unwrap();
    let a = snapshot(&work.path().join("unpacked-a/rootfs"));
    let b = snapshot(&work.path().join("unpacked-b/rootfs"));
    assert_eq!(a["/hello"].size, 12);
    assert!(a.contains_key("/etc/motd"));
    assert_eq!(diff(&a, &b), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn status_rule_fires_times_then_forwarding_resumes() {
    let registry = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(
        registry.addr(),
        vec![
            FaultRule::new("/v2/", FaultAction::Status(503))
                .method("GET")
                .times(2),
            FaultRule::new("/v2/", FaultAction::Status(401)).method("HEAD"),
        ],
    )
    .unwrap();
    let client = plain_client();
    let v2 = format!("{}/v2/", proxy.url());
    for _ in 0..2 {
        let resp = client.get(&v2).send().await.unwrap();
        assert_eq!(resp.status(), 503);
        let body: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert_eq!(body["errors"][0]["code"], "UNAVAILABLE");
    }
    let resp = client.get(&v2).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["docker-distribution-api-version"],
        "registry/2.0"
    );

    let head = client.head(&v2).send().await.unwrap();
    assert_eq!(head.status(), 401);
    assert_eq!(
        head.headers()["www-authenticate"],
        "Basic realm=\"machineos-test\""
    );
    assert_eq!(client.head(&v2).send().await.unwrap().status(), 200);

    let seen = |method: &str, status, faulted| SeenRequest {
        method: method.to_owned(),
        path: "/v2/".to_owned(),
        status: Some(status),
        faulted,
    };
    assert_eq!(
        proxy.requests(),
        [
            seen("GET", 503, true),
            seen("GET", 503, true),
            seen("GET", 200, false),
            seen("HEAD", 401, true),
            seen("HEAD", 200, false),
        ]
    );
    assert_eq!(proxy.count("get", "/v2/"), 3);
    assert_eq!(proxy.count("", "/v2/"), 5);
    proxy.clear_requests();
    assert!(proxy.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn reset_after_body_drops_the_upload_then_uploads_resume() {
    let registry = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(
        registry.addr(),
        vec![FaultRule::new("/blobs/uploads/", FaultAction::ResetAfterBody(1024)).method("PATCH")],
    )
    .unwrap();
    let client = plain_client();

    let start = client
        .post(format!("{}/v2/test/reset/blobs/uploads/", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status(), 202);
    // The client's Host reaches the registry, so the session URL points at the proxy.
    let location = start.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&proxy.url()), "{location}");

    let blob = vec![7u8; 256 * 1024];
    let err = client
        .patch(&location)
        .header("content-type", "application/octet-stream")
        .body(blob.clone())
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_status(), "{err:?}");
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    let mut io_kind = None;
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        source = cause.source();
    }
    assert!(
        matches!(
            io_kind,
            Some(std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe)
        ),
        "{err:?}"
    );

    // The rule is used up: the same upload now goes through and completes.
    let patched = client
        .patch(&location)
        .header("content-type", "application/octet-stream")
        .body(blob.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 202);
    let next = patched.headers()["location"].to_str().unwrap().to_owned();
    let digest = {
        use sha2::Digest;
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(&blob)))
    };
    let sep = if next.contains('?') { '&' } else { '?' };
    let put = client
        .put(format!("{next}{sep}digest={digest}"))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let head = client
        .head(format!("{}/v2/test/reset/blobs/{digest}", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "262144");

    let patches: Vec<SeenRequest> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 2);
    assert!(patches[0].faulted && patches[0].status.is_none());
    assert!(!patches[1].faulted && patches[1].status == Some(202));
}

// Default (current-thread) flavor: the harness must not need a multi-thread runtime.
#[tokio::test]
async fn delay_rule_delays_then_forwards() {
    let registry = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(
        registry.addr(),
        vec![FaultRule::new(
            "/v2/",
            FaultAction::Delay(Duration::from_millis(300)),
        )],
    )
    .unwrap();
    let begun = Instant::now();
    let resp = plain_client()
        .get(format!("{}/v2/", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(begun.elapsed() >= Duration::from_millis(300));
    let log = proxy.requests();
    assert!(log[0].faulted && log[0].status == Some(200));
}

#[test]
fn registry_is_killed_and_cleaned_up_on_drop() {
    let registry = TestRegistry::start_plain().unwrap();
    let addr = registry.addr();
    let storage = registry.storage_dir().to_path_buf();
    let pid = registry.pid();
    TcpStream::connect(addr).expect("the registry answers");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    drop(registry);
    let e = TcpStream::connect(addr).expect_err("the registry is gone");
    assert_eq!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{addr}: {e}"
    );
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(!storage.exists());
}

#[test]
fn proxy_stops_on_drop_and_works_without_a_runtime() {
    let registry = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(registry.addr(), Vec::new()).unwrap();
    let addr = proxy.addr();
    TcpStream::connect(addr).expect("the proxy answers");
    drop(proxy);
    let e = TcpStream::connect(addr).expect_err("the proxy is gone");
    assert_eq!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{addr}: {e}"
    );
}

// Default (current-thread) flavor: the harness must not need a multi-thread runtime.
#[tokio::test]
async fn relative_urls_option_gives_relative_locations() {
    let registry = TestRegistry::start(RegistryOptions::new().with_relative_urls()).unwrap();
    let resp = plain_client()
        .post(format!("{}/v2/test/rel/blobs/uploads/", registry.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let location = resp.headers()["location"].to_str().unwrap();
    assert!(
        location.starts_with("/v2/test/rel/blobs/uploads/"),
        "{location}"
    );
    assert!(registry.cert_dir().is_none() && registry.ca_pem().is_empty());
}
