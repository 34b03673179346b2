//! The golden test: every case of `tests/golden/goyaml.cases.jsonl` gives the bytes (or the
//! error) Go's sigs.k8s.io/yaml over gopkg.in/yaml.v2 2.4.0 gave for it, recorded in
//! `goyaml.expected.jsonl` by `tests/golden/gen.sh` (a Go program built from the MCO's
//! vendored libraries). Regenerate both with `gen_cases.py` and `gen.sh`.

use serde_json::Value;

fn lines(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}: {l}")))
        .collect()
}

#[test]
fn every_golden_case_is_byte_identical_to_go() {
    let cases = lines("goyaml.cases.jsonl");
    let expected = lines("goyaml.expected.jsonl");
    assert_eq!(cases.len(), expected.len(), "regenerate the expected file");
    assert!(cases.len() > 1500, "the corpus shrank: {}", cases.len());
    let mut failures = Vec::new();
    let (mut documents, mut errors) = (0, 0);
    for (i, (case, want)) in cases.iter().zip(&expected).enumerate() {
        let got = machineos_goyaml::to_yaml(&case["value"]);
        match (want.get("error").and_then(Value::as_str), got) {
            (None, Ok(yaml)) => {
                documents += 1;
                if yaml != want["yaml"].as_str().unwrap_or_default() {
                    failures.push(format!(
                        "case {} {}:\n--- go\n{}--- machineos\n{yaml}",
                        i + 1,
                        case["value"],
                        want["yaml"].as_str().unwrap_or_default()
                    ));
                }
            }
            (Some(go), Err(e)) => {
                errors += 1;
                let ours = e.to_string();
                if !ours.starts_with(go) {
                    failures.push(format!(
                        "case {} {}: go {go:?}, machineos {ours:?}",
                        i + 1,
                        case["value"]
                    ));
                }
            }
            (go, ours) => failures.push(format!(
                "case {} {}: go {go:?}, machineos {ours:?}",
                i + 1,
                case["value"]
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        documents > 1500 && errors > 50,
        "{documents} documents, {errors} errors"
    );
}
