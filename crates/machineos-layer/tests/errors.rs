//! Every public error of the crate as a controller sees it: each variant prints its whole
//! story and exposes no cause through `source()` (the workspace's convention), has a reason
//! valid as a Kubernetes condition reason, and retries only where retrying unchanged can
//! succeed — through every wrapper, from a base read that timed out up to `LayerError`.

use std::io::{self, ErrorKind};

use machineos_diagnostics::{Classify, Retry, check_chain, is_valid_reason};
use machineos_ignition::resource::FetchError;
use machineos_layer::contents::ContentsError;
use machineos_layer::overlay::OverlayError;
use machineos_layer::plan::PlanError;
use machineos_layer::write::{LayerOptions, WriteError};
use machineos_layer::{BaseError, BaseView, LayerError, Node, plan_ignition, prepare};

fn io_base(kind: ErrorKind) -> BaseError {
    BaseError::Io {
        path: "/etc/passwd".into(),
        source: io::Error::from(kind),
    }
}

fn conflict() -> PlanError {
    PlanError::Conflict {
        path: "$.storage.files.0".into(),
        message:
            "error creating file \"/etc/a\": A file exists there already and overwrite is false"
                .into(),
    }
}

fn overlay(e: OverlayError) -> PlanError {
    PlanError::Overlay {
        path: "$.storage.directories.0".into(),
        what: "failed to create directory /etc/a".into(),
        error: Box::new(e),
    }
}

fn layer_error(config: &str) -> LayerError {
    match prepare(config.as_bytes(), "test.ign") {
        Err(e) => e,
        Ok(p) => panic!("{config} prepared: {:?}", p.warnings),
    }
}

/// A child config whose bytes do not match its hash.
fn child_error() -> LayerError {
    let zeros = "0".repeat(128);
    let e = layer_error(&format!(
        r#"{{"ignition":{{"version":"3.5.0","config":{{"merge":[{{"source":"data:,%7B%7D",
            "verification":{{"hash":"sha512-{zeros}"}}}}]}}}}}}"#
    ));
    assert!(matches!(e, LayerError::Child { .. }), "{e:?}");
    e
}

/// A base whose every read fails with `kind`.
struct Failing(ErrorKind);

impl BaseView for Failing {
    fn lstat(&self, path: &str) -> Result<Option<Node>, BaseError> {
        Err(BaseError::Io {
            path: path.into(),
            source: io::Error::from(self.0),
        })
    }
    fn read(&self, path: &str) -> Result<Vec<u8>, BaseError> {
        self.lstat(path).map(|_| Vec::new())
    }
    fn children(&self, path: &str) -> Result<Vec<String>, BaseError> {
        self.lstat(path).map(|_| Vec::new())
    }
    fn hard_link_group(&self, _: u64) -> Result<Vec<String>, BaseError> {
        Ok(Vec::new())
    }
}

fn plan_error(base: &dyn BaseView) -> LayerError {
    let config = br#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a"}]}}"#;
    match plan_ignition(config, "test.ign", base) {
        Err(e @ LayerError::Plan { .. }) => e,
        other => panic!("{other:?}"),
    }
}

/// An error as a controller holds it.
trait Classified: Classify + std::error::Error {}

impl<E: Classify + std::error::Error> Classified for E {}

/// One value of every variant.
fn every_variant() -> Vec<Box<dyn Classified>> {
    vec![
        Box::new(io_base(ErrorKind::TimedOut)),
        Box::new(BaseError::NotAFile {
            path: "/etc".into(),
        }),
        Box::new(ContentsError::TooLarge { len: 2, max: 1 }),
        Box::new(ContentsError::Io(io::Error::other("short"))),
        Box::new(OverlayError::Base(io_base(ErrorKind::NotFound))),
        Box::new(OverlayError::NotADirectory("/etc/a".into())),
        Box::new(OverlayError::Loop("/etc/a".into())),
        Box::new(OverlayError::Contents(
            "/etc/passwd".into(),
            ContentsError::TooLarge { len: 2, max: 1 },
        )),
        Box::new(OverlayError::DanglingLink("/etc/a".into())),
        Box::new(conflict()),
        Box::new(PlanError::Resource {
            path: "$.storage.files.0.contents".into(),
            what: "failed to create file \"/etc/a\"".into(),
            error: Box::new(FetchError::Compression),
        }),
        Box::new(overlay(OverlayError::NotADirectory("/etc/a".into()))),
        Box::new(PlanError::Emit(Box::new(OverlayError::DanglingLink(
            "/etc/a".into(),
        )))),
        Box::new(WriteError::Io(io::Error::from(ErrorKind::StorageFull))),
        Box::new(WriteError::SourceDateEpoch("soon".into())),
        Box::new(WriteError::MtimeOutOfRange(u64::MAX)),
        Box::new(parse_error()),
        Box::new(invalid_error()),
        Box::new(child_error()),
        Box::new(plan_error(&Failing(ErrorKind::TimedOut))),
    ]
}

/// An empty config.
fn parse_error() -> LayerError {
    let e = layer_error("");
    assert!(matches!(e, LayerError::Parse { .. }), "{e:?}");
    e
}

/// A relative path.
fn invalid_error() -> LayerError {
    let e = layer_error(r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"a"}]}}"#);
    assert!(matches!(e, LayerError::Invalid { .. }), "{e:?}");
    e
}

#[test]
fn every_variant_follows_the_convention_for_causes_and_has_a_valid_reason() {
    let all = every_variant();
    assert_eq!(all.len(), 20);
    for e in &all {
        let error: &dyn std::error::Error = e.as_ref();
        let shown = error.to_string();
        assert_eq!(check_chain(error), Ok(()), "{shown}");
        assert!(
            error.source().is_none(),
            "{shown}: a cause through source()"
        );
        assert!(is_valid_reason(e.reason()), "{shown}: {:?}", e.reason());
    }
}

#[test]
fn reasons_and_retries() {
    use Retry::{Permanent, Transient};
    let table: Vec<(Box<dyn Classify>, &str, Retry)> = vec![
        (
            Box::new(io_base(ErrorKind::TimedOut)),
            "BaseUnreadable",
            Transient,
        ),
        (
            Box::new(io_base(ErrorKind::PermissionDenied)),
            "BaseUnreadable",
            Permanent,
        ),
        // Through every wrapper: a base read timing out while planning.
        (
            Box::new(plan_error(&Failing(ErrorKind::TimedOut))),
            "BaseUnreadable",
            Transient,
        ),
        (
            Box::new(plan_error(&Failing(ErrorKind::InvalidData))),
            "BaseUnreadable",
            Permanent,
        ),
        (
            Box::new(overlay(OverlayError::Loop("/etc/a".into()))),
            "ConflictWithBase",
            Permanent,
        ),
        (Box::new(conflict()), "ConflictWithBase", Permanent),
        (
            Box::new(PlanError::Resource {
                path: "$.storage.files.0.contents".into(),
                what: "failed to create file \"/etc/a\"".into(),
                error: Box::new(FetchError::Compression),
            }),
            "UnsupportedCompression",
            Permanent,
        ),
        (Box::new(child_error()), "HashMismatch", Permanent),
        (
            Box::new(OverlayError::DanglingLink("/etc/a".into())),
            "InternalError",
            Permanent,
        ),
        (
            Box::new(ContentsError::TooLarge { len: 2, max: 1 }),
            "ContentsTooLarge",
            Permanent,
        ),
        (
            Box::new(WriteError::Io(io::Error::from(ErrorKind::StorageFull))),
            "LayerWriteFailed",
            Transient,
        ),
        (
            Box::new(WriteError::Io(io::Error::from(ErrorKind::PermissionDenied))),
            "LayerWriteFailed",
            Permanent,
        ),
        (
            Box::new(LayerOptions::from_source_date_epoch(Some("soon")).expect_err("not a number")),
            "InvalidSourceDateEpoch",
            Permanent,
        ),
        (Box::new(layer_error("{")), "InvalidConfig", Permanent),
        (
            Box::new(layer_error(r#"{"ignition":{"version":"3.9.0"}}"#)),
            "UnsupportedSpecVersion",
            Permanent,
        ),
        (
            Box::new(layer_error(
                r#"{"ignition":{"version":"3.5.0","config":{"merge":[{"source":"https://example.com/c.ign"}]}}}"#,
            )),
            "UnsupportedSource",
            Permanent,
        ),
    ];
    for (i, (e, reason, retry)) in table.iter().enumerate() {
        assert_eq!((e.reason(), e.retry()), (*reason, *retry), "row {i}");
        assert_eq!(e.is_transient(), *retry == Transient, "row {i}");
    }
}

#[test]
fn messages_keep_their_text() {
    assert_eq!(
        io_base(ErrorKind::TimedOut).to_string(),
        "reading base /etc/passwd: timed out"
    );
    assert_eq!(
        BaseError::NotAFile {
            path: "/etc".into()
        }
        .to_string(),
        "reading base /etc: not a regular file"
    );
    assert_eq!(
        overlay(OverlayError::NotADirectory("/etc/a".into())).to_string(),
        "error at $.storage.directories.0: failed to create directory /etc/a: /etc/a: not a directory"
    );
    assert_eq!(
        PlanError::Emit(Box::new(OverlayError::DanglingLink("/etc/a".into(),))).to_string(),
        "error at $: /etc/a: a hard link of the layer points here, but the layer has no file here"
    );
    assert_eq!(
        plan_error(&Failing(ErrorKind::TimedOut)).to_string(),
        "test.ign: error at $.storage.files.0: resolving path: reading base /etc: timed out"
    );
    assert_eq!(
        WriteError::from(io::Error::from(ErrorKind::StorageFull)).to_string(),
        "writing layer: no storage space"
    );
}
