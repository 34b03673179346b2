//! Every public error classifies itself ([`Classify`]: a valid, stable reason and whether to
//! retry) and follows the workspace's convention for causes: its message tells the whole
//! story and the cause is not exposed again through `source()`
//! ([`machineos_diagnostics::check_chain`]).

use std::io;
use std::path::Path;

use machineos_diagnostics::{Classify, Retry, check_chain, is_valid_reason};
use machineos_image::{Layout, LayoutError};
use machineos_synth::{
    ExtraFile, LayerError, SpecError, SynthError, SynthSpec, TreeError, write_image,
};

/// Checks the convention on `e` and returns its reason and retry, for the caller to compare.
fn classify<E: std::error::Error + Classify + 'static>(e: &E) -> (&'static str, Retry) {
    assert_eq!(check_chain(e), Ok(()), "{e}");
    assert!(is_valid_reason(e.reason()), "{:?} for {e}", e.reason());
    assert!(e.source().is_none(), "{e} exposes a source");
    (e.reason(), e.retry())
}

fn layout_error() -> LayoutError {
    match Layout::open(Path::new("/nonexistent/machineos-synth-layout")) {
        Ok(_) => panic!("opened a layout that does not exist"),
        Err(e) => e,
    }
}

fn json_error() -> serde_json::Error {
    match serde_json::from_str::<serde_json::Value>("{") {
        Ok(v) => panic!("parsed {v}"),
        Err(e) => e,
    }
}

fn spec_errors() -> Vec<SpecError> {
    vec![
        SpecError::TooFewLayers(1),
        SpecError::TooManyLayers(128),
        SpecError::TooFewFiles { got: 10, min: 200 },
        SpecError::GzipLevel(10),
        SpecError::Version("4 1".into()),
        SpecError::ExtraPath("usr/bin/x".into()),
        SpecError::DuplicateExtra("/x".into()),
        SpecError::ExtraMode {
            path: "/x".into(),
            mode: 0o100755,
        },
    ]
}

fn tree_errors() -> Vec<(TreeError, &'static str)> {
    vec![
        (
            TreeError::TooFewFiles {
                files: 200,
                layers: 127,
                fixed: 150,
                need: 400,
            },
            "InvalidSynthSpec",
        ),
        (
            TreeError::TooFewBytes {
                total: 100,
                need: 9000,
            },
            "InvalidSynthSpec",
        ),
        (TreeError::ExtraIsDir("usr/bin".into()), "InvalidExtraFile"),
        (
            TreeError::ExtraBelowNonDir {
                path: "usr/local/bin/x".into(),
                ancestor: "usr/local".into(),
                hint: " (a symlink to ../var/usrlocal)".into(),
            },
            "InvalidExtraFile",
        ),
        (
            TreeError::ExtraOnFinalLayer("usr/lib/machineos-synth-arch".into()),
            "InvalidExtraFile",
        ),
        (TreeError::Collision("usr/bin/x".into()), "InternalError"),
    ]
}

#[test]
fn spec_errors_are_invalid_specs() {
    for e in spec_errors() {
        assert_eq!(classify(&e), ("InvalidSynthSpec", Retry::Permanent), "{e}");
    }
}

#[test]
fn tree_errors_name_the_spec_the_extra_file_or_the_generator() {
    for (e, reason) in tree_errors() {
        assert_eq!(classify(&e), (reason, Retry::Permanent), "{e}");
    }
}

#[test]
fn layer_errors_carry_their_cause_in_the_message_and_classify_by_it() {
    let full = LayerError::Io {
        index: 3,
        error: io::Error::from(io::ErrorKind::StorageFull),
    };
    assert_eq!(classify(&full), ("LayerIOError", Retry::Transient));
    assert!(
        full.to_string().starts_with("writing synthetic layer 3: "),
        "{full}"
    );
    let denied = LayerError::Io {
        index: 1,
        error: io::Error::from(io::ErrorKind::PermissionDenied),
    };
    assert_eq!(classify(&denied), ("LayerIOError", Retry::Permanent));

    let cause = layout_error();
    let want = (cause.reason(), cause.retry());
    let e = LayerError::Layout {
        index: 2,
        error: layout_error(),
    };
    assert_eq!(classify(&e), want);
    assert!(e.to_string().contains(&cause.to_string()), "{e}");
}

#[test]
fn synth_errors_classify_by_their_cause_or_as_bad_requests() {
    for e in spec_errors() {
        let e = SynthError::from(e);
        assert_eq!(classify(&e), ("InvalidSynthSpec", Retry::Permanent), "{e}");
    }
    for (e, reason) in tree_errors() {
        let e = SynthError::from(e);
        assert_eq!(classify(&e), (reason, Retry::Permanent), "{e}");
    }
    let layer = SynthError::from(LayerError::Io {
        index: 1,
        error: io::Error::from(io::ErrorKind::TimedOut),
    });
    assert_eq!(classify(&layer), ("LayerIOError", Retry::Transient));

    let cause = layout_error();
    let blob = SynthError::Blob {
        what: "manifest",
        error: layout_error(),
    };
    assert_eq!(classify(&blob), (cause.reason(), cause.retry()));
    assert!(blob.to_string().contains(&cause.to_string()), "{blob}");

    let json = SynthError::Json {
        what: "config",
        error: json_error(),
    };
    assert_eq!(classify(&json), ("InternalError", Retry::Permanent));
    assert!(
        json.to_string().contains(&json_error().to_string()),
        "{json}"
    );

    for e in [
        SynthError::NoSpecs,
        SynthError::DuplicatePlatform("linux/amd64".into()),
        SynthError::MixedMediaTypes,
    ] {
        assert_eq!(classify(&e), ("InvalidSynthSpec", Retry::Permanent), "{e}");
    }
}

#[test]
fn errors_from_generation_are_classified() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let layout = Layout::create(dir.path()).expect("creating the layout");

    let bad_spec = SynthSpec {
        gzip_level: 12,
        ..SynthSpec::example()
    };
    let e = write_image(&layout, &bad_spec).expect_err("gzip level 12 is refused");
    assert!(
        matches!(e, SynthError::Spec(SpecError::GzipLevel(12))),
        "{e:?}"
    );
    assert_eq!(classify(&e), ("InvalidSynthSpec", Retry::Permanent));

    let below_symlink = SynthSpec {
        extra_files: vec![ExtraFile {
            path: "/usr/local/bin/tool".into(),
            contents: vec![],
            mode: 0o755,
        }],
        ..SynthSpec::example()
    };
    let e = write_image(&layout, &below_symlink).expect_err("/usr/local is a symlink");
    assert!(
        matches!(&e, SynthError::Tree(TreeError::ExtraBelowNonDir { ancestor, .. }) if ancestor == "usr/local"),
        "{e:?}"
    );
    assert_eq!(classify(&e), ("InvalidExtraFile", Retry::Permanent));

    // A layout whose blobs directory is a file: the first layer cannot be stored.
    std::fs::remove_dir_all(dir.path().join("blobs")).expect("removing blobs/");
    std::fs::write(dir.path().join("blobs"), b"").expect("writing the file blobs");
    let e = write_image(&layout, &SynthSpec::example()).expect_err("blobs/ is a file");
    let SynthError::Layer(LayerError::Layout { error, .. }) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(classify(&e), (error.reason(), error.retry()));
}
