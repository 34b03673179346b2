//! Preflight checks against the real `docker-registry`: whether pulling needs credentials at
//! all (asked without them), whether the given ones pull, and whether they may push (a blob
//! upload started and cancelled) — on a TLS + htpasswd registry, an open plain-HTTP one and a
//! bearer-token front.

use base64::Engine as _;
use bytes::Bytes;
use machineos_image::auth::{AuthFile, Credentials};
use machineos_image::{Digest, RegistryRef, media_type};
use machineos_registry::{PullAccess, Registry, RegistryError, RegistryOptions, RetryPolicy};
use machineos_testkit::{FaultProxy, RegistryOptions as RegOpts, TestRegistry, runtime};

fn credentials(host: &str, user: &str, password: &str) -> Credentials {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let json = serde_json::json!({"auths": {host: {"auth": auth}}}).to_string();
    Credentials::from_files(vec![(
        "secret machineos/pull".into(),
        AuthFile::parse(json.as_bytes()).unwrap(),
    )])
}

async fn client(host: &str, ca: Option<&[u8]>, creds: Option<(&str, &str)>) -> Registry {
    Registry::connect(
        RegistryOptions {
            ca_pems: ca.map(|c| vec![c.to_vec()]).unwrap_or_default(),
            credentials: creds
                .map(|(u, p)| credentials(host, u, p))
                .unwrap_or_default()
                .into(),
            retry: RetryPolicy::fast(),
            ..RegistryOptions::default()
        },
        &[host],
    )
    .await
    .unwrap()
}

/// A one-blob image at `target`.
async fn push_image(client: &Registry, target: &RegistryRef) {
    let config = Bytes::from_static(
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#,
    );
    let digest = Digest::sha256(&config);
    client
        .push_blob(target, config.clone(), &digest)
        .await
        .unwrap();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media_type::OCI_MANIFEST,
        "config": {"mediaType": media_type::OCI_CONFIG, "digest": digest.to_string(), "size": config.len()},
        "layers": [],
    })
    .to_string();
    client
        .push_manifest(
            target,
            manifest.as_bytes(),
            media_type::OCI_MANIFEST,
            Some("1"),
        )
        .await
        .unwrap();
}

fn reference(host: &str, name: &str) -> RegistryRef {
    RegistryRef::parse(&format!("{host}/{name}")).unwrap()
}

#[test]
fn an_htpasswd_registry_needs_credentials_and_the_right_ones_pull_and_push() {
    let reg =
        TestRegistry::start(RegOpts::new().with_tls().with_auth("builder", "s3cret")).unwrap();
    runtime().block_on(async {
        let host = reg.host();
        let base = reference(&host, "base/os:1");
        let good = client(&host, Some(reg.ca_pem()), Some(("builder", "s3cret"))).await;
        push_image(&good, &base).await;
        // Asked without the credentials the client has.
        match good.pull_access(&base).await.unwrap() {
            PullAccess::AuthRequired(detail) => assert!(!detail.is_empty()),
            other => panic!("{other:?}"),
        }
        assert!(good.image_info(&base).await.unwrap().is_some());
        let check = good
            .check_push(&reference(&host, "out/worker:latest"))
            .await
            .unwrap();
        assert_eq!(check.cancel_warning, None);
        // The wrong password: refused, naming the registry.
        let bad = client(&host, Some(reg.ca_pem()), Some(("builder", "wrong"))).await;
        match bad.image_info(&base).await {
            Err(RegistryError::Unauthorized {
                registry,
                had_credentials,
                ..
            }) => {
                assert_eq!(registry, host);
                assert!(had_credentials);
            }
            other => panic!("{other:?}"),
        }
        match bad.check_push(&reference(&host, "out/worker:latest")).await {
            Err(RegistryError::Unauthorized { op, .. }) => {
                assert_eq!(op, "checking push permission")
            }
            other => panic!("{other:?}"),
        }
        // No credentials at all: the same refusal, saying none were found.
        let none = client(&host, Some(reg.ca_pem()), None).await;
        match none
            .check_push(&reference(&host, "out/worker:latest"))
            .await
        {
            Err(RegistryError::Unauthorized {
                had_credentials, ..
            }) => assert!(!had_credentials),
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn an_open_registry_pulls_anonymously_and_takes_pushes_without_credentials() {
    let reg = TestRegistry::start(RegOpts::new()).unwrap();
    runtime().block_on(async {
        let host = reg.host();
        let c = client(&host, None, None).await;
        let base = reference(&host, "base/os:1");
        push_image(&c, &base).await;
        assert_eq!(c.pull_access(&base).await.unwrap(), PullAccess::Anonymous);
        assert_eq!(c.check_push(&base).await.unwrap().cancel_warning, None);
        // A missing image is an error, not an answer about auth.
        match c.pull_access(&reference(&host, "base/os:missing")).await {
            Err(RegistryError::NotFound { .. }) => {}
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn a_token_service_front_refuses_anonymous_pulls_and_serves_the_credentials() {
    let reg = TestRegistry::start(RegOpts::new()).unwrap();
    let proxy = FaultProxy::start_with_token_auth(reg.addr(), "builder", "s3cret").unwrap();
    runtime().block_on(async {
        let host = proxy.host();
        let good = client(&host, None, Some(("builder", "s3cret"))).await;
        let base = reference(&host, "base/os:1");
        push_image(&good, &base).await;
        assert!(matches!(
            good.pull_access(&base).await.unwrap(),
            PullAccess::AuthRequired(_)
        ));
        assert!(good.image_info(&base).await.unwrap().is_some());
        good.check_push(&reference(&host, "out/worker:latest"))
            .await
            .unwrap();
    });
}
