//! A hostile or broken registry — endless manifests, blobs and error pages, a server that
//! accepts connections and never answers — costs a bounded amount of memory and time, and
//! ends in a clear error. This binary's allocator is capped (512 MiB over what it held at
//! start): reading any of these bodies whole would fail an allocation and abort the tests.

use std::time::Duration;

use machineos_diagnostics::{Classify, Retry};
use machineos_image::{Digest, RegistryRef};
use machineos_registry::{
    MAX_MANIFEST, Registry, RegistryError, RegistryOptions, RetryPolicy, Timeouts, TransportError,
};
use machineos_testkit::{FaultAction, FaultProxy, FaultRule, TestRegistry};

/// Every test of this binary together may hold at most this much more than at start.
const HEADROOM: usize = 512 << 20;

machineos_testkit::capped_allocator!(HEADROOM);

use machineos_testkit::runtime;

fn options(timeouts: Timeouts) -> RegistryOptions {
    RegistryOptions {
        retry: RetryPolicy::fast(),
        timeouts,
        ..RegistryOptions::default()
    }
}

/// The manifest `r` names, fetched through `proxy` with `timeouts`; the error it fails with.
fn manifest_error(proxy: &FaultProxy, r: &RegistryRef, timeouts: Timeouts) -> RegistryError {
    runtime()
        .block_on(async {
            Registry::connect(options(timeouts), &[&proxy.host()])
                .await?
                .manifest(r)
                .await
        })
        .unwrap_err()
}

fn flood(path: &str, method: &str, status: u16, bytes: u64, length: bool) -> FaultRule {
    FaultRule::new(
        path,
        FaultAction::Flood {
            status,
            bytes,
            length,
        },
    )
    .method(method)
    .times(100)
}

const GIB: u64 = 1 << 30;

#[test]
fn endless_manifests_are_cut_at_the_cap() {
    cap_memory();
    let reg = TestRegistry::start_plain().unwrap();
    for length in [false, true] {
        let proxy = FaultProxy::start(
            reg.addr(),
            vec![flood("/manifests/", "GET", 200, GIB, length)],
        )
        .unwrap();
        let r = RegistryRef::parse(&format!("{}/os/base:1", proxy.host())).unwrap();
        let err = manifest_error(&proxy, &r, Timeouts::default());
        match &err {
            RegistryError::Request {
                error: TransportError::TooLarge { limit, .. },
                attempts,
                ..
            } => {
                assert_eq!(*limit, MAX_MANIFEST);
                assert_eq!(*attempts, 1, "an oversized body is not retried");
            }
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("manifest is larger than"), "{err}");
        assert_eq!(
            (err.reason(), err.retry()),
            ("ResponseTooLarge", Retry::Permanent)
        );
    }
}

#[test]
fn endless_error_pages_and_blobs_are_cut_at_the_cap() {
    cap_memory();
    let reg = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(
        reg.addr(),
        vec![
            flood("/manifests/", "GET", 503, GIB, false),
            flood("/blobs/", "GET", 200, GIB, false),
        ],
    )
    .unwrap();
    let r = RegistryRef::parse(&format!("{}/os/base:1", proxy.host())).unwrap();
    runtime().block_on(async {
        let client = Registry::connect(options(Timeouts::default()), &[&proxy.host()])
            .await
            .unwrap();
        // A 503 is retried; each answer's page is read only as far as its message.
        let err = client.manifest(&r).await.unwrap_err();
        assert!(
            matches!(err, RegistryError::Request { attempts: 4, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("HTTP 503"), "{err}");
        assert_eq!(
            (err.reason(), err.retry()),
            ("RegistryUnavailable", Retry::Transient)
        );
        // A config blob is read at most as far as its descriptor's size.
        let d = Digest::sha256(b"config");
        let err = client.blob(&r, &d, 4 << 20).await.unwrap_err();
        assert!(err.to_string().contains("larger than 4194304"), "{err}");
        // A streamed blob longer than its descriptor fails as soon as it is.
        let mut s = client.blob_stream(&r, &d, Some(1 << 20)).await.unwrap();
        let mut read = 0u64;
        let failed = loop {
            match futures_util::StreamExt::next(&mut s).await {
                Some(Ok(chunk)) => read += chunk.len() as u64,
                Some(Err(e)) => break e.to_string(),
                None => panic!("the stream ended"),
            }
        };
        assert!(failed.contains("longer than"), "{failed}");
        assert!(read <= 1 << 20, "{read}");
    });
}

/// A registry that accepts connections and never answers fails in about the request
/// timeout per attempt (not 4 × 300 s), and never outlives the total deadline.
#[test]
fn a_silent_registry_times_out() {
    let reg = TestRegistry::start_plain().unwrap();
    let proxy = FaultProxy::start(
        reg.addr(),
        vec![FaultRule::new("/manifests/", FaultAction::Silence).times(100)],
    )
    .unwrap();
    let r = RegistryRef::parse(&format!("{}/os/base:1", proxy.host())).unwrap();
    let short = Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_millis(300),
        total: None,
    };
    let err = manifest_error(&proxy, &r, short);
    assert!(
        matches!(err, RegistryError::Request { attempts: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("no answer within 300ms"), "{err}");
    assert_eq!(
        (err.reason(), err.retry()),
        ("RegistryTimeout", Retry::Transient)
    );
    assert_eq!(proxy.count("GET", "/manifests/"), 4);

    // The total deadline cuts retries short.
    let deadline = Timeouts {
        request: Duration::from_secs(30),
        total: Some(Duration::from_millis(500)),
        ..short
    };
    let err = manifest_error(&proxy, &r, deadline);
    assert!(err.to_string().contains("deadline of 500ms"), "{err}");
    assert_eq!(
        (err.reason(), err.retry()),
        ("DeadlineExceeded", Retry::Transient)
    );
}
