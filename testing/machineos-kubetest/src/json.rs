//! Small accessors over JSON objects that several modules share.

use serde_json::Value;

/// The strings of the array at JSON pointer `p` (non-strings skipped; none when absent).
pub fn strings_at(v: &Value, p: &str) -> Vec<String> {
    v.pointer(p)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}
