//! Unit tables for the resolver, the key order and the number formats (the golden file
//! checks whole documents against Go).

use super::*;
use crate::number::go_json_float;
use std::cmp::Ordering;

#[test]
fn key_order_is_yaml_v2_natural_order() {
    let mut keys = vec![
        "a10", "a2", "b", "a", "B", "_a", "10", "9", "a01", "a1", "é", "ab",
    ];
    keys.sort_by(|a, b| key_order(a, b));
    // `_` is neither letter nor digit: it compares as the number 0, before "9".
    assert_eq!(
        keys,
        [
            "_a", "9", "10", "B", "a", "a1", "a01", "a2", "a10", "ab", "b", "é"
        ]
    );
    assert_eq!(key_order("x", "x"), Ordering::Equal);
}

#[test]
fn resolution_table() {
    for (s, is_string) in [
        ("abc", true),
        ("", false),
        ("y", false),
        ("<<", true),
        ("0755", false),
        ("08", false),
        ("1_000", false),
        ("1e3", false),
        ("1e400", true),
        (".5", false),
        (".iNf", true),
        ("2024-01-02", false),
        ("2024-02-30", true),
        ("3.5.0", true),
        ("-", true),
        ("0x", true),
    ] {
        assert_eq!(resolves_to_string(s), is_string, "{s:?}");
    }
    assert!(is_base60_float("1:20"));
    assert!(!is_base60_float("1:60"));
}

#[test]
fn go_float_texts() {
    for (f, json, yaml) in [
        (1e6, "1000000", "1000000"),
        (1234567.5, "1234567.5", "1.2345675e+06"),
        (1e21, "1e+21", "1e+21"),
        (1e-7, "1e-7", "1e-07"),
        (0.5, "0.5", "0.5"),
        (-0.0, "-0", "0"),
    ] {
        assert_eq!(go_json_float(f), json, "{f}");
        let n = serde_json::Number::from_f64(f).expect("finite");
        assert_eq!(number(&n), yaml, "{f}");
    }
}
