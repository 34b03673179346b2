//! Every public error classified for a controller: a stable reason valid as a Kubernetes
//! condition reason, permanent (nothing here does I/O), and a message that tells its whole
//! story without also exposing a cause as `source()`.

use machineos_diagnostics::{Retry, check_classified};
use machineos_ignition_spec2::{ParseError, Spec2Error, ValidateError, convert, validate};

#[test]
fn every_error_is_classified() {
    let parse = [
        (ParseError::Empty, "InvalidConfig"),
        (
            ParseError::Json {
                message: "EOF while parsing an object".into(),
                line: 1,
                column: 2,
            },
            "InvalidConfig",
        ),
        (
            ParseError::NotAConfig {
                path: "$.ignition".into(),
                message:
                    "json: cannot unmarshal string into Go value of type struct { Version string }"
                        .into(),
            },
            "InvalidConfig",
        ),
        (ParseError::InvalidVersion, "UnsupportedSpecVersion"),
        (
            ParseError::UnknownVersion {
                version: "2.3.0".into(),
            },
            "UnsupportedSpecVersion",
        ),
        (
            ParseError::NotSpec2 {
                version: "3.1.0".into(),
            },
            "UnsupportedSpecVersion",
        ),
        (
            ParseError::Invalid {
                path: "$.storage.files.0.mode".into(),
                report: "error at $.storage.files.0.mode: illegal file mode".into(),
            },
            "InvalidConfig",
        ),
    ];
    for (e, reason) in &parse {
        assert_eq!(check_classified(e, reason, Retry::Permanent), Ok(()));
        let wrapped = Spec2Error::Parse(e.clone());
        assert_eq!(check_classified(&wrapped, reason, Retry::Permanent), Ok(()));
        assert!(
            wrapped
                .to_string()
                .starts_with("failed to parse Ignition config: ")
        );
        assert_eq!(wrapped.path(), e.path());
        let wrapped = ValidateError::Parse(e.clone());
        assert_eq!(check_classified(&wrapped, reason, Retry::Permanent), Ok(()));
        assert_eq!(wrapped.to_string(), e.to_string());
    }
    let others: [(&dyn machineos_diagnostics::ClassifiedError, &str); 3] = [
        (
            &Spec2Error::UnsupportedUser {
                name: "bob".into(),
                path: "$.passwd.users.1".into(),
            },
            "InvalidConfig",
        ),
        (
            &Spec2Error::Unconvertible {
                path: "$.networkd.units".into(),
                reason: "config includes deprecated networkd section - use Files instead".into(),
            },
            "InvalidConfig",
        ),
        (
            &ValidateError::FileMode {
                file: "/a".into(),
                mode: 0o1777,
                path: "$.storage.files.0.mode".into(),
            },
            "InvalidConfig",
        ),
    ];
    for (e, reason) in others {
        assert_eq!(check_classified(e, reason, Retry::Permanent), Ok(()));
    }
}

#[test]
fn real_errors_are_classified() {
    let cases: &[(&str, &str)] = &[
        ("", "InvalidConfig"),
        ("{", "InvalidConfig"),
        ("[]", "InvalidConfig"),
        ("{}", "UnsupportedSpecVersion"),
        (
            r#"{"ignition":{"version":"2.3.0"}}"#,
            "UnsupportedSpecVersion",
        ),
        (
            r#"{"ignition":{"version":"3.0.0"}}"#,
            "UnsupportedSpecVersion",
        ),
        (
            r#"{"ignition":{"version":"2.2.0"},"systemd":{"units":[{"name":"x"}]}}"#,
            "InvalidConfig",
        ),
        (
            r#"{"ignition":{"version":"2.2.0"},"passwd":{"users":[{"name":"bob"}]}}"#,
            "InvalidConfig",
        ),
        (
            r#"{"ignition":{"version":"2.2.0"},"networkd":{"units":[{"name":"a.network"}]}}"#,
            "InvalidConfig",
        ),
    ];
    for (input, reason) in cases {
        match convert(input.as_bytes()) {
            Err(e) => assert_eq!(
                check_classified(&e, reason, Retry::Permanent),
                Ok(()),
                "{input}: {e}"
            ),
            Ok(c) => panic!("{input}: converted to {}", c.config),
        }
    }
    let e = validate(br#"{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/a","mode":2541}]}}"#);
    match e {
        Err(e) => assert_eq!(
            check_classified(&e, "InvalidConfig", Retry::Permanent),
            Ok(())
        ),
        Ok(w) => panic!("validated: {w:?}"),
    }
}
