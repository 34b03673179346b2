//! Small serde and schema helpers shared by the kinds: Go's decoding leniencies (`null` for a
//! list) and the schema fragments kube-derive cannot express from types alone.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};

/// Decode `null` as the default value, as Go decodes `null` into a nil slice or zero value.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// For `skip_serializing_if`: Go's `omitempty` on a bool.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// For `skip_serializing_if`: Go's `omitempty` on an integer.
pub(crate) fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

/// For `skip_serializing_if`: Go's `omitempty` on an integer.
pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// Schema of a `runtime.RawExtension` holding an object whose fields the API server keeps
/// untouched (`x-kubernetes-preserve-unknown-fields`), as the MCO declares `spec.config`.
pub(crate) fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
