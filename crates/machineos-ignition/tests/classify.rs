//! Every public error of machineos-ignition classified for a controller: a stable reason
//! valid as a Kubernetes condition reason, permanent (nothing here does I/O), and a message
//! that tells its whole story without also exposing the cause as `source()`.

use machineos_diagnostics::{Classify, Retry, check_chain, is_valid_reason};
use machineos_ignition::children::{ChildError, resolve};
use machineos_ignition::dataurl::{self, DataUrlError};
use machineos_ignition::model::Resource;
use machineos_ignition::resource::{FetchError, fetch};
use machineos_ignition::{ParseError, ValidationError, parse, validate};

/// Asserts the convention for causes and the reason format, then returns the classification.
fn classified<E: Classify + std::error::Error + 'static>(e: &E) -> (&'static str, Retry) {
    assert_eq!(check_chain(e), Ok(()), "{e}");
    assert!(is_valid_reason(e.reason()), "{:?} for {e}", e.reason());
    (e.reason(), e.retry())
}

fn source(url: &str) -> Resource {
    Resource {
        source: Some(url.into()),
        ..Default::default()
    }
}

fn child_error(config: &str) -> ChildError {
    match resolve(parse(config.as_bytes()).unwrap().config) {
        Err(e) => e,
        Ok((c, _)) => panic!("{config}: resolved to {c:?}"),
    }
}

#[test]
fn parse_errors() {
    let cases: &[(&str, &str)] = &[
        ("", "EmptyConfig"),
        // Ignition's ErrEmpty is for zero bytes only: whitespace is invalid JSON.
        (" \n", "InvalidConfig"),
        ("{", "InvalidConfig"),
        ("{}", "InvalidConfig"),
        (r#"{"ignition":{"version":"3"}}"#, "InvalidConfig"),
        (
            r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","mode":"0644"}]}}"#,
            "InvalidConfig",
        ),
        (
            r#"{"ignition":{"version":"2.2.0"}}"#,
            "UnsupportedSpecVersion",
        ),
        (
            r#"{"ignition":{"version":"3.6.0-experimental"}}"#,
            "UnsupportedSpecVersion",
        ),
        (
            r#"{"ignition":{"version":"3.7.0"}}"#,
            "UnsupportedSpecVersion",
        ),
    ];
    for (input, reason) in cases {
        let e = parse(input.as_bytes()).unwrap_err();
        assert_eq!(classified(&e), (*reason, Retry::Permanent), "{input}: {e}");
    }
    assert_eq!(parse(b"").unwrap_err(), ParseError::Empty);
    assert_eq!(ParseError::Empty.to_string(), "not a config (empty)");
    // Every variant, constructed.
    let all = [
        (ParseError::Empty, "EmptyConfig"),
        (
            ParseError::Json {
                message: "EOF".into(),
                line: 1,
                column: 1,
            },
            "InvalidConfig",
        ),
        (ParseError::InvalidVersion, "InvalidConfig"),
        (
            ParseError::UnknownVersion("2.2.0".into()),
            "UnsupportedSpecVersion",
        ),
        (
            ParseError::Type {
                path: "$.storage".into(),
                message: "invalid type".into(),
            },
            "InvalidConfig",
        ),
    ];
    for (e, reason) in all {
        assert_eq!(classified(&e), (reason, Retry::Permanent), "{e}");
    }
}

#[test]
fn validation_errors() {
    let cfg = r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/a"}]}}"#;
    let e = validate(&parse(cfg.as_bytes()).unwrap().config).unwrap_err();
    assert_eq!(
        e,
        ValidationError {
            path: "$.storage.files.0.path".into(),
            message: "path not absolute".into()
        }
    );
    assert_eq!(classified(&e), ("InvalidConfig", Retry::Permanent));
}

#[test]
fn data_url_and_fetch_errors() {
    let e = dataurl::decode("data:,a b").unwrap_err();
    assert_eq!(e, DataUrlError("invalid data character".into()));
    assert_eq!(classified(&e), ("InvalidDataUrl", Retry::Permanent));

    let sha_hello = "sha256-5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
    let hashed = |url: &str, hash: &str| Resource {
        verification: machineos_ignition::model::Verification {
            hash: Some(hash.into()),
        },
        ..source(url)
    };
    let gzip = Resource {
        compression: Some("gzip".into()),
        ..source("data:,hello")
    };
    let xz = Resource {
        compression: Some("xz".into()),
        ..source("data:,hello")
    };
    // Representative failures, from the API.
    let cases: Vec<(Resource, u64, &str)> = vec![
        (source("data:;base64,aGk"), 1 << 20, "InvalidDataUrl"),
        (
            source("https://example.com/x"),
            1 << 20,
            "UnsupportedSource",
        ),
        (source("s3://bucket/x"), 1 << 20, "UnsupportedSource"),
        (gzip, 1 << 20, "InvalidGzip"),
        (xz, 1 << 20, "UnsupportedCompression"),
        (hashed("data:,hello", sha_hello), 1 << 20, "HashMismatch"),
        (
            hashed("data:,hello", "md5-00"),
            1 << 20,
            "InvalidVerificationHash",
        ),
        (source("data:,hello"), 2, "ContentsTooLarge"),
    ];
    for (res, max, reason) in cases {
        let e = fetch(&res, max).unwrap_err();
        assert_eq!(classified(&e), (reason, Retry::Permanent), "{res:?}: {e}");
    }
    // The data: URL error is in the message once, and not also the source().
    let e = FetchError::from(DataUrlError("missing comma before data".into()));
    assert_eq!(
        e.to_string(),
        "decoding data URL: missing comma before data"
    );
    assert!(std::error::Error::source(&e).is_none(), "{e}");
}

#[test]
fn child_errors() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"ignition":{"version":"3.3.0","config":{"merge":[{"source":"https://example.com/c.ign"}]}}}"#,
            "UnsupportedSource",
        ),
        (
            r#"{"ignition":{"version":"3.3.0","config":{"replace":{"source":"data:,a b"}}}}"#,
            "InvalidDataUrl",
        ),
        (
            r#"{"ignition":{"version":"3.3.0","config":{"merge":[{"source":"data:,notjson"}]}}}"#,
            "InvalidConfig",
        ),
        (
            r#"{"ignition":{"version":"3.3.0","config":{"merge":[{"source":"data:,%7B%22ignition%22:%7B%22version%22:%222.2.0%22%7D%7D"}]}}}"#,
            "UnsupportedSpecVersion",
        ),
        (
            r#"{"ignition":{"version":"3.3.0","config":{"merge":[{"source":"data:,%7B%22ignition%22:%7B%22version%22:%223.3.0%22%7D,%22storage%22:%7B%22files%22:%5B%7B%22path%22:%22a%22%7D%5D%7D%7D"}]}}}"#,
            "InvalidConfig",
        ),
    ];
    for (cfg, reason) in cases {
        let e = child_error(cfg);
        assert_eq!(classified(&e), (*reason, Retry::Permanent), "{cfg}: {e}");
    }
    // The variant tells what failed; the message says it all, with no source().
    let e = child_error(cases[0].0);
    assert!(
        matches!(
            &e,
            ChildError::Fetch { path, error: FetchError::Remote(_) }
                if path == "$.ignition.config.merge.0"
        ),
        "{e:?}"
    );
    assert!(std::error::Error::source(&e).is_none());
    let e = child_error(cases[4].0);
    assert_eq!(
        e,
        ChildError::Invalid {
            path: "$.ignition.config.merge.0".into(),
            error: ValidationError {
                path: "$.storage.files.0.path".into(),
                message: "path not absolute".into()
            }
        }
    );
    assert_eq!(
        e.to_string(),
        "error at $.ignition.config.merge.0: child config is not valid: error at $.storage.files.0.path: path not absolute"
    );

    let too_deep = ChildError::TooDeep("$.ignition.config.replace".into());
    assert_eq!(
        classified(&too_deep),
        ("ChildConfigsTooDeep", Retry::Permanent)
    );
    let parse = ChildError::Parse {
        path: "$.ignition.config.merge.0".into(),
        error: ParseError::Empty,
    };
    assert_eq!(classified(&parse), ("EmptyConfig", Retry::Permanent));
    // An empty child, as written.
    let e =
        child_error(r#"{"ignition":{"version":"3.6.0","config":{"merge":[{"source":"data:,"}]}}}"#);
    assert_eq!(
        e,
        ChildError::Parse {
            path: "$.ignition.config.merge.0".into(),
            error: ParseError::Empty
        }
    );
    assert_eq!(
        e.to_string(),
        "error at $.ignition.config.merge.0: parsing child config: not a config (empty)"
    );
    assert_eq!(classified(&e), ("EmptyConfig", Retry::Permanent));
}

#[test]
fn child_configs_nest_at_most_ten_deep() {
    // A config that replaces itself with a copy of itself, eleven levels down.
    let mut cfg = r#"{"ignition":{"version":"3.3.0"}}"#.to_string();
    for _ in 0..12 {
        let url = format!("data:;base64,{}", base64_encode(cfg.as_bytes()));
        cfg = format!(
            r#"{{"ignition":{{"version":"3.3.0","config":{{"replace":{{"source":"{url}"}}}}}}}}"#
        );
    }
    let e = child_error(&cfg);
    assert!(matches!(e, ChildError::TooDeep(_)), "{e}");
    assert_eq!(classified(&e), ("ChildConfigsTooDeep", Retry::Permanent));
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}
