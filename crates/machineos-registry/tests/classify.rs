//! How a controller acts on this crate's errors: representative failures, triggered against
//! a real registry (through the fault proxy where the registry must misbehave) or
//! constructed where they cannot be provoked, with the reason and the retry decision each
//! must have, and that each value follows the convention for causes.

use std::time::Duration;

use bytes::Bytes;
use machineos_diagnostics::{Classify, Retry, check_classified};
use machineos_image::auth::{AuthError, AuthFile, Credentials};
use machineos_image::{Digest, RegistryRef};
use machineos_registry::{
    CredentialSource, MAX_MANIFEST, Missing, Registry, RegistryError, RegistryOptions, RetryPolicy,
    TransportError,
};
use machineos_testkit::{FaultAction, FaultProxy, FaultRule, TestRegistry};

use Retry::{Permanent, Transient};

/// One row: what the error is, its value, the reason and retry it must have.
struct Case<E> {
    what: &'static str,
    error: E,
    reason: &'static str,
    retry: Retry,
}

fn case<E>(what: &'static str, error: E, reason: &'static str, retry: Retry) -> Case<E> {
    Case {
        what,
        error,
        reason,
        retry,
    }
}

fn check<E: Classify + std::error::Error + 'static>(cases: Vec<Case<E>>) {
    for c in cases {
        assert_eq!(
            check_classified(&c.error, c.reason, c.retry),
            Ok(()),
            "{}",
            c.what
        );
    }
}

use machineos_testkit::runtime;

fn options() -> RegistryOptions {
    RegistryOptions {
        retry: RetryPolicy::fast(),
        ..RegistryOptions::default()
    }
}

fn status(status: u16, code: Option<&str>) -> TransportError {
    TransportError::Status {
        status,
        code: code.map(str::to_owned),
        message: String::new(),
    }
}

/// Every kind of transport failure; its retry agrees with what the retry loop retries
/// (the total deadline aside: the loop stops because time ran out, not because the request
/// cannot succeed).
#[test]
fn transport_errors() {
    let cases = vec![
        case("429", status(429, None), "RateLimited", Transient),
        case(
            "throttled",
            status(400, Some("TOOMANYREQUESTS")),
            "RateLimited",
            Transient,
        ),
        case("408", status(408, None), "RegistryTimeout", Transient),
        case("500", status(500, None), "RegistryUnavailable", Transient),
        case(
            "503",
            status(503, Some("UNAVAILABLE")),
            "RegistryUnavailable",
            Transient,
        ),
        case("401", status(401, None), "AuthRequired", Permanent),
        case("403", status(403, Some("DENIED")), "AuthDenied", Permanent),
        case(
            "404",
            status(404, Some("MANIFEST_UNKNOWN")),
            "NotFound",
            Permanent,
        ),
        case(
            "400",
            status(400, Some("MANIFEST_INVALID")),
            "RegistryRejected",
            Permanent,
        ),
        case("405", status(405, None), "RegistryRejected", Permanent),
        case(
            "302",
            status(302, None),
            "InvalidRegistryResponse",
            Permanent,
        ),
        case(
            "upload source",
            TransportError::Io(std::io::Error::other("disk read failed")),
            "UploadSourceIOError",
            Transient,
        ),
        case(
            "timeout",
            TransportError::Timeout(Duration::from_secs(1)),
            "RegistryTimeout",
            Transient,
        ),
        case(
            "deadline",
            TransportError::Deadline(Duration::from_secs(1)),
            "DeadlineExceeded",
            Transient,
        ),
        case(
            "too large",
            TransportError::TooLarge {
                what: "manifest",
                limit: 1,
            },
            "ResponseTooLarge",
            Permanent,
        ),
        case(
            "protocol",
            TransportError::Protocol("no Location".into()),
            "InvalidRegistryResponse",
            Permanent,
        ),
    ];
    for c in &cases {
        let e = &c.error;
        if !matches!(e, TransportError::Deadline(_)) {
            assert_eq!(
                e.retry() == Transient,
                e.is_transient(),
                "{}: the retry loop disagrees",
                c.what
            );
        }
    }
    check(cases);
}

/// A registry whose only credential for `host` is `user:password`.
fn credentials(host: &str, user: &str, password: &str) -> Credentials {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let file =
        AuthFile::parse(format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#).as_bytes())
            .unwrap();
    Credentials::from_files(vec![("auth.json".into(), file)])
}

#[test]
fn registry_errors() {
    let reg = TestRegistry::start_plain().unwrap();
    let secured =
        TestRegistry::start(machineos_testkit::RegistryOptions::new().with_auth("u", "p")).unwrap();
    let proxy = FaultProxy::start(
        reg.addr(),
        vec![
            FaultRule::new("/unavailable/", FaultAction::Status(503)).times(100),
            FaultRule::new("/throttled/", FaultAction::Status(429)).times(100),
            FaultRule::new("/private/", FaultAction::Status(401)).times(100),
            FaultRule::new("/forbidden/", FaultAction::Status(403)).times(100),
            FaultRule::new("/gone/blobs/uploads/", FaultAction::Status(404))
                .method("POST")
                .times(100),
            FaultRule::new("/manifests/", FaultAction::Status(405))
                .method("PUT")
                .times(100),
            FaultRule::new(
                "/huge/",
                FaultAction::Flood {
                    status: 200,
                    bytes: MAX_MANIFEST + 1,
                    length: true,
                },
            )
            .times(100),
        ],
    )
    .unwrap();
    let through = |name: &str| RegistryRef::parse(&format!("{}/{name}:1", proxy.host())).unwrap();
    let direct = |name: &str| RegistryRef::parse(&format!("{}/{name}:1", reg.host())).unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let t = tempfile::tempdir().unwrap();
    let bad_auth_file = t.path().join("auth.json");
    std::fs::write(&bad_auth_file, "{").unwrap();

    let cases = runtime().block_on(async {
        let hosts = [proxy.host(), reg.host(), closed.clone()];
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let client = Registry::connect(options(), &hosts).await.unwrap();
        let denied = Registry::connect(
            RegistryOptions {
                credentials: credentials(&secured.host(), "u", "wrong").into(),
                ..options()
            },
            &[&secured.host()],
        )
        .await
        .unwrap();
        let blob = Digest::sha256(b"a blob");
        let manifest_error = |r: RegistryRef| {
            let client = &client;
            async move { client.manifest(&r).await.unwrap_err() }
        };

        let unavailable = manifest_error(through("unavailable")).await;
        assert!(
            matches!(unavailable, RegistryError::Request { attempts: 4, .. }),
            "{unavailable}"
        );
        let required = manifest_error(through("private")).await;
        assert!(
            matches!(
                required,
                RegistryError::Unauthorized {
                    had_credentials: false,
                    ..
                }
            ),
            "{required}"
        );
        let secured_ref = RegistryRef::parse(&secured.reference("os/base:1")).unwrap();
        let wrong_password = denied.manifest(&secured_ref).await.unwrap_err();
        assert!(
            matches!(
                wrong_password,
                RegistryError::Unauthorized {
                    had_credentials: true,
                    ..
                }
            ),
            "{wrong_password}"
        );
        let no_manifest = manifest_error(direct("os/absent")).await;
        assert!(
            matches!(
                no_manifest,
                RegistryError::NotFound {
                    missing: Missing::Image,
                    ..
                }
            ),
            "{no_manifest}"
        );
        let no_blob = client
            .blob(&direct("os/base"), &blob, 64)
            .await
            .unwrap_err();
        let no_repository = client
            .push_blob(&through("gone"), Bytes::from_static(b"a blob"), &blob)
            .await
            .unwrap_err();
        let rejected = client
            .push_manifest(&through("os/derived"), b"{}", "application/json", None)
            .await
            .unwrap_err();
        let too_large = manifest_error(through("huge")).await;
        let refused =
            manifest_error(RegistryRef::parse(&format!("{closed}/os/base:1")).unwrap()).await;
        assert!(
            matches!(
                refused,
                RegistryError::Request {
                    error: TransportError::Http(_),
                    attempts: 4,
                    ..
                }
            ),
            "{refused}"
        );
        let bad_ca = Registry::connect(
            RegistryOptions {
                ca_pems: vec![b"not a certificate".to_vec()],
                ..options()
            },
            &[],
        )
        .await
        .unwrap_err();
        let unreadable = Registry::connect(
            RegistryOptions {
                credentials: CredentialSource::Files(vec![bad_auth_file.clone()]),
                ..options()
            },
            &[],
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                unreadable,
                RegistryError::Credentials(AuthError::File { .. })
            ),
            "{unreadable}"
        );

        vec![
            case("503", unavailable, "RegistryUnavailable", Transient),
            case(
                "429",
                manifest_error(through("throttled")).await,
                "RateLimited",
                Transient,
            ),
            case(
                "connection refused",
                refused,
                "RegistryUnavailable",
                Transient,
            ),
            case("401, no credentials", required, "AuthRequired", Permanent),
            case(
                "403, no credentials",
                manifest_error(through("forbidden")).await,
                "AuthRequired",
                Permanent,
            ),
            case(
                "401, wrong password",
                wrong_password,
                "AuthDenied",
                Permanent,
            ),
            case("manifest 404", no_manifest, "ImageNotFound", Permanent),
            case("blob 404", no_blob, "BlobNotFound", Permanent),
            case("upload 404", no_repository, "RepositoryNotFound", Permanent),
            case("manifest put 405", rejected, "RegistryRejected", Permanent),
            case("oversized", too_large, "ResponseTooLarge", Permanent),
            case("bad CA", bad_ca, "InvalidCACertificate", Permanent),
            case("bad auth file", unreadable, "InvalidAuthFile", Permanent),
            case(
                "digest mismatch",
                RegistryError::DigestMismatch {
                    op: "fetching manifest".into(),
                    image: "quay.io/a/b:1".into(),
                    got: Digest::sha256(b"other").to_string(),
                    want: blob.clone(),
                },
                "DigestMismatch",
                Permanent,
            ),
            case(
                "setup",
                RegistryError::Setup("no TLS backend".into()),
                "RegistryClientSetupFailed",
                Permanent,
            ),
            case(
                "deadline",
                RegistryError::Request {
                    op: "fetching manifest".into(),
                    image: "quay.io/a/b:1".into(),
                    attempts: 2,
                    error: TransportError::Deadline(Duration::from_secs(1)),
                },
                "DeadlineExceeded",
                Transient,
            ),
            case(
                "unreadable auth file",
                RegistryError::Credentials(AuthError::Read {
                    path: bad_auth_file.clone(),
                    error: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                }),
                "AuthFileIOError",
                Permanent,
            ),
        ]
    });
    check(cases);
}
