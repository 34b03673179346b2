//! Every case of `tests/oracle/cases.json` against what the MCO's own code produced for it
//! (`tests/oracle/expected.json`, written by `tests/oracle/main.go`, which calls the MCO's
//! vendored Ignition and ign-converter packages as `ParseAndConvertConfig` and
//! `ValidateMachineConfig` do; see `tests/oracle/README.md`).
//!
//! A converted config must match key for key, in the MCO's order. An error must match
//! verbatim, except where Go's text depends on source positions: a refused spec 2 parse
//! must have the same prefix and the same report entries (their line and column replaced by
//! a JSON path here; Go lists unrecognized keys in random order, so those are compared as a
//! set), and a JSON syntax error only the same prefix (Go's scanner words its messages
//! differently).

use machineos_ignition_spec2::{Spec2Error, ValidateError, convert, validate};
use serde_json::Value;

const CASES: &str = include_str!("oracle/cases.json");
const EXPECTED: &str = include_str!("oracle/expected.json");

fn raw(input: &Value) -> Vec<u8> {
    match input {
        Value::String(s) => s.as_bytes().to_vec(),
        other => serde_json::to_vec(other).unwrap_or_default(),
    }
}

/// `(kind, message)` of each entry of one of our reports (`kind at path: message` lines).
fn our_entries(report: &str) -> Vec<(String, String)> {
    report
        .lines()
        .filter_map(|line| {
            let (kind, rest) = line.split_once(" at ")?;
            let (_, message) = rest.split_once(": ")?;
            Some((kind.to_string(), message.to_string()))
        })
        .collect()
}

fn go_entries(expected: &Value) -> Vec<(String, String)> {
    expected["report"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["kind"].as_str().unwrap_or_default().to_string(),
                        e["message"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn is_unrecognized((_, m): &(String, String)) -> bool {
    m.starts_with("Config has unrecognized key") || m.starts_with("Did you mean")
}

/// Same entries, in the same order but for the unrecognized keys, which Go lists in its
/// random map order.
fn same_entries(ours: &[(String, String)], go: &[(String, String)]) -> bool {
    let ordered = |v: &[(String, String)]| -> Vec<(String, String)> {
        v.iter().filter(|e| !is_unrecognized(e)).cloned().collect()
    };
    let mut a = ours.to_vec();
    let mut b = go.to_vec();
    a.sort();
    b.sort();
    a == b && ordered(ours) == ordered(go)
}

/// What the MCO's error text must be matched on; a mismatch, described.
fn check_error(
    name: &str,
    ours: &str,
    go: &str,
    report: &str,
    go_report: &[(String, String)],
) -> Option<String> {
    const V2_REPORT: &str =
        "parsing Ignition spec v2 failed with error: config is not valid\nReport: ";
    const V3_REPORT: &str =
        "parsing Ignition config spec v3 failed with error: config is not valid\nReport: ";
    let ok = if let Some(i) = go.find(V2_REPORT) {
        ours.starts_with(&go[..i + V2_REPORT.len()])
            && same_entries(&our_entries(report), go_report)
    } else if let Some(i) = go.find(V3_REPORT) {
        ours.starts_with(&go[..i + V3_REPORT.len()])
    } else {
        ours == go
    };
    let go_short: String = go.chars().take(300).collect();
    (!ok).then(|| {
        format!("{name}:\n  ours {ours:?}\n  MCO  {go_short:?}\n  MCO report {go_report:?}")
    })
}

fn parse_report(e: &machineos_ignition_spec2::ParseError) -> String {
    match e {
        machineos_ignition_spec2::ParseError::Invalid { report, .. } => report.clone(),
        _ => String::new(),
    }
}

/// The cases and the MCO's results: the committed ones, or (for a differential run, see
/// `tests/oracle/README.md`) those in `$MACHINEOS_SPEC2_ORACLE_DIR`.
fn load() -> (Vec<Value>, Vec<Value>) {
    let (cases, expected) = match std::env::var_os("MACHINEOS_SPEC2_ORACLE_DIR") {
        Some(dir) => {
            let dir = std::path::PathBuf::from(dir);
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            (read("cases.json"), read("expected.json"))
        }
        None => (CASES.to_string(), EXPECTED.to_string()),
    };
    (
        serde_json::from_str(&cases).unwrap_or_default(),
        serde_json::from_str(&expected).unwrap_or_default(),
    )
}

#[test]
fn matches_the_mco() {
    let (cases, expected) = load();
    assert_eq!(cases.len(), expected.len());
    assert!(cases.len() > 100);
    const DEDUPE: [&str; 4] = [
        "duplicate file ",
        "duplicate unit ",
        "Found duplicate unit ",
        "duplicate SSH public key found",
    ];
    let mut failures: Vec<String> = Vec::new();
    for (case, want) in cases.iter().zip(&expected) {
        let name = case["name"].as_str().unwrap_or_default();
        assert_eq!(want["name"].as_str(), Some(name));
        let input = raw(&case["input"]);
        let go_report = go_entries(want);

        match (convert(&input), want.get("ok"), want["error"].as_str()) {
            (Ok(got), Some(ok), None) => {
                let (ours, mco) = (
                    serde_json::to_string(&got.config).unwrap_or_default(),
                    serde_json::to_string(ok).unwrap_or_default(),
                );
                if ours != mco {
                    failures.push(format!("{name}:\n  ours {ours}\n  MCO  {mco}"));
                }
                // Our warnings are Ignition's (then the MCO's clean-up notes).
                let ours: Vec<(String, String)> = got
                    .warnings
                    .iter()
                    .filter(|w| !DEDUPE.iter().any(|d| w.message.starts_with(d)))
                    .map(|w| {
                        let kind = if w.message.starts_with("Did you mean") {
                            "info"
                        } else {
                            "warning"
                        };
                        (kind.to_string(), w.message.clone())
                    })
                    .collect();
                if !same_entries(&ours, &go_report) {
                    failures.push(format!(
                        "{name}: warnings\n  ours {ours:?}\n  MCO  {go_report:?}"
                    ));
                }
                // And the result is a config machineos-ignition accepts.
                let bytes = serde_json::to_vec(&got.config).unwrap_or_default();
                if let Err(e) = machineos_ignition::parse(&bytes) {
                    failures.push(format!(
                        "{name}: machineos-ignition refuses the result: {e}"
                    ));
                }
            }
            (Err(e), None, Some(go)) => {
                let report = match &e {
                    Spec2Error::Parse(p) => parse_report(p),
                    _ => String::new(),
                };
                failures.extend(check_error(name, &e.to_string(), go, &report, &go_report));
            }
            (got, _, _) => failures.push(format!("{name}:\n  ours {got:?}\n  MCO  {want}")),
        }

        match (validate(&input), want["validate"].as_str()) {
            (Ok(_), None) => {}
            (Err(e), Some(go)) => {
                let report = match &e {
                    ValidateError::Parse(p) => parse_report(p),
                    _ => String::new(),
                };
                failures.extend(check_error(name, &e.to_string(), go, &report, &go_report));
            }
            (got, go) => failures.push(format!("{name}: validate\n  ours {got:?}\n  MCO  {go:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
