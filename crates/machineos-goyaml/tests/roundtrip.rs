//! Property: what the emitter writes reads back, with another YAML implementation
//! (serde-saphyr), as the value it was given — for any data yaml.v2 can read (no refused
//! characters, no raw NEL, which yaml.v2 itself changes). U+2028/U+2029 are left out too:
//! line breaks to YAML 1.1 (yaml.v2 writes them as such), content to a YAML 1.2 reader; the
//! golden file checks them against Go.

use proptest::prelude::*;
use serde_json::{Map, Value};

fn text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        "Z",
        "0",
        "7",
        " ",
        "  ",
        "\n",
        "\t",
        "\r",
        ":",
        "#",
        "-",
        "---",
        "'",
        "\"",
        "\\",
        "[",
        "{",
        ",",
        "?",
        "|",
        ">",
        "&",
        "*",
        "!",
        "%",
        "@",
        "`",
        ".",
        "e",
        "é",
        "日",
        "😀",
        "\u{a0}",
        "\u{feff}",
        "\u{1}",
        "\u{1b}",
        "y",
        "true",
        "null",
        "~",
        "0x",
        "1.5",
        "2024-01-02",
        "1:20",
        "sha256:",
        "data:,",
        "lorem ipsum dolor sit amet ",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat())
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        text().prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        (-1e9f64..1e9).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Floats compare by value (yaml.v2 writes the shortest text that reads back exactly).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn emitted_yaml_reads_back_as_the_value(v in value()) {
        let yaml = machineos_goyaml::to_yaml(&v).expect("no refused characters in the strategy");
        let back: Value = serde_saphyr::from_str(&yaml)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        prop_assert!(same(&v, &back), "value {v}\nyaml:\n{yaml}\nread back {back}");
    }

    #[test]
    fn emitting_is_deterministic(v in value()) {
        prop_assert_eq!(machineos_goyaml::to_yaml(&v), machineos_goyaml::to_yaml(&v));
    }
}
