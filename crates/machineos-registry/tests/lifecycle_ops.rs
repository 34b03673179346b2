//! The registry operations a controller's build lifecycle needs — what a reference resolves
//! to ([`Registry::image_info`]) and deleting a manifest by digest
//! ([`Registry::delete_manifest`]) — against the real `docker-registry` (TLS + htpasswd, a
//! registry with deletes disabled, a bearer-token front) and the fault proxy for transient
//! failures. Credentials come from a `kubernetes.io/dockerconfigjson` payload, as the
//! controller gets them from a push Secret.

use base64::Engine as _;
use bytes::Bytes;
use machineos_diagnostics::{Classify, Retry, check_classified};
use machineos_image::auth::{AuthFile, Credentials};
use machineos_image::{Digest, RegistryRef, media_type};
use machineos_registry::{
    DeleteOutcome, ImageInfo, Registry, RegistryError, RegistryOptions, RetryPolicy,
};
use machineos_testkit::{FaultAction, FaultProxy, FaultRule, TestRegistry, runtime};

/// The name the controller gives the credentials of a Secret (shown in auth errors).
const SECRET_SOURCE: &str = "secret machineos/push-secret";

/// The `.dockerconfigjson` bytes of a push Secret for `host`.
fn dockerconfigjson(host: &str, user: &str, password: &str) -> Vec<u8> {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    serde_json::json!({"auths": {host: {"auth": auth}}})
        .to_string()
        .into_bytes()
}

/// Credentials from a Secret's `.dockerconfigjson`, as the controller builds them.
fn secret_credentials(payload: &[u8]) -> Credentials {
    let file = AuthFile::parse(payload).unwrap();
    Credentials::from_files(vec![(SECRET_SOURCE.into(), file)])
}

/// A client for `reg` with `user:password` from a Secret and the registry's CA.
async fn client(reg: &TestRegistry, user: &str, password: &str) -> Registry {
    Registry::connect(
        RegistryOptions {
            ca_pems: vec![reg.ca_pem().to_vec()],
            credentials: secret_credentials(&dockerconfigjson(&reg.host(), user, password)).into(),
            retry: RetryPolicy::fast(),
            ..RegistryOptions::default()
        },
        &[&reg.host()],
    )
    .await
    .unwrap()
}

/// A client for a plain-HTTP `host` (a registry or a proxy), with `creds` if any.
async fn plain_client(host: &str, creds: Option<(&str, &str)>) -> Registry {
    let credentials = match creds {
        Some((u, p)) => secret_credentials(&dockerconfigjson(host, u, p)),
        None => Credentials::default(),
    };
    Registry::connect(
        RegistryOptions {
            credentials: credentials.into(),
            retry: RetryPolicy::fast(),
            ..RegistryOptions::default()
        },
        &[host],
    )
    .await
    .unwrap()
}

fn reference(host: &str, name: &str) -> RegistryRef {
    RegistryRef::parse(&format!("{host}/{name}")).unwrap()
}

/// Pushes a one-layer image manifest whose config says `architecture` to the repository of
/// `target` (tagged with `tag` if given); its digest and size.
async fn push_image(
    client: &Registry,
    target: &RegistryRef,
    architecture: &str,
    docker: bool,
    tag: Option<&str>,
) -> (Digest, u64) {
    let (manifest_type, config_type, layer_type) = if docker {
        (
            media_type::DOCKER_MANIFEST,
            media_type::DOCKER_CONFIG,
            media_type::DOCKER_LAYER_GZIP,
        )
    } else {
        (
            media_type::OCI_MANIFEST,
            media_type::OCI_CONFIG,
            media_type::OCI_LAYER_TAR,
        )
    };
    let layer = Bytes::from(format!("a layer for {architecture}").into_bytes());
    let layer_digest = Digest::sha256(&layer);
    let config = Bytes::from(
        serde_json::json!({
            "architecture": architecture,
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [layer_digest.to_string()]},
        })
        .to_string()
        .into_bytes(),
    );
    let config_digest = Digest::sha256(&config);
    client
        .push_blob(target, layer.clone(), &layer_digest)
        .await
        .unwrap();
    client
        .push_blob(target, config.clone(), &config_digest)
        .await
        .unwrap();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": manifest_type,
        "config": {
            "mediaType": config_type,
            "digest": config_digest.to_string(),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": layer_type,
            "digest": layer_digest.to_string(),
            "size": layer.len(),
        }],
    })
    .to_string();
    let digest = client
        .push_manifest(target, manifest.as_bytes(), manifest_type, tag)
        .await
        .unwrap();
    (digest, manifest.len() as u64)
}

/// Pushes an OCI index of an amd64 and an arm64 image plus an attestation entry, tagged
/// `tag`; the index digest and the two platforms' manifest digests.
async fn push_index(
    client: &Registry,
    target: &RegistryRef,
    tag: &str,
) -> (Digest, Digest, Digest) {
    let (amd64, amd64_size) = push_image(client, target, "amd64", false, None).await;
    let (arm64, arm64_size) = push_image(client, target, "arm64", false, None).await;
    let (attestation, attestation_size) = push_image(client, target, "unknown", false, None).await;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media_type::OCI_INDEX,
        "manifests": [
            {"mediaType": media_type::OCI_MANIFEST, "digest": amd64.to_string(), "size": amd64_size,
             "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": media_type::OCI_MANIFEST, "digest": arm64.to_string(), "size": arm64_size,
             "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"mediaType": media_type::OCI_MANIFEST, "digest": attestation.to_string(),
             "size": attestation_size,
             "platform": {"os": "unknown", "architecture": "unknown"},
             "annotations": {"vnd.docker.reference.type": "attestation-manifest",
                             "vnd.docker.reference.digest": amd64.to_string()}},
        ],
    })
    .to_string();
    let digest = client
        .push_manifest(target, index.as_bytes(), media_type::OCI_INDEX, Some(tag))
        .await
        .unwrap();
    (digest, amd64, arm64)
}

fn classified(e: &RegistryError, reason: &str, retry: Retry) {
    assert_eq!(check_classified(e, reason, retry), Ok(()), "{e}");
}

#[test]
fn image_info_resolves_single_images_indexes_and_absence() {
    let reg = TestRegistry::start(
        machineos_testkit::RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret"),
    )
    .unwrap();
    runtime().block_on(async {
        let client = client(&reg, "builder", "s3cret").await;

        // A single OCI manifest: the architecture comes from its config.
        let single = reference(&reg.host(), "os/single:1");
        let (digest, _) = push_image(&client, &single, "arm64", false, Some("1")).await;
        let info = client.image_info(&single).await.unwrap().unwrap();
        assert_eq!(
            info,
            ImageInfo {
                digest: digest.clone(),
                media_type: media_type::OCI_MANIFEST.to_owned(),
                architectures: vec![("arm64".to_owned(), digest.clone())],
            }
        );
        assert!(!info.is_index());
        let by_digest = client
            .image_info(&single.with_digest(digest.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(by_digest, info);

        // A Docker schema2 manifest whose config spells the architecture `x86_64`.
        let docker = reference(&reg.host(), "os/docker:1");
        let (digest, _) = push_image(&client, &docker, "x86_64", true, Some("1")).await;
        let info = client.image_info(&docker).await.unwrap().unwrap();
        assert_eq!(info.media_type, media_type::DOCKER_MANIFEST);
        assert_eq!(info.architectures, vec![("amd64".to_owned(), digest)]);

        // An index: one entry per platform, the attestation skipped.
        let multi = reference(&reg.host(), "os/multi:4.16");
        let (index, amd64, arm64) = push_index(&client, &multi, "4.16").await;
        let info = client.image_info(&multi).await.unwrap().unwrap();
        assert_eq!(info.digest, index);
        assert_eq!(info.media_type, media_type::OCI_INDEX);
        assert!(info.is_index());
        assert_eq!(
            info.architectures,
            vec![
                ("amd64".to_owned(), amd64.clone()),
                ("arm64".to_owned(), arm64.clone())
            ]
        );
        assert_eq!(info.architecture("arm64"), Some(&arm64));
        assert_eq!(info.architecture("s390x"), None);
        let platform = client
            .image_info(&multi.with_digest(amd64.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(platform.architectures, vec![("amd64".to_owned(), amd64)]);

        // Absent: a tag, a digest, a repository.
        for absent in [
            reference(&reg.host(), "os/single:2"),
            single.with_digest(Digest::sha256(b"never pushed")),
            reference(&reg.host(), "os/never:1"),
        ] {
            assert_eq!(client.image_info(&absent).await.unwrap(), None, "{absent}");
        }

        // Wrong credentials: an error, never "absent", and not worth retrying.
        let wrong = self::client(&reg, "builder", "wrong").await;
        for r in [single.clone(), reference(&reg.host(), "os/single:2")] {
            let e = wrong.image_info(&r).await.unwrap_err();
            assert!(
                matches!(
                    e,
                    RegistryError::Unauthorized {
                        had_credentials: true,
                        ..
                    }
                ),
                "{e}"
            );
            classified(&e, "AuthDenied", Retry::Permanent);
            assert!(e.to_string().contains(SECRET_SOURCE), "{e}");
        }
        // No credentials at all.
        let anonymous = Registry::connect(
            RegistryOptions {
                ca_pems: vec![reg.ca_pem().to_vec()],
                retry: RetryPolicy::fast(),
                ..RegistryOptions::default()
            },
            &[&reg.host()],
        )
        .await
        .unwrap();
        let e = anonymous.image_info(&single).await.unwrap_err();
        classified(&e, "AuthRequired", Retry::Permanent);
    });
}

#[test]
fn image_info_errors_on_unreadable_manifests_and_configs() {
    let reg = TestRegistry::start_plain().unwrap();
    runtime().block_on(async {
        let client = plain_client(&reg.host(), None).await;
        // A manifest whose config has no architecture.
        let target = reference(&reg.host(), "os/noarch:1");
        let config =
            Bytes::from_static(br#"{"os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#);
        let config_digest = Digest::sha256(&config);
        client
            .push_blob(&target, config.clone(), &config_digest)
            .await
            .unwrap();
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": media_type::OCI_MANIFEST,
            "config": {
                "mediaType": media_type::OCI_CONFIG,
                "digest": config_digest.to_string(),
                "size": config.len(),
            },
            "layers": [],
        })
        .to_string();
        client
            .push_manifest(
                &target,
                manifest.as_bytes(),
                media_type::OCI_MANIFEST,
                Some("1"),
            )
            .await
            .unwrap();
        let e = client.image_info(&target).await.unwrap_err();
        assert!(matches!(e, RegistryError::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("$.architecture"), "{e}");
        classified(&e, "InvalidManifest", Retry::Permanent);
    });
}

#[test]
fn delete_manifest_deletes_then_finds_nothing_and_tolerates_disabled_deletes() {
    let reg = TestRegistry::start(
        machineos_testkit::RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret"),
    )
    .unwrap();
    let frozen = TestRegistry::start(
        machineos_testkit::RegistryOptions::new()
            .with_tls()
            .with_auth("builder", "s3cret")
            .without_deletes(),
    )
    .unwrap();
    runtime().block_on(async {
        let client = client(&reg, "builder", "s3cret").await;
        let target = reference(&reg.host(), "os/pool-worker:rendered-1");
        let (digest, _) = push_image(&client, &target, "amd64", false, Some("rendered-1")).await;
        let (kept, _) = push_image(&client, &target, "arm64", false, Some("rendered-2")).await;

        assert_eq!(
            client.delete_manifest(&target, &digest).await.unwrap(),
            DeleteOutcome::Deleted
        );
        assert_eq!(
            client
                .image_info(&target.with_digest(digest.clone()))
                .await
                .unwrap(),
            None
        );
        // Distribution removes the tag that pointed at it; the other image stays.
        assert_eq!(client.image_info(&target).await.unwrap(), None);
        assert!(client.has_manifest(&target, &kept).await.unwrap());
        assert_eq!(
            client.delete_manifest(&target, &digest).await.unwrap(),
            DeleteOutcome::NotFound
        );
        assert_eq!(
            client
                .delete_manifest(&reference(&reg.host(), "os/never:1"), &digest)
                .await
                .unwrap(),
            DeleteOutcome::NotFound
        );

        // Wrong credentials: an error naming the operation and the image.
        let wrong = self::client(&reg, "builder", "wrong").await;
        let e = wrong.delete_manifest(&target, &kept).await.unwrap_err();
        classified(&e, "AuthDenied", Retry::Permanent);
        let text = e.to_string();
        assert!(
            text.contains(&format!("deleting manifest {kept}")) && text.contains("os/pool-worker"),
            "{text}"
        );
        assert!(client.has_manifest(&target, &kept).await.unwrap());

        // A registry with deletes disabled keeps the image and says so.
        let client = self::client(&frozen, "builder", "s3cret").await;
        let target = reference(&frozen.host(), "os/pool-worker:rendered-1");
        let (digest, _) = push_image(&client, &target, "amd64", false, Some("rendered-1")).await;
        assert_eq!(
            client.delete_manifest(&target, &digest).await.unwrap(),
            DeleteOutcome::Unsupported
        );
        assert!(client.has_manifest(&target, &digest).await.unwrap());
    });
}

#[test]
fn delete_through_a_token_service() {
    let reg = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start_with_token_auth(reg.addr(), "builder", "s3cret").unwrap();
    runtime().block_on(async {
        let client = plain_client(&proxy.host(), Some(("builder", "s3cret"))).await;
        let target = reference(&proxy.host(), "os/tokened:1");
        let (digest, _) = push_image(&client, &target, "amd64", false, Some("1")).await;
        let info = client.image_info(&target).await.unwrap().unwrap();
        assert_eq!(info.digest, digest);
        assert_eq!(
            client.delete_manifest(&target, &digest).await.unwrap(),
            DeleteOutcome::Deleted
        );
        assert_eq!(client.image_info(&target).await.unwrap(), None);
        let denied = plain_client(&proxy.host(), Some(("builder", "wrong"))).await;
        let e = denied.delete_manifest(&target, &digest).await.unwrap_err();
        classified(&e, "AuthDenied", Retry::Permanent);
    });
}

#[test]
fn transient_failures_are_retried_and_persistent_ones_are_transient_errors() {
    let reg = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(reg.addr(), Vec::new()).unwrap();
    runtime().block_on(async {
        let client = plain_client(&proxy.host(), None).await;
        let target = reference(&proxy.host(), "os/flaky:1");
        let (index, amd64, _) = push_index(&client, &target, "1").await;
        let (single, _) = push_image(&client, &target, "amd64", false, None).await;

        // Two 503s on the manifest and on the config blob: retried, then answered.
        proxy
            .set_rules(vec![
                FaultRule::new("/manifests/1", FaultAction::Status(503))
                    .method("GET")
                    .times(2),
                FaultRule::new("/blobs/", FaultAction::Status(503))
                    .method("GET")
                    .times(2),
            ])
            .unwrap();
        proxy.clear_requests();
        let info = client.image_info(&target).await.unwrap().unwrap();
        assert_eq!(info.digest, index);
        assert_eq!(info.architecture("amd64"), Some(&amd64));
        assert_eq!(proxy.count("GET", "/manifests/1"), 3);
        let info = client
            .image_info(&target.with_digest(single.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            info.architectures,
            vec![("amd64".to_owned(), single.clone())]
        );
        assert_eq!(proxy.count("GET", "/blobs/"), 3);

        // A 503 and a reset on the delete: retried, then deleted.
        proxy
            .set_rules(vec![
                FaultRule::new("/manifests/", FaultAction::Status(503)).method("DELETE"),
                FaultRule::new("/manifests/", FaultAction::ResetAfterBody(0)).method("DELETE"),
            ])
            .unwrap();
        proxy.clear_requests();
        assert_eq!(
            client.delete_manifest(&target, &single).await.unwrap(),
            DeleteOutcome::Deleted
        );
        assert_eq!(proxy.count("DELETE", "/manifests/"), 3);

        // A registry that stays unavailable: an error (never "absent", never "deleted"),
        // after every attempt, that says trying again later may help.
        proxy
            .set_rules(vec![
                FaultRule::new("/manifests/", FaultAction::Status(503)).times(100),
            ])
            .unwrap();
        let e = client.image_info(&target).await.unwrap_err();
        assert!(
            matches!(e, RegistryError::Request { attempts: 4, .. }),
            "{e}"
        );
        classified(&e, "RegistryUnavailable", Retry::Transient);
        assert_eq!(e.retry(), Retry::Transient);
        let e = client.delete_manifest(&target, &index).await.unwrap_err();
        classified(&e, "RegistryUnavailable", Retry::Transient);
        assert!(e.to_string().contains("deleting manifest"), "{e}");
    });
}
