//! The rendered config as the MCO stores it and the rendered name as the MCO gives it,
//! against Go: each spec of `tests/golden/render-name.cases.jsonl` (every field of Ignition's
//! v3_5 schema, random subsets, zero and empty values) went through a Go program built from
//! the MCO's vendored libraries (`machineos-goyaml/tests/golden/gen.sh`), which decoded its
//! config into Ignition's Go types, re-encoded it, and hashed the spec as
//! `pkg/controller/render/hash.go` does. Regenerate with `gen_cases.py` and that `gen.sh`.

use machineos_api::v1::MachineConfigSpec;
use machineos_render::go_json::{rendered_hash, shape_config};
use serde_json::Value;

fn lines(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

#[test]
fn configs_and_names_are_the_mcos() {
    let cases = lines("render-name.cases.jsonl");
    let expected = lines("render-name.expected.jsonl");
    assert_eq!(cases.len(), expected.len(), "regenerate the expected file");
    assert!(cases.len() > 150, "the corpus shrank: {}", cases.len());
    for (i, (case, want)) in cases.iter().zip(&expected).enumerate() {
        let mut spec: MachineConfigSpec =
            serde_json::from_value(case["spec"].clone()).expect("a spec");
        let model = spec.config.take().expect("every case has a config");
        let shaped = shape_config(&model);
        assert_eq!(
            Value::Object(shaped.clone()),
            want["config"],
            "case {}: config as Go's types encode it",
            i + 1
        );
        spec.config = Some(shaped);
        assert_eq!(
            rendered_hash(&spec).expect("Go named it"),
            want["hash"].as_str().expect("a hash"),
            "case {}: {}",
            i + 1,
            case["spec"]
        );
    }
}
